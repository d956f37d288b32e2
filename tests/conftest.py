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
