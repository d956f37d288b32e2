"""Passages on disk as a memory-mapped Arrow table (Hugging Face `datasets`).

Opening is a memory map, so a 660 k-passage corpus opens in well under a second and costs little RSS.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import datasets

from odqa.errors import OdqaError
from odqa.types import Passage

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
        if not (path / "dataset_info.json").exists():
            raise OdqaError(f"{path} holds no passage store; build one with `run_qa.py index --corpus ... --out ...`")
        datasets.disable_progress_bars()
        return cls(datasets.load_from_disk(str(path)), path)

    @classmethod
    def write(cls, passages: Iterable[Passage], path: str | Path) -> tuple["PassageStore", str]:
        """Stream passages to `path` (atomically) and return the store with its fingerprint."""
        path = Path(path)
        fingerprint = Fingerprint()

        def rows() -> Iterator[dict]:
            for p in passages:
                fingerprint.update(p)
                yield {"id": p.id, "title": p.title, "text": p.text, "doc_id": p.doc_id, "start": p.start, "end": p.end}

        datasets.disable_progress_bars()
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".passages-cache-") as cache:
            ds = datasets.Dataset.from_generator(rows, features=FEATURES, cache_dir=cache, keep_in_memory=False)
            if fingerprint.count == 0:
                raise OdqaError("the corpus produced no passages; check that its documents have text")
            tmp = path.with_name(path.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            ds.save_to_disk(str(tmp))
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
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
