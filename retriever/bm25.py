"""BM25 retrieval: a store's text search (a folder's engines: indexes/bm25.py; Elasticsearch's own)."""

from __future__ import annotations

from collections.abc import Sequence

from odqa.core.protocols import SearchBackend
from odqa.core.types import SearchHit
from odqa.retriever.base import attach_passages, fit_k


class BM25Retriever:
    name = "bm25"

    def __init__(self, backend: SearchBackend, max_df: float):
        """`max_df`: leave out of each question the terms found in more than this fraction of the passages
        (bench/results/bm25-prune.md; 0: every term)."""
        self.backend = backend
        self.max_df = max_df

    def search(self, questions: Sequence[str], k: int, passages: bool = True) -> list[list[SearchHit]]:
        """passages False: rows and scores only (a hybrid reads the passages of its fused top k alone)."""
        results = self.backend.text_search(list(questions), fit_k(k, len(self.backend)), self.max_df)
        return attach_passages(self.backend, results) if passages else results
