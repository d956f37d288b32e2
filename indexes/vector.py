"""Inner-product vector index over embeddings kept as a numpy memmap.

Index types: `flat` (exact), `hnsw` (graph; M, efConstruction, efSearch), `ivf` (IVF-Flat; nlist, nprobe) and
`ivfpq` (IVF over product-quantised codes, its candidates rescored exactly from the float16 vectors on disk;
nlist, nprobe, rerank). `auto` (the default) picks by the number of vectors (`auto_kind`): flat up to
`FLAT_MAX_VECTORS`, ivfpq above (bench/results/scale.md). FAISS is optional (odqa[cpu] / odqa[gpu]): without it a
flat index is searched as a matrix product in numpy (`MatrixProductIndex`, the same exact scores); hnsw, ivf and GPU
search need it. Vectors are stored once as `embeddings.npy` (float32 or float16) and memory-mapped. The flat index
searches float16 vectors of up to `RESIDENT_FP16_BYTES` from a copy in memory (FAISS's scalar quantiser in float16,
whose codes are those vectors as they are: the same scores), and larger or float32 ones from the memmap in blocks, so
RAM stays bounded whatever the corpus size.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from odqa.core.atomic import atomic_folder
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.logs import get_logger
from odqa.core.mapped_reads import advise_random, prefetch_ranges
from odqa.core.optional import installed, require
from odqa.core.registry import Registry
from odqa.indexes.integrity import file_reader
from odqa.indexes.layout import EMBEDDINGS
from odqa.indexes.manifest import Manifest

log = get_logger(__name__)


def load_faiss(purpose: str = "this vector search"):
    """The faiss module, imported on first use: a flat index searches without it (a matrix product), and
    commands that never search vectors do not load it."""
    require("faiss", purpose)  # the extras odqa[cpu] / odqa[gpu] each bring one FAISS build
    import faiss

    return faiss


def faiss_installed() -> bool:
    return installed("faiss")


# The kinds that are FAISS structures (the flat kind is searched without FAISS where it is missing).
FAISS_KINDS = ("hnsw", "ivf", "ivfpq")


def check_kind_available(kind: str) -> None:
    """Before an index build starts: a FAISS kind without FAISS is refused in one line."""
    if kind in FAISS_KINDS:
        require("faiss", f"--vector-index {kind}")


FAISS_FILE = "index.faiss"
# A float16 memmap searched in blocks is converted to float32 at every query: one question took 42-46 ms over
# squad-open's 43,380 passages and 0.7-1.5 s over 759,461 (2 cores), against 1.6-1.9 ms and 31 ms from the copy in
# memory (bench/dense_search.py). 2 GiB holds about 2.8 M 384-d passages; larger indexes keep RAM bounded.
RESIDENT_FP16_BYTES = 2 * 1024**3
# `auto`: exact flat search up to this many vectors, ivfpq above, where one flat search costs more than the
# ivfpq's at the recall measured in bench/results/scale.md (bench/scale.py vectors)
FLAT_MAX_VECTORS = 1_000_000
AUTO = "auto"


# Above this many vectors, an IVF's nearest lists hold a smaller share of a question's neighbours and its
# codes rank them less well, so a question searches more lists and rescores more candidates (`search_depth`)
DEEP_SEARCH_MIN_VECTORS = 5_000_000


def search_depth(vectors: int) -> tuple[int, int]:
    """(nprobe, rerank) an ivf / ivfpq index over this many vectors searches with when not told."""
    return (64, 100) if vectors <= DEEP_SEARCH_MIN_VECTORS else (192, 200)


def auto_kind(vectors: int) -> str:
    """The index kind `auto` builds for this many vectors."""
    return "flat" if vectors <= FLAT_MAX_VECTORS or not faiss_installed() else "ivfpq"


@dataclass
class VectorIndexParams:
    # the metadata's help and choices are the `index` command's (odqa.commands.options); the kinds are the
    # registry's below, read when the command line is built
    kind: str = field(
        default=AUTO,
        metadata={
            "help": f"vector index kind (auto: flat up to {FLAT_MAX_VECTORS:,} passages, else ivfpq)",
            "choices": lambda: (AUTO, *VECTOR_INDEXES.names),
        },
    )
    hnsw_m: int = field(default=32, metadata={"help": "hnsw: links per node"})
    ef_construction: int = 80
    ef_search: int = field(default=128, metadata={"help": "hnsw: candidates kept while searching"})
    nlist: int = field(default=0, metadata={"help": "IVF lists (0: 4*sqrt(n))"})
    # nprobe, rerank and the code size: the cheapest settings that meet issue 49's recall@20 target against exact
    # search over simulated passage vectors (bench/results/scale.md, the ivfpq rows); by size: `search_depth`
    nprobe: int = field(default=0, metadata={"help": "ivf, ivfpq: lists searched per query (0: by corpus size)"})
    pq_m: int = field(default=0, metadata={"help": "ivfpq: bytes per vector code (0: dimension / 4)"})
    rerank: int = field(
        default=-1,
        metadata={
            "help": "ivfpq: candidates rescored exactly from the float16 vectors (-1: by corpus size; 0: the codes' "
            "approximate scores)"
        },
    )
    # ivf / ivfpq: how a vector finds its lists: "auto" (an HNSW graph of the centroids from
    # HNSW_QUANTIZER_MIN_LISTS lists on, else every centroid compared), "graph" or "flat"
    quantizer: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)


class VectorIndex:
    """search(vectors, k) -> (scores [q, k], rows [q, k]); rows are passage/entity rows, -1 when missing."""

    _source: BinaryIO  # of an index loaded from its folder: the open embeddings.npy its memory map and check read

    def __init__(self, embeddings: np.ndarray, manifest: Manifest, faiss_index=None, path: Path | None = None):
        self.embeddings = embeddings
        self.manifest = manifest
        self.faiss_index = faiss_index
        self.path = path
        self._resident = None  # the float16 vectors in memory, built at the first search that wants them
        self.check = None  # of embeddings.npy (indexes.integrity.FileCheck): whole, before the vectors are read

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    @staticmethod
    def build(
        embeddings_path: str | Path,
        out: str | Path,
        manifest: Manifest,
        params: VectorIndexParams | None = None,
    ) -> VectorIndex:
        """Turn an embeddings .npy file (moved into the index folder) into a saved index."""
        params = params or VectorIndexParams()
        embeddings = np.load(embeddings_path, mmap_mode="r")
        if embeddings.ndim != 2 or embeddings.shape[0] == 0:
            raise OdqaError(
                f"{embeddings_path}: expected a non-empty 2-d array of vectors, got shape {embeddings.shape}"
            )
        with atomic_folder(out) as tmp:
            Path(embeddings_path).replace(tmp / EMBEDDINGS)
            embeddings = np.load(tmp / EMBEDDINGS, mmap_mode="r")
            if params.kind == AUTO:
                params.kind = auto_kind(len(embeddings))
            nprobe, rerank = search_depth(len(embeddings))
            params.nprobe = params.nprobe or nprobe
            params.rerank = rerank if params.rerank < 0 else params.rerank
            index = _train_and_fill(embeddings, params)
            if index is not None:
                load_faiss().write_index(index, str(tmp / FAISS_FILE))
            manifest.kind = "faiss"
            manifest.count = int(embeddings.shape[0])
            manifest.dim = int(embeddings.shape[1])
            manifest.params = {**manifest.params, **{k: v for k, v in vars(params).items() if k != "extra"}}
            manifest.save(tmp)
        return VectorIndex.load(out)

    @staticmethod
    def load(path: str | Path, use_gpu: bool | None = None, check: Callable | None = None) -> VectorIndex:
        """`check(file name, read)`: the FileCheck of one of the folder's files over `read(offset, length)`
        (indexes.integrity.file_check), or None where nothing was recorded. The FAISS file is checked before it
        is read; the vectors before they are first read (`verified_embeddings`)."""
        path = Path(path)
        manifest = Manifest.load(path, kind="faiss")
        source = (path / EMBEDDINGS).open("rb")  # the memory map and its check read this one file
        embeddings = _memmap_npy(source, path / EMBEDDINGS)
        faiss_index = None
        if (path / FAISS_FILE).exists():
            faiss = load_faiss(f"the {manifest.params.get('kind', 'FAISS')} vector index {path}")
            data = (path / FAISS_FILE).read_bytes()
            faiss_check = check and check(FAISS_FILE, lambda offset, length: memoryview(data)[offset : offset + length])
            if faiss_check:
                faiss_check.whole()
            faiss_index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
            del data
            _set_search_params(faiss_index, manifest.params)
        index = VectorIndex(embeddings, manifest, faiss_index, path)
        if manifest.params.get("kind") == "ivfpq":
            advise_random_rows(embeddings)
        index.check = check and check(EMBEDDINGS, file_reader(source))
        index._source = source
        if use_gpu is None or use_gpu:
            index.maybe_to_gpu(required=bool(use_gpu))
        return index

    def maybe_to_gpu(self, required: bool = False) -> bool:
        """Move the FAISS index to a GPU where faiss-gpu and a device are present."""
        if not required and not faiss_installed():
            return False
        faiss = load_faiss("GPU vector search")
        if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
            if required:
                raise OdqaError(
                    "no GPU FAISS available: install faiss-gpu (pip install 'odqa[gpu]') on a machine with a GPU"
                )
            return False
        if self.faiss_index is None:
            self.faiss_index = faiss.IndexFlatIP(self.dim)
            self.faiss_index.add(np.ascontiguousarray(self.verified_embeddings(), dtype=np.float32))
        self._gpu_resources = faiss.StandardGpuResources()
        self.faiss_index = faiss.index_cpu_to_gpu(self._gpu_resources, 0, self.faiss_index)
        return True

    def search(self, vectors: np.ndarray, k: int, block_rows: int = 262144) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise OdqaError(f"query vectors have shape {vectors.shape}; this index holds {self.dim}-d vectors")
        k = min(k, len(self))
        if self.faiss_index is None:
            self.verified_embeddings()
        if self.faiss_index is None and not faiss_installed():
            return matrix_product_search(self.embeddings, vectors, k)
        index = self.faiss_index if self.faiss_index is not None else self._resident_fp16()
        if index is not None:
            rerank = int(self.manifest.params.get("rerank", 0)) if self.manifest.params.get("kind") == "ivfpq" else 0
            scores, rows = index.search(vectors, max(k, min(rerank, len(self))))
            if rerank:
                return rescore(self.verified_rows(rows), vectors, rows.astype(np.int64), k)
            return scores, rows.astype(np.int64)
        return _blocked_flat_search(self.embeddings, vectors, k, block_rows)

    def verified_rows(self, rows: np.ndarray) -> np.ndarray:
        """The vectors, with the bytes of `rows` checked against the build's digests (the blocks that hold them,
        each block once): rescoring an approximate index's candidates or scoring a linker's reads hundreds of
        rows, and must not read the whole file (16 GB at 21 M passages) to check them."""
        rows = np.unique(np.asarray(rows, dtype=np.int64).reshape(-1))
        rows = rows[(rows >= 0) & (rows < len(self.embeddings))]
        if self.check is not None:
            width = int(np.prod(self.embeddings.shape[1:])) * self.embeddings.dtype.itemsize
            starts = int(getattr(self.embeddings, "offset", 0)) + rows * width
            self.check.ranges(starts, starts + width)
        prefetch_rows(self.embeddings, rows)
        return self.embeddings

    def verified_embeddings(self) -> np.ndarray:
        """The vectors, checked whole against the build's digests the first time (every flat search reads them
        all, so a per-block check would cost the same)."""
        if self.check is not None:
            self.check.whole()
        return self.embeddings

    def _resident_fp16(self):
        """The flat float16 vectors in a FAISS float16 scalar-quantiser index (exact for them), where they fit
        `RESIDENT_FP16_BYTES`; None for float32 vectors (the memmap is searched as it is) and larger indexes."""
        if self.embeddings.dtype != np.float16 or self.embeddings.nbytes > RESIDENT_FP16_BYTES:
            return None
        if self._resident is None:
            self._resident = float16_copy_index(self.verified_embeddings())
        return self._resident


def advise_random_rows(array: np.ndarray) -> None:
    """Rows of this memory map are read a few at a time at random places (an ivfpq index rescoring its
    candidates, a knowledge base scoring its own): no readahead around a miss (odqa.core.mapped_reads; rows read
    plainly cost 159 MB of disk reads a question at 21 M vectors, bench/results/scale.md)."""
    advise_random(getattr(array, "_mmap", None))


def prefetch_rows(array: np.ndarray, rows: np.ndarray) -> None:
    """Ask the disk for the pages of every row of a memory map at once (cold rows of a 21 M-vector file: 8.8 ms
    p50 instead of 39 for 200 rows)."""
    if not len(rows):
        return
    width = int(np.prod(array.shape[1:])) * array.dtype.itemsize
    offset = int(getattr(array, "offset", 0))
    offset -= offset // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY  # numpy maps from a granule
    starts = offset + np.asarray(rows, dtype=np.int64) * width
    prefetch_ranges(getattr(array, "_mmap", None), starts.tolist(), (starts + width).tolist())


def _memmap_npy(source, path: Path) -> np.ndarray:
    """A read-only memory map of the .npy file open as `source` (what np.load(mmap_mode="r") gives, over a file
    that stays open for its check)."""
    try:
        version = np.lib.format.read_magic(source)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(source)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(source)
        return np.memmap(
            source, dtype=dtype, mode="r", offset=source.tell(), shape=shape, order="F" if fortran else "C"
        )
    except (ValueError, OSError) as exc:
        raise IndexMismatchError(
            f"{path} is not a readable array of vectors ({str(exc).splitlines()[0][:120]}); "
            "it was damaged: rebuild the index"
        ) from None


class MatrixProductIndex:
    """Exact inner-product search without FAISS: `search(queries, k) -> (scores, rows)` as a FAISS index
    answers, over vectors kept as they are (a memmap is read block by block)."""

    def __init__(self, vectors: np.ndarray):
        self.vectors = vectors

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return matrix_product_search(self.vectors, np.ascontiguousarray(queries, dtype=np.float32), k)


def matrix_product_search(
    vectors: np.ndarray, queries: np.ndarray, k: int, block_rows: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """The k rows of highest inner product with each query, best first (ties: the lower row first), computed in
    float32 one block of `vectors` at a time, keeping each query's best k so far."""
    n_q = queries.shape[0]
    k = min(k, len(vectors))
    best_scores = np.empty((n_q, 0), dtype=np.float32)
    best_rows = np.empty((n_q, 0), dtype=np.int64)
    for start in range(0, len(vectors), block_rows):
        block = np.asarray(vectors[start : start + block_rows], dtype=np.float32)
        scores = np.concatenate([best_scores, queries @ block.T], axis=1)
        rows = np.concatenate(
            [best_rows, np.broadcast_to(np.arange(start, start + len(block)), (n_q, len(block)))], axis=1
        )
        if scores.shape[1] > k:
            keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores, rows = np.take_along_axis(scores, keep, 1), np.take_along_axis(rows, keep, 1)
        best_scores, best_rows = scores, rows
    order = np.lexsort((best_rows, -best_scores), axis=1)
    return np.take_along_axis(best_scores, order, 1), np.take_along_axis(best_rows, order, 1)


def float16_copy_index(vectors: np.ndarray, block_rows: int = 65536):
    """A FAISS inner-product index over float16 copies of `vectors` (FAISS's float16 scalar quantiser: exact for
    vectors stored in float16), filled block by block so that a memmap is read once. Without FAISS: the vectors
    themselves, searched as a matrix product."""
    if not faiss_installed():
        return MatrixProductIndex(vectors)
    faiss = load_faiss()
    index = faiss.IndexScalarQuantizer(vectors.shape[1], faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    for start in range(0, len(vectors), block_rows):
        index.add(np.ascontiguousarray(vectors[start : start + block_rows], dtype=np.float32))
    return index


def _blocked_flat_search(embeddings: np.ndarray, queries: np.ndarray, k: int, block_rows: int):
    """Exact inner-product search over a memmap, one block at a time, merging top-k with FAISS's heap."""
    n_q = queries.shape[0]
    faiss = load_faiss()
    result = faiss.ResultHeap(n_q, k, keep_max=True)
    for start in range(0, embeddings.shape[0], block_rows):
        block = np.ascontiguousarray(embeddings[start : start + block_rows], dtype=np.float32)
        scores, rows = faiss.knn(queries, block, min(k, block.shape[0]), metric=faiss.METRIC_INNER_PRODUCT)
        result.add_result(scores, np.where(rows >= 0, rows + start, -1))
    result.finalize()
    return result.D, result.I.astype(np.int64)


def rescore(embeddings: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int):
    """The best `k` of each query's candidate rows by exact inner product with their stored vectors (read from
    the memmap in row order); missing candidates (-1) last."""
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    rows = np.full((len(queries), k), -1, dtype=np.int64)
    for q, (query, found) in enumerate(zip(queries, candidates)):
        found = np.unique(found[found >= 0])
        exact = np.asarray(embeddings[found], dtype=np.float32) @ query
        best = np.lexsort((found, -exact))[:k]
        scores[q, : len(best)], rows[q, : len(best)] = exact[best], found[best]
    return scores, rows


def _flat(embeddings: np.ndarray, params: VectorIndexParams):
    return None  # searched straight from the memmap


def _hnsw(embeddings: np.ndarray, params: VectorIndexParams):
    faiss = load_faiss()
    index = faiss.IndexHNSWFlat(embeddings.shape[1], params.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = params.ef_construction
    return index


def _ivf(embeddings: np.ndarray, params: VectorIndexParams):
    n, dim = embeddings.shape
    nlist = params.nlist or max(1, int(4 * np.sqrt(n)))
    faiss = load_faiss()
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    sample = np.sort(rng.choice(n, size=min(n, max(nlist * 40, 10000)), replace=False))
    index.train(np.ascontiguousarray(embeddings[sample], dtype=np.float32))
    params.nlist = nlist
    return index


# From this many IVF lists on, a vector finds its nearest lists through an HNSW graph of the centroids instead
# of comparing it with every centroid: that comparison is most of an ivfpq build over millions of vectors, and
# the graph finds the same lists when searched wide enough (bench/results/scale.md, "The coarse quantizer")
HNSW_QUANTIZER_MIN_LISTS = 1024
HNSW_QUANTIZER_M = 32


QUANTIZERS = ("auto", "graph", "flat")


def _coarse_quantizer(dim: int, nlist: int, kind: str = "auto"):
    faiss = load_faiss()
    if kind not in QUANTIZERS:
        raise OdqaError(f"vector index quantizer {kind!r}: choose one of {', '.join(QUANTIZERS)}")
    if kind == "flat" or (kind == "auto" and nlist < HNSW_QUANTIZER_MIN_LISTS):
        return faiss.IndexFlatIP(dim)
    quantizer = faiss.IndexHNSWFlat(dim, HNSW_QUANTIZER_M, faiss.METRIC_INNER_PRODUCT)
    quantizer.hnsw.efConstruction = 80
    return quantizer


def _ivfpq(embeddings: np.ndarray, params: VectorIndexParams):
    n, dim = embeddings.shape
    nlist = params.nlist or max(1, int(4 * np.sqrt(n)))
    m = params.pq_m or max(d for d in range(1, max(1, dim // 4) + 1) if dim % d == 0)
    if dim % m:
        raise OdqaError(f"--pq-m {m} does not divide the vectors' dimension {dim}; pick a divisor of {dim}")
    faiss = load_faiss()
    index = faiss.IndexIVFPQ(
        _coarse_quantizer(dim, nlist, params.quantizer), dim, nlist, m, 8, faiss.METRIC_INNER_PRODUCT
    )
    exact = faiss.IndexFlatIP(dim)  # the k-means itself assigns exactly; the graph then holds its centroids
    index.clustering_index = exact
    rng = np.random.default_rng(0)
    # FAISS trains the coarse k-means on at most 256 points a list, the codebooks on 256 x 256
    sample = np.sort(rng.choice(n, size=min(n, max(nlist * 64, 65536)), replace=False))
    index.train(np.ascontiguousarray(embeddings[sample], dtype=np.float32))
    index.clustering_index = None  # `exact` is freed when this returns
    params.nlist, params.pq_m = nlist, m
    quantizer = faiss.downcast_index(index.quantizer)
    if isinstance(quantizer, faiss.IndexHNSW):
        # a vector added needs its one nearest list, which a narrow search of the graph finds
        quantizer.hnsw.efSearch = 32
    return index


# The vector index kinds by name (`--vector-index`, VectorIndexParams.kind): a function of (embeddings, params)
# giving an empty trained FAISS index, or None to search the memmap itself. A new kind: one function, one line.
VECTOR_INDEXES: Registry = Registry("vector index kind", {"flat": _flat, "hnsw": _hnsw, "ivf": _ivf, "ivfpq": _ivfpq})


def _train_and_fill(embeddings: np.ndarray, params: VectorIndexParams):
    from tqdm.auto import tqdm

    n = embeddings.shape[0]
    if params.kind != "flat":
        log.info("training the %s index over %s vectors...", params.kind, f"{n:,}")
    index = VECTOR_INDEXES.get(params.kind)(embeddings, params)
    if index is None:
        return None
    with tqdm(total=n, desc=f"{params.kind} add", unit=" vec", mininterval=2, disable=n < 1_000_000) as bar:
        for start in range(0, n, 65536):
            index.add(np.ascontiguousarray(embeddings[start : start + 65536], dtype=np.float32))
            bar.update(min(65536, n - start))
    return index


def _set_search_params(index, params: dict[str, Any]) -> None:
    faiss = load_faiss()
    if isinstance(index, faiss.IndexHNSW):
        index.hnsw.efSearch = int(params.get("ef_search", 128))
    elif isinstance(index, faiss.IndexIVF):
        index.nprobe = int(params.get("nprobe", 32))  # builds record nprobe; 32: a manifest written by hand
        quantizer = faiss.downcast_index(index.quantizer)
        if isinstance(quantizer, faiss.IndexHNSW):
            # a question needs nearly all of its nprobe nearest lists, which a search only as wide as nprobe
            # misses too often (bench/results/scale.md, "The coarse quantizer")
            quantizer.hnsw.efSearch = max(8 * index.nprobe, 256)
