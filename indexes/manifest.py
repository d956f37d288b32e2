"""Index manifests.

Every index folder carries `manifest.json`: what kind of index it is, the corpus fingerprint it was built
from, the encoder and its dimension, parameters and counts. Loading checks them, so an index can never be
silently paired with another corpus or encoder. Each manifest carries a digest of its own content
(`digest`), so one edited by hand or damaged after it was written is refused on loading.

A manifest is held to what its format promises: one of format 2 without its digest (or, for a knowledge base,
without its files' records and their block digests) was edited to look older or damaged, and is refused, not
read as a format-1 manifest (which is read as it was written: no digest of its own, files recorded without block
digests). `indexes.integrity.check_bundle_manifest` holds an index's bundle manifest to its parts' records.
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
from odqa.core.text_encoding import check_vectors_encoder

MANIFEST = "manifest.json"
FORMAT_VERSION = 2  # 2: part manifests, block digests and the manifest's own digest recorded
OLDEST_FORMAT = 1  # 1: no digest of its own, parts (where recorded) without block digests: still read
FILE_FIELDS = ("size", "sample", "sha256")  # a recorded file's fields in every format (integrity.describe_file)


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
    def load(cls, folder: str | Path, kind: str | None = None, fix: str | None = None) -> Manifest:
        """`fix`: what a refusal tells to do (default: rebuild the index or knowledge base the folder holds)."""
        folder = Path(folder)
        path = folder / MANIFEST
        if not path.is_file():
            raise OdqaError(
                f"{folder} is not an odqa index (no {MANIFEST}); build "
                f"it with `odqa index --corpus PATH --out {folder}`"
            )
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            manifest = cls(**data)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise OdqaError(f"{path} is damaged ({exc}); {fix or 'rebuild the index'}") from exc
        fix = fix or _rebuild_fix(manifest.kind, folder, manifest.params)
        version = manifest.format_version
        if type(version) is not int or version < OLDEST_FORMAT:
            raise IndexMismatchError(
                f"{path} gives no valid format_version ({version!r}): it was edited or damaged; {fix}"
            )
        if version >= 2 and not manifest.digest:
            raise IndexMismatchError(
                f"{path} lacks its digest, which a format-{version} manifest records: it was "
                f"edited (to look older) or damaged; {fix}"
            )
        if manifest.digest and manifest.digest != content_digest(data):
            raise IndexMismatchError(
                f"{path} was edited or damaged after the build (its content does not match its digest); {fix}"
            )
        if version > FORMAT_VERSION:
            raise OdqaError(
                f"{path} is of manifest format {version}, newer than this "
                f"odqa reads ({FORMAT_VERSION}); upgrade odqa, or {fix}"
            )
        if manifest.kind == "kb" and version >= 2:
            _check_kb_files(manifest, path, fix)
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
        """Refuse these vectors to `encoder` of `dim`-d vectors where another encoder made them."""
        check_vectors_encoder(
            where,
            (self.encoder, self.dim),
            (encoder, dim),
            f"query with the index's encoder or rebuild the index with `--encoder {encoder}`",
        )


def file_record_gaps(info, version: int) -> list[str]:
    """What a recorded file (`integrity.describe_file`) lacks of what a manifest of format `version` promises:
    its size and digests, and from format 2 its block digests (inline, or a sidecar's digest)."""
    if not isinstance(info, dict):
        return ["record"]
    gaps = [name for name in FILE_FIELDS if name not in info]
    blocks = info.get("blocks")
    if version >= 2 and not (
        isinstance(blocks, dict)
        and type(blocks.get("size")) is int
        and blocks["size"] > 0
        and (
            isinstance(blocks.get("xxh3"), str)
            or (isinstance(blocks.get("sidecar"), str) and isinstance(blocks.get("sidecar_xxh3_128"), str))
        )
    ):
        gaps.append("block digests")
    return gaps


def _check_kb_files(manifest: Manifest, path: Path, fix: str) -> None:
    """A format-2 knowledge base records every file with its block digests (linker.kb)."""
    files = manifest.params.get("files") if isinstance(manifest.params, dict) else None
    if not isinstance(files, dict) or not files:
        raise IndexMismatchError(
            f"{path} lacks the record of its files, which a format-{manifest.format_version} "
            f"manifest holds: it was edited (to look older) or damaged; {fix}"
        )
    for rel, info in files.items():
        gaps = file_record_gaps(info, manifest.format_version)
        if gaps:
            raise IndexMismatchError(
                f"{path} lacks the {' and '.join(gaps)} of {rel}, which a format-"
                f"{manifest.format_version} manifest records: "
                f"it was edited (to look older) or damaged; {fix}"
            )


def _rebuild_fix(kind, folder: Path, params) -> str:
    if kind == "kb":
        return f"rebuild it with `run_qa.py build-kb --corpus CORPUS --out {folder}`"
    if kind == "bundle":
        shards = params.get("shards") if isinstance(params, dict) else None
        if isinstance(shards, list) and shards:  # as indexes.integrity.sharded_fix says it
            return (
                f"rebuild the index with `run_qa.py index --corpus CORPUS --out {folder} --shards {len(shards)}` "
                "(its shards that are still right are kept)"
            )
        return f"rebuild the index with `run_qa.py index --corpus CORPUS --out {folder}`"
    return "rebuild it (`run_qa.py index`, or `run_qa.py build-kb` for a knowledge base)"


def content_digest(data: dict) -> str:
    """A digest of a manifest's fields other than `digest`, as JSON with sorted keys."""
    rest = {k: v for k, v in data.items() if k != "digest"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
