"""Passages on disk as a memory-mapped Arrow table (the Arrow stream format Hugging Face `datasets` writes and reads).

Opening is a memory map, so a 660 k-passage corpus opens in well under a second and costs little RSS. Reading
goes through pyarrow alone: `datasets` (about a second to import) is imported only by what needs a `Dataset`
(`PassageStore.dataset`), never on the way to an answer.

An index's store checks the bytes it reads before using them (`verify_with`): the rows a search returns are
located in the file (each column's offsets, values and validity bits) and those bytes' blocks are checked the
first time; the file's layout (its batches and their buffers, `layout_digest`) is compared with the build's.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.mapped_reads import advise_random, prefetch_ranges
from odqa.core.types import Passage

DATA_FILE = "passages.arrow"
# url: a column since issue 77; a store written before has none, and its passages read with url ""
COLUMNS = ("id", "title", "text", "doc_id", "start", "end", "url")


def features():
    """The store's columns as `datasets` features (their Arrow schema carries them, so `datasets` reads the file
    back with its types)."""
    import datasets

    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "title": datasets.Value("string"),
            "text": datasets.Value("string"),
            "doc_id": datasets.Value("string"),
            "start": datasets.Value("int32"),
            "end": datasets.Value("int32"),
            "url": datasets.Value("string"),
        }
    )


class Fingerprint:
    """A running hash over passage ids and texts: two stores with the same fingerprint hold the same passages."""

    def __init__(self) -> None:
        self._hash = hashlib.sha1()
        self.count = 0

    def update(self, passage: Passage) -> None:
        self._hash.update(passage.id.encode())
        self._hash.update(b"\0")
        self._hash.update(passage.text.encode())
        self._hash.update(b"\1")
        self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:16]


class RangeCheck(Protocol):
    """What checks the bytes a store reads (indexes.integrity.FileCheck)."""

    def ranges(self, starts: np.ndarray, ends: np.ndarray) -> None: ...

    def whole(self) -> None: ...


class PassageStore:
    def __init__(self, table: pa.Table, path: Path | None = None, mapped: pa.Buffer | None = None):
        self.table = table
        self.path = path
        self._mapped = mapped  # the whole file as memory-mapped: the bytes the table's buffers point into
        self._mapping: mmap.mmap | None = None  # the same, as the Python map it is made of (for its advice)
        self._random = False
        self._check: RangeCheck | None = None
        self._chunk_starts: np.ndarray | None = None
        self._sources: list[PassageStore] = []  # of a concatenation: the stores that check their own rows
        self._source_starts = np.zeros(1, dtype=np.int64)

    @classmethod
    def concat(cls, stores: Sequence[PassageStore]) -> PassageStore:
        """One store over several in order (an index built as shards); each still checks the rows read from it."""
        # shards written before a column was added lack it: nulls there (read as "")
        store = cls(pa.concat_tables([s.table for s in stores], promote_options="default"))
        store._sources = list(stores)
        store._source_starts = np.cumsum([0] + [len(s) for s in stores])
        return store

    @classmethod
    def open(cls, path: str | Path) -> PassageStore:
        path = Path(path)
        if not (path / DATA_FILE).exists():
            raise OdqaError(f"{path} holds no passage store; build one with `odqa index --corpus ... --out ...`")
        # what datasets.Dataset.from_file(in_memory=False) does: the record batches stay in the memory map (a
        # Python one, which can be advised how it will be read)
        with (path / DATA_FILE).open("rb") as f:
            # an empty file cannot be mapped: pyarrow reads it, and refuses it as it refuses a damaged one
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None
        mapped = pa.py_buffer(mapping if mapping is not None else b"")
        store = cls(pa.ipc.open_stream(pa.BufferReader(mapped)).read_all(), path, mapped)
        store._mapping = mapping
        return store

    def advise_random_reads(self) -> None:
        """Rows will be read a few at a time at random places (answering questions): a page-cache miss then
        reads its pages alone, not the device's readahead around it (up to 8 MiB a miss on the machine of
        bench/results/scale.md). Streaming (`iter_batches`) reads ahead all the same."""
        self._random = advise_random(self._mapping)

    # ---- checking what is read -----------------------------------------------------------------------
    def read_bytes(self, offset: int, length: int) -> memoryview:
        """Bytes of the memory-mapped file, as the table reads them."""
        assert self._mapped is not None  # a store opened from its file
        return memoryview(self._mapped)[offset : offset + length]

    def byte_reader(self) -> MappedReader:
        """`read(offset, length)` for a FileCheck, with `prefetch` (indexes.integrity.FileReader's interface)."""
        return MappedReader(self)

    def verify_with(self, check: RangeCheck) -> None:
        """From now on every read first passes the byte ranges it uses to `check` (`ranges(starts, ends)`,
        `whole()`; indexes.integrity.FileCheck), which raises when they differ from the build's."""
        self._check = check

    def _offset(self, buffer: pa.Buffer) -> int:
        """Where `buffer` starts in the file. An empty buffer (a column chunk of empty strings: a corpus without
        titles) holds no byte of it, and pyarrow may place it outside the map, at an address that differs at
        every open: it is at 0, so that the layout digest of the same file is the same at every open."""
        assert self._mapped is not None  # a store opened from its file
        return buffer.address - self._mapped.address if buffer.size else 0

    def _buffers(self, columns: Sequence[str]):
        """(column, chunk index, array, buffers) of `columns`, every chunk."""
        for name in columns:
            for c, array in enumerate(self.table.column(name).chunks):
                yield name, c, array, array.buffers()

    def layout_digest(self) -> str:
        """A digest of the file's structure as read: the schema, and each batch's rows, null counts and
        buffer positions, so that a damaged batch header (which moves what the checked bytes mean) is seen."""
        layout: list = [[f.name, str(f.type), f.nullable] for f in self.table.schema]
        layout.append(
            hashlib.sha1(
                json.dumps(
                    {
                        k.decode(errors="replace"): v.decode(errors="replace")
                        for k, v in (self.table.schema.metadata or {}).items()
                    },
                    sort_keys=True,
                ).encode()
            ).hexdigest()
        )
        for name, c, array, buffers in self._buffers(self.table.column_names):
            layout.append(
                [
                    name,
                    c,
                    len(array),
                    array.null_count,
                    array.offset,
                    [None if b is None else [self._offset(b), b.size] for b in buffers],
                ]
            )
        return hashlib.sha1(json.dumps(layout).encode()).hexdigest()[:16]

    def _check_columns(self, columns: Sequence[str]) -> None:
        for source in self._sources:
            source._check_columns(columns)
        if self._check is None:
            return
        spans = [
            (self._offset(b), self._offset(b) + b.size)
            for _, _, _, buffers in self._buffers(columns)
            for b in buffers
            if b is not None
        ]
        self._check.ranges(
            np.asarray([s for s, _ in spans], dtype=np.int64), np.asarray([e for _, e in spans], dtype=np.int64)
        )

    def _check_rows(self, rows: np.ndarray) -> None:
        """The bytes of `rows` in every column: validity bits, fixed-width values and string offsets first,
        then (read from those checked offsets) the string bytes."""
        check = self._check
        assert check is not None  # its callers check first
        if self._chunk_starts is None:
            self._chunk_starts = np.cumsum([0] + [len(a) for a in self.table.column(0).chunks])
        chunk_of = np.searchsorted(self._chunk_starts, rows, side="right") - 1
        fixed: list[tuple[np.ndarray, np.ndarray]] = []
        strings = []
        for _name, c, array, buffers in self._buffers(self.columns):
            mine = chunk_of == c
            if not mine.any():
                continue
            local = rows[mine] - self._chunk_starts[c] + array.offset
            if buffers[0] is not None:
                starts = self._offset(buffers[0]) + local // 8
                fixed.append((starts, starts + 1))
            if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
                width = 4 if pa.types.is_string(array.type) else 8
                starts = self._offset(buffers[1]) + local * width
                fixed.append((starts, starts + 2 * width))
                strings.append((buffers, local, np.int32 if width == 4 else np.int64))
            else:
                width = array.type.bit_width // 8
                starts = self._offset(buffers[1]) + local * width
                fixed.append((starts, starts + width))
        if not fixed:
            return  # rows outside the store: the read itself refuses them
        check.ranges(np.concatenate([s for s, _ in fixed]), np.concatenate([e for _, e in fixed]))
        data = []
        for buffers, local, dtype in strings:
            offsets = np.frombuffer(buffers[1], dtype=dtype)
            base = self._offset(buffers[2]) if buffers[2] is not None else 0
            data.append((base + offsets[local].astype(np.int64), base + offsets[local + 1].astype(np.int64)))
        if data:
            check.ranges(np.concatenate([s for s, _ in data]), np.concatenate([e for _, e in data]))

    @cached_property
    def dataset(self):
        """The passages as a Hugging Face `datasets.Dataset` over the same memory map (for code that wants one)."""
        import datasets

        datasets.disable_progress_bars()
        if self.path is None:
            for source in self._sources:
                if source._check is not None:
                    source._check.whole()
            return datasets.Dataset(self.table)
        if self._check is not None:
            self._check.whole()
        return datasets.Dataset.from_file(str(self.path / DATA_FILE), in_memory=False)

    @classmethod
    def write(cls, passages: Iterable[Passage], path: str | Path, batch_rows: int = 10000) -> tuple[PassageStore, str]:
        """Stream passages into an Arrow file under `path` (atomically); return the store and its fingerprint."""
        path = Path(path)
        fingerprint = Fingerprint()
        schema = features().arrow_schema
        with atomic_folder(path) as tmp:  # a failed or empty build keeps the old store
            with pa.OSFile(str(tmp / DATA_FILE), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
                columns: dict[str, list] = {c: [] for c in COLUMNS}
                for p in passages:
                    fingerprint.update(p)
                    for c in COLUMNS:
                        columns[c].append(getattr(p, c))
                    if len(columns["id"]) >= batch_rows:
                        writer.write_batch(pa.record_batch(columns, schema=schema))
                        columns = {c: [] for c in COLUMNS}
                if columns["id"]:
                    writer.write_batch(pa.record_batch(columns, schema=schema))
            if fingerprint.count == 0:
                raise OdqaError("the corpus produced no passages; check that its documents have text")
        return cls.open(path), fingerprint.hexdigest()

    def __len__(self) -> int:
        return self.table.num_rows

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The passage columns this store has (`COLUMNS`, less those added after it was written)."""
        return tuple(c for c in COLUMNS if c in self.table.column_names)

    def get(self, row: int) -> Passage:
        if not 0 <= row < self.table.num_rows:
            raise IndexError(f"passage row {row} out of range (store has {self.table.num_rows})")
        return self.get_rows([row])[0]

    def get_rows(self, rows: Sequence[int]) -> list[Passage]:
        if len(rows) == 0:
            return []
        if self._check is not None:
            self._check_rows(np.asarray(rows, dtype=np.int64))
        if self._sources:
            wanted = np.asarray(rows, dtype=np.int64)
            for source, start, end in zip(self._sources, self._source_starts, self._source_starts[1:]):
                mine = wanted[(wanted >= start) & (wanted < end)]
                if len(mine) and source._check is not None:
                    source._check_rows(mine - start)
        # one-row slices, not Table.take: take over a memory-mapped table of many record batches touches whole
        # columns, which made reading an answer's passages grow with the store (bench/results/scale.md)
        table = self.table.select(list(self.columns))
        for r in rows:
            if not 0 <= int(r) < table.num_rows:
                raise IndexError(f"passage row {r} out of range (store has {table.num_rows})")
        return [_passage(table.slice(int(r), 1).to_pylist()[0]) for r in rows]

    def iter_batches(self, batch_size: int = 1000, columns: Sequence[str] = ("title", "text")) -> Iterator[dict]:
        """Column batches in row order, streamed from the memory map."""
        self._check_columns(columns)
        table = self.table.select(list(columns))
        if self._random and self._mapping is not None:  # advised random: it has a map
            self._mapping.madvise(mmap.MADV_SEQUENTIAL)
        try:
            for start in range(0, table.num_rows, batch_size):
                yield table.slice(start, batch_size).to_pydict()
        finally:
            if self._random:
                advise_random(self._mapping)

    def column(self, name: str):
        self._check_columns([name])
        return self.table.column(name)


def _passage(row: dict) -> Passage:
    """A store row as a Passage (a null url, of a shard written before the column, is none)."""
    if row.get("url") is None:
        row["url"] = ""
    return Passage(**row)


class MappedReader:
    """A store's bytes for a FileCheck: `read(offset, length)` from its memory map, `prefetch(offsets, lengths)`
    asking the disk for scattered blocks at once (their reads overlap instead of faulting in one by one)."""

    def __init__(self, store: PassageStore):
        self.store = store

    def __call__(self, offset: int, length: int) -> memoryview:
        return self.store.read_bytes(offset, length)

    def prefetch(self, offsets, lengths) -> None:
        prefetch_ranges(self.store._mapping, offsets, [int(o) + int(n) for o, n in zip(offsets, lengths)])
