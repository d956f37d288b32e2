"""Entity knowledge base: one entity per Wikipedia article, with aliases, a popularity prior and
precomputed entity vectors in an inner-product index.

On disk (a folder, written atomically):
  manifest.json    kind "kb": entity encoder, dim, count, KB fingerprint, description length
  entities.jsonl   one entity a line: id, title, description, aliases, doc_id, length
  aliases.sqlite   the alias matcher's ranked table (linker.aliases.StoredAliases)
  vectors/         indexes.vector.VectorIndex (embeddings.npy + its own manifest)

The KB manifest records every other file's size and digests (`files`, indexes.integrity.describe_file), and
its own digest: loading checks sizes and the entity count; each entity's bytes are checked when it is first
read (StoredEntries), the alias table whole at its first use, the vectors before they are first read, so
swapped vector rows, an edited title or a truncated file are refused in one line naming the file and the fix
(build the KB again). A KB built before these records is refused likewise. Loading parses no entity: a KB of
millions opens in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import mmap
import os
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from odqa.core.atomic import atomic_folder, write_npy_blocks
from odqa.core.errors import DiskFullError, IndexMismatchError, OdqaError
from odqa.core.text_encoding import check_vectors_encoder, same_encoder
from odqa.core.types import Document, Entity
from odqa.indexes.analysis import LANGUAGE_NAMES, detect_language
from odqa.indexes.integrity import (
    FileCheck,
    check_part,
    describe_file,
    file_reader,
    part_files,
    recover_swap,
    remove_dead_leftovers,
)
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import AUTO, VectorIndex, VectorIndexParams, faiss_installed, float16_copy_index
from odqa.linker.aliases import AliasMatcher, StoredAliases, alias_key, alias_scheme, make_aliases
from odqa.linker.encoder import entity_text

if TYPE_CHECKING:
    from odqa.core.cluster import Cluster
    from odqa.core.encoder import TextEncoder

log = logging.getLogger(__name__)

ENTITIES = "entities.jsonl"
# the linker searches every candidate span of a question at once (about 24), so exact search over entities costs
# that many passage searches: above this size a KB gets ivfpq (bench/results/scale.md, the knowledge-base rows)
KB_FLAT_MAX_ENTITIES = 250_000
ALIASES = "aliases.sqlite"  # the alias matcher's ranked table (linker.aliases.StoredAliases)
VECTORS = "vectors"
DESCRIPTION_WORDS = 128
DESCRIPTION_CHARS = 600  # the bound for Korean and Chinese text (Chinese leaves no spaces between words)
LANGUAGE_SAMPLE_CHARS = 200  # of an entity's description, read with its title to tell its language
LANGUAGE_SHARE = 0.02  # of a KB's entities, for their language to count among the KB's languages
ENCODE_BLOCK = 1 << 16  # entities encoded per block when building
SCRATCH = "entities"  # `.NAME.entities-PID`: where a build lists the entities before encoding them
ROW_FACTS_CACHED = 1 << 16  # entities whose alias keys and prior a serving linker keeps parsed
_EMPTY_PAREN = re.compile(r"\s*\((?:[^()A-Za-z0-9]*|\s*(?:or|;|,)[^()]*)\)")


class NoEntities(OdqaError):
    """A corpus without one titled document: nothing to make entities of (passages without titles, say)."""


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Documents of a corpus file or folder (the project's reader: JSONL(.xz), WikiExtractor, ...)."""
    from odqa.corpus.readers import iter_documents as read

    return read(path)


def is_disambiguation(doc: Document) -> bool:
    head = doc.text.split("\n", 1)[0].rstrip()
    return "(disambiguation)" in doc.title or head.endswith(("may refer to:", "may also refer to:", "may refer to"))


def describe(text: str, words: int = DESCRIPTION_WORDS) -> str:
    """First paragraph, first `words` words (Chinese writes none: at most DESCRIPTION_CHARS characters, ended at a
    sentence where one ends), without the empty pronunciation brackets WikiExtractor leaves."""
    paragraph = text.split("\n", 1)[0]
    paragraph = _EMPTY_PAREN.sub("", paragraph)
    described = " ".join(paragraph.split()[:words])
    if len(described) <= DESCRIPTION_CHARS or detect_language([described]) == "en":
        return described
    cut = described[:DESCRIPTION_CHARS]
    sentence_end = max(cut.rfind(mark) for mark in "。！？.!?")
    return cut[: sentence_end + 1] if sentence_end >= DESCRIPTION_CHARS // 2 else cut


@dataclass
class KBEntry:
    id: str
    title: str
    description: str
    aliases: tuple[str, ...]
    doc_id: str
    length: int = 0  # article length in characters: the popularity prior

    def to_entity(self) -> Entity:
        return Entity(
            id=self.id, title=self.title, description=self.description, aliases=self.aliases, doc_id=self.doc_id
        )

    @property
    def prior(self) -> float:
        return math.log1p(self.length)


def entries_of(documents: Iterable[Document]) -> Iterator[KBEntry]:
    """One entity per article: consecutive documents of one title are one article's paragraphs (SQuAD-style
    corpora such as KorQuAD, CMRC 2018 and DRCD give each paragraph as a document with its article's title), so
    they make one entity, described by the first and as long as all of them. Disambiguation pages and untitled
    documents are skipped."""
    pending: KBEntry | None = None
    for doc in documents:
        if not doc.title or is_disambiguation(doc):
            continue
        if pending is not None and doc.title == pending.title:
            pending.length += len(doc.text)
            continue
        if pending is not None:
            yield pending
        pending = entry_from_document(doc)
    if pending is not None:
        yield pending


def entry_from_document(doc: Document) -> KBEntry:
    return KBEntry(
        id=doc.id,
        title=doc.title,
        description=describe(doc.text),
        aliases=make_aliases(doc.title, doc.text),
        doc_id=doc.id,
        length=len(doc.text),
    )


class KBFingerprint:
    """A running hash over the entities' ids, titles and descriptions, fed one entry at a time."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, e: KBEntry) -> None:
        self._hash.update(f"{e.id}\t{e.title}\t{e.description}\n".encode())

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:16]


def entry_line(e: KBEntry) -> str:
    row = dict(vars(e))
    row["aliases"] = list(e.aliases)
    return json.dumps(row, ensure_ascii=False) + "\n"


def parse_entry(line: bytes | str) -> KBEntry:
    row = json.loads(line)
    row["aliases"] = tuple(row.get("aliases", ()))
    return KBEntry(**row)


class StoredEntries(Sequence[KBEntry]):
    """entities.jsonl read a row at a time from its memory map: loading a KB of millions of entities finds
    where each line starts instead of parsing them all, and a question parses the few rows it touches. Every
    row's bytes pass the file's block check (`check.ranges`) before they are parsed; iterating checks the whole
    file first."""

    SCAN_BYTES = 1 << 26

    def __init__(self, path: Path, record: dict | None = None, where: str = "", fix: str = ""):
        """`record`: the file's size and digests as the KB manifest holds them (None: unchecked)."""
        self.path = path
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._check = (
            None
            if record is None
            else FileCheck(
                record, lambda offset, length: self._map[offset : offset + length], where, fix, folder=path.parent
            )
        )
        self._starts = self._line_starts(size)

    def _line_starts(self, size: int) -> np.ndarray:
        ends = [np.zeros(1, dtype=np.int64)]
        for offset in range(0, size, self.SCAN_BYTES):
            block = np.frombuffer(self._map, dtype=np.uint8, count=min(self.SCAN_BYTES, size - offset), offset=offset)
            ends.append(np.flatnonzero(block == 0x0A).astype(np.int64) + offset + 1)
        starts = np.concatenate(ends)
        if starts[-1] != size:  # a last line without its newline
            starts = np.append(starts, size)
        return starts

    def __len__(self) -> int:
        return len(self._starts) - 1

    def _line(self, row: int) -> bytes:
        start, end = int(self._starts[row]), int(self._starts[row + 1])
        if self._check is not None:
            self._check.range(start, end)
        return self._map[start:end]

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[r] for r in range(*row.indices(len(self)))]
        row = int(row)
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(f"entity row {row} out of range (the knowledge base has {len(self)})")
        return parse_entry(self._line(row))

    def __iter__(self) -> Iterator[KBEntry]:
        if self._check is not None:
            self._check.whole()
        for row in range(len(self)):
            yield parse_entry(self._line(row))  # checked whole above: the per-row check is a no-op


@dataclass
class KnowledgeBase:
    entries: Sequence[KBEntry]
    index: VectorIndex | None = None  # entity vectors, row i = entries[i]
    manifest: Manifest = field(default_factory=lambda: Manifest(kind="kb"))
    path: Path | None = None

    def __post_init__(self):
        self._by_title: dict[str, int] | None = None
        self._by_id: dict[str, int] | None = None
        self._matcher: AliasMatcher | None = None
        self._vectors = None
        self._row_facts: dict[int, tuple[frozenset, np.float32]] = {}
        self._candidate_index = None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def encoder(self) -> str:
        return self.manifest.encoder

    @property
    def dim(self) -> int:
        return self.manifest.dim

    def entity(self, row: int) -> Entity:
        return self.entries[row].to_entity()

    def row_of_title(self, title: str) -> int | None:
        if self._by_title is None:
            self._by_title = {}
            for i, e in enumerate(self.entries):
                self._by_title.setdefault(e.title, i)
                self._by_title.setdefault(e.title.lower(), i)
        return self._by_title.get(title, self._by_title.get(title.lower()))

    def row_of_id(self, entity_id: str) -> int | None:
        if self._by_id is None:
            self._by_id = {e.id: i for i, e in enumerate(self.entries)}
        return self._by_id.get(str(entity_id))

    @property
    def language(self) -> str:
        """The language of the entities' text (`en`, `ko`, `zh`), as the KB recorded it when built (`en` for a KB
        built before languages were recorded: only English ones were)."""
        return str(self.manifest.params.get("language") or "en")

    @property
    def languages(self) -> list[str]:
        """Every language that names at least LANGUAGE_SHARE of the entities (a KB built from several corpora)."""
        return list(self.manifest.params.get("languages") or [self.language])

    @property
    def language_names(self) -> list[str]:
        return [LANGUAGE_NAMES.get(code, code) for code in self.languages]

    def notices(self, languages: Sequence[str]) -> list[str]:
        """What to tell before a linker trained on questions in `languages` links against this KB: names it will
        seldom link (another language, alias keys made otherwise), each with its fix."""
        return [notice for notice in (self.check_languages(languages), self.check_alias_scheme()) if notice]

    @property
    def source(self) -> dict | None:
        """What the KB was built from, where its build recorded it (`run_qa.py index`, `build-kb`): the corpus files'
        sizes and digests and the columns read."""
        source = self.manifest.params.get("source")
        return source if isinstance(source, dict) else None

    def check_alias_scheme(self) -> str | None:
        """None when this KB's alias keys are made as they are here; else why Korean and Chinese names may not be
        found in it (a KB written before characters were matched one by one, or with Han folding where OpenCC
        is missing now)."""
        recorded = self.manifest.params.get("alias_scheme")
        if self.path is None or recorded == alias_scheme():
            return None
        if recorded is None:
            return (
                f"knowledge base {self.path} was built before Korean and Chinese names were matched character by "
                f"character, so its aliases find them only as whole words; {rebuild_fix(self.path)}"
            )
        if recorded.endswith("+t2s"):
            return (
                f"knowledge base {self.path} folds Traditional Chinese aliases to Simplified, which needs OpenCC: "
                "pip install 'odqa[cjk]'"
            )
        return (
            f"knowledge base {self.path} was built without OpenCC, so its Traditional Chinese aliases are not folded "
            f"to Simplified; {rebuild_fix(self.path)}"
        )

    @property
    def matcher(self) -> AliasMatcher:
        """The KB's stored alias table, checked whole when first used; built in memory for a KB saved without one."""
        if self._matcher is None:
            stored = self.path / ALIASES if self.path is not None else None
            if stored is not None and stored.is_file():
                where, fix = f"knowledge base {self.path}", rebuild_fix(stored.parent)
                record = self.manifest.params.get("files", {}).get(ALIASES)
                if record is None:
                    raise IndexMismatchError(f"{where}: {ALIASES} was not recorded when it was built; {fix}")
                with stored.open("rb") as f:
                    FileCheck(record, file_reader(f), f"{where}: {ALIASES}", fix, folder=self.path).whole()
                self._matcher = StoredAliases(stored)
            else:
                self._matcher = in_memory_matcher(self.entries)
        return self._matcher

    def row_facts(self, row: int) -> tuple[frozenset, np.float32]:
        """(alias keys, prior) of one entity, computed for the rows questions ask about (the most recent
        ROW_FACTS_CACHED kept): a question must not pay for the whole KB."""
        facts = self._row_facts.get(row)
        if facts is None:
            entry = self.entries[row]
            facts = (frozenset(alias_key(a) for a in entry.aliases), np.float32(entry.prior))
            if len(self._row_facts) >= ROW_FACTS_CACHED:
                self._row_facts.pop(next(iter(self._row_facts)))
            self._row_facts[row] = facts
        return facts

    def features(self, span_texts: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """Per-candidate features [N, C, 2]: the span's text is an alias of the entity; log popularity / 10."""
        rows = np.asarray(rows)
        out = np.zeros(rows.shape + (2,), dtype=np.float32)
        for n, text in enumerate(span_texts):
            key = alias_key(text)
            for c, row in enumerate(rows[n]):
                if row < 0:
                    continue
                keys, prior = self.row_facts(int(row))
                out[n, c, 0] = float(key in keys)
                out[n, c, 1] = prior / 10.0
        return out

    @property
    def vectors(self) -> np.ndarray:
        """All entity vectors in memory (float32), for training and brute-force scoring."""
        if self.index is None:
            raise OdqaError("this knowledge base has no entity vectors; build it with `odqa build-kb`")
        if self._vectors is None:
            self._vectors = np.array(self.index.verified_embeddings(), dtype=np.float32)
        return self._vectors

    def vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of `rows` (any shape) -> rows.shape + (dim,), read from the vector file's memory
        map unless all vectors are in memory already: linking reads tens of rows, not the whole KB."""
        rows = np.asarray(rows, dtype=np.int64)
        if self._vectors is not None:
            return self._vectors[rows]
        if self.index is None:
            raise OdqaError("this knowledge base has no entity vectors; build it with `odqa build-kb`")
        flat = rows.reshape(-1)
        order = np.argsort(flat, kind="stable")  # ascending offsets: one pass over the file's pages
        picked = np.empty((len(flat), self.index.dim), dtype=np.float32)
        picked[order] = self.index.verified_rows(flat)[flat[order]]
        return picked.reshape(rows.shape + (self.index.dim,))

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k entities of highest inner product with each vector: the linker's dense candidates, whose scores
        it computes again from the float32 vectors."""
        if self.index is None:
            raise OdqaError("this knowledge base has no entity vectors; build it with `odqa build-kb`")
        if self.index.faiss_index is not None:  # hnsw / ivf built by the vector index
            return self.index.search(np.asarray(vectors, dtype=np.float32), k)
        if self._candidate_index is None:
            # float16 copies of the vectors: linking a question over the Wikipedia subset's 29 k entities took
            # 6.9 ms instead of 9.3 with an exact float32 scan, the same links but for near ties at the 16th
            # candidate (bench/dense_search.py --kb; bench/results/speed-avx2.md)
            self._candidate_index = float16_copy_index(self.index.verified_embeddings())
        queries = np.ascontiguousarray(vectors, dtype=np.float32)
        scores, rows = self._candidate_index.search(queries, min(k, len(self)))
        return scores, rows.astype(np.int64)

    def encoded_by(self, encoder: str) -> bool:
        """Whether this KB's vectors come from `encoder` (names compared as every check of them compares)."""
        return bool(self.encoder) and same_encoder(encoder, self.encoder)

    def check_encoder(self, encoder: str, dim: int) -> None:
        """Refuse a KB whose vectors come from another entity encoder than the model's, in one line naming both
        encoders and the command that builds the KB again with the linker's."""
        where = f"knowledge base {self.path or ''}".strip()
        check_vectors_encoder(where, (self.encoder, self.dim), (encoder, dim), rebuild_fix(self.path or "KB", encoder))

    def check_languages(self, languages: Sequence[str]) -> str | None:
        """None when the linker was trained on every language this KB's entities are written in (`languages`: the
        linker's); else why its names in the others may not be linked, and the fix."""
        unread = [code for code in self.languages if code not in languages]
        if not unread or not languages:
            return None
        names = ", ".join(LANGUAGE_NAMES.get(code, code) for code in unread)
        trained = ", ".join(LANGUAGE_NAMES.get(code, code) for code in languages)
        return (
            f"the linker was trained on {trained} questions only and knowledge base {self.path or ''} holds {names} "
            f"entities, so {names} names are seldom linked; set linker.model to a linker trained on {names}"
        )

    # ---- persistence -------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> KnowledgeBase:
        path = Path(path)
        with contextlib.suppress(OSError):  # a read-only parent folder: nothing a reader may repair
            recover_swap(path)  # a KB whose swap a killed build left half done is put back whole first
        where, fix = f"knowledge base {path}", rebuild_fix(path)
        has_entities, has_manifest = (path / ENTITIES).is_file(), (path / MANIFEST).is_file()
        if not path.exists():
            raise OdqaError(
                f"no knowledge base at {path}; build one with `run_qa.py build-kb --corpus CORPUS --out {path}`"
            )
        if not has_entities and not has_manifest:
            raise OdqaError(
                f"{path} is not a knowledge base (no {ENTITIES} nor {MANIFEST}); build one with "
                f"`run_qa.py build-kb --corpus CORPUS --out {path}`"
            )
        if not has_entities or not has_manifest:
            missing = ENTITIES if not has_entities else MANIFEST
            raise IndexMismatchError(f"{where} lacks {missing}: it is damaged or was left half built; {fix}")
        manifest = Manifest.load(path, fix=fix)
        if manifest.kind != "kb":
            raise IndexMismatchError(
                f"{path} holds a {manifest.kind!r} index, not a knowledge base; name the knowledge-base folder "
                f"(an index's is beside it, `{path.name}-kb`), or build one with "
                f"`run_qa.py build-kb --corpus CORPUS --out {path}-kb`"
            )
        files = manifest.params.get("files")
        if not isinstance(files, dict) or ENTITIES not in files:
            raise IndexMismatchError(
                f"{where} was built before its files were recorded, so damage in it cannot be seen; {fix}"
            )
        check_part(path, {"count": manifest.count, "files": files}, rows=None, name=where, fix=fix)
        # the block digests of the recorded file (kept in the manifest, itself checked) stand for the fingerprint,
        # which would mean parsing every entity at load
        entries = StoredEntries(path / ENTITIES, files[ENTITIES], f"{where}: {ENTITIES}", fix)
        if len(entries) != manifest.count:
            raise IndexMismatchError(
                f"{where}: {ENTITIES} holds {len(entries):,} entities, the KB was built with {manifest.count:,}; {fix}"
            )

        def check(name: str, read):
            record = files.get(f"{VECTORS}/{name}")
            return record and FileCheck(record, read, f"{where}: {VECTORS}/{name}", fix, folder=path / VECTORS)

        index = VectorIndex.load(path / VECTORS, use_gpu=False, check=check) if (path / VECTORS).is_dir() else None
        if index is not None and len(index) != len(entries):
            raise IndexMismatchError(f"{where}: {len(entries)} entities but {len(index)} vectors; {fix}")
        return cls(entries, index, manifest, path)

    @classmethod
    def build(
        cls,
        documents: Iterable[Document],
        out: str | Path,
        encoder: str,
        max_length: int = 64,
        batch_size: int = 128,
        progress: bool = True,
        device: str | None = None,
        cluster: Cluster | None = None,
        params: dict | None = None,
    ) -> KnowledgeBase:
        """Entities of `documents` (disambiguation pages and untitled documents skipped), encoded by `encoder` (the
        linker's entity encoder) as `title [SEP] description`, written as a KB at `out`. Streamed: the entries go to
        a scratch file beside `out` first and are encoded ENCODE_BLOCK at a time, so memory does not grow with the
        corpus. `cluster` (`build-kb --ray`): the blocks are encoded as Ray tasks on its workers (a GPU each where it
        has them), written here in order. `params`: recorded in the KB's manifest too (what it was built from). No
        titled document: NoEntities, before any model loads."""

        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        recover_swap(out)  # a swap a killed build left half done: finished or undone, as an index's
        remove_dead_leftovers(out, SCRATCH)  # the entities a killed build listed
        with _scratch_folder(out) as scratch:
            listed = Path(scratch) / ENTITIES
            with listed.open("w", encoding="utf-8") as f:
                for entry in entries_of(documents):
                    f.write(entry_line(entry))
            entries = StoredEntries(listed)
            if not len(entries):
                raise NoEntities("no entities found in the corpus; pass Wikipedia-style documents with titles")
            block = ENCODE_BLOCK if cluster is None else _cluster_block(len(entries), cluster.slots, batch_size)

            def texts() -> Iterator[list[str]]:
                for start in range(0, len(entries), block):
                    yield [entity_text(e.title, e.description) for e in entries[start : start + block]]

            blocks: Iterator[np.ndarray]
            if cluster is None:
                from odqa.core.encoder import TextEncoder  # torch + transformers: only when building

                model = TextEncoder.from_pretrained(encoder, max_length=max_length, device=device)
                bar = _progress(len(entries), "encoding entities", progress)
                blocks = (encode_block(model, part, batch_size, bar.update) for part in texts())
            else:
                args = (encoder, max_length, batch_size, device)
                tasks = math.ceil(len(entries) / block)
                blocks = cluster.map_ordered(
                    encode_entities, texts(), "encoding entities", args=args, gpu=True, total=tasks
                )
            first = next(blocks)
            dim = first.shape[1]
            vectors_path = Path(scratch) / "entity_vectors.npy"
            write_npy_blocks(vectors_path, np.float32, (len(entries), dim), itertools.chain([first], blocks))
            if cluster is None:
                bar.close()
            vectors = np.load(vectors_path, mmap_mode="r")
            return cls.write(
                entries,
                vectors,
                out,
                encoder,
                dim,
                {**(params or {}), "max_length": max_length, **entity_languages(entries)},
            )

    @classmethod
    def write(
        cls,
        entries: Iterable[KBEntry],
        vectors: np.ndarray,
        out: str | Path,
        encoder: str,
        dim: int,
        params: dict | None = None,
        vector_index: VectorIndexParams | None = None,
        block_rows: int = 65536,
    ) -> KnowledgeBase:
        """Save `entries` with their vectors (row i = the i-th entry, kept as float32; a memory map is copied block
        by block) as a knowledge base at `out`, replacing it only when the whole folder is written. Entries are
        streamed (an iterator of millions is never held in memory). `vector_index`: the entity index's kind
        (default `auto`, as for passages)."""
        if vectors.ndim != 2 or vectors.shape[1] != dim:
            raise OdqaError(f"entity vectors must be N x {dim}, got {vectors.shape}")
        fingerprint, count = KBFingerprint(), 0
        out = Path(out)
        with atomic_folder(out) as tmp:
            with (tmp / ENTITIES).open("w", encoding="utf-8") as f:

                def written() -> Iterator[tuple[Sequence[str], float]]:
                    nonlocal count
                    for e in entries:
                        f.write(entry_line(e))
                        fingerprint.update(e)
                        count += 1
                        yield e.aliases, e.prior

                try:
                    StoredAliases.write_entities(tmp / ALIASES, written())
                except sqlite3.Error as exc:  # SQLite's own words for a write that failed, no OSError
                    raise _alias_table_error(exc, out) from exc
            if count != len(vectors):
                raise OdqaError(f"{count} entities need {count} x {dim} vectors, got {vectors.shape}")
            staging = tmp / "entity_vectors.npy"
            write_npy_blocks(
                staging,
                np.float32,
                vectors.shape,
                (vectors[i : i + block_rows] for i in range(0, len(vectors), block_rows)),
            )
            vec_manifest = Manifest(kind="faiss", corpus_fingerprint=fingerprint.hexdigest(), encoder=encoder, dim=dim)
            VectorIndex.build(staging, tmp / VECTORS, vec_manifest, entity_index_params(count, vector_index))
            Manifest(
                kind="kb",
                corpus_fingerprint=fingerprint.hexdigest(),
                count=count,
                encoder=encoder,
                dim=dim,
                params={
                    **(params or {}),
                    "description_words": DESCRIPTION_WORDS,
                    "alias_scheme": alias_scheme(),
                    "text": "title [SEP] description",
                    "files": {
                        str(p.relative_to(tmp)): describe_file(p)
                        for p in part_files(tmp)
                        if p.name != MANIFEST or p.parent != tmp
                    },
                },
            ).save(tmp)
        return cls.load(out)


_ENCODERS: dict[tuple, TextEncoder] = {}  # a process's entity encoder, loaded once (a Ray worker encodes many blocks)


def _entity_encoder(encoder: str, max_length: int, device: str | None) -> TextEncoder:
    from odqa.core.encoder import TextEncoder  # torch + transformers: only when building

    key = (encoder, max_length, device)
    if key not in _ENCODERS:
        _ENCODERS.clear()
        _ENCODERS[key] = TextEncoder.from_pretrained(encoder, max_length=max_length, device=device)
    return _ENCODERS[key]


def encode_entities(texts: list[str], encoder: str, max_length: int, batch_size: int, device: str | None) -> np.ndarray:
    """A task of `build-kb --ray`: one block of entity texts encoded on a worker, as `KnowledgeBase.build` does
    here (float32 rows)."""
    return encode_block(_entity_encoder(encoder, max_length, device), texts, batch_size)


def encode_block(model: TextEncoder, texts: list[str], batch_size: int, on_batch=None) -> np.ndarray:
    """Entity texts encoded as float32 rows; a model with a passage prompt (e5's "passage: ") reads entities as the
    passages they are."""
    prompted = [model.passage_prefix + text for text in texts]
    return np.asarray(model.encode(prompted, batch_size=batch_size, on_batch=on_batch), dtype=np.float32)


def _cluster_block(entities: int, slots: int, batch_size: int) -> int:
    """Entities per Ray task: a few blocks per worker, whole batches, at most ENCODE_BLOCK."""
    per_task = math.ceil(entities / (4 * slots))
    return min(ENCODE_BLOCK, max(batch_size, math.ceil(per_task / batch_size) * batch_size))


def _alias_table_error(exc: Exception, out: Path) -> OdqaError:
    """One line for an alias table SQLite could not write: a full disk is named as one (DiskFullError); SQLite
    says "disk I/O error" for a write refused by a quota or a file-size limit too, so that is named with them."""
    reason = str(exc) or exc.__class__.__name__
    if "full" in reason:
        return DiskFullError(
            f"no room left on the device to write {out} (SQLite: {reason}); nothing was replaced: free some space "
            "or write elsewhere, then rerun"
        )
    return OdqaError(
        f"the alias table of {out} could not be written (SQLite: {reason}: a full disk, a quota or a file-size "
        "limit, or a failing disk); nothing was replaced: free some space or write elsewhere, then rerun"
    )


def entity_languages(entries: Iterable[KBEntry]) -> dict:
    """The KB's language (the most entities' script) and every language that names at least LANGUAGE_SHARE."""
    counts: Counter[str] = Counter(detect_language([e.title, e.description[:LANGUAGE_SAMPLE_CHARS]]) for e in entries)
    total = max(1, sum(counts.values()))
    languages = [code for code, n in counts.most_common() if n / total >= LANGUAGE_SHARE]
    return {"language": languages[0] if languages else "en", "languages": languages or ["en"]}


def rebuild_fix(path: str | Path, encoder: str = "") -> str:
    """How to build the KB at `path` again (`encoder`: with this entity encoder rather than the default linker's)."""
    with_encoder = f" --encoder {encoder}" if encoder else ""
    return f"rebuild it with `run_qa.py build-kb --corpus CORPUS --out {path}{with_encoder}`"


def entity_index_params(entities: int, asked: VectorIndexParams | None = None) -> VectorIndexParams:
    """The entity index `auto` builds: exact (float16 copies) up to KB_FLAT_MAX_ENTITIES, ivfpq above."""
    params = asked or VectorIndexParams()
    if params.kind == AUTO:
        params.kind = "flat" if entities <= KB_FLAT_MAX_ENTITIES or not faiss_installed() else "ivfpq"
    # the depth and quantizer the knowledge base's figures up to 6 M entities were measured with
    # (bench/results/scale.md); a linker's question searches a couple of dozen spans at once, so a deeper or
    # wider search per span costs it more than a passage search
    params.nprobe = params.nprobe or 64
    params.rerank = 100 if params.rerank < 0 else params.rerank
    params.quantizer = "flat" if params.quantizer == "auto" else params.quantizer
    return params


def in_memory_matcher(entries: Sequence[KBEntry]) -> AliasMatcher:
    return AliasMatcher.from_entities([e.aliases for e in entries], [e.prior for e in entries])


@contextlib.contextmanager
def _scratch_folder(out: Path) -> Iterator[Path]:
    """`.NAME.entities-PID` beside the KB `out`, removed when the build ends (by the next build where it was
    killed)."""
    scratch = out.with_name(f".{out.name}.{SCRATCH}-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _progress(total: int, label: str, shown: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="entity", disable=not shown)
