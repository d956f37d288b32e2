"""What every retriever backend shares (the interface itself: `odqa.core.protocols.Retriever`)."""

from __future__ import annotations

from odqa.core.errors import OdqaError
from odqa.core.types import SearchHit
from odqa.corpus.store import PassageStore


def check_k(k: int, corpus_size: int) -> None:
    if k <= 0:
        raise OdqaError(f"k must be a positive number, got {k}")
    if k > corpus_size:
        raise OdqaError(f"k={k} is larger than the corpus ({corpus_size} passages); pass --k {corpus_size} or less")


def attach_passages(store: PassageStore, results: list[list[SearchHit]]) -> list[list[SearchHit]]:
    """Fill in the passages of all hits with one batched read from the store."""
    rows = sorted({hit.row for hits in results for hit in hits if hit.passage is None})
    passages = dict(zip(rows, store.get_rows(rows)))
    for hits in results:
        for hit in hits:
            if hit.passage is None:
                hit.passage = passages[hit.row]
    return results
