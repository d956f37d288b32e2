"""Passages on disk as a memory-mapped Arrow table (Hugging Face `datasets`).

Opening is a memory map, so a 660 k-passage corpus opens in well under a second and costs little RSS.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import datasets
import pyarrow as pa

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.types import Passage

DATA_FILE = "passages.arrow"
COLUMNS = ("id", "title", "text", "doc_id", "start", "end")
FEATURES = datasets.Features(
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
    def __init__(self, dataset: datasets.Dataset, path: Path | None = None):
        self.dataset = dataset
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> "PassageStore":
        path = Path(path)
        if not (path / DATA_FILE).exists():
            raise OdqaError(f"{path} holds no passage store; build one with `odqa index --corpus ... --out ...`")
        datasets.disable_progress_bars()
        return cls(datasets.Dataset.from_file(str(path / DATA_FILE), in_memory=False), path)

    @classmethod
    def write(cls, passages: Iterable[Passage], path: str | Path, batch_rows: int = 10000) -> tuple["PassageStore", str]:
        """Stream passages into an Arrow file under `path` (atomically); return the store and its fingerprint."""
        path = Path(path)
        fingerprint = Fingerprint()
        schema = FEATURES.arrow_schema
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
        return len(self.dataset)

    def get(self, row: int) -> Passage:
        if not 0 <= row < len(self.dataset):
            raise IndexError(f"passage row {row} out of range (store has {len(self.dataset)})")
        return Passage(**self.dataset[int(row)])

    def get_rows(self, rows: Sequence[int]) -> list[Passage]:
        if len(rows) == 0:
            return []
        batch = self.dataset[[int(r) for r in rows]]
        return [Passage(**{c: batch[c][i] for c in COLUMNS}) for i in range(len(rows))]

    def iter_batches(self, batch_size: int = 1000, columns: Sequence[str] = ("title", "text")) -> Iterator[dict]:
        """Column batches in row order, streamed from the memory map."""
        table = self.dataset.select_columns(list(columns))
        for start in range(0, len(table), batch_size):
            yield table[start : start + batch_size]

    def column(self, name: str):
        return self.dataset.data.column(name)
