"""BM25 retrieval over an embedded text index (see indexes/bm25.py for the engines)."""

from __future__ import annotations

from typing import Sequence

from odqa.core.types import SearchHit
from odqa.corpus.store import PassageStore
from odqa.retriever.base import attach_passages, check_k


class BM25Retriever:
    name = "bm25"

    def __init__(self, index, store: PassageStore):
        self.index = index
        self.store = store

    def search(self, questions: Sequence[str], k: int, passages: bool = True) -> list[list[SearchHit]]:
        """passages False: rows and scores only (a hybrid reads the passages of its fused top k alone)."""
        check_k(k, len(self.store))
        results = [
            [SearchHit(row=row, score=score, source=self.name) for row, score in hits]
            for hits in self.index.search(list(questions), k)
        ]
        return attach_passages(self.store, results) if passages else results
