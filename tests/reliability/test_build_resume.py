"""Issue 47, items 6, 7 and 9: a rerun of an interrupted build reuses exactly the work that is still valid.

* 6: a resumed build keeps the precision (and the encoder) that `--precision auto` chose when it started, as
  recorded in its work folder, and says so, instead of refusing because `auto` would choose otherwise now.
* 7: a build killed after its dense part was complete, or inside the final swap, encodes no passage again; a
  rerun with other encoding settings does not reuse that dense part.
* 9: the resume key reads the corpus's content: a corpus replaced by another of the same size, with the same
  modification time and inode, is never resumed with its stale passages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.cli_checks import DOCS, REPO, jsonl, run_cli

DENSE = ["--backends", "dense", "--encoder", "minilm"]


def _killed_build(corpus: Path, out: Path, stage: str, backends=("dense",), **spec) -> None:
    extra = "".join(f", {k}={v!r}" for k, v in spec.items())
    code = (
        "from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(corpus)!r}, out={str(out)!r}, backends={list(backends)!r}, "
        f"encoder='minilm'{extra}), crash_after={stage!r})"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 137, run.stderr[-1500:]


def _dense_manifest(out: Path) -> dict:
    return json.loads((out / "dense" / "manifest.json").read_text())


@pytest.fixture()
def no_encoding(monkeypatch):
    """Any passage encoded from here on fails the test."""
    from odqa.core.encoder import TextEncoder

    def refuse(*args, **kwargs):
        raise AssertionError("passages were encoded again")

    monkeypatch.setattr(TextEncoder, "encode_passages", refuse)


# ---- 6: the precision an interrupted build started with -------------------------------------------------
def test_resumed_build_keeps_the_precision_it_started_with(tmp_path, capsys):
    from odqa.indexing import IndexSpec, asked_plan

    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "idx"
    code, text = run_cli(
        ["index", "--corpus", corpus, "--out", out, *DENSE, "--chunk-size", "4", "--shard", "0/3"], capsys
    )
    assert code == 0 and "shard 0/3 finished" in text, text[-800:]
    # the first run's `auto` chose another precision than it would here now (another CPU verdict, a busy machine)
    auto_now = asked_plan(IndexSpec(corpus=str(corpus), out=str(out), encoder="minilm")).precision
    first = "bf16" if auto_now == "fp32" else "fp32"
    records = [p for p in (tmp_path / "idx.work").rglob("*.json") if "precision" in json.loads(p.read_text())]
    assert records
    for record in records:
        data = json.loads(record.read_text())
        data["precision"] = first
        record.write_text(json.dumps(data))
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, *DENSE, "--chunk-size", "4"], capsys)
    assert code == 0, text[-800:]
    assert "remove" not in text and f"precision {first}" in text, text[-800:]
    assert _dense_manifest(out)["params"]["passage_precision"] == first


# ---- 7: a finished dense part is never encoded again ----------------------------------------------------
@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("stage", ["dense", "fsync", "rename-away"])
@pytest.mark.usefixtures("no_encoding")
def test_build_killed_after_the_dense_part_encodes_nothing_again(tmp_path, capsys, stage):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "idx"
    _killed_build(corpus, out, stage)
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, *DENSE], capsys)
    assert code == 0 and "Traceback" not in text, text[-800:]
    code, text = run_cli(["search", "--index", out, "--retriever", "dense", "--encoder", "minilm", "subject3"], capsys)
    assert code == 0 and "(d3_0)" in text.splitlines()[0], text[-800:]
    assert not (tmp_path / "idx.work").exists()


@pytest.mark.subprocess
@pytest.mark.slow
def test_finished_dense_part_of_other_settings_is_never_used(tmp_path, capsys):
    """Asked explicitly for other settings, the rerun names them and the way to resume or start over (a work
    folder may hold other machines' shards); it never publishes the vectors of the first settings."""
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "idx"
    _killed_build(corpus, out, "dense", max_length=128)
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, *DENSE, "--max-length", "64"], capsys)
    assert code == 2 and "Traceback" not in text and "max_length 128 (now 64)" in text, text[-800:]
    assert not out.exists()
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, *DENSE, "--max-length", "128"], capsys)
    assert code == 0 and _dense_manifest(out)["params"]["max_length"] == 128, text[-800:]


# ---- 9: the resume key reads the corpus's content ------------------------------------------------------
@pytest.mark.subprocess
@pytest.mark.slow
def test_corpus_replaced_with_the_same_size_and_times_is_not_resumed(tmp_path, capsys):
    from odqa.indexes.folder import FolderIndex

    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "idx"
    _killed_build(corpus, out, "passages", backends=("bm25",))
    before = os.stat(corpus)
    data = corpus.read_bytes()
    with open(corpus, "r+b") as f:  # in place: the same inode, the same size
        f.write(data.replace(b"subject3", b"subjectX"))
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(corpus)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, "--backends", "bm25"], capsys)
    assert code == 0, text[-800:]
    texts = [t for batch in FolderIndex.open(out).store.iter_batches(100) for t in batch["text"]]
    assert any("subjectX" in t for t in texts) and not any("subject3 " in t for t in texts)
