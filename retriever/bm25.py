"""BM25 retrieval over an embedded text index (see indexes/bm25.py for the engines)."""

from __future__ import annotations

from typing import Sequence

from odqa.core.errors import OdqaError
from odqa.core.types import SearchHit
from odqa.corpus.store import PassageStore
from odqa.retriever.base import attach_passages, check_k


class BM25Retriever:
    name = "bm25"

    def __init__(self, index, store: PassageStore, max_df: float = 0.0):
        """`max_df`: leave out of each question the terms found in more than this fraction of the passages
        (bench/results/bm25-prune.md); only the Tantivy engine (the default) offers it."""
        if max_df and not hasattr(index, "drop_frequent_terms"):
            raise OdqaError(f"retrieval.bm25_max_df needs the tantivy BM25 engine; this index uses "
                            f"{index.manifest.params.get('engine', 'another')}: set it to 0 or rebuild the index "
                            "with `run_qa.py index` (tantivy is the default)")
        self.index = index
        self.store = store
        self.max_df = max_df

    def search(self, questions: Sequence[str], k: int, passages: bool = True) -> list[list[SearchHit]]:
        """passages False: rows and scores only (a hybrid reads the passages of its fused top k alone)."""
        check_k(k, len(self.store))
        results = [
            [SearchHit(row=row, score=score, source=self.name) for row, score in hits]
            for hits in (self.index.search(list(questions), k, max_df=self.max_df) if self.max_df
                         else self.index.search(list(questions), k))
        ]
        return attach_passages(self.store, results) if passages else results
