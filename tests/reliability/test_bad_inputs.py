"""Issue 47, items 10 and 12: inputs and output paths that ended in a traceback, or in a message naming the
wrong cause. Each case: exit 2 (or 0 where the input is fine), no traceback, one line naming the real cause."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.reliability.cli_checks import DOCS, assert_clean, jsonl, run_cli

DEEP = "[" * 100_000 + "]" * 100_000


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def index(bm25_index_of):
    return bm25_index_of(DOCS, "inputs")


# ---- 10: nested JSON and lone surrogates -----------------------------------------------------------------
CORPORA = {
    "deeply nested JSON line": (
        "c.jsonl",
        '{"id": "a", "title": "t", "text": "x"}\n{"id": "b", "text": ' + DEEP + "}\n",
        "c.jsonl:2",
    ),
    "deeply nested SQuAD JSON": ("s.json", '{"data": ' + DEEP + "}", "s.json"),
    "lone surrogate": (
        "c.jsonl",
        '{"id": "a", "title": "t", "text": "x"}\n{"id": "b", "title": "t", "text": "bad \\ud800 here"}\n',
        "c.jsonl:2",
    ),
}


@pytest.mark.parametrize("case", list(CORPORA))
def test_bad_corpus_content_is_one_line_naming_where(tmp_path, capsys, case):
    name, data, where = CORPORA[case]
    corpus = _write(tmp_path / name, data)
    code, text = run_cli(["index", "--corpus", corpus, "--out", tmp_path / "idx", "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2 and where in text, text[-800:]


QUESTIONS = {
    "deeply nested JSONL": ("q.jsonl", '{"question": "x?", "answer": ' + DEEP + "}\n"),
    "deeply nested JSON": ("q.json", '{"data": ' + DEEP + "}"),
}


@pytest.mark.parametrize("case", list(QUESTIONS))
def test_deeply_nested_question_files_are_one_line(index, tmp_path, capsys, case):
    name, data = QUESTIONS[case]
    path = _write(tmp_path / name, data)
    code, text = run_cli(
        ["eval-retrieval", "--index", index, "--questions", path, "--retriever", "bm25", "--k", "1"], capsys
    )
    assert_clean(code, text)
    assert code == 2 and str(path) in text, text[-800:]


# ---- 10: output folders that cannot be one -----------------------------------------------------------------
def _loop(tmp: Path) -> Path:
    (tmp / "loop-a").symlink_to(tmp / "loop-b")
    (tmp / "loop-b").symlink_to(tmp / "loop-a")
    return tmp / "loop-a"


OUTS = {
    "a symlink loop": (_loop, "link"),
    "the filesystem root": (lambda tmp: Path("/"), "root"),
    "under /proc": (lambda tmp: Path("/proc/odqa-index"), "/proc"),
    "under /sys": (lambda tmp: Path("/sys/odqa-index"), "/sys"),
}


@pytest.mark.parametrize("case", list(OUTS))
def test_impossible_out_folders_are_one_line(tmp_path, capsys, case):
    make, named = OUTS[case]
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    code, text = run_cli(["index", "--corpus", corpus, "--out", make(tmp_path), "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2 and "--out" in text and named in text, text[-800:]


def test_file_outputs_under_proc_are_one_line(index, tmp_path, capsys):
    questions = jsonl(tmp_path / "q.jsonl", [{"question": "what is subject3?", "answer": ["Passage 3"]}])
    code, text = run_cli(
        [
            "eval-retrieval",
            "--index",
            index,
            "--questions",
            questions,
            "--retriever",
            "bm25",
            "--k",
            "1",
            "--per-question",
            "/proc/odqa.jsonl",
        ],
        capsys,
    )
    assert_clean(code, text)
    assert code == 2 and "--per-question" in text and "/proc" in text, text[-800:]


# ---- 12: messages that name the right cause ------------------------------------------------------------
def test_out_inside_the_corpus_folder_is_named(tmp_path, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    jsonl(folder / "c.jsonl", DOCS)
    code, text = run_cli(["index", "--corpus", folder, "--out", folder / "idx", "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2 and "inside the corpus folder" in text, text[-800:]
    assert sorted(p.name for p in folder.iterdir()) == ["c.jsonl"]


def test_fifo_corpus_is_not_called_a_folder(tmp_path, capsys):
    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    code, text = run_cli(["index", "--corpus", fifo, "--out", tmp_path / "idx", "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2 and "has no files" not in text and "not a regular file" in text, text[-800:]


def test_folder_given_as_questions_is_not_called_missing(index, tmp_path, capsys):
    code, text = run_cli(
        ["eval-retrieval", "--index", index, "--questions", tmp_path, "--retriever", "bm25", "--k", "1"], capsys
    )
    assert_clean(code, text)
    assert code == 2 and "not found" not in text and "is a folder" in text, text[-800:]


@pytest.mark.parametrize("part", ["bm25", "passages"])
def test_missing_part_manifest_names_the_index_not_the_part(index, tmp_path, capsys, part):
    import shutil

    copy = tmp_path / "idx"
    shutil.copytree(index, copy)
    (copy / part / "manifest.json").unlink()
    code, text = run_cli(["search", "--index", copy, "--retriever", "bm25", "subject3"], capsys)
    assert_clean(code, text)
    assert code == 2 and f"--out {copy}/{part}" not in text and f"--out {copy}" in text, text[-800:]


def test_utf8_bom_on_a_corpus_and_a_question_file_is_accepted(tmp_path, capsys):
    corpus = _write(tmp_path / "c.jsonl", b"\xef\xbb\xbf" + "".join(json.dumps(d) + "\n" for d in DOCS).encode())
    code, text = run_cli(["index", "--corpus", corpus, "--out", tmp_path / "idx", "--backends", "bm25"], capsys)
    assert code == 0, text[-800:]
    questions = _write(
        tmp_path / "q.jsonl", b"\xef\xbb\xbf" + b'{"question": "what is subject3?", "answer": ["Passage 3"]}\n'
    )
    code, text = run_cli(
        ["eval-retrieval", "--index", tmp_path / "idx", "--questions", questions, "--retriever", "bm25", "--k", "1"],
        capsys,
    )
    assert code == 0 and "1 questions" in text, text[-800:]


def test_question_file_refused_with_its_line_number(index, tmp_path, capsys):
    questions = _write(tmp_path / "q.jsonl", '{"question": "what is subject3?"}\n\n{"id": "q7", "question": "  "}\n')
    code, text = run_cli(["predict", "--index", index, "--retriever", "bm25", questions], capsys)
    assert_clean(code, text)
    assert code == 2 and f"{questions}:3" in text, text[-800:]


CONTROL = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")  # CONTROL's characters that act on a terminal


def test_control_characters_from_a_corpus_are_escaped_in_output_and_messages(tmp_path, capsys):
    docs = [{**d, "title": d["title"] + CONTROL, "text": d["text"] + CONTROL} for d in DOCS]
    corpus = jsonl(tmp_path / "c.jsonl", docs)
    code, text = run_cli(["index", "--corpus", corpus, "--out", tmp_path / "idx", "--backends", "bm25"], capsys)
    assert code == 0, text[-800:]
    code, text = run_cli(["search", "--index", tmp_path / "idx", "--retriever", "bm25", "subject3"], capsys)
    assert code == 0 and "Title 3" in text, text[-800:]
    assert not any(c in text for c in RAW), repr(text[:400])
    bad = jsonl(tmp_path / "dup.jsonl", [docs[0], {**docs[1], "id": "d0" + CONTROL}, {**docs[2], "id": "d0" + CONTROL}])
    code, text = run_cli(["index", "--corpus", bad, "--out", tmp_path / "idx2", "--backends", "bm25"], capsys)
    assert code == 2 and "already used" in text, text[-800:]
    assert not any(c in text for c in RAW), repr(text[-400:])


def test_control_characters_in_predict_lines_are_escaped_and_the_lines_decode_to_the_same_text(tmp_path, capsys):
    docs = [{**d, "id": d["id"] + CONTROL, "text": d["text"] + CONTROL} for d in DOCS]
    corpus = jsonl(tmp_path / "c.jsonl", docs)
    code, text = run_cli(["index", "--corpus", corpus, "--out", tmp_path / "idx", "--backends", "bm25"], capsys)
    assert code == 0, text[-800:]
    question = "what is subject3?" + CONTROL
    questions = jsonl(tmp_path / "q.jsonl", [{"id": "q1", "question": question}])
    code, text = run_cli(["predict", "--index", tmp_path / "idx", "--retriever", "bm25", questions], capsys)
    assert code == 0, text[-800:]
    assert not any(c in text for c in RAW), repr(text[-400:])
    line = json.loads(next(line for line in text.splitlines() if line.startswith('{"id": "q1"')))
    assert line["question"] == question and line["passages"][0].startswith("d3" + CONTROL)


def test_control_characters_in_asked_questions_and_their_passages_are_escaped(tmp_path, capsys):
    docs = [{**d, "title": d["title"] + CONTROL, "text": d["text"] + CONTROL} for d in DOCS]
    code, text = run_cli(
        ["index", "--corpus", jsonl(tmp_path / "c.jsonl", docs), "--out", tmp_path / "idx", "--backends", "bm25"],
        capsys,
    )
    assert code == 0, text[-800:]
    code, text = run_cli(
        ["ask", "--index", tmp_path / "idx", "--retriever", "bm25", "what is subject3?" + CONTROL, "what is subject4?"],
        capsys,
    )
    assert code == 0 and "subject3" in text and "Title" in text, text[-800:]
    assert not any(c in text for c in RAW), repr(text[-400:])


def test_a_corpus_cannot_put_the_shell_style_marks_into_its_lines(tmp_path, capsys):
    import io

    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell

    private = "\ue000\ue001\ue002"  # the private-use characters that were once the shell's style marks
    docs = [{**d, "title": d["title"] + private, "text": d["text"] + private} for d in DOCS]
    code, text = run_cli(
        ["index", "--corpus", jsonl(tmp_path / "c.jsonl", docs), "--out", tmp_path / "idx", "--backends", "bm25"],
        capsys,
    )
    assert code == 0, text[-800:]
    out = io.StringIO()
    shell = Shell(
        Pipeline(OdqaConfig.load(overrides={"index": str(tmp_path / "idx"), "retrieval.retriever": "bm25"})),
        out=out,
        color=True,
    )
    shell.run_lines(["what is subject3?", ":passages"])
    quoted = [line for line in out.getvalue().splitlines() if private in line]
    # titles and passage texts come through as they are; the only terminal codes are the shell's bold answer
    assert any("Title 3" in line for line in quoted) and any("Passage 3" in line for line in quoted), out.getvalue()
    assert not any("\x1b" in re.sub("\x1b\\[1;33m[^\x1b]*\x1b\\[0m", "", line) for line in quoted), quoted


@pytest.mark.parametrize("name", ["run.jsonl", "run.json"])
def test_deeply_nested_run_files_name_the_file(tmp_path, capsys, name):
    run = _write(tmp_path / name, ('{"id": "1", "hits": ' + DEEP + "}\n") if name.endswith("l") else "[" + DEEP + "]")
    code, text = run_cli(["merge-runs", run, "--k", "1"], capsys)
    assert_clean(code, text)
    assert code == 2 and str(run) in text, text[-800:]


@pytest.mark.parametrize("inside", ["indexes/wiki", "reader", "odqa/demo/idx"])
def test_an_output_inside_odqas_own_code_is_refused(tmp_path, capsys, inside):
    from tests.reliability.cli_checks import REPO

    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    code, text = run_cli(["index", "--corpus", corpus, "--out", Path(REPO) / inside, "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2 and "inside odqa's own code" in text and "work_indexes/" in text, text[-800:]
    assert not (Path(REPO) / inside).exists() or inside == "reader"
