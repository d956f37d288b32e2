"""Loading Elasticsearch: an index folder's passages (and vectors) bulk-loaded into an Elasticsearch index,
resumably (a knowledge base: linker/elastic.py).

Bulk loading (`bulk_load`) sends fixed-size chunks with the `create` op type: a chunk is committed once its
bulk request is acknowledged, item by item. Rejected items (HTTP 429: the cluster's write queue is full) are
retried with exponential backoff and counted; a lost connection is retried likewise, and when the retries
run out the load stops with an OdqaError naming the last committed passage. A rerun resumes: it skips the
contiguous prefix of rows already present (found with a max aggregation on `row`) and counts any `create`
conflict (409) as already present, so nothing is indexed twice. The chunks go through `client.bulk`
directly rather than `helpers.streaming_bulk`, which hides both the per-chunk commit point and the number of
rejections.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.indexes.elastic import ElasticIndex, unit_rows
from odqa.indexes.elastic_connection import describe_hosts, require_json, retryable, scrub, translate_error
from odqa.indexes.integrity import check_bundle_manifest, check_part, check_shard, file_check, file_reader
from odqa.indexes.layout import DENSE, EMBEDDINGS, PASSAGES, SHARD_RECORDS, SHARDS, IndexLayout
from odqa.indexes.manifest import Manifest

log = logging.getLogger(__name__)


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
        text = (
            f"{self.count} documents in the index: {self.created} created, {self.skipped} skipped (already "
            f"committed), {self.already_present} already present; {self.rejected} rejections and {self.retries} "
            f"retries; {self.failed} failed; {self.resent} re-sent as missing; {self.per_second:.0f} docs/s"
        )
        if self.errors:
            text += "\nfirst failures:\n  " + "\n  ".join(self.errors)
        return text

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {**asdict(self), "per_second": round(self.per_second, 1)}


MAX_BACKOFF = 30.0  # seconds


@dataclass
class BulkOptions:
    # the metadata's help is the `es-index` command's (odqa.commands.options)
    chunk_size: int = field(default=500, metadata={"help": "documents per bulk request"})
    max_retries: int = field(default=5, metadata={"help": "retries of a failed bulk request or rejected documents"})
    initial_backoff: float = field(
        default=1.0, metadata={"help": f"first retry wait in seconds (doubles each retry, max {MAX_BACKOFF:g})"}
    )
    max_backoff: float = MAX_BACKOFF
    request_timeout: float = 120.0
    progress: bool = field(default=True, metadata={"help": "progress bar"})
    parallel: int = field(
        default=1,
        metadata={
            "help": "bulk loaders at once, each sending its own range of rows (of a sharded index, its shards; "
            "else equal parts), each resumed on its own; 1: one after another"
        },
    )
    on_chunk: Callable[[BulkReport], None] | None = None  # called after each committed chunk (tests use it)


Doc = tuple[int, str, dict]  # (row, _id, _source)


def bulk_load(
    index: ElasticIndex, docs: Callable[[int], Iterator[Doc]], total: int, options: BulkOptions | None = None
) -> BulkReport:
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
    bar = tqdm(
        total=total,
        initial=start,
        desc=f"es-index {index.name}",
        unit=" doc",
        disable=not options.progress,
        mininterval=2,
    )
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


def bulk_load_ranges(
    index: ElasticIndex,
    docs: Callable[[int], Iterator[Doc]],
    total: int,
    ranges: list[tuple[int, int]],
    options: BulkOptions | None = None,
) -> BulkReport:
    """`bulk_load` with `options.parallel` loaders at once, each sending one of `ranges` (rows [start, end), in
    order, covering 0..total) and resuming after the rows of its range already committed; refresh is switched off
    once for all of them. A loader that fails stops the others after their current chunk; the error names the
    loader's last committed passage, and a rerun resumes every range."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    options = options or BulkOptions()
    old_refresh = index.get_setting("refresh_interval")
    if str(old_refresh) == "-1":  # left behind by an interrupted load: restore the cluster default afterwards
        old_refresh = None
    stop = threading.Event()
    bar = tqdm(total=total, desc=f"es-index {index.name}", unit=" doc", disable=not options.progress, mininterval=2)
    began = time.perf_counter()
    reports: list[BulkReport] = []
    try:
        index.set_settings({"refresh_interval": "-1"})
        with ThreadPoolExecutor(max(1, options.parallel), thread_name_prefix="es-index") as pool:
            futures = [
                pool.submit(_load_range, index, docs, lo, min(hi, total), options, bar, stop)
                for lo, hi in ranges
                if lo < total
            ]
            failure: BaseException | None = None
            for future in futures:
                try:
                    reports.append(future.result())
                except BaseException as exc:  # every loader ends before the first failure is raised
                    stop.set()
                    failure = failure or exc
            if failure is not None:
                raise failure
    finally:
        bar.close()
        try:
            index.set_settings({"refresh_interval": old_refresh})
        except OdqaError:
            pass  # the server is gone; the error being raised says so
    report = _merged(reports, total)
    report.seconds = time.perf_counter() - began
    report.count = index.count(refresh=True)
    if report.count < total:
        _resend_missing(index, docs, total, report, options)
    return report


def _load_range(
    index: ElasticIndex,
    docs: Callable[[int], Iterator[Doc]],
    lo: int,
    hi: int,
    options: BulkOptions,
    bar,
    stop: threading.Event,
) -> BulkReport:
    report = BulkReport(total=hi - lo)
    count = _count_rows(index, lo, hi)
    top = index.max_row((lo, hi)) if count else -1
    start = top + 1 if count and count == top + 1 - lo else lo
    report.skipped = start - lo
    bar.update(start - lo)
    client = index.client.options(max_retries=0, request_timeout=options.request_timeout)
    chunk: list[Doc] = []
    for doc in docs(start):
        if doc[0] >= hi or stop.is_set():
            break
        chunk.append(doc)
        if len(chunk) >= options.chunk_size:
            _send_chunk(index, client, chunk, report, options)
            bar.update(len(chunk))
            chunk = []
    if chunk and not stop.is_set():
        _send_chunk(index, client, chunk, report, options)
        bar.update(len(chunk))
    return report


def _merged(reports: list[BulkReport], total: int) -> BulkReport:
    merged = BulkReport(total=total)
    for part in reports:
        for name in ("skipped", "sent", "created", "already_present", "rejected", "retries", "failed"):
            setattr(merged, name, getattr(merged, name) + getattr(part, name))
        merged.errors += part.errors[: max(0, 10 - len(merged.errors))]
        if part.last_row > merged.last_row:
            merged.last_row, merged.last_id = part.last_row, part.last_id
    return merged


def _count_rows(index: ElasticIndex, lo: int, hi: int) -> int:
    query = {"range": {"row": {"gte": lo, "lt": hi}}}
    return int(
        index._call(lambda: index.client.count(index=index.name, query=query), f"counting {index.name!r}")["count"]
    )


def missing_rows(index: ElasticIndex, lo: int, hi: int, leaf: int = 1000) -> list[int]:
    """Rows in [lo, hi) absent from the index: ranges whose count falls short are halved down to `leaf` rows,
    whose present rows are then listed."""
    if hi <= lo or _count_rows(index, lo, hi) == hi - lo:
        return []
    if hi - lo > leaf:
        mid = (lo + hi) // 2
        return missing_rows(index, lo, mid, leaf) + missing_rows(index, mid, hi, leaf)
    result = index._call(
        lambda: index.client.search(
            index=index.name, size=hi - lo, source=["row"], query={"range": {"row": {"gte": lo, "lt": hi}}}
        ),
        f"listing rows of {index.name!r}",
    )
    present = {int(h["_source"]["row"]) for h in result["hits"]["hits"]}
    return [row for row in range(lo, hi) if row not in present]


def _resend_missing(
    index: ElasticIndex, docs: Callable[[int], Iterator[Doc]], total: int, report: BulkReport, options: BulkOptions
) -> None:
    """The final count fell short (a server that restarted inside a retry wait loses what it had acknowledged
    but not saved): send the missing rows again, then refuse to report success if any are still absent."""
    index.refresh()
    missing = missing_rows(index, 0, total)
    if missing:
        log.warning(
            "%d of %d documents are missing from %s after the load; sending them again", len(missing), total, index.name
        )
        wanted = set(missing)
        chunk: list[Doc] = []
        for doc in docs(missing[0]):
            if doc[0] in wanted:
                chunk.append(doc)
            if len(chunk) >= options.chunk_size or (chunk and doc[0] >= missing[-1]):
                _send_chunk(
                    index,
                    index.client.options(max_retries=0, request_timeout=options.request_timeout),
                    chunk,
                    report,
                    options,
                )
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
            if not retryable(exc):
                error = translate_error(exc, index.hosts, "bulk indexing", index.secrets)
                if error is None:
                    raise
                raise error from None
            attempt += 1
            report.retries += 1
            if attempt > options.max_retries:
                raise _interrupted(index, report, exc, options) from None
            wait = _backoff(attempt, options)
            log.warning(
                "bulk request to %s failed (%s); retry %d/%d in %.1f s",
                describe_hosts(index.hosts),
                exc.__class__.__name__,
                attempt,
                options.max_retries,
                wait,
            )
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
                    report.errors.append(
                        scrub(f"{doc[1]}: {err.get('type', status)}: {err.get('reason', '')}"[:300], index.secrets)
                    )
        if retry:
            attempt += 1
            if attempt > options.max_retries:
                report.failed += len(retry)
                if len(report.errors) < 10:
                    report.errors.append(
                        f"{len(retry)} documents still rejected (HTTP 429) after {options.max_retries} retries"
                    )
                break
            wait = _backoff(attempt, options)
            log.warning(
                "%d documents rejected by %s (queue full); retry %d/%d in %.1f s",
                len(retry),
                describe_hosts(index.hosts),
                attempt,
                options.max_retries,
                wait,
            )
            time.sleep(wait)
        pending = retry
    report.last_row, report.last_id = chunk[-1][0], chunk[-1][1]
    if options.on_chunk is not None:
        options.on_chunk(report)


def _interrupted(index: ElasticIndex, report: BulkReport, exc: BaseException, options: BulkOptions) -> OdqaError:
    last = (
        f"the last committed passage is {report.last_id!r} (row {report.last_row})"
        if report.last_row >= 0
        else "no passage was committed"
    )
    status = getattr(exc, "status_code", None)
    return OdqaError(
        f"lost Elasticsearch at {describe_hosts(index.hosts)} during bulk indexing ({exc.__class__.__name__}"
        f"{f' HTTP {status}' if status else ''}; gave up "
        f"after {options.max_retries} retries); {last}; rerun the same command to resume from there"
    )


# ---------------------------------------------------------------- source: an index folder (a KB: linker/elastic.py)


def passage_docs(bundle_path: str | Path, limit: int | None = None, with_vectors: bool = True):
    """(total, docs(start), meta, dim) for an odqa index folder: passages plus dense/embeddings.npy if present; of
    a sharded index (`index --shards N` or `--ray`), every shard's in turn, numbered as the index numbers them."""
    from odqa.corpus.store import DATA_FILE, PassageStore  # datasets/pyarrow: only when loading passages

    bundle_path = Path(bundle_path)
    layout = IndexLayout(bundle_path)
    manifest = Manifest.load(bundle_path, kind="bundle")
    check_bundle_manifest(manifest, bundle_path)
    if manifest.params.get(SHARDS):
        return _sharded_passage_docs(bundle_path, manifest, limit, with_vectors)
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
            raise IndexMismatchError(
                f"{bundle_path}: {len(store)} passages but {embeddings.shape[0]} vectors; rebuild the index"
            )
        encoder = dense.encoder
        encoding = {
            "query_encoder": dense.params.get("query_encoder", encoder),
            "encoder_settings": dense.params.get("encoder_settings", {}),
            "max_length": dense.params.get("max_length", 0),
        }
    total = len(store) if limit is None else min(limit, len(store))
    dim = int(embeddings.shape[1]) if embeddings is not None else 0
    fingerprint = manifest.corpus_fingerprint + (f"/first{total}" if total < len(store) else "")
    meta = {
        "corpus_fingerprint": fingerprint,
        "encoder": encoder,
        "count": total,
        "source": str(bundle_path),
        **(encoding if embeddings is not None else {}),
    }

    def docs(start: int, batch: int = 2000) -> Iterator[Doc]:
        for lo in range(start, total, batch):
            hi = min(total, lo + batch)
            rows = store.dataset[lo:hi]
            vectors = unit_rows(np.asarray(embeddings[lo:hi], dtype=np.float32)) if embeddings is not None else None
            urls = rows.get("url") or [""] * (hi - lo)
            for i in range(hi - lo):
                source = {
                    "row": lo + i,
                    "title": rows["title"][i],
                    "text": rows["text"][i],
                    "doc_id": rows["doc_id"][i],
                    "start": int(rows["start"][i]),
                    "end": int(rows["end"][i]),
                }
                if urls[i]:  # a store of a corpus with source addresses (none before the column existed)
                    source["url"] = urls[i]
                if vectors is not None:
                    source["vector"] = vectors[i].tolist()
                yield lo + i, rows["id"][i], source

    return total, docs, meta, dim


def shard_rows(bundle_path: str | Path) -> list[tuple[int, int]]:
    """The rows [start, end) of each shard of a sharded index folder, in order; one range for an index in one
    piece."""
    manifest = Manifest.load(bundle_path, kind="bundle")
    records = manifest.params.get(SHARD_RECORDS) or {}
    return [tuple(records[name]["rows"]) for name in manifest.params.get(SHARDS) or ()] or [(0, manifest.count)]


def _sharded_passage_docs(bundle_path: Path, manifest: Manifest, limit: int | None, with_vectors: bool):
    fix = "rebuild it with the same `odqa index --shards N` command (the shards still right are kept)"
    shards = []
    for name in manifest.params[SHARDS]:
        record = manifest.params[SHARD_RECORDS][name]
        check_shard(bundle_path / name, record, manifest, fix)
        count, shard_docs, meta, dim = passage_docs(bundle_path / name, None, with_vectors)
        shards.append((int(record["rows"][0]), count, shard_docs, meta, dim))
    whole = sum(count for _, count, _, _, _ in shards)
    total = whole if limit is None else min(limit, whole)
    first = shards[0][3]
    meta = {
        **first,
        "corpus_fingerprint": manifest.corpus_fingerprint + (f"/first{total}" if total < whole else ""),
        "count": total,
        "source": str(bundle_path),
    }

    def docs(start: int, batch: int = 2000) -> Iterator[Doc]:
        for offset, count, of_shard, _, _ in shards:
            if start >= offset + count:
                continue
            for row, doc_id, source in of_shard(max(0, start - offset), batch):
                if offset + row >= total:
                    return
                yield offset + row, doc_id, {**source, "row": offset + row}

    return total, docs, meta, shards[0][4]


def load_passages(
    index: ElasticIndex,
    bundle_path: str | Path,
    *,
    recreate: bool = False,
    limit: int | None = None,
    with_vectors: bool = True,
    analyzer: str = "english",
    similarity: str = "dot_product",
    shards: int | None = 1,
    replicas: int = 1,
    hnsw_m: int = 16,
    ef_construction: int = 100,
    options: BulkOptions | None = None,
    knn_type: str | None = "hnsw",
) -> BulkReport:
    """Create (or reuse and check) the index, then bulk-load an odqa index folder into it, resumably. `shards`
    or `knn_type` None: picked from the corpus size (indexes.elastic_capacity.plan_elastic)."""
    total, docs, meta, dim = passage_docs(bundle_path, limit, with_vectors)
    if recreate:
        index.delete()
    if index.exists():
        # vectors of another encoder, even of the same dimension, would be searched with the index's questions
        index.check(fingerprint=meta["corpus_fingerprint"], encoder=(meta.get("encoder") or "") if dim else "", dim=dim)
        if dim and not index.dim:
            raise IndexMismatchError(f"Elasticsearch index {index.name!r} was created without vectors; pass --recreate")
    else:
        from odqa.indexes.elastic_capacity import plan_elastic

        plan = plan_elastic(total, dim, shards=shards, knn_type=knn_type)
        log.info("creating %s for %s", index.name, plan.summary())
        index.create(
            meta,
            dim,
            analyzer=analyzer,
            similarity=similarity,
            shards=plan.shards,
            replicas=replicas,
            hnsw_m=hnsw_m,
            ef_construction=ef_construction,
            knn_type=plan.knn_type,
        )
    if options is not None and options.parallel > 1:
        return bulk_load_ranges(index, docs, total, _load_ranges(bundle_path, total, options.parallel), options)
    return bulk_load(index, docs, total, options)


def _load_ranges(bundle_path: str | Path, total: int, parallel: int) -> list[tuple[int, int]]:
    """The rows each loader sends: a sharded index's shards; an index in one piece in `parallel` equal parts."""
    shards = shard_rows(bundle_path)
    if len(shards) > 1:
        return shards
    bounds = np.linspace(0, total, parallel + 1).astype(int).tolist()
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]
