"""Issue 65, item 6: two writers, one output folder.

Every writer of an output folder (index, build-kb, train-*, export, the demo corpus's first-use build, anything
that publishes a folder) takes the one lock `index` takes (`.NAME.lock` beside it, odqa.core.atomic.writer_lock):

* a second writer that named the folder (`--out`, `--output`) is refused at once, in one line naming the
  folder and the process writing it, before any work; neither silently replaces the other's folder;
* a second first use of the demo corpus (two `ask` or `search` at once in a fresh $ODQA_HOME) waits for the
  first one's build and then uses it, instead of failing with "choose another --out" (it named no --out).

Each case runs two real processes: the first holds the folder (blocked at a point the test releases), the
second is started while it does. Waits are bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.cli_checks import DOCS, REPO, assert_clean, jsonl, run_cli

pytestmark = pytest.mark.subprocess
WAIT_S = 120

# holds the build lock of argv[1] (the library's, as `index` takes it) until its standard input closes
HOLDER = """
import sys
from odqa.indexes.integrity import build_lock
with build_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""

# `build-kb` whose build blocks (the CLI's lock held, if any) until SIGNALS/go exists, then writes a KB of its own
FIRST_BUILD_KB = (
    """
import sys, time
from pathlib import Path
from types import SimpleNamespace
from odqa.linker.kb import KnowledgeBase

class Built:  # what run_build_kb prints of a KB
    dim, encoder, manifest, language_names = 0, "first", SimpleNamespace(corpus_fingerprint="f"), ["English"]
    def __len__(self):
        return 0

signals = Path(sys.argv[1])

def build(cls, documents, out, **options):
    from odqa.core.atomic import atomic_folder
    (signals / "first-holds").touch()
    deadline = time.monotonic() + %d
    while not (signals / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with atomic_folder(out) as tmp:
        (tmp / "manifest.json").write_text('{"built by": "the first build-kb"}')
    return Built()

KnowledgeBase.build = classmethod(build)
from odqa.cli import main
sys.exit(main(["build-kb", "--corpus", sys.argv[2], "--out", sys.argv[3]]))
"""  # noqa: UP031 -- a script's text: `%` keeps its braces literal
    % WAIT_S
)

# `search` over the demo corpus in a fresh $ODQA_HOME (its index built BM25-only, for speed); argv: ROLE SIGNALS.
# Each build records that it ran; the first one's blocks inside the build (its lock held) until SIGNALS/go exists.
DEMO_SEARCH = (
    """
import sys, time
from dataclasses import replace
from pathlib import Path
import odqa.demo_corpus
import odqa.indexing as indexing

role, signals = sys.argv[1], Path(sys.argv[2])
odqa.demo_corpus.model_fingerprint = lambda name: name  # no encoder weights hashed: the test's speed
real_build, real_passages = indexing.build_index, indexing._passages

def build_index(spec, *args, **kwargs):
    (signals / f"{role}-builds").touch()
    return real_build(replace(spec, backends=["bm25"]), *args, **kwargs)

def passages(*args, **kwargs):
    if role == "first":
        (signals / "first-holds").touch()
        deadline = time.monotonic() + %d
        while not (signals / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return real_passages(*args, **kwargs)

indexing.build_index, indexing._passages = build_index, passages
from odqa.cli import main
sys.exit(main(["search", "--retriever", "bm25", "--k", "1", "Who discovered penicillin?"]))
"""  # noqa: UP031 -- a script's text: `%` keeps its braces literal
    % WAIT_S
)


def _wait_for(path: Path, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert process.poll() is None, f"{what} ended first: {_output(process)}"
        assert time.monotonic() < deadline, f"{what}: {path.name} never appeared"
        time.sleep(0.05)


def _output(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=WAIT_S)
    return (out or "") + (err or "")


def _start(code: str, *args, env: dict | None = None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def _one_error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith("odqa: error:")]
    assert len(lines) == 1, text[-1500:]
    return lines[0]


@pytest.fixture()
def holder(tmp_path):
    """`holder(folder)`: another process holding the folder's build lock until the test ends; yields its pid."""
    started = []

    def hold(folder: Path) -> int:
        process = _start(HOLDER, folder, stdin=subprocess.PIPE)
        assert process.stdout.readline().strip() == "held", _output(process)
        started.append(process)
        return process.pid

    yield hold
    for process in started:
        process.stdin.close()
        process.wait(timeout=WAIT_S)


# ---- a second writer that named the folder is refused in one line ------------------------------------------
def test_two_build_kb_into_one_out_the_second_is_refused(tmp_path):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS[:3])
    out = tmp_path / "kb"
    signals = tmp_path / "signals"
    signals.mkdir()
    first = _start(FIRST_BUILD_KB, signals, corpus, out)
    try:
        _wait_for(signals / "first-holds", first, "the first build-kb")
        second = subprocess.run(
            [sys.executable, "-m", "odqa.cli", "build-kb", "--corpus", str(corpus), "--out", str(out), "--limit", "3"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        (signals / "go").touch()
    first_text = _output(first)
    assert first.returncode == 0, first_text[-1500:]
    text = second.stdout + second.stderr
    assert second.returncode == 2 and "Traceback" not in text, text[-1500:]
    line = _one_error_line(text)
    assert f"is writing {out}" in line and f"pid {first.pid}" in line and "--out" in line, line
    # the first build's KB is the one in place: the second replaced nothing, before or after
    assert json.loads((out / "manifest.json").read_text()) == {"built by": "the first build-kb"}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".kb")]  # no lock file, no leftovers


def _missing(tmp_path: Path, name: str) -> str:
    return str(tmp_path / f"missing-{name}")


# every command that writes a folder, with inputs that do not exist: whatever it would refuse later, the folder
# another process is writing comes first, before any work (and nothing is written)
FOLDER_WRITERS = {
    "index": lambda t: ["index", "--corpus", _missing(t, "c.jsonl"), "--backends", "bm25", "--out"],
    "build-kb": lambda t: ["build-kb", "--corpus", _missing(t, "c.jsonl"), "--out"],
    "train-reader": lambda t: ["train-reader", "--train", _missing(t, "train.json"), "--output"],
    "average-readers": lambda t: ["average-readers", "--models", _missing(t, "a"), _missing(t, "b"), "--output"],
    "train-retriever": lambda t: ["train-retriever", "--train", _missing(t, "train.jsonl"), "--output"],
    "interpolate-encoders": lambda t: ["interpolate-encoders", "--tuned", _missing(t, "tuned"), "--output"],
    "distill-encoder": lambda t: ["distill-encoder", "--index", _missing(t, "idx"), "--output"],
    "train-linker": lambda t: [
        "train-linker",
        "--kb",
        _missing(t, "kb"),
        "--data-dir",
        _missing(t, "data"),
        "--output",
    ],
}


@pytest.mark.parametrize("command", list(FOLDER_WRITERS))
def test_a_folder_another_process_writes_is_refused_by_every_writer(tmp_path, capsys, holder, command):
    out = tmp_path / "out"
    pid = holder(out)
    argv = [*FOLDER_WRITERS[command](tmp_path), out]
    code, text = run_cli(argv, capsys)
    assert_clean(code, text)
    line = _one_error_line(text)
    assert code == 2 and f"is writing {out}" in line and f"pid {pid}" in line and argv[-2] in line, text[-1500:]
    assert not out.exists()


def test_a_library_writer_of_a_folder_another_process_writes_is_refused(tmp_path, holder):
    """`atomic_folder` (behind export, average-readers, interpolate-encoders, the KB, checkpoints) takes the lock
    too: a Python caller is refused the same way, and writes nothing."""
    from odqa.core.atomic import atomic_folder
    from odqa.core.errors import OdqaError

    out = tmp_path / "model"
    pid = holder(out)
    with pytest.raises(OdqaError, match=f"is writing {out} \\(pid {pid}"):
        with atomic_folder(out) as tmp:
            (tmp / "weights").write_text("the second writer's")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".building-" in p.name]


def test_the_lock_leaves_nothing_beside_a_refused_or_finished_output(tmp_path, capsys):
    """The command holds its output folder's lock from the start; a refusal later (here: an unknown backend)
    leaves neither the lock file nor the folders made on the way to it."""
    corpus = jsonl(tmp_path / "c.jsonl", DOCS)
    out = tmp_path / "new" / "deeper" / "idx"
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, "--backends", "nonsense"], capsys)
    assert code == 2 and not (tmp_path / "new").exists(), text[-800:]
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, "--backends", "bm25"], capsys)
    assert code == 0, text[-800:]
    # the readers' lock stays, beside the index and its knowledge base; no writer's lock or scratch folder
    assert sorted(p.name for p in out.parent.iterdir()) == [".idx.swap-lock", "idx", "idx-kb"]


# ---- a second first use of the demo corpus waits for the first's build --------------------------------------
def test_two_first_uses_of_the_demo_corpus_share_one_build(tmp_path):
    home = tmp_path / "home"  # fresh: the demo index does not exist yet
    signals = tmp_path / "signals"
    signals.mkdir()
    env = {"ODQA_HOME": str(home)}
    first = _start(DEMO_SEARCH, "first", signals, env=env)
    second = None
    try:
        _wait_for(signals / "first-holds", first, "the first search")
        second_log = tmp_path / "second.log"
        with second_log.open("w") as log:
            second = subprocess.Popen(
                [sys.executable, "-c", DEMO_SEARCH, "second", str(signals)],
                cwd=REPO,
                text=True,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, **env},
            )
        deadline = time.monotonic() + WAIT_S
        while "waiting for another odqa process" not in second_log.read_text() and second.poll() is None:
            assert time.monotonic() < deadline, second_log.read_text()[-1500:]
            time.sleep(0.05)
    finally:
        (signals / "go").touch()
    first_text = _output(first)
    second_out = second.communicate(timeout=WAIT_S)[0] if second else ""
    second_text = second_out + second_log.read_text()
    assert first.returncode == 0 and "Penicillin" in first_text, first_text[-1500:]
    assert second.returncode == 0 and "Traceback" not in second_text, second_text[-1500:]
    assert "choose another --out" not in second_text and "Penicillin" in second_out, second_text[-1500:]
    line = next(line for line in second_text.splitlines() if "waiting for another odqa process" in line)
    assert f"pid {first.pid}" in line and "demo index" in line, line
    assert (signals / "first-builds").exists() and not (signals / "second-builds").exists()  # built once
    # one index; no writer's lock file, no work folder (the readers' swap-lock stays, as beside every index)
    demo = [p.name for p in home.iterdir() if "demo-index" in p.name and not p.name.endswith(".swap-lock")]
    assert len(demo) == 1 and demo[0].startswith("demo-index-"), demo
