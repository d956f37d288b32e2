"""The settings `es-index` picks from the corpus size, and the capacity they need (docs/elasticsearch.md).

Sizes per passage are estimates from what is known of Lucene and Elasticsearch: the passage as `_source`
(the text and title, about the size of odqa's Arrow passage store), the inverted index of text and title
(about the size of odqa's Tantivy index of the same passages: bench/results/scale.md), and the vectors:
float32 (`dims x 4` bytes) kept on disk in every case, plus a quantised copy for `int8_hnsw` (`dims` bytes), plus
the HNSW graph (about `m x 2` neighbour ids of 4 bytes on its base layer). Vectors are excluded from `_source`
in none of odqa's mappings, so the JSON of each vector counts as well.

What kNN search needs in RAM is the vectors it scans: the float32 ones for `hnsw`, the int8 ones for
`int8_hnsw` (a quarter), plus the graph; they live in the page cache beside the JVM heap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

SHARD_TARGET_GB = 30.0  # Elasticsearch's guidance: 10 to 50 GB a shard
INT8_FROM_PASSAGES = 1_000_000  # from here the float vectors (1.5 GB at 384 dims) outgrow a small node's cache
SOURCE_BYTES = 750  # a ~100-word passage with its title and ids: odqa's Arrow store holds about this much
INVERTED_BYTES = 450  # text and title postings, norms and doc values of a ~100-word passage
VECTOR_JSON_BYTES_PER_DIM = 10  # a float written out in `_source`: "-0.0123456," and the like
HNSW_M = 16
EF_CONSTRUCTION = 100
NUM_CANDIDATES = 100
HEAP_GB_MAX = 31  # beyond this the JVM loses compressed object pointers


@dataclass
class ElasticPlan:
    passages: int
    dims: int  # 0: BM25 only
    shards: int
    knn_type: str  # the dense_vector field's index_options.type
    hnsw_m: int
    ef_construction: int
    num_candidates: int
    disk_gb: float  # one copy (primaries); replicas multiply it
    vector_ram_gb: float  # page cache that kNN search wants resident (all shards, one copy)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        vectors = (
            (
                f", kNN {self.knn_type} (m {self.hnsw_m}, ef_construction {self.ef_construction}, "
                f"num_candidates {self.num_candidates}), "
                f"{self.vector_ram_gb:.1f} GB of vectors to keep in the page cache"
            )
            if self.dims
            else ""
        )
        return (
            f"{self.passages:,} passages: {self.shards} shard{'s' if self.shards > 1 else ''}, about "
            f"{self.disk_gb:.1f} GB a copy on disk{vectors}"
        )


def plan_elastic(passages: int, dims: int, shards: int | None = None, knn_type: str | None = None) -> ElasticPlan:
    """The shard count and kNN index type for `passages` passages of `dims`-d vectors (0: none), with the disk
    and page cache they take; `shards` and `knn_type` given keep those choices."""
    knn_type = knn_type or ("int8_hnsw" if passages >= INT8_FROM_PASSAGES else "hnsw")
    per_passage = SOURCE_BYTES + INVERTED_BYTES
    ram_per_passage = 0
    if dims:
        graph = HNSW_M * 2 * 4
        quantised = dims if knn_type == "int8_hnsw" else 0
        per_passage += dims * 4 + quantised + graph + dims * VECTOR_JSON_BYTES_PER_DIM
        ram_per_passage = (quantised or dims * 4) + graph
    disk_gb = passages * per_passage / 1e9
    if shards is None:
        shards = max(1, math.ceil(disk_gb / SHARD_TARGET_GB))
    return ElasticPlan(
        passages=passages,
        dims=dims,
        shards=shards,
        knn_type=knn_type,
        hnsw_m=HNSW_M,
        ef_construction=EF_CONSTRUCTION,
        num_candidates=NUM_CANDIDATES,
        disk_gb=round(disk_gb, 2),
        vector_ram_gb=round(passages * ram_per_passage / 1e9, 2),
    )


def node_memory_gb(plan: ElasticPlan, nodes: int = 1, replicas: int = 0) -> float:
    """RAM a node wants: its share of the vectors' page cache (every copy is searched somewhere) plus a heap
    of about a quarter of that, at least 1 GB and at most `HEAP_GB_MAX`."""
    cache = plan.vector_ram_gb * (1 + replicas) / nodes
    return round(cache + min(HEAP_GB_MAX, max(1.0, cache / 4)), 1)
