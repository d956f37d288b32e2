"""FAISS is optional: without it the command line, reader training and the whole default `ask` (hybrid retrieval over
a flat index, the linker's candidate search) run, the flat index searched as a matrix product with FAISS's
results; what needs FAISS (hnsw, ivf) or another optional package is refused in one line before any work."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.answer_checks import assert_answer_read_from
from tests.conftest import REPO_ROOT

WITHOUT_FAISS = (
    "import sys\nsys.modules['faiss'] = None  # `import faiss` now raises ImportError\nfrom odqa.cli import main\n"
)


def _run(code: str, hide: str = "faiss") -> subprocess.CompletedProcess:
    prelude = WITHOUT_FAISS.replace("'faiss'", repr(hide))
    return subprocess.run(
        [sys.executable, "-c", prelude + code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )


def _error_lines(out: subprocess.CompletedProcess) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.startswith("odqa: error")]


@pytest.mark.subprocess
def test_commands_that_search_no_vectors_run_without_faiss():
    out = _run("import reader.training.train\nsys.exit(main(['train-reader', '--help']))\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--max-minutes" in out.stdout


@pytest.mark.subprocess
def test_the_default_ask_answers_without_faiss():
    """hybrid retrieval (dense over the flat index) and the linker's entity candidates, with FAISS hidden."""
    out = _run("sys.exit(main(['ask', '--json', 'Who discovered penicillin?']))\n")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert_answer_read_from(result["answers"][0], result["passages"])
    assert result["mentions"], "the linker ran (its candidates come from the matrix-product search)"


def test_matrix_product_search_gives_faiss_results():
    pytest.importorskip("faiss")
    from odqa.indexes.vector import float16_copy_index, matrix_product_search

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3000, 24)).astype(np.float16)
    queries = rng.standard_normal((5, 24)).astype(np.float32)
    scores, rows = matrix_product_search(vectors, queries, 10, block_rows=700)  # top-k merged across blocks
    faiss_scores, faiss_rows = float16_copy_index(vectors).search(queries, 10)
    assert (rows == faiss_rows).all()
    np.testing.assert_allclose(scores, faiss_scores, rtol=1e-5, atol=1e-5)
    all_scores, all_rows = matrix_product_search(vectors, queries, 5000)
    assert all_rows.shape == (5, 3000) and (np.diff(all_scores, axis=1) <= 0).all()


@pytest.mark.subprocess
def test_an_hnsw_build_without_faiss_is_refused_before_any_work(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "T", "text": "some words"}) + "\n")
    out = _run(
        f"sys.exit(main(['index', '--corpus', {str(corpus)!r}, '--out', "
        f"{str(tmp_path / 'idx')!r}, '--vector-index', 'hnsw']))\n"
    )
    errors = _error_lines(out)
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "--vector-index hnsw needs FAISS" in errors[0] and "pip install 'odqa[cpu]'" in errors[0]
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.work").exists()


@pytest.mark.subprocess
def test_a_missing_cjk_analyser_is_refused_before_any_work(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "標題", "text": "中文文本"}) + "\n")
    out = _run(
        f"sys.exit(main(['index', '--corpus', {str(corpus)!r}, '--out', {str(tmp_path / 'idx')!r}, "
        "'--backends', 'bm25', '--language', 'zh']))\n",
        hide="opencc",
    )
    errors = _error_lines(out)
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "zh-bigram analyser needs OpenCC" in errors[0] and "odqa[cjk]" in errors[0]
    assert not (tmp_path / "idx").exists()


def test_an_index_whose_vector_kind_needs_faiss_says_so_before_loading(tmp_path, monkeypatch):
    """FolderIndex.check_available checks the packages from the manifests before it opens any part: an hnsw
    index without FAISS is one line."""
    from odqa.core.errors import OdqaError
    from odqa.indexes.folder import FolderIndex
    from odqa.indexes.layout import BM25, DENSE
    from odqa.indexes.manifest import Manifest

    Manifest(
        kind="bundle",
        corpus_fingerprint="x",
        count=1,
        encoder="minilm",
        dim=384,
        format_version=1,
        params={"backends": [BM25, DENSE]},
    ).save(tmp_path)  # format 1: no part records are promised
    Manifest(kind="faiss", corpus_fingerprint="x", params={"kind": "hnsw"}).save(tmp_path / DENSE)
    bundle = FolderIndex.open(tmp_path)
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(OdqaError) as bm25:  # text search needs no FAISS: only its parts (none here) are missed
        bundle.check_available("text")
    assert "FAISS" not in str(bm25.value)
    with pytest.raises(OdqaError, match=r"the hnsw vector index of .* needs FAISS, which is not installed"):
        bundle.check_available("vectors")
