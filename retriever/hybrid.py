"""Hybrid retrieval: a dense and a sparse retriever's ranked lists fused by odqa.core.fusion (`rrf` or `minmax`,
`alpha` weighing the dense list), the same fusion the Elasticsearch hybrid uses client-side."""

from __future__ import annotations

from typing import Sequence

from odqa.core.fusion import Fusion, minmax_fuse, rrf_fuse
from odqa.core.types import SearchHit
from odqa.retriever.base import attach_passages, check_k

__all__ = ["HybridRetriever", "minmax_fuse", "rrf_fuse"]  # the fusion functions, where they were first written


class HybridRetriever:
    """Fuses a dense and a sparse retriever; each is asked for `candidates` passages first."""

    name = "hybrid"

    def __init__(self, dense, sparse, method: str = "rrf", alpha: float = 0.5, candidates: int = 100, rrf_k: int = 60):
        self.fusion = Fusion.hybrid(method, alpha, rrf_k)
        self.dense, self.sparse = dense, sparse
        self.method, self.alpha, self.candidates, self.rrf_k = method, alpha, candidates, rrf_k

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        check_k(k, len(self.dense.store))
        depth = max(k, self.candidates)
        # the passages of the fused top k only: reading those of every candidate (2 x 100) cost a question
        # about 6 ms of the passage store's time
        dense_results = self.dense.search(questions, min(depth, len(self.dense.store)), passages=False)
        sparse_results = self.sparse.search(questions, min(depth, len(self.sparse.store)), passages=False)
        fused = [self.fuse(d, s, k) for d, s in zip(dense_results, sparse_results)]
        return attach_passages(self.dense.store, fused)

    def fuse(self, dense_hits: list[SearchHit], sparse_hits: list[SearchHit], k: int) -> list[SearchHit]:
        return self.fusion([dense_hits, sparse_hits], k)
