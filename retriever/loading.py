"""Open an index folder (built by `odqa index`) and make retrievers over it."""

from __future__ import annotations

import contextlib
import json
import os
import time
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from odqa.indexes.analysis import check_analyzer_available
from odqa.indexes.bm25 import default_max_df, load_text_index
from odqa.indexes.integrity import (add_block_digests, check_bundle_manifest, check_files_whole, check_part,
                                   check_part_format, check_shard, file_check, note_unchecked, part_fix, recover_swap,
                                   sharded_fix, swap_in_progress)
from odqa.indexes.layout import BM25, DENSE, PASSAGES, SHARD_RECORDS, SHARDS, IndexLayout
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import FAISS_KINDS, VectorIndex
from odqa.core.atomic import swap_lock
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.fusion import AUTO, resolve_fusion
from odqa.core.logs import get_logger
from odqa.core.optional import require
from odqa.corpus.articles import StoreArticlePassages
from odqa.corpus.store import DATA_FILE, PassageStore
from odqa.retriever.bm25 import BM25Retriever
from odqa.retriever.hybrid import HybridRetriever
from odqa.retriever.kinds import make_retriever

log = get_logger(__name__)
TUNED_FUSION = "fusion"  # the bundle manifest's record of `tune-hybrid --record`
# A reader that meets a rebuild's swap (two renames) opens the folder again, waiting 0.02, 0.04, ... s between
# tries: about 2.5 s in all before the error is taken for real
SWAP_RETRIES = 7


def _folder_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder: a swap puts another folder under the same name. None: not there."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class _PinnedFolder:
    """An open handle on the folder an index was read from. While it is held the folder's inode cannot be given
    to another folder, so "another folder stands under this name" is told by (device, inode) for certain: a rebuild
    that swaps twice cannot bring back the same identity with other files."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        stat = os.fstat(self.fd)
        self.identity = (stat.st_dev, stat.st_ino)
        weakref.finalize(self, os.close, self.fd)

    def replaced(self, path: Path) -> bool:
        return _folder_identity(path) != self.identity


def _wait_for_swap(attempt: int) -> None:
    time.sleep(0.02 * 2 ** attempt)


def _swapping(path: Path, pin: "_PinnedFolder | None") -> bool:
    """Whether a rebuild is swapping `path` now or has swapped it since `pin` was taken."""
    return swap_in_progress(path) or (pin is not None and pin.replaced(path))


@dataclass
class IndexBundle:
    path: Path
    manifest: Manifest
    _cache: dict = field(default_factory=dict, repr=False)
    _pin: _PinnedFolder | None = field(default=None, repr=False)  # the folder the manifest was read from

    @property
    def layout(self) -> IndexLayout:
        return IndexLayout(self.path)

    def __len__(self) -> int:
        """Passages in the index."""
        return len(self.store)

    def describe(self) -> str:
        return str(self.path)

    @classmethod
    def open(cls, path: str | Path) -> "IndexBundle":
        path = Path(path)
        try:
            recover_swap(path)
        except OSError:
            pass  # a read-only parent folder: nothing a reader may repair
        with swap_lock(path):
            return cls._open_pinned(path)

    @classmethod
    def _open_pinned(cls, path: Path) -> "IndexBundle":
        for attempt in range(SWAP_RETRIES + 1):
            pin = None
            try:
                try:
                    pin = _PinnedFolder(path)
                except FileNotFoundError:
                    raise OdqaError(f"index folder not found: {path}; build it with `odqa index --corpus PATH "
                                    f"--out {path}`") from None
                except NotADirectoryError:
                    raise OdqaError(f"{path} is a file, not an index folder; give the folder that `odqa index "
                                    "--out` wrote") from None
                manifest = Manifest.load(path, kind="bundle")
                check_bundle_manifest(manifest, path)
                bundle = (ShardedBundle if manifest.params.get(SHARDS) else cls)(path, manifest, _pin=pin)
                bundle._check_parts()
            except (OdqaError, OSError):
                # a rebuild swapping the folder: between its two renames there is none, or another one
                if attempt == SWAP_RETRIES or not _swapping(path, pin):
                    raise
                _wait_for_swap(attempt)
                continue
            if not pin.replaced(path):
                return bundle
            _wait_for_swap(attempt)
        raise OdqaError(f"{path} was replaced {SWAP_RETRIES + 1} times while it was opened; open it again when the "
                        "builds writing it are done")

    def _reopen(self) -> None:
        """Read the new index that a rebuild put in place, dropping every part opened from the old one, so that
        parts of the two are never mixed."""
        fresh = IndexBundle._open_pinned(self.path)
        self.manifest, self._pin = fresh.manifest, fresh._pin
        self._cache.clear()
        for name in ("store", "_article_passages", "shards"):
            self.__dict__.pop(name, None)

    def _check_parts(self) -> None:
        """At open: the parts that make the index are the ones recorded (a sharded index's shards); a bundle's own
        parts are checked as they open."""

    def check_available(self, kind: str) -> None:
        """Before any work: the optional packages the `kind` retriever over this index needs (its BM25 analyser,
        FAISS for an hnsw or ivf vector index) are installed, else one line names the missing one."""
        if kind in ("bm25", "hybrid") and BM25 in self.backends:
            check_analyzer_available(self.manifest.params.get("analyzer", "en"))
        if kind in ("dense", "hybrid") and DENSE in self.backends and self.layout.dense.is_dir():
            vector_kind = Manifest.load(self.layout.dense).params.get("kind", "flat")
            if vector_kind in FAISS_KINDS:
                require("faiss", f"the {vector_kind} vector index of {self.path}")

    @property
    def language(self) -> str:
        """The language of the index's text (`ko`, `zh`, `en`): its manifest's, `en` where none was recorded."""
        return self.manifest.params.get("language", "en")

    @property
    def backends(self) -> list[str]:
        return list(self.manifest.params.get("backends", []))

    @property
    def parts(self) -> dict:
        return self.manifest.params.get("parts", {})

    def _check_rows(self, part: str, rows: int) -> None:
        if rows != self.manifest.count:
            raise IndexMismatchError(
                f"index part {self.path.name}/{part} holds {rows} rows but the index has {self.manifest.count} "
                f"passages; it was replaced or damaged: rebuild it with `run_qa.py index --corpus "
                f"{self.manifest.params.get('corpus', 'CORPUS')} --out {self.path}`")

    def article_passages(self) -> StoreArticlePassages:
        """Each article's passages, for the entity bonus (linker.guided); an Elasticsearch backend has its own."""
        return self._article_passages

    @cached_property
    def _article_passages(self) -> StoreArticlePassages:
        return StoreArticlePassages(self.store)

    def _checker(self, part: str):
        """`check(file name, read)` for the files of `part` (indexes.integrity.file_check); an index built
        before parts or block digests were recorded is said so, once."""
        recorded = self.parts.get(part)
        if not recorded:
            note_unchecked(str(self.path), "records no file digests, so damage inside its files cannot be seen; "
                           "rebuild it with `run_qa.py index`")
        elif any("blocks" not in info for info in recorded["files"].values()):
            note_unchecked(str(self.path), "was built before block digests: each file is checked whole against its "
                           f"SHA-256 at first use (slower); `run_qa.py verify-index {self.path}` records them")
        folder = self.layout.part(part)
        return lambda name, read: file_check(folder, recorded, name, read)

    @cached_property
    def store(self) -> PassageStore:
        folder = self.layout.passages
        check_part(folder, self.parts.get(PASSAGES), rows=None)
        store = PassageStore.open(folder)
        self._check_rows(PASSAGES, len(store))
        if (folder / "manifest.json").exists():
            part = Manifest.load(folder)
            check_part_format(self.manifest, part, f"index part {self.path.name}/{PASSAGES}", part_fix(folder))
            part.check_corpus(self.manifest.corpus_fingerprint, where=str(folder))
            if part.params.get("layout", store.layout_digest()) != store.layout_digest():
                raise IndexMismatchError(f"index part {self.path.name}/passages: {DATA_FILE} is laid out otherwise "
                                         f"than when it was built (a damaged batch header); rebuild it with "
                                         f"`run_qa.py index --corpus CORPUS --out {self.path}`")
        store.advise_random_reads()
        check = self._checker(PASSAGES)(DATA_FILE, store.byte_reader())
        if check is not None:
            store.verify_with(check)
        return store

    def _require(self, backend: str) -> Path:
        if backend not in self.backends:
            raise OdqaError(
                f"{self.path} has no {backend} index (it has: {', '.join(self.backends)}); rebuild with "
                f"`odqa index --corpus {self.manifest.params.get('corpus', 'PATH')} --out {self.path} --backends bm25,dense`"
            )
        folder = self.layout.part(backend)
        if not (folder / MANIFEST).is_file():  # Manifest.load would take the part for an index of its own
            raise IndexMismatchError(
                f"index part {self.path.name}/{backend} has no {MANIFEST} (deleted, or not copied with the rest); "
                f"rebuild the index with `odqa index --corpus {self.manifest.params.get('corpus', 'CORPUS')} "
                f"--out {self.path}`")
        manifest = Manifest.load(folder)
        check_part_format(self.manifest, manifest, f"index part {self.path.name}/{backend}", part_fix(folder))
        manifest.check_corpus(self.manifest.corpus_fingerprint, where=str(folder))
        self._check_rows(backend, manifest.count)
        check_part(folder, self.parts.get(backend), rows=None)
        return folder

    def bm25(self, bm25_max_df: float | None = None):
        """`bm25_max_df`: leave out of each question its terms found in more than this fraction of the passages
        (None: `indexes.bm25.default_max_df` of the corpus size, for an engine that can)."""
        if BM25 not in self._cache:
            folder = self._require(BM25)
            self._checker(BM25)  # the note on an older index
            check_files_whole(folder, self.parts.get(BM25))  # the engines read their files themselves
            index = load_text_index(folder)
            self._check_rows(BM25, index.num_docs())
            self._cache[BM25] = BM25Retriever(index, self.store)
        if bm25_max_df is None:
            index = self._cache[BM25].index
            bm25_max_df = default_max_df(index.num_docs()) if hasattr(index, "drop_frequent_terms") else 0.0
        if not bm25_max_df:
            return self._cache[BM25]
        key = (BM25, bm25_max_df)
        if key not in self._cache:
            self._cache[key] = BM25Retriever(self._cache[BM25].index, self.store, max_df=bm25_max_df)
        return self._cache[key]

    def dense(self, encoder: str | None = None, device: str | None = None, precision: str = "auto",
              runtime: str = "auto", accept_encoder_change: bool = False, query_encoder: str | None = None,
              settings: dict | None = None):
        """`encoder`: must be the index's (checked); `query_encoder`: any question encoder of the index's
        dimension (DPR's pair). Unset: the question encoder the manifest records. `settings` (pooling,
        similarity, query_prefix): override the manifest's."""
        from odqa.core.encoder_loading import load_text_encoder
        from odqa.retriever.dense import DenseRetriever

        key = ("dense", encoder or "", query_encoder or "", json.dumps(settings or {}, sort_keys=True))
        if key not in self._cache:
            index = self.vector_index()
            folder = index.path
            params = index.manifest.params
            name = query_encoder or encoder or params.get("query_encoder") or index.manifest.encoder
            _check_encoder_weights(index.manifest, encoder or index.manifest.encoder, folder, accept_encoder_change)
            recorded = params.get("encoder_settings", {})
            chosen = {k: recorded.get(k) for k in ("pooling", "similarity", "query_prefix")}
            chosen.update({k: v for k, v in (settings or {}).items() if v not in (None, "")})
            if name != (params.get("query_encoder") or index.manifest.encoder) and not (settings or {}).get("pooling"):
                chosen["pooling"] = None  # another model: its own pooling
            text_encoder = load_text_encoder(name, max_length=int(params.get("max_length", 256)),
                                                       device=device, precision=precision, runtime=runtime, **chosen)
            self._cache[key] = DenseRetriever(text_encoder, index, self.store, check_name=bool(encoder) and not query_encoder)
        return self._cache[key]

    def vector_index(self):
        """The dense part's vector index (`search(vectors, k)`, `dim`, `manifest`), checked against the bundle."""
        index = VectorIndex.load(self._require(DENSE), use_gpu=None, check=self._checker(DENSE))
        self._check_rows(DENSE, len(index))
        return index

    def retriever(self, kind: str, **options):
        """The `kind` retriever (`retriever.kinds.RETRIEVERS`) over this index (options: `make_retriever`'s). Its
        parts open now; where a rebuild swaps the folder meanwhile, the parts found are of the new index and the
        bundle's manifest is the old one's, so it opens the new index and makes the retriever over that."""
        with swap_lock(self.path):
            return self._make_retriever(kind, **options)

    def _make_retriever(self, kind: str, **options):
        if self._pin is not None and self._pin.replaced(self.path):
            with contextlib.suppress(OdqaError):  # still swapping (no lock beside it): the retries below wait
                self._reopen()  # swapped since it was opened: the retriever is made over the new index
        for attempt in range(SWAP_RETRIES + 1):
            try:
                return make_retriever(self, kind, **options)
            except (OdqaError, OSError):
                if attempt == SWAP_RETRIES or self._pin is None or not _swapping(self.path, self._pin):
                    raise
            _wait_for_swap(attempt)
            try:
                self._reopen()
            except OdqaError:
                if attempt == SWAP_RETRIES:
                    raise

    def hybrid(self, fusion: str = AUTO, alpha: float = 0.5, candidates: int = 100, rrf_k: int = 60,
               bm25_max_df: float | None = None, **dense_options):
        if DENSE not in self.backends and BM25 in self.backends:
            # hybrid is the default; an index built with --backends bm25 should still answer
            log.warning("%s has no dense index, so hybrid retrieval falls back to bm25", self.path)
            return self.bm25(bm25_max_df)
        method, alpha, rrf_k = self.fusion_setting(fusion, alpha, rrf_k)
        return HybridRetriever(self.dense(**dense_options), self.bm25(bm25_max_df), method=method, alpha=alpha,
                               candidates=candidates, rrf_k=rrf_k)

    def fusion_setting(self, fusion: str = AUTO, alpha: float = 0.5, rrf_k: int = 60) -> tuple[str, float, int]:
        """The hybrid's (method, alpha, rrf_k): `auto` resolves to this index's tuned record, else its language's
        default (odqa.core.fusion.resolve_fusion)."""
        params = self.manifest.params
        return resolve_fusion(fusion, alpha, rrf_k, tuned=params.get(TUNED_FUSION), language=params.get("language", "en"))

    def record_fusion(self, setting: dict) -> None:
        """Keep a fusion setting chosen on a dev split (`tune-hybrid --record`) in the bundle manifest, where
        `auto` finds it. The manifest is rewritten atomically; the parts and their digests are untouched."""
        self.manifest.params[TUNED_FUSION] = setting
        self.manifest.save(self.path)

    def verify(self) -> list[str]:
        """The full check behind `run_qa.py verify-index`: every part's files against their recorded digests,
        row counts, and the passage store's fingerprint recomputed from its rows. Raises on the first problem."""
        from odqa.corpus.store import Fingerprint
        from odqa.core.types import Passage

        lines = []
        if not self.parts:
            lines.append("note: this index was built before parts were recorded; only row counts and the "
                         "passage fingerprint are checked (rebuild it to record file digests)")
        for part in [PASSAGES, *self.backends]:
            check_part(self.layout.part(part), self.parts.get(part), rows=None, full=True)
        fingerprint = Fingerprint()
        for batch in self.store.iter_batches(10000, columns=("id", "text")):
            for pid, text in zip(batch["id"], batch["text"]):
                fingerprint.update(Passage(id=pid, title="", text=text))
        if fingerprint.hexdigest() != self.manifest.corpus_fingerprint:
            raise IndexMismatchError(
                f"index part {self.path.name}/passages holds other passages (fingerprint {fingerprint.hexdigest()}, "
                f"index {self.manifest.corpus_fingerprint}): rebuild it with `run_qa.py index`")
        lines.append(f"passages: {len(self.store)} rows, fingerprint {fingerprint.hexdigest()} ok")
        if BM25 in self.backends:
            self.bm25()
            lines.append(f"bm25: {self.manifest.count} documents ok")
        if DENSE in self.backends:
            index = VectorIndex.load(self._require(DENSE), use_gpu=False)
            self._check_rows(DENSE, len(index))
            lines.append(f"dense: {len(index)} x {index.dim} vectors ok")
        parts = [part for part in [PASSAGES, *self.backends] if self.parts.get(part)]
        if [part for part in parts if add_block_digests(self.layout.part(part), self.parts[part])]:
            self.manifest.save(self.path)  # atomically; the files are untouched
            lines.append("recorded the block digests this index was built without: searches now check the "
                         "blocks they read instead of whole files")
        return lines


class ShardedBundle(IndexBundle):
    """An index built as shards (`odqa index --shards N`, indexes/shards.py), searched as one: `OUT/shards/*` are
    whole index folders over consecutive groups of the corpus files, `OUT/bm25` joins their BM25 segments (whole-
    corpus statistics), the passage store is theirs in order, and dense search merges theirs."""

    @cached_property
    def shards(self) -> list[IndexBundle]:
        """The shards, each checked to be the one the index was built with (its manifest's digest and rows, as
        the bundle manifest records them): a shard swapped with another or copied from another build would
        put other passages under the rows the joined BM25 index returns."""
        params = self.manifest.params
        fix = sharded_fix(self.path, params.get("corpus"), params[SHARDS])
        return [IndexBundle(self.path / name, check_shard(self.path / name, params[SHARD_RECORDS][name],
                                                          self.manifest, fix))
                for name in params[SHARDS]]

    def _check_parts(self) -> None:
        _ = self.shards

    @cached_property
    def store(self) -> PassageStore:
        store = PassageStore.concat([shard.store for shard in self.shards])  # each shard checks its own rows
        self._check_rows(PASSAGES, len(store))
        return store

    def vector_index(self):
        from odqa.indexes.shards import ShardedVectorIndex

        if DENSE not in self.backends:
            self._require(DENSE)  # names the fix
        index = ShardedVectorIndex([shard.vector_index() for shard in self.shards], self.path)
        index.manifest.corpus_fingerprint = self.manifest.corpus_fingerprint
        self._check_rows(DENSE, len(index))
        return index

    def verify(self) -> list[str]:
        lines = []
        for shard in self.shards:  # each the shard recorded (checked at open), then checked whole
            lines += [f"{shard.path.name}: {line}" for line in shard.verify()]
        if BM25 in self.backends:
            check_part(self.layout.bm25, self.parts.get(BM25), rows=None, full=True)
            self.bm25()
            lines.append(f"bm25 (the shards' segments as one index): {self.manifest.count} documents ok")
        return lines


def _check_encoder_weights(manifest: Manifest, name: str, folder: Path, accept: bool) -> None:
    """The index's vectors come from one set of weights: a model retrained in place under the same name
    would silently pair them with other question vectors."""
    import os

    from odqa.core.models import model_fingerprint

    recorded = manifest.params.get("encoder_weights")
    if not recorded or name.rstrip("/").lower() != manifest.encoder.rstrip("/").lower():
        return
    if model_fingerprint(name) == recorded:
        return
    message = (f"{folder} was encoded with other weights of {name!r} than the ones installed now (the model was "
               f"retrained or replaced); rebuild the index with `run_qa.py index --encoder {name}`, or pass "
               "--accept-encoder-change (ODQA_ACCEPT_ENCODER_CHANGE=1) to search it anyway")
    if accept or os.environ.get("ODQA_ACCEPT_ENCODER_CHANGE") == "1":
        log.warning("warning: %s", message)
        return
    raise IndexMismatchError(message)


def load_retriever(index_dir: str | Path, kind: str = "bm25", **options):
    return IndexBundle.open(index_dir).retriever(kind, **options)
