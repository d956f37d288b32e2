"""Evaluators (odqa.eval.evaluators) report the figures of the functions they wrap, with a primary metric;
run files name their fields and still read the runs written before."""

from __future__ import annotations

import json
from pathlib import Path

from odqa.corpus.questions import load_questions
from odqa.eval.evaluators import Evaluator, RetrievalEvaluator
from odqa.eval.retrieval import RunHit, evaluate_retrieval
from odqa.eval.runs import merge_runs, read_run, summarize_run
from tests.retrievers import built_retriever

REPO = Path(__file__).resolve().parent.parent


def _without_timing(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in ("seconds", "questions_per_second")}


def test_retrieval_evaluator_gives_evaluate_retrievals_figures_and_a_named_run(tmp_path):
    from odqa.demo_corpus import demo_index_path
    from odqa.indexes.folder import FolderIndex

    retriever = built_retriever(FolderIndex.open(demo_index_path(quiet=True)), "bm25")
    items = load_questions(REPO / "odqa" / "demo" / "questions.jsonl", limit=30)
    evaluator = RetrievalEvaluator(items, ks=[5, 1], run_out=tmp_path / "run.jsonl", progress=False)
    assert isinstance(evaluator, Evaluator) and evaluator.primary_metric == "recall@5"
    metrics = evaluator(retriever)
    assert _without_timing(metrics) == _without_timing(evaluate_retrieval(retriever, items, [1, 5], progress=False))
    assert 0 <= evaluator.primary(metrics) <= 100
    first = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[0])
    assert set(first["hits"][0]) == {"passage_id", "score", "holds_answer", "in_gold_paragraph"}
    rows = read_run(tmp_path / "run.jsonl")
    assert all(isinstance(h, RunHit) for row in rows for h in row["hits"])
    assert {k: summarize_run(rows, [1, 5])[k] for k in ("recall@1", "recall@5", "mrr")} == {
        k: metrics[k] for k in ("recall@1", "recall@5", "mrr")
    }


def test_a_run_written_with_positional_hits_reads_and_merges_the_same(tmp_path):
    named = {
        "id": "q1",
        "question": "who?",
        "gold": False,
        "hits": [
            {"passage_id": "p2", "score": 3.0, "holds_answer": False, "in_gold_paragraph": False},
            {"passage_id": "p7", "score": 1.5, "holds_answer": True, "in_gold_paragraph": False},
        ],
    }
    positional = {"id": "q1", "question": "who?", "hits": [["p7", 2.5, True, False], ["p9", 0.5, False, False]]}
    (tmp_path / "a.jsonl").write_text(json.dumps(named) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(positional) + "\n")
    assert read_run(tmp_path / "b.jsonl")[0]["hits"][0] == RunHit("p7", 2.5, True, False)
    merged = merge_runs([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], depth=3)
    assert [(h.passage_id, h.score) for h in merged[0]["hits"]] == [("p2", 3.0), ("p7", 2.5), ("p9", 0.5)]
    assert summarize_run(merged, [1, 2])["recall@2"] == 100.0 and summarize_run(merged, [1, 2])["recall@1"] == 0.0
