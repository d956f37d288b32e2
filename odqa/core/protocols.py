"""The narrow, batch-first interfaces the layers meet at. Implementations match them structurally (no
subclassing): a new backend only has to have these methods.

| protocol | implementations |
|---|---|
| `TextIndex` | indexes.bm25: TantivyIndex, Bm25sIndex, RankBm25Index |
| `VectorIndex` | indexes.vector.VectorIndex |
| `Retriever` | retriever: BM25Retriever, DenseRetriever, HybridRetriever, Elastic{BM25,Dense,Hybrid}Retriever |
| `Linker` | linker: Linker (ELQ), SpacyAliasLinker |
| `Reader` | reader.model.Reader |
| `ArticlePassages` | odqa.corpus.articles.StoreArticlePassages, indexes.elastic.ElasticArticlePassages |
| `IndexBackend` | retriever.loading.IndexBundle (a folder), retriever.elastic.ElasticBackend (Elasticsearch) |
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from odqa.core.types import Answer, Mention, Passage, SearchHit


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
class Reader(Protocol):
    def read(self, question: str, passages: list[Passage], retrieval_scores: list[float] | None = None,
             top_n: int = 5) -> list[Answer]:
        """Answers to `question` from `passages`, best first; `retrieval_scores` one per passage."""
        ...

    def read_many(self, questions: Sequence[str], passages: Sequence[list[Passage]],
                  retrieval_scores: Sequence[list[float]] | None = None, top_n: int = 5) -> list[list[Answer]]:
        """`read` for several questions at once (one answer list per question, in order)."""
        ...


@runtime_checkable
class ArticlePassages(Protocol):
    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        """The first `limit` passages of one article (the passages' `doc_id`) in corpus order, as (row, passage):
        the candidates the entity bonus adds for a linked entity (linker.guided). Every index backend gives them
        (`article_passages()`), so the bonus works alike on an index folder and on Elasticsearch."""
        ...


@runtime_checkable
class IndexBackend(Protocol):
    """Where passages are searched (retriever.registry.INDEX_BACKENDS): it builds each kind of retriever
    (retriever.kinds.RETRIEVERS) from the options a config gives (`OdqaConfig.retriever_options`,
    `retriever.registry.configured_retriever`), so a new backend touches its own module and one registry line."""

    def __len__(self) -> int: ...

    def describe(self) -> str: ...

    @property
    def language(self) -> str:
        """The language of the indexed text: `en`, `ko` or `zh`."""
        ...

    def retriever(self, kind: str, **options) -> Retriever:
        """The `kind` retriever over this index; options: encoder, fusion, alpha, candidates, rrf_k, precision,
        runtime, device, accept_encoder_change, query_encoder, settings (each backend takes what applies)."""
        ...

    def check_available(self, kind: str) -> None:
        """Raise one line (OdqaError) when an optional package the `kind` retriever needs here is missing."""
        ...

    def article_passages(self) -> ArticlePassages: ...
