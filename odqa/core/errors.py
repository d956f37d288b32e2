"""User-facing errors: the CLI prints the message on one line and exits with status 2, no traceback."""

import errno
import os
import re


class OdqaError(Exception):
    """A problem with the user's input or setup. The message names the problem and the fix."""


class DataFormatError(OdqaError):
    """A corpus, question or training file that cannot be read."""


class IndexMismatchError(OdqaError):
    """An index that does not belong to this corpus, encoder or backend."""


class DiskFullError(OdqaError):
    """A write that found no room: the disk or quota is full, or the file-size limit was reached."""


# ENOSPC (disk full), EDQUOT (quota), EFBIG (file-size limit)
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a write that found no room. Rust libraries (tantivy, safetensors) pass IO errors up as
    exception text ending in "(os error N)", so their number is read from the message."""
    if isinstance(exc, DiskFullError) or isinstance(exc, OSError) and exc.errno in _NO_ROOM:
        return True
    if isinstance(exc, Exception):  # Rust-backed writers (tantivy, safetensors) raise their own exception types
        return any(f"os error {number})" in str(exc) for number in _NO_ROOM)
    return False


def no_room_reason(exc: BaseException) -> str:
    """The system's words for a write that found no room, e.g. "No space left on device"."""
    while isinstance(exc, DiskFullError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return getattr(exc, "strerror", None) or str(exc).splitlines()[0][:200]


# ---- OS errors a user can cause, in one line ------------------------------------------------------------
# What each errno a path, a permission or another process can cause means, and what to do about it. An OSError
# of another errno (EBADF, EFAULT, EINVAL...) is odqa's own mistake and keeps its traceback.
_OS_CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOENT: ("not found", "check the path"),
    errno.ELOOP: ("a symbolic link on the way leads back to itself (a loop)", "name a real place"),
    errno.ENAMETOOLONG: (
        "the name is too long for the filesystem (at most 255 bytes a name and 4,096 a path)",
        "choose a shorter path",
    ),
    errno.EACCES: ("permission denied (not yours, or read-only)", "choose a place you may use, or fix its mode"),
    errno.EPERM: ("operation not permitted", "choose a place you may use, or fix its mode"),
    errno.EISDIR: ("is a folder where a file is expected", "name a file"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "choose another path"),
    errno.EROFS: ("on a read-only filesystem", "choose a writable place"),
    errno.EEXIST: ("already exists (another process may have made it meanwhile)", "rerun, or write elsewhere"),
    errno.ENOTEMPTY: (
        "a folder that is not empty (another process may be writing it)",
        "wait for the other process, or write elsewhere",
    ),
    errno.EBUSY: ("in use by another process or mounted there", "choose another path"),
    errno.ETXTBSY: ("in use by a running program", "choose another path"),
    errno.EXDEV: ("on another filesystem than its folder's work files", "write within one filesystem"),
    errno.EMFILE: ("too many files open in this process", "raise `ulimit -n`, then rerun"),
    errno.ENFILE: ("too many files open on the system", "close some programs, then rerun"),
    errno.EIO: ("an input/output error (a failing disk or connection)", "check the device, then rerun"),
    errno.ENXIO: ("no device or reader behind it", "choose a file"),
    errno.ENODEV: ("no such device", "choose a file"),
    errno.ESTALE: ("a stale network file handle", "remount or rerun"),
    errno.EOVERFLOW: ("too large for this system to read", "choose another file"),
    errno.ESPIPE: ("a pipe or device that cannot seek", "give a regular file"),
}
for _number in _NO_ROOM:
    _OS_CAUSES[_number] = ("no room left on the device", "free some space or write elsewhere, then rerun")


def os_error_cause(exc: BaseException) -> str | None:
    """The cause of an OS error a user can cause, in words ("no room left on the device"), else None."""
    number = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if number is None and isinstance(exc, Exception):
        found = _RUST_OS_ERROR.search(str(exc))
        number = int(found.group(1)) if found else None
    return _OS_CAUSES[number][0] if number in _OS_CAUSES else None


def os_error_line(exc: BaseException) -> str | None:
    """One line naming the path and the cause of an OS error a user can cause (a missing place, a link loop, a
    name too long, no permission, a read-only disk, another process's file...), with the fix; None for any other
    exception (a bug keeps its traceback). Rust libraries (tantivy) pass theirs as text ending "(os error N)";
    Python before 3.13 raises a link loop met by Path.resolve as RuntimeError("Symlink loop from ...")."""
    number = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    filename = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
    other = getattr(exc, "filename2", None) if isinstance(exc, OSError) else None
    if number is None and isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop from "):
        number, filename = errno.ELOOP, str(exc).removeprefix("Symlink loop from ").strip("'")
    if number is None and isinstance(exc, Exception):
        found = _RUST_OS_ERROR.search(str(exc))
        if found:
            number = int(found.group(1))
    if number not in _OS_CAUSES:
        return None
    cause, fix = _OS_CAUSES[number]
    where = f"{os.fsdecode(filename)}" if filename is not None else ""
    if other is not None:
        where += f" -> {os.fsdecode(other)}"
    if not where:  # a library's error without a path: its own words name what it was doing
        where = " ".join(str(exc).split())[:300]
    return f"{_shortened(where)}: {cause}; {fix}"


def _shortened(path: str, keep: int = 160) -> str:
    """A path of thousands of characters (ENAMETOOLONG) shown by its ends."""
    return path if len(path) <= 2 * keep else f"{path[:keep]}...{path[-keep:]} ({len(path):,} characters)"


_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
