"""Issue 26: bad input ends in one line (exit 2) or is decoded with replacement where a person typed it;
evaluation streams its per-question files and checks its outputs first; credentials never leak encoded."""

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from odqa.cli import main
from odqa.core.errors import DataFormatError, OdqaError
from odqa.corpus.questions import load_questions, with_answers
from odqa.pipeline import clean_question
from tests.answer_checks import assert_cli_answered
from tests.retrievers import built_retriever

REPO = Path(__file__).resolve().parent.parent


# ---- 8: non-UTF-8 ------------------------------------------------------------------------------------
def test_undecodable_bytes_of_a_typed_question_become_replacement_characters():
    raw = b"who painted caf\xe9 terrace?".decode("utf-8", "surrogateescape")  # as argv delivers it
    text, _ = clean_question(raw)
    assert text == "who painted caf\ufffd terrace?"
    text.encode("utf-8")  # a tokenizer can take it


@pytest.mark.subprocess
def test_the_shell_survives_a_non_utf8_line():
    from odqa.demo_corpus import demo_index_path

    index = demo_index_path(quiet=True)
    lines = b":k 1\n:retriever bm25\nwho discovered peni\xe7illin?\nWho discovered penicillin?\n"
    run = subprocess.run(
        [sys.executable, "run_qa.py", "shell", "--index", str(index), "--retriever", "bm25"],
        input=lines,
        cwd=REPO,
        capture_output=True,
        timeout=600,
    )
    err = run.stderr.decode(errors="replace")
    assert run.returncode == 0 and "Traceback" not in err, err[-800:]
    assert_cli_answered(run.stdout)


def test_a_question_file_with_bad_bytes_names_where(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'{"question": "a?", "answer": ["x"]}\n{"question": "caf\xe9?", "answer": ["y"]}\n')
    with pytest.raises(DataFormatError, match=r"q.jsonl:2: not UTF-8 text"):
        load_questions(path)


# ---- 9: questions without answers --------------------------------------------------------------------
def test_questions_without_answers_are_skipped_with_a_count(tmp_path, capsys):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "a?", "answer": ["x"]}\n{"question": "b?", "answer": []}\n')
    kept = with_answers(load_questions(path), path)
    assert [i.question for i in kept] == ["a?"]
    assert "skipped 1 of 2 questions" in capsys.readouterr().err
    path.write_text('{"question": "b?", "answer": []}\n')
    with pytest.raises(DataFormatError, match="no question has a reference answer"):
        with_answers(load_questions(path), path)


# ---- 10 and 11: streamed per-question files, outputs checked first -----------------------------------
def test_eval_retrieval_keeps_no_hits_in_memory_and_writes_both_files(tmp_path):
    from odqa.demo_corpus import demo_index_path
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.eval.runs import read_run
    from odqa.indexes.folder import FolderIndex

    bundle = FolderIndex.open(demo_index_path(quiet=True))
    items = load_questions(REPO / "odqa" / "demo" / "questions.jsonl", limit=20)
    kept = []
    import odqa.eval.retrieval as module

    original = module.summarize

    def spy(results, ks):
        kept.extend(results)
        return original(results, ks)

    module.summarize = spy
    try:
        metrics = evaluate_retrieval(
            built_retriever(bundle, "bm25"),
            items,
            [1, 5],
            per_question=tmp_path / "pq.jsonl",
            run_out=tmp_path / "run.jsonl",
            progress=False,
        )
    finally:
        module.summarize = original
    assert metrics["questions"] == 20 and all(not r.hits for r in kept)
    assert len((tmp_path / "pq.jsonl").read_text().splitlines()) == 20
    assert len(read_run(tmp_path / "run.jsonl")) == 20 and len(read_run(tmp_path / "run.jsonl")[0]["hits"]) == 5


def test_bad_output_paths_are_refused_before_the_evaluation(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    questions = REPO / "odqa" / "demo" / "questions.jsonl"
    for flag, value in (("--per-question", blocker / "pq.jsonl"), ("--run-out", tmp_path)):
        code = main(
            ["eval-retrieval", "--index", str(tmp_path / "no-index"), "--questions", str(questions), flag, str(value)]
        )
        assert code == 2
        err = capsys.readouterr().err
        assert flag in err and "no-index" not in err  # refused before the index was even opened
    assert not list(tmp_path.glob(".*.tmp"))


# ---- 13: credentials in encoded forms ------------------------------------------------------------------
def test_credentials_are_scrubbed_in_base64_and_quoted_forms():
    from odqa.config import ElasticConfig
    from odqa.indexes.elastic_connection import scrub, secrets_of

    config = ElasticConfig(hosts="http://bob:p%40ss@h:9200", username="alice", password="s3cret pw", api_key="id7:k3y")
    secrets = secrets_of(config)
    echoed = [
        base64.b64encode(b"alice:s3cret pw").decode(),
        base64.b64encode(b"bob:p@ss").decode(),
        base64.b64encode(b"id7:k3y").decode(),
        "s3cret%20pw",
    ]
    text = scrub("proxy said: Authorization: Basic " + " / ".join(echoed), secrets)
    for form in echoed:
        assert form not in text
    assert scrub("header was ApiKey QUJDREVGR0hJSktM", []) == "header was ApiKey ***"


# ---- 15: arguments checked before any work -----------------------------------------------------------
@pytest.mark.parametrize("flag", ["--words", "--chunk-size", "--batch-size"])
def test_zero_sizes_are_refused_before_the_build(tmp_path, capsys, flag):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "title": "A", "text": "Some text."}) + "\n")
    with pytest.raises(SystemExit) as refused:  # argparse, through the options' typed converter
        main(["index", "--corpus", str(corpus), "--out", str(tmp_path / "out"), flag, "0"])
    assert refused.value.code == 2
    assert f"argument {flag}: expected a positive whole number, got 0" in capsys.readouterr().err
    assert not (tmp_path / "out.work").exists()


def test_out_naming_a_file_is_refused(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "title": "A", "text": "Some text."}) + "\n")
    with pytest.raises(OdqaError, match="is a file"):
        from odqa.indexing import IndexSpec, build_index

        build_index(IndexSpec(corpus=str(corpus), out=str(corpus), backends=["bm25"]))
