"""Atomic file and folder writes: an interrupted write never leaves a truncated file or half a folder where a
good one was."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import shutil
import stat
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from odqa.core import strict_json
from odqa.core.errors import DiskFullError, OdqaError, is_disk_full, no_room_reason


@contextlib.contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Write to a temporary sibling file; on success it replaces `target`, on failure it is removed, so an
    interrupted write never leaves a truncated file where a good one was.

    What is replaced is a regular file: a symbolic link is followed (the file it names gets the new content and the
    link stays), and a device, a pipe or a stream of this process (/dev/null, a FIFO, /dev/stdout) is written in
    place, never replaced by a file (`output_place`)."""
    target = Path(target)
    place, in_place = output_place(target)
    if in_place:
        try:
            yield place
        except BaseException as exc:
            _name_the_full_disk(exc, target)
            raise
        return
    place.parent.mkdir(parents=True, exist_ok=True)
    # the process and a count in the name: two writers of one file never share a temporary file
    tmp = place.with_name(f".{place.name}.{os.getpid()}-{next(_TEMP_NUMBERS)}.tmp")
    try:
        yield tmp
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        _name_the_full_disk(exc, target)
        raise
    try:
        os.replace(tmp, place)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_TEMP_NUMBERS = itertools.count()
# where a symbolic link leads to a stream (/dev/stdout -> /proc/self/fd/1): written through, in place
_STREAM_LINKS = ("/proc/", "/dev/fd/")


def _own_descriptor(path: str) -> int | None:
    """N where `path` names this process's open file N (/proc/self/fd/N, /dev/fd/N, /proc/PID/fd/N), else None."""
    parts = path.split("/")
    own = ("self", "thread-self", str(os.getpid()))
    if len(parts) == 5 and parts[:2] == ["", "proc"] and parts[2] in own and parts[3] == "fd" and parts[4].isdigit():
        return int(parts[4])
    if len(parts) == 4 and parts[:3] == ["", "dev", "fd"] and parts[3].isdigit():
        return int(parts[3])
    return None


class DescriptorPath(type(Path())):  # type: ignore[misc]  # PosixPath, which pathlib picks at run time
    """The path of one of this process's open files (`--trec-run /dev/stdout`). Opened, it writes through a
    duplicate of that descriptor, after whatever the process printed there so far and sharing its offset: opening
    the path anew would start at the file's beginning (a `> out.txt` redirect) and be overwritten by the rest of
    standard output."""

    descriptor: int

    def open(self, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        binary = "b" in mode
        return os.fdopen(
            os.dup(self.descriptor),
            mode.replace("x", "w"),
            buffering,
            None if binary else (encoding or "utf-8"),
            None if binary else errors,
            None if binary else newline,
        )


def output_place(target: Path) -> tuple[Path, bool]:
    """(the path to write, whether to write it in place) for an output file `target`: a device, a pipe, a socket
    or one of this process's open files (/dev/stdout, /proc/self/fd/N: a `DescriptorPath`) is written in place
    (renaming a file over it would replace /dev/null for every process, or write beside a terminal or a redirect);
    any other symbolic link is followed to the file it names, so that the file, not the link, is replaced."""
    hop, seen = os.path.abspath(target), 0
    while seen < 40:
        descriptor = _own_descriptor(hop)
        if descriptor is not None:
            place = DescriptorPath(target)
            place.descriptor = descriptor
            return place, True
        if not os.path.islink(hop):
            break
        link = os.readlink(hop)
        hop = os.path.normpath(link if os.path.isabs(link) else os.path.join(os.path.dirname(hop), link))
        if hop.startswith(_STREAM_LINKS) and _own_descriptor(hop) is None:
            return target, True  # another process's stream: written where it is
        seen += 1
    try:
        found = os.stat(target)  # the link followed
    except FileNotFoundError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        if stat.S_ISDIR(found.st_mode):
            raise OdqaError(f"{target} is a folder; name a file to write")
        return target, True
    return (Path(os.path.realpath(target)) if os.path.islink(target) else target), False


def write_json_atomic(path: Path, data: Any) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(strict_json.dumps(data, indent=2, ensure_ascii=False))


@contextlib.contextmanager
def atomic_folder(target: str | Path) -> Iterator[Path]:
    """Build into a temporary sibling folder; on success swap it in place of `target`, on failure remove it.

    The old folder (if any) is kept until the new one is complete, so a failed build never damages it. The
    whole write holds `writer_lock(target)`: a second writer of the same folder is refused, never interleaved.
    """
    target = Path(target)
    if target.is_symlink():
        target = Path(os.path.realpath(target))  # replace what the link points to, and keep the link
    with writer_lock(target, flag=None):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.building-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            yield tmp
        except BaseException as exc:
            with contextlib.suppress(OSError):  # the error that stopped the write is the one to report
                remove_tree(tmp)
            _name_the_full_disk(exc, target)
            raise
        publish_folder(tmp, target, guard_readers=False)  # checkpoints, exports: no swap-lock file beside each


def remove_tree(folder: str | Path, tries: int = 5) -> None:
    """Remove `folder` and everything in it, where files may vanish or appear while it goes: a library's worker
    threads (tantivy's, after a failed commit) still delete and write their temporary files there for a moment.
    A file already gone is what removing it wanted; any other error (a permission, a read-only disk) is raised."""

    def gone_already(_function, _path, exc) -> None:
        exc = exc[1] if isinstance(exc, tuple) else exc  # onerror's exc_info before Python 3.12, onexc's exception
        if not isinstance(exc, FileNotFoundError):
            raise exc

    folder = Path(folder)
    for attempt in range(tries):
        if not folder.exists() and not folder.is_symlink():
            return
        try:
            if sys.version_info >= (3, 12):
                shutil.rmtree(folder, onexc=gone_already)
            else:
                shutil.rmtree(folder, onerror=gone_already)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY or attempt == tries - 1:
                raise  # a folder still filling up after the last try
            time.sleep(0.05 * (attempt + 1))


def tree_bytes(folder: str | Path) -> int:
    """The bytes of the files under `folder`, counting none that vanish while it is walked."""
    total = 0
    for path in Path(folder).rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _name_the_full_disk(exc: BaseException, target: Path) -> None:
    if is_disk_full(exc) and not isinstance(exc, DiskFullError):
        raise DiskFullError(
            f"no room left on the device to write {target} ({no_room_reason(exc)}); nothing was "
            "replaced: free some space or write elsewhere, then rerun"
        ) from exc


# ---- one writer per output folder -----------------------------------------------------------------------
# Every writer of an output folder (index, build-kb, train-*, export, the demo corpus's first-use build, any
# atomic_folder) holds an exclusive flock on `.NAME.lock` beside it for the whole write: a second writer is
# refused in one line naming the folder and the process holding it, or (the demo build) waits for it. The file
# is removed when the lock is released (a new holder checks that the file it locked is still the one at the
# path), so no lock file stays beside a finished folder.
WRITER_LOCK_POLL_S = 0.2
_held: dict[Path, list] = {}  # folder -> [thread id, depth, whether writers nested in the holder may enter]
_held_guard = threading.Lock()


def writer_lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


def _lock_key(target: str | Path) -> Path:
    """The folder a writer names, as every writer of it names it: absolute, a symbolic link followed (the build
    replaces what the link points to)."""
    key = Path(os.path.abspath(target))
    try:
        return key.resolve() if key.is_symlink() else key
    except (RuntimeError, OSError):  # a link loop: the writer itself says so
        return key


def _this_command() -> str:
    """The holder's command for a refusal: `odqa index`, `python -c` (never its arguments: paths, not secrets,
    but long)."""
    argv = sys.argv or [""]
    if argv[0] in ("-c", ""):
        return "python -c" if argv[0] else "python"
    name = os.path.basename(argv[0])
    if name in ("__main__.py", "cli.py"):  # python -m PACKAGE, python -m odqa.cli
        name = os.path.basename(os.path.dirname(argv[0])) or name
    if name == "run_qa.py":
        name = "odqa"
    command = next((a for a in argv[1:] if not a.startswith("-")), "") if name == "odqa" else ""
    return f"{name} {command}".strip()[:80]


# the lock file's third line where its holder lets worker processes write folders inside its own
PARTS_BY_WORKERS = "parts written by workers"


def _lock_lines(fd: int) -> list[str]:
    """The lines of a writer lock file: the holder's pid, its command, then what it lets others do."""
    try:
        return os.pread(fd, 400, 0).decode("utf-8", "replace").split("\n")
    except OSError:
        return []


def _holder(fd: int) -> str:
    text = _lock_lines(fd)
    pid = text[0].strip() if text and text[0].strip().isdigit() else "?"
    command = text[1].strip() if len(text) > 1 and text[1].strip() else ""
    return f"pid {pid}" + (f", `{command}`" if command else "")


def _say_parts_by_workers(lock: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(lock, os.O_RDWR)
        try:
            lines = _lock_lines(fd)
            if lines and PARTS_BY_WORKERS not in lines[2:]:
                os.pwrite(fd, f"{lines[0]}\n{lines[1] if len(lines) > 1 else ''}\n{PARTS_BY_WORKERS}\n".encode(), 0)
        finally:
            os.close(fd)


def _admits_workers(fd: int) -> bool:
    return PARTS_BY_WORKERS in _lock_lines(fd)[2:]


def _refusal(
    target: Path, holder: str, flag: str | None, who: str, waited: float = 0.0, fix: str | None = None
) -> OdqaError:
    waiting = f", still after {waited:.0f} s" if waited else ""
    fix = fix or "wait for it to finish or " + (f"choose another {flag}" if flag else "write elsewhere")
    return OdqaError(f"{who} is writing {target} ({holder}{waiting}); {fix}")


def _missing_parents(folder: Path) -> list[Path]:
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]  # outermost first


@contextlib.contextmanager
def writer_lock(
    target: str | Path,
    flag: str | None = "--out",
    wait_s: float = 0.0,
    nested: bool = False,
    who: str = "another odqa process",
    on_wait=None,
    fix: str | None = None,
    parts_by_workers: bool = False,
) -> Iterator[None]:
    """Hold the one-writer lock of the output folder `target` (`.NAME.lock` beside it) while the block runs.

    Held by another process (or another thread), the lock is refused at once with an OdqaError naming the folder,
    the holder's pid and command, and the fix (`flag`: the option that named the folder); with `wait_s`, it is
    waited for that long first (`on_wait(holder)` is called once when the wait starts; `fix`: what the refusal
    then says to do). `nested`: writers this
    thread runs inside the block may take the same folder's lock (a command that holds its --out while the
    library writes it); without it, a nested writer of the same folder is refused as a second writer. Folders
    created on the way to the lock file are removed again where the block left them empty. `parts_by_workers`:
    other processes this one hands parts to (a sharded build's Ray workers) may write folders inside `target`
    while the lock is held; the lock file says so, for them to read."""
    key = _lock_key(target)
    me = threading.get_ident()
    with _held_guard:
        entry = _held.get(key)
        if entry is not None and entry[0] == me:
            if not entry[2]:
                raise _refusal(key, f"pid {os.getpid()}, this process", flag, who)
            entry[1] += 1
            reentered = True
            if parts_by_workers:  # the outer block wrote the lock file without the line
                _say_parts_by_workers(writer_lock_path(key))
        else:
            reentered = False
    if reentered:
        assert entry is not None  # this thread's own entry, found above
        try:
            yield
        finally:
            with _held_guard:
                entry[1] -= 1
        return

    path = writer_lock_path(key)
    created = _missing_parents(key.parent)
    started = None
    while True:
        key.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # a releasing writer removed the empty folder on the way: make it again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            if holder.startswith("pid ?"):  # the holder is writing its pid this moment
                time.sleep(0.05)
                holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                # a filesystem without flock (some network mounts): written unlocked, as before the lock
                try:
                    yield
                finally:
                    _remove_empty(created)
                return
            now = time.monotonic()
            if started is None:
                started = now
                if wait_s > 0 and on_wait is not None:
                    on_wait(holder)
            if now - started >= wait_s:
                _remove_empty(created)
                raise _refusal(key, holder, flag, who, now - started if wait_s > 0 else 0.0, fix) from None
            time.sleep(WRITER_LOCK_POLL_S)
            continue
        try:  # the file locked must still be the one at the path (a releasing holder unlinks it)
            here = os.stat(path)
            mine = os.fstat(fd)
            current = (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        with contextlib.suppress(OSError):  # the holder's name is for messages: a full disk must not fail the lock
            os.ftruncate(fd, 0)
            admits = f"{PARTS_BY_WORKERS}\n" if parts_by_workers else ""
            os.pwrite(fd, f"{os.getpid()}\n{_this_command()}\n{admits}".encode(), 0)
        # a folder inside another's output (or holding one) is written by neither: the outer one's swap would
        # delete the inner one's work, the inner one's would break the outer one. Checked with this lock held, so
        # of two starting together at least one sees the other
        around = _nested_writer(key)
        if around is not None:
            folder, holder = around
            relation = "lies inside" if key in folder.parents else "holds"
            raise OdqaError(
                f"another odqa process is writing {folder} ({holder}), which {relation} {key}: one output inside "
                f"another is lost when either is swapped in; wait for it to finish or write "
                f"{flag + ' ' if flag else ''}elsewhere, outside it"
            )
        with _held_guard:
            _held[key] = [me, 0, nested]
        yield
    finally:
        with _held_guard:
            _held.pop(key, None)
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still held: a writer waiting on this file finds it gone and opens a new one
        os.close(fd)
        _remove_empty(created)


# how deep, and through how many entries, a writer looks inside its folder for another's output in progress
NESTED_SCAN_DEPTH = 3
NESTED_SCAN_ENTRIES = 5000


def _nested_writer(key: Path) -> tuple[Path, str] | None:
    """(the folder, its holder) of an output folder around `key` or inside it that another writer holds now
    (its lock file is locked), else None. Folders this thread holds are its own nesting (a build's parts).
    Inside `key`, lock files are looked for a few levels deep and through a bounded number of entries."""
    me = threading.get_ident()
    with _held_guard:
        mine = {folder for folder, entry in _held.items() if entry[0] == me}
    for folder in key.parents:
        if folder.parent == folder:
            break
        if folder not in mine:
            holder = _held_by_another(writer_lock_path(folder), admitting_workers=False)
            if holder:
                return folder, holder
    if not key.is_dir():
        return None
    seen = 0
    for root, dirs, files in os.walk(key):
        depth = len(Path(root).relative_to(key).parts)
        if depth >= NESTED_SCAN_DEPTH:
            dirs.clear()
        for name in files:
            if name.startswith(".") and name.endswith(".lock"):
                folder = Path(root) / name[1 : -len(".lock")]
                holder = None if folder in mine else _held_by_another(Path(root) / name)
                if holder:
                    return folder, holder
        seen += len(dirs) + len(files)
        if seen > NESTED_SCAN_ENTRIES:
            break
    return None


def _held_by_another(lock: Path, admitting_workers: bool = True) -> str | None:
    """The holder ("pid N, `command`") of the writer lock file `lock` where another open of it holds it, else
    None (no such file, or nobody holds it; with `admitting_workers` False, a holder that hands parts of its
    folder to worker processes: `writer_lock(parts_by_workers=True)`). Never creates the file."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            if not admitting_workers and _admits_workers(fd):
                return None
            return _holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):  # innermost first; a folder something was written into stays
        with contextlib.suppress(OSError):
            folder.rmdir()


# How long a swap waits for the readers opening the old folder, and a reader for a swap, before going on
# without the lock (the readers' retries remain): a stuck or starving lock delays, never blocks
SWAP_LOCK_WAIT_S = {"exclusive": 60.0, "shared": 10.0}


def swap_lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.swap-lock")


@contextlib.contextmanager
def swap_lock(target: str | Path, exclusive: bool = False) -> Iterator[bool]:
    """Readers hold it shared while they open a folder's parts and a publish holds it exclusive for its renames,
    so an open never meets the folder half swapped, however slowly either side runs. Readers never create the
    lock file (a read-only place; a folder published before it existed): there they go on unlocked. Yields
    whether the lock is held."""
    path = swap_lock_path(Path(target))
    try:
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if exclusive else os.O_RDONLY, 0o644)
    except OSError:
        yield False
        return
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + SWAP_LOCK_WAIT_S["exclusive" if exclusive else "shared"]
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    held = False
                    break
                time.sleep(0.002)
        yield held
    finally:
        os.close(fd)  # releases the lock


def publish_folder(tmp: Path, target: Path, crash_after: str | None = None, guard_readers: bool = True) -> None:
    """Put the finished folder `tmp` in place of `target`, flushed to disk first: a crash at any point leaves
    the old or the new folder in place, or both beside it as `.NAME.old-PID` / `.NAME.building-PID`, which
    `indexes.integrity.recover_swap` settles on the next open. `guard_readers`: swap under `swap_lock` (a
    `.NAME.swap-lock` file beside it), for folders other processes open while they are rebuilt (indexes).

    `crash_after` is for the fault-injection tests only: "fsync" or "rename-away" exits the process there."""
    fsync_tree(tmp)
    if crash_after == "fsync":
        os._exit(137)
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    with swap_lock(target, exclusive=True) if guard_readers else contextlib.nullcontext():
        if target.exists():
            target.rename(old)
            fsync_dir(target.parent)
        if crash_after == "rename-away":
            os._exit(137)
        tmp.rename(target)
        fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def fsync_tree(folder: Path) -> None:
    """Flush every file and folder under `folder` to disk, so a rename that publishes it survives a crash."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(root))


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_npy(path: str | Path, array: np.ndarray) -> None:
    """`np.save` through Python's own file writes: a full disk raises OSError(ENOSPC) naming the file (numpy's C
    writer raises a bare "N requested and M written" without an errno, which reads as a bug)."""
    array = np.ascontiguousarray(array)
    write_npy_blocks(path, array.dtype, array.shape, [array])


def write_npy_blocks(path: str | Path, dtype, shape: tuple[int, ...], blocks: Iterable[np.ndarray]) -> None:
    """A .npy file of `shape` written block after block (C order), never through a memory map: a memory-mapped
    write that finds the disk full kills the process with SIGBUS, where a write raises ENOSPC."""
    dtype = np.dtype(dtype)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    expected = int(np.prod(shape)) * dtype.itemsize
    written = 0
    with open(path, "wb") as f:
        try:  # the header np.save writes (version 1.0 where it fits): the same bytes for the same array
            np.lib.format.write_array_header_1_0(f, header)
        except ValueError:
            f.seek(0)
            f.truncate()
            np.lib.format.write_array_header_2_0(f, header)
        for block in blocks:
            data = np.ascontiguousarray(block, dtype=dtype)
            f.write(memoryview(data.reshape(-1)).cast("B"))  # type: ignore[arg-type]  # numpy's stubs: buffer protocol on 3.12+ only
            written += data.nbytes
    if written != expected:
        Path(path).unlink(missing_ok=True)
        raise ValueError(f"{path}: wrote {written} bytes of vectors where its shape {tuple(shape)} holds {expected}")
