"""Keeping an index folder whole: parts checked against each other, a crash-safe final swap, one writer.

* Every part of a bundle (`passages/`, `bm25/`, `dense/`) is recorded in the bundle manifest with its row
  count and, per file (the part's own manifest.json included), its size, a digest of its first and last MiB
  (`sample`), its full SHA-256 and an xxh3 digest of every block (`blocks`: 64 KiB, or larger so that a file
  has at most 4096). Opening a part checks sizes and samples (a few reads, whatever the index size); every
  byte an answer is built from is checked against its block digests before it is used (`FileCheck`): the
  passage store checks the blocks that hold the rows it reads, the first time it reads them; files read whole
  (the vectors, a FAISS index, the BM25 index) are checked whole at their first use. An index built before
  block digests has its files checked whole against their SHA-256 at first use (slower; `verify-index`
  records the block digests). `run_qa.py verify-index DIR` checks full digests and row counts. A part copied
  from another index, truncated, damaged or replaced is refused with one line naming the part and the fix.
* `odqa.core.atomic.publish_folder` (also behind every `atomic_folder`) swaps a finished build in place:
  fsync of every file and folder first, then rename the old folder away, rename the new one in, fsync the
  parent. A crash between the two renames leaves
  `.NAME.old-PID` / `.NAME.building-PID`; `recover_swap` (run before every open and build) puts back the
  finished build (it holds its `manifest.json`, written last) or else the old index, and removes leftovers
  of dead processes. An index's swap holds `.NAME.swap-lock` exclusive while readers hold it shared for
  as long as they open parts (`IndexBundle.open`, `.retriever`), so a search never meets half of each index,
  however slowly it reads; where the lock file is missing or cannot be locked, readers retry through swaps.
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
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import xxhash

from odqa.indexes.layout import DENSE, PASSAGES, SEARCH_PARTS
from odqa.core.atomic import fsync_dir
from odqa.core.errors import IndexMismatchError, OdqaError

SAMPLE_BYTES = 1 << 20
MANIFEST = "manifest.json"
_SKIP = re.compile(r"^\.tantivy-.*\.lock$|^\.managed\.json$")  # tantivy rewrites these on open
MIN_BLOCK = 1 << 16  # a passage read checks its blocks: small ones keep that cheap
MAX_BLOCKS = 4096  # and a bounded count keeps the manifest small whatever the file size
DIGEST_BYTES = 8  # xxh3_64


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
    return _digests(path, path.stat().st_size)[0]


def block_size(size: int) -> int:
    """The block of a file of `size` bytes: MIN_BLOCK, doubled until the file has at most MAX_BLOCKS."""
    block = MIN_BLOCK
    while block * MAX_BLOCKS < size:
        block *= 2
    return block


def _digests(path: Path, size: int) -> tuple[str, dict]:
    """(SHA-256 prefix, block record) of a file, in one read."""
    sha = hashlib.sha256()
    block = block_size(size)
    blocks = []
    with path.open("rb") as f:
        for data in iter(lambda: f.read(block), b""):
            sha.update(data)
            blocks.append(xxhash.xxh3_64_digest(data))
    return sha.hexdigest()[:16], {"size": block, "xxh3": b"".join(blocks).hex()}


def part_files(folder: Path) -> list[Path]:
    """A part's files, its manifest included (an edited pooling or similarity changes every ranking)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not _SKIP.match(p.name))


def describe_file(path: Path) -> dict:
    size = path.stat().st_size
    sha, blocks = _digests(path, size)
    return {"size": size, "sample": _sample_digest(path, size), "sha256": sha, "blocks": blocks}


def describe_part(folder: str | Path, count: int) -> dict:
    """What the bundle manifest records of one part: its rows and every file's size and digests."""
    folder = Path(folder)
    return {"count": int(count), "files": {str(p.relative_to(folder)): describe_file(p) for p in part_files(folder)}}


class FileCheck:
    """Checks the bytes of one recorded file before they are used: `range(start, end)` the blocks that hold
    them, `whole()` every block; each block once. `read(offset, length)` gives the bytes as they will be used
    (the memory map itself, or the open file that a memory map was made of), so a file replaced after opening
    is not mistaken for the one in use. A record without block digests (an index built before them) is
    checked whole against its SHA-256 at the first use."""

    def __init__(self, record: dict, read: Callable[[int, int], bytes], where: str, fix: str):
        self.record, self.read, self.where, self.fix = record, read, where, fix
        blocks = record.get("blocks") or {}
        self.block = int(blocks.get("size", 0))
        self.digests = bytes.fromhex(blocks.get("xxh3", "")) if self.block else b""
        count = len(self.digests) // DIGEST_BYTES
        if self.block and (count != -(-record["size"] // self.block) or len(self.digests) % DIGEST_BYTES):
            self._fail("its block digests do not fit its size")
        self._checked = np.zeros(count, dtype=bool)
        self._whole = False
        self._lock = threading.Lock()

    def _fail(self, what: str):
        raise IndexMismatchError(f"{self.where} differs from the file that was built ({what}): it was damaged "
                                 f"or changed on disk; {self.fix}")

    def whole(self) -> None:
        if self._whole:
            return
        if not self.block:
            self._check_sha256()
        else:
            self._check_blocks(np.flatnonzero(~self._checked))
        self._whole = True

    def range(self, start: int, end: int) -> None:
        self.ranges(np.asarray([start]), np.asarray([end]))

    def ranges(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Every block that holds a byte of any [starts[i], ends[i])."""
        if self._whole:
            return
        if not self.block:
            return self.whole()
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        if not len(starts):
            return
        if starts.min() < 0 or ends.max() > self.record["size"]:
            self._fail("a read outside the file")
        first, last = starts // self.block, (ends - 1) // self.block
        if (last - first).max() <= 1:
            wanted = np.union1d(first, last)
        else:
            wanted = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)]))
        todo = wanted[~self._checked[wanted]]
        if len(todo):
            self._check_blocks(todo)

    def _check_blocks(self, blocks: np.ndarray) -> None:
        size = self.record["size"]
        for b in blocks.tolist():
            start = b * self.block
            data = self.read(start, min(self.block, size - start))
            expected = self.digests[b * DIGEST_BYTES : (b + 1) * DIGEST_BYTES]
            if xxhash.xxh3_64_digest(data) != expected:
                self._fail(f"bytes {start:,}-{start + len(data):,}")
        with self._lock:
            self._checked[blocks] = True

    def _check_sha256(self) -> None:
        sha = hashlib.sha256()
        size, step = self.record["size"], 1 << 22
        for start in range(0, size, step):
            sha.update(self.read(start, min(step, size - start)))
        if sha.hexdigest()[:16] != self.record["sha256"]:
            self._fail("its SHA-256")


def file_reader(f) -> Callable[[int, int], bytes]:
    """`read(offset, length)` over an open binary file, without moving its position."""
    fd = f.fileno()
    return lambda offset, length: os.pread(fd, length, offset)


_NOTED: set[str] = set()


def note_unchecked(where: str, what: str) -> None:
    """Once per process and index: what an older index cannot have checked."""
    if where not in _NOTED:
        _NOTED.add(where)
        print(f"odqa: note: {where} {what}", file=sys.stderr)


def check_part(folder: str | Path, recorded: dict | None, rows: int | None, full: bool = False,
               name: str | None = None, fix: str | None = None) -> None:
    """Raise IndexMismatchError when `folder` is not the part recorded in the bundle manifest.

    `rows`: the row count the part reports now (passages, vectors, BM25 documents), or None when unknown.
    `name`, `fix`: how the messages name the folder and the remedy (default: a part of an index)."""
    folder = Path(folder)
    name, fix = name or f"index part {_part_name(folder)}", fix or part_fix(folder)
    if not recorded:
        return  # an index built before parts were recorded: only the cheaper checks of its caller apply
    if rows is not None and rows != recorded["count"]:
        raise IndexMismatchError(f"{name} holds {rows} rows but the index was built with "
                                 f"{recorded['count']}; it was replaced or damaged: {fix}")
    for rel, info in recorded["files"].items():
        path = folder / rel
        if not path.is_file():
            raise IndexMismatchError(f"{name} lacks {rel}; it was removed or damaged: {fix}")
        size = path.stat().st_size
        if size != info["size"]:
            raise IndexMismatchError(f"{name}: {rel} has {size} bytes, built with {info['size']}; "
                                     f"it was replaced or truncated: {fix}")
        if _sample_digest(path, size) != info["sample"] or (full and _full_digest(path) != info["sha256"]):
            raise IndexMismatchError(f"{name}: {rel} differs from the file that was built "
                                     f"with (another index's file, or damaged): {fix}")


def check_bundle_manifest(manifest, path: str | Path) -> None:
    """The fields a bundle manifest must have, so that an edited one (`backends: []`, a part's record removed)
    is refused at open and by verify-index instead of answering from what it no longer describes."""
    params = manifest.params if isinstance(manifest.params, dict) else {}
    fix = f"rebuild the index with `run_qa.py index --corpus CORPUS --out {path}`"

    def refuse(what: str):
        raise IndexMismatchError(f"{Path(path) / MANIFEST} {what}: it was edited or damaged; {fix}")

    backends = params.get("backends")
    if (not isinstance(backends, list) or not backends or len(set(map(str, backends))) != len(backends)
            or any(b not in SEARCH_PARTS for b in backends)):
        refuse(f"names no valid backends ({backends!r}; an index has {' and/or '.join(SEARCH_PARTS)})")
    if not isinstance(manifest.count, int) or manifest.count <= 0:
        refuse(f"gives no passage count ({manifest.count!r})")
    if not manifest.corpus_fingerprint:
        refuse("gives no corpus fingerprint")
    if DENSE in backends and (not isinstance(manifest.dim, int) or manifest.dim <= 0 or not manifest.encoder):
        refuse("gives no encoder or vector dimension for its dense part")
    parts = params.get("parts")
    if parts is None or params.get("shards"):
        return  # an index built before parts were recorded; a sharded index records them in its shards
    for name in [PASSAGES, *backends]:
        record = parts.get(name) if isinstance(parts, dict) else None
        files = record.get("files") if isinstance(record, dict) else None
        if (not isinstance(files, dict) or not files or not isinstance(record.get("count"), int)
                or not all(isinstance(info, dict) and {"size", "sample", "sha256"} <= set(info)
                           for info in files.values())):
            refuse(f"lacks the record of its part {name}")


def _part_name(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}"


def part_fix(folder: Path) -> str:
    return f"rebuild the index with `run_qa.py index --corpus CORPUS --out {Path(folder).parent}`"


def file_check(folder: str | Path, recorded: dict | None, rel: str,
               read: Callable[[int, int], bytes]) -> FileCheck | None:
    """The check of one file of a part against the bundle manifest's record; None where nothing was recorded
    (an index built before parts were recorded)."""
    if not recorded or rel not in recorded.get("files", {}):
        return None
    folder = Path(folder)
    return FileCheck(recorded["files"][rel], read, f"index part {_part_name(folder)}: {rel}", part_fix(folder))


def check_files_whole(folder: str | Path, recorded: dict | None) -> None:
    """Every recorded file of a part checked whole: for parts a library reads by itself (the BM25 engines)."""
    folder = Path(folder)
    for rel in (recorded or {}).get("files", {}):
        with (folder / rel).open("rb") as f:
            file_check(folder, recorded, rel, file_reader(f)).whole()


def add_block_digests(folder: str | Path, recorded: dict) -> bool:
    """Give a part recorded before block digests its files' block digests, after checking each file against
    its recorded SHA-256 in the same read; False where it had them already."""
    folder = Path(folder)
    added = False
    for rel, info in recorded.get("files", {}).items():
        if "blocks" in info:
            continue
        described = describe_file(folder / rel)
        if described["sha256"] != info["sha256"] or described["size"] != info["size"]:
            raise IndexMismatchError(f"index part {_part_name(folder)}: {rel} differs from the file the index was "
                                     f"built with (damaged); {part_fix(folder)}")
        info["blocks"] = described["blocks"]
        added = True
    return added


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


def swap_in_progress(target: str | Path) -> bool:
    """Whether a live build is publishing into `target` now (its staging or the index it moves away lies beside
    it): a reader that finds the folder missing or changed under it waits for the swap instead of failing."""
    target = Path(target)
    return any(_pid_alive(pid) for kind in ("building", "old") for _, pid in _leftovers(target, kind))


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
