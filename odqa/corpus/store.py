"""Passages on disk as a memory-mapped Arrow table (the Arrow stream format Hugging Face `datasets` writes and reads).

Opening is a memory map, so a 660 k-passage corpus opens in well under a second and costs little RSS. Reading
goes through pyarrow alone: `datasets` (about a second to import) is imported only by what needs a `Dataset`
(`PassageStore.dataset`), never on the way to an answer.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import pyarrow as pa

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.types import Passage

DATA_FILE = "passages.arrow"
COLUMNS = ("id", "title", "text", "doc_id", "start", "end")


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


class PassageStore:
    def __init__(self, table: pa.Table, path: Path | None = None):
        self.table = table
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> "PassageStore":
        path = Path(path)
        if not (path / DATA_FILE).exists():
            raise OdqaError(f"{path} holds no passage store; build one with `odqa index --corpus ... --out ...`")
        # what datasets.Dataset.from_file(in_memory=False) does: the record batches stay in the memory map
        return cls(pa.ipc.open_stream(pa.memory_map(str(path / DATA_FILE))).read_all(), path)

    @cached_property
    def dataset(self):
        """The passages as a Hugging Face `datasets.Dataset` over the same memory map (for code that wants one)."""
        import datasets

        datasets.disable_progress_bars()
        if self.path is None:
            return datasets.Dataset(self.table)
        return datasets.Dataset.from_file(str(self.path / DATA_FILE), in_memory=False)

    @classmethod
    def write(cls, passages: Iterable[Passage], path: str | Path, batch_rows: int = 10000) -> tuple["PassageStore", str]:
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

    def get(self, row: int) -> Passage:
        if not 0 <= row < self.table.num_rows:
            raise IndexError(f"passage row {row} out of range (store has {self.table.num_rows})")
        return self.get_rows([row])[0]

    def get_rows(self, rows: Sequence[int]) -> list[Passage]:
        if len(rows) == 0:
            return []
        batch = self.table.take(pa.array([int(r) for r in rows], type=pa.int64())).select(list(COLUMNS)).to_pydict()
        return [Passage(**{c: batch[c][i] for c in COLUMNS}) for i in range(len(rows))]

    def iter_batches(self, batch_size: int = 1000, columns: Sequence[str] = ("title", "text")) -> Iterator[dict]:
        """Column batches in row order, streamed from the memory map."""
        table = self.table.select(list(columns))
        for start in range(0, table.num_rows, batch_size):
            yield table.slice(start, batch_size).to_pydict()

    def column(self, name: str):
        return self.table.column(name)
