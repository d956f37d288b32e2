"""Where odqa keeps its per-user cache (demo index and KB, ONNX graphs, shell history)."""

from __future__ import annotations

import os
from pathlib import Path


def odqa_home() -> Path:
    """`$ODQA_HOME`, default `~/.cache/odqa`."""
    return Path(os.environ.get("ODQA_HOME", Path.home() / ".cache" / "odqa"))
