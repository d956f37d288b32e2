"""Rankings saved per question ("runs"), so that searches over parts of a corpus merge into one ranking.

A corpus too big to encode in one go (or on one machine) is indexed in shards; each shard's search writes a
run: for every question its top passages with their scores and whether each holds an answer (judged where
the passage text is, so merging needs no corpus). Merging keeps the best-scoring passages across the runs,
which equals searching the whole corpus when the scores are comparable across shards: exact dense inner
products are (the same encoder scores a passage the same wherever it is indexed); BM25 scores of separately
built indexes are not (each shard has its own document frequencies).

One JSON object a line: {"id", "question", "gold", "hits": [{"passage_id", "score", "holds_answer",
"in_gold_paragraph"}, ...]}, written by `odqa.eval.retrieval.write_run` (eval-retrieval --run-out). Runs
written before the fields were named (each hit a list in that order) read the same. `read_run` gives each
hit as an `odqa.eval.retrieval.RunHit` (a named tuple: `hit.score` or `hit[1]`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from odqa.core.errors import OdqaError
from odqa.corpus.questions import QAItem
from odqa.eval.retrieval import QuestionResult, RunHit, summarize


def _hit(h) -> RunHit:
    if isinstance(h, dict):
        return RunHit(str(h["passage_id"]), float(h["score"]), bool(h["holds_answer"]), bool(h["in_gold_paragraph"]))
    return RunHit(str(h[0]), float(h[1]), bool(h[2]), bool(h[3]))  # a run written before the fields were named


def read_run(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise OdqaError(f"run file {path} not found; write one with eval-retrieval --run-out")
    rows = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                row["hits"] = [_hit(h) for h in row["hits"]]
                rows.append(row)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise OdqaError(f"{path} line {n} is not a run row ({e}); write runs with eval-retrieval --run-out") from None
    return rows


def merge_runs(paths: Sequence[str | Path], depth: int) -> list[dict]:
    """The `depth` best-scoring hits per question over all runs (a passage found in several runs counts once).
    The runs must hold the same questions in the same order."""
    runs = [read_run(p) for p in paths]
    first = runs[0]
    for path, run in zip(paths[1:], runs[1:]):
        if [r["id"] for r in run] != [r["id"] for r in first]:
            raise OdqaError(f"{path} and {paths[0]} rank different questions; merge runs of one question file "
                            "(same --questions and --limit)")
    merged = []
    for rows in zip(*runs):
        best: dict[str, RunHit] = {}
        for row in rows:
            for hit in row["hits"]:
                if hit.passage_id not in best or hit.score > best[hit.passage_id].score:
                    best[hit.passage_id] = hit
        hits = sorted(best.values(), key=lambda h: -h.score)[:depth]
        merged.append({**rows[0], "hits": hits})
    return merged


def summarize_run(rows: Sequence[dict], ks: Sequence[int]) -> dict:
    """The metrics of `odqa.eval.retrieval.summarize` from a (merged) run."""
    results = []
    for row in rows:
        first_hit = next((rank for rank, h in enumerate(row["hits"], 1) if h.holds_answer), None)
        first_gold = next((rank for rank, h in enumerate(row["hits"], 1) if h.in_gold_paragraph), None)
        # a non-empty context stands for "this question names a gold paragraph" in summarize
        item = QAItem(id=row["id"], question=row["question"], answers=[], context=" " if row.get("gold") else "")
        results.append(QuestionResult(item, [], first_hit, first_gold))
    return summarize(results, ks)
