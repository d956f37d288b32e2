"""Elasticsearch index of passages: passages (and their dense vectors) in one Elasticsearch 8.x/9.x index, and
that index as a `SearchBackend` (`ElasticPassageIndex`, `index = "es://host:9200/name"`).

One index per corpus. Each document is one passage, `_id` = passage id:

  text, title    `text` fields with a configurable analyser (default `english`: lower case, English stop
                 words, Porter stemmer), scored with Elasticsearch's BM25 (k1=1.2, b=0.75)
  doc_id         keyword (the article id)
  row            integer: the passage's row in the local PassageStore, so hits line up with the index folder
  start, end     character offsets into the article (stored, not indexed)
  vector         `dense_vector` (dims from the index manifest, HNSW), similarity `dot_product` (vectors are
                 re-normalised in float32 before upload, as Elasticsearch demands unit length) or `cosine`

The mapping's `_meta` records the corpus fingerprint, encoder and dimension, so a search can refuse an index
built from another corpus or encoder, as the folder's manifests do. Loading: indexes/elastic_bulk.py;
connections and error messages: indexes/elastic_connection.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.fusion import Fusion
from odqa.core.protocols import TEXT, VECTORS
from odqa.core.text_encoding import check_vectors_encoder
from odqa.core.types import BackendInfo, EncoderRecord, Passage, SearchHit
from odqa.indexes.elastic_connection import (
    SearchFailed,
    auth_error,
    call,
    connect,
    describe_hosts,
    reason,
    require_json,
    scrub,
    secrets_of,
    server_version,
    settings_for,
    translate_error,
)

log = logging.getLogger(__name__)

FORMAT = "odqa-elastic-1"
SIMILARITIES = ("dot_product", "cosine")
SOURCE_FIELDS = ["row", "title", "text", "doc_id", "start", "end", "url"]
DEFAULT_TITLE_BOOST = 0.5
RRF_MIN_VERSION = (8, 14)  # the `retriever` search API (with `rrf`) appeared in 8.14


def mapping(
    dim: int,
    analyzer: str = "english",
    similarity: str = "dot_product",
    hnsw_m: int = 16,
    ef_construction: int = 100,
    meta: dict | None = None,
    knn_type: str = "hnsw",
) -> dict:
    if similarity not in SIMILARITIES:
        raise OdqaError(f"unknown vector similarity {similarity!r}; use {' or '.join(SIMILARITIES)}")
    properties: dict[str, Any] = {
        "row": {"type": "integer"},
        "title": {"type": "text", "analyzer": analyzer},
        "text": {"type": "text", "analyzer": analyzer},
        "doc_id": {"type": "keyword"},
        "start": {"type": "integer", "index": False},
        "end": {"type": "integer", "index": False},
        "url": {"type": "keyword", "index": False},
    }
    if dim:
        properties["vector"] = {
            "type": "dense_vector",
            "dims": int(dim),
            "index": True,
            "similarity": similarity,
            "index_options": {"type": knn_type, "m": int(hnsw_m), "ef_construction": int(ef_construction)},
        }
    return {"dynamic": "strict", "_meta": meta or {}, "properties": properties}


class ElasticIndex:
    """One Elasticsearch index of passages (or entities). Searches return, per query, a list of hit dicts:
    {"id", "row", "score", "source"}."""

    def __init__(self, client, name: str, hosts: str | Sequence[str] = "", secrets: Sequence[str] = ()):
        self.client = client
        self.name = name
        self.hosts = hosts
        self.secrets = list(secrets)
        self._meta: dict | None = None
        self._rrf: bool | None = None
        self.notices: list[str] = []

    @classmethod
    def open(cls, config, name: str | None = None, check: bool = True) -> ElasticIndex:
        client = connect(config, check=check)
        return cls(client, name or config.index_name, config.hosts, secrets_of(config))

    def _call(self, fn: Callable[[], Any], what: str):
        return call(fn, self.hosts, what, self.secrets)

    # -------------------------------------------------- state

    def exists(self) -> bool:
        return bool(self._call(lambda: self.client.indices.exists(index=self.name), f"looking for index {self.name!r}"))

    def require(self) -> ElasticIndex:
        if not self.exists():
            raise OdqaError(
                f"Elasticsearch at {describe_hosts(self.hosts)} has no index {self.name!r}; load one with "
                f"`odqa es-index --index INDEX_FOLDER --index-name {self.name}`"
            )
        return self

    @property
    def meta(self) -> dict:
        if self._meta is None:
            result = self._call(
                lambda: self.client.indices.get_mapping(index=self.name), f"reading the mapping of {self.name!r}"
            )
            body = dict(result)
            first: dict = next(iter(body.values()), {}) if body else {}
            self._meta = dict(first.get("mappings", {}).get("_meta", {}) or {})
        return self._meta

    @property
    def dim(self) -> int:
        return int(self.meta.get("dim", 0))

    @property
    def similarity(self) -> str:
        return str(self.meta.get("similarity", "dot_product"))

    def create(
        self,
        meta: dict,
        dim: int,
        analyzer: str = "english",
        similarity: str = "dot_product",
        shards: int = 1,
        replicas: int = 1,
        hnsw_m: int = 16,
        ef_construction: int = 100,
        knn_type: str = "hnsw",
    ) -> None:
        meta = {"format": FORMAT, **meta, "dim": int(dim), "similarity": similarity, "analyzer": analyzer}
        body = mapping(dim, analyzer, similarity, hnsw_m, ef_construction, meta, knn_type)
        settings = {"number_of_shards": int(shards), "number_of_replicas": int(replicas)}
        self._call(
            lambda: self.client.indices.create(index=self.name, settings=settings, mappings=body),
            f"creating index {self.name!r}",
        )
        self._meta = meta

    def delete(self) -> None:
        if self.exists():
            self._call(lambda: self.client.indices.delete(index=self.name), f"deleting index {self.name!r}")
        self._meta = None

    def refresh(self) -> None:
        self._call(lambda: self.client.indices.refresh(index=self.name), f"refreshing {self.name!r}")

    def count(self, refresh: bool = False) -> int:
        if refresh:
            self.refresh()
        return int(self._call(lambda: self.client.count(index=self.name), f"counting {self.name!r}")["count"])

    def max_row(self, rows: tuple[int, int] | None = None) -> int:
        """Highest committed row (after a refresh), -1 when empty; `rows` [start, end): the highest among those."""
        self.refresh()
        query = {"range": {"row": {"gte": rows[0], "lt": rows[1]}}} if rows else {"match_all": {}}
        result = self._call(
            lambda: self.client.search(
                index=self.name, size=0, query=query, aggs={"max_row": {"max": {"field": "row"}}}
            ),
            f"reading the last row of {self.name!r}",
        )
        value = result["aggregations"]["max_row"]["value"]
        return -1 if value is None else int(value)

    def check(self, fingerprint: str = "", encoder: str = "", dim: int = 0) -> None:
        meta = self.meta
        where = f"Elasticsearch index {self.name!r} at {describe_hosts(self.hosts)}"
        if meta.get("format") not in (None, FORMAT):
            raise IndexMismatchError(f"{where} was not written by odqa (format {meta.get('format')!r})")
        if fingerprint and meta.get("corpus_fingerprint") and fingerprint != meta["corpus_fingerprint"]:
            raise IndexMismatchError(
                f"{where} holds another corpus (fingerprint {meta['corpus_fingerprint']}, this one {fingerprint}); "
                "pass --recreate to replace it or choose another --index-name"
            )
        check_vectors_encoder(
            where,
            (str(meta.get("encoder") or ""), self.dim),
            (encoder, dim),
            "load it with vectors of its encoder, or rebuild it with --recreate",
        )

    def set_settings(self, settings: dict) -> None:
        self._call(
            lambda: self.client.indices.put_settings(index=self.name, settings=settings),
            f"changing the settings of {self.name!r}",
        )

    def get_setting(self, name: str) -> Any:
        result = dict(
            self._call(lambda: self.client.indices.get_settings(index=self.name), f"reading settings of {self.name!r}")
        )
        first: dict = next(iter(result.values()), {})
        node: Any = first.get("settings", {}).get("index", {})
        return node.get(name)

    # -------------------------------------------------- search

    def _msearch(self, bodies: list[dict], what: str, batch: int = 64, translate: bool = True) -> list[list[dict]]:
        out: list[list[dict]] = []
        for start in range(0, len(bodies), batch):
            searches: list[dict] = []
            for body in bodies[start : start + batch]:
                searches.extend([{"index": self.name}, body])
            if translate:
                result = self._call(lambda: self.client.msearch(searches=searches), what)  # noqa: B023 -- called before the next batch
            else:
                result = require_json(self.client.msearch(searches=searches), self.hosts, what, self.secrets)
            for response in result["responses"]:
                if "error" in response:
                    error: dict = (
                        response["error"] if isinstance(response["error"], dict) else {"reason": str(response["error"])}
                    )
                    root = (error.get("root_cause") or [{}])[0]
                    raise SearchFailed(
                        scrub(
                            f"Elasticsearch index {self.name!r} failed a {what} search: {error.get('type', '')}: "
                            f"{root.get('reason') or error.get('reason', '')}",
                            self.secrets,
                        ),
                        status=int(response.get("status", 500)),
                    )
                out.append(
                    [
                        {
                            "id": h["_id"],
                            "row": int(h["_source"].get("row", -1)),
                            "score": float(h["_score"] or 0.0),
                            "source": h["_source"],
                        }
                        for h in response["hits"]["hits"]
                    ]
                )
        return out

    def rows(self, rows: Sequence[int], source: Sequence[str] = SOURCE_FIELDS) -> list[dict]:
        """The documents of these store rows (any order)."""
        body = {"query": {"terms": {"row": [int(row) for row in rows]}}, "size": len(rows), "_source": list(source)}
        return self._msearch([body], "passages by row")[0] if rows else []

    def article_passages(self, doc_id: str, limit: int, source: Sequence[str] = SOURCE_FIELDS) -> list[dict]:
        """The first `limit` passages of one article (`doc_id`), in row order (the entity bonus's candidates)."""
        body = {
            "query": {"term": {"doc_id": str(doc_id)}},
            "sort": [{"row": "asc"}],
            "size": int(limit),
            "_source": list(source),
        }
        return self._msearch([body], "article passages")[0]

    @staticmethod
    def bm25_query(question: str, title_boost: float = DEFAULT_TITLE_BOOST) -> dict:
        if title_boost > 0:
            return {
                "multi_match": {"query": question, "fields": ["text", f"title^{title_boost:g}"], "type": "most_fields"}
            }
        return {"match": {"text": question}}

    def _knn(self, vector: np.ndarray, k: int, num_candidates: int) -> dict:
        return {
            "field": "vector",
            "query_vector": [float(x) for x in vector],
            "k": int(k),
            "num_candidates": int(max(num_candidates, k)),
        }

    def search_bm25(
        self,
        questions: Sequence[str],
        k: int,
        title_boost: float = DEFAULT_TITLE_BOOST,
        source: Sequence[str] = SOURCE_FIELDS,
    ) -> list[list[dict]]:
        bodies = [{"query": self.bm25_query(q, title_boost), "size": k, "_source": list(source)} for q in questions]
        return self._msearch(bodies, "BM25")

    def search_knn(
        self, vectors: np.ndarray, k: int, num_candidates: int = 100, source: Sequence[str] = SOURCE_FIELDS
    ) -> list[list[dict]]:
        self.require_vectors()
        vectors = self.prepare_vectors(vectors)
        bodies = [{"knn": self._knn(v, k, num_candidates), "size": k, "_source": list(source)} for v in vectors]
        results = self._msearch(bodies, "kNN")
        for hits in results:  # Elasticsearch reports (1 + similarity) / 2; give back the inner product itself
            for hit in hits:
                hit["score"] = 2.0 * hit["score"] - 1.0
        return results

    def supports_rrf(self) -> bool:
        """Whether the server has the `rrf` retriever (8.14+, and a license that allows it). Asked once."""
        if self._rrf is None:
            info = self._call(lambda: self.client.info(), "asking the server version")
            version = server_version(dict(info))
            if version[:2] < RRF_MIN_VERSION:
                self._no_rrf(f"server version {'.'.join(map(str, version))} has no rrf retriever (needs 8.14+)")
            else:
                self._rrf = True
        return bool(self._rrf)

    def _no_rrf(self, why: str) -> None:
        self._rrf = False
        notice = f"Elasticsearch RRF unavailable ({why}); fusing BM25 and kNN results client-side with the same RRF"
        self.notices.append(notice)
        log.warning(notice)

    def search_rrf(
        self,
        questions: Sequence[str],
        vectors: np.ndarray,
        k: int,
        window: int = 100,
        rank_constant: int = 60,
        num_candidates: int = 100,
        title_boost: float = DEFAULT_TITLE_BOOST,
        source: Sequence[str] = SOURCE_FIELDS,
    ) -> list[list[dict]] | None:
        """Server-side RRF of BM25 and kNN; None when the server cannot (the caller then fuses client-side)."""
        from elasticsearch import ApiError

        self.require_vectors()
        if not self.supports_rrf():
            return None
        vectors = self.prepare_vectors(vectors)
        window = max(window, k)
        bodies = [
            {
                "retriever": {
                    "rrf": {
                        "retrievers": [
                            {"standard": {"query": self.bm25_query(q, title_boost)}},
                            {"knn": self._knn(v, window, num_candidates)},
                        ],
                        "rank_window_size": int(window),
                        "rank_constant": int(rank_constant),
                    }
                },
                "size": k,
                "_source": list(source),
            }
            for q, v in zip(questions, vectors)
        ]
        try:
            return self._msearch(bodies, "RRF", translate=False)
        except SearchFailed as exc:
            if exc.status in (400, 403):
                self._no_rrf(f"HTTP {exc.status}: {exc}")
                return None
            raise
        except ApiError as exc:
            if exc.status_code in (400, 403) and not auth_error(exc):
                self._no_rrf(f"HTTP {exc.status_code}: {reason(exc)}")
                return None
            error = translate_error(exc, self.hosts, "an RRF search", self.secrets)
            if error is None:  # never for an ApiError
                raise
            raise error from None
        except Exception as exc:
            error = translate_error(exc, self.hosts, "an RRF search", self.secrets)
            if error is None:
                raise
            raise error from None

    def require_vectors(self) -> None:
        if not self.dim:
            raise OdqaError(
                f"Elasticsearch index {self.name!r} holds no vectors (loaded from a BM25-only index); "
                "use --retriever bm25, or load an index folder built with --backends bm25,dense"
            )

    def prepare_vectors(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or (self.dim and vectors.shape[1] != self.dim):
            raise OdqaError(f"query vectors have shape {vectors.shape}; index {self.name!r} holds {self.dim}-d vectors")
        if self.similarity == "dot_product":
            vectors = unit_rows(vectors)
        return vectors


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def passage_of(hit: dict) -> Passage:
    """The Passage a search hit's document holds (`hit`: {"id", "source", ...} of ElasticIndex's searches)."""
    s = hit["source"]
    return Passage(
        id=hit["id"],
        title=s.get("title", ""),
        text=s.get("text", ""),
        doc_id=s.get("doc_id", ""),
        start=int(s.get("start", 0) or 0),
        end=int(s.get("end", 0) or 0),
        url=s.get("url") or "",
    )


class ElasticArticlePassages:
    """`ArticlePassages` (odqa.core.protocols) of an Elasticsearch passage index: an article's passages by a
    `doc_id` term query sorted by row, so the entity bonus gets the very passages, rows and order an index
    folder's store gives (`es-index` loads each passage with its store row and doc_id). One query per article,
    remembered."""

    def __init__(self, index: ElasticIndex):
        self.index = index
        self._articles: dict[tuple[str, int], list[tuple[int, Passage]]] = {}

    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        key = (str(doc_id), int(limit))
        if key not in self._articles:
            self._articles[key] = [(hit["row"], passage_of(hit)) for hit in self.index.article_passages(*key)]
        return self._articles[key]


SERVER_RRF = "es-rrf"  # `retrieval.fusion`: the server's own rrf retriever (client-side rrf where it has none)
MAX_DF_REFUSAL = (
    "retrieval.bm25_max_df applies to an index folder's BM25 (Tantivy); Elasticsearch ranks with every "
    "term: set it to 0 for an es:// index"
)


def _hits(results: list[list[dict]], source: str, fusion: str = "") -> list[list[SearchHit]]:
    return [
        [
            SearchHit(row=hit["row"], score=hit["score"], passage=passage_of(hit), source=source, fusion=fusion)
            for hit in hits
        ]
        for hits in results
    ]


class ElasticPassageIndex:
    """An Elasticsearch index of passages (loaded by `odqa es-index`) as a `SearchBackend` (odqa.core.protocols):
    text search is the server's BM25 (`multi_match` over `text` and `title^0.5`; `title_boost` 0: `text` only),
    vector search its kNN on `vector` (`num_candidates` per shard; scores given back as inner products), and
    `fused_search` its own rrf retriever (`es-rrf`). Each hit carries its passage, from the document, and the row
    of the folder's store it was loaded from, so hits line up with the folder's."""

    def __init__(self, index: ElasticIndex, num_candidates: int, title_boost: float = DEFAULT_TITLE_BOOST):
        self.index = index.require()
        self.num_candidates = num_candidates
        self.title_boost = title_boost
        self._size: int | None = None
        self._articles: ElasticArticlePassages | None = None

    @classmethod
    def open(cls, location: str, elastic) -> ElasticPassageIndex:
        """`location`: es://host:9200/name; the parts it leaves out, and the connection, from `elastic` (an
        ElasticConfig, the config's [elastic])."""
        elastic = settings_for(location, elastic)
        elastic.validate()
        return cls(ElasticIndex.open(elastic), elastic.num_candidates)

    def __len__(self) -> int:
        if self._size is None:
            self._size = self.index.count()
        return self._size

    def info(self) -> BackendInfo:
        meta = self.index.meta
        language = meta.get("language", "en")
        encoder = None
        if self.index.dim:
            encoder = EncoderRecord(
                name=str(meta.get("encoder", "")),
                dim=self.index.dim,
                query_encoder=str(meta.get("query_encoder", "")),
                settings=dict(meta.get("encoder_settings") or {}),
                max_length=int(meta["max_length"]) if meta.get("max_length") else None,
            )
        return BackendInfo(
            location=f"Elasticsearch index {self.index.name!r} at {describe_hosts(self.index.hosts)}",
            language=language,
            vectors=bool(self.index.dim),
            encoder=encoder,
            tuned_fusion=meta.get("fusion"),
            max_df_refusal=MAX_DF_REFUSAL,
            summary={"language": language, "encoder": meta.get("encoder", "")},
        )

    def text_search(self, questions: Sequence[str], k: int, max_df: float) -> list[list[SearchHit]]:
        if max_df:
            raise OdqaError(MAX_DF_REFUSAL)
        return _hits(self.index.search_bm25(list(questions), k, self.title_boost), "bm25")

    def vector_search(self, vectors: np.ndarray, k: int) -> list[list[SearchHit]]:
        return _hits(self.index.search_knn(vectors, k, self.num_candidates), "dense")

    def fused_search(
        self, questions: Sequence[str], vectors: np.ndarray, k: int, depth: int, fusion: Fusion
    ) -> list[list[SearchHit]] | None:
        """`es-rrf`: the server's rrf retriever over `depth` candidates of each list; None where the server has
        none (said once: ElasticIndex.supports_rrf) or the fusion is another."""
        if fusion.server != SERVER_RRF:
            return None
        results = self.index.search_rrf(
            list(questions),
            vectors,
            k,
            window=depth,
            rank_constant=fusion.rrf_k,
            num_candidates=max(self.num_candidates, depth),
            title_boost=self.title_boost,
        )
        return None if results is None else _hits(results, "hybrid", SERVER_RRF)

    def passages(self, rows: Sequence[int]) -> list[Passage]:
        by_row = {hit["row"]: passage_of(hit) for hit in self.index.rows(rows)}
        return [by_row[row] for row in rows]

    def article_passages(self) -> ElasticArticlePassages:
        """Each article's passages, for the entity bonus (linker.guided), as an index folder's store gives them."""
        if self._articles is None:
            self._articles = ElasticArticlePassages(self.index)
        return self._articles

    def capabilities(self) -> frozenset[str]:
        """TEXT always (the server's BM25); VECTORS where the index was loaded with vectors."""
        return frozenset({TEXT, VECTORS} if self.index.dim else {TEXT})

    def check_available(self, capability: str) -> None:
        """The server does the searching (the client was checked when the index was opened); VECTORS needs an
        index loaded with vectors (a hybrid over one without is BM25: retriever.registry.build_retriever)."""
        if capability == VECTORS:
            self.index.require_vectors()
