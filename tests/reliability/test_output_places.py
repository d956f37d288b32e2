"""Issue 78, class 2: an output replaces only what it should. Every output file was a temporary file renamed
over the target, so a device (`/dev/null` as root) or a pipe became a regular file, a symbolic link was replaced
by a file (its target kept the old content; `/dev/stdout` got nothing), `index --out IDX/bm25` rebuilt a part of
an index over it, `--trec-run F --dpr-json F` kept one of the two, and two builds into A and A/sub at once deleted
each other's work. Now devices and pipes are written in place, links are written through, and an output inside
an index (or a knowledge base) or overlapping another output of the command is refused in one line, as is a
build nested in one another process is writing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.cli_checks import DOCS, REPO, jsonl, run_cli

QUESTION = "subject3 shared words"


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A small BM25 index (built once for the module)."""
    from odqa.cli import main

    root = tmp_path_factory.mktemp("places")
    out = root / "idx"
    assert main(["index", "--corpus", str(jsonl(root / "c.jsonl", DOCS)), "--out", str(out), "--backends", "bm25"]) == 0
    return out


def _search(index: Path, *flags) -> list[str]:
    return ["search", "--index", str(index), "--retriever", "bm25", "--k", "3", *map(str, flags), QUESTION]


def _run_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_pipe_is_written_in_place(index, tmp_path, capsys):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waiting, as `cat run.fifo` would
    try:
        code, text = run_cli(_search(index, "--trec-run", fifo), capsys)
        assert code == 0, text
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the pipe was replaced by a file"
        received = os.read(reader, 1 << 16).decode()
    finally:
        os.close(reader)
    lines = _run_lines(received)
    assert len(lines) == 3 and all(len(line.split()) == 6 for line in lines), received


def test_a_device_is_written_in_place(index, tmp_path, capsys):
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of the test's own
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc.strerror})")
    code, text = run_cli(_search(index, "--trec-run", device, "--dpr-json", device), capsys)
    assert code == 0, text
    assert stat.S_ISCHR(os.lstat(device).st_mode), "the device was replaced by a regular file"


def test_a_link_to_a_file_is_written_through(index, tmp_path, capsys):
    real = tmp_path / "runs" / "real.trec"
    real.parent.mkdir()
    real.write_text("old run\n")
    link = tmp_path / "latest.trec"
    link.symlink_to(real)
    code, text = run_cli(_search(index, "--trec-run", link), capsys)
    assert code == 0, text
    assert link.is_symlink() and os.readlink(link) == str(real), "the link was replaced by a file"
    lines = _run_lines(real.read_text())
    assert len(lines) == 3 and "old run" not in real.read_text()
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.trec"]  # no temporary file left


def test_a_link_to_a_stream_of_the_process_is_written_through(index, tmp_path, capsys):
    """As `--trec-run /dev/stdout`: a link into /proc/self/fd (here to a pipe's write end)."""
    read_end, write_end = os.pipe()
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{write_end}")
    try:
        code, text = run_cli(_search(index, "--trec-run", link), capsys)
        os.close(write_end)
        received = os.read(read_end, 1 << 16).decode()
    finally:
        os.close(read_end)
    assert code == 0, text
    assert link.is_symlink()
    assert len(_run_lines(received)) == 3, received


def test_a_link_to_a_redirected_stream_writes_after_what_was_printed(index, tmp_path, capsys):
    """As `odqa search --trec-run /dev/stdout > out.txt`: the run lands in out.txt after what the process wrote
    there before and before what it writes after, never over it (a new open of the file started at its
    beginning)."""
    out = tmp_path / "out.txt"
    descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{descriptor}")
    try:
        os.write(descriptor, b"printed before\n")
        code, text = run_cli(_search(index, "--trec-run", link), capsys)
        os.write(descriptor, b"printed after\n")
    finally:
        os.close(descriptor)
    assert code == 0, text
    lines = out.read_text().splitlines()
    assert lines[0] == "printed before" and lines[-1] == "printed after", lines
    assert len(lines) == 5 and all(len(line.split()) == 6 for line in lines[1:-1]), lines


def test_a_folder_output_through_a_link_builds_where_the_link_points(tmp_path):
    from odqa.core.atomic import atomic_folder

    real = tmp_path / "real"
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    real.mkdir()
    (real / "old").write_text("old")
    with atomic_folder(link) as tmp:
        (tmp / "new").write_text("new")
    assert link.is_symlink() and sorted(p.name for p in real.iterdir()) == ["new"]


@pytest.mark.parametrize("where", ["bm25", "passages", "bm25/deeper", "."])
def test_an_index_inside_an_index_is_refused_before_any_work(index, where, tmp_path, capsys):
    before = {p: p.stat().st_mtime_ns for p in index.rglob("*")}
    out = index / where / "inner" if where == "." else index / where
    code, text = run_cli(["index", "--corpus", jsonl(tmp_path / "c.jsonl", DOCS[:2]), "--out", out], capsys)
    assert code == 2 and text.count("\n") == 1, text
    assert f"--out {out} lies inside {index}" in text, text
    assert {p: p.stat().st_mtime_ns for p in index.rglob("*")} == before
    assert main_search_ok(index, capsys)


def main_search_ok(index: Path, capsys) -> bool:
    code, text = run_cli(_search(index), capsys)
    return code == 0 and "subject3" in text


def test_a_run_file_inside_an_index_is_refused(index, capsys):
    code, text = run_cli(_search(index, "--trec-run", index / "bm25" / "run.trec"), capsys)
    assert code == 2 and text.count("\n") == 1 and "lies inside" in text, text
    assert not (index / "bm25" / "run.trec").exists()


@pytest.mark.parametrize("second", ["same", "through a link"])
def test_two_outputs_of_one_command_in_one_place_are_refused(index, second, tmp_path, capsys):
    target = tmp_path / "out.txt"
    other = target
    if second == "through a link":
        other = tmp_path / "alias.txt"
        other.symlink_to(target)
    code, text = run_cli(_search(index, "--trec-run", target, "--dpr-json", other), capsys)
    assert code == 2 and text.count("\n") == 1, text
    assert "--trec-run" in text and "--dpr-json" in text and "same place" in text, text
    assert not target.exists()


# holds the one-writer lock of argv[1] (as a build holds its --out) until its standard input closes
HOLDER = """
import sys
from odqa.core.atomic import writer_lock
with writer_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("held,built", [("A", "A/sub"), ("A/sub", "A")])
def test_a_build_nested_in_one_another_process_writes_is_refused(held, built, tmp_path, capsys):
    (tmp_path / "A" / "sub").mkdir(parents=True)
    (tmp_path / "A" / "sub" / "work-of-the-other").write_text("kept")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / held)],
        cwd=REPO,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        assert holder.stdout.readline().strip() == "held" and time.monotonic() < deadline, holder.stderr.read()
        corpus = jsonl(tmp_path / "c.jsonl", DOCS[:2])
        code, text = run_cli(["index", "--corpus", corpus, "--out", tmp_path / built, "--backends", "bm25"], capsys)
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
    assert code == 2 and text.count("\n") == 1, text
    assert f"is writing {tmp_path / held}" in text and f"pid {holder.pid}" in text, text
    assert (tmp_path / "A" / "sub" / "work-of-the-other").read_text() == "kept"
    assert not (tmp_path / "A" / "manifest.json").exists() and not (tmp_path / "A" / "sub" / "manifest.json").exists()
