"""The narrow, batch-first interfaces the layers meet at. Implementations match them structurally (no
subclassing): a new backend only has to have these methods.

| protocol | implementations |
|---|---|
| `TextIndex` | indexes.bm25: TantivyIndex, Bm25sIndex, RankBm25Index |
| `VectorIndex` | indexes.vector.VectorIndex |
| `Retriever` | retriever: BM25Retriever, DenseRetriever, HybridRetriever (over any `SearchBackend`) |
| `Linker` | linker: Linker (ELQ), SpacyAliasLinker |
| `Reader` | reader.model.Reader (and any family in reader.registry.READERS) |
| `Calibrates` | reader.calibration.Calibration |
| `ArticlePassages` | odqa.corpus.articles.StoreArticlePassages, indexes.elastic.ElasticArticlePassages |
| `SearchBackend` | indexes.folder.FolderIndex (an index folder, sharded too), indexes.elastic.ElasticPassageIndex |
| `FusesItself` | indexes.elastic.ElasticPassageIndex (Elasticsearch's own RRF) |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from odqa.core.fusion import Fusion
from odqa.core.runtime import InferencePlan
from odqa.core.types import Answer, BackendInfo, Mention, Passage, SearchHit

# What a store may hold, each searched by one `SearchBackend` method; a retriever kind names those it needs
# (retriever.registry.RETRIEVERS), so a new kind over these needs no store to change.
TEXT = "text"  # the passages' words: `text_search`
VECTORS = "vectors"  # passage vectors: `vector_search`
CAPABILITIES = (TEXT, VECTORS)


@runtime_checkable
class TextIndex(Protocol):
    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """For each query its top-k (row, score) pairs, best first."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    @property
    def dim(self) -> int: ...

    def __len__(self) -> int: ...

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each of shape (queries, k), best first."""
        ...


@runtime_checkable
class Retriever(Protocol):
    name: str

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        """Top-k passages for each question, best first, with `passage` filled in."""
        ...


@runtime_checkable
class Linker(Protocol):
    def link(self, questions: Sequence[str], batch_size: int = 32) -> list[list[Mention]]:
        """The entity mentions of each question."""
        ...


@runtime_checkable
class Calibrates(Protocol):
    """How sure a reader's answers are (reader.calibration.Calibration): what the pipeline asks of it."""

    @property
    def fitted(self) -> bool: ...

    @property
    def threshold(self) -> float:
        """The probability an answer needs to be called confident."""
        ...

    def probability(self, margin: float, share: float) -> float: ...

    def confident(self, probability: float) -> bool: ...

    def for_cross_language(self) -> Calibrates | None:
        """The fit for questions asked in another language than their passages' (None: none fitted)."""
        ...


@runtime_checkable
class Reader(Protocol):
    """What the pipeline, `eval-reader`, `fit-calibration` and the server use of a reader
    (reader.registry.build_reader builds one; odqa.testing.reader_conformance checks one)."""

    name: str

    @property
    def calibration(self) -> Calibrates:
        """Its fitted probabilities (calibration.json) and the confidence threshold."""
        ...

    @property
    def languages(self) -> list[str] | None:
        """The languages (ISO 639-1) it was trained to read (None: not recorded): text of another language gets
        guesses, never called confident."""
        ...

    @property
    def no_answer_threshold(self) -> float | None:
        """How far a span must beat its passage's null score to count (None: always answer)."""
        ...

    @property
    def plan(self) -> InferencePlan:
        """The runtime and precision it reads with now (shown by `ask --json`, eval and /info)."""
        ...

    def read(
        self,
        question: str,
        passages: list[Passage],
        retrieval_scores: list[float] | None = None,
        top_n: int | None = None,
    ) -> list[Answer]:
        """Answers to `question` from `passages`, best first; `retrieval_scores` one per passage; `top_n` None:
        the reader's own setting."""
        ...

    def read_many(
        self,
        questions: Sequence[str],
        passages: Sequence[list[Passage]],
        retrieval_scores: Sequence[list[float]] | None = None,
        top_n: int | None = None,
        *,
        subjects: Sequence[frozenset[str] | None] | None = None,
    ) -> list[list[Answer]]:
        """`read` for several questions at once (one answer list per question, in order). `subjects`: the article
        keys (odqa.corpus.questions.article_key) of each question's linked entities, None where none is linked; a
        reader that does not read entities ignores them."""
        ...

    def read_batch(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        no_answer_threshold: float | None = None,
        titles: Sequence[str] | None = None,
    ) -> list[Answer | None]:
        """One context per question (reading comprehension, `eval-reader`): each question's best answer, None
        where no span beats the null span by `no_answer_threshold` (None: always answer). `titles`: each context's
        article, for a reader that reads it."""
        ...


@runtime_checkable
class ArticlePassages(Protocol):
    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        """The first `limit` passages of one article (the passages' `doc_id`) in corpus order, as (row, passage):
        the candidates the entity bonus adds for a linked entity (linker.guided). Every index backend gives them
        (`article_passages()`), so the bonus works alike on an index folder and on Elasticsearch."""
        ...


@runtime_checkable
class SearchBackend(Protocol):
    """A store of passages, storage only (retriever.registry.INDEX_BACKENDS): what it can search and hold. The
    retrievers (retriever.bm25, .dense, .hybrid) search every store through these methods, and
    retriever.registry.build_retriever alone chooses and builds them, so a new store is its module and one
    registry line. A store may also fuse text and vector search itself (`FusesItself`)."""

    def __len__(self) -> int:
        """Passages in the store."""
        ...

    def info(self) -> BackendInfo:
        """Language, encoder record, tuned fusion, knowledge base and /info's summary (odqa.core.types)."""
        ...

    def text_search(self, questions: Sequence[str], k: int, max_df: float) -> list[list[SearchHit]]:
        """Each question's top-k passages by BM25, best first, `source` "bm25"; `max_df` > 0: leave out the
        question's terms found in more than that fraction of the passages. A hit's `passage` may be None
        (`passages(rows)` reads it)."""
        ...

    def vector_search(self, vectors: np.ndarray, k: int) -> list[list[SearchHit]]:
        """Each question vector's top-k passages by inner product, best first, `source` "dense"; `passage` as
        in `text_search`."""
        ...

    def passages(self, rows: Sequence[int]) -> list[Passage]:
        """The passages of `rows`, in that order."""
        ...

    def article_passages(self) -> ArticlePassages: ...

    def capabilities(self) -> frozenset[str]:
        """What this store holds (of `CAPABILITIES`): TEXT where `text_search` serves, VECTORS where
        `vector_search` does."""
        ...

    def check_available(self, capability: str) -> None:
        """Before the first search through `capability` (TEXT or VECTORS): raise one line (OdqaError) where this
        store cannot serve it (an optional package, a part or the vectors missing); a store that opens its parts
        on first use opens those it reads for `capability` here."""
        ...


@runtime_checkable
class FusesItself(Protocol):
    """A `SearchBackend` that also fuses text and vector search on its side (Elasticsearch's rrf retriever),
    asked first by a hybrid whose fusion names that method (odqa.core.fusion.Fusion.server)."""

    def fused_search(
        self, questions: Sequence[str], vectors: np.ndarray, k: int, depth: int, fusion: Fusion
    ) -> list[list[SearchHit]] | None:
        """Each question's fused top k from `depth` candidates of each list; None where the store cannot (the
        hybrid then fuses on its side with `fusion`)."""
        ...
