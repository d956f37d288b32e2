"""Issue 47, items 10-11: numbers on the command line. Every numeric option goes through one typed argparse
converter (odqa.commands.options.Number), so a count of 0 or -1, a NaN or a word is refused in one line before
any work, instead of evaluating nothing (or one question) with exit 0, or ending in a traceback. The shell's
`:k` and Elasticsearch ports get the same treatment."""

from __future__ import annotations

import argparse

import pytest

from odqa.cli import build_parser
from tests.reliability.cli_checks import DOCS, assert_clean, jsonl, run_cli


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_numeric_option_is_checked_by_the_typed_converter():
    raw = [
        f"{name} {action.option_strings[0]}"
        for name, parser in _commands().items()
        for action in parser._actions
        if action.type in (int, float)
    ]
    assert not raw, f"give these a Number type (odqa.commands.options): {raw}"


def test_the_converter_bounds_every_numeric_option():
    """No numeric option takes a negative count, NaN or infinity; each names its bound when refusing."""
    from odqa.commands.options import Number

    for name, parser in _commands().items():
        for action in parser._actions:
            if isinstance(action.type, Number):
                for bad in ("nan", "inf", "ten"):
                    with pytest.raises(argparse.ArgumentTypeError):
                        action.type(bad)
                if action.type.minimum is not None:
                    assert action.type.minimum >= 0 or action.type.kind is float, (name, action.option_strings)


@pytest.fixture(scope="module")
def small(tmp_path_factory, bm25_index_of):
    root = tmp_path_factory.mktemp("args")
    questions = jsonl(
        root / "q.jsonl", [{"question": f"what is subject{i}?", "answer": [f"Passage {i}"]} for i in range(5)]
    )
    return bm25_index_of(DOCS, "args"), questions


# each: a value that used to evaluate nothing, one question, or end in a traceback
BAD = {
    "eval-retrieval --batch-size 0": ["eval-retrieval", "--batch-size", "0"],
    "eval-retrieval --batch-size -1": ["eval-retrieval", "--batch-size", "-1"],
    "eval-retrieval --limit 0": ["eval-retrieval", "--limit", "0"],
    "eval-retrieval --limit -1": ["eval-retrieval", "--limit", "-1"],
    "eval-retrieval --k 1 -5": ["eval-retrieval", "--k", "1", "-5"],
    "eval-qa --limit 0": ["eval-qa", "--limit", "0"],
    "predict --limit -1": ["predict", "{questions}", "--limit", "-1"],
    "search --k 0": ["search", "--k", "0", "subject3"],
    "search --alpha nan": ["search", "--alpha", "nan", "subject3"],
    "search --candidates -3": ["search", "--candidates", "-3", "subject3"],
    "index --words -1": ["index", "--corpus", "{questions}", "--out", "{new}", "--words", "-1"],
    "index --nlist -1": ["index", "--corpus", "{questions}", "--out", "{new}", "--nlist", "-1"],
    "build-kb --limit 0": ["build-kb", "--corpus", "{questions}", "--out", "{new}", "--limit", "0"],
    "es-index --limit -2": ["es-index", "--index", "{index}", "--limit", "-2"],
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_numbers_are_refused_before_any_work(small, tmp_path, capsys, case):
    index, questions = small
    argv = [a.format(questions=questions, new=tmp_path / "new", index=index) for a in BAD[case]]
    if argv[0] in ("eval-retrieval", "eval-qa"):
        argv += ["--index", str(index), "--questions", str(questions)]
    elif argv[0] in ("search", "predict"):
        argv += ["--index", str(index)]
    code, text = run_cli(argv, capsys)
    assert_clean(code, text)
    assert code == 2, text
    flag = next(a for a in argv if a.startswith("--") and a not in ("--index", "--questions", "--corpus", "--out"))
    assert f"argument {flag}" in text, text
    assert "questions in" not in text and not (tmp_path / "new").exists()


def test_invalid_curatedtrec_regex_names_the_file_and_line(small, tmp_path, capsys):
    index, _ = small
    trec = tmp_path / "trec.tsv"
    trec.write_text("1\tfact\twhat is subject1?\tPassage 1\n2\tfact\twhat is subject2?\tPassage (2\n")
    code, text = run_cli(
        ["eval-retrieval", "--index", index, "--questions", trec, "--retriever", "bm25", "--k", "1"], capsys
    )
    assert_clean(code, text)
    assert code == 2 and f"{trec}:2" in text and "regular expression" in text, text


@pytest.mark.parametrize("location", ["es://localhost:99999/idx", "es://localhost:0/idx", "es://localhost:http/idx"])
def test_elasticsearch_port_out_of_range_is_one_line(small, capsys, location):
    code, text = run_cli(["search", "--index", location, "--retriever", "bm25", "subject3"], capsys)
    assert_clean(code, text)
    assert code == 2 and "port" in text, text


def test_shell_k_refuses_what_is_not_a_positive_number(small):
    import io

    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell

    index, _ = small
    out = io.StringIO()
    shell = Shell(Pipeline(OdqaConfig.load(overrides={"index": str(index), "retrieval.retriever": "bm25"})), out=out)
    before = shell.k
    for arg in ("²", "⁵", "0", "-3", "1e3", "ten", "৩"):
        assert shell.handle(f":k {arg}") is True  # the shell goes on
    assert shell.k in (before, 3)  # a Bengali three is a number; nothing else changed it
    assert out.getvalue().count(":k needs a positive number") >= 6, out.getvalue()
