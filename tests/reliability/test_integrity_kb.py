"""The knowledge base is checked as an index is (issue 47, item 3): swapped vector rows, an edited title, a
truncated vectors file, an edited KB manifest and a KB built before these records are refused by `link` in
one line (exit 2) naming the file and the fix (build the KB again)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import odqa.indexes.integrity
from tests.reliability.cli_checks import assert_clean, run_cli

QUESTION = "Who was Aristotle?"


@pytest.fixture(autouse=True)
def _small_samples(monkeypatch):
    # the opening checks read each file's first and last bytes: tiny here, as a large KB's are against its size
    monkeypatch.setattr(odqa.indexes.integrity, "SAMPLE_BYTES", 64)


@pytest.fixture(scope="module")
def demo_kb() -> Path:
    from odqa.demo_corpus import demo_kb_path

    return demo_kb_path(quiet=True)


@pytest.fixture()
def kb(demo_kb, tmp_path) -> Path:
    """A copy of the demo KB whose record of its files is made with the tiny samples."""
    from odqa.indexes.manifest import Manifest

    copy = tmp_path / "kb"
    shutil.copytree(demo_kb, copy)
    manifest = Manifest.load(copy)
    if "files" in manifest.params:  # a KB that records its files
        from odqa.indexes.integrity import describe_file

        manifest.params["files"] = {rel: describe_file(copy / rel) for rel in manifest.params["files"]}
        manifest.save(copy)
    return copy


def _titles(kb: Path) -> list[str]:
    return [json.loads(line)["title"] for line in (kb / "entities.jsonl").read_text().splitlines()]


def _swap_rows(kb: Path) -> None:
    """The vectors of two entities exchanged in place (the file keeps its size and its first and last bytes)."""
    path = kb / "vectors" / "embeddings.npy"
    vectors = np.load(path, mmap_mode="r+")
    titles = _titles(kb)
    a, b = titles.index("Aristotle"), titles.index("Alps")
    vectors[[a, b]] = vectors[[b, a]]
    vectors.flush()


def _edit_title(kb: Path) -> None:
    path = kb / "entities.jsonl"
    path.write_text(path.read_text().replace('"title": "Aristotle"', '"title": "Aristotel"'))


def _truncate_vectors(kb: Path) -> None:
    path = kb / "vectors" / "embeddings.npy"
    path.write_bytes(path.read_bytes()[:-1000])


def _edit_manifest(kb: Path) -> None:
    path = kb / "manifest.json"
    data = json.loads(path.read_text())
    data["params"]["max_length"] = 16
    path.write_text(json.dumps(data))


def _as_built_before_records(kb: Path) -> None:
    """As a format-1 KB manifest reads (a format-2 one without its records is refused as edited: tests/reliability/
    test_integrity_parts.py)."""
    path = kb / "manifest.json"
    data = json.loads(path.read_text())
    data["params"].pop("files", None)
    data.pop("digest", None)
    data["format_version"] = 1
    path.write_text(json.dumps(data))


DAMAGE = {
    "two vector rows swapped": (_swap_rows, "embeddings.npy"),
    "a title edited": (_edit_title, "entities.jsonl"),
    "vectors truncated": (_truncate_vectors, "embeddings.npy"),
    "KB manifest edited": (_edit_manifest, "manifest.json"),
    "KB built before its files were recorded": (_as_built_before_records, "built before"),
}


def test_the_demo_kb_links(kb, capsys):
    code, text = run_cli(["link", "--kb", kb, QUESTION], capsys)
    assert code == 0 and "Aristotle" in text, text[-800:]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_kb_is_refused_in_one_line(kb, capsys, damage):
    change, named = DAMAGE[damage]
    change(kb)
    code, text = run_cli(["link", "--kb", kb, QUESTION], capsys)
    assert_clean(code, text)
    assert code == 2, text[-800:]
    assert named in text and "build-kb" in text and text.count("odqa: error:") == 1, text[-800:]
