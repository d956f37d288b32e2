"""Hybrid retrieval: a dense and a sparse retriever's ranked lists over one store, fused by odqa.core.fusion (or by
the store itself, where the fusion names a method it runs: Elasticsearch's es-rrf)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from odqa.core.fusion import Fusion
from odqa.core.protocols import FusesItself
from odqa.core.types import SearchHit
from odqa.retriever.base import attach_passages, fit_k
from odqa.retriever.bm25 import BM25Retriever
from odqa.retriever.dense import DenseRetriever


class HybridRetriever:
    """Fuses a dense and a sparse retriever of one store; each is asked for `candidates` passages first."""

    name = "hybrid"

    def __init__(self, dense: DenseRetriever, sparse: BM25Retriever, fusion: Fusion, candidates: int):
        self.dense, self.sparse, self.fusion, self.candidates = dense, sparse, fusion, candidates
        self.backend = dense.backend

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        questions = list(questions)
        size = len(self.backend)
        k = fit_k(k, size)
        depth = min(max(k, self.candidates), size)
        vectors = self.dense.encode(questions)
        if self.fusion.server:
            # a fusion on the server's side is only chosen for a store that fuses (retriever.registry)
            fused = cast(FusesItself, self.backend).fused_search(questions, vectors, k, depth, self.fusion)
            if fused is not None:
                return attach_passages(self.backend, fused)
        # the passages of the fused top k only: reading those of every candidate (2 x 100) cost a question
        # about 6 ms of the passage store's time
        dense_results = self.dense.search_vectors(vectors, depth, passages=False)
        sparse_results = self.sparse.search(questions, depth, passages=False)
        return attach_passages(self.backend, [self.fuse(d, s, k) for d, s in zip(dense_results, sparse_results)])

    def fuse(self, dense_hits: list[SearchHit], sparse_hits: list[SearchHit], k: int) -> list[SearchHit]:
        return self.fusion([dense_hits, sparse_hits], k)
