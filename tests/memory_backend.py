"""A toy store of passages held in memory, a `SearchBackend` (odqa.core.protocols) of its own: plain BM25 over
lower-cased words, exact inner products over float32 vectors. With `registered()` it is one more line in
`retriever.registry.INDEX_BACKENDS` (its own location scheme, `mem://NAME`), which is all a new store needs for
the conformance suite, the retrievers and the pipeline to take it (tests/test_backend_conformance.py)."""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from odqa.core.errors import OdqaError
from odqa.core.protocols import TEXT, VECTORS
from odqa.core.types import BackendInfo, EncoderRecord, Passage, SearchHit
from odqa.retriever.registry import INDEX_BACKENDS, Backend

WORD = re.compile(r"\w+", re.UNICODE)
SCHEME = "mem"
OPEN: dict[str, MemoryIndex] = {}  # the stores `mem://NAME` names


def _terms(text: str) -> list[str]:
    return WORD.findall(text.lower())


class MemoryArticles:
    """An article's passages in row order (odqa.core.protocols.ArticlePassages)."""

    def __init__(self, passages: Sequence[Passage]):
        self.rows: dict[str, list[int]] = {}
        for row, passage in enumerate(passages):
            self.rows.setdefault(passage.doc_id, []).append(row)
        self.passages = passages

    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        return [(row, self.passages[row]) for row in self.rows.get(str(doc_id), [])[:limit]]


class MemoryIndex:
    def __init__(
        self,
        name: str,
        passages: Sequence[Passage],
        vectors: np.ndarray | None = None,
        encoder: EncoderRecord | None = None,
        language: str = "en",
    ):
        self.name, self.held, self.language = name, list(passages), language
        self.vectors = None if vectors is None else np.asarray(vectors, dtype=np.float32)
        self.encoder = encoder
        self.docs = [Counter(_terms(f"{p.title} {p.text}")) for p in self.held]
        self.lengths = np.array([sum(doc.values()) for doc in self.docs], dtype=np.float64)
        self.frequency = Counter(term for doc in self.docs for term in doc)

    @classmethod
    def copy_of(cls, name: str, folder) -> MemoryIndex:
        """An index folder's passages, vectors and encoder record (indexes.folder.FolderIndex), held in memory."""
        info = folder.info()
        vectors = folder.vector_index().verified_embeddings() if info.vectors else None
        return cls(name, folder.passages(range(len(folder))), vectors, info.encoder, info.language)

    def __len__(self) -> int:
        return len(self.held)

    def info(self) -> BackendInfo:
        return BackendInfo(
            location=f"memory index {self.name!r}",
            language=self.language,
            vectors=self.vectors is not None,
            encoder=self.encoder,
            max_df_refusal="a memory index ranks with every term: set retrieval.bm25_max_df to 0",
            summary={"language": self.language},
        )

    def text_search(self, questions: Sequence[str], k: int, max_df: float) -> list[list[SearchHit]]:
        if max_df:
            raise OdqaError(self.info().max_df_refusal)
        n, average = len(self.docs), float(self.lengths.mean())
        out = []
        for question in questions:
            scores = np.zeros(n)
            for term in set(_terms(question)):
                df = self.frequency.get(term, 0)
                if not df:
                    continue
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = np.array([doc.get(term, 0) for doc in self.docs], dtype=np.float64)
                scores += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.lengths / average))
            out.append(self._top(scores, k, "bm25", matched=scores > 0))
        return out

    def vector_search(self, vectors: np.ndarray, k: int) -> list[list[SearchHit]]:
        scores = np.asarray(vectors, dtype=np.float32) @ self.vectors.T
        return [self._top(row, k, "dense") for row in scores]

    def _top(self, scores: np.ndarray, k: int, source: str, matched: np.ndarray | None = None) -> list[SearchHit]:
        rows = np.lexsort((np.arange(len(scores)), -scores))  # best first, the lower row first among ties
        if matched is not None:
            rows = rows[matched[rows]]
        return [SearchHit(row=int(r), score=float(scores[r]), source=source) for r in rows[:k]]

    def passages(self, rows: Sequence[int]) -> list[Passage]:
        return [self.held[row] for row in rows]

    def article_passages(self) -> MemoryArticles:
        return MemoryArticles(self.held)

    def capabilities(self) -> frozenset[str]:
        return frozenset({TEXT} if self.vectors is None else {TEXT, VECTORS})

    def check_available(self, capability: str) -> None:
        if capability == VECTORS and self.vectors is None:
            raise OdqaError(f"{self.info().location} holds no vectors; use --retriever bm25")


def open_memory(location: str, config) -> MemoryIndex:
    name = location.partition("://")[2]
    if name not in OPEN:
        raise OdqaError(f"no memory index {name!r}; there are: {', '.join(OPEN) or 'none'}")
    return OPEN[name]


@contextlib.contextmanager
def registered(*indexes: MemoryIndex) -> Iterator[None]:
    """The memory store registered as a backend (its one registry line) while the block runs, `indexes` open."""
    INDEX_BACKENDS.register(
        "memory", Backend(open_memory, schemes=(SCHEME,), title="memory index", example=f"{SCHEME}://NAME")
    )
    OPEN.update({index.name: index for index in indexes})
    try:
        yield
    finally:
        INDEX_BACKENDS.unregister("memory")
        OPEN.clear()
