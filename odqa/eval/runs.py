"""Rankings saved per question ("runs"), so that searches over parts of a corpus merge into one ranking.

A corpus too big to encode in one go (or on one machine) is indexed in shards; each shard's search writes a
run: for every question its top passages with their scores and whether each holds an answer (judged where
the passage text is, so merging needs no corpus). Merging keeps the best-scoring passages across the runs,
which equals searching the whole corpus when the scores are comparable across shards: exact dense inner
products are (the same encoder scores a passage the same wherever it is indexed); BM25 scores of separately
built indexes are not (each shard has its own document frequencies).

One JSON object a line: {"id", "question", "gold", "hits": [{"passage_id", "score", "holds_answer",
"in_gold_paragraph"}, ...]}, written by `odqa.eval.retrieval.evaluate_retrieval` (eval-retrieval --run-out),
one line a question (`run_row`). Runs written before the fields were named (each hit a list in that order)
read the same. `read_run` gives each hit as an `odqa.eval.retrieval.RunHit` (a named tuple: `hit.score` or `hit[1]`).
TREC run files and DPR retrieval JSON (`odqa.eval.run_formats`, eval-retrieval --trec-run / --dpr-json, or
other tools' runs) read as the same rows; a TREC run does not say which passages hold an answer (None), so it
is scored against qrels.

Runs of different retrievers (BM25 from Pyserini, dense from odqa) fuse by reciprocal rank (`fusion="rrf"`, the
hybrids' own RRF: odqa.core.fusion, with `retrieval.rrf_k`), which needs no comparable scores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from odqa.core.errors import OdqaError
from odqa.core.fusion import Fusion
from odqa.core.inputs import check_input
from odqa.core.types import SearchHit
from odqa.corpus.questions import QAItem
from odqa.eval.retrieval import QuestionResult, RunHit, summarize
from odqa.eval.run_formats import detect_run_format, read_dpr_json, read_trec_run
from odqa.retriever.settings import RetrievalConfig

FUSIONS = ("score", "rrf")


def _hit(h) -> RunHit:
    if isinstance(h, dict):
        return RunHit(
            str(h["passage_id"]), float(h["score"]), _known(h["holds_answer"]), _known(h["in_gold_paragraph"])
        )
    return RunHit(str(h[0]), float(h[1]), _known(h[2]), _known(h[3]))  # a run written before the fields were named


def _known(value) -> bool | None:
    """A judgment as written; null where the run did not know it (merged from a TREC run)."""
    return None if value is None else bool(value)


def read_run(path: str | Path) -> list[dict]:
    """The rows of a run file in odqa's JSONL, TREC or DPR JSON format (detected)."""
    check_input(path, "run file", "write one with eval-retrieval --run-out, --trec-run or --dpr-json", error=OdqaError)
    path = Path(path)
    kind = detect_run_format(path)
    if kind == "trec":
        try:
            return _with_run_hits(read_trec_run(path))
        except ValueError as e:
            raise OdqaError(f"{path} is not a TREC run (qid Q0 docid rank score tag a line): {e}") from None
    if kind == "dpr-json":
        try:
            return _with_run_hits(read_dpr_json(path))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise OdqaError(
                f"{path} is not DPR retrieval JSON (a list of question, answers, ctxs): "
                f"{e.__class__.__name__} {str(e)[:120]}"
            ) from None
    if kind != "odqa":
        raise OdqaError(
            f"{path}: not a run in odqa's JSONL, TREC or DPR JSON format; write runs with "
            "eval-retrieval --run-out, --trec-run or --dpr-json"
        )
    rows = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                row["hits"] = [_hit(h) for h in row["hits"]]
                rows.append(row)
            except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
                raise OdqaError(
                    f"{path} line {n} is not a run row ({type(e).__name__}: "
                    f"{str(e)[:120]}); write runs with eval-retrieval --run-out"
                ) from None
    return rows


def _with_run_hits(rows: list[dict]) -> list[dict]:
    for row in rows:
        row["hits"] = [RunHit(*hit) for hit in row["hits"]]
    return rows


def merge_runs(
    paths: Sequence[str | Path], depth: int, fusion: str = "score", rrf_k: int = RetrievalConfig.rrf_k
) -> list[dict]:
    """The `depth` best hits per question over all runs (a passage found in several runs counts once), in the
    first run's question order. `score`: by score (shards of one corpus searched with one model); `rrf`: by
    reciprocal rank fusion with the rank constant `rrf_k` (runs of different retrievers). The runs must rank the
    same questions."""
    if fusion not in FUSIONS:
        raise OdqaError(f"unknown fusion {fusion!r}; use {' or '.join(FUSIONS)}")
    runs = [read_run(p) for p in paths]
    first = runs[0]
    by_id = [{r["id"]: r for r in run} for run in runs]
    for path, ids in zip(paths[1:], by_id[1:]):
        if set(ids) != set(by_id[0]):
            raise OdqaError(
                f"{path} and {paths[0]} rank different questions; merge runs of one question file "
                "(same --questions and --limit)"
            )
    rrf = Fusion("rrf", None, rrf_k)
    merged = []
    for row in first:
        rows = [ids[row["id"]] for ids in by_id]
        # what one run knows of a passage (holds an answer, in the gold paragraph) holds for the merged hit
        known: dict[str, list] = {}
        fused: dict[str, float] = {}
        for each in rows:
            for pid, score, holds, gold in each["hits"]:
                facts = known.setdefault(pid, [None, None])
                facts[0] = holds if facts[0] is None else facts[0]
                facts[1] = gold if facts[1] is None else facts[1]
                fused[pid] = max(fused.get(pid, score), score)
        if fusion == "rrf":
            # each passage numbered by where the runs first name it, so that ties keep that order
            number = {pid: n for n, pid in enumerate(known)}
            lists = [[SearchHit(row=number[hit[0]], score=hit[1]) for hit in each["hits"]] for each in rows]
            pids = list(known)
            best = [(pids[hit.row], hit.score) for hit in rrf(lists, depth)]
        else:
            best = sorted(fused.items(), key=lambda item: -item[1])[:depth]
        question = next((r["question"] for r in rows if r.get("question")), "")
        merged.append(
            {
                **row,
                "question": question,
                "gold": any(r.get("gold") for r in rows),
                "hits": [RunHit(pid, score, *known[pid]) for pid, score in best],
            }
        )
    return merged


def judged(rows: Sequence[dict], depth: int) -> bool:
    """Whether every question's first `depth` hits say if they hold an answer (TREC runs do not)."""
    return all(hit.holds_answer is not None for row in rows for hit in row["hits"][:depth])


def summarize_run(rows: Sequence[dict], ks: Sequence[int]) -> dict:
    """The metrics of `odqa.eval.retrieval.summarize` from a (merged, `judged`) run."""
    results = []
    for row in rows:
        first_hit = next((rank for rank, h in enumerate(row["hits"], 1) if h.holds_answer), None)
        first_gold = next((rank for rank, h in enumerate(row["hits"], 1) if h.in_gold_paragraph), None)
        # a non-empty context stands for "this question names a gold paragraph" in summarize
        item = QAItem(id=row["id"], question=row["question"], answers=[], context=" " if row.get("gold") else "")
        results.append(QuestionResult(item, [], first_hit, first_gold))
    return summarize(results, ks)
