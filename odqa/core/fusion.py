"""Fusion of ranked lists of SearchHits: the one implementation behind every fusion (the hybrid over any store,
retriever/hybrid.py; merge-runs' rrf, odqa/eval/runs.py; the entity bonus, linker/guided.py) and the
per-question scaling of retrieval scores the reader weighs (odqa/pipeline.py).

Shaped like Haystack's DocumentJoiner: a `Fusion(method, weights, rrf_k)` called on several ranked lists gives
one list, best first, ties broken by row (so results are deterministic).

* `rrf`: reciprocal rank fusion, sum of weight / (rrf_k + rank); needs no score calibration at all.
* `minmax`: each list's scores min-max scaled to [0, 1], then summed with their weights (a hybrid's
  `alpha * dense + (1 - alpha) * sparse`); a passage missing from a list scores 0 there. BM25 scores and
  inner products live on different scales, so they must be scaled before weighting.
* `auto` (`resolve_fusion`): the setting `odqa tune-hybrid --record` chose on a dev split
  and wrote into the index, else the index language's default: `minmax` for Korean and Chinese, where it beat
  `rrf` on every set measured (bench/results/retrieval-cjk.md; chosen on CMRC 2018 trial), `rrf` elsewhere.
* `entity_bonus_fuse`: a retriever's list min-max scaled, plus `bonus` x the (unscaled) scores of the
  linked entities' passages.

A new method is one function and one line in `FUSIONS`; the settings (method, alpha, rrf_k) and their defaults
are `retrieval.fusion`, `alpha` and `rrf_k` (retriever.settings.RetrievalConfig).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from odqa.core.registry import Registry
from odqa.core.types import Passage, SearchHit


def minmax_scale(scores: Sequence[float]) -> list[float]:
    """Scores mapped to [0, 1] (lowest 0, highest 1); all 1.0 when they are all equal."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    span = high - low
    return [(s - low) / span if span > 0 else 1.0 for s in scores]


def rrf_fuse(
    lists: Sequence[list[SearchHit]], k: int, rrf_k: int, weights: Sequence[float] | None = None
) -> list[SearchHit]:
    fused: dict[int, float] = {}
    passages: dict[int, Passage | None] = {}
    weights = weights or [1.0] * len(lists)
    for hits, weight in zip(lists, weights):
        for rank, hit in enumerate(hits, 1):
            fused[hit.row] = fused.get(hit.row, 0.0) + weight / (rrf_k + rank)
            passages.setdefault(hit.row, hit.passage)
    return top_hits(fused, passages, k, fusion="rrf")


def minmax_fuse(lists: Sequence[list[SearchHit]], weights: Sequence[float], k: int) -> list[SearchHit]:
    fused: dict[int, float] = {}
    passages: dict[int, Passage | None] = {}
    for hits, weight in zip(lists, weights):
        for hit, scaled in zip(hits, minmax_scale([h.score for h in hits])):
            fused[hit.row] = fused.get(hit.row, 0.0) + weight * scaled
            passages.setdefault(hit.row, hit.passage)
    return top_hits(fused, passages, k, fusion="minmax")


# the label of a score the entity bonus made (SearchHit.fusion)
ENTITY_BONUS_FUSION = "minmax+entity"


def entity_bonus_fuse(hits: Sequence[SearchHit], extra: Sequence[SearchHit], bonus: float, k: int) -> list[SearchHit]:
    """Retriever hits (scores min-max scaled) plus `bonus` x entity-passage score; top k. Each hit keeps its
    source (an entity passage the retriever missed: "entity")."""
    if bonus <= 0 or not extra:
        return list(hits)[:k]
    fused: dict[int, float] = {}
    by_row: dict[int, SearchHit] = {}
    for h, scaled in zip(hits, minmax_scale([h.score for h in hits])):
        fused[h.row] = scaled
        by_row[h.row] = h
    for h in extra:
        fused[h.row] = fused.get(h.row, 0.0) + bonus * h.score
        by_row.setdefault(h.row, h)
    return [
        SearchHit(
            row=row,
            score=score,
            passage=by_row[row].passage,
            source=by_row[row].source or "entity",
            fusion=ENTITY_BONUS_FUSION,
        )
        for row, score in _best(fused, k)
    ]


def top_hits(
    fused: dict[int, float], passages: dict, k: int, source: str = "hybrid", fusion: str = ""
) -> list[SearchHit]:
    """The best `k` of `fused` scores as hits, labelled with the `fusion` that made their scores."""
    return [
        SearchHit(row=row, score=score, passage=passages[row], source=source, fusion=fusion)
        for row, score in _best(fused, k)
    ]


def score_label(hit: SearchHit) -> str:
    """A hit's score with what made it where it is no retriever's own ("0.033 rrf", "0.847 minmax"): the scores of
    different fusions live on different scales, so a fused one is never shown alone."""
    return f"{hit.score:.3f}" + (f" {hit.fusion}" if hit.fusion else "")


def _best(fused: dict[int, float], k: int) -> list[tuple[int, float]]:
    # ties broken by row so results are deterministic
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]


def _rrf(lists, k, weights, rrf_k):
    return rrf_fuse(lists, k, rrf_k)  # unweighted, as the hybrids have always fused


def _minmax(lists, k, weights, rrf_k):
    return minmax_fuse(lists, weights, k)


# The ways to fuse a hybrid's lists (`retrieval.fusion`, `--fusion`): (lists, k, weights, rrf_k) -> hits.
FUSIONS: Registry[Callable[..., list[SearchHit]]] = Registry("fusion method", {"rrf": _rrf, "minmax": _minmax})


AUTO = "auto"
# Untuned indexes in these languages fuse by minmax (the config's alpha); every other language by rrf.
LANGUAGE_FUSION = {"ko": "minmax", "zh": "minmax"}


def resolve_fusion(
    method: str, alpha: float, rrf_k: int, *, tuned: dict | None = None, language: str = "en"
) -> tuple[str, float, int]:
    """(method, alpha, rrf_k) a hybrid runs with. `auto`: the index's `tuned` record (method, alpha, rrf_k from
    `tune-hybrid --record`) where there is one, else LANGUAGE_FUSION's method for `language` with the alpha and
    rrf_k given. A named method is used as given."""
    if method != AUTO:
        return method, alpha, rrf_k
    if tuned and tuned.get("method") in FUSIONS:
        return tuned["method"], float(tuned.get("alpha", alpha)), int(tuned.get("rrf_k", rrf_k))
    return LANGUAGE_FUSION.get(language, "rrf"), alpha, rrf_k


class Fusion:
    """One fusion setting, applied to each question's lists: `Fusion("minmax", [a, 1 - a], rrf_k)(lists, k)`.
    `server`: a method the store runs on its side (odqa.core.protocols.FusesItself), asked first; this fusion is
    its fallback where the store cannot."""

    def __init__(self, method: str, weights: Sequence[float] | None, rrf_k: int, server: str = ""):
        self._fuse = FUSIONS.get(method)
        self.method, self.weights, self.rrf_k = method, list(weights) if weights is not None else None, rrf_k
        self.server = server

    @classmethod
    def hybrid(cls, method: str, alpha: float, rrf_k: int, server: str = "") -> Fusion:
        """A dense-then-sparse hybrid's fusion: minmax weighs dense by alpha, sparse by 1 - alpha."""
        return cls(method, [alpha, 1.0 - alpha], rrf_k, server)

    @property
    def alpha(self) -> float | None:
        """The dense list's weight of a hybrid's fusion (`hybrid`)."""
        return self.weights[0] if self.weights else None

    def describe(self) -> str:
        if self.method == "minmax" and self.weights:
            return f"minmax alpha={self.weights[0]:g}"
        return f"rrf k={self.rrf_k}" if self.method == "rrf" else self.method

    def __call__(self, lists: Sequence[list[SearchHit]], k: int) -> list[SearchHit]:
        weights = self.weights if self.weights is not None else [1.0] * len(lists)
        return self._fuse(lists, k, weights, self.rrf_k)
