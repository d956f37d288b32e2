"""FAISS is needed only where vectors are searched: the command line, reader training and BM25 answering start
without it, and a dense search names the missing package in one line."""

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

WITHOUT_FAISS = "import sys\nsys.modules['faiss'] = None  # `import faiss` now raises ImportError\nfrom odqa.cli import main\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_FAISS + code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.subprocess
def test_commands_that_search_no_vectors_run_without_faiss():
    out = _run("import reader.train\nsys.exit(main(['train-reader', '--help']))\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--max-minutes" in out.stdout
    out = _run("sys.exit(main(['ask', '--retriever', 'bm25', '--no-linker', 'Who discovered penicillin?']))\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Fleming" in out.stdout


@pytest.mark.subprocess
def test_a_dense_search_without_faiss_names_the_package_in_one_line():
    out = _run("sys.exit(main(['ask', '--retriever', 'dense', '--no-linker', 'Who discovered penicillin?']))\n")
    errors = [line for line in out.stderr.splitlines() if line.startswith("odqa: error")]
    assert out.returncode == 2 and len(errors) == 1 and "FAISS is not installed" in errors[0]
