"""Index manifests.

Every index folder carries `manifest.json`: what kind of index it is, the corpus fingerprint it was built
from, the encoder and its dimension, parameters and counts. Loading checks them, so an index can never be
silently paired with another corpus or encoder. Each manifest carries a digest of its own content
(`digest`), so one edited by hand or damaged after it was written is refused on loading.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from odqa.core.atomic import write_json_atomic
from odqa.core.errors import IndexMismatchError, OdqaError

MANIFEST = "manifest.json"
FORMAT_VERSION = 2  # 2: part manifests, block digests and the manifest's own digest recorded


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
    digest: str = ""  # of all the other fields (`content_digest`); empty in manifests written before it

    def save(self, folder: str | Path) -> None:
        self.digest = content_digest(asdict(self))
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
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise OdqaError(f"{path} is damaged ({exc}); rebuild the index") from exc
        if manifest.digest and manifest.digest != content_digest(data):
            raise IndexMismatchError(f"{path} was edited or damaged after the build (its content does not match its "
                                     "digest); rebuild it (`run_qa.py index`, or `run_qa.py build-kb` for a knowledge "
                                     "base)")
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


def content_digest(data: dict) -> str:
    """A digest of a manifest's fields other than `digest`, as JSON with sorted keys."""
    rest = {k: v for k, v in data.items() if k != "digest"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _norm(name: str) -> str:
    return name.rstrip("/").lower()
