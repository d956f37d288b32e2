"""Retrievers over an Elasticsearch index (indexes/elastic.py), with the embedded retrievers' interface:
`search(questions, k) -> list[list[SearchHit]]`, best first.

`SearchHit.row` is the passage's row in the local PassageStore the index was loaded from (stored in each
document), and `hit.passage` is filled from the document's source, so no local store is needed.

* `ElasticBM25Retriever`: `multi_match` (most_fields) over `text` and `title^0.5` (the title is boosted
  lightly: a title match adds half of what a text match adds); `title_boost=0` queries `text` only.
* `ElasticDenseRetriever`: `knn` on `vector` (HNSW), `num_candidates` per shard configurable; scores are
  given back as inner products, as the embedded dense retriever reports them.
* `ElasticHybridRetriever`: `rrf` and `minmax` fuse the two lists client-side with the very fusion the
  embedded hybrid uses (odqa.core.fusion); `es-rrf` asks the server's own `rrf` retriever and, where the
  server lacks it (before 8.14, or a license without it), says so once and falls back to client-side RRF.
* `ElasticBackend`: an Elasticsearch index as an index backend (retriever.registry, `index = "es://..."`),
  with the retriever kinds of retriever.kinds, so the pipeline, the shell, `ask`, `search` and `eval-*` run on
  it as on an index folder; `article_passages()` gives the entity bonus its candidates, as a folder's store.
"""

from __future__ import annotations

from typing import Sequence

from odqa.indexes.elastic import (DEFAULT_TITLE_BOOST, ElasticArticlePassages, ElasticIndex, describe_hosts, passage_of,
                             settings_for)
from odqa.core.errors import OdqaError
from odqa.core.fusion import AUTO, Fusion, resolve_fusion
from odqa.core.logs import get_logger
from odqa.core.types import SearchHit
from odqa.retriever.base import check_k
from odqa.retriever.kinds import DENSE_OPTIONS, ELASTIC_FUSIONS, SERVER_RRF, configured_retriever, make_retriever

FUSIONS = ELASTIC_FUSIONS
log = get_logger(__name__)


def to_hits(results: list[list[dict]], source: str) -> list[list[SearchHit]]:
    return [[SearchHit(row=hit["row"], score=hit["score"], passage=passage_of(hit), source=source) for hit in hits]
            for hits in results]


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

    def __init__(self, index: ElasticIndex, encoder, num_candidates: int = 100, batch_size: int = 64,
                 check_name: bool = True):
        """check_name False: a question encoder other than the index's (a DPR pair) is taken when its
        dimension fits."""
        super().__init__(index)
        index.check(encoder=encoder.name if check_name else "", dim=encoder.dim)
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
                 rrf_k: int = 60, num_candidates: int = 100, title_boost: float = DEFAULT_TITLE_BOOST,
                 check_name: bool = True):
        if method not in FUSIONS:
            raise OdqaError(f"unknown fusion method {method!r}; use {', '.join(FUSIONS)}")
        super().__init__(index)
        # es-rrf's fallback is the client-side rrf
        self.fusion = Fusion.hybrid("rrf" if method == SERVER_RRF else method, alpha, rrf_k)
        self.dense = ElasticDenseRetriever(index, encoder, num_candidates=num_candidates, check_name=check_name)
        self.sparse = ElasticBM25Retriever(index, title_boost=title_boost)
        self.method, self.alpha, self.candidates, self.rrf_k = method, alpha, candidates, rrf_k
        self.num_candidates, self.title_boost = num_candidates, title_boost

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        check_k(k, self.corpus_size)
        questions = list(questions)
        depth = min(max(k, self.candidates), self.corpus_size)
        vectors = self.dense.encode(questions)
        if self.method == SERVER_RRF:
            results = self.index.search_rrf(questions, vectors, k, window=depth, rank_constant=self.rrf_k,
                                            num_candidates=max(self.num_candidates, depth), title_boost=self.title_boost)
            if results is not None:
                hits = to_hits(results, "hybrid")
                return hits
        dense_results = self.dense.search(questions, depth, vectors=vectors)
        sparse_results = self.sparse.search(questions, depth)
        return [self.fuse(d, s, k) for d, s in zip(dense_results, sparse_results)]

    def fuse(self, dense_hits: list[SearchHit], sparse_hits: list[SearchHit], k: int) -> list[SearchHit]:
        return self.fusion([dense_hits, sparse_hits], k)


class ElasticBackend:
    """An Elasticsearch index of passages (loaded by `odqa es-index`) as an index backend: one method per
    retriever kind (retriever.kinds), `len()` = its documents. The question encoder is the one recorded in the
    index's `_meta` (with its settings) unless `encoder` / `query_encoder` name another."""

    def __init__(self, index: ElasticIndex, config):
        self.index = index.require()
        self.config = config
        self._cache: dict = {}

    @classmethod
    def open(cls, location: str, config) -> "ElasticBackend":
        """`location`: es://host:9200/name (parts left out: the config's [elastic] hosts and index name)."""
        elastic = settings_for(location, config.elastic)
        elastic.validate()
        return cls(ElasticIndex.open(elastic), config)

    def __len__(self) -> int:
        return self.bm25().corpus_size

    def describe(self) -> str:
        return f"Elasticsearch index {self.index.name!r} at {describe_hosts(self.index.hosts)}"

    def retriever(self, kind: str, **options):
        return make_retriever(self, kind, **options)

    @property
    def language(self) -> str:
        """The language of the index's text, as its `_meta` records it (`en` where it records none)."""
        return self.index.meta.get("language", "en")

    def check_available(self, kind: str) -> None:
        """The server does the searching: nothing beyond the client (checked when the index was opened)."""

    def article_passages(self) -> ElasticArticlePassages:
        """Each article's passages, for the entity bonus (linker.guided), as an index folder's store gives them."""
        if "articles" not in self._cache:
            self._cache["articles"] = ElasticArticlePassages(self.index)
        return self._cache["articles"]

    def bm25(self, bm25_max_df: float | None = None) -> ElasticBM25Retriever:
        if bm25_max_df:
            raise OdqaError("retrieval.bm25_max_df applies to an index folder's BM25 (Tantivy); Elasticsearch ranks "
                            "with every term: set it to 0 for an es:// index")
        if "bm25" not in self._cache:
            self._cache["bm25"] = ElasticBM25Retriever(self.index)
        return self._cache["bm25"]

    def _encoder(self, encoder: str | None = None, precision: str = "auto", runtime: str = "auto",
                 query_encoder: str | None = None, settings: dict | None = None, accept_encoder_change: bool = False,
                 device: str | None = None):
        from odqa.core.encoder_loading import load_text_encoder

        meta = self.index.meta
        recorded = meta.get("query_encoder") or meta.get("encoder") or ""
        name = query_encoder or encoder or self.config.retrieval.encoder or recorded or "minilm"
        chosen = {k: (meta.get("encoder_settings") or {}).get(k) for k in ("pooling", "similarity", "query_prefix")}
        chosen.update({k: v for k, v in (settings or {}).items() if v not in (None, "")})
        if name != recorded and not (settings or {}).get("pooling"):
            chosen["pooling"] = None  # another model: its own pooling
        key = (name, precision, runtime, device, tuple(sorted(chosen.items())))
        if key not in self._cache:
            max_length = int(meta["max_length"]) if meta.get("max_length") else None
            self._cache[key] = load_text_encoder(name, max_length=max_length, precision=precision, runtime=runtime,
                                                 device=device, **chosen)
        return self._cache[key], not query_encoder

    def dense(self, **options) -> ElasticDenseRetriever:
        encoder, check_name = self._encoder(**options)
        return ElasticDenseRetriever(self.index, encoder, num_candidates=self.config.elastic.num_candidates,
                                     check_name=check_name)

    def hybrid(self, fusion: str = AUTO, alpha: float = 0.5, candidates: int = 100, rrf_k: int = 60,
               bm25_max_df: float | None = None, **dense_options):
        if not self.index.dim:
            # as an index folder built with --backends bm25: hybrid (the default) still answers
            log.warning("%s holds no vectors, so hybrid retrieval falls back to bm25", self.describe())
            return self.bm25(bm25_max_df)
        if bm25_max_df:
            self.bm25(bm25_max_df)  # refuses it, as for bm25
        encoder, check_name = self._encoder(**{k: v for k, v in dense_options.items() if k in DENSE_OPTIONS})
        fusion, alpha, rrf_k = resolve_fusion(fusion, alpha, rrf_k, language=self.index.meta.get("language", "en"))
        return ElasticHybridRetriever(self.index, encoder, method=fusion, alpha=alpha, candidates=candidates,
                                      rrf_k=rrf_k, num_candidates=self.config.elastic.num_candidates,
                                      check_name=check_name)


def open_elastic_retriever(config, kind: str = "bm25", fusion: str | None = None, encoder: str | None = None,
                           index: ElasticIndex | None = None):
    """A retriever over the index named by an OdqaConfig's [elastic] section (`es-search`)."""
    backend = ElasticBackend(index or ElasticIndex.open(config.elastic), config)
    overrides = {"encoder": encoder, "fusion": fusion}
    return configured_retriever(backend, config, kind, **{k: v for k, v in overrides.items() if v})
