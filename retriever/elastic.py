"""Retrievers over an Elasticsearch index (indexes/elastic.py), with the embedded retrievers' interface:
`search(questions, k) -> list[list[SearchHit]]`, best first.

`SearchHit.row` is the passage's row in the local PassageStore the index was loaded from (stored in each
document), and `hit.passage` is filled from the document's source, so no local store is needed.

* `ElasticBM25Retriever`: `multi_match` (most_fields) over `text` and `title^0.5` (the title is boosted
  lightly: a title match adds half of what a text match adds); `title_boost=0` queries `text` only.
* `ElasticDenseRetriever`: `knn` on `vector` (HNSW), `num_candidates` per shard configurable; scores are
  given back as inner products, as the embedded dense retriever reports them.
* `ElasticHybridRetriever`: `rrf` and `minmax` fuse the two lists client-side with the very functions the
  embedded hybrid uses (retriever/hybrid.py); `es-rrf` asks the server's own `rrf` retriever and, where the
  server lacks it (before 8.14, or a license without it), says so once and falls back to client-side RRF.
"""

from __future__ import annotations

from typing import Sequence

from indexes.elastic import DEFAULT_TITLE_BOOST, ElasticIndex
from odqa.core.errors import OdqaError
from odqa.core.types import Passage, SearchHit
from retriever.base import check_k
from retriever.hybrid import minmax_fuse, rrf_fuse

FUSIONS = ("rrf", "minmax", "es-rrf")


def to_hits(results: list[list[dict]], source: str) -> list[list[SearchHit]]:
    out = []
    for hits in results:
        row_hits = []
        for hit in hits:
            s = hit["source"]
            passage = Passage(id=hit["id"], title=s.get("title", ""), text=s.get("text", ""), doc_id=s.get("doc_id", ""),
                              start=int(s.get("start", 0) or 0), end=int(s.get("end", 0) or 0))
            row_hits.append(SearchHit(row=hit["row"], score=hit["score"], passage=passage, source=source))
        out.append(row_hits)
    return out


class _ElasticBase:
    def __init__(self, index: ElasticIndex):
        self.index = index.require()
        self._size: int | None = None

    @property
    def corpus_size(self) -> int:
        if self._size is None:
            self._size = self.index.count()
        return self._size

    def __len__(self) -> int:
        return self.corpus_size


class ElasticBM25Retriever(_ElasticBase):
    name = "es-bm25"

    def __init__(self, index: ElasticIndex, title_boost: float = DEFAULT_TITLE_BOOST):
        super().__init__(index)
        self.title_boost = title_boost

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        check_k(k, self.corpus_size)
        return to_hits(self.index.search_bm25(list(questions), k, self.title_boost), "bm25")


class ElasticDenseRetriever(_ElasticBase):
    name = "es-dense"

    def __init__(self, index: ElasticIndex, encoder, num_candidates: int = 100, batch_size: int = 64):
        super().__init__(index)
        index.check(encoder=encoder.name, dim=encoder.dim)
        self.encoder = encoder
        self.num_candidates = num_candidates
        self.batch_size = batch_size

    def encode(self, questions: Sequence[str]):
        return self.encoder.encode_queries(list(questions), batch_size=self.batch_size)

    def search(self, questions: Sequence[str], k: int, vectors=None) -> list[list[SearchHit]]:
        check_k(k, self.corpus_size)
        vectors = self.encode(questions) if vectors is None else vectors
        return to_hits(self.index.search_knn(vectors, k, self.num_candidates), "dense")


class ElasticHybridRetriever(_ElasticBase):
    name = "es-hybrid"

    def __init__(self, index: ElasticIndex, encoder, method: str = "rrf", alpha: float = 0.5, candidates: int = 100,
                 rrf_k: int = 60, num_candidates: int = 100, title_boost: float = DEFAULT_TITLE_BOOST):
        if method not in FUSIONS:
            raise OdqaError(f"unknown fusion method {method!r}; use {', '.join(FUSIONS)}")
        super().__init__(index)
        self.dense = ElasticDenseRetriever(index, encoder, num_candidates=num_candidates)
        self.sparse = ElasticBM25Retriever(index, title_boost=title_boost)
        self.method, self.alpha, self.candidates, self.rrf_k = method, alpha, candidates, rrf_k
        self.num_candidates, self.title_boost = num_candidates, title_boost

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        check_k(k, self.corpus_size)
        questions = list(questions)
        depth = min(max(k, self.candidates), self.corpus_size)
        vectors = self.dense.encode(questions)
        if self.method == "es-rrf":
            results = self.index.search_rrf(questions, vectors, k, window=depth, rank_constant=self.rrf_k,
                                            num_candidates=max(self.num_candidates, depth), title_boost=self.title_boost)
            if results is not None:
                hits = to_hits(results, "hybrid")
                return hits
        dense_results = self.dense.search(questions, depth, vectors=vectors)
        sparse_results = self.sparse.search(questions, depth)
        return [self.fuse(d, s, k) for d, s in zip(dense_results, sparse_results)]

    def fuse(self, dense_hits: list[SearchHit], sparse_hits: list[SearchHit], k: int) -> list[SearchHit]:
        if self.method == "minmax":
            return minmax_fuse([dense_hits, sparse_hits], [self.alpha, 1.0 - self.alpha], k)
        return rrf_fuse([dense_hits, sparse_hits], k, self.rrf_k)


def open_elastic_retriever(config, kind: str = "bm25", fusion: str | None = None, encoder: str | None = None,
                           index: ElasticIndex | None = None):
    """A retriever over the index named by an OdqaConfig's [elastic] section; the question encoder is the one
    recorded in the index's `_meta` unless `encoder` names another."""
    index = index or ElasticIndex.open(config.elastic)
    if kind == "bm25":
        return ElasticBM25Retriever(index.require())
    from odqa.core.encoder import TextEncoder

    index.require()
    name = encoder or config.retrieval.encoder or index.meta.get("encoder") or "minilm"
    text_encoder = TextEncoder.from_pretrained(name)
    r = config.retrieval
    if kind == "dense":
        return ElasticDenseRetriever(index, text_encoder, num_candidates=config.elastic.num_candidates)
    if kind == "hybrid":
        return ElasticHybridRetriever(index, text_encoder, method=fusion or r.fusion, alpha=r.alpha,
                                      candidates=r.candidates, rrf_k=r.rrf_k, num_candidates=config.elastic.num_candidates)
    raise OdqaError(f"unknown retriever {kind!r}; choose bm25, dense or hybrid")
