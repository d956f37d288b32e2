#!/usr/bin/env python3
"""Elasticsearch backend benchmark: bulk indexing throughput and search latency, beside the embedded backends.

    python bench/elastic.py                       # starts noida-db on a free port -> bench/results/elastic.md
    python bench/elastic.py --hosts http://127.0.0.1:9200 --replicas 0   # a real cluster instead

Suites:
* demo: the built-in demo corpus (308 passages, MiniLM vectors): bulk load (passages + vectors), then median
  per-question latency over the 100 demo questions of BM25, kNN, hybrid client-side RRF and the server's RRF
  retriever; embedded: tantivy BM25, flat FAISS, hybrid RRF over the two. Question vectors are encoded once
  beforehand, so every dense number is the search alone.
* wiki: the first N (default 20,000) passages of the Wikipedia bundle (`work_indexes/wiki`, BM25 only, no
  vectors): bulk load and BM25 latency on the first Q NQ-test questions, beside a tantivy index of the same
  slice.
Latency is one question per request, sequential, median of the per-question times (ms), after one warm-up.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"


def start_noida(workdir: Path) -> tuple[subprocess.Popen, str]:
    spec = importlib.util.find_spec("noida_db")
    binary = Path(list(spec.submodule_search_locations)[0]) / "noida-db" if spec else None
    if binary is None or not binary.is_file():
        sys.exit("noida-db is not installed: pip install -e '.[elastic-test]', or pass --hosts")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            str(binary),
            "start",
            "--only",
            "elasticsearch",
            "--host",
            "127.0.0.1",
            "--elasticsearch-port",
            str(port),
            "--data-dir",
            str(workdir / "data"),
        ],
        stdout=(workdir / "noida.log").open("wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with urllib.request.urlopen(url, timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit(f"noida-db did not start; see {workdir / 'noida.log'}")


def median_ms(fn, items) -> float:
    fn(items[0])  # warm-up
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - start) * 1000.0)
    return round(statistics.median(times), 2)


def load(index, bundle: Path, limit: int | None, replicas: int, chunk_size: int) -> dict:
    from odqa.indexes.elastic_bulk import BulkOptions, load_passages

    report = load_passages(
        index,
        bundle,
        recreate=True,
        limit=limit,
        replicas=replicas,
        options=BulkOptions(chunk_size=chunk_size, progress=False),
    )
    return {
        "passages": report.created,
        "seconds": round(report.seconds, 2),
        "per_second": round(report.per_second, 1),
        "rejected": report.rejected,
        "failed": report.failed,
    }


def tantivy_build(store, limit: int, folder: Path) -> tuple[object, float]:
    from odqa.indexes.bm25 import build_text_index
    from odqa.indexes.manifest import Manifest

    texts = (f"{t} {x}" for batch in store.iter_batches(5000) for t, x in zip(batch["title"], batch["text"]))
    texts = (text for _, text in zip(range(limit), texts))
    start = time.perf_counter()
    index = build_text_index(texts, folder, Manifest(kind="bm25"), engine="tantivy")
    return index, time.perf_counter() - start


def demo_suite(config, args, workdir: Path) -> dict:
    from odqa.corpus.questions import load_questions
    from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path
    from odqa.indexes.elastic import ElasticIndex, ElasticPassageIndex
    from odqa.indexes.folder import FolderIndex
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    path = demo_index_path(quiet=True)
    bundle = FolderIndex.open(path)
    index = ElasticIndex.open(config, name="odqa-bench-demo")
    result = {
        "corpus": f"demo ({len(bundle.store)} passages, {bundle.manifest.dim}-d vectors)",
        "load": load(index, path, None, args.replicas, args.chunk_size),
    }
    _, seconds = tantivy_build(bundle.store, len(bundle.store), workdir / "demo-tantivy")
    result["load_embedded_bm25"] = {"seconds": round(seconds, 2), "per_second": round(len(bundle.store) / seconds, 1)}
    questions = [item.question for item in load_questions(str(DEMO_QUESTIONS))]
    es = ElasticPassageIndex(index, config.num_candidates)

    def built(backend, kind: str, **settings):
        settings = RetrievalConfig(candidates=args.candidates, **settings)
        return build_retriever(backend, settings, RetrieverRuntime(), kind)

    dense = built(bundle, "dense")
    vectors = {q: dense.encode([q]) for q in questions}
    bm25, k = built(bundle, "bm25"), args.k
    es_bm25, es_dense = built(es, "bm25"), built(es, "dense")
    hybrid_client, hybrid_server = built(es, "hybrid", fusion="rrf"), built(es, "hybrid", fusion="es-rrf")
    import faiss

    faiss.omp_set_num_threads(1)  # again: loading torch models resets OpenMP's thread count
    embedded_hybrid = built(bundle, "hybrid", fusion="rrf")
    for h in (hybrid_client, hybrid_server, embedded_hybrid):  # timed without the encoder call
        h.dense.encode = lambda qs: vectors[qs[0]]
    result["latency_ms"] = {
        "BM25": {
            "elasticsearch": median_ms(lambda q: es_bm25.search([q], k), questions),
            "embedded": median_ms(lambda q: bm25.search([q], k), questions),
        },
        "kNN": {
            "elasticsearch": median_ms(lambda q: es_dense.search_vectors(vectors[q], k), questions),
            "embedded": median_ms(lambda q: dense.search_vectors(vectors[q], k), questions),
        },
        "hybrid RRF (client-side)": {
            "elasticsearch": median_ms(lambda q: hybrid_client.search([q], k), questions),
            "embedded": median_ms(lambda q: embedded_hybrid.search([q], k), questions),
        },
        "hybrid RRF (server retriever)": {
            "elasticsearch": median_ms(lambda q: hybrid_server.search([q], k), questions),
            "embedded": None,
        },
    }
    result["notices"] = index.notices
    result["questions"] = len(questions)
    return result


def wiki_suite(config, args, workdir: Path) -> dict | None:
    from odqa.core.types import SearchHit
    from odqa.corpus.questions import load_questions
    from odqa.indexes.elastic import ElasticIndex, ElasticPassageIndex
    from odqa.indexes.folder import FolderIndex
    from odqa.retriever.bm25 import BM25Retriever
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    if not (args.wiki_index / "manifest.json").exists():
        print(f"wiki suite skipped: no index at {args.wiki_index}", file=sys.stderr)
        return None
    bundle = FolderIndex.open(args.wiki_index)
    n = min(args.wiki_passages, len(bundle.store))
    index = ElasticIndex.open(config, name="odqa-bench-wiki")
    result = {
        "corpus": f"Wikipedia subset, first {n:,} passages (BM25 only)",
        "load": load(index, args.wiki_index, n, args.replicas, args.chunk_size),
    }
    tantivy, seconds = tantivy_build(bundle.store, n, workdir / "wiki-tantivy")
    result["load_embedded_bm25"] = {"seconds": round(seconds, 2), "per_second": round(n / seconds, 1)}
    questions = [item.question for item in load_questions(str(args.questions))][: args.wiki_questions]
    es_bm25 = build_retriever(
        ElasticPassageIndex(index, config.num_candidates), RetrievalConfig(), RetrieverRuntime(), "bm25"
    )

    class FirstPassages:
        """The first n passages' Tantivy index, built here, as a store with text search alone."""

        def __len__(self) -> int:
            return n

        def text_search(self, qs, k, max_df):
            return [[SearchHit(row=r, score=s, source="bm25") for r, s in hits] for hits in tantivy.search(list(qs), k)]

        def passages(self, rows):
            return bundle.store.get_rows(list(rows))

    embedded = BM25Retriever(FirstPassages(), 0.0)
    result["latency_ms"] = {
        "BM25": {
            "elasticsearch": median_ms(lambda q: es_bm25.search([q], args.k), questions),
            "embedded": median_ms(lambda q: embedded.search([q], args.k), questions),
        }
    }
    result["questions"] = len(questions)
    index.delete()
    return result


def markdown(results: dict, meta: dict) -> str:
    lines = [
        "# Elasticsearch backend vs embedded backends",
        "",
        f"Server: {meta['server']}. Machine: {meta['machine']}. k = {meta['k']}, hybrid candidates = "
        f"{meta['candidates']}, kNN num_candidates = {meta['num_candidates']}, bulk chunk = {meta['chunk_size']} "
        "documents. Latency: one question per request, sequential, median ms; question vectors precomputed "
        "(encoding excluded). Embedded: tantivy BM25, flat FAISS (exact), hybrid RRF of the two. "
        "Command: `python bench/elastic.py`.",
        "",
    ]
    for name, r in results.items():
        if r is None:
            continue
        lines += [
            f"## {name}: {r['corpus']}",
            "",
            "| indexing | passages | seconds | passages/s |",
            "|---|---|---|---|",
            f"| Elasticsearch bulk (create, {meta['chunk_size']}/request) | {r['load']['passages']:,} | "
            f"{r['load']['seconds']} | {r['load']['per_second']:,.0f} |",
            f"| embedded tantivy BM25 build (same passages) | {r['load']['passages']:,} | "
            f"{r['load_embedded_bm25']['seconds']} | {r['load_embedded_bm25']['per_second']:,.0f} |",
            "",
            f"| search ({r['questions']} questions) | Elasticsearch ms | embedded ms |",
            "|---|---|---|",
        ]
        for kind, v in r["latency_ms"].items():
            emb = "—" if v["embedded"] is None else v["embedded"]
            lines.append(f"| {kind} | {v['elasticsearch']} | {emb} |")
        if r.get("notices"):
            lines += ["", "Notices: " + "; ".join(r["notices"])]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", help="an Elasticsearch cluster (default: start noida-db on a free port)")
    parser.add_argument("--suite", choices=["demo", "wiki", "all"], default="all")
    parser.add_argument("--wiki-index", type=Path, default=ROOT / "work_indexes" / "wiki")
    parser.add_argument("--wiki-passages", type=int, default=20000)
    parser.add_argument("--wiki-questions", type=int, default=30)
    parser.add_argument("--questions", type=Path, default=DATA / "dpr-qas" / "nq-test.qa.tsv")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--num-candidates", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=500)
    parser.add_argument("--replicas", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "elastic.md")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args()

    import platform

    import torch

    from odqa.config import ElasticConfig

    torch.set_num_threads(args.threads)
    import faiss

    faiss.omp_set_num_threads(1)  # one query at a time: OpenMP threads only add barrier waits on a shared machine
    workdir = Path(tempfile.mkdtemp(prefix="odqa-bench-es-"))
    proc = None
    try:
        if args.hosts:
            url, server = args.hosts, "the cluster at --hosts"
        else:
            proc, url = start_noida(workdir)
            with urllib.request.urlopen(url) as response:
                version = json.load(response)["version"]["number"]
            server = (
                f"noida-db (Elasticsearch API {version}, a local "
                "API-compatible stand-in, not Elasticsearch) on 127.0.0.1"
            )
        config = ElasticConfig(hosts=url, num_candidates=args.num_candidates)
        results = {}
        if args.suite in ("demo", "all"):
            results["demo"] = demo_suite(config, args, workdir)
        if args.suite in ("wiki", "all"):
            results["wiki"] = wiki_suite(config, args, workdir)
        meta = {
            "server": server,
            "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores (shared)",
            "k": args.k,
            "candidates": args.candidates,
            "num_candidates": args.num_candidates,
            "chunk_size": args.chunk_size,
        }
        text = markdown(results, meta)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        if args.json:
            args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
        print(text)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
