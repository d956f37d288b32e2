"""Elasticsearch backend: passages (and their dense vectors) in one Elasticsearch 8.x/9.x index.

One index per corpus. Each document is one passage, `_id` = passage id:

  text, title    `text` fields with a configurable analyser (default `english`: lower case, English stop
                 words, Porter stemmer), scored with Elasticsearch's BM25 (k1=1.2, b=0.75)
  doc_id         keyword (the article id)
  row            integer: the passage's row in the local PassageStore, so hits line up with the embedded
                 backends
  start, end     character offsets into the article (stored, not indexed)
  vector         `dense_vector` (dims from the index manifest, HNSW), similarity `dot_product` (vectors are
                 re-normalised in float32 before upload, as Elasticsearch demands unit length) or `cosine`

The mapping's `_meta` records the corpus fingerprint, encoder and dimension, so a search can refuse an index
built from another corpus or encoder, as the embedded manifests do.

Bulk loading (`bulk_load`) sends fixed-size chunks with the `create` op type: a chunk is committed once its
bulk request is acknowledged, item by item. Rejected items (HTTP 429: the cluster's write queue is full) are
retried with exponential backoff and counted; a lost connection is retried likewise, and when the retries
run out the load stops with an OdqaError naming the last committed passage. A rerun resumes: it skips the
contiguous prefix of rows already present (found with a max aggregation on `row`) and counts any `create`
conflict (409) as already present, so nothing is indexed twice. The chunks go through `client.bulk`
directly rather than `helpers.streaming_bulk`, which hides both the per-chunk commit point and the number of
rejections.

Credentials (API key, basic-auth password, passwords inside host URLs) are never printed or logged: error
messages name the hosts with any user information removed.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from odqa.indexes.integrity import check_bundle_manifest, check_part, file_check, file_reader
from odqa.indexes.layout import DENSE, EMBEDDINGS, PASSAGES, IndexLayout
from odqa.indexes.manifest import Manifest
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.secrets import API_KEY_ENV, PASSWORD_ENV, check_credential, remember, url_credentials, wire_forms
from odqa.core.secrets import scrub as scrub_known
from odqa.core.types import Passage

log = logging.getLogger(__name__)

FORMAT = "odqa-elastic-1"
SIMILARITIES = ("dot_product", "cosine")
SOURCE_FIELDS = ["row", "title", "text", "doc_id", "start", "end"]
DEFAULT_TITLE_BOOST = 0.5
RRF_MIN_VERSION = (8, 14)  # the `retriever` search API (with `rrf`) appeared in 8.14


# ---------------------------------------------------------------- connection and error messages


def parse_hosts(hosts: str | Sequence[str]) -> list[str]:
    items = hosts.split(",") if isinstance(hosts, str) else list(hosts)
    return [h.strip() for h in items if h and h.strip()]


def redact_url(url: str) -> str:
    """A host URL without user:password@."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:
        return "<unparseable host>"
    netloc = parts.hostname or ""
    port = _port_text(parts)
    if port:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _port_text(parts) -> str:
    """The port as written after the host (never the credentials before it), valid or not."""
    host_port = parts.netloc.rpartition("@")[2]
    return host_port.rpartition(":")[2] if ":" in host_port.rpartition("]")[2] else ""


def check_hosts(hosts: Sequence[str]) -> None:
    """Refuse, in one line naming the host without its credentials, a host URL whose port is not a number from
    1 to 65535 or that names no host, before any client is made."""
    for url in hosts:
        try:
            parts = urlsplit(url if "://" in url else f"http://{url}")
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or port == 0 or (_port_text(parts) and port is None):
            raise OdqaError(f"Elasticsearch host {redact_url(url)}: the port must be a number from 1 to 65535 "
                            "(e.g. http://127.0.0.1:9200)")
        if not parts.hostname:
            raise OdqaError(f"Elasticsearch host {redact_url(url)} names no host; write it like http://127.0.0.1:9200")


def describe_hosts(hosts: str | Sequence[str]) -> str:
    return ", ".join(redact_url(h) for h in parse_hosts(hosts)) or "(no hosts)"


LOCATION_SCHEMES = {"es": "http", "es+http": "http", "es+https": "https"}


def parse_location(location: str) -> tuple[str, str]:
    """(hosts, index name) of an index location `es://host:9200/name` (`es+https://` for TLS; several hosts:
    `es://h1:9200,h2:9200/name`; credentials as in any URL, `es://user:password@host`). An empty part means
    "the [elastic] section's": `es://` alone names its hosts and index name."""
    scheme, sep, rest = str(location).partition("://")
    if not sep or scheme.lower() not in LOCATION_SCHEMES:
        raise OdqaError("an Elasticsearch index location looks like es://HOST:9200/INDEX_NAME (es+https:// for TLS)")
    netloc, _, path = rest.partition("/")
    name = path.strip("/")
    hosts = ",".join(f"{LOCATION_SCHEMES[scheme.lower()]}://{h.strip()}" for h in netloc.split(",") if h.strip())
    if "/" in name or "?" in name or "#" in name:
        raise OdqaError(f"Elasticsearch index name {name!r} (of an es:// index location) holds '/', '?' or '#'; "
                        "write es://HOST:9200/INDEX_NAME")
    return hosts, name


def settings_for(location: str, elastic):
    """[elastic] settings (an ElasticConfig) with the hosts and index name that an es:// location names."""
    import dataclasses

    hosts, name = parse_location(location)
    return dataclasses.replace(elastic, hosts=hosts or elastic.hosts, index_name=name or elastic.index_name)


def credentials(config) -> tuple[str, str, str]:
    """(api key, user, password) of an ElasticConfig, the environment's where the config has none, each checked
    (odqa.core.secrets.check_credential) before any request and remembered for scrubbing."""
    api_key = config.api_key or os.environ.get(API_KEY_ENV, "")
    password = config.password or os.environ.get(PASSWORD_ENV, "")
    check_credential("elastic.api_key" if config.api_key else API_KEY_ENV, api_key)
    check_credential("elastic.password" if config.password else PASSWORD_ENV, password, ascii_only=False)
    check_credential("elastic.username", config.username, ascii_only=False)
    for host in parse_hosts(config.hosts):
        user, secret = url_credentials(host)
        check_credential("the user in an elastic.hosts URL", user)
        check_credential("the password in an elastic.hosts URL", secret)
    remember(*_secrets(config))
    return api_key, config.username, password


def _secrets(config) -> list[str]:
    """Every form the config's credentials can take on the wire (odqa.core.secrets.wire_forms)."""
    passwords = [config.password, os.environ.get(PASSWORD_ENV, "")]
    users = [config.username or ""]
    for host in parse_hosts(config.hosts):
        user, password = url_credentials(host)
        passwords.append(password)
        users.append(user)
    keys = [config.api_key, os.environ.get(API_KEY_ENV, "")]
    return sorted(wire_forms(passwords, users, keys), key=len, reverse=True)


def scrub(text: str, secrets: Sequence[str]) -> str:
    return scrub_known(text, secrets)


def connect(config, *, request_timeout: float = 30.0, check: bool = True):
    """An Elasticsearch client for an ElasticConfig ([elastic] section); with `check`, fail early and clearly."""
    from elasticsearch import Elasticsearch

    hosts = parse_hosts(config.hosts)
    if not hosts:
        raise OdqaError("no Elasticsearch hosts configured; set elastic.hosts (e.g. http://127.0.0.1:9200)")
    check_hosts(hosts)
    kwargs: dict[str, Any] = {"hosts": hosts, "request_timeout": request_timeout, "verify_certs": config.verify_certs}
    api_key, _, password = credentials(config)
    if api_key:
        kwargs["api_key"] = api_key
    elif config.username:
        kwargs["basic_auth"] = (config.username, password)
    if config.ca_certs:
        if not Path(config.ca_certs).is_file():
            raise OdqaError(f"elastic.ca_certs: no CA bundle at {config.ca_certs}")
        kwargs["ca_certs"] = config.ca_certs
    if not config.verify_certs:
        kwargs["ssl_show_warn"] = False
        log.warning("TLS certificate verification is off for %s (elastic.verify_certs = false)", describe_hosts(hosts))
    try:
        client = Elasticsearch(**kwargs)
    except ValueError as exc:  # malformed host URL; its text may hold the URL, so it is not echoed
        raise OdqaError(f"elastic.hosts is not a list of URLs like http://127.0.0.1:9200 (got {describe_hosts(hosts)})") from None
    if check:
        call(lambda: client.options(max_retries=1, request_timeout=min(request_timeout, 10.0)).info(),
             hosts, "connecting", _secrets(config))
    return client


def call(fn: Callable[[], Any], hosts, what: str, secrets: Sequence[str] = ()):
    """Run one client call; turn the client's exceptions into one-line OdqaErrors without credentials."""
    try:
        result = fn()
    except Exception as exc:
        error = translate_error(exc, hosts, what, secrets)
        if error is None:
            raise
        raise error from None
    return require_json(result, hosts, what, secrets)


def require_json(result, hosts, what: str, secrets: Sequence[str] = ()):
    """`result` unless it is a text answer where Elasticsearch answers JSON (an HTML page from a proxy or
    another service at that address): the client hands those over as text, which fails later as a traceback."""
    import elastic_transport

    if isinstance(result, elastic_transport.TextApiResponse):
        raise not_json_error(hosts, what, str(result.body), secrets)
    return result


def not_json_error(hosts, what: str, text: str, secrets: Sequence[str] = ()) -> OdqaError:
    snippet = " ".join(text.split())[:80]
    return OdqaError(scrub(f"the server at {describe_hosts(hosts)} answered {what} with something that is not "
                           f"Elasticsearch JSON ({snippet!r}); is a proxy or another service at that address? "
                           "check elastic.hosts / --hosts", secrets))


def translate_error(exc: BaseException, hosts, what: str, secrets: Sequence[str] = ()) -> OdqaError | None:
    import elastic_transport
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException, UnsupportedProductError

    where = describe_hosts(hosts)
    if isinstance(exc, AuthenticationException):
        return OdqaError(
            f"Elasticsearch at {where} rejected the credentials (HTTP 401) while {what}; check elastic.api_key, or "
            "elastic.username and elastic.password (or the ODQA_ES_API_KEY / ODQA_ES_PASSWORD environment variables)"
        )
    if isinstance(exc, AuthorizationException):
        return OdqaError(
            f"Elasticsearch at {where} refused the request (HTTP 403) while {what}: the user or API key lacks the "
            "privileges (it needs create_index, write and read on the index)"
        )
    if isinstance(exc, UnsupportedProductError):
        return OdqaError(f"the server at {where} is not Elasticsearch (or not a supported version) while {what}")
    if isinstance(exc, elastic_transport.TlsError):
        return OdqaError(
            f"TLS verification of {where} failed while {what}; set elastic.ca_certs to the cluster's CA certificate "
            "(or, for a throw-away test cluster only, elastic.verify_certs = false)"
        )
    if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)):
        return OdqaError(
            f"cannot reach Elasticsearch at {where} while {what} ({exc.__class__.__name__}); start the server or "
            "fix elastic.hosts / --hosts"
        )
    if isinstance(exc, ApiError):
        return OdqaError(scrub(f"Elasticsearch at {where} answered HTTP {exc.status_code} while {what}: {_reason(exc)}", secrets))
    if isinstance(exc, elastic_transport.SerializationError):  # labelled JSON, but is not
        return not_json_error(hosts, what, str(exc).removeprefix("Unable to deserialize as JSON: "), secrets)
    return None


class SearchFailed(OdqaError):
    """One search of a multi-search failed on the server."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


def _auth_error(exc) -> bool:
    from elasticsearch import AuthenticationException

    if isinstance(exc, AuthenticationException):
        return True
    body = getattr(exc, "body", None)
    return isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("type") == "security_exception" \
        and "license" not in str(body["error"].get("reason", ""))


def _reason(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        root = (err.get("root_cause") or [{}])[0]
        return f"{err.get('type', '')}: {root.get('reason') or err.get('reason', '')}"
    return str(getattr(exc, "message", "") or exc.__class__.__name__)


def _retryable(exc: BaseException) -> bool:
    import elastic_transport
    from elasticsearch import ApiError

    if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)):
        return not isinstance(exc, elastic_transport.TlsError)
    return isinstance(exc, ApiError) and exc.status_code in (429, 502, 503, 504)


def _version(info: dict) -> tuple[int, ...]:
    number = str(info.get("version", {}).get("number", "0"))
    out = []
    for part in number.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


# ---------------------------------------------------------------- the index


def mapping(dim: int, analyzer: str = "english", similarity: str = "dot_product", hnsw_m: int = 16,
            ef_construction: int = 100, meta: dict | None = None, knn_type: str = "hnsw") -> dict:
    if similarity not in SIMILARITIES:
        raise OdqaError(f"unknown vector similarity {similarity!r}; use {' or '.join(SIMILARITIES)}")
    properties: dict[str, Any] = {
        "row": {"type": "integer"},
        "title": {"type": "text", "analyzer": analyzer},
        "text": {"type": "text", "analyzer": analyzer},
        "doc_id": {"type": "keyword"},
        "start": {"type": "integer", "index": False},
        "end": {"type": "integer", "index": False},
    }
    if dim:
        properties["vector"] = {
            "type": "dense_vector", "dims": int(dim), "index": True, "similarity": similarity,
            "index_options": {"type": knn_type, "m": int(hnsw_m), "ef_construction": int(ef_construction)},
        }
    return {"dynamic": "strict", "_meta": meta or {}, "properties": properties}


@dataclass
class BulkReport:
    total: int = 0  # documents the source holds
    skipped: int = 0  # committed by an earlier run, not sent again (contiguous prefix)
    sent: int = 0
    created: int = 0
    already_present: int = 0  # create conflicts (409): committed earlier
    rejected: int = 0  # 429 rejections seen (each retried)
    retries: int = 0  # bulk requests retried after a lost connection or a 429/5xx answer
    failed: int = 0  # items refused for good (mapping errors and the like)
    errors: list[str] = field(default_factory=list)  # the first few failures
    last_row: int = -1  # last row of the last committed chunk
    last_id: str = ""
    seconds: float = 0.0
    count: int = 0  # documents in the index at the end
    resent: int = 0  # missing from the index after the load (acknowledged, then lost) and sent again

    @property
    def per_second(self) -> float:
        return (self.created + self.already_present) / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        text = (f"{self.count} documents in the index: {self.created} created, {self.skipped} skipped (already "
                f"committed), {self.already_present} already present; {self.rejected} rejections and {self.retries} "
                f"retries; {self.failed} failed; {self.resent} re-sent as missing; {self.per_second:.0f} docs/s")
        if self.errors:
            text += "\nfirst failures:\n  " + "\n  ".join(self.errors)
        return text

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {**asdict(self), "per_second": round(self.per_second, 1)}


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
    def open(cls, config, name: str | None = None, check: bool = True) -> "ElasticIndex":
        client = connect(config, check=check)
        return cls(client, name or config.index_name, config.hosts, _secrets(config))

    def _call(self, fn: Callable[[], Any], what: str):
        return call(fn, self.hosts, what, self.secrets)

    # -------------------------------------------------- state

    def exists(self) -> bool:
        return bool(self._call(lambda: self.client.indices.exists(index=self.name), f"looking for index {self.name!r}"))

    def require(self) -> "ElasticIndex":
        if not self.exists():
            raise OdqaError(
                f"Elasticsearch at {describe_hosts(self.hosts)} has no index {self.name!r}; load one with "
                f"`odqa es-index --index INDEX_FOLDER --index-name {self.name}`"
            )
        return self

    @property
    def meta(self) -> dict:
        if self._meta is None:
            result = self._call(lambda: self.client.indices.get_mapping(index=self.name), f"reading the mapping of {self.name!r}")
            body = dict(result)
            first = next(iter(body.values()), {}) if body else {}
            self._meta = dict(first.get("mappings", {}).get("_meta", {}) or {})
        return self._meta

    @property
    def dim(self) -> int:
        return int(self.meta.get("dim", 0))

    @property
    def similarity(self) -> str:
        return str(self.meta.get("similarity", "dot_product"))

    def create(self, meta: dict, dim: int, analyzer: str = "english", similarity: str = "dot_product",
               shards: int = 1, replicas: int = 1, hnsw_m: int = 16, ef_construction: int = 100,
               knn_type: str = "hnsw") -> None:
        meta = {"format": FORMAT, **meta, "dim": int(dim), "similarity": similarity, "analyzer": analyzer}
        body = mapping(dim, analyzer, similarity, hnsw_m, ef_construction, meta, knn_type)
        settings = {"number_of_shards": int(shards), "number_of_replicas": int(replicas)}
        self._call(lambda: self.client.indices.create(index=self.name, settings=settings, mappings=body),
                   f"creating index {self.name!r}")
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

    def max_row(self) -> int:
        """Highest committed row (after a refresh), -1 when empty."""
        self.refresh()
        result = self._call(lambda: self.client.search(index=self.name, size=0, aggs={"max_row": {"max": {"field": "row"}}}),
                            f"reading the last row of {self.name!r}")
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
        if dim and self.dim and dim != self.dim:
            raise IndexMismatchError(f"{where} holds {self.dim}-d vectors, not {dim}-d; rebuild it with --recreate")
        if encoder and meta.get("encoder") and encoder.rstrip("/").lower() != str(meta["encoder"]).rstrip("/").lower():
            raise IndexMismatchError(
                f"{where} was encoded with {meta['encoder']!r}, not {encoder!r}; query with the same encoder"
            )

    def set_settings(self, settings: dict) -> None:
        self._call(lambda: self.client.indices.put_settings(index=self.name, settings=settings),
                   f"changing the settings of {self.name!r}")

    def get_setting(self, name: str) -> Any:
        result = dict(self._call(lambda: self.client.indices.get_settings(index=self.name), f"reading settings of {self.name!r}"))
        node: Any = next(iter(result.values()), {}).get("settings", {}).get("index", {})
        return node.get(name)

    # -------------------------------------------------- search

    def _msearch(self, bodies: list[dict], what: str, batch: int = 64, translate: bool = True) -> list[list[dict]]:
        out: list[list[dict]] = []
        for start in range(0, len(bodies), batch):
            searches: list[dict] = []
            for body in bodies[start : start + batch]:
                searches.extend([{"index": self.name}, body])
            if translate:
                result = self._call(lambda: self.client.msearch(searches=searches), what)
            else:
                result = require_json(self.client.msearch(searches=searches), self.hosts, what, self.secrets)
            for response in result["responses"]:
                if "error" in response:
                    error = response["error"] if isinstance(response["error"], dict) else {"reason": str(response["error"])}
                    root = (error.get("root_cause") or [{}])[0]
                    raise SearchFailed(
                        scrub(f"Elasticsearch index {self.name!r} failed a {what} search: {error.get('type', '')}: "
                              f"{root.get('reason') or error.get('reason', '')}", self.secrets),
                        status=int(response.get("status", 500)))
                out.append([
                    {"id": h["_id"], "row": int(h["_source"].get("row", -1)), "score": float(h["_score"] or 0.0), "source": h["_source"]}
                    for h in response["hits"]["hits"]
                ])
        return out

    def article_passages(self, doc_id: str, limit: int, source: Sequence[str] = SOURCE_FIELDS) -> list[dict]:
        """The first `limit` passages of one article (`doc_id`), in row order (the entity bonus's candidates)."""
        body = {"query": {"term": {"doc_id": str(doc_id)}}, "sort": [{"row": "asc"}], "size": int(limit),
                "_source": list(source)}
        return self._msearch([body], "article passages")[0]

    @staticmethod
    def bm25_query(question: str, title_boost: float = DEFAULT_TITLE_BOOST) -> dict:
        if title_boost > 0:
            return {"multi_match": {"query": question, "fields": ["text", f"title^{title_boost:g}"], "type": "most_fields"}}
        return {"match": {"text": question}}

    def _knn(self, vector: np.ndarray, k: int, num_candidates: int) -> dict:
        return {"field": "vector", "query_vector": [float(x) for x in vector], "k": int(k),
                "num_candidates": int(max(num_candidates, k))}

    def search_bm25(self, questions: Sequence[str], k: int, title_boost: float = DEFAULT_TITLE_BOOST,
                    source: Sequence[str] = SOURCE_FIELDS) -> list[list[dict]]:
        bodies = [{"query": self.bm25_query(q, title_boost), "size": k, "_source": list(source)} for q in questions]
        return self._msearch(bodies, "BM25")

    def search_knn(self, vectors: np.ndarray, k: int, num_candidates: int = 100,
                   source: Sequence[str] = SOURCE_FIELDS) -> list[list[dict]]:
        self._require_vectors()
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
            version = _version(dict(info))
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

    def search_rrf(self, questions: Sequence[str], vectors: np.ndarray, k: int, window: int = 100, rank_constant: int = 60,
                   num_candidates: int = 100, title_boost: float = DEFAULT_TITLE_BOOST,
                   source: Sequence[str] = SOURCE_FIELDS) -> list[list[dict]] | None:
        """Server-side RRF of BM25 and kNN; None when the server cannot (the caller then fuses client-side)."""
        from elasticsearch import ApiError

        self._require_vectors()
        if not self.supports_rrf():
            return None
        vectors = self.prepare_vectors(vectors)
        window = max(window, k)
        bodies = [{
            "retriever": {"rrf": {
                "retrievers": [{"standard": {"query": self.bm25_query(q, title_boost)}},
                               {"knn": self._knn(v, window, num_candidates)}],
                "rank_window_size": int(window), "rank_constant": int(rank_constant)}},
            "size": k, "_source": list(source),
        } for q, v in zip(questions, vectors)]
        try:
            return self._msearch(bodies, "RRF", translate=False)
        except SearchFailed as exc:
            if exc.status in (400, 403):
                self._no_rrf(f"HTTP {exc.status}: {exc}")
                return None
            raise
        except ApiError as exc:
            if exc.status_code in (400, 403) and not _auth_error(exc):
                self._no_rrf(f"HTTP {exc.status_code}: {_reason(exc)}")
                return None
            raise translate_error(exc, self.hosts, "an RRF search", self.secrets) from None
        except Exception as exc:
            error = translate_error(exc, self.hosts, "an RRF search", self.secrets)
            if error is None:
                raise
            raise error from None

    def _require_vectors(self) -> None:
        if not self.dim:
            raise OdqaError(f"Elasticsearch index {self.name!r} holds no vectors (loaded from a BM25-only index); "
                            "use --retriever bm25, or load an index folder built with --backends bm25,dense")

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
    return Passage(id=hit["id"], title=s.get("title", ""), text=s.get("text", ""), doc_id=s.get("doc_id", ""),
                   start=int(s.get("start", 0) or 0), end=int(s.get("end", 0) or 0))


class ElasticArticlePassages:
    """`ArticlePassages` (odqa.core.protocols) of an Elasticsearch passage index: an article's passages by a
    `doc_id` term query sorted by row, so the entity bonus gets the very passages, rows and order an index
    folder's store gives (`es-index` loads each passage with its store row and doc_id). One query per article,
    remembered."""

    def __init__(self, index: "ElasticIndex"):
        self.index = index
        self._articles: dict[tuple[str, int], list[tuple[int, Passage]]] = {}

    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        key = (str(doc_id), int(limit))
        if key not in self._articles:
            self._articles[key] = [(hit["row"], passage_of(hit)) for hit in self.index.article_passages(*key)]
        return self._articles[key]


# ---------------------------------------------------------------- bulk loading


MAX_BACKOFF = 30.0  # seconds


@dataclass
class BulkOptions:
    # the metadata's help is the `es-index` command's (odqa.commands.options)
    chunk_size: int = field(default=500, metadata={"help": "documents per bulk request"})
    max_retries: int = field(default=5, metadata={"help": "retries of a failed bulk request or rejected documents"})
    initial_backoff: float = field(default=1.0, metadata={
        "help": f"first retry wait in seconds (doubles each retry, max {MAX_BACKOFF:g})"})
    max_backoff: float = MAX_BACKOFF
    request_timeout: float = 120.0
    progress: bool = field(default=True, metadata={"help": "progress bar"})
    on_chunk: Callable[[BulkReport], None] | None = None  # called after each committed chunk (tests use it)


Doc = tuple[int, str, dict]  # (row, _id, _source)


def bulk_load(index: ElasticIndex, docs: Callable[[int], Iterator[Doc]], total: int,
              options: BulkOptions | None = None) -> BulkReport:
    """Send docs (`docs(start_row)` yields rows start_row.. in order) to an existing index, resuming after the
    contiguous prefix already committed. Refresh is switched off during the load and restored after."""
    from tqdm.auto import tqdm

    options = options or BulkOptions()
    report = BulkReport(total=total)
    count = index.count(refresh=True)
    max_row = index.max_row() if count else -1
    start = max_row + 1 if count and count == max_row + 1 else 0
    report.skipped = start
    if start:
        report.last_row = start - 1
        log.info("resuming %s after row %d (%d documents already committed)", index.name, start - 1, count)
    old_refresh = index.get_setting("refresh_interval")
    if str(old_refresh) == "-1":  # left behind by an interrupted load: restore the cluster default afterwards
        old_refresh = None
    began = time.perf_counter()
    bar = tqdm(total=total, initial=start, desc=f"es-index {index.name}", unit=" doc", disable=not options.progress, mininterval=2)
    bulk_client = index.client.options(max_retries=0, request_timeout=options.request_timeout)
    try:
        if start < total:
            index.set_settings({"refresh_interval": "-1"})
        chunk: list[Doc] = []
        for doc in docs(start):
            chunk.append(doc)
            if len(chunk) >= options.chunk_size:
                _send_chunk(index, bulk_client, chunk, report, options)
                bar.update(len(chunk))
                chunk = []
        if chunk:
            _send_chunk(index, bulk_client, chunk, report, options)
            bar.update(len(chunk))
    finally:
        bar.close()
        report.seconds = time.perf_counter() - began
        try:
            index.set_settings({"refresh_interval": old_refresh})  # None restores the cluster default
        except OdqaError:
            pass  # the server is gone; the error being raised says so
    report.count = index.count(refresh=True)
    if report.count < total:
        _resend_missing(index, docs, total, report, options)
    return report


def _count_rows(index: ElasticIndex, lo: int, hi: int) -> int:
    query = {"range": {"row": {"gte": lo, "lt": hi}}}
    return int(index._call(lambda: index.client.count(index=index.name, query=query), f"counting {index.name!r}")["count"])


def missing_rows(index: ElasticIndex, lo: int, hi: int, leaf: int = 1000) -> list[int]:
    """Rows in [lo, hi) absent from the index: ranges whose count falls short are halved down to `leaf` rows,
    whose present rows are then listed."""
    if hi <= lo or _count_rows(index, lo, hi) == hi - lo:
        return []
    if hi - lo > leaf:
        mid = (lo + hi) // 2
        return missing_rows(index, lo, mid, leaf) + missing_rows(index, mid, hi, leaf)
    result = index._call(lambda: index.client.search(index=index.name, size=hi - lo, source=["row"],
                                                     query={"range": {"row": {"gte": lo, "lt": hi}}}),
                         f"listing rows of {index.name!r}")
    present = {int(h["_source"]["row"]) for h in result["hits"]["hits"]}
    return [row for row in range(lo, hi) if row not in present]


def _resend_missing(index: ElasticIndex, docs: Callable[[int], Iterator[Doc]], total: int, report: BulkReport,
                    options: BulkOptions) -> None:
    """The final count fell short (a server that restarted inside a retry wait loses what it had acknowledged
    but not saved): send the missing rows again, then refuse to report success if any are still absent."""
    index.refresh()
    missing = missing_rows(index, 0, total)
    if missing:
        log.warning("%d of %d documents are missing from %s after the load; sending them again", len(missing),
                    total, index.name)
        wanted = set(missing)
        chunk: list[Doc] = []
        for doc in docs(missing[0]):
            if doc[0] in wanted:
                chunk.append(doc)
            if len(chunk) >= options.chunk_size or (chunk and doc[0] >= missing[-1]):
                _send_chunk(index, index.client.options(max_retries=0, request_timeout=options.request_timeout),
                            chunk, report, options)
                chunk = []
            if doc[0] >= missing[-1]:
                break
        report.resent = len(missing)
    report.count = index.count(refresh=True)
    if report.count < total:
        raise OdqaError(
            f"Elasticsearch index {index.name!r} holds {report.count} of {total} documents after the load "
            f"({report.resent} missing ones sent again, {report.failed} refused"
            + (f"; first refusal: {report.errors[0]}" if report.errors else "")
            + "); rerun the same command to send what is missing, and check the cluster's health and logs"
        )


def _backoff(attempt: int, options: BulkOptions) -> float:
    return min(options.max_backoff, options.initial_backoff * 2 ** (attempt - 1))


def _send_chunk(index: ElasticIndex, client, chunk: list[Doc], report: BulkReport, options: BulkOptions) -> None:
    pending = list(chunk)
    attempt = 0
    while pending:
        operations: list[dict] = []
        for _, doc_id, source in pending:
            operations.extend([{"create": {"_index": index.name, "_id": doc_id}}, source])
        try:
            result = require_json(client.bulk(operations=operations), index.hosts, "a bulk request", index.secrets)
        except OdqaError:
            raise
        except Exception as exc:
            if not _retryable(exc):
                error = translate_error(exc, index.hosts, "bulk indexing", index.secrets)
                if error is None:
                    raise
                raise error from None
            attempt += 1
            report.retries += 1
            if attempt > options.max_retries:
                raise _interrupted(index, report, exc, options) from None
            wait = _backoff(attempt, options)
            log.warning("bulk request to %s failed (%s); retry %d/%d in %.1f s", describe_hosts(index.hosts),
                        exc.__class__.__name__, attempt, options.max_retries, wait)
            time.sleep(wait)
            continue
        report.sent += len(pending)
        retry: list[Doc] = []
        for doc, item in zip(pending, result["items"]):
            outcome = next(iter(item.values()))
            status = int(outcome.get("status", 500))
            if 200 <= status < 300:
                report.created += 1
            elif status == 409:
                report.already_present += 1
            elif status in (429, 503):
                report.rejected += 1
                retry.append(doc)
            else:
                report.failed += 1
                if len(report.errors) < 10:
                    err = outcome.get("error", {})
                    report.errors.append(scrub(f"{doc[1]}: {err.get('type', status)}: {err.get('reason', '')}"[:300], index.secrets))
        if retry:
            attempt += 1
            if attempt > options.max_retries:
                report.failed += len(retry)
                if len(report.errors) < 10:
                    report.errors.append(f"{len(retry)} documents still rejected (HTTP 429) after {options.max_retries} retries")
                break
            wait = _backoff(attempt, options)
            log.warning("%d documents rejected by %s (queue full); retry %d/%d in %.1f s", len(retry),
                        describe_hosts(index.hosts), attempt, options.max_retries, wait)
            time.sleep(wait)
        pending = retry
    report.last_row, report.last_id = chunk[-1][0], chunk[-1][1]
    if options.on_chunk is not None:
        options.on_chunk(report)


def _interrupted(index: ElasticIndex, report: BulkReport, exc: BaseException, options: BulkOptions) -> OdqaError:
    last = (f"the last committed passage is {report.last_id!r} (row {report.last_row})" if report.last_row >= 0
            else "no passage was committed")
    return OdqaError(
        f"lost Elasticsearch at {describe_hosts(index.hosts)} during bulk indexing ({exc.__class__.__name__}"
        f"{f' HTTP {exc.status_code}' if getattr(exc, 'status_code', None) else ''}; gave up "
        f"after {options.max_retries} retries); {last}; rerun the same command to resume from there"
    )


# ---------------------------------------------------------------- source: an index folder (a KB: linker/elastic.py)


def passage_docs(bundle_path: str | Path, limit: int | None = None, with_vectors: bool = True):
    """(total, docs(start), meta, dim) for an odqa index folder: passages plus dense/embeddings.npy if present."""
    from odqa.corpus.store import DATA_FILE, PassageStore  # datasets/pyarrow: only when loading passages

    bundle_path = Path(bundle_path)
    layout = IndexLayout(bundle_path)
    manifest = Manifest.load(bundle_path, kind="bundle")
    check_bundle_manifest(manifest, bundle_path)
    parts = manifest.params.get("parts", {})
    check_part(layout.passages, parts.get(PASSAGES), rows=None)
    store = PassageStore.open(layout.passages)
    check = file_check(layout.passages, parts.get(PASSAGES), DATA_FILE, store.byte_reader())
    if check is not None:
        store.verify_with(check)  # what is uploaded is checked as what is served
    embeddings = None
    encoder = ""
    if with_vectors and layout.embeddings.exists():
        dense = Manifest.load(layout.dense, kind="faiss")
        dense.check_corpus(manifest.corpus_fingerprint, where=str(layout.dense))
        check_part(layout.dense, parts.get(DENSE), rows=None)
        with layout.embeddings.open("rb") as f:
            vectors_check = file_check(layout.dense, parts.get(DENSE), EMBEDDINGS, file_reader(f))
            if vectors_check is not None:
                vectors_check.whole()
        embeddings = np.load(layout.embeddings, mmap_mode="r")
        if embeddings.shape[0] != len(store):
            raise IndexMismatchError(f"{bundle_path}: {len(store)} passages but {embeddings.shape[0]} vectors; rebuild the index")
        encoder = dense.encoder
        encoding = {"query_encoder": dense.params.get("query_encoder", encoder),
                    "encoder_settings": dense.params.get("encoder_settings", {}),
                    "max_length": dense.params.get("max_length", 0)}
    total = len(store) if limit is None else min(limit, len(store))
    dim = int(embeddings.shape[1]) if embeddings is not None else 0
    fingerprint = manifest.corpus_fingerprint + (f"/first{total}" if total < len(store) else "")
    meta = {"corpus_fingerprint": fingerprint, "encoder": encoder, "count": total, "source": str(bundle_path),
            **(encoding if embeddings is not None else {})}

    def docs(start: int, batch: int = 2000) -> Iterator[Doc]:
        for lo in range(start, total, batch):
            hi = min(total, lo + batch)
            rows = store.dataset[lo:hi]
            vectors = unit_rows(np.asarray(embeddings[lo:hi], dtype=np.float32)) if embeddings is not None else None
            for i in range(hi - lo):
                source = {"row": lo + i, "title": rows["title"][i], "text": rows["text"][i], "doc_id": rows["doc_id"][i],
                          "start": int(rows["start"][i]), "end": int(rows["end"][i])}
                if vectors is not None:
                    source["vector"] = vectors[i].tolist()
                yield lo + i, rows["id"][i], source

    return total, docs, meta, dim


def load_passages(index: ElasticIndex, bundle_path: str | Path, *, recreate: bool = False, limit: int | None = None,
                  with_vectors: bool = True, analyzer: str = "english", similarity: str = "dot_product",
                  shards: int | None = 1, replicas: int = 1, hnsw_m: int = 16, ef_construction: int = 100,
                  options: BulkOptions | None = None, knn_type: str | None = "hnsw") -> BulkReport:
    """Create (or reuse and check) the index, then bulk-load an odqa index folder into it, resumably. `shards`
    or `knn_type` None: picked from the corpus size (indexes.elastic_capacity.plan_elastic)."""
    total, docs, meta, dim = passage_docs(bundle_path, limit, with_vectors)
    if recreate:
        index.delete()
    if index.exists():
        index.check(fingerprint=meta["corpus_fingerprint"], dim=dim)
        if dim and not index.dim:
            raise IndexMismatchError(f"Elasticsearch index {index.name!r} was created without vectors; pass --recreate")
    else:
        from odqa.indexes.elastic_capacity import plan_elastic

        plan = plan_elastic(total, dim, shards=shards, knn_type=knn_type)
        log.info("creating %s for %s", index.name, plan.summary())
        index.create(meta, dim, analyzer=analyzer, similarity=similarity, shards=plan.shards, replicas=replicas,
                     hnsw_m=hnsw_m, ef_construction=ef_construction, knn_type=plan.knn_type)
    return bulk_load(index, docs, total, options)
