"""User-facing errors: the CLI prints the message on one line and exits with status 2, no traceback."""

import errno


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
