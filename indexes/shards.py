"""An index built as shards (one per group of corpus files, each a whole index folder) and searched as one.

BM25: the shards' Tantivy segments are joined into one Tantivy index (`union_text_index`: their files linked
into one folder, one `meta.json` listing every segment), so document frequencies, the document count and the
average length that score a query are the whole corpus's, as in an index built in one piece; the same top k
with the same scores. Each shard numbers its rows from 0: the union's manifest keeps the row offset of every
segment, in the order `meta.json` lists them (Tantivy's segment ordinals). The rows mean the passages of the
shards the union was joined from, so the index's manifest records each shard by its manifest's digest and rows
(`indexes.integrity.check_shard`): a shard swapped or replaced afterwards is refused, not searched.

Dense: every shard's vector index is searched and the results merged by score (`ShardedVectorIndex`): exact
where the shards' indexes are (flat), each shard's own approximation otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from odqa.core.atomic import atomic_folder
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.indexes.integrity import SIDECAR
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import VectorIndex

SEGMENT_ROW_OFFSETS = "segment_row_offsets"  # the union BM25 manifest's row offset of each Tantivy segment
TANTIVY_META = "meta.json"
TANTIVY_MANAGED = ".managed.json"


def union_text_index(
    shard_folders: Sequence[Path], row_offsets: Sequence[int], out: str | Path, fingerprint: str = ""
) -> Manifest:
    """Join the Tantivy BM25 indexes of the shards (row i of shard s is row `row_offsets[s] + i` of the whole)
    into one index folder `out`, atomically. The segment files are hard-linked (copied across file systems)."""
    manifests = [Manifest.load(folder, kind="bm25") for folder in shard_folders]
    engines = {m.params.get("engine", "tantivy") for m in manifests}
    if engines != {"tantivy"}:
        raise OdqaError(
            f"a sharded index needs the tantivy BM25 engine (its shards' segments are searched as one "
            f"index), not {', '.join(sorted(engines - {'tantivy'}))}: rebuild with --bm25-engine tantivy"
        )
    analyzers = {m.params.get("analyzer", "en") for m in manifests}
    if len(analyzers) > 1:
        raise OdqaError(
            f"the shards were analysed differently ({', '.join(sorted(analyzers))}); build every "
            "shard with one --language / --analyzer"
        )
    if len({m.params.get("normalization", "") for m in manifests}) > 1:
        raise OdqaError(
            "the shards' text was normalised differently (some built by an older odqa); build every shard with "
            "one odqa version"
        )
    with atomic_folder(out) as tmp:
        meta: dict | None = None
        segments: list[dict] = []
        offsets: list[int] = []
        managed: set[str] = set()
        opstamp = 0
        for folder, offset in zip(shard_folders, row_offsets):
            shard_meta = json.loads((folder / TANTIVY_META).read_text())
            if meta is None:
                meta = shard_meta
            elif shard_meta["schema"] != meta["schema"]:
                raise IndexMismatchError(
                    f"{folder} has another BM25 schema than {shard_folders[0]}; "
                    "rebuild the shards with one odqa version"
                )
            segments += shard_meta["segments"]
            opstamp = max(opstamp, int(shard_meta.get("opstamp", 0)))
            offsets += [int(offset)] * len(shard_meta["segments"])
            if (folder / TANTIVY_MANAGED).exists():
                managed.update(json.loads((folder / TANTIVY_MANAGED).read_text()))
            for file in folder.iterdir():
                if (
                    file.is_file()
                    and file.name not in (TANTIVY_META, TANTIVY_MANAGED, MANIFEST)
                    and not file.name.startswith(".tantivy-")
                    and not file.name.endswith(SIDECAR)
                ):
                    _link_or_copy(file, tmp / file.name)
        assert meta is not None
        meta = {**meta, "segments": segments, "opstamp": opstamp}
        (tmp / TANTIVY_META).write_text(json.dumps(meta))
        (tmp / TANTIVY_MANAGED).write_text(json.dumps(sorted(managed | {TANTIVY_META})))
        manifest = Manifest(
            kind="bm25",
            corpus_fingerprint=fingerprint,
            count=sum(m.count for m in manifests),
            params={**manifests[0].params, SEGMENT_ROW_OFFSETS: offsets},
        )
        manifest.save(tmp)
    return manifest


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class ShardedVectorIndex:
    """The shards' vector indexes searched as one: `search(vectors, k) -> (scores, rows)` with whole-index rows,
    each shard's top k merged by score (ties: the lower row first, as one flat index orders them)."""

    def __init__(self, shards: Sequence[VectorIndex], path: Path | None = None):
        if not shards:
            raise OdqaError("a sharded vector index needs at least one shard")
        dims = {shard.dim for shard in shards}
        if len(dims) > 1:
            raise IndexMismatchError(
                f"the shards hold vectors of different dimensions ({sorted(dims)}); rebuild them with one encoder"
            )
        self.shards = list(shards)
        self.offsets = np.cumsum([0] + [len(shard) for shard in shards[:-1]])
        first = shards[0].manifest
        self.manifest = Manifest(
            kind="faiss",
            corpus_fingerprint="",
            count=sum(len(s) for s in shards),
            encoder=first.encoder,
            dim=first.dim,
            params=dict(first.params),
        )
        self.path = path

    @property
    def dim(self) -> int:
        return self.shards[0].dim

    def __len__(self) -> int:
        return int(self.manifest.count)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self))
        scores, rows = [], []
        for shard, offset in zip(self.shards, self.offsets):
            s, r = shard.search(vectors, k)
            scores.append(s)
            rows.append(np.where(r >= 0, r + offset, -1))
        all_scores = np.concatenate(scores, axis=1)
        all_rows = np.concatenate(rows, axis=1)
        # missing hits (-1) last; then best score first, the lower row first among equal scores
        order = np.lexsort((all_rows, -all_scores, all_rows < 0), axis=1)[:, :k]
        return np.take_along_axis(all_scores, order, 1), np.take_along_axis(all_rows, order, 1)
