"""`odqa cache` (issue 77): what $ODQA_HOME holds, by kind, with sizes; `clear` removes what odqa makes again on
first use (ONNX graphs, demo builds, fingerprints, leftovers of older versions) and keeps the shell's history and
anything not odqa's unless told."""

from __future__ import annotations

import json

import pytest

from odqa.cli import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "onnx" / "reader-abc").mkdir(parents=True)
    (home / "onnx" / "reader-abc" / "model.int8.onnx").write_bytes(b"x" * 3000)
    (home / "demo-index-123").mkdir()
    (home / "demo-index-123" / "manifest.json").write_text("{}")
    (home / ".demo-index-123.swap-lock").write_text("")
    (home / "fingerprints.json").write_text("{}")
    (home / "cpu-choice").mkdir()
    (home / "cpu-choice" / "abc.json").write_text("{}")
    (home / "shell_history").write_text("+who wrote hamlet\n")
    (home / "notes.txt").write_text("mine")
    monkeypatch.setenv("ODQA_HOME", str(home))
    return home


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def test_cache_lists_every_kind_with_sizes(home, capsys):
    assert main(["cache", "--json"]) == 0
    listed = _json(capsys)
    kinds = {(e["kind"], e["path"]): e["bytes"] for e in listed["entries"]}
    assert kinds[("onnx", "onnx/reader-abc")] == 3000
    assert {
        ("demo", "demo-index-123"),
        ("demo", ".demo-index-123.swap-lock"),
        ("fingerprints", "fingerprints.json"),
    } <= set(kinds)
    assert {("obsolete", "cpu-choice"), ("history", "shell_history")} <= set(kinds)
    assert listed["other"] == ["notes.txt"] and listed["bytes"] == sum(kinds.values())
    assert main(["cache"]) == 0
    shown = capsys.readouterr().out
    assert "onnx (3.0 KB)" in shown and "3.0 KB" in shown and "not odqa's cache, left alone: notes.txt" in shown


def test_cache_clear_keeps_the_history_and_what_is_not_odqas(home, capsys):
    assert main(["cache", "clear", "onnx"]) == 0
    assert not (home / "onnx" / "reader-abc").exists() and (home / "demo-index-123").exists()
    assert main(["cache", "clear"]) == 0
    assert "cleared 4 entries" in capsys.readouterr().out
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "onnx", "shell_history"]
    assert main(["cache", "clear", "history"]) == 0 and not (home / "shell_history").exists()


def test_an_unknown_kind_is_one_line(home, capsys):
    assert main(["cache", "clear", "graphs"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == ["odqa: error: no cache kind 'graphs'; name one of onnx, demo, fingerprints, obsolete, history"]
    assert (home / "onnx" / "reader-abc").exists()
