"""The retrieval commands end to end on a small corpus, and every bad input ending in one clear line, exit 2."""

import json

import pytest

from tests.retrieval_cli import ARTICLES, QUESTIONS, run

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(a) + "\n" for a in ARTICLES))
    (root / "q.qa.tsv").write_text(QUESTIONS)
    run("index", "--corpus", corpus, "--out", root / "idx")
    return root


def test_search_prints_the_right_passage(small_index):
    out = run(
        "search", "--index", small_index / "idx", "--retriever", "bm25", "--k", "2", "who discovered penicillin"
    ).stdout
    assert out.splitlines()[0].strip().startswith("1.") and "Penicillin" in out.splitlines()[0]
    data = json.loads(
        run("search", "--index", small_index / "idx", "--retriever", "dense", "--json", "--k", "1", "highest mountain")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert data["hits"][0]["title"] == "Mount Everest"
    # two quoted questions are searched apart, as `ask` answers them apart
    lines = run(
        "search",
        "--index",
        small_index / "idx",
        "--retriever",
        "bm25",
        "--json",
        "--k",
        "1",
        "who discovered penicillin",
        "highest mountain",
    ).stdout.splitlines()
    assert [json.loads(line)["hits"][0]["title"] for line in lines] == ["Penicillin", "Mount Everest"]


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid"])
def test_eval_retrieval_json_contract(small_index, retriever):
    proc = run(
        "eval-retrieval",
        "--index",
        small_index / "idx",
        "--questions",
        small_index / "q.qa.tsv",
        "--retriever",
        retriever,
        "--k",
        "1",
        "2",
        "--json",
        "--per-question",
        small_index / f"{retriever}.jsonl",
    )
    assert len(proc.stdout.splitlines()) == 1  # under --json standard output holds the JSON alone
    metrics = json.loads(proc.stdout)
    assert set(metrics) >= {"recall@1", "recall@2", "mrr", "questions", "seconds"}
    assert metrics["questions"] == 3 and metrics["recall@2"] == 100.0
    # one unit (percent) and the JSON's names in the table, which goes to standard error
    assert metrics["recall@1"] <= metrics["mrr"] <= metrics["recall@2"] and metrics["mrr"] >= 50.0
    header, _, row = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in proc.stderr.splitlines()
        if line.startswith("|")
    ]
    assert header == ["recall@1 %", "recall@2 %", "mrr %", "questions"]
    assert row == [f"{metrics['recall@1']:.2f}", f"{metrics['recall@2']:.2f}", f"{metrics['mrr']:.2f}", "3"]
    rows = [json.loads(line) for line in (small_index / f"{retriever}.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["first_hit_rank"] in (1, 2)


def test_runs_of_two_corpus_halves_merge_into_the_full_corpus_ranking(small_index, tmp_path):
    halves = []
    for name, articles in (("a", ARTICLES[:2]), ("b", ARTICLES[2:])):
        corpus = tmp_path / f"{name}.jsonl"
        corpus.write_text("".join(json.dumps(a) + "\n" for a in articles))
        run("index", "--corpus", corpus, "--out", tmp_path / name, "--backends", "dense")
        run(
            "eval-retrieval",
            "--index",
            tmp_path / name,
            "--questions",
            small_index / "q.qa.tsv",
            "--retriever",
            "dense",
            "--k",
            "1",
            "2",
            "--run-out",
            tmp_path / f"{name}.run.jsonl",
        )
        halves.append(tmp_path / f"{name}.run.jsonl")
    full = json.loads(
        run(
            "eval-retrieval",
            "--index",
            small_index / "idx",
            "--questions",
            small_index / "q.qa.tsv",
            "--retriever",
            "dense",
            "--k",
            "1",
            "2",
            "--json",
            "--run-out",
            tmp_path / "full.run.jsonl",
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    merged = json.loads(run("merge-runs", *halves, "--k", "1", "2", "--json").stdout.strip().splitlines()[-1])
    assert {k: merged[k] for k in ("recall@1", "recall@2", "mrr", "questions")} == {
        k: full[k] for k in ("recall@1", "recall@2", "mrr", "questions")
    }
    # each half ranks only its own passages; the merge orders them by score as the full index does
    from odqa.eval.runs import merge_runs, read_run

    expected = [[h[0] for h in row["hits"]] for row in read_run(tmp_path / "full.run.jsonl")]
    assert [[h[0] for h in row["hits"]] for row in merge_runs(halves, 2)] == expected
    # runs of other questions do not merge
    (tmp_path / "other.jsonl").write_text(json.dumps({"id": "x", "question": "q", "hits": []}) + "\n")
    proc = run("merge-runs", halves[0], tmp_path / "other.jsonl", check_ok=False)
    assert proc.returncode == 2 and "different questions" in proc.stderr


def test_rebuild_replaces_the_index_and_a_failed_build_keeps_it(small_index, tmp_path):
    idx = small_index / "idx"
    before = (idx / "manifest.json").read_text()
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"id": "1", "title": "A", "text": "fine"}\n{not json\n')
    proc = run("index", "--corpus", bad, "--out", idx, "--backends", "bm25", check_ok=False)
    assert proc.returncode == 2
    assert (idx / "manifest.json").read_text() == before  # the good index is untouched
    assert run("search", "--index", idx, "--retriever", "bm25", "penicillin").returncode == 0


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("odqa: error:")
    for needle in needles:
        assert needle in last, last


def test_bad_inputs(small_index, tmp_path):
    idx = small_index / "idx"
    q = small_index / "q.qa.tsv"
    _one_line_error(
        run("index", "--corpus", tmp_path / "nope.jsonl", "--out", tmp_path / "o", check_ok=False), "nope.jsonl"
    )
    (tmp_path / "empty.jsonl").write_text("")
    _one_line_error(
        run("index", "--corpus", tmp_path / "empty.jsonl", "--out", tmp_path / "o", check_ok=False), "empty"
    )
    (tmp_path / "blank.jsonl").write_text('{"id": "1", "title": "A", "text": "   "}\n')
    _one_line_error(
        run(
            "index",
            "--corpus",
            tmp_path / "blank.jsonl",
            "--out",
            tmp_path / "o2",
            "--backends",
            "bm25",
            check_ok=False,
        ),
        "no passages",
    )
    _one_line_error(
        run("eval-retrieval", "--index", idx, "--questions", tmp_path / "missing.tsv", check_ok=False), "missing.tsv"
    )
    (tmp_path / "q.xml").write_text("<x/>")
    _one_line_error(
        run("eval-retrieval", "--index", idx, "--questions", tmp_path / "q.xml", check_ok=False),
        "unknown question format",
    )
    _one_line_error(run("eval-retrieval", "--index", tmp_path, "--questions", q, check_ok=False), "not an odqa index")
    _one_line_error(
        run("eval-retrieval", "--index", idx, "--questions", q, "--k", "1", "500", check_ok=False),
        "larger than the corpus",
    )
    clamped = run("search", "--index", idx, "--k", "99", "--json", "x")  # k beyond the index: all of it, said once
    assert "k=99 is more than the" in clamped.stderr and len(json.loads(clamped.stdout.splitlines()[-1])["hits"]) < 99
    refused = run("search", "--index", idx, "--k", "0", "x", check_ok=False)
    assert refused.returncode == 2 and "argument --k: expected a positive whole number, got 0" in refused.stderr
    _one_line_error(
        run(
            "index", "--corpus", small_index / "corpus.jsonl", "--out", tmp_path / "s", "--shard", "3/2", check_ok=False
        ),
        "--shard",
    )


def test_every_command_has_help_with_an_example():
    out = run("--help").stdout
    for command in ("index", "search", "eval-retrieval"):
        assert command in out
        assert "Example:" in run(command, "--help").stdout
