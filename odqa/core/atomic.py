"""Atomic file and folder writes: an interrupted write never leaves a truncated file or half a folder where a
good one was."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Write to a temporary sibling file; on success it replaces `target`, on failure it is removed, so an
    interrupted write never leaves a truncated file where a good one was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def write_json_atomic(path: Path, data: Any) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False))


@contextlib.contextmanager
def atomic_folder(target: str | Path) -> Iterator[Path]:
    """Build into a temporary sibling folder; on success swap it in place of `target`, on failure remove it.

    The old folder (if any) is kept until the new one is complete, so a failed build never damages it.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
