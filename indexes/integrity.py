"""Keeping an index folder whole: parts checked against each other, a crash-safe final swap, one writer.

* Every part of a bundle (`passages/`, `bm25/`, `dense/`) is recorded in the bundle manifest with its row
  count and, per file (the part's own manifest.json included), its size, a digest of its first and last MiB
  (`sample`), its full SHA-256 and an xxh3 digest of every 64 KiB block (`blocks`: in the manifest for a file of
  up to 4096 blocks, in a file beside it, `NAME.odqa-blocks`, for a larger one, with that file's own digest in
  the manifest; a block a read must check stays 64 KiB however large the file). Opening a part checks sizes and
  samples (a few reads, whatever the index size); every
  byte an answer is built from is checked against its block digests before it is used (`FileCheck`): the
  passage store checks the blocks that hold the rows it reads, the first time it reads them; files read whole
  (the vectors, a FAISS index, the BM25 index) are checked whole at their first use. An index built before
  block digests (manifest format 1) has its files checked whole against their SHA-256 at first use (slower;
  `verify-index` records the block digests). `run_qa.py verify-index DIR` checks full digests and row counts. A
  part copied from another index, truncated, damaged or replaced is refused with one line naming the part and the
  fix.
* A sharded index (`index --shards N`) records each shard by its manifest's digest (which records the shard's
  own parts) and its rows (`check_shard`), checked when the index opens: two shards swapped, or one replaced by
  the same-numbered shard of another build, would put other passages under the rows its joined BM25 returns.
* A manifest is held to what its format promises (`check_bundle_manifest`, `indexes.manifest`): from format 2
  its own digest, every part's record with block digests, a sharded index's shard records; a manifest that
  lacks them, or claims an older format than its parts', was edited to look older and is refused.
* `odqa.core.atomic.publish_folder` (also behind every `atomic_folder`) swaps a finished build in place:
  fsync of every file and folder first, then rename the old folder away, rename the new one in, fsync the
  parent. A crash between the two renames leaves
  `.NAME.old-PID` / `.NAME.building-PID`; `recover_swap` (run before every open and build) puts back the
  finished build (it holds its `manifest.json`, written last) or else the old index, and removes leftovers
  of dead processes. An index's swap holds `.NAME.swap-lock` exclusive while readers hold it shared for
  as long as they open parts (`FolderIndex.open`, `.check_available`), so a search never meets half of each index,
  however slowly it reads; where the lock file is missing or cannot be locked, readers retry through swaps.
* `build_lock` holds an exclusive `flock` on `.NAME.lock` beside `--out`, so a second writer is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import numpy as np
import xxhash

from odqa.core.atomic import fsync_dir, writer_lock
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.indexes.layout import BM25, DENSE, PASSAGES, SEARCH_PARTS, SHARD_RECORDS, SHARDS
from odqa.indexes.manifest import Manifest, file_record_gaps

SAMPLE_BYTES = 1 << 20
MANIFEST = "manifest.json"
SIDECAR = ".odqa-blocks"  # a large file's block digests, beside it (recorded by their digest in its record)
# tantivy rewrites the first two on open; a sidecar is checked through the record of the file it describes
_SKIP = re.compile(r"^\.tantivy-.*\.lock$|^\.managed\.json$|" + re.escape(SIDECAR) + "$")
MIN_BLOCK = 1 << 16  # every read checks the blocks it touches: small ones keep that cheap at any file size
INLINE_BLOCKS = 4096  # a file of more blocks keeps their digests in a sidecar, so the manifest stays small
DIGEST_BYTES = 8  # xxh3_64
PREFETCH_BLOCKS = 64  # blocks asked of the disk at once by a check: scattered reads overlap, a whole file streams


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


def _digests(path: Path, size: int) -> tuple[str, bytes]:
    """(SHA-256 prefix, the xxh3 digests of its MIN_BLOCK blocks) of a file, in one read."""
    sha = hashlib.sha256()
    blocks = []
    with path.open("rb") as f:
        for data in iter(lambda: f.read(MIN_BLOCK), b""):
            sha.update(data)
            blocks.append(xxhash.xxh3_64_digest(data))
    return sha.hexdigest()[:16], b"".join(blocks)


def _block_record(path: Path, digests: bytes) -> dict:
    """The record of a file's block digests: inline up to INLINE_BLOCKS, else written to its sidecar."""
    if len(digests) <= INLINE_BLOCKS * DIGEST_BYTES:
        return {"size": MIN_BLOCK, "xxh3": digests.hex()}
    sidecar = path.with_name(path.name + SIDECAR)
    partial = sidecar.with_name(sidecar.name + ".partial")
    partial.write_bytes(digests)
    os.replace(partial, sidecar)  # a new file: never written through a hard link another index shares
    return {"size": MIN_BLOCK, "sidecar": sidecar.name, "sidecar_xxh3_128": xxhash.xxh3_128_hexdigest(digests)}


def part_files(folder: Path) -> list[Path]:
    """A part's files, its manifest included (an edited pooling or similarity changes every ranking)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not _SKIP.match(p.name))


def describe_file(path: Path) -> dict:
    """A file's size and digests; a large file's block digests are written beside it (`SIDECAR`)."""
    size = path.stat().st_size
    sha, digests = _digests(path, size)
    return {"size": size, "sample": _sample_digest(path, size), "sha256": sha, "blocks": _block_record(path, digests)}


def describe_part(folder: str | Path, count: int) -> dict:
    """What the bundle manifest records of one part: its rows and every file's size and digests."""
    folder = Path(folder)
    return {"count": int(count), "files": {str(p.relative_to(folder)): describe_file(p) for p in part_files(folder)}}


class FileCheck:
    """Checks the bytes of one recorded file before they are used: `range(start, end)` the blocks that hold
    them, `whole()` every block; each block once. `read(offset, length)` gives the bytes as they will be used
    (the memory map itself, or the open file that a memory map was made of), so a file replaced after opening
    is not mistaken for the one in use. A record without block digests (an index built before them) is
    checked whole against its SHA-256 at the first use. `folder`: where the file lies, for a record whose
    block digests are in a sidecar (read and checked at the first read)."""

    def __init__(
        self,
        record: dict,
        read: Callable[[int, int], bytes | memoryview],
        where: str,
        fix: str,
        folder: str | Path | None = None,
    ):
        self.record, self.read, self.where, self.fix = record, read, where, fix
        blocks = record.get("blocks") or {}
        self.block = int(blocks.get("size", 0))
        count = -(-record["size"] // self.block) if self.block else 0
        self._sidecar = Path(folder) / blocks["sidecar"] if self.block and "sidecar" in blocks and folder else None
        if self.block and "sidecar" in blocks and folder is None:
            raise OdqaError(f"{where}: its block digests lie beside it, and this check was not told where")
        self.digests = b"" if self._sidecar or not self.block else bytes.fromhex(blocks.get("xxh3", ""))
        if self.block and not self._sidecar and len(self.digests) != count * DIGEST_BYTES:
            self._fail("its block digests do not fit its size")
        self._checked = np.zeros(count, dtype=bool)
        self._whole = False
        self._lock = threading.Lock()

    def _fail(self, what: str) -> NoReturn:
        raise IndexMismatchError(
            f"{self.where} differs from the file that was built ({what}): it was damaged or changed on disk; {self.fix}"
        )

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

    def _load_sidecar(self) -> None:
        """The block digests from the sidecar, checked against the record's digest of them."""
        assert self._sidecar is not None  # read only for a record whose digests lie in one
        try:
            digests = self._sidecar.read_bytes()
        except OSError as exc:
            self._fail(f"its block digests {self._sidecar.name} cannot be read: {exc.strerror or exc}")
        if not _sidecar_matches(digests, self.record["blocks"], len(self._checked)):
            self._fail(f"its block digests {self._sidecar.name} were changed")
        self.digests = digests

    def _check_blocks(self, blocks: np.ndarray) -> None:
        if not self.digests and len(blocks):
            with self._lock:
                if not self.digests:
                    self._load_sidecar()
        size = self.record["size"]
        prefetch = getattr(self.read, "prefetch", None)
        for i, b in enumerate(blocks.tolist()):
            if prefetch is not None and i % PREFETCH_BLOCKS == 0:  # the next blocks' reads in flight together
                starts = blocks[i : i + PREFETCH_BLOCKS] * self.block
                prefetch(starts, np.minimum(self.block, size - starts))
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


class FileReader:
    """`read(offset, length)` over an open binary file, without moving its position; `prefetch(offsets, lengths)`
    asks the disk for several ranges at once, so that a check of scattered blocks reads them in parallel."""

    def __init__(self, f):
        self.fd = f.fileno()

    def __call__(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def prefetch(self, offsets, lengths) -> None:
        if hasattr(os, "posix_fadvise"):
            for offset, length in zip(offsets, lengths):
                os.posix_fadvise(self.fd, int(offset), int(length), os.POSIX_FADV_WILLNEED)


def file_reader(f) -> FileReader:
    return FileReader(f)


_NOTED: set[str] = set()


def note_unchecked(where: str, what: str) -> None:
    """Once per process and index: what an older index cannot have checked."""
    if where not in _NOTED:
        _NOTED.add(where)
        print(f"odqa: note: {where} {what}", file=sys.stderr)


def check_part(
    folder: str | Path,
    recorded: dict | None,
    rows: int | None,
    full: bool = False,
    name: str | None = None,
    fix: str | None = None,
) -> None:
    """Raise IndexMismatchError when `folder` is not the part recorded in the bundle manifest.

    `rows`: the row count the part reports now (passages, vectors, BM25 documents), or None when unknown.
    `name`, `fix`: how the messages name the folder and the remedy (default: a part of an index)."""
    folder = Path(folder)
    name, fix = name or f"index part {_part_name(folder)}", fix or part_fix(folder)
    if not recorded:
        return  # an index built before parts were recorded: only the cheaper checks of its caller apply
    if rows is not None and rows != recorded["count"]:
        raise IndexMismatchError(
            f"{name} holds {rows} rows but the index was built with "
            f"{recorded['count']}; it was replaced or damaged: {fix}"
        )
    for rel, info in recorded["files"].items():
        path = folder / rel
        if not path.is_file():
            raise IndexMismatchError(f"{name} lacks {rel}; it was removed or damaged: {fix}")
        size = path.stat().st_size
        if size != info["size"]:
            raise IndexMismatchError(
                f"{name}: {rel} has {size} bytes, built with {info['size']}; it was replaced or truncated: {fix}"
            )
        if _sample_digest(path, size) != info["sample"] or (full and _full_digest(path) != info["sha256"]):
            raise IndexMismatchError(
                f"{name}: {rel} differs from the file that was built with (another index's file, or damaged): {fix}"
            )
        blocks = info.get("blocks") or {}
        if "sidecar" in blocks:
            _check_sidecar(
                path.with_name(blocks["sidecar"]), blocks, -(-size // int(blocks["size"])), full, f"{name}: {rel}", fix
            )


def _check_sidecar(sidecar: Path, blocks: dict, count: int, full: bool, name: str, fix: str) -> None:
    """A large file's block digests beside it: there and of the right size (at open), unchanged (`full`)."""
    if (
        not sidecar.is_file()
        or sidecar.stat().st_size != count * DIGEST_BYTES
        or (full and not _sidecar_matches(sidecar.read_bytes(), blocks, count))
    ):
        raise IndexMismatchError(f"{name}: its block digests {sidecar.name} are missing or were changed: {fix}")


def _sidecar_matches(digests: bytes, blocks: dict, count: int) -> bool:
    """The sidecar's bytes are the `count` block digests its file's record was made with."""
    return len(digests) == count * DIGEST_BYTES and xxhash.xxh3_128_hexdigest(digests) == blocks["sidecar_xxh3_128"]


def check_bundle_manifest(manifest, path: str | Path, fix: str | None = None) -> None:
    """The fields a bundle manifest must have, so that an edited one (`backends: []`, a part's record removed)
    is refused at open and by verify-index instead of answering from what it no longer describes. What its format
    promises is damage when missing: from format 2 the record of every part with its files' block digests, and
    for a sharded index each shard's manifest digest and rows (`check_shard`); a format-1 index may lack them
    (it is read as it was written, and said so). `fix`: the remedy the refusals name (default: rebuild it)."""
    params = manifest.params if isinstance(manifest.params, dict) else {}
    version = manifest.format_version
    shards = params.get(SHARDS)
    fix = fix or (
        sharded_fix(path, params.get("corpus"), shards)
        if shards is not None
        else f"rebuild the index with `run_qa.py index --corpus CORPUS --out {path}`"
    )

    def refuse(what: str, why: str = "it was edited or damaged") -> NoReturn:
        raise IndexMismatchError(f"{Path(path) / MANIFEST} {what}: {why}; {fix}")

    backends = params.get("backends")
    if (
        not isinstance(backends, list)
        or not backends
        or len(set(map(str, backends))) != len(backends)
        or any(b not in SEARCH_PARTS for b in backends)
    ):
        refuse(f"names no valid backends ({backends!r}; an index has {' and/or '.join(SEARCH_PARTS)})")
    if not isinstance(manifest.count, int) or manifest.count <= 0:
        refuse(f"gives no passage count ({manifest.count!r})")
    if not manifest.corpus_fingerprint:
        refuse("gives no corpus fingerprint")
    if DENSE in backends and (not isinstance(manifest.dim, int) or manifest.dim <= 0 or not manifest.encoder):
        refuse("gives no encoder or vector dimension for its dense part")
    if shards is not None:
        _check_shard_records(manifest, params, refuse)
    parts = params.get("parts")
    if parts is None and version < 2 and shards is None:
        return  # a format-1 index built before parts were recorded: only the cheaper checks of its caller apply
    if not isinstance(parts, dict):
        refuse(f"lacks the record of its parts, which a format-{version} manifest holds")
    if shards is None:
        required = [PASSAGES, *backends]
    else:  # a sharded index records the BM25 join of its shards; its shards record their own parts
        required = [BM25] if BM25 in backends else []
    for name in required:
        record = parts.get(name)
        files = record.get("files") if isinstance(record, dict) else None
        if (
            not isinstance(record, dict)
            or not isinstance(files, dict)
            or not files
            or not isinstance(record.get("count"), int)
        ):
            refuse(f"lacks the record of its part {name}")
        for rel, info in files.items():
            gaps = file_record_gaps(info, version)
            if gaps:
                refuse(f"lacks the {' and '.join(gaps)} of {name}/{rel}, which a format-{version} manifest records")


SHARD_NAME = re.compile(r"^shards/\d{3,}$")


def _check_shard_records(manifest, params: dict, refuse: Callable[..., NoReturn]) -> None:
    """A sharded bundle manifest lists its shards and records each one's manifest digest and rows, in row order
    from 0 to its passage count: so that a shard swapped with another, or one of another build, is refused."""
    shards, records = params.get(SHARDS), params.get(SHARD_RECORDS)
    if manifest.format_version < 2:
        refuse(f"claims manifest format {manifest.format_version}, older than any sharded index (format 2 on)")
    if (
        not isinstance(shards, list)
        or not shards
        or len(set(map(str, shards))) != len(shards)
        or not all(isinstance(name, str) and SHARD_NAME.match(name) for name in shards)
    ):
        refuse(f"names no valid shards ({shards!r})")
    if not isinstance(records, dict) or set(records) != set(shards):
        refuse(
            "lacks the record of its shards (each one's manifest digest and rows)",
            "it was built before they were recorded, or edited or damaged",
        )
    start = 0
    for name in shards:
        record = records[name]
        rows = record.get("rows") if isinstance(record, dict) else None
        if (
            not isinstance(rows, list)
            or len(rows) != 2
            or not all(type(r) is int for r in rows)
            or rows[0] != start
            or rows[1] < start
            or not isinstance(record.get("manifest"), str)
            or not record["manifest"]
        ):
            refuse(f"lacks the record of its shard {name} (its manifest digest, and rows from {start})")
        start = rows[1]
    if start != manifest.count:
        refuse(f"records shards of {start} rows in all, not its {manifest.count} passages")


def sharded_fix(path: str | Path, corpus=None, shards=None) -> str:
    n = len(shards) if isinstance(shards, list) and shards else "N"
    return (
        f"rebuild the index with `run_qa.py index --corpus {corpus or 'CORPUS'} --out {path} --shards {n}` "
        "(its shards that are still right are kept)"
    )


def check_shard(folder: str | Path, record: dict, bundle, fix: str):
    """The manifest of shard `folder` of a sharded index, after checking that the shard is the one the index was
    built with (`record`: its manifest's digest and rows, in the bundle manifest `bundle`); one line naming the
    shard and `fix` otherwise."""
    folder = Path(folder)
    name = f"index part {_part_name(folder)}"
    if not (folder / MANIFEST).is_file():
        raise IndexMismatchError(f"{name} has no {MANIFEST} (removed, or not copied with the rest); {fix}")
    manifest = Manifest.load(folder, fix=fix)
    if manifest.kind != "bundle":
        raise IndexMismatchError(f"{name} holds a {manifest.kind!r} index, not a shard of this index; {fix}")
    if manifest.digest != record["manifest"]:
        raise IndexMismatchError(
            f"{name} is not the shard this index was built with (its manifest's digest "
            f"{manifest.digest}, recorded {record['manifest']}): swapped with another shard or "
            f"copied from another build; {fix}"
        )
    start, end = record["rows"]
    if manifest.count != end - start:
        raise IndexMismatchError(
            f"{name} holds {manifest.count} rows but the index records rows {start}-{end} of it; {fix}"
        )
    check_part_format(bundle, manifest, name, fix)
    check_bundle_manifest(manifest, folder, fix=fix)
    return manifest


def check_part_format(bundle, part, name: str, fix: str) -> None:
    """A part is never of a newer manifest format than the index it belongs to (the index's manifest is written
    last): a bundle manifest that claims an older format than its parts' was edited to look older."""
    if part.format_version > bundle.format_version:
        raise IndexMismatchError(
            f"{name} has a manifest of format {part.format_version}, but the index's {MANIFEST} "
            f"claims format {bundle.format_version}, older than its parts: it was edited (to "
            f"look older) or damaged; {fix}"
        )


def _part_name(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}"


def part_fix(folder: Path) -> str:
    return f"rebuild the index with `run_qa.py index --corpus CORPUS --out {Path(folder).parent}`"


def file_check(
    folder: str | Path, recorded: dict | None, rel: str, read: Callable[[int, int], bytes | memoryview]
) -> FileCheck | None:
    """The check of one file of a part against the bundle manifest's record; None where nothing was recorded
    (an index built before parts were recorded)."""
    if not recorded or rel not in recorded.get("files", {}):
        return None
    folder = Path(folder)
    return FileCheck(
        recorded["files"][rel],
        read,
        f"index part {_part_name(folder)}: {rel}",
        part_fix(folder),
        folder=(folder / rel).parent,
    )


def check_files_whole(folder: str | Path, recorded: dict | None) -> None:
    """Every recorded file of a part checked whole: for parts a library reads by itself (the BM25 engines)."""
    folder = Path(folder)
    for rel in (recorded or {}).get("files", {}):
        with (folder / rel).open("rb") as f:
            check = file_check(folder, recorded, rel, file_reader(f))
            assert check is not None  # `rel` is one of the recorded files
            check.whole()


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
            raise IndexMismatchError(
                f"index part {_part_name(folder)}: {rel} differs from the file the index was "
                f"built with (damaged); {part_fix(folder)}"
            )
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


def remove_dead_leftovers(target: str | Path, kind: str) -> None:
    """Remove the `.NAME.KIND-PID` scratch folders beside `target` that processes no longer running left (a
    build killed midway)."""
    for leftover, pid in _leftovers(Path(target), kind):
        if not _pid_alive(pid):
            shutil.rmtree(leftover, ignore_errors=True)


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
def build_lock(target: str | Path, parts_by_workers: bool = False) -> Iterator[None]:
    """An exclusive lock on `.NAME.lock` beside `target` for the whole build; a second writer is refused. The
    one lock every writer of an output folder takes (`odqa.core.atomic.writer_lock`): a build inside a command
    that holds its --out already (the CLI, the demo corpus's first use) enters it."""
    with writer_lock(target, who="another build", parts_by_workers=parts_by_workers):
        yield
