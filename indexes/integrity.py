"""Keeping an index folder whole: parts checked against each other, a crash-safe final swap, one writer.

* Every part of a bundle (`passages/`, `bm25/`, `dense/`) is recorded in the bundle manifest with its row
  count and, per file, its size, a digest of its first and last MiB (`sample`) and its full SHA-256. Opening
  a part checks sizes and samples (a few reads, whatever the index size); `run_qa.py verify-index DIR` checks
  full digests and row counts. A part copied from another index, truncated or replaced is refused with one
  line naming the part and the fix.
* `odqa.core.atomic.publish_folder` (also behind every `atomic_folder`) swaps a finished build in place:
  fsync of every file and folder first, then rename the old folder away, rename the new one in, fsync the
  parent. A crash between the two renames leaves
  `.NAME.old-PID` / `.NAME.building-PID`; `recover_swap` (run before every open and build) puts back the
  finished build (it holds its `manifest.json`, written last) or else the old index, and removes leftovers
  of dead processes.
* `build_lock` holds an exclusive `flock` on `.NAME.lock` beside `--out`, so a second writer is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

from odqa.core.atomic import fsync_dir
from odqa.core.errors import IndexMismatchError, OdqaError

SAMPLE_BYTES = 1 << 20
MANIFEST = "manifest.json"
_SKIP = re.compile(r"^\.tantivy-.*\.lock$|^\.managed\.json$")  # tantivy rewrites these on open


# ---- per-file digests ---------------------------------------------------------------------------------
def _sample_digest(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        digest.update(f.read(SAMPLE_BYTES))
        if size > 2 * SAMPLE_BYTES:
            f.seek(size - SAMPLE_BYTES)
            digest.update(f.read(SAMPLE_BYTES))
    return digest.hexdigest()[:16]


def _full_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def part_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST and not _SKIP.match(p.name))


def describe_part(folder: str | Path, count: int) -> dict:
    """What the bundle manifest records of one part: its rows and every data file's size and digests."""
    folder = Path(folder)
    files = {}
    for path in part_files(folder):
        size = path.stat().st_size
        files[str(path.relative_to(folder))] = {"size": size, "sample": _sample_digest(path, size),
                                                "sha256": _full_digest(path)}
    return {"count": int(count), "files": files}


def check_part(folder: str | Path, recorded: dict | None, rows: int | None, full: bool = False) -> None:
    """Raise IndexMismatchError when `folder` is not the part recorded in the bundle manifest.

    `rows`: the row count the part reports now (passages, vectors, BM25 documents), or None when unknown."""
    folder = Path(folder)
    name = f"{folder.parent.name}/{folder.name}"
    fix = f"rebuild the index with `run_qa.py index --corpus CORPUS --out {folder.parent}`"
    if not recorded:
        return  # an index built before parts were recorded: only the cheaper checks of its caller apply
    if rows is not None and rows != recorded["count"]:
        raise IndexMismatchError(f"index part {name} holds {rows} rows but the index was built with "
                                 f"{recorded['count']}; it was replaced or damaged: {fix}")
    for rel, info in recorded["files"].items():
        path = folder / rel
        if not path.is_file():
            raise IndexMismatchError(f"index part {name} lacks {rel}; it was removed or damaged: {fix}")
        size = path.stat().st_size
        if size != info["size"]:
            raise IndexMismatchError(f"index part {name}: {rel} has {size} bytes, built with {info['size']}; "
                                     f"it was replaced or truncated: {fix}")
        if _sample_digest(path, size) != info["sample"] or (full and _full_digest(path) != info["sha256"]):
            raise IndexMismatchError(f"index part {name}: {rel} differs from the file the index was built "
                                     f"with (another index's file, or damaged): {fix}")


# ---- crash-safe swap ----------------------------------------------------------------------------------
def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(target: Path, kind: str) -> list[tuple[Path, int]]:
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.{kind}-(\d+)$")
    found = []
    if target.parent.is_dir():
        for p in target.parent.iterdir():
            m = pattern.match(p.name)
            if m:
                found.append((p, int(m.group(1))))
    return found


def recover_swap(target: str | Path) -> str | None:
    """Finish or undo a swap that a crashed process left half done; returns what was done, if anything."""
    target = Path(target)
    building = [p for p, pid in _leftovers(target, "building") if not _pid_alive(pid)]
    old = [p for p, pid in _leftovers(target, "old") if not _pid_alive(pid)]
    note = None
    if not target.exists():
        finished = [p for p in building if (p / MANIFEST).is_file()]
        if finished:
            finished[0].rename(target)
            building.remove(finished[0])
            note = f"finished an interrupted swap: the new index built in {finished[0].name} is now {target}"
        elif old:
            old[0].rename(target)
            old.remove(old[0])
            note = f"undid an interrupted swap: the previous index is back in {target}"
        if note:
            fsync_dir(target.parent)
    for leftover in building + old:
        shutil.rmtree(leftover, ignore_errors=True)
    return note


# ---- one writer ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def build_lock(target: str | Path) -> Iterator[None]:
    """An exclusive lock on `.NAME.lock` beside `target` for the whole build; a second writer is refused."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    path = target.with_name(f".{target.name}.lock")
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            f.seek(0)
            holder = f.read().strip() or "?"
            raise OdqaError(f"another build is writing {target} (pid {holder}); wait for it to finish or "
                            "choose another --out") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)
