"""The base install answers questions; the server (odqa[serve]), the Elasticsearch client (odqa[elastic]) and the
BM25 engines beside Tantivy (odqa[bm25-engines]) are extras, imported only by what needs them: without one, that
command exits 2 with one line naming the extra (issue 64 item 10). The modules are hidden in a child process as
tests/test_optional_faiss.py hides FAISS."""

from __future__ import annotations

import ast
import json

import pytest

from tests.answer_checks import assert_answer_read_from
from tests.conftest import REPO_ROOT
from tests.extras_checks import one_error, run_hiding

EXTRA_MODULES = ("fastapi", "uvicorn", "starlette", "elasticsearch", "elastic_transport", "bm25s", "rank_bm25", "ray")


@pytest.mark.subprocess
@pytest.mark.parametrize("hidden, package", [("fastapi", "FastAPI"), ("uvicorn", "uvicorn")])
def test_serve_without_the_serve_extra_is_one_line(hidden, package):
    error = one_error(run_hiding("sys.exit(main(['serve', '--port', '8080']))\n", hidden))
    assert f"odqa serve needs {package}" in error and "pip install 'odqa[serve]'" in error, error


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "argv",
    [
        ["es-index", "--index", "work_indexes/none", "--hosts", "http://127.0.0.1:9", "--index-name", "x"],
        ["es-search", "--hosts", "http://127.0.0.1:9", "--index-name", "x", "who wrote Hamlet"],
    ],
)
def test_es_commands_without_the_elastic_extra_are_one_line(argv):
    error = one_error(run_hiding(f"sys.exit(main({argv!r}))\n", "elasticsearch"))
    assert f"odqa {argv[0]} needs the Elasticsearch client" in error and "pip install 'odqa[elastic]'" in error


@pytest.mark.subprocess
@pytest.mark.parametrize("engine, module", [("bm25s", "bm25s"), ("rank-bm25", "rank_bm25")])
def test_a_bm25_engine_without_its_extra_is_refused_before_any_work(tmp_path, engine, module):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "T", "text": "some words"}) + "\n")
    out = run_hiding(
        f"sys.exit(main(['index', '--corpus', {str(corpus)!r}, '--out', {str(tmp_path / 'idx')!r}, "
        f"'--backends', 'bm25', '--bm25-engine', {engine!r}]))\n",
        module,
    )
    error = one_error(out)
    assert f"the {engine} BM25 engine needs" in error and "pip install 'odqa[bm25-engines]'" in error, error
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.work").exists()


@pytest.mark.subprocess
def test_a_ray_build_without_the_ray_extra_is_refused_before_any_work(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "1", "title": "T", "text": "some words"}) + "\n")
    out = run_hiding(
        f"sys.exit(main(['index', '--corpus', {str(corpus)!r}, '--out', {str(tmp_path / 'idx')!r}, "
        "'--backends', 'bm25', '--ray', 'local']))\n",
        "ray",
    )
    error = one_error(out)
    assert "--ray local needs Ray" in error and "pip install 'odqa[ray]'" in error, error
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.work").exists()


@pytest.mark.subprocess
def test_ask_answers_without_any_of_these_extras():
    """BM25 (Tantivy) and the reader, its focus's English analyser included (no bm25s)."""
    out = run_hiding(
        "sys.exit(main(['ask', '--json', '--retriever', 'bm25', '--no-linker', 'Who discovered penicillin?']))\n",
        *EXTRA_MODULES,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert_answer_read_from(result["answers"][0], result["passages"])


def test_only_the_server_imports_the_extras_at_module_level():
    """Elsewhere they are imported inside the function that needs them, so importing odqa never needs them (the
    server's package is imported by `odqa serve` alone, after its check)."""
    found = []
    for folder in ("odqa", "indexes", "reader", "retriever", "linker"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            name = path.relative_to(REPO_ROOT).as_posix()
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(m.split(".")[0] in EXTRA_MODULES for m in modules) and not name.startswith("odqa/serve/"):
                    found.append(f"{name}:{node.lineno}")
    assert not found, found
