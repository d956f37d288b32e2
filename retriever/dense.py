"""Dense retrieval: encode the question, inner-product search over precomputed passage vectors."""

from __future__ import annotations

from typing import Sequence

from odqa.indexes.vector import VectorIndex
from odqa.core.text_encoding import EncodesTexts
from odqa.core.types import SearchHit
from odqa.corpus.store import PassageStore
from odqa.retriever.base import attach_passages, check_k


class DenseRetriever:
    name = "dense"

    def __init__(self, encoder: EncodesTexts, index: VectorIndex, store: PassageStore, batch_size: int = 64,
                 check_name: bool = True):
        """check_name False: a question encoder other than the index's (a DPR pair) is taken when its
        dimension fits."""
        index.manifest.check_encoder(encoder.name if check_name else "", encoder.dim,
                                     where=str(index.path or "vector index"))
        self.encoder = encoder
        self.index = index
        self.store = store
        self.batch_size = batch_size

    def search(self, questions: Sequence[str], k: int, passages: bool = True) -> list[list[SearchHit]]:
        """passages False: rows and scores only (a hybrid reads the passages of its fused top k alone)."""
        check_k(k, len(self.store))
        vectors = self.encoder.encode_queries(list(questions), batch_size=self.batch_size)
        scores, rows = self.index.search(vectors, k)
        results = [
            [SearchHit(row=int(r), score=float(s), source=self.name) for s, r in zip(qs, qr) if r >= 0]
            for qs, qr in zip(scores, rows)
        ]
        return attach_passages(self.store, results) if passages else results
