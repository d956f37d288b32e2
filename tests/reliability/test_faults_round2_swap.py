"""Issue 47, item 8: searches running while the same index is rebuilt never fail. A child process swaps two
finished indexes into one folder, again and again, through the build's own swap (odqa.core.atomic.
publish_folder); meanwhile this process opens the folder and searches it, in the library and through the CLI.
Every search answers from the old or the new index: none meets a missing folder or a part of the other index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.test_faults import DOCS, NEW_DOCS, REPO, run_cli

SWAPS = 120
SWAPPER = """import os, shutil, sys
from pathlib import Path
from odqa.core.atomic import publish_folder
target, sources = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
print("ready", flush=True)
for i in range({swaps}):
    staging = target.with_name(f".{{target.name}}.building-{{os.getpid()}}")
    shutil.copytree(sources[i % 2], staging, copy_function=os.link)
    publish_folder(staging, target)
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_searches_during_a_rebuild_get_the_old_or_the_new_index(tmp_path, capsys, bm25_index_of):
    from retriever.loading import IndexBundle

    first, second = bm25_index_of(DOCS, "old"), bm25_index_of(NEW_DOCS, "new")
    target = tmp_path / "idx"
    subprocess.run(["cp", "-al", str(first), str(target)], check=True)
    answers = {tuple(h.passage.id for h in IndexBundle.open(index).retriever("bm25").search(["subject3 shared"], 3)[0])
               for index in (first, second)}
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER.format(swaps=SWAPS), str(target), str(second), str(first)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert swapper.stdout.readline().strip() == "ready"
    opens, failures = 0, []
    try:
        while swapper.poll() is None:
            try:
                hits = IndexBundle.open(target).retriever("bm25").search(["subject3 shared"], 3)[0]
                got = tuple(h.passage.id for h in hits)
                if got not in answers:
                    failures.append(f"mixed answer {got}")
            except Exception as exc:  # any error at all is a failed search
                failures.append(f"{type(exc).__name__}: {exc}")
            opens += 1
            if opens % 10 == 0:
                try:
                    code, text = run_cli(["search", "--index", target, "--retriever", "bm25", "subject3 shared"], capsys)
                except Exception as exc:  # a traceback for the user
                    code, text = 1, f"{type(exc).__name__}: {exc}"
                if code != 0:
                    failures.append(f"CLI exit {code}: {text.strip().splitlines()[-1:]}")
    finally:
        swapper.kill() if swapper.poll() is None else None
        _, err = swapper.communicate()
    assert swapper.returncode == 0, err[-1500:]
    assert opens >= 20, f"only {opens} searches ran during the swaps"
    assert not failures, f"{len(failures)} of {opens} searches failed: {failures[:5]}"
