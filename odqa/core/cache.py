"""What odqa keeps under `$ODQA_HOME`, listed and cleared by kind (`odqa cache`): every entry but the shell's
history is made again on first use, so clearing costs time, never data.

A kind is a set of name patterns at the top of `$ODQA_HOME` (an ONNX graph is one folder of `onnx/`). Clearing
takes an entry's one-writer lock first (odqa.core.atomic.writer_lock), so a demo index another process is building
is not cut from under it; a process that has an entry open keeps reading it (its files stay until closed)."""

from __future__ import annotations

import fnmatch
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odqa.core.atomic import writer_lock
from odqa.core.errors import OdqaError
from odqa.core.paths import odqa_home

DEMO_PREFIX = "demo-"  # odqa.demo_corpus names its builds demo-index-DIGEST and demo-kb-DIGEST


@dataclass(frozen=True)
class CacheKind:
    name: str
    patterns: tuple[str, ...]  # names at the top of $ODQA_HOME (onnx/: each folder inside it)
    what: str
    cleared_by_default: bool = True


KINDS = (
    CacheKind("onnx", ("onnx/*",), "ONNX Runtime graphs of the models, one folder per weights (built on first use)"),
    CacheKind(
        "demo",
        (f"{DEMO_PREFIX}index-*", f"{DEMO_PREFIX}kb-*", f".{DEMO_PREFIX}*"),
        "the demo corpus's index and knowledge base, per encoder (built by the first `ask` without --index)",
    ),
    CacheKind("fingerprints", ("fingerprints.json",), "digests of model weight files (read again on first use)"),
    CacheKind("obsolete", ("cpu-choice",), "left by earlier odqa versions (the bf16-or-int8 timing); unused now"),
    CacheKind("history", ("shell_history",), "the interactive shell's history: cleared only when named", False),
)
KIND_NAMES = tuple(kind.name for kind in KINDS)


@dataclass(frozen=True)
class CacheEntry:
    kind: str
    path: Path
    bytes: int
    used: float  # the last modification time (a graph's folder carries its last use)

    def to_dict(self, home: Path) -> dict:
        return {
            "kind": self.kind,
            "path": str(self.path.relative_to(home)),
            "bytes": self.bytes,
            "used": time.strftime("%Y-%m-%d %H:%M", time.localtime(self.used)),
        }


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir() or f.is_symlink())


def cache_entries(home: Path | None = None) -> list[CacheEntry]:
    """Every entry of every kind under `home` (default `$ODQA_HOME`), largest first within its kind."""
    home = odqa_home() if home is None else home
    entries: list[CacheEntry] = []
    for kind in KINDS:
        found: list[CacheEntry] = []
        for pattern in kind.patterns:
            folder, _, name = pattern.rpartition("/")
            parent = home / folder if folder else home
            for path in sorted(parent.iterdir()) if parent.is_dir() else ():
                if fnmatch.fnmatchcase(path.name, name):
                    try:
                        found.append(CacheEntry(kind.name, path, _size(path), path.lstat().st_mtime))
                    except OSError:
                        continue  # removed meanwhile by another process
        entries += sorted(found, key=lambda e: -e.bytes)
    return entries


def other_entries(home: Path | None = None) -> list[Path]:
    """What lies at the top of `home` that is no kind's: listed, never cleared."""
    home = odqa_home() if home is None else home
    known = {e.path for e in cache_entries(home)} | {home / "onnx"}
    return sorted(p for p in home.iterdir() if p not in known) if home.is_dir() else []


def check_kinds(kinds: Sequence[str]) -> None:
    unknown = [k for k in kinds if k not in KIND_NAMES]
    if unknown:
        raise OdqaError(f"no cache kind {', '.join(map(repr, unknown))}; name one of {', '.join(KIND_NAMES)}")


def clear_cache(kinds: Iterable[str] = (), home: Path | None = None) -> list[CacheEntry]:
    """Remove the entries of `kinds` (none named: every kind cleared by default, all but the history); returns
    what was removed. An entry another odqa process is writing (building a demo index) is refused in one line."""
    kinds = list(kinds)
    check_kinds(kinds)
    chosen = set(kinds) or {k.name for k in KINDS if k.cleared_by_default}
    removed = []
    for entry in cache_entries(home):
        if entry.kind not in chosen:
            continue
        if entry.path.is_dir() and not entry.path.is_symlink():
            with writer_lock(entry.path, flag=None, who="another odqa process", fix="rerun when it has finished"):
                shutil.rmtree(entry.path, ignore_errors=True)
        else:
            entry.path.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def human_size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"
