"""Runs out as TREC run files and DPR retrieval JSON, read by ir-measures / pytrec_eval with the figures odqa
reports; read back by merge-runs (format detected, score or RRF fusion); qrels metrics (BEIR-style sets)."""

import json

import ir_measures
import pytest
import pytrec_eval

from odqa.eval.run_formats import from_trec_id, read_trec_run, trec_id
from tests.retrieval_cli import ARTICLES, run

QUESTIONS = (
    "who discovered penicillin\t['Alexander Fleming']\nwhen was the eiffel tower completed\t['1889']\n"
    "which river carries the most water\t['Amazon']\nwhat is the highest mountain\t['Everest']\n"
    "who built the tower in paris\t['Gustave Eiffel']\n"
)


@pytest.fixture(scope="module")
def judged_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(a) + "\n" for a in ARTICLES))
    (root / "q.qa.tsv").write_text(QUESTIONS)
    run("index", "--corpus", corpus, "--out", root / "idx", "--backends", "bm25", "--words", "8")
    proc = run(
        "eval-retrieval",
        "--index",
        root / "idx",
        "--questions",
        root / "q.qa.tsv",
        "--retriever",
        "bm25",
        "--k",
        "1",
        "2",
        "3",
        "--json",
        "--trec-run",
        root / "run.trec",
        "--dpr-json",
        root / "run.dpr.json",
        "--run-out",
        root / "run.jsonl",
    )
    return root, json.loads(proc.stdout.splitlines()[-1])


def test_trec_run_scored_by_ir_measures_and_pytrec_eval_as_odqa_scores_it(judged_runs):
    root, metrics = judged_runs
    assert metrics["recall@1"] < 100.0 < metrics["recall@3"] + 1  # a set where the cut-offs differ
    # answer-match judgments of every retrieved passage, from the DPR file, as qrels
    dpr = json.loads((root / "run.dpr.json").read_text())
    qrels = {q["id"]: {c["id"]: int(c["has_answer"]) for c in q["ctxs"]} for q in dpr}
    with (root / "run.trec").open() as f:
        parsed = pytrec_eval.parse_run(f)
    assert set(parsed) == set(qrels) and all(1 <= len(docs) <= 3 for docs in parsed.values())
    run_docs = list(ir_measures.read_trec_run(str(root / "run.trec")))
    for k in (1, 2, 3):
        success = ir_measures.calc_aggregate([ir_measures.Success @ k], qrels, run_docs)[ir_measures.Success @ k]
        assert round(100.0 * success, 2) == metrics[f"recall@{k}"]
        # DPR's and Pyserini's top-k accuracy over the DPR JSON: any of the first k ctxs has an answer
        accuracy = sum(any(c["has_answer"] for c in q["ctxs"][:k]) for q in dpr) / len(dpr)
        assert round(100.0 * accuracy, 2) == metrics[f"recall@{k}"]
    assert [q["question"] for q in dpr][:1] == ["who discovered penicillin"] and dpr[0]["answers"] == [
        "Alexander Fleming"
    ]
    assert {"id", "title", "text", "score", "has_answer"} == set(dpr[0]["ctxs"][0])
    assert (root / "run.trec").read_text().splitlines()[0].split()[1:4:2] == ["Q0", "1"]
    assert (root / "run.trec").read_text().split()[5] == "odqa-bm25"


def test_merge_runs_reads_every_format_back(judged_runs):
    root, metrics = judged_runs
    keys = ("recall@1", "recall@2", "recall@3", "mrr", "questions")
    for name in ("run.jsonl", "run.dpr.json"):
        merged = json.loads(run("merge-runs", root / name, "--k", "1", "2", "3", "--json").stdout.splitlines()[-1])
        assert {k: merged[k] for k in keys} == {k: metrics[k] for k in keys}
    # a TREC run does not say which passages hold an answer: scored only with qrels
    proc = run("merge-runs", root / "run.trec", "--k", "1", check_ok=False)
    assert proc.returncode == 2 and "pass --qrels" in proc.stderr.strip().splitlines()[-1]
    # mixed formats of the same questions merge; the judgments come from the runs that have them
    merged = json.loads(
        run("merge-runs", root / "run.trec", root / "run.dpr.json", "--k", "1", "2", "3", "--json").stdout.splitlines()[
            -1
        ]
    )
    assert {k: merged[k] for k in keys} == {k: metrics[k] for k in keys}


def test_rrf_fusion_of_trec_runs_scored_with_qrels(tmp_path):
    (tmp_path / "a.trec").write_text("q1 Q0 d1 1 9.0 bm25\nq1 Q0 d2 2 8.0 bm25\nq1 Q0 d3 3 7.0 bm25\n")
    (tmp_path / "b.trec").write_text("q1 Q0 d3 1 0.9 dense\nq1 Q0 d1 2 0.8 dense\nq1 Q0 d4 3 0.7 dense\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    proc = run(
        "merge-runs",
        tmp_path / "a.trec",
        tmp_path / "b.trec",
        "--fusion",
        "rrf",
        "--qrels",
        tmp_path / "qrels.tsv",
        "--k",
        "1",
        "2",
        "--json",
        "--trec-run",
        tmp_path / "fused.trec",
    )
    metrics = json.loads(proc.stdout.splitlines()[-1])
    # RRF: d1 1/61+1/62 > d3 1/63+1/61 > d2 1/62 > d4 1/63
    assert [line.split()[2] for line in (tmp_path / "fused.trec").read_text().splitlines()] == ["d1", "d3"]
    assert (metrics["MRR@10"], metrics["R@1"], metrics["R@2"], metrics["fusion"]) == (0.5, 0.0, 1.0, "rrf")
    # score fusion keeps the best score: the BM25 run's scale wins here
    proc = run(
        "merge-runs", tmp_path / "a.trec", tmp_path / "b.trec", "--qrels", tmp_path / "qrels.tsv", "--k", "3", "--json"
    )
    assert json.loads(proc.stdout.splitlines()[-1])["MRR@10"] == pytest.approx(1 / 3, abs=1e-4)


def test_ids_with_whitespace_survive_a_trec_run(tmp_path):
    assert (
        trec_id("Super Bowl 50#0") == "Super%20Bowl%2050#0" and from_trec_id("Super%20Bowl%2050#0") == "Super Bowl 50#0"
    )
    assert from_trec_id(trec_id("100%\tdone")) == "100%\tdone"
    (tmp_path / "r.trec").write_text(
        f"{trec_id('q 1')} Q0 {trec_id('Super Bowl 50#0')} 1 2.5 t\n"
        f"{trec_id('q 1')} Q0 b 2 2.5 t\n{trec_id('q 1')} Q0 a 3 3.0 t\n"
    )
    [row] = read_trec_run(tmp_path / "r.trec")
    # trec_eval's order: by score, ties by document id descending
    assert row["id"] == "q 1" and [h[0] for h in row["hits"]] == ["a", "b", "Super Bowl 50#0"]


BEIR_CORPUS = [
    {
        "_id": "doc-a",
        "title": "Penicillin",
        "text": "Penicillin was discovered by Alexander Fleming in 1928. "
        "It was the first antibiotic. It saved millions of lives.",
    },
    {"_id": "doc-b", "title": "Everest", "text": "Mount Everest is the highest mountain on Earth. It lies in Nepal."},
    {"_id": "doc-c", "title": "Amazon", "text": "The Amazon carries more water than any other river on Earth."},
    {"_id": "doc-d", "title": "Fleming", "text": "Alexander Fleming was a Scottish physician and microbiologist."},
]


def test_eval_retrieval_with_qrels_on_a_beir_style_set(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in BEIR_CORPUS))
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "penicillin discovered by fleming", "metadata": {}}\n'
        '{"_id": "q2", "text": "highest mountain on earth", "metadata": {}}\n'
        '{"_id": "q3", "text": "a query without judgments", "metadata": {}}\n'
    )
    (tmp_path / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc-a\t2\nq1\tdoc-d\t1\nq2\tdoc-b\t1\n")
    run("index", "--corpus", tmp_path / "corpus.jsonl", "--out", tmp_path / "idx", "--backends", "bm25", "--words", "8")
    proc = run(
        "eval-retrieval",
        "--index",
        tmp_path / "idx",
        "--queries",
        tmp_path / "queries.jsonl",
        "--qrels",
        tmp_path / "test.tsv",
        "--retriever",
        "bm25",
        "--k",
        "1",
        "4",
        "--json",
        "--trec-run",
        tmp_path / "run.trec",
    )
    metrics = json.loads(proc.stdout.splitlines()[-1])
    assert len(proc.stdout.splitlines()) == 1  # the table and the summaries go to standard error under --json
    header = next(line for line in proc.stderr.splitlines() if line.startswith("|"))
    assert header.split() == "| nDCG@10 | MRR@10 | R@1 | R@4 | questions |".split()
    assert "1 of 3 questions have no relevance judgments" in proc.stderr
    lines = [line.split() for line in (tmp_path / "run.trec").read_text().splitlines()]
    q1_docs = [line[2] for line in lines if line[0] == "q1"]
    # documents (what qrels judge), each once, though the index holds several passages of doc-a
    assert q1_docs == ["doc-a", "doc-d"]
    from odqa.corpus import PassageStore

    store = PassageStore.open(tmp_path / "idx" / "passages")
    assert sum(store.get(row).doc_id == "doc-a" for row in range(len(store))) > 1
    qrels = {"q1": {"doc-a": 2, "doc-d": 1}, "q2": {"doc-b": 1}}
    expected = ir_measures.calc_aggregate(
        [ir_measures.nDCG @ 10, ir_measures.RR @ 10, ir_measures.R @ 1],
        qrels,
        ir_measures.read_trec_run(str(tmp_path / "run.trec")),
    )
    assert metrics["questions"] == 2 and metrics["MRR@10"] == 1.0 and metrics["R@4"] == 1.0
    assert metrics["R@1"] == pytest.approx(0.75)  # q1: one of its two relevant documents at 1; q2: its only one
    assert metrics["nDCG@10"] == pytest.approx(expected[ir_measures.nDCG @ 10], abs=1e-4)
    assert metrics["R@1"] == pytest.approx(expected[ir_measures.R @ 1], abs=1e-4)
    proc = run(
        "eval-retrieval",
        "--index",
        tmp_path / "idx",
        "--queries",
        tmp_path / "queries.jsonl",
        "--retriever",
        "bm25",
        "--k",
        "1",
        check_ok=False,
    )
    assert proc.returncode == 2 and "pass --qrels" in proc.stderr.strip().splitlines()[-1]


def test_pyserini_topics_searched_and_evaluated_with_their_qids(tmp_path):
    """`search --queries` and `eval-retrieval --qrels` take Pyserini's topics (qid<TAB>query) and carry the qids
    into the TREC runs (issue 77)."""
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in BEIR_CORPUS))
    (tmp_path / "topics.beir.tsv").write_text("q1\tpenicillin discovered by fleming\nq2\thighest mountain on earth\n")
    (tmp_path / "qrels.txt").write_text("q1 0 doc-a 1\nq2 0 doc-b 1\n")
    run("index", "--corpus", tmp_path / "corpus.jsonl", "--out", tmp_path / "idx", "--backends", "bm25")
    common = ["--index", tmp_path / "idx", "--queries", tmp_path / "topics.beir.tsv", "--retriever", "bm25"]
    run("search", *common, "--k", "1", "--trec-run", tmp_path / "search.trec")
    assert [line.split()[:3] for line in (tmp_path / "search.trec").read_text().splitlines()] == [
        ["q1", "Q0", "doc-a"],
        ["q2", "Q0", "doc-b"],
    ]
    proc = run("eval-retrieval", *common, "--qrels", tmp_path / "qrels.txt", "--k", "1", "--json")
    assert json.loads(proc.stdout.splitlines()[-1])["R@1"] == 1.0
