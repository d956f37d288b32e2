"""Fault injection (issue 26): builds killed at each stage and inside the swap, index parts truncated or
swapped, corrupt and non-UTF-8 input to every command that reads files, bad arguments. For each case: exit
0 or 2, no traceback, and the old index still answers as before.

Run alone: `python -m pytest -q tests/reliability` (BM25-only indexes except one dense case; the killed
builds are marked slow: each starts a Python process).
"""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from odqa.cli import main
from tests.reliability.cli_checks import (
    DOCS,
    NEW_DOCS,
    REPO,
    assert_clean,
    assert_one_line_no_room,
    jsonl,
    run_cli,
    run_with_file_limit,
)
from tests.retrievers import built_retriever


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An index of DOCS and its search output, as the reference every case compares against."""
    root = tmp_path_factory.mktemp("faults")
    corpus = jsonl(root / "c.jsonl", DOCS)
    out = root / "idx"
    assert main(["index", "--corpus", str(corpus), "--out", str(out), "--backends", "bm25"]) == 0
    return root, corpus, out


def answer(index: Path) -> list[str]:
    from odqa.indexes.folder import FolderIndex

    return [h.passage.id for h in built_retriever(FolderIndex.open(index), "bm25").search(["subject3 shared"], 3)[0]]


@pytest.fixture()
def index(built, tmp_path):
    root, corpus, out = built
    copy = tmp_path / "idx"
    shutil.copytree(out, copy)
    return copy


# ---- builds killed at each stage, and inside the swap -------------------------------------------------
STAGES = ["passages", "bm25", "fsync", "rename-away"]


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("stage", STAGES)
def test_killed_build_keeps_the_old_index_and_the_rerun_finishes(index, tmp_path, capsys, stage):
    before = answer(index)
    corpus = jsonl(tmp_path / "new.jsonl", NEW_DOCS)
    code = (
        "from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(corpus)!r}, out={str(index)!r}, backends=['bm25']), crash_after={stage!r})"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True).returncode == 137
    # whatever the stage, the folder answers: the old index, or the finished new one (crash after its rename away)
    assert answer(index) == before or answer(index)[0].startswith("n")
    code, text = run_cli(["index", "--corpus", corpus, "--out", index, "--backends", "bm25"], capsys)
    assert code == 0 and "Traceback" not in text, text[-800:]
    if stage in ("passages", "bm25"):
        assert "resum" in text
    assert answer(index)[0] == "n3_0"
    assert not [
        p.name for p in tmp_path.iterdir() if ".building-" in p.name or ".old-" in p.name or p.suffix == ".work"
    ]


# ---- damaged or swapped index parts --------------------------------------------------------------------
def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _other_store(index: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert (
        main(
            ["index", "--corpus", str(jsonl(tmp_path / "o.jsonl", NEW_DOCS)), "--out", str(other), "--backends", "bm25"]
        )
        == 0
    )
    shutil.copy(other / "passages" / "passages.arrow", index / "passages" / "passages.arrow")


def _biggest_bm25_file(index: Path) -> Path:
    return max(
        (p for p in (index / "bm25").iterdir() if p.is_file() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_size,
    )


DAMAGE = {
    "truncated passages.arrow": lambda idx, tmp: _truncate(idx / "passages" / "passages.arrow"),
    "passages.arrow of another index": _other_store,
    "truncated bm25 segment": lambda idx, tmp: _truncate(_biggest_bm25_file(idx)),
    "bm25 meta.json removed": lambda idx, tmp: (idx / "bm25" / "meta.json").unlink(),
    "manifest.json not JSON": lambda idx, tmp: (idx / "manifest.json").write_bytes(b"\xff\x00garbage"),
    "part manifest removed": lambda idx, tmp: (idx / "bm25" / "manifest.json").unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_parts_are_refused_in_one_line(index, tmp_path, capsys, damage):
    DAMAGE[damage](index, tmp_path)
    code, text = run_cli(["search", "--index", index, "--retriever", "bm25", "subject3"], capsys)
    assert_clean(code, text)
    assert code == 2, text
    code, text = run_cli(["verify-index", index], capsys)
    assert_clean(code, text)
    assert code == 2, text


def test_dense_parts_swapped_truncated_or_short_are_refused(tmp_path, capsys):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "dense"
    assert (
        main(["index", "--corpus", str(corpus), "--out", str(out), "--backends", "dense", "--encoder", "minilm"]) == 0
    )
    path = out / "dense" / "embeddings.npy"
    good = np.load(path)
    damages = {
        "rows shuffled": lambda: np.save(path, good[::-1].copy()),
        "fewer rows": lambda: np.save(path, good[:-3]),
        "truncated": lambda: _truncate(path),
        "not an array": lambda: path.write_bytes(b"not numpy at all"),
    }
    for name, damage in damages.items():
        damage()
        code, text = run_cli(["search", "--index", out, "--retriever", "dense", "subject3"], capsys)
        assert_clean(code, text)
        assert code == 2, (name, text)
        np.save(path, good)
    assert run_cli(["verify-index", out], capsys)[0] == 0


# ---- corrupt and non-UTF-8 input to the commands that read files ---------------------------------------
def _big_then_bad(tmp: Path) -> Path:
    path = tmp / "late.jsonl"
    lines = [json.dumps(d) + "\n" for d in DOCS] * 20  # well past the 4 KB the format sniffer reads
    path.write_bytes(
        "".join(json.dumps({**d, "id": f"{d['id']}-{i}"}) + "\n" for i, d in enumerate(DOCS * 20)).encode()
        + b'{"id": "x", "title": "bad", "text": "caf\xe9 latin-1"}\n'
    )
    assert len(lines) > 0
    return path


def _truncated(tmp: Path, opener, suffix: str) -> Path:
    path = tmp / f"c.jsonl{suffix}"
    with opener(path, "wb") as f:
        f.write("".join(json.dumps({**d, "id": f"{d['id']}-{i}"}) + "\n" for i, d in enumerate(DOCS * 40)).encode())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


CORPORA = {
    "non-UTF-8 after 4 KB": _big_then_bad,
    "truncated .gz": lambda tmp: _truncated(tmp, gzip.open, ".gz"),
    "truncated .xz": lambda tmp: _truncated(tmp, lzma.open, ".xz"),
    "non-string text": lambda tmp: jsonl(tmp / "c.jsonl", [DOCS[0], {"id": "z", "title": "t", "text": 42}]),
    "duplicate id": lambda tmp: jsonl(tmp / "c.jsonl", [DOCS[0], DOCS[1], DOCS[0]]),
    "empty id": lambda tmp: jsonl(tmp / "c.jsonl", [DOCS[0], {**DOCS[1], "id": ""}]),
    "SQuAD of the wrong schema": lambda tmp: _write(
        tmp / "s.json", '{"data": [{"title": "x", "paragraphs": [{"text": "no context"}]}]}'
    ),
    "SQuAD data not a list": lambda tmp: _write(tmp / "s.json", '{"data": {"title": "x"}}'),
    "binary file": lambda tmp: _write(tmp / "c.jsonl", b"\x00\x01\xff\xfe" * 100),
}


def _write(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize("case", list(CORPORA))
def test_bad_corpora_are_refused_and_the_old_index_is_kept(index, tmp_path, capsys, case):
    before = answer(index)
    corpus = CORPORA[case](tmp_path)
    code, text = run_cli(["index", "--corpus", corpus, "--out", index, "--backends", "bm25"], capsys)
    assert_clean(code, text)
    assert code == 2, text
    assert answer(index) == before


QUESTIONS = {
    "non-UTF-8 jsonl": ("q.jsonl", b'{"question": "caf\xe9?", "answer": ["x"]}\n'),
    "null question": ("q.jsonl", b'{"question": null, "answer": ["x"]}\n'),
    "no answers": ("q.jsonl", b'{"question": "what is subject3?", "answer": []}\n'),
    "SQuAD of the wrong schema": ("q.json", b'{"data": [{"paragraphs": [{"qas": [{"question": 3}]}]}]}'),
    "binary tsv": ("q.tsv", b"\x00\xff\xfe\x00" * 64),
}


@pytest.mark.parametrize("case", list(QUESTIONS))
def test_bad_question_files_end_in_one_line(index, tmp_path, capsys, case):
    name, data = QUESTIONS[case]
    path = _write(tmp_path / name, data)
    code, text = run_cli(
        ["eval-retrieval", "--index", index, "--questions", path, "--retriever", "bm25", "--k", "1", "2"], capsys
    )
    assert_clean(code, text)


OTHER_FILES = {
    "binary run file": ["merge-runs", "{bin}"],
    "config not UTF-8": ["search", "--config", "{cfg}", "--index", "{idx}", "subject3"],
    "rrf_k = -1": ["search", "--config", "{rrf}", "--index", "{idx}", "subject3"],
    "--out naming a file": ["index", "--corpus", "{corpus}", "--out", "{bin}", "--backends", "bm25"],
    "--words 0": ["index", "--corpus", "{corpus}", "--out", "{new}", "--words", "0"],
    "--chunk-size 0": ["index", "--corpus", "{corpus}", "--out", "{new}", "--chunk-size", "0"],
    "--batch-size 0": ["index", "--corpus", "{corpus}", "--out", "{new}", "--batch-size", "0"],
    "--per-question in a missing folder's file": [
        "eval-retrieval",
        "--index",
        "{idx}",
        "--questions",
        "{qs}",
        "--retriever",
        "bm25",
        "--k",
        "1",
        "--per-question",
        "{bin}/x.jsonl",
    ],
    "missing index": ["search", "--index", "{new}", "subject3"],
}


@pytest.mark.parametrize("case", list(OTHER_FILES))
def test_bad_files_and_arguments_end_in_one_line(built, index, tmp_path, capsys, case):
    values = {
        "bin": _write(tmp_path / f"blob-{case[:3]}.bin", b"\x00\xff" * 50),
        "cfg": _write(tmp_path / "c.toml", b'index = "caf\xe9"\n'),
        "rrf": _write(tmp_path / "r.toml", b"[retrieval]\nrrf_k = -1\n"),
        "idx": index,
        "corpus": built[1],
        "new": tmp_path / "new",
        "qs": _write(tmp_path / "q.jsonl", b'{"question": "what is subject3?", "answer": ["Passage 3"]}\n'),
    }
    argv = [a.format(**values) for a in OTHER_FILES[case]]
    code, text = run_cli(argv, capsys)
    assert_clean(code, text)
    assert code == 2, text
    assert not (tmp_path / "new").exists()


# ---- a full disk -----------------------------------------------------------------------------------------
BIG_DOCS = [
    {
        "id": f"b{i}",
        "title": f"Big {i}",
        "text": " ".join(f"Sentence {j} of big document {i} is about subject{i}." for j in range(60)),
    }
    for i in range(40)
]


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".building-" in p.name or ".old-" in p.name or ".tmp" in p.name]


@pytest.mark.slow
def test_full_disk_while_writing_passages_keeps_the_old_index_and_leaves_nothing(index, tmp_path):
    before = answer(index)
    corpus = jsonl(tmp_path / "big.jsonl", BIG_DOCS)
    run = run_with_file_limit(["index", "--corpus", corpus, "--out", index, "--backends", "bm25"], 20_000)
    assert_one_line_no_room(run)
    assert "the old index there is unchanged" in run.stderr
    assert answer(index) == before
    assert not leftovers(tmp_path) and not (tmp_path / "idx.work").exists()


@pytest.mark.slow
def test_full_disk_while_writing_bm25_keeps_the_finished_passages_to_resume(index, tmp_path, capsys):
    before = answer(index)
    corpus = jsonl(tmp_path / "big.jsonl", BIG_DOCS)
    code = (
        "from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(corpus)!r}, out={str(index)!r}, backends=['bm25']), crash_after='passages')"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True).returncode == 137
    run = run_with_file_limit(["index", "--corpus", corpus, "--out", index, "--backends", "bm25"], 4_000)
    assert_one_line_no_room(run)
    assert answer(index) == before
    work = tmp_path / "idx.work"
    assert not leftovers(tmp_path) and sorted(p.name for p in work.iterdir()) == ["passages", "passages.source.json"]
    code, text = run_cli(["index", "--corpus", corpus, "--out", index, "--backends", "bm25"], capsys)
    assert code == 0 and "resum" in text, text[-800:]
    assert answer(index)[0] == "b3_0" and not work.exists()


@pytest.mark.slow
def test_full_disk_while_writing_eval_outputs_ends_in_one_line(index, tmp_path):
    questions = jsonl(
        tmp_path / "q.jsonl",
        [{"question": f"what is subject{i % 12}?", "answer": [f"Passage {i % 12}"]} for i in range(60)],
    )
    runs = tmp_path / "runs"
    runs.mkdir()
    run = run_with_file_limit(
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
            "3",
            "--per-question",
            runs / "pq.jsonl",
            "--run-out",
            runs / "run.jsonl",
        ],
        2_000,
    )
    assert_one_line_no_room(run)
    assert "pq.jsonl" in run.stderr or "run.jsonl" in run.stderr
    assert list(runs.iterdir()) == []  # neither a partial output nor its temporary file
