#!/usr/bin/env python
"""Retrieval benchmarks (issue #2): writes a Markdown table and prints it.

    python bench/retrieval.py --suite squad-open [--questions 2000]
    python bench/retrieval.py --suite nq-bm25 [--rank-bm25-questions 300] [--pyserini-python PATH]
    python bench/retrieval.py --suite all --out bench/results/retrieval.md

Suites
* `squad-open`: all SQuAD v1.1 dev paragraphs (chunked by the project's chunker) plus 40,000 Wikipedia
  passages sampled (seed 13) from articles that are not SQuAD dev articles; BM25 + dense (MiniLM) index built
  with `odqa.indexing.build_index`; 2,000 SQuAD dev questions (seed 13) from the 13 articles not in SQuAD
  v2.0 dev (the shipped models train on v2.0 dev, which shares the other 35 and their questions); BM25, dense,
  hybrid RRF and hybrid min-max (alpha 0.5): recall@1/5/20/100, MRR, gold-passage recall, queries per second.
* `nq-bm25`: NQ test (3,610 questions) over the whole Wikipedia subset (about 759 k passages): our tantivy and
  bm25s engines, rank-bm25 (reference; a 300-question sample, it scans every document per query term) and
  Pyserini's Lucene BM25 over the very same passages (run from a separate virtualenv). Recall@20/100,
  single-threaded search latency (median, p95) and QPS, index build time, passage-store open time, RSS.

Everything built is cached under `--cache` (default work_indexes/bench) together with its build timings, so
a rerun only evaluates. Remove the cache folder to time the builds again.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import SEED, open_dev_sample, slug, squad_open_index_dir, variant_pipeline  # noqa: E402 (after the path line)

KS_SQUAD = (1, 5, 20, 100)
KS_NQ = (1, 5, 20, 100)
DEFAULT_PYSERINI = os.environ.get("PYSERINI_PYTHON", "/work/venvs/pyserini/bin/python")
PYSERINI_SCRIPT = Path(__file__).resolve().parent / "_pyserini_bm25.py"


class BenchError(Exception):
    pass


# ----------------------------------------------------------------------------------------------- helpers


def retriever_of(bundle, kind: str, **settings):
    """The `kind` retriever over an opened index with these `retrieval` settings, as the pipeline builds it."""
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    return build_retriever(bundle, RetrievalConfig(**settings), RetrieverRuntime(), kind)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    """Current resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def peak_rss_mb() -> float:
    """Peak RSS of this process: VmHWM (ru_maxrss would carry over a forking parent's peak across exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def available_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("inf")


def percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def load_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_json(path: Path, data: dict) -> None:
    from odqa.core.atomic import atomic_file

    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1))


def write_corpus_tsv(path: Path, rows) -> None:
    """A DPR-format passage TSV (`id`, `text`, `title`) from (id, title, text) rows, written atomically."""
    from odqa.core.atomic import atomic_file

    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        for pid, title, text in rows:
            writer.writerow([pid, text, title])


def build_with_timings(spec, timings_path: Path) -> dict:
    """build_index(spec) unless an index of this very corpus file is there (same size and modification time,
    recorded with the timings); return the build timings (measured now or cached)."""
    from odqa.indexing import build_index

    out = Path(spec.out)
    stat = Path(spec.corpus).stat()
    corpus_id = f"{stat.st_size}:{stat.st_mtime_ns}"
    if (out / "manifest.json").exists() and timings_path.exists():
        timings = load_json(timings_path)
        if timings.get("corpus_id") == corpus_id:
            timings.setdefault("cached", True)
            return timings
        log(f"{out} was built from another version of {spec.corpus}: rebuilding it")
    timings: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cached": False, "corpus_id": corpus_id}
    start = time.perf_counter()
    report = build_index(spec)
    timings.update(report.seconds)
    timings["total_s"] = round(time.perf_counter() - start, 2)
    timings["passages"] = report.passages
    if not report.finished:
        raise BenchError(report.message)
    save_json(timings_path, {**timings, "cached": True})
    timings["cached"] = False
    return timings


def machine_footer(extra: list[str] | None = None) -> str:
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    try:
        load = os.getloadavg()
        load_s = f"load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} when the table was written"
    except OSError:
        load, load_s = (0.0, 0.0, 0.0), ""
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()} with "
        f"{os.cpu_count()} CPU cores, Python {platform.python_version()}, commit {commit}; {load_s}.",
    ]
    if load[2] > 0.75 * (os.cpu_count() or 1) + 1:  # more runnable work than the benchmark alone makes
        lines.append(
            "The load average shows other work sharing the cores (a training job ran beside it on the "
            "development machine): timings are pessimistic."
        )
    return "\n".join(
        f"_{line}_  " if i < len(lines + (extra or [])) - 1 else f"_{line}_"
        for i, line in enumerate(lines + (extra or []))
    )


def md_table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def require(path: Path, what: str) -> Path:
    if not path.exists():
        raise BenchError(
            f"{what} not found at {path}; pass --data pointing at the shared data folder "
            "(it holds squad/, dpr-qas/ and wiki/)"
        )
    return path


# ----------------------------------------------------------------------------------------------- squad-open


def _norm_title(title: str) -> str:
    return title.replace("_", " ").strip().lower()


def _wiki_passage_source(args):
    """(titles list, fetch(rows) -> list of (id, title, text)) over the chunked Wikipedia subset."""
    from odqa.corpus.store import PassageStore

    store_dir = Path(args.wiki_index) / "passages"
    manifest = load_json(Path(args.wiki_index) / "manifest.json")
    if (store_dir / "passages.arrow").exists() and manifest.get("params", {}).get("words") == 100:
        log(f"sampling Wikipedia passages from the existing passage store {store_dir}")
        store = PassageStore.open(store_dir)
        titles = store.column("title").to_pylist()

        def fetch(rows):
            batch = store.dataset[list(rows)]
            return list(zip(batch["id"], batch["title"], batch["text"]))

        return titles, fetch
    from tqdm.auto import tqdm

    from odqa.corpus.readers import iter_passages

    wiki = require(Path(args.data) / "wiki", "Wikipedia subset")
    log(f"no passage store at {store_dir}; chunking {wiki} (several minutes)")
    rows = [
        (p.id, p.title, p.text)
        for p in tqdm(iter_passages(wiki, words=100), desc="chunk wiki", unit=" psg", mininterval=5)
    ]
    return [r[1] for r in rows], lambda chosen: [rows[i] for i in chosen]


def squad_open_corpus(args) -> tuple[Path, dict]:
    """Write (once) the squad-open corpus as DPR passage TSV (rows kept as they are by the reader)."""
    from odqa.core.types import Document
    from odqa.corpus.chunking import chunk_document

    cache = Path(args.cache)
    path = cache / "squad-open" / "corpus.tsv"
    info_path = cache / "squad-open" / "corpus.json"
    if path.exists() and info_path.exists():
        return path, load_json(info_path)
    squad_path = require(Path(args.data) / "squad" / "dev-v1.1.json", "SQuAD v1.1 dev")
    articles = json.loads(squad_path.read_text(encoding="utf-8"))["data"]
    squad_titles = {_norm_title(a["title"]) for a in articles}
    squad_rows, paragraphs = [], 0
    for article in articles:
        for i, paragraph in enumerate(article["paragraphs"]):
            paragraphs += 1
            doc = Document(f"squad:{article['title']}#{i}", article["title"].replace("_", " "), paragraph["context"])
            squad_rows += [(p.id, p.title, p.text) for p in chunk_document(doc, words=100)]
    titles, fetch = _wiki_passage_source(args)
    eligible = [i for i, t in enumerate(titles) if _norm_title(t) not in squad_titles]
    excluded = len(titles) - len(eligible)
    n_wiki = min(args.wiki_sample, len(eligible))
    chosen = sorted(random.Random(SEED).sample(eligible, n_wiki))
    wiki_rows = fetch(chosen)
    write_corpus_tsv(path, squad_rows + wiki_rows)
    info = {
        "squad_paragraphs": paragraphs,
        "squad_passages": len(squad_rows),
        "wiki_passages": len(wiki_rows),
        "wiki_pool": len(titles),
        "wiki_excluded_same_title": excluded,
        "seed": SEED,
    }
    save_json(info_path, info)
    return path, info


class TimedRetriever:
    """Wraps a retriever to add up the time spent in search() (no answer matching)."""

    def __init__(self, inner, name: str):
        self.inner = inner
        self.name = name
        self.seconds = 0.0

    def search(self, questions, k):
        start = time.perf_counter()
        out = self.inner.search(questions, k)
        self.seconds += time.perf_counter() - start
        return out


def encoder_label(encoder: str | None) -> str:
    """A table label: `MiniLM` for the off-the-shelf encoder, else the name or the path's last three parts
    (a trainer's `OUTPUT/final` alone says nothing)."""
    if encoder in (None, "minilm"):
        return "MiniLM"
    encoder, precision = encoder_and_precision(encoder)
    return "/".join(Path(encoder).parts[-3:]) + ("" if precision == "auto" else f" {precision}")


def encoder_and_precision(text: str) -> tuple[str, str]:
    """`NAME@PRECISION` (e.g. `retriever@int8`): the passage encoder and the precision the index is built in
    (default auto); questions are encoded as the index's search does either way."""
    encoder, _, precision = text.partition("@")
    return encoder, precision or "auto"


def run_squad_open(args) -> str:
    import torch

    from odqa.corpus.questions import drop_articles, keep_articles, load_questions
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.indexes.folder import FolderIndex
    from odqa.indexes.vector import VectorIndexParams
    from odqa.indexing import IndexSpec

    torch.set_num_threads(args.threads)
    corpus, info = squad_open_corpus(args)
    log(f"squad-open corpus: {info}")
    dense = not args.bm25_only
    encoders = args.encoders if dense else []
    # the shipped reader and retriever train on SQuAD v2.0 dev, which holds 35 of v1.1 dev's 48 articles with
    # the same questions: only the questions of the other 13 articles are asked
    # (--tuning-articles: the other 35 instead, for choices between models; the same corpus and indexes)
    choose = keep_articles if args.tuning_articles else drop_articles
    items = choose(
        load_questions(Path(args.data) / "squad" / "dev-v1.1.json"), Path(args.data) / "squad" / "dev-v2.0.json"
    )
    n_q = min(args.questions or 2000, len(items))
    items = random.Random(SEED).sample(items, n_q)

    dev_items = load_questions(args.squad_dev) if args.squad_dev and dense else []
    rows, all_timings, tuning = [], {}, []
    for e_i, encoder in enumerate(encoders or [None]):
        index_dir = squad_open_index_dir(args.cache, encoder)
        name = index_dir.name
        name_only, precision = encoder_and_precision(encoder or "minilm")
        spec = IndexSpec(
            corpus=str(corpus),
            out=str(index_dir),
            backends=["bm25", "dense"] if encoder else ["bm25"],
            encoder=name_only,
            vector=VectorIndexParams(kind="flat"),
            device="cpu",
            precision=precision,
        )
        timings = build_with_timings(spec, Path(args.cache) / "squad-open" / f"{name}-build-timings.json")
        all_timings[encoder or "bm25"] = timings
        log(f"squad-open index {name}: {timings}")
        bundle = FolderIndex.open(index_dir)
        n_passages = len(bundle.store)
        tag = encoder_label(encoder)
        # B023 (loop variables in lambdas): each factory is called in this iteration, below
        configs = [] if e_i else [("BM25 (tantivy)", lambda: retriever_of(bundle, "bm25"))]  # noqa: B023
        if encoder:
            configs += [
                (f"Dense ({tag}, flat IP)", lambda: retriever_of(bundle, "dense")),  # noqa: B023
                (f"Hybrid RRF ({tag}; k=60, 100+100 candidates)", lambda: retriever_of(bundle, "hybrid", fusion="rrf")),  # noqa: B023
                (
                    f"Hybrid min-max ({tag}; alpha={args.alpha})",
                    lambda: retriever_of(bundle, "hybrid", fusion="minmax", alpha=args.alpha),  # noqa: B023
                ),
            ]
            if dev_items:
                fusion, alpha = choose_fusion(bundle, dev_items, tag, tuning)
                configs.append(
                    (
                        f"Hybrid {fusion} ({tag}"
                        + (f"; alpha={alpha}" if fusion == "minmax" else "")
                        + ", chosen on dev)",
                        lambda: retriever_of(bundle, "hybrid", fusion=fusion, alpha=alpha),  # noqa: B023
                    )
                )
        for label, make in configs:
            timed = TimedRetriever(make(), label)
            timed.search([items[0].question], max(KS_SQUAD))  # warm-up: model load, page cache
            timed.seconds = 0.0
            metrics = evaluate_retrieval(timed, items, KS_SQUAD, batch_size=32)
            search_qps = n_q / timed.seconds if timed.seconds else float("nan")
            log(f"{label}: {metrics}")
            rows.append(
                [label]
                + [fmt(metrics[f"recall@{k}"]) for k in KS_SQUAD]
                + [f"{metrics['mrr']:.2f}"]
                + [fmt(metrics[f"gold_recall@{k}"]) for k in KS_SQUAD]
                + [fmt(search_qps, 1), fmt(metrics["questions_per_second"], 1)]
            )
    timings = all_timings[encoders[0]] if encoders else all_timings["bm25"]
    header = (
        ["retriever"]
        + [f"R@{k}" for k in KS_SQUAD]
        + ["MRR"]
        + [f"gold R@{k}" for k in KS_SQUAD]
        + ["q/s search", "q/s incl. matching"]
    )
    encode_s = timings.get("encode_s")
    encode_rate = n_passages / encode_s if encode_s else None
    cached = " (timings from the first build; the index was cached)" if timings.get("cached") else ""
    build_rows = [
        ["passages (read + chunk + Arrow store)", fmt(timings.get("passages_s")), ""],
        ["BM25 index (tantivy)", fmt(timings.get("bm25_s")), ""],
        [
            "dense encoding (MiniLM-L6, CPU, bf16 autocast where the CPU has native bf16, batch 64, max 256 tokens)",
            fmt(encode_s),
            f"**{fmt(encode_rate, 1)} passages/s**" if encode_rate else "",
        ],
        ["FAISS flat index", fmt(timings.get("dense_index_s")), ""],
        ["total build_index", fmt(timings.get("total_s")), ""],
    ]
    lines = [
        "## squad-open: SQuAD v1.1 dev paragraphs + 40k Wikipedia distractor passages",
        "",
        f"Corpus: {info['squad_paragraphs']:,} SQuAD v1.1 dev paragraphs -> {info['squad_passages']:,} passages "
        f"(project chunker, 100 words), plus {info['wiki_passages']:,} passages sampled (seed {SEED}) from the "
        f"{info['wiki_pool'] - info['wiki_excluded_same_title']:,} Wikipedia-subset passages whose article title is "
        f"not a SQuAD dev title ({info['wiki_excluded_same_title']:,} passages excluded); {n_passages:,} passages in "
        f"all. Questions: {n_q:,} SQuAD v1.1 dev questions sampled with seed {SEED} from the "
        + (
            "35 articles that SQuAD v2.0 dev (training data of the shipped retriever) shares: a tuning split, for "
            "choosing between models, not a test. "
            if args.tuning_articles
            else "13 articles that SQuAD v2.0 dev (training data of the shipped models) does not share. "
        )
        + "R@k: a top-k passage holds an "
        "answer (DPR token match); gold R@k: a top-k passage is cut from the question's own SQuAD paragraph. "
        "q/s search: search calls only (batches of 32, passages fetched, no answer matching); q/s incl. "
        "matching: `evaluate_retrieval` end to end. Hybrid asks each retriever for 100 candidates.",
        "",
        md_table(header, rows),
        "",
    ]
    if tuning:
        lines += [
            f'Fusion and alpha "chosen on dev": best recall@20 on the {len(dev_items):,} questions of '
            f"`--squad-dev {args.squad_dev}` (SQuAD v2.0 dev questions the models never trained on; their "
            "paragraphs are in this corpus), never on the test questions:",
            "",
            md_table(["encoder", "fusion", "alpha", "dev R@20"], tuning),
            "",
        ]
    lines += [
        f"Index build (`odqa.indexing.build_index`, {n_passages:,} passages){cached}:",
        "",
        md_table(["stage", "seconds", "rate"], build_rows),
        "",
        machine_footer([f"Dense encoding and question encoding on CPU with torch.set_num_threads({args.threads})."]),
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- nq-bm25


def probe_main(args) -> int:
    """Child process: open a passage store + one BM25 engine, time a single-threaded query loop.

    Runs in a fresh process so that its RSS is that of a process holding exactly this index and store."""
    from odqa.corpus.store import PassageStore
    from odqa.indexes.bm25 import load_text_index

    index = Path(args.probe_index)
    questions = [
        json.loads(line)["question"]
        for line in Path(args.probe_queries).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    result: dict = {"rss_start_mb": rss_mb()}
    start = time.perf_counter()
    store = PassageStore.open(index / "passages")
    result["store_open_s"] = time.perf_counter() - start
    start = time.perf_counter()
    if args.probe_engine == "rank-bm25":
        engine = _build_rank_bm25(store)
        result["build_s"] = time.perf_counter() - start
    else:
        engine = load_text_index(index / "bm25")
        result["index_open_s"] = time.perf_counter() - start
    result["rss_after_open_mb"] = rss_mb()
    k = args.probe_k
    for q in questions[:5]:
        engine.search([q], k)  # warm-up
    rows, seconds, fetch_seconds = [], [], []
    from tqdm.auto import tqdm

    for q in tqdm(questions, desc=f"search {args.probe_engine}", unit=" q", mininterval=5):
        t0 = time.perf_counter()
        hits = engine.search([q], k)[0]
        t1 = time.perf_counter()
        store.get_rows([r for r, _ in hits])  # what a server does next; timed apart
        t2 = time.perf_counter()
        seconds.append(t1 - t0)
        fetch_seconds.append(t2 - t1)
        rows.append([r for r, _ in hits])
    result.update(
        rows=rows, seconds=seconds, fetch_seconds=fetch_seconds, rss_end_mb=rss_mb(), peak_rss_mb=peak_rss_mb()
    )
    save_json(Path(args.probe_out), result)
    return 0


def _build_rank_bm25(store):
    """rank-bm25's BM25Okapi over the same analyser as indexes.bm25.RankBm25Index (k1=0.9, b=0.4), built in
    memory (no pickle: it would be several GB); token strings interned to keep memory within bounds."""
    from rank_bm25 import BM25Okapi
    from tqdm.auto import tqdm

    from odqa.indexes.bm25 import RankBm25Index, english_analyzer
    from odqa.indexes.manifest import Manifest

    analyze = english_analyzer()
    intern = sys.intern
    docs = []
    with tqdm(total=len(store), desc="rank-bm25 tokenize", unit=" psg", mininterval=5) as bar:
        for batch in store.iter_batches(5000):
            for title, text in zip(batch["title"], batch["text"]):
                docs.append([intern(t) for t in analyze(f"{title} {text}")])
            bar.update(len(batch["text"]))
    log("rank-bm25: building BM25Okapi")
    model = BM25Okapi(docs, k1=0.9, b=0.4)
    del docs
    return RankBm25Index(model, Manifest(kind="bm25"))


def run_probe(engine: str, index: Path, queries: Path, out: Path, k: int, reuse: bool = False) -> dict:
    if reuse and out.exists():
        log(f"probe {engine}: reusing {out}")
        return load_json(out)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--probe-engine",
        engine,
        "--probe-index",
        str(index),
        "--probe-queries",
        str(queries),
        "--probe-out",
        str(out),
        "--probe-k",
        str(k),
    ]
    log(f"probe {engine}: {' '.join(cmd)}")
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise BenchError(f"the {engine} probe failed with exit status {proc.returncode}")
    return load_json(out)


def judge_rows(store, items, rows_per_query, ks) -> dict:
    from odqa.core.types import SearchHit
    from odqa.eval.retrieval import judge, summarize

    results = []
    for item, rows in zip(items, rows_per_query):
        passages = store.get_rows(rows)
        hits = [SearchHit(row=r, score=0.0, passage=p) for r, p in zip(rows, passages)]
        results.append(judge(item, hits))
    return summarize(results, ks)


def latency_stats(seconds: list[float]) -> dict:
    total = sum(seconds)
    return {
        "median_ms": 1000 * percentile(seconds, 50),
        "p95_ms": 1000 * percentile(seconds, 95),
        "qps": len(seconds) / total if total else float("nan"),
    }


def export_pyserini(store, folder: Path, files: int = 4) -> None:
    """Our passages as Pyserini JsonCollection: {id: row, contents: title + ' ' + text}."""
    from tqdm.auto import tqdm

    done = folder / ".done"
    if done.exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    per_file = (len(store) + files - 1) // files
    handles = [(folder / f"docs{i:02d}.jsonl").open("w", encoding="utf-8") for i in range(files)]
    row = 0
    with tqdm(total=len(store), desc="export JsonCollection", unit=" psg", mininterval=5) as bar:
        for batch in store.iter_batches(10000):
            for title, text in zip(batch["title"], batch["text"]):
                handles[row // per_file].write(
                    json.dumps({"id": str(row), "contents": f"{title} {text}"}, ensure_ascii=False) + "\n"
                )
                row += 1
            bar.update(len(batch["text"]))
    for h in handles:
        h.close()
    done.write_text(str(row))


def time_tantivy_rebuild(store, cache: Path) -> float:
    """Build time of the tantivy BM25 index from the passage store (the index itself already exists)."""
    from odqa.indexes.bm25 import build_text_index
    from odqa.indexes.manifest import Manifest
    from odqa.indexing import passage_texts

    folder = cache / "_tantivy-build-timing"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    build_text_index(passage_texts(store, "tantivy rebuild"), folder, Manifest(kind="bm25"), engine="tantivy")
    seconds = time.perf_counter() - start
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


def run_nq_bm25(args) -> str:
    from odqa.corpus.questions import load_questions
    from odqa.corpus.store import PassageStore
    from odqa.indexing import IndexSpec

    cache = Path(args.cache) / "nq-bm25"
    cache.mkdir(parents=True, exist_ok=True)
    data = Path(args.data)
    qpath = require(data / "dpr-qas" / "nq-test.qa.tsv", "NQ test questions")
    wiki = require(data / "wiki", "Wikipedia subset")
    items = load_questions(qpath)
    if args.questions:
        items = items[: args.questions]
    n_q = len(items)
    queries = cache / "queries.jsonl"
    queries.write_text("".join(json.dumps({"question": it.question}) + "\n" for it in items), encoding="utf-8")
    sub_idx = sorted(random.Random(SEED).sample(range(n_q), min(args.rank_bm25_questions, n_q)))
    sub_items = [items[i] for i in sub_idx]
    sub_queries = cache / "queries-sample.jsonl"
    sub_queries.write_text("".join(json.dumps({"question": it.question}) + "\n" for it in sub_items), encoding="utf-8")
    timings = load_json(cache / "build-timings.json")
    notes: list[str] = []

    # --- our tantivy index
    tantivy_dir = Path(args.wiki_index)
    if not (tantivy_dir / "manifest.json").exists():
        log(f"building the tantivy index {tantivy_dir}")
        t = build_with_timings(
            IndexSpec(corpus=str(wiki), out=str(tantivy_dir), backends=["bm25"], bm25_engine="tantivy"),
            cache / "tantivy-full-build.json",
        )
        timings["tantivy"] = {"bm25_s": t.get("bm25_s"), "passages_s": t.get("passages_s"), "total_s": t.get("total_s")}
    store = PassageStore.open(tantivy_dir / "passages")
    if "tantivy" not in timings:
        log("timing a tantivy BM25 build from the passage store")
        timings["tantivy"] = {"bm25_s": round(time_tantivy_rebuild(store, cache), 2)}
        save_json(cache / "build-timings.json", timings)

    # --- our bm25s index (a second bundle, built the normal way)
    bm25s_dir = Path(args.bm25s_index)
    t = build_with_timings(
        IndexSpec(corpus=str(wiki), out=str(bm25s_dir), backends=["bm25"], bm25_engine="bm25s"),
        cache / "bm25s-build.json",
    )
    timings["bm25s"] = {"bm25_s": t.get("bm25_s"), "passages_s": t.get("passages_s"), "total_s": t.get("total_s")}
    save_json(cache / "build-timings.json", timings)
    bm25s_store = PassageStore.open(bm25s_dir / "passages")
    if len(bm25s_store) != len(store):
        raise BenchError(
            f"{bm25s_dir} has {len(bm25s_store)} passages, {tantivy_dir} {len(store)}: not the same corpus"
        )

    engines: dict[str, dict] = {}
    for name, index in (("tantivy", tantivy_dir), ("bm25s", bm25s_dir)):
        probe = run_probe(name, index, queries, cache / f"probe-{name}.json", max(KS_NQ), reuse=args.reuse_probes)
        engines[name] = {
            "probe": probe,
            "metrics": judge_rows(store, items, probe["rows"], KS_NQ),
            "sample": judge_rows(store, sub_items, [probe["rows"][i] for i in sub_idx], KS_NQ),
        }

    # --- Pyserini (Lucene)
    py = args.pyserini_python
    if args.skip_pyserini:
        notes.append("Pyserini skipped (--skip-pyserini).")
    elif not Path(py).exists():
        notes.append(
            f"Pyserini not run: no Python at {py}. Create the virtualenv "
            "as bench/README.md says, or pass --pyserini-python."
        )
    else:
        try:
            lucene_dir = cache / "pyserini" / "index"
            if not (lucene_dir / ".done").exists():
                export_pyserini(store, cache / "pyserini" / "collection")
                shutil.rmtree(lucene_dir, ignore_errors=True)
                log("Pyserini: indexing (Lucene, 2 threads)")
                start = time.perf_counter()
                proc = subprocess.run(
                    [
                        py,
                        str(PYSERINI_SCRIPT),
                        "index",
                        "--input",
                        str(cache / "pyserini" / "collection"),
                        "--index",
                        str(lucene_dir),
                        "--threads",
                        str(args.threads),
                    ]
                )
                if proc.returncode != 0:
                    raise BenchError(f"Pyserini indexing failed (exit status {proc.returncode})")
                timings["lucene"] = {"bm25_s": round(time.perf_counter() - start, 2)}
                save_json(cache / "build-timings.json", timings)
                (lucene_dir / ".done").write_text("ok")
            out = cache / "probe-lucene.json"
            if not (args.reuse_probes and out.exists()):
                log("Pyserini: searching")
                proc = subprocess.run(
                    [
                        py,
                        str(PYSERINI_SCRIPT),
                        "search",
                        "--index",
                        str(lucene_dir),
                        "--queries",
                        str(queries),
                        "--k",
                        str(max(KS_NQ)),
                        "--out",
                        str(out),
                    ]
                )
                if proc.returncode != 0:
                    raise BenchError(f"Pyserini search failed (exit status {proc.returncode})")
            probe = load_json(out)
            probe["rows"] = [[int(d) for d in ids] for ids in probe["docids"]]
            engines["lucene"] = {
                "probe": probe,
                "metrics": judge_rows(store, items, probe["rows"], KS_NQ),
                "sample": judge_rows(store, sub_items, [probe["rows"][i] for i in sub_idx], KS_NQ),
            }
        except BenchError as exc:
            notes.append(f"Pyserini not measured: {exc}.")
            log(str(exc))

    # --- rank-bm25 (reference, subsample)
    if args.skip_rank_bm25:
        notes.append("rank-bm25 skipped (--skip-rank-bm25).")
    elif available_mb() < args.rank_bm25_min_mb:
        notes.append(
            f"rank-bm25 skipped: {available_mb():,.0f} MB of memory available, it needs about "
            f"{args.rank_bm25_min_mb:,} MB over {len(store):,} passages."
        )
    else:
        try:
            probe = run_probe(
                "rank-bm25",
                tantivy_dir,
                sub_queries,
                cache / "probe-rank-bm25.json",
                max(KS_NQ),
                reuse=args.reuse_probes,
            )
            timings["rank-bm25"] = {"bm25_s": round(probe["build_s"], 2)}
            engines["rank-bm25"] = {"probe": probe, "sample": judge_rows(store, sub_items, probe["rows"], KS_NQ)}
        except BenchError as exc:
            notes.append(f"rank-bm25 not measured: {exc}.")
    save_json(cache / "build-timings.json", timings)
    save_json(
        cache / "summary.json",
        {
            name: {k: v for k, v in e.items() if k != "probe"} | {"latency": latency_stats(e["probe"]["seconds"])}
            for name, e in engines.items()
        },
    )
    return nq_markdown(engines, timings, n_q, len(sub_items), len(store), notes, args)


ENGINE_LABELS = {
    "tantivy": "ours: tantivy (k1=1.2, b=0.75)",
    "bm25s": "ours: bm25s (k1=0.9, b=0.4)",
    "lucene": "Pyserini Lucene (k1=0.9, b=0.4)",
    "rank-bm25": "rank-bm25 BM25Okapi (k1=0.9, b=0.4)",
}


def nq_markdown(engines, timings, n_q, n_sub, n_passages, notes, args) -> str:
    lines = [
        "## nq-bm25: NQ test over the Wikipedia subset, BM25 engines",
        "",
        f"{n_passages:,} passages (the project's chunker, 100 words, title + text indexed), {n_q:,} NQ test questions "
        "(DPR qas), top 100. Recall@k: a top-k passage holds an answer (DPR token match). Every engine "
        "searches exactly the same passages; Lucene gets them as a JsonCollection `{id, contents}` with "
        'contents = title + " " + text.',
        "",
    ]
    header = ["engine"] + [f"R@{k}" for k in KS_NQ] + ["MRR", "questions"]
    rows = []
    for name in ("tantivy", "bm25s", "lucene"):
        if name in engines:
            m = engines[name]["metrics"]
            rows.append(
                [ENGINE_LABELS[name]]
                + [fmt(m[f"recall@{k}"]) for k in KS_NQ]
                + [f"{m['mrr']:.2f}", fmt(m["questions"])]
            )
    lines += [md_table(header, rows), ""]
    if "lucene" in engines:
        ref = engines["lucene"]["metrics"]
        checks = []
        for name in ("tantivy", "bm25s"):
            if name in engines:
                m = engines[name]["metrics"]
                d20, d100 = m["recall@20"] - ref["recall@20"], m["recall@100"] - ref["recall@100"]
                ok = abs(d20) <= 1.0 and abs(d100) <= 1.0
                checks.append(
                    f"{name}: R@20 {d20:+.2f}, R@100 {d100:+.2f} points vs Lucene -> "
                    f"**{'within 1 point' if ok else 'NOT within 1 point'}**"
                )
        lines += ["Requirement (ours within 1 point of Lucene's recall@20/@100): " + "; ".join(checks) + ".", ""]
    lines += [f"Same metrics on the {n_sub}-question sample (seed {SEED}) that rank-bm25 can afford:", ""]
    rows = []
    for name in ("tantivy", "bm25s", "lucene", "rank-bm25"):
        if name in engines:
            m = engines[name]["sample"]
            rows.append(
                [ENGINE_LABELS[name]]
                + [fmt(m[f"recall@{k}"]) for k in KS_NQ]
                + [f"{m['mrr']:.2f}", fmt(m["questions"])]
            )
    lines += [md_table(header, rows), ""]

    lines += [
        "Speed and footprint. Search: a single-threaded loop of one query at a time, top 100, row ids only "
        "(no passage text, no answer matching), after 5 warm-up queries; for Pyserini, "
        "`LuceneSearcher.search` through pyjnius. +fetch: the same plus reading the 100 hit passages "
        "from the Arrow store. Build: BM25 indexing of the 759 k passages already chunked (Lucene from "
        "the exported JSON files, 2 threads); rank-bm25 in memory. RSS: a fresh process holding the "
        "passage store and the index, after the whole query loop (peak in brackets).",
        "",
    ]
    header = [
        "engine",
        "queries",
        "median ms",
        "p95 ms",
        "QPS",
        "median ms +fetch",
        "tantivy QPS / this",
        "bm25s QPS / this",
        "build s",
        "index open s",
        "store open s",
        "RSS MB (peak)",
    ]
    rows = []
    base = {n: latency_stats(engines[n]["probe"]["seconds"])["qps"] for n in ("tantivy", "bm25s") if n in engines}
    for name in ("tantivy", "bm25s", "lucene", "rank-bm25"):
        if name not in engines:
            continue
        p = engines[name]["probe"]
        lat = latency_stats(p["seconds"])
        fetch = [a + b for a, b in zip(p["seconds"], p.get("fetch_seconds", []))] if p.get("fetch_seconds") else []
        ratio = lambda n: fmt(base[n] / lat["qps"], 2) + "x" if n in base else "n/a"  # noqa: E731, B023 -- called in this iteration
        rss = p.get("rss_end_mb")
        rows.append(
            [
                ENGINE_LABELS[name],
                fmt(len(p["seconds"])),
                fmt(lat["median_ms"]),
                fmt(lat["p95_ms"]),
                fmt(lat["qps"], 1),
                fmt(1000 * percentile(fetch, 50)) if fetch else "n/a",
                ratio("tantivy"),
                ratio("bm25s"),
                fmt(timings.get(name, {}).get("bm25_s"), 1),
                fmt(p.get("index_open_s", p.get("open_seconds"))) if name != "rank-bm25" else "(built)",
                fmt(p.get("store_open_s")) if "store_open_s" in p else "n/a",
                f"{fmt(rss, 0)} ({fmt(p.get('peak_rss_mb'), 0)})" if rss else f"({fmt(p.get('peak_rss_mb'), 0)})",
            ]
        )
    lines += [md_table(header, rows), ""]

    # issue targets for our engines
    targets = []
    for name in ("tantivy", "bm25s"):
        if name not in engines:
            continue
        p = engines[name]["probe"]
        lat = latency_stats(p["seconds"])
        t = timings.get(name, {})
        full = t.get("total_s")
        build = full if full else t.get("bm25_s")
        build_what = "chunking + store + BM25" if full else "BM25 indexing from the store"
        targets.append(
            [
                ENGINE_LABELS[name],
                f"{fmt(lat['median_ms'])} ms {'OK' if lat['median_ms'] < 10 else 'MISSED'}",
                f"{fmt(build, 0)} s ({build_what}) {'OK' if build and build < 300 else 'MISSED'}",
                f"{fmt(p['rss_end_mb'], 0)} MB {'OK' if p['rss_end_mb'] < 2048 else 'MISSED'}",
                f"{fmt(p['store_open_s'], 3)} s {'OK' if p['store_open_s'] < 2 else 'MISSED'}",
            ]
        )
    lines += [
        "Issue targets for our engines:",
        "",
        md_table(["engine", "median latency < 10 ms", "build < 5 min", "RSS < 2 GB", "store open < 2 s"], targets),
        "",
    ]
    b = timings.get("bm25s", {})
    if b.get("passages_s"):
        lines += [
            f"A full `run_qa.py index --backends bm25 --bm25-engine bm25s` build took {fmt(b.get('total_s'), 0)} s: "
            f"{fmt(b.get('passages_s'), 0)} s reading the 4 xz shards, chunking and writing the Arrow store, "
            f"{fmt(b.get('bm25_s'), 0)} s BM25 indexing. The tantivy "
            "index reuses the same store; its row is BM25 indexing alone.",
            "",
        ]
    if notes:
        lines += ["Notes: " + " ".join(notes), ""]
    lines.append(machine_footer())
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- nq-pool


def nq_pool_folder(args) -> Path:
    """The cache folder of a pool depth: `nq-pool` for the default top-20 (the folder of earlier runs, so their
    indexes are reused), `nq-pool-K` for another depth, so pools of two depths never overwrite each other."""
    return Path(args.cache) / ("nq-pool" if args.pool_k == 20 else f"nq-pool-{args.pool_k}")


def nq_pool_corpus(args, test_items, dev_items) -> tuple[Path, dict]:
    """Write (once) the nq-pool corpus: the union of the BM25 (tantivy, full Wikipedia subset) top-`pool_k`
    passages of every NQ test question and every dev question, as DPR passage TSV."""
    from odqa.indexes.folder import FolderIndex

    folder = nq_pool_folder(args)
    path, info_path = folder / "corpus.tsv", folder / "corpus.json"
    if path.exists() and info_path.exists():
        info = load_json(info_path)
        if info.get("pool_k") == args.pool_k and info.get("dev_questions") == len(dev_items):
            return path, info
    bundle = FolderIndex.open(require(Path(args.wiki_index), "Wikipedia BM25 index"))
    bm25 = retriever_of(bundle, "bm25")
    rows: dict[str, tuple[str, str]] = {}
    questions = [q.question for q in test_items] + [q.question for q in dev_items]
    for start in range(0, len(questions), 256):
        for hits in bm25.search(questions[start : start + 256], args.pool_k):
            for hit in hits:
                rows.setdefault(hit.passage.id, (hit.passage.title, hit.passage.text))
    write_corpus_tsv(path, ((pid, title, text) for pid, (title, text) in rows.items()))
    info = {
        "pool_k": args.pool_k,
        "test_questions": len(test_items),
        "dev_questions": len(dev_items),
        "passages": len(rows),
    }
    save_json(info_path, info)
    return path, info


def pool_ceiling(corpus: Path, info: dict, test_items) -> int:
    """How many test questions have an answer anywhere in the pool (computed once, kept in the corpus's
    corpus.json): no retriever's recall over the pool can pass it."""
    from odqa.core.answers import answered_questions
    from odqa.corpus.readers import iter_passages

    if "answerable_test_questions" not in info:
        texts = (p.text for p in iter_passages(corpus))
        found = answered_questions(texts, [q.answers for q in test_items if not q.regex])
        info["answerable_test_questions"] = len(found)
        save_json(corpus.with_name("corpus.json"), info)
    return info["answerable_test_questions"]


def choose_fusion(bundle, dev_items, tag: str, tuning: list) -> tuple[str, float]:
    """The hybrid's fusion and alpha with the best dev recall@20 (ties: the smaller change from 0.5); each
    setting's score is appended to `tuning` as a table row."""
    from odqa.eval.retrieval import evaluate_retrieval

    best = None
    for fusion, alpha in [("rrf", 0.5)] + [("minmax", a / 10) for a in range(1, 10)]:
        m = evaluate_retrieval(
            retriever_of(bundle, "hybrid", fusion=fusion, alpha=alpha), dev_items, (20,), batch_size=32
        )
        tuning.append([tag, fusion, alpha if fusion == "minmax" else "-", fmt(m["recall@20"])])
        key = (round(m["recall@20"], 6), -abs(alpha - 0.5))
        if best is None or key > best[0]:
            best = (key, fusion, alpha)
    return best[1], best[2]


def run_nq_pool(args) -> str:
    """NQ test over a corpus a CPU can encode: BM25 vs each dense encoder vs hybrids, the hybrid's fusion and
    alpha chosen on dev questions (never on test)."""
    import torch

    from odqa.corpus.questions import load_questions
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.indexes.folder import FolderIndex
    from odqa.indexes.vector import VectorIndexParams
    from odqa.indexing import IndexSpec

    torch.set_num_threads(args.threads)
    test_items = load_questions(Path(args.data) / "dpr-qas" / "nq-test.qa.tsv")[: args.questions or None]
    dev_items = load_questions(args.dev) if args.dev else []
    corpus, info = nq_pool_corpus(args, test_items, dev_items)
    ceiling = pool_ceiling(corpus, info, test_items)
    log(f"nq-pool corpus: {info}")
    ks = KS_NQ
    rows, tuning = [], []
    for e_i, encoder in enumerate(args.encoders):
        name = "index-" + slug(encoder)
        index_dir = nq_pool_folder(args) / name
        name_only, precision = encoder_and_precision(encoder)
        spec = IndexSpec(
            corpus=str(corpus),
            out=str(index_dir),
            backends=["bm25", "dense"],
            encoder=name_only,
            vector=VectorIndexParams(kind="flat"),
            device="cpu",
            precision=precision,
        )
        timings = build_with_timings(spec, nq_pool_folder(args) / f"{name}-build-timings.json")
        log(f"nq-pool index {name}: {timings}")
        bundle = FolderIndex.open(index_dir)
        tag = encoder_label(encoder)
        fusion, alpha = choose_fusion(bundle, dev_items, tag, tuning) if dev_items else ("minmax", args.alpha)
        # B023 (loop variables in lambdas): each factory is called in this iteration, below
        configs = [] if e_i else [("BM25 (tantivy, over the pool)", lambda: retriever_of(bundle, "bm25"))]  # noqa: B023
        configs += [
            (f"Dense ({tag})", lambda: retriever_of(bundle, "dense")),  # noqa: B023
            (
                f"Hybrid {fusion} ({tag}"
                + (f", alpha {alpha}" if fusion == "minmax" else "")
                + (", chosen on dev)" if dev_items else ")"),
                lambda: retriever_of(bundle, "hybrid", fusion=fusion, alpha=alpha),  # noqa: B023
            ),
        ]
        for label, make in configs:
            metrics = evaluate_retrieval(make(), test_items, ks, batch_size=32)
            log(f"{label}: {metrics}")
            rows.append([label] + [fmt(metrics[f"recall@{k}"]) for k in ks] + [f"{metrics['mrr']:.2f}"])
    lines = [
        "## nq-pool: NQ test over the BM25 pool of its questions",
        "",
        f"Corpus: the union of the BM25 (tantivy, full Wikipedia subset) top-{info['pool_k']} passages of the "
        f"{info['test_questions']:,} NQ test questions and {info['dev_questions']:,} dev questions: "
        f"{info['passages']:,} passages, small enough to encode on a CPU. Every retriever searches this pool, so "
        "BM25's numbers are optimistic (each pool passage was a BM25 hit) and dense numbers count only what BM25 "
        "also found somewhere in its top list: compare encoders with each other here, and BM25 with dense on the "
        "full corpus where a GPU can encode it. "
        f"{ceiling:,} of the {len(test_items):,} test questions ({100 * ceiling / len(test_items):.2f} %) have an "
        "answer somewhere in the pool: no retriever's recall here can pass that. "
        + (
            "Fusion and alpha are chosen per encoder on the dev "
            f"questions (`--dev {args.dev}`; recall@20), never on NQ test."
            if dev_items
            else f"Hybrid: min-max, alpha {args.alpha} (no `--dev` file given)."
        ),
        "",
        md_table(["retriever"] + [f"R@{k}" for k in ks] + ["MRR"], rows),
    ]
    if tuning:
        lines += [
            "",
            "Dev recall@20 of each fusion setting:",
            "",
            md_table(["encoder", "fusion", "alpha", "dev R@20"], tuning),
        ]
    lines += ["", machine_footer()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- main


# ------------------------------------------------------------------------------------------------- open-dev


def run_open_dev(args) -> str:
    """Recall@1/10/20/100 of BM25, dense and the hybrid on the open-dev questions (the split no odqa model trains
    on) over the whole Wikipedia subset: `--wiki-index` must hold both a BM25 and a dense index (`index --corpus
    .../wiki --encoder fast-passage-encoder`). `--questions` per source (default 300, the reader suite's sample;
    0: all)."""
    import torch

    from odqa.eval.retrieval import evaluate_retrieval

    torch.set_num_threads(args.threads)
    index = Path(args.wiki_index)
    manifest = load_json(require(index / "manifest.json", "Wikipedia index"))
    if "dense" not in manifest.get("params", {}).get("backends", []):
        raise BenchError(
            f"{index} holds no dense index; build one with `python run_qa.py index --corpus "
            f"{Path(args.data) / 'wiki'} --out {index} --encoder fast-passage-encoder`"
        )
    n = 300 if args.questions is None else args.questions
    sources = open_dev_sample(Path(args.data), n or None)
    ks = [1, 10, 20, 100]
    rows = []
    for kind in ("bm25", "dense", "hybrid"):
        pipeline, _ = variant_pipeline(str(index), kind, max(ks), False, "reader", {})
        retriever = pipeline.retriever(kind)
        retriever.search(["warm up"], 1)
        totals = {f"recall@{k}": 0.0 for k in ks}
        asked, seconds = 0, 0.0
        for name, items in sources.items():
            started = time.perf_counter()
            m = evaluate_retrieval(retriever, items, ks=ks, progress=False)
            seconds += time.perf_counter() - started
            asked += len(items)
            for k in ks:
                totals[f"recall@{k}"] += m[f"recall@{k}"] * len(items)
            rows.append([name, kind, len(items), *[fmt(m[f"recall@{k}"]) for k in ks], ""])
            log(" | ".join(map(str, rows[-1])))
        rows.append(
            [
                "**all**",
                f"**{kind}**",
                asked,
                *[f"**{totals[f'recall@{k}'] / asked:.2f}**" for k in ks],
                fmt(asked / seconds),
            ]
        )
        log(" | ".join(map(str, rows[-1])))
    return (
        "## open-dev: BM25, dense and hybrid over the Wikipedia subset\n\n"
        f"{sum(len(v) for v in sources.values())} open-dev questions ({n or 'all'} per source, seed of "
        "`bench/qa.py`), 759,464 passages; the hybrid is the default retriever's fusion. A hit holds an answer "
        "string (regex for CuratedTREC).\n\n"
        + md_table(["source", "retriever", "questions", "R@1", "R@10", "R@20", "R@100", "q/s"], rows)
        + "\n\n"
        + machine_footer()
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Retrieval benchmarks: writes a Markdown table and prints it.")
    parser.add_argument("--suite", choices=["squad-open", "nq-bm25", "nq-pool", "open-dev", "all"])
    parser.add_argument(
        "--out", help="Markdown output (default bench/results/retrieval-SUITE.md, or retrieval.md for all)"
    )
    parser.add_argument(
        "--questions",
        type=int,
        help="number of questions (squad-open: sample size, default 2000; "
        "nq-bm25: the first N of NQ test, default all 3,610)",
    )
    parser.add_argument(
        "--data", default=str(ROOT.parent / "shared" / "data"), help="shared data folder (squad/, dpr-qas/, wiki/)"
    )
    parser.add_argument(
        "--cache", default=str(ROOT / "work_indexes" / "bench"), help="where built corpora and indexes are kept"
    )
    parser.add_argument(
        "--wiki-index",
        default=str(ROOT / "work_indexes" / "wiki"),
        help="tantivy BM25 index bundle of the Wikipedia subset (built there if absent)",
    )
    parser.add_argument(
        "--bm25s-index",
        default=str(ROOT / "work_indexes" / "wiki-bm25s"),
        help="bm25s index bundle of the Wikipedia subset (built there if absent)",
    )
    parser.add_argument(
        "--bm25-only",
        action="store_true",
        help="squad-open: BM25 alone (no dense encoding; index kept apart in CACHE/squad-open/index-bm25)",
    )
    parser.add_argument(
        "--encoders",
        nargs="+",
        default=["minilm"],
        help="dense encoders to compare (name or path, NAME@int8 for passages encoded in that "
        "precision; each gets its own cached index)",
    )
    parser.add_argument("--alpha", type=float, default=0.5, help="squad-open: dense weight of the min-max hybrid")
    parser.add_argument("--pool-k", type=int, default=20, help="nq-pool: BM25 passages per question in the pool")
    parser.add_argument(
        "--dev",
        help="nq-pool: dev questions (any question file, e.g. a trainer's heldout.jsonl) "
        "to choose the hybrid's fusion and alpha on",
    )
    parser.add_argument(
        "--squad-dev",
        help="squad-open: dev questions whose paragraphs are in the corpus (e.g. the "
        "SQuAD v2.0 dev split of build-dpr-data --dev-dir) to choose a hybrid's fusion and alpha on",
    )
    parser.add_argument(
        "--tuning-articles",
        action="store_true",
        help="squad-open: ask the questions of the 35 "
        "articles SQuAD v2.0 dev shares (for choosing between models) instead of the 13 held-out ones",
    )
    parser.add_argument("--wiki-sample", type=int, default=40000, help="squad-open: Wikipedia distractor passages")
    parser.add_argument("--rank-bm25-questions", type=int, default=300, help="nq-bm25: questions for rank-bm25 (slow)")
    parser.add_argument(
        "--rank-bm25-min-mb", type=int, default=10000, help="skip rank-bm25 below this much free memory"
    )
    parser.add_argument("--skip-rank-bm25", action="store_true")
    parser.add_argument("--skip-pyserini", action="store_true")
    parser.add_argument(
        "--pyserini-python", default=DEFAULT_PYSERINI, help="Python of a virtualenv with Pyserini (env PYSERINI_PYTHON)"
    )
    parser.add_argument(
        "--reuse-probes",
        action="store_true",
        help="nq-bm25: reuse the search timings/results of an earlier run (cache/nq-bm25/probe-*.json)",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads for encoding; Lucene indexing threads")
    parser.add_argument("--probe-engine", help=argparse.SUPPRESS)
    parser.add_argument("--probe-index", help=argparse.SUPPRESS)
    parser.add_argument("--probe-queries", help=argparse.SUPPRESS)
    parser.add_argument("--probe-out", help=argparse.SUPPRESS)
    parser.add_argument("--probe-k", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe_engine:
        return probe_main(args)
    if not args.suite:
        parser.error("--suite is required")
    from odqa.core.errors import OdqaError

    suites = ["squad-open", "nq-bm25"] if args.suite == "all" else [args.suite]
    out = Path(
        args.out
        or ROOT / "bench" / "results" / ("retrieval.md" if args.suite == "all" else f"retrieval-{args.suite}.md")
    )
    try:
        sections = [
            {"squad-open": run_squad_open, "nq-bm25": run_nq_bm25, "nq-pool": run_nq_pool, "open-dev": run_open_dev}[s](
                args
            )
            for s in suites
        ]
    except (BenchError, OdqaError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = " ".join(argv if argv is not None else sys.argv[1:])
    text = (
        f"# Retrieval benchmarks\n\nWritten by `python bench/retrieval.py {command}`.\n\n"
        + "\n\n".join(sections)
        + "\n"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
