"""Atomic file and folder writes: an interrupted write never leaves a truncated file or half a folder where a
good one was."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from odqa.core.errors import DiskFullError, is_disk_full, no_room_reason


@contextlib.contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Write to a temporary sibling file; on success it replaces `target`, on failure it is removed, so an
    interrupted write never leaves a truncated file where a good one was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        yield tmp
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        _name_the_full_disk(exc, target)
        raise
    os.replace(tmp, target)


def write_json_atomic(path: Path, data: Any) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False))


@contextlib.contextmanager
def atomic_folder(target: str | Path) -> Iterator[Path]:
    """Build into a temporary sibling folder; on success swap it in place of `target`, on failure remove it.

    The old folder (if any) is kept until the new one is complete, so a failed build never damages it.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _name_the_full_disk(exc, target)
        raise
    publish_folder(tmp, target, guard_readers=False)  # checkpoints, exports: no lock file beside each


def _name_the_full_disk(exc: BaseException, target: Path) -> None:
    if is_disk_full(exc) and not isinstance(exc, DiskFullError):
        raise DiskFullError(f"no room left on the device to write {target} ({no_room_reason(exc)}); nothing was "
                            "replaced: free some space or write elsewhere, then rerun") from exc


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
    for root, dirs, files in os.walk(folder):
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
            f.write(memoryview(data.reshape(-1)).cast("B"))
            written += data.nbytes
    if written != expected:
        Path(path).unlink(missing_ok=True)
        raise ValueError(f"{path}: wrote {written} bytes of vectors where its shape {tuple(shape)} holds {expected}")
