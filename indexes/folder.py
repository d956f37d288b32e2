"""An index folder built by `odqa index` (whole, or as shards searched as one) as a `SearchBackend`
(odqa.core.protocols): its passage store, BM25 text index and vector index, each opened on first use and checked
against the folder's manifest (row counts, corpus fingerprint, recorded file digests)."""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from odqa.core.atomic import swap_lock
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.optional import require
from odqa.core.protocols import TEXT, VECTORS
from odqa.core.types import BackendInfo, EncoderRecord, Passage, SearchHit
from odqa.corpus.articles import StoreArticlePassages
from odqa.corpus.store import DATA_FILE, PassageStore
from odqa.indexes.analysis import check_analyzer_available
from odqa.indexes.bm25 import TEXT_ENGINES, default_max_df, load_text_index
from odqa.indexes.integrity import (
    add_block_digests,
    check_bundle_manifest,
    check_files_whole,
    check_part,
    check_part_format,
    check_shard,
    file_check,
    note_unchecked,
    part_fix,
    recover_swap,
    sharded_fix,
    swap_in_progress,
)
from odqa.indexes.layout import BM25, DENSE, PASSAGES, SHARD_RECORDS, SHARDS, IndexLayout
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import FAISS_KINDS, VectorIndex

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
    time.sleep(0.02 * 2**attempt)


def _swapping(path: Path, pin: _PinnedFolder | None) -> bool:
    """Whether a rebuild is swapping `path` now or has swapped it since `pin` was taken."""
    return swap_in_progress(path) or (pin is not None and pin.replaced(path))


@dataclass(eq=False)  # one open index is one object (the retriever builder keeps its encoders by it)
class FolderIndex:
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

    @classmethod
    def open(cls, path: str | Path) -> FolderIndex:
        path = Path(path)
        try:
            recover_swap(path)
        except OSError:
            pass  # a read-only parent folder: nothing a reader may repair
        with swap_lock(path):
            return cls._open_pinned(path)

    @classmethod
    def _open_pinned(cls, path: Path) -> FolderIndex:
        for attempt in range(SWAP_RETRIES + 1):
            pin = None
            try:
                try:
                    pin = _PinnedFolder(path)
                except FileNotFoundError:
                    raise OdqaError(
                        f"index folder not found: {path}; build it with `odqa index --corpus PATH --out {path}`"
                    ) from None
                except NotADirectoryError:
                    raise OdqaError(
                        f"{path} is a file, not an index folder; give the folder that `odqa index --out` wrote"
                    ) from None
                manifest = Manifest.load(path, kind="bundle")
                check_bundle_manifest(manifest, path)
                bundle = (ShardedFolderIndex if manifest.params.get(SHARDS) else cls)(path, manifest, _pin=pin)
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
        raise OdqaError(
            f"{path} was replaced {SWAP_RETRIES + 1} times while it was "
            "opened; open it again when the builds writing it are done"
        )

    def _reopen(self) -> None:
        """Read the new index that a rebuild put in place, dropping every part opened from the old one, so that
        parts of the two are never mixed."""
        fresh = FolderIndex._open_pinned(self.path)
        self.manifest, self._pin = fresh.manifest, fresh._pin
        self._cache.clear()
        for name in ("store", "_article_passages", "shards"):
            self.__dict__.pop(name, None)

    def _check_parts(self) -> None:
        """At open: the parts that make the index are the ones recorded (a sharded index's shards); a bundle's own
        parts are checked as they open."""

    def capabilities(self) -> frozenset[str]:
        """TEXT where the index was built with BM25, VECTORS where with the dense part."""
        held = {TEXT: BM25 in self.backends, VECTORS: DENSE in self.backends}
        return frozenset(capability for capability, built in held.items() if built)

    def check_available(self, capability: str) -> None:
        """Before the first search through `capability`: the optional packages it needs here (the BM25 analyser
        for TEXT, FAISS for an hnsw or ivf vector index) are installed, else one line names the missing one; then
        the parts it reads are opened and checked (a part the index lacks: one line naming the fix). Where a
        rebuild swaps the folder meanwhile, the parts found are the new index's and the manifest the old one's,
        so the new index is opened whole instead."""
        if capability == TEXT and BM25 in self.backends:
            check_analyzer_available(self.manifest.params.get("analyzer", "en"))
        if capability == VECTORS and DENSE in self.backends and self.layout.dense.is_dir():
            vector_kind = Manifest.load(self.layout.dense).params.get("kind", "flat")
            if vector_kind in FAISS_KINDS:
                require("faiss", f"the {vector_kind} vector index of {self.path}")
        with swap_lock(self.path):
            self._open_parts(capability)

    def _open_parts(self, capability: str) -> None:
        if self._pin is not None and self._pin.replaced(self.path):
            with contextlib.suppress(OdqaError):  # still swapping (no lock beside it): the retries below wait
                self._reopen()  # swapped since it was opened: the parts are read from the new index
        for attempt in range(SWAP_RETRIES + 1):
            try:
                _ = self.store
                if capability == TEXT:
                    self.text_index()
                if capability == VECTORS:
                    self.vector_index()
                return
            except (OdqaError, OSError):
                if attempt == SWAP_RETRIES or self._pin is None or not _swapping(self.path, self._pin):
                    raise
            _wait_for_swap(attempt)
            try:
                self._reopen()
            except OdqaError:
                if attempt == SWAP_RETRIES:
                    raise

    def info(self) -> BackendInfo:
        if "info" not in self._cache:
            # the parts' manifests are read here, after the open: under the readers' lock, from the index the
            # manifest was read from (a rebuild that swapped it since is opened whole first), as `_open_parts` does
            with swap_lock(self.path):
                if self._pin is not None and self._pin.replaced(self.path):
                    with contextlib.suppress(OdqaError):
                        self._reopen()
                for attempt in range(SWAP_RETRIES + 1):
                    try:
                        self._cache["info"] = self._read_info()
                        break
                    except (OdqaError, OSError):
                        if attempt == SWAP_RETRIES or self._pin is None or not _swapping(self.path, self._pin):
                            raise
                    _wait_for_swap(attempt)
                    with contextlib.suppress(OdqaError):
                        self._reopen()
        return self._cache["info"]

    def _read_info(self) -> BackendInfo:
        params = self.manifest.params
        language = params.get("language", "en")
        engine = self._text_engine()
        prunes = hasattr(TEXT_ENGINES.get(engine), "drop_frequent_terms") if engine in TEXT_ENGINES else False
        return BackendInfo(
            location=str(self.path),
            language=language,
            text=BM25 in self.backends,
            vectors=DENSE in self.backends,
            encoder=self._encoder_record(),
            tuned_fusion=params.get(TUNED_FUSION),
            kb=self.layout.kb,
            bm25_max_df=default_max_df(self.manifest.count) if prunes else 0.0,
            max_df_refusal=""
            if prunes
            else (
                f"retrieval.bm25_max_df needs the tantivy BM25 engine; this index uses {engine or 'another'}: "
                "set it to 0 or rebuild the index with `run_qa.py index` (tantivy is the default)"
            ),
            summary={
                "backends": self.backends,
                "language": language,
                "analyzer": params.get("analyzer", ""),
                "encoder": self.manifest.encoder,
                "dim": self.manifest.dim,
                "built": self.manifest.created,
                "corpus_fingerprint": self.manifest.corpus_fingerprint,
            },
        )

    def _text_engine(self) -> str:
        """The BM25 engine the text part was built with ("": no readable text part)."""
        if BM25 not in self.backends or not (self.layout.bm25 / MANIFEST).is_file():
            return ""
        return Manifest.load(self.layout.bm25).params.get("engine", "tantivy")

    def _vector_manifest(self) -> Manifest | None:
        """The vector part's manifest (None: no readable vector part; opening it names the problem)."""
        if DENSE not in self.backends or not (self.layout.dense / MANIFEST).is_file():
            return None
        return Manifest.load(self.layout.dense)

    def _encoder_record(self) -> EncoderRecord | None:
        manifest = self._vector_manifest()
        if manifest is None:
            return None
        params = manifest.params
        return EncoderRecord(
            name=manifest.encoder,
            dim=manifest.dim,
            query_encoder=params.get("query_encoder", ""),
            settings=dict(params.get("encoder_settings", {})),
            max_length=int(params.get("max_length", 256)),
            weights=params.get("encoder_weights", ""),
        )

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
                f"{self.manifest.params.get('corpus', 'CORPUS')} --out {self.path}`"
            )

    def article_passages(self) -> StoreArticlePassages:
        """Each article's passages, for the entity bonus (linker.guided), from the passage store."""
        return self._article_passages

    @cached_property
    def _article_passages(self) -> StoreArticlePassages:
        return StoreArticlePassages(self.store)

    def _checker(self, part: str):
        """`check(file name, read)` for the files of `part` (indexes.integrity.file_check); an index built
        before parts or block digests were recorded is said so, once."""
        recorded = self.parts.get(part)
        if not recorded:
            note_unchecked(
                str(self.path),
                "records no file digests, so damage inside its files cannot be seen; rebuild it with `run_qa.py index`",
            )
        elif any("blocks" not in info for info in recorded["files"].values()):
            note_unchecked(
                str(self.path),
                "was built before block digests: each file is checked whole against its "
                f"SHA-256 at first use (slower); `run_qa.py verify-index {self.path}` records them",
            )
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
                raise IndexMismatchError(
                    f"index part {self.path.name}/passages: {DATA_FILE} is laid out otherwise "
                    f"than when it was built (a damaged batch header); rebuild it with "
                    f"`run_qa.py index --corpus CORPUS --out {self.path}`"
                )
        store.advise_random_reads()
        check = self._checker(PASSAGES)(DATA_FILE, store.byte_reader())
        if check is not None:
            store.verify_with(check)
        return store

    def _require(self, backend: str) -> Path:
        if backend not in self.backends:
            raise OdqaError(
                f"{self.path} has no {backend} index (it has: {', '.join(self.backends)}); rebuild with "
                f"`odqa index --corpus {self.manifest.params.get('corpus', 'PATH')} "
                f"--out {self.path} --backends bm25,dense`"
            )
        folder = self.layout.part(backend)
        if not (folder / MANIFEST).is_file():  # Manifest.load would take the part for an index of its own
            raise IndexMismatchError(
                f"index part {self.path.name}/{backend} has no {MANIFEST} (deleted, or not copied with the rest); "
                "rebuild the index with `odqa index --corpus "
                f"{self.manifest.params.get('corpus', 'CORPUS')} --out {self.path}`"
            )
        manifest = Manifest.load(folder)
        check_part_format(self.manifest, manifest, f"index part {self.path.name}/{backend}", part_fix(folder))
        manifest.check_corpus(self.manifest.corpus_fingerprint, where=str(folder))
        self._check_rows(backend, manifest.count)
        check_part(folder, self.parts.get(backend), rows=None)
        return folder

    def text_index(self):
        """The BM25 part's text index (indexes.bm25), checked against the folder, opened once."""
        if BM25 not in self._cache:
            folder = self._require(BM25)
            self._checker(BM25)  # the note on an older index
            check_files_whole(folder, self.parts.get(BM25))  # the engines read their files themselves
            index = load_text_index(folder)
            self._check_rows(BM25, index.num_docs())
            self._cache[BM25] = index
        return self._cache[BM25]

    def text_search(self, questions: Sequence[str], k: int, max_df: float) -> list[list[SearchHit]]:
        """`max_df` > 0: each question without its terms in more than that fraction of the passages (Tantivy)."""
        index = self.text_index()
        if max_df and not hasattr(index, "drop_frequent_terms"):
            raise OdqaError(self.info().max_df_refusal)
        found = index.search(list(questions), k, max_df=max_df) if max_df else index.search(list(questions), k)
        return [[SearchHit(row=row, score=score, source="bm25") for row, score in hits] for hits in found]

    def vector_search(self, vectors: np.ndarray, k: int) -> list[list[SearchHit]]:
        scores, rows = self.vector_index().search(vectors, k)
        return [
            [SearchHit(row=int(r), score=float(s), source="dense") for s, r in zip(qs, qr) if r >= 0]
            for qs, qr in zip(scores, rows)
        ]

    def passages(self, rows: Sequence[int]) -> list[Passage]:
        return self.store.get_rows(list(rows))

    def vector_index(self):
        """The dense part's vector index (`search(vectors, k)`, `dim`, `manifest`), checked against the folder,
        opened once."""
        if DENSE not in self._cache:
            index = VectorIndex.load(self._require(DENSE), use_gpu=None, check=self._checker(DENSE))
            self._check_rows(DENSE, len(index))
            self._cache[DENSE] = index
        return self._cache[DENSE]

    def record_fusion(self, setting: dict) -> None:
        """Keep a fusion setting chosen on a dev split (`tune-hybrid --record`) in the bundle manifest, where
        `auto` finds it. The manifest is rewritten atomically; the parts and their digests are untouched."""
        self.manifest.params[TUNED_FUSION] = setting
        self.manifest.save(self.path)
        self._cache.pop("info", None)

    def verify(self) -> list[str]:
        """The full check behind `run_qa.py verify-index`: every part's files against their recorded digests,
        row counts, and the passage store's fingerprint recomputed from its rows. Raises on the first problem."""
        from odqa.core.types import Passage
        from odqa.corpus.store import Fingerprint

        lines = []
        if not self.parts:
            lines.append(
                "note: this index was built before parts were recorded; only row counts and the "
                "passage fingerprint are checked (rebuild it to record file digests)"
            )
        for part in [PASSAGES, *self.backends]:
            check_part(self.layout.part(part), self.parts.get(part), rows=None, full=True)
        fingerprint = Fingerprint()
        for batch in self.store.iter_batches(10000, columns=("id", "text")):
            for pid, text in zip(batch["id"], batch["text"]):
                fingerprint.update(Passage(id=pid, title="", text=text))
        if fingerprint.hexdigest() != self.manifest.corpus_fingerprint:
            raise IndexMismatchError(
                f"index part {self.path.name}/passages holds other passages (fingerprint {fingerprint.hexdigest()}, "
                f"index {self.manifest.corpus_fingerprint}): rebuild it with `run_qa.py index`"
            )
        lines.append(f"passages: {len(self.store)} rows, fingerprint {fingerprint.hexdigest()} ok")
        if BM25 in self.backends:
            self.text_index()
            lines.append(f"bm25: {self.manifest.count} documents ok")
        if DENSE in self.backends:
            index = VectorIndex.load(self._require(DENSE), use_gpu=False)
            self._check_rows(DENSE, len(index))
            lines.append(f"dense: {len(index)} x {index.dim} vectors ok")
        parts = [part for part in [PASSAGES, *self.backends] if self.parts.get(part)]
        if [part for part in parts if add_block_digests(self.layout.part(part), self.parts[part])]:
            self.manifest.save(self.path)  # atomically; the files are untouched
            lines.append(
                "recorded the block digests this index was built without: searches now check the "
                "blocks they read instead of whole files"
            )
        return lines


class ShardedFolderIndex(FolderIndex):
    """An index built as shards (`odqa index --shards N`, indexes/shards.py), searched as one: `OUT/shards/*` are
    whole index folders over consecutive groups of the corpus files, `OUT/bm25` joins their BM25 segments (whole-
    corpus statistics), the passage store is theirs in order, and dense search merges theirs."""

    @cached_property
    def shards(self) -> list[FolderIndex]:
        """The shards, each checked to be the one the index was built with (its manifest's digest and rows, as
        the bundle manifest records them): a shard swapped with another or copied from another build would
        put other passages under the rows the joined BM25 index returns."""
        params = self.manifest.params
        fix = sharded_fix(self.path, params.get("corpus"), params[SHARDS])
        return [
            FolderIndex(
                self.path / name, check_shard(self.path / name, params[SHARD_RECORDS][name], self.manifest, fix)
            )
            for name in params[SHARDS]
        ]

    def _check_parts(self) -> None:
        _ = self.shards

    @cached_property
    def store(self) -> PassageStore:
        store = PassageStore.concat([shard.store for shard in self.shards])  # each shard checks its own rows
        self._check_rows(PASSAGES, len(store))
        return store

    def vector_index(self):
        from odqa.indexes.shards import ShardedVectorIndex

        if DENSE not in self._cache:
            if DENSE not in self.backends:
                self._require(DENSE)  # names the fix
            index = ShardedVectorIndex([shard.vector_index() for shard in self.shards], self.path)
            index.manifest.corpus_fingerprint = self.manifest.corpus_fingerprint
            self._check_rows(DENSE, len(index))
            self._cache[DENSE] = index
        return self._cache[DENSE]

    def _vector_manifest(self) -> Manifest | None:
        return self.shards[0]._vector_manifest() if DENSE in self.backends else None

    def verify(self) -> list[str]:
        lines = []
        for shard in self.shards:  # each the shard recorded (checked at open), then checked whole
            lines += [f"{shard.path.name}: {line}" for line in shard.verify()]
        if BM25 in self.backends:
            check_part(self.layout.bm25, self.parts.get(BM25), rows=None, full=True)
            self.text_index()
            lines.append(f"bm25 (the shards' segments as one index): {self.manifest.count} documents ok")
        return lines
