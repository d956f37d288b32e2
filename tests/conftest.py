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


# Tests that take a minute or more on 2 cores (wheel builds and installs, a headless browser, full-disk faults, big
# merges): `pytest` alone stays a few minutes long, `pytest --long` (what .ci/run runs) includes them. Durations:
# `pytest --long --durations=30`.
LONG_FILES = (
    "test_wheel.py",
    "test_serve_browser.py",
    "reliability/test_full_disk.py",
    "test_distill_encoder.py",
    "test_train_retriever.py",
    "reliability/test_search_during_rebuild.py",
)
LONG_TESTS = (
    "test_cli_retrieval.py::test_runs_of_two_corpus_halves_merge_into_the_full_corpus_ranking",
    "test_cli_retrieval.py::test_bad_inputs",
    "test_cjk_dense.py::test_dense_and_hybrid_cjk_index_end_to_end",
    "reliability/test_build_resume.py::test_build_killed_after_the_dense_part_encodes_nothing_again",
    "reliability/test_bounded_cost.py::test_a_backtracking_answer_pattern_is_refused_in_bounded_time",
    # the slowest of the rest, so that the README's `pytest` stays under 10 minutes on 2 idle cores (issue 64 item 6)
    "test_qa.py::test_predict_streams_one_json_line_per_question",
    "test_korean_answers.py::test_ask_json_names_the_reader_in_its_inference_plan",
    "test_cjk_bm25.py::test_korean_questions_through_the_pipeline_and_the_shell",
    "test_run_formats.py::test_eval_retrieval_with_qrels_on_a_beir_style_set",
    "test_cjk_dense.py::test_multilingual_encoder_runs_in_fp32_on_torch_and_onnx",
)


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", help="also run the long tests (marked `long`; CI runs them)")


def _is_long(item) -> bool:
    path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
    return path in LONG_FILES or any(item.nodeid.removeprefix("tests/").startswith(t) for t in LONG_TESTS)


def pytest_collection_modifyitems(config, items):
    run_long = config.getoption("--long")
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)  # reads ../shared/data
        if _is_long(item):
            item.add_marker(pytest.mark.long)
        if item.get_closest_marker("long") and not run_long:
            item.add_marker(pytest.mark.skip(reason="a long test: run `pytest --long` (as CI does) to include it"))


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    # CI has 2 cores; keep each test process from oversubscribing them.
    try:
        import torch

        # under pytest-xdist (.ci/run: two test processes) one thread each
        workers = 2 if os.environ.get("PYTEST_XDIST_WORKER") else 1
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1) // workers))
    except ImportError:
        pass
    yield


@pytest.fixture(scope="session", autouse=True)
def _demo_built_before_the_tests():
    # under pytest-xdist (.ci/run) a test's first use of the demo could meet the other test process building it and
    # print that it waits, which tests of what a command prints do not expect: each process has it built (the
    # second waits for the first, quietly) before any test runs
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("ODQA_HOME"):
        from odqa.demo_corpus import DEMO_ENCODER, demo_index_path, demo_kb_path

        try:
            demo_index_path(quiet=True)
            demo_kb_path(quiet=True)
            demo_kb_path(DEMO_ENCODER, quiet=True)  # the multilingual linker's, for Korean and Chinese questions
        except Exception:  # a missing model: the tests that need the demo say so themselves
            pass
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
        build_index(IndexSpec(corpus=str(corpus), out=str(root / "index"), backends=["bm25"], kb=False))
        return root / "index"

    return build
