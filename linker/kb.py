"""Entity knowledge base: one entity per Wikipedia article, with aliases, a popularity prior and
precomputed entity vectors in an inner-product index.

On disk (a folder, written atomically):
  manifest.json    kind "kb": entity encoder, dim, count, KB fingerprint, description length
  entities.jsonl   one entity a line: id, title, description, aliases, doc_id, length
  vectors/         indexes.vector.VectorIndex (embeddings.npy + its own manifest)

The KB manifest records every other file's size and digests (`files`, indexes.integrity.describe_file), and
its own digest: loading checks sizes and the whole of entities.jsonl, the vectors before they are first read,
and the entities against the KB fingerprint, so swapped vector rows, an edited title or a truncated file are
refused in one line naming the file and the fix (build the KB again). A KB built before these records is
refused likewise.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from odqa.indexes.integrity import FileCheck, check_part, describe_file, file_reader, part_files
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import AUTO, VectorIndex, VectorIndexParams, faiss_installed, float16_copy_index
from odqa.linker.aliases import AliasMatcher, StoredAliases, alias_key, make_aliases
from odqa.linker.encoder import entity_text
from odqa.core.atomic import atomic_folder, write_npy_blocks
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.types import Document, Entity

log = logging.getLogger(__name__)

ENTITIES = "entities.jsonl"
# the linker searches every candidate span of a question at once (about 24), so exact search over entities costs
# that many passage searches: above this size a KB gets ivfpq (bench/results/scale.md, the knowledge-base rows)
KB_FLAT_MAX_ENTITIES = 250_000
ALIASES = "aliases.sqlite"  # the alias matcher's ranked table (linker.aliases.StoredAliases)
VECTORS = "vectors"
DESCRIPTION_WORDS = 128
_EMPTY_PAREN = re.compile(r"\s*\((?:[^()A-Za-z0-9]*|\s*(?:or|;|,)[^()]*)\)")


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Documents of a corpus file or folder (the project's reader: JSONL(.xz), WikiExtractor, ...)."""
    from odqa.corpus.readers import iter_documents as read

    return read(path)


def is_disambiguation(doc: Document) -> bool:
    head = doc.text.split("\n", 1)[0].rstrip()
    return "(disambiguation)" in doc.title or head.endswith(("may refer to:", "may also refer to:", "may refer to"))


def describe(text: str, words: int = DESCRIPTION_WORDS) -> str:
    """First paragraph, first `words` words, without the empty pronunciation brackets WikiExtractor leaves."""
    paragraph = text.split("\n", 1)[0]
    paragraph = _EMPTY_PAREN.sub("", paragraph)
    return " ".join(paragraph.split()[:words])


@dataclass
class KBEntry:
    id: str
    title: str
    description: str
    aliases: tuple[str, ...]
    doc_id: str
    length: int = 0  # article length in characters: the popularity prior

    def to_entity(self) -> Entity:
        return Entity(id=self.id, title=self.title, description=self.description, aliases=self.aliases)

    @property
    def prior(self) -> float:
        return math.log1p(self.length)


def entry_from_document(doc: Document) -> KBEntry:
    return KBEntry(
        id=doc.id,
        title=doc.title,
        description=describe(doc.text),
        aliases=make_aliases(doc.title, doc.text),
        doc_id=doc.id,
        length=len(doc.text),
    )


def kb_fingerprint(entries: Sequence[KBEntry]) -> str:
    h = hashlib.sha256()
    for e in entries:
        h.update(f"{e.id}\t{e.title}\t{e.description}\n".encode("utf-8"))
    return h.hexdigest()[:16]


@dataclass
class KnowledgeBase:
    entries: list[KBEntry]
    index: VectorIndex | None = None  # entity vectors, row i = entries[i]
    manifest: Manifest = field(default_factory=lambda: Manifest(kind="kb"))
    path: Path | None = None

    def __post_init__(self):
        self._by_title: dict[str, int] | None = None
        self._by_id: dict[str, int] | None = None
        self._matcher: AliasMatcher | None = None
        self._vectors = None
        self._alias_keys = None
        self._candidate_index = None
        self._priors = None

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
    def matcher(self) -> AliasMatcher:
        """The KB's stored alias table, checked whole when first used; built in memory for a KB saved without one."""
        if self._matcher is None:
            stored = self.path / ALIASES if self.path is not None else None
            if stored is not None and stored.is_file():
                where, fix = f"knowledge base {self.path}", rebuild_fix(self.path)
                record = self.manifest.params.get("files", {}).get(ALIASES)
                if record is None:
                    raise IndexMismatchError(f"{where}: {ALIASES} was not recorded when it was built; {fix}")
                with stored.open("rb") as f:
                    FileCheck(record, file_reader(f), f"{where}: {ALIASES}", fix).whole()
                self._matcher = StoredAliases(stored)
            else:
                self._matcher = in_memory_matcher(self.entries)
        return self._matcher

    def alias_keys(self, row: int) -> frozenset:
        """Computed for the rows a question asks about: a question must not pay for the whole KB."""
        if self._alias_keys is None:
            self._alias_keys = {}
        keys = self._alias_keys.get(row)
        if keys is None:
            keys = self._alias_keys[row] = frozenset(alias_key(a) for a in self.entries[row].aliases)
        return keys

    def priors(self) -> np.ndarray:
        if self._priors is None:
            self._priors = np.asarray([e.prior for e in self.entries], dtype=np.float32)
        return self._priors

    def features(self, span_texts: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """Per-candidate features [N, C, 2]: the span's text is an alias of the entity; log popularity / 10."""
        rows = np.asarray(rows)
        out = np.zeros(rows.shape + (2,), dtype=np.float32)
        priors = self.priors()
        for n, text in enumerate(span_texts):
            key = alias_key(text)
            for c, row in enumerate(rows[n]):
                if row < 0:
                    continue
                out[n, c, 0] = float(key in self.alias_keys(int(row)))
                out[n, c, 1] = priors[row] / 10.0
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
        picked[order] = self.index.verified_embeddings()[flat[order]]
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

    def check_encoder(self, encoder: str, dim: int) -> None:
        """Refuse a KB whose vectors come from another entity encoder than the model's."""
        where = f"knowledge base {self.path or ''}".strip()
        if dim and self.dim and dim != self.dim:
            raise IndexMismatchError(
                f"{where} holds {self.dim}-d entity vectors, the linker expects {dim}-d vectors from {encoder!r}; "
                f"rebuild it with `odqa build-kb --encoder {encoder}`"
            )
        if encoder and self.encoder and _norm(encoder) != _norm(self.encoder):
            raise IndexMismatchError(
                f"{where} was encoded with {self.encoder!r}, but the linker's entity encoder is {encoder!r}; "
                f"rebuild it with `odqa build-kb --encoder {encoder}`"
            )

    # ---- persistence -------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> "KnowledgeBase":
        path = Path(path)
        if not (path / ENTITIES).is_file():
            raise OdqaError(f"{path} is not a knowledge base (no {ENTITIES}); build one with `odqa build-kb --corpus PATH --out {path}`")
        manifest = Manifest.load(path, kind="kb")
        where, fix = f"knowledge base {path}", rebuild_fix(path)
        files = manifest.params.get("files")
        if not isinstance(files, dict) or ENTITIES not in files:
            raise IndexMismatchError(f"{where} was built before its files were recorded, so damage in it cannot be "
                                     f"seen; {fix}")
        check_part(path, {"count": manifest.count, "files": files}, rows=None, name=where, fix=fix)
        data = (path / ENTITIES).read_bytes()
        FileCheck(files[ENTITIES], lambda offset, length: memoryview(data)[offset : offset + length],
                  f"{where}: {ENTITIES}", fix).whole()
        entries = []
        for line in data.decode("utf-8").splitlines():
            row = json.loads(line)
            row["aliases"] = tuple(row.get("aliases", ()))
            entries.append(KBEntry(**row))
        del data
        if len(entries) != manifest.count or kb_fingerprint(entries) != manifest.corpus_fingerprint:
            raise IndexMismatchError(f"{where}: {ENTITIES} holds other entities than the KB was built with; {fix}")

        def check(name: str, read):
            record = files.get(f"{VECTORS}/{name}")
            return record and FileCheck(record, read, f"{where}: {VECTORS}/{name}", fix)

        index = VectorIndex.load(path / VECTORS, use_gpu=False, check=check) if (path / VECTORS).is_dir() else None
        if index is not None and len(index) != len(entries):
            raise IndexMismatchError(f"{where}: {len(entries)} entities but {len(index)} vectors; {fix}")
        return cls(entries, index, manifest, path)

    @classmethod
    def build(
        cls,
        documents: Iterable[Document],
        out: str | Path,
        encoder: str = "minilm",
        max_length: int = 64,
        batch_size: int = 128,
        progress: bool = True,
        device: str | None = None,
    ) -> "KnowledgeBase":
        from odqa.core.encoder import TextEncoder  # torch + transformers: only when building

        entries = [entry_from_document(d) for d in documents if not is_disambiguation(d) and d.title]
        if not entries:
            raise OdqaError("no entities found in the corpus; pass Wikipedia-style documents with titles")
        model = TextEncoder.from_pretrained(encoder, max_length=max_length, device=device)
        vectors = model.encode([entity_text(e.title, e.description) for e in entries], batch_size=batch_size,
                               progress="encoding entities" if progress else "")
        return cls.write(entries, vectors, out, encoder, model.dim, {"max_length": max_length})

    @classmethod
    def write(cls, entries: Sequence[KBEntry], vectors: np.ndarray, out: str | Path, encoder: str, dim: int,
              params: dict | None = None, vector_index: VectorIndexParams | None = None,
              block_rows: int = 65536) -> "KnowledgeBase":
        """Save `entries` with their vectors (row i = entries[i], kept as float32; a memory map is copied block by
        block) as a knowledge base at `out`, replacing it only when the whole folder is written. `vector_index`:
        the entity index's kind (default `auto`, as for passages)."""
        if len(vectors) != len(entries) or vectors.ndim != 2 or vectors.shape[1] != dim:
            raise OdqaError(f"{len(entries)} entities need {len(entries)} x {dim} vectors, got {vectors.shape}")
        fingerprint = kb_fingerprint(entries)
        out = Path(out)
        with atomic_folder(out) as tmp:
            with (tmp / ENTITIES).open("w", encoding="utf-8") as f:
                for e in entries:
                    row = dict(vars(e))
                    row["aliases"] = list(e.aliases)
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
            StoredAliases.write(tmp / ALIASES, in_memory_matcher(entries))
            staging = tmp / "entity_vectors.npy"
            write_npy_blocks(staging, np.float32, vectors.shape,
                             (vectors[i : i + block_rows] for i in range(0, len(vectors), block_rows)))
            vec_manifest = Manifest(kind="faiss", corpus_fingerprint=fingerprint, encoder=encoder, dim=dim)
            VectorIndex.build(staging, tmp / VECTORS, vec_manifest, entity_index_params(len(entries), vector_index))
            Manifest(
                kind="kb",
                corpus_fingerprint=fingerprint,
                count=len(entries),
                encoder=encoder,
                dim=dim,
                params={**(params or {}), "description_words": DESCRIPTION_WORDS, "text": "title [SEP] description",
                        "files": {str(p.relative_to(tmp)): describe_file(p) for p in part_files(tmp) if p.name != MANIFEST
                                  or p.parent != tmp}},
            ).save(tmp)
        return cls.load(out)


def rebuild_fix(path: str | Path) -> str:
    return f"rebuild it with `run_qa.py build-kb --corpus CORPUS --out {path}`"


def entity_index_params(entities: int, asked: VectorIndexParams | None = None) -> VectorIndexParams:
    """The entity index `auto` builds: exact (float16 copies) up to KB_FLAT_MAX_ENTITIES, ivfpq above."""
    params = asked or VectorIndexParams()
    if params.kind == AUTO:
        params.kind = "flat" if entities <= KB_FLAT_MAX_ENTITIES or not faiss_installed() else "ivfpq"
    return params


def in_memory_matcher(entries: Sequence[KBEntry]) -> AliasMatcher:
    return AliasMatcher.from_entities([e.aliases for e in entries], [e.prior for e in entries])


def _norm(name: str) -> str:
    return name.rstrip("/").lower()
