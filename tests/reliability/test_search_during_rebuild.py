"""Issue 47, item 8: searches running while the same index is rebuilt never fail. A child process swaps two
finished indexes into one folder, again and again, through the build's own swap (odqa.core.atomic.
publish_folder); meanwhile this process opens the folder and searches it, in the library and through the CLI.
Every search answers from the old or the new index: none meets a missing folder or a part of the other index."""

from __future__ import annotations

import subprocess
import sys
import time
import traceback

import pytest

from tests.reliability.cli_checks import DOCS, NEW_DOCS, REPO, run_cli
from tests.retrievers import built_retriever

SEARCHES = 60  # opens and searches in the library, every tenth one also through the CLI
MIN_SWAPS = 5
SWAPPER = """import os, shutil, sys, time
from pathlib import Path
from odqa.core.atomic import publish_folder
stop, target, sources = Path(sys.argv[1]), Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
print("ready", flush=True)
swaps, deadline = 0, time.monotonic() + 600
while not stop.exists() and time.monotonic() < deadline:
    staging = target.with_name(f".{{target.name}}.building-{{os.getpid()}}")
    shutil.copytree(sources[swaps % 2], staging, copy_function=os.link)
    publish_folder(staging, target)
    swaps += 1
print(swaps, flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("reader", ["as-is", "slowed"])
def test_searches_during_a_rebuild_get_the_old_or_the_new_index(tmp_path, capsys, monkeypatch, bm25_index_of, reader):
    """ "slowed": each file of the index is read 10 ms late, as on a loaded machine, so opening the index takes
    longer than one swap: retries alone cannot outrun the swapper, the swap lock must hold it off."""
    import odqa.indexes.integrity as integrity
    from odqa.core.atomic import publish_folder
    from odqa.indexes.folder import FolderIndex

    first, second = bm25_index_of(DOCS, "old"), bm25_index_of(NEW_DOCS, "new")
    target, stop = tmp_path / "idx", tmp_path / "stop-swapping"
    staging = tmp_path / ".idx.building-first"
    subprocess.run(["cp", "-al", str(first), str(staging)], check=True)
    publish_folder(staging, target)  # as a build publishes it: the swap lock lies beside it from the first build
    answers = {
        tuple(h.passage.id for h in built_retriever(FolderIndex.open(index), "bm25").search(["subject3 shared"], 3)[0])
        for index in (first, second)
    }
    # the swapper goes on until the searches are done, however slow either side runs on a loaded machine
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(stop), str(target), str(second), str(first)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert swapper.stdout.readline().strip() == "ready"
    if reader == "slowed":
        read_file = integrity.file_reader
        monkeypatch.setattr(integrity, "file_reader", lambda f: (time.sleep(0.01), read_file(f))[1])
    failures = []
    try:
        for search in range(1, SEARCHES + 1):
            assert swapper.poll() is None, f"the swapper stopped early: {swapper.stderr.read()[-1500:]}"
            try:
                hits = built_retriever(FolderIndex.open(target), "bm25").search(["subject3 shared"], 3)[0]
                got = tuple(h.passage.id for h in hits)
                if got not in answers:
                    failures.append(f"mixed answer {got}")
            except Exception:  # any error at all is a failed search; where it came from shows the race
                failures.append(traceback.format_exc()[-2500:])
            if search % 10 == 0:
                try:
                    code, text = run_cli(
                        ["search", "--index", target, "--retriever", "bm25", "subject3 shared"], capsys
                    )
                except Exception as exc:  # a traceback for the user
                    code, text = 1, f"{type(exc).__name__}: {exc}"
                if code != 0:
                    failures.append(f"CLI exit {code}: {text.strip()[-3000:]}")
    finally:
        stop.touch()
        try:
            out, err = swapper.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            swapper.kill()
            out, err = swapper.communicate()
    assert swapper.returncode == 0, err[-1500:]
    swaps = int(out.split()[-1])
    assert swaps >= MIN_SWAPS, f"only {swaps} swaps ran during {SEARCHES} searches"
    assert not failures, f"{len(failures)} of {SEARCHES} searches failed: {failures[:5]}"
