"""Hybrid retrieval: fuse ranked lists from several retrievers.

* `minmax`: each list's scores min-max normalised to [0, 1], then `alpha * dense + (1 - alpha) * sparse`
  (a passage missing from one list scores 0 there). Scores of BM25 and inner products live on different
  scales, so they must be normalised before weighting.
* `rrf`: reciprocal rank fusion, sum of 1 / (rrf_k + rank); needs no score calibration at all.
"""

from __future__ import annotations

from typing import Sequence

from odqa.core.errors import OdqaError
from odqa.core.types import SearchHit
from retriever.base import check_k


def minmax_fuse(lists: Sequence[list[SearchHit]], weights: Sequence[float], k: int) -> list[SearchHit]:
    fused: dict[int, float] = {}
    passages = {}
    for hits, weight in zip(lists, weights):
        if not hits:
            continue
        scores = [h.score for h in hits]
        low, high = min(scores), max(scores)
        span = high - low
        for hit in hits:
            normalised = (hit.score - low) / span if span > 0 else 1.0
            fused[hit.row] = fused.get(hit.row, 0.0) + weight * normalised
            passages.setdefault(hit.row, hit.passage)
    return _top(fused, passages, k)


def rrf_fuse(lists: Sequence[list[SearchHit]], k: int, rrf_k: int = 60, weights: Sequence[float] | None = None) -> list[SearchHit]:
    fused: dict[int, float] = {}
    passages = {}
    weights = weights or [1.0] * len(lists)
    for hits, weight in zip(lists, weights):
        for rank, hit in enumerate(hits, 1):
            fused[hit.row] = fused.get(hit.row, 0.0) + weight / (rrf_k + rank)
            passages.setdefault(hit.row, hit.passage)
    return _top(fused, passages, k)


def _top(fused: dict[int, float], passages: dict, k: int) -> list[SearchHit]:
    # ties broken by row so results are deterministic
    best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [SearchHit(row=row, score=score, passage=passages[row], source="hybrid") for row, score in best]


class HybridRetriever:
    """Fuses a dense and a sparse retriever; each is asked for `candidates` passages first."""

    name = "hybrid"

    def __init__(self, dense, sparse, method: str = "rrf", alpha: float = 0.5, candidates: int = 100, rrf_k: int = 60):
        if method not in ("rrf", "minmax"):
            raise OdqaError(f"unknown fusion method {method!r}; use rrf or minmax")
        self.dense, self.sparse = dense, sparse
        self.method, self.alpha, self.candidates, self.rrf_k = method, alpha, candidates, rrf_k

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        check_k(k, len(self.dense.store))
        depth = max(k, self.candidates)
        dense_results = self.dense.search(questions, min(depth, len(self.dense.store)))
        sparse_results = self.sparse.search(questions, min(depth, len(self.sparse.store)))
        return [self.fuse(d, s, k) for d, s in zip(dense_results, sparse_results)]

    def fuse(self, dense_hits: list[SearchHit], sparse_hits: list[SearchHit], k: int) -> list[SearchHit]:
        if self.method == "minmax":
            return minmax_fuse([dense_hits, sparse_hits], [self.alpha, 1.0 - self.alpha], k)
        return rrf_fuse([dense_hits, sparse_hits], k, self.rrf_k)
