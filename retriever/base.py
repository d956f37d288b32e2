"""What every retriever shares (the interface itself: `odqa.core.protocols.Retriever`)."""

from __future__ import annotations

from odqa.core.errors import OdqaError
from odqa.core.logs import get_logger
from odqa.core.protocols import SearchBackend
from odqa.core.types import SearchHit

log = get_logger(__name__)
_told: set[tuple[int, int]] = set()


def fit_k(k: int, size: int) -> int:
    """`k` for a store of `size` passages: the one behaviour of an out-of-range k for every retriever, command and
    the server. k <= 0 is refused in one line; a k beyond the store searches the whole store, said once."""
    if k <= 0:
        raise OdqaError(f"k must be a positive number, got {k}")
    if k > size:
        if (k, size) not in _told:
            _told.add((k, size))
            log.warning("k=%d is more than the %d passages of the index: all %d are searched", k, size, size)
        return size
    return k


def attach_passages(backend: SearchBackend, results: list[list[SearchHit]]) -> list[list[SearchHit]]:
    """Fill in the passages of the hits that have none with one batched read from the store."""
    rows = sorted({hit.row for hits in results for hit in hits if hit.passage is None})
    if rows:
        passages = dict(zip(rows, backend.passages(rows)))
        for hits in results:
            for hit in hits:
                if hit.passage is None:
                    hit.passage = passages[hit.row]
    return results
