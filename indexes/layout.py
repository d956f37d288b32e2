"""The one owner of an index folder's layout: `odqa.indexing` writes through it, `indexes.folder` and
`indexes.elastic_bulk` open through it, and the pipeline and the linker commands find the knowledge base with it.

    OUT/manifest.json        the bundle manifest (kind "bundle": backends, parts and their digests, corpus)
    OUT/passages/            the passage store (Arrow) and its manifest
    OUT/bm25/                the BM25 text index (indexes/bm25.py) and its manifest
    OUT/dense/               embeddings.npy (+ index.faiss) and its manifest (indexes/vector.py)
    OUT/shards/NNN/          a sharded index's shards (`index --shards N`), each an index folder as above (OUT/bm25
                             joins their BM25 segments: indexes/shards.py); the bundle manifest lists them (`shards`)
                             and records each one's manifest digest and rows (`shard_records`)
    OUT.work/                a build in progress, laid out the same way, plus dense-chunks/ and the source key
    OUT-kb/                  the linker's knowledge base beside the index (`odqa build-kb --out OUT-kb`)
"""

from __future__ import annotations

from pathlib import Path

from odqa.indexes.manifest import MANIFEST

EMBEDDINGS = "embeddings.npy"  # the vectors of a dense part (indexes/vector.py), and of a build's merged chunks
PASSAGES, BM25, DENSE = "passages", "bm25", "dense"
SEARCH_PARTS = (BM25, DENSE)  # the parts a build may choose (`--backends`); passages are always there
SHARDS = "shards"  # a sharded bundle manifest's list of its shard folders, in row order ("shards/000", ...)
SHARD_RECORDS = "shard_records"  # ... and of each one: {"manifest": its manifest's digest, "rows": [start, end)}


class IndexLayout:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"IndexLayout({str(self.root)!r})"

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    def part(self, name: str) -> Path:
        return self.root / name

    @property
    def passages(self) -> Path:
        return self.part(PASSAGES)

    @property
    def bm25(self) -> Path:
        return self.part(BM25)

    @property
    def dense(self) -> Path:
        return self.part(DENSE)

    @property
    def embeddings(self) -> Path:
        return self.dense / EMBEDDINGS

    # ---- building -------------------------------------------------------------------------------------
    @property
    def work(self) -> IndexLayout:
        """Where a build keeps its finished parts until it publishes them (survives a crash)."""
        return IndexLayout(self.root.with_name(self.root.name + ".work"))

    def staging(self, pid: int) -> Path:
        """The folder a build assembles the new index in before the swap."""
        return self.root.with_name(f".{self.root.name}.building-{pid}")

    @property
    def dense_chunks(self) -> Path:
        return self.root / "dense-chunks"

    @property
    def merged_embeddings(self) -> Path:
        return self.root / EMBEDDINGS

    @property
    def source_key(self) -> Path:
        return self.root / "passages.source.json"

    @property
    def encoding(self) -> Path:
        """The passage encoder and precision a build chose, so that a rerun resumes with them."""
        return self.root / "encoding.json"

    # ---- beside the index -----------------------------------------------------------------------------
    @property
    def kb(self) -> Path:
        """The knowledge base that belongs to this index: `OUT-kb`, beside it."""
        return self.root.with_name(self.root.name + "-kb")
