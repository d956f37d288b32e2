"""Where odqa keeps its per-user cache (demo index and KB, ONNX graphs, shell history)."""

from __future__ import annotations

import os
from pathlib import Path

from odqa.core.errors import OdqaError


def odqa_home() -> Path:
    """`$ODQA_HOME`, default `~/.cache/odqa`. A cache that cannot be a folder (ODQA_HOME names a file, or a path
    through one) is refused in one line here, before anything is written into it."""
    setting = os.environ.get("ODQA_HOME")
    home = Path(setting) if setting else Path.home() / ".cache" / "odqa"
    where = f"ODQA_HOME={setting}" if setting else f"the cache folder {home}"
    place = home
    while not place.exists() and not place.is_symlink() and place.parent != place:
        place = place.parent
    if place.exists() and not place.is_dir():
        what = "is a file" if place == home else f"lies under {place}, a file"
        raise OdqaError(
            f"{where} {what}, not a folder: odqa keeps its cache (demo index, models' graphs) in a "
            "folder; point ODQA_HOME at a folder (it is created if missing) or unset it for ~/.cache/odqa"
        )
    return home
