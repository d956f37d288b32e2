"""Dense retrieval: encode the question, then the store's inner-product search over its passage vectors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odqa.core.protocols import SearchBackend
from odqa.core.text_encoding import EncodesTexts
from odqa.core.types import SearchHit
from odqa.retriever.base import attach_passages, fit_k


class DenseRetriever:
    name = "dense"

    def __init__(self, backend: SearchBackend, encoder: EncodesTexts, batch_size: int = 64):
        """`encoder`: the question encoder, chosen and checked against the store's vectors by
        retriever.registry.question_encoder."""
        self.backend = backend
        self.encoder = encoder
        self.batch_size = batch_size

    def encode(self, questions: Sequence[str]) -> np.ndarray:
        return self.encoder.encode_queries(list(questions), batch_size=self.batch_size)

    def search(self, questions: Sequence[str], k: int, passages: bool = True) -> list[list[SearchHit]]:
        """passages False: rows and scores only (a hybrid reads the passages of its fused top k alone)."""
        fit_k(k, len(self.backend))  # refused before the questions are encoded
        return self.search_vectors(self.encode(questions), k, passages)

    def search_vectors(self, vectors: np.ndarray, k: int, passages: bool = True) -> list[list[SearchHit]]:
        """`search` of questions already encoded (`encode`)."""
        results = self.backend.vector_search(vectors, fit_k(k, len(self.backend)))
        return attach_passages(self.backend, results) if passages else results
