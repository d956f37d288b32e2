"""Shared test fixtures. Real data is read from ../shared/data in place; tests that need it skip
with a clear message where that folder is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ODQA_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set ODQA_SHARED_DATA to its path)")
    return SHARED_DATA


def pytest_collection_modifyitems(items):
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)  # reads ../shared/data


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    # CI has 2 cores; keep each test process from oversubscribing them.
    try:
        import torch

        torch.set_num_threads(min(2, os.cpu_count() or 1))
    except ImportError:
        pass
    yield


@pytest.fixture(scope="session", autouse=True)
def _cpu_choice_by_flags():
    # `auto` times int8 against bf16 once per $ODQA_HOME on CPUs with native bf16 (odqa.core.cpu_choice); the
    # tests start processes with fresh homes, which would each time it again. They take the flags' verdict;
    # tests/test_cpu_choice.py times it for real.
    os.environ.setdefault("ODQA_CPU_CHOICE", "flags")
    yield


@pytest.fixture(autouse=True)
def _cli_logging_undone():
    # a test that runs odqa.cli.main in-process installs the command line's handler on the `odqa` logger (which
    # then stops propagating): the next test sees odqa's records in caplog again, as a library user's code would
    yield
    from odqa.core.logs import reset_cli_logging

    reset_cli_logging()


@pytest.fixture(scope="session")
def bm25_index_of(tmp_path_factory):
    """`bm25_index_of(docs, name)`: a BM25-only index of `docs` ({"id", "title", "text"} rows) in a new folder."""
    import json

    from odqa.indexing import IndexSpec, build_index

    def build(docs, name: str = "corpus") -> Path:
        root = tmp_path_factory.mktemp(name)
        corpus = root / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
        build_index(IndexSpec(corpus=str(corpus), out=str(root / "index"), backends=["bm25"]))
        return root / "index"

    return build
