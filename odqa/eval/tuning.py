"""Choosing a hybrid retriever's fusion setting on dev questions (`tune-hybrid`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odqa.core.errors import OdqaError
from odqa.core.fusion import Fusion
from odqa.eval.retrieval import judge, summarize
from odqa.retriever.hybrid import HybridRetriever
from odqa.retriever.settings import RetrievalConfig


def tune_hybrid(
    dense,
    sparse,
    items,
    alphas: Sequence[float] = (0.3, 0.5, 0.7),
    rrf_ks: Sequence[int] = (RetrievalConfig.rrf_k,),
    candidates: int = RetrievalConfig.candidates,
    ks: Sequence[int] = (1, 5, 20),
    select: str = "recall@20",
    batch_size: int = 32,
) -> dict:
    """Metrics of dense, sparse and every fusion setting on `items` (retrieving once), and the best setting
    by `select` (ties: MRR, then the simpler setting listed first). A setting leaves the other method's parameter
    at `retrieval`'s default."""
    ks = sorted(set(ks))
    if select != "mrr" and select not in {f"recall@{k}" for k in ks}:
        raise OdqaError(f"--select {select}: choose mrr or recall@K for one of --k {' '.join(map(str, ks))}")
    depth = min(max(candidates, max(ks)), len(dense.backend))
    dense_runs, sparse_runs = [], []
    for i in range(0, len(items), batch_size):
        qs = [it.question for it in items[i : i + batch_size]]
        dense_runs += dense.search(qs, depth)
        sparse_runs += sparse.search(qs, depth)

    def score(runs) -> dict:
        return summarize([judge(it, hits[: max(ks)]) for it, hits in zip(items, runs)], ks)

    settings: list[dict[str, Any]] = [{"method": "rrf", "rrf_k": r} for r in rrf_ks]
    settings += [{"method": "minmax", "alpha": a} for a in alphas]
    rows = []
    for s in settings:
        fusion = Fusion.hybrid(
            s["method"], s.get("alpha", RetrievalConfig.alpha), s.get("rrf_k", RetrievalConfig.rrf_k)
        )
        h = HybridRetriever(dense, sparse, fusion, candidates)
        fused = [h.fuse(d, sp, max(ks)) for d, sp in zip(dense_runs, sparse_runs)]
        rows.append({**s, **score(fused)})
    best = max(rows, key=lambda r: (r[select], r["mrr"]))
    return {
        "dense": score(dense_runs),
        "bm25": score(sparse_runs),
        "settings": rows,
        "best": {k: v for k, v in best.items() if k in ("method", "alpha", "rrf_k")},
        "best_metrics": best,
        "select": select,
        "candidates": candidates,
        "questions": len(items),
    }
