"""Open an index folder (built by `odqa index`) and make retrievers over it."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from indexes.bm25 import load_text_index
from indexes.manifest import Manifest
from indexes.vector import VectorIndex
from odqa.core.errors import OdqaError
from odqa.corpus.store import PassageStore
from retriever.bm25 import BM25Retriever
from retriever.hybrid import HybridRetriever

KINDS = ("bm25", "dense", "hybrid")


@dataclass
class IndexBundle:
    path: Path
    manifest: Manifest
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | Path) -> "IndexBundle":
        path = Path(path)
        if not path.exists():
            raise OdqaError(f"index folder not found: {path}; build it with `odqa index --corpus PATH --out {path}`")
        return cls(path, Manifest.load(path, kind="bundle"))

    @property
    def backends(self) -> list[str]:
        return list(self.manifest.params.get("backends", []))

    @cached_property
    def store(self) -> PassageStore:
        store = PassageStore.open(self.path / "passages")
        return store

    def _require(self, backend: str) -> Path:
        if backend not in self.backends:
            raise OdqaError(
                f"{self.path} has no {backend} index (it has: {', '.join(self.backends)}); rebuild with "
                f"`odqa index --corpus {self.manifest.params.get('corpus', 'PATH')} --out {self.path} --backends bm25,dense`"
            )
        folder = self.path / backend
        Manifest.load(folder).check_corpus(self.manifest.corpus_fingerprint, where=str(folder))
        return folder

    def bm25(self):
        if "bm25" not in self._cache:
            self._cache["bm25"] = BM25Retriever(load_text_index(self._require("bm25")), self.store)
        return self._cache["bm25"]

    def dense(self, encoder: str | None = None, device: str | None = None, query_encoder: str | None = None,
              settings: dict | None = None):
        """`encoder`: must be the index's (checked); `query_encoder`: any question encoder of the index's
        dimension (DPR's pair). Unset: the question encoder the manifest records. `settings` (pooling,
        similarity, query_prefix): override the manifest's."""
        from odqa.core.encoder import TextEncoder
        from retriever.dense import DenseRetriever

        key = ("dense", encoder or "", query_encoder or "", json.dumps(settings or {}, sort_keys=True))
        if key not in self._cache:
            folder = self._require("dense")
            index = VectorIndex.load(folder, use_gpu=None)
            params = index.manifest.params
            name = query_encoder or encoder or params.get("query_encoder") or index.manifest.encoder
            recorded = params.get("encoder_settings", {})
            chosen = {k: recorded.get(k) for k in ("pooling", "similarity", "query_prefix")}
            chosen.update({k: v for k, v in (settings or {}).items() if v not in (None, "")})
            if name != (params.get("query_encoder") or index.manifest.encoder) and not (settings or {}).get("pooling"):
                chosen["pooling"] = None  # another model: its own pooling
            text_encoder = TextEncoder.from_pretrained(name, max_length=int(params.get("max_length", 256)),
                                                       device=device, **chosen)
            self._cache[key] = DenseRetriever(text_encoder, index, self.store, check_name=bool(encoder) and not query_encoder)
        return self._cache[key]

    def retriever(self, kind: str, encoder: str | None = None, fusion: str = "rrf", alpha: float = 0.5,
                  candidates: int = 100, rrf_k: int = 60, query_encoder: str | None = None,
                  settings: dict | None = None):
        if kind == "bm25":
            return self.bm25()
        if kind == "dense":
            return self.dense(encoder, query_encoder=query_encoder, settings=settings)
        if kind == "hybrid" and "dense" not in self.backends and "bm25" in self.backends:
            # hybrid is the default; an index built with --backends bm25 should still answer
            print(f"odqa: {self.path} has no dense index, so hybrid retrieval falls back to bm25", file=sys.stderr)
            return self.bm25()
        if kind == "hybrid":
            return HybridRetriever(self.dense(encoder, query_encoder=query_encoder, settings=settings), self.bm25(), method=fusion, alpha=alpha,
                                   candidates=candidates, rrf_k=rrf_k)
        raise OdqaError(f"unknown retriever {kind!r}; choose one of {', '.join(KINDS)}")


def load_retriever(index_dir: str | Path, kind: str = "bm25", **options):
    return IndexBundle.open(index_dir).retriever(kind, **options)
