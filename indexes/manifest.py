"""Index manifests and atomic file and folder writes.

Every index folder carries `manifest.json`: what kind of index it is, the corpus fingerprint it was built
from, the encoder and its dimension, parameters and counts. Loading checks them, so an index can never be
silently paired with another corpus or encoder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from odqa.errors import IndexMismatchError, OdqaError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


@dataclass
class Manifest:
    kind: str  # bundle | bm25 | faiss | passages | kb
    corpus_fingerprint: str = ""
    count: int = 0
    encoder: str = ""
    dim: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S"))
    format_version: int = FORMAT_VERSION

    def save(self, folder: str | Path) -> None:
        write_json_atomic(Path(folder) / MANIFEST, asdict(self))

    @classmethod
    def load(cls, folder: str | Path, kind: str | None = None) -> "Manifest":
        folder = Path(folder)
        path = folder / MANIFEST
        if not path.is_file():
            raise OdqaError(
                f"{folder} is not an odqa index (no {MANIFEST}); build it with `odqa index --corpus PATH --out {folder}`"
            )
        try:
            data = json.loads(path.read_text())
            manifest = cls(**data)
        except (json.JSONDecodeError, TypeError) as exc:
            raise OdqaError(f"{path} is damaged ({exc}); rebuild the index") from exc
        if kind is not None and manifest.kind != kind:
            raise IndexMismatchError(f"{folder} holds a {manifest.kind!r} index, not a {kind!r} index")
        return manifest

    def check_corpus(self, fingerprint: str, where: str) -> None:
        if fingerprint and self.corpus_fingerprint and fingerprint != self.corpus_fingerprint:
            raise IndexMismatchError(
                f"{where} was built from another corpus (fingerprint {self.corpus_fingerprint}, this corpus "
                f"{fingerprint}); rebuild it with `odqa index` for this corpus"
            )

    def check_encoder(self, encoder: str, dim: int, where: str) -> None:
        if dim and self.dim and dim != self.dim:
            raise IndexMismatchError(
                f"{where} holds {self.dim}-d vectors from encoder {self.encoder!r}, but encoder {encoder!r} gives "
                f"{dim}-d vectors; use the index's encoder or rebuild the index with `--encoder {encoder}`"
            )
        if encoder and self.encoder and _norm(encoder) != _norm(self.encoder):
            raise IndexMismatchError(
                f"{where} was encoded with {self.encoder!r}, not {encoder!r}; query with the same encoder "
                f"or rebuild the index with `--encoder {encoder}`"
            )


def _norm(name: str) -> str:
    return name.rstrip("/").lower()


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
