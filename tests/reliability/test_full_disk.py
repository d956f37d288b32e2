"""A full disk during the dense part of a build (issue 47, item 4): while a dense chunk is saved and while the
chunks are merged into embeddings.npy. Each ends in the one-line "no room left on the device" (exit 2), never
a signal (a memory-mapped write that finds no room is SIGBUS) or a traceback, and leaves no partial file
behind; the finished stages stay in the work folder to resume.

A really full filesystem: a small tmpfs mounted for the test (root only; skipped with the reason where the
machine allows no mount), filled to a few pages. The file-size limit (RLIMIT_FSIZE) of
tests/reliability/test_faults.py makes the same writes fail without privileges.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.cli_checks import DOCS, REPO, assert_one_line_no_room, jsonl, run_with_file_limit

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


# DOCS: 12 passages, 9 KB of float16 vectors (three 4 KiB pages)
DENSE = ["--backends", "dense", "--encoder", "minilm"]


@pytest.fixture()
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root; the file-size-limit cases cover the same writes")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"this machine allows no mount ({done.stderr.strip()[:120]}); "
            "the file-size-limit cases cover the same writes"
        )
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(mount: Path, leave: int) -> None:
    """Take all the free space of `mount` but `leave` bytes."""
    stat = os.statvfs(mount)
    with open(mount / "ballast", "wb") as f:
        f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))


def build_until(corpus: Path, out: Path, stage: str) -> None:
    code = (
        "from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(corpus)!r}, out={str(out)!r}, "
        f"backends=['dense'], encoder='minilm'), crash_after={stage!r})"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 137, run.stderr[-1500:]


def build(corpus: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odqa.cli", "index", "--corpus", str(corpus), "--out", str(out), *DENSE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def partial_files(work: Path) -> list[str]:
    return sorted(
        str(p.relative_to(work))
        for p in work.rglob("*")
        if p.is_file() and (p.name.startswith(".") and p.name != ".lock" or p.name == "embeddings.npy")
    )


def test_full_filesystem_while_merging_the_chunks(small_fs, tmp_path):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = small_fs / "idx"
    build_until(corpus, out, "encode")
    # room for two of the three pages of the merged vectors: a memory-mapped merge gets its first and last page
    # (numpy writes both when it sizes the file) and dies of SIGBUS on the middle one
    fill(small_fs, leave=2 * 4096)
    run = build(corpus, out)
    assert_one_line_no_room(run)
    work = small_fs / "idx.work"
    assert partial_files(work) == [], partial_files(work)
    assert list((work / "dense-chunks").glob("chunk-*.npy")), "the encoded chunks are kept to resume"
    (small_fs / "ballast").unlink()
    run = build(corpus, out)
    assert run.returncode == 0 and "resum" in run.stderr, run.stderr[-1500:]


def test_full_filesystem_while_saving_a_chunk(small_fs, tmp_path):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = small_fs / "idx"
    build_until(corpus, out, "passages")
    fill(small_fs, leave=4096)
    run = build(corpus, out)
    assert_one_line_no_room(run)
    work = small_fs / "idx.work"
    assert partial_files(work) == [], partial_files(work)
    assert (work / "passages" / "passages.arrow").exists(), "the finished passages are kept to resume"


def test_file_size_limit_while_saving_a_chunk(tmp_path):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "idx"
    build_until(corpus, out, "passages")
    run = run_with_file_limit(["index", "--corpus", corpus, "--out", out, *DENSE], 4_000)
    assert_one_line_no_room(run)
    work = tmp_path / "idx.work"
    assert partial_files(work) == [], partial_files(work)
