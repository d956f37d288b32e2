#!/usr/bin/env python3
"""Full Wikipedia (21 M passages) and beyond, by simulation on this machine (issue 49).

    python bench/scale.py passages --size 1M             # passage store + BM25: build time, peak RSS, disk, latency
    python bench/scale.py real --passages 20000          # encode real subset passages and NQ questions once
    python bench/scale.py vectors --size 1M --kinds flat ivf ivfpq opq-ivfpq hnsw
    python bench/scale.py vectors --real                 # the same kinds over the real vectors: real recall
    python bench/scale.py kb --size 1M --kinds flat ivfpq  # the linker over simulated entities: load, memory, latency
    python bench/scale.py ask --size 1M                  # a default ask (hybrid + reader) over both (after
                                                         # `passages` and `vectors --kinds odqa-ivfpq --keep`)
    python bench/scale.py report                         # markdown tables of every result so far

Passages: Wikipedia-like, streamed (never held in memory at once): the subset's articles
(../shared/data/wiki) drawn again and again, each time with its sentences shuffled, its id renamed (`r{round}-{id}`)
and its title marked with the round, chunked to about 100 words. Vectors: `--size` x 384 float16 vectors
clustered like real ones: the real passage vectors (`real`) are split into k-means clusters, and each synthetic
vector is a cluster centroid plus the residuals of two random members of that cluster (scaled to keep the
cluster's spread), normalised: new points with the real clusters' shape, not copies. Queries are real NQ-dev
questions encoded with the index's question encoder; recall@20 is against exact search over the same vectors.
Entities: the subset KB's entities (`work_indexes/kb`) drawn again and again, each later round a namesake with a
qualified title, the original aliases and a vector near the original's; linking at N entities is compared with
linking over the real KB (`links_kept`).

Each build runs in its own process so its peak RSS (wait4's ru_maxrss) is that stage's alone. Results are
appended as JSON lines to $ODQA_HOME/scale/results.jsonl; `report` prints them as tables with the CPU.
Everything generated lives under $ODQA_HOME/scale (delete it when done: 21 M passages take tens of GB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WIKI = ROOT.parent / "shared" / "data" / "wiki"
QUESTIONS = ROOT.parent / "shared" / "data" / "dpr-qas" / "nq-dev.qa.tsv"
DIM = 384
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def scale_home() -> Path:
    from odqa.core.paths import odqa_home

    return odqa_home() / "scale"


def parse_size(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def size_name(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def record(result: dict) -> None:
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), **result}
    path = scale_home() / "results.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result), flush=True)


def percentiles(seconds: list[float], cpu_seconds: list[float] | None = None) -> dict:
    """p50/p99 in ms of wall time, and of the searching thread's CPU time where given: on a machine shared with
    other work (a training run here) the CPU time is what the search costs, the wall time what it waited too."""
    out = {}
    for name, values in (("", seconds), ("cpu_", cpu_seconds)):
        if values is not None:
            ms = np.array(values) * 1000
            out[f"{name}p50_ms"] = round(float(np.percentile(ms, 50)), 2)
            out[f"{name}p99_ms"] = round(float(np.percentile(ms, 99)), 2)
    return out


class Timer:
    """Wall and thread CPU time of one search."""

    def __init__(self):
        self.wall, self.cpu = [], []

    def __enter__(self):
        self._wall, self._cpu = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc):
        self.wall.append(time.perf_counter() - self._wall)
        self.cpu.append(time.thread_time() - self._cpu)

    def summary(self) -> dict:
        return percentiles(self.wall, self.cpu)


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def run_stage(args: list[str]) -> tuple[dict, int]:
    """Run `bench/scale.py stage ...` in a child process: (its JSON result with its CPU seconds, its peak RSS in
    bytes)."""
    process = subprocess.Popen([sys.executable, __file__, "stage", *args], stdout=subprocess.PIPE, text=True)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"stage {' '.join(args)} failed (status {status})")
    result = json.loads(out.strip().splitlines()[-1])
    result[f"{args[0]}_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
    return result, usage.ru_maxrss * 1024


# ---- passages -----------------------------------------------------------------------------------------------
def article_pool() -> list[tuple[str, str, list[str]]]:
    """(id, title, sentences) of every subset article with text."""
    from odqa.corpus.readers import iter_documents

    pool = []
    for doc in iter_documents(WIKI):
        sentences = [s for s in _SENTENCE_END.split(doc.text.replace("\n", " ")) if s]
        if sentences:
            pool.append((doc.id, doc.title, sentences))
    return pool


def synthetic_passages(size: int, words: int = 100, seed: int = 0):
    """`size` Wikipedia-like passages (odqa Passages), streamed."""
    from odqa.core.types import Passage

    pool = article_pool()
    rng = random.Random(seed)
    made = 0
    for round_ in range(1_000_000):
        order = list(range(len(pool)))
        rng.shuffle(order)
        for a in order:
            doc_id, title, sentences = pool[a]
            sentences = sentences[:]
            rng.shuffle(sentences)
            new_id, new_title = (doc_id, title) if round_ == 0 else (f"r{round_}-{doc_id}", f"{title} ({round_})")
            chunk: list[str] = []
            count = 0
            part = 0
            for s in sentences + [""]:
                if s:
                    chunk.append(s)
                    count += s.count(" ") + 1
                if chunk and (count >= words or not s):
                    text = " ".join(chunk)
                    yield Passage(
                        id=f"{new_id}-{part}", title=new_title, text=text, doc_id=new_id, start=0, end=len(text)
                    )
                    made += 1
                    part += 1
                    chunk, count = [], 0
                    if made == size:
                        return


def nq_questions(limit: int) -> list[str]:
    from odqa.corpus.questions import load_questions

    return [q.question for q in load_questions(QUESTIONS, limit=limit)]


def stage_store(folder: str, size: int) -> dict:
    from odqa.corpus.store import PassageStore

    t0 = time.perf_counter()
    store, _ = PassageStore.write(synthetic_passages(size), folder)
    return {"store_build_s": round(time.perf_counter() - t0, 1), "rows": len(store)}


def stage_bm25(store_folder: str, out: str) -> dict:
    from odqa.corpus.store import PassageStore
    from odqa.indexes.bm25 import build_text_index
    from odqa.indexes.manifest import Manifest

    store = PassageStore.open(store_folder)

    def texts():
        for batch in store.iter_batches(5000):
            for title, text in zip(batch["title"], batch["text"]):
                yield f"{title} {text}"

    t0 = time.perf_counter()
    build_text_index(texts(), out, Manifest(kind="bm25"))
    return {"bm25_build_s": round(time.perf_counter() - t0, 1)}


def stage_bm25_query(store_folder: str, bm25_folder: str, questions: int, max_dfs: str = "0") -> dict:
    """odqa's BM25 top 100 and Tantivy's alone, for each `max_df` (`[retrieval] bm25_max_df`, comma-separated)
    in turn on every question, so each variant meets the same page-cache state."""
    from odqa.corpus.store import PassageStore
    from odqa.indexes.bm25 import clean_query, load_text_index

    t0 = time.perf_counter()
    store = PassageStore.open(store_folder)
    store.advise_random_reads()  # as an index's bundle opens it
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = load_text_index(bm25_folder)
    bm25_open_s = time.perf_counter() - t0
    queries = nq_questions(questions + 10)
    for q in queries[:10]:
        index.search([q], 100)  # warm-up
    variants = [float(m) for m in max_dfs.split(",")]
    timers = {m: (Timer(), Timer()) for m in variants}
    fetch = Timer()
    for q in queries[10:]:
        text = clean_query(q)
        terms = index.analyzer.analyze(text) if text else []
        for max_df in variants:
            search, engine = timers[max_df]
            with search:
                hits = index.search([q], 100, max_df=max_df)[0]
            if terms:
                query = index.terms_query(index.drop_frequent_terms(terms, max_df))
                with engine:  # Tantivy's top 100 alone, without the query's analysis or the hits' rows
                    index.searcher.search(query, 100, count=False)
        with fetch:
            store.get_rows([row for row, _ in hits[:20]])
    out = {
        "store_open_s": round(open_s, 3),
        "bm25_open_s": round(bm25_open_s, 3),
        "questions": len(fetch.wall),
        "store_fetch20": fetch.summary(),
    }
    for max_df, (search, engine) in timers.items():
        suffix = f"_max_df_{max_df:g}" if max_df else ""
        out[f"bm25_top100{suffix}"] = search.summary()
        out[f"tantivy_top100_no_rows{suffix}"] = engine.summary()
    return out


def cmd_passages(args) -> None:
    size = parse_size(args.size)
    folder = scale_home() / f"passages-{size_name(size)}"
    store, bm25 = folder / "passages", folder / "bm25"
    result = {"what": "passages", "size": size}
    if not (store / "passages.arrow").exists():
        out, rss = run_stage(["store", str(store), str(size)])
        result.update(out, store_peak_rss_gb=round(rss / 2**30, 2))
    if not (bm25 / "manifest.json").exists():
        out, rss = run_stage(["bm25", str(store), str(bm25)])
        result.update(out, bm25_peak_rss_gb=round(rss / 2**30, 2))
    result.update(store_disk_gb=round(disk_bytes(store) / 1e9, 2), bm25_disk_gb=round(disk_bytes(bm25) / 1e9, 2))
    out, rss = run_stage(
        ["bm25-query", str(store), str(bm25), str(args.questions), ",".join(str(m) for m in args.max_df)]
    )
    result.update(out, query_peak_rss_gb=round(rss / 2**30, 2))
    record(result)
    if args.delete:
        shutil.rmtree(folder)


# ---- vectors ------------------------------------------------------------------------------------------------
def cmd_real(args) -> None:
    """Real passage vectors (the default encoder, the subset's first passages) and NQ-dev question vectors."""
    from odqa.core.encoder_loading import load_text_encoder
    from odqa.core.models import DEFAULT_ENCODER
    from odqa.core.text_encoding import EncoderSettings, paired_query_encoder
    from odqa.corpus.readers import iter_passages

    folder = scale_home() / "real"
    folder.mkdir(parents=True, exist_ok=True)
    passages = []
    for p in iter_passages(WIKI):
        passages.append((p.title, p.text))
        if len(passages) == args.passages:
            break
    rng = random.Random(0)
    rng.shuffle(passages)  # the first articles alone would be a few topics
    t0 = time.perf_counter()
    encoder = load_text_encoder(EncoderSettings(DEFAULT_ENCODER, max_length=256))
    vectors = encoder.encode_passages(passages, batch_size=64)
    encode_s = time.perf_counter() - t0
    np.save(folder / "passages.npy", vectors.astype(np.float16))
    question_encoder = EncoderSettings(paired_query_encoder(DEFAULT_ENCODER) or DEFAULT_ENCODER, max_length=64)
    queries = load_text_encoder(question_encoder).encode_queries(nq_questions(args.questions))
    np.save(folder / "queries.npy", queries.astype(np.float32))
    record(
        {"what": "real-vectors", "passages": len(passages), "questions": len(queries), "encode_s": round(encode_s, 1)}
    )


def synthetic_vectors(size: int, path: Path, clusters: int = 1024, block: int = 200_000) -> None:
    """`size` unit vectors shaped like the real passage vectors: a k-means centroid of the real ones plus a random
    mix of two real residuals of that cluster and a little isotropic noise, so no two are alike (a plain sum of two
    residuals repeats each vector about 24 times at 1 M). Written beside `path` and renamed when whole, so an
    interrupted run never leaves a file of zeros that the next run takes for data."""
    import faiss

    real = np.load(scale_home() / "real" / "passages.npy").astype(np.float32)
    kmeans = faiss.Kmeans(DIM, min(clusters, len(real) // 20), niter=20, seed=0, spherical=True)
    kmeans.train(real)
    _, assign = kmeans.index.search(real, 1)
    assign = assign[:, 0]
    residuals = real - kmeans.centroids[assign]
    noise = 0.25 * float(np.sqrt(np.mean(residuals**2)))
    members = [np.flatnonzero(assign == c) for c in range(kmeans.k)]
    weights = np.array([len(m) for m in members], dtype=np.float64)
    rng = np.random.default_rng(0)
    partial = path.with_name(path.name + ".partial")
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float16, shape=(size, DIM))
    for start in range(0, size, block):
        n = min(block, size - start)
        cluster = rng.choice(kmeans.k, size=n, p=weights / weights.sum())

        def pick():  # called in this iteration (B023: late-bound loop variables)
            rows = rng.integers(0, 1 << 30, n) % weights[cluster].astype(np.int64)  # noqa: B023
            return np.array([members[c][i] for c, i in zip(cluster, rows)])  # noqa: B023

        a, b = rng.standard_normal((n, 1)), rng.standard_normal((n, 1))
        mix = (a * residuals[pick()] + b * residuals[pick()]) / np.sqrt(a * a + b * b)
        v = kmeans.centroids[cluster] + mix + noise * rng.standard_normal((n, DIM)).astype(np.float32)
        out[start : start + n] = v / np.linalg.norm(v, axis=1, keepdims=True)
    out.flush()
    del out
    os.replace(partial, path)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    from odqa.indexes.vector import _blocked_flat_search

    return _blocked_flat_search(vectors, queries, k, 262144)[1]


INDEX_KINDS = ("flat", "ivf", "ivfpq", "opq-ivfpq", "ivfpq96", "ivfsq8", "hnsw", "odqa-ivfpq")
ODQA_KIND = "odqa-ivfpq"  # odqa's own VectorIndex (indexes/vector.py) as `index` builds it, with its default settings


def factory(kind: str, n: int) -> str:
    nlist = 1 << max(6, int(round(np.log2(4 * np.sqrt(n)))))
    # "np": no polysemous training (slow, and odqa's ivfpq kind does without it)
    return {
        "ivf": f"IVF{nlist},Flat",
        "ivfpq": f"IVF{nlist},PQ48np",
        "opq-ivfpq": f"OPQ48,IVF{nlist},PQ48np",
        "ivfpq96": f"IVF{nlist},PQ96np",
        "ivfsq8": f"IVF{nlist},SQ8",
        "hnsw": "HNSW32,Flat",
        "hnsw-sq": "HNSW32,SQfp16",
    }[kind]


def stage_vector_build(vectors_path: str, kind: str, out: str) -> dict:
    import faiss

    vectors = np.load(vectors_path, mmap_mode="r")
    n = len(vectors)
    t0 = time.perf_counter()
    if kind == ODQA_KIND:
        from odqa.indexes.manifest import Manifest
        from odqa.indexes.vector import VectorIndex, VectorIndexParams

        linked = Path(out).with_name("odqa-input.npy")
        linked.unlink(missing_ok=True)
        os.link(vectors_path, linked)  # the build moves its input into the index folder
        index = VectorIndex.build(linked, out, Manifest(kind="faiss"), VectorIndexParams(kind="ivfpq"))
        build_s = time.perf_counter() - t0
        return {
            "build_s": round(build_s, 1),
            "params": {k: index.manifest.params.get(k) for k in ("nlist", "nprobe", "pq_m", "rerank")},
        }
    if kind == "flat":
        from odqa.indexes.vector import float16_copy_index

        index = float16_copy_index(vectors)
    else:
        index = faiss.index_factory(DIM, factory(kind, n), faiss.METRIC_INNER_PRODUCT)
        if kind == "hnsw":
            faiss.downcast_index(index).hnsw.efConstruction = 80
        if not index.is_trained:
            rng = np.random.default_rng(0)
            sample = np.sort(rng.choice(n, size=min(n, 100_000), replace=False))
            index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
        for start in range(0, n, 65536):
            index.add(np.ascontiguousarray(vectors[start : start + 65536], dtype=np.float32))
    build_s = time.perf_counter() - t0
    faiss.write_index(index, out)
    return {"build_s": round(build_s, 1), "disk_gb": round(os.path.getsize(out) / 1e9, 3)}


def search_settings(kind: str) -> list[tuple[str, int]]:
    if kind.startswith(("ivf", "opq")):
        return [("nprobe", p) for p in (8, 16, 32, 64, 128)]
    if kind == "hnsw":
        return [("efSearch", e) for e in (32, 64, 128, 256)]
    return [("", 0)]


def rerank_depths(kind: str) -> tuple[int, ...]:
    """Candidates rescored from the float16 vectors: none, and for the kinds that score lossy codes, odqa's
    default (100) and more."""
    return (0, 100, 400) if "pq" in kind else (0, 100) if "sq" in kind else (0,)


def timed_top20(queries: np.ndarray, truth: np.ndarray, search) -> dict:
    """recall@20 against `truth` and the time of `search(question vector) -> rows, best first`, one at a time."""
    timer, found = Timer(), []
    for q in queries:
        with timer:
            top = search(q)
        found.append(top[:20])
    recall = float(np.mean([len(set(f) & set(t[:20])) / 20 for f, t in zip(found, truth)]))
    return {"recall20": round(recall, 4), **timer.summary()}


def stage_vector_query(
    vectors_path: str, index_path: str, kind: str, truth_path: str, queries_path: str, depths: str = ""
) -> dict:
    import faiss

    faiss.omp_set_num_threads(1)  # one question at a time on one thread: its CPU time is its cost
    vectors = np.load(vectors_path, mmap_mode="r")
    queries = np.load(queries_path)
    truth = np.load(truth_path)
    if kind == ODQA_KIND:
        from odqa.indexes.vector import VectorIndex

        t0 = time.perf_counter()
        index = VectorIndex.load(index_path)
        open_s = time.perf_counter() - t0
        from odqa.indexes.vector import _set_search_params

        def search(q):
            return index.search(np.asarray(q[None, :], dtype=np.float32), 20)[1][0]

        rows = [
            {
                "setting": "odqa defaults",
                "rerank": int(index.manifest.params.get("rerank", 0)),
                **timed_top20(queries, truth, search),
            }
        ]
        for depth in depths.split(",") if depths else ():  # other nprobe:rerank, as a manifest would record them
            nprobe, rerank = (int(x) for x in depth.split(":"))
            index.manifest.params.update(nprobe=nprobe, rerank=rerank)
            _set_search_params(index.faiss_index, index.manifest.params)
            rows.append({"setting": f"nprobe={nprobe}", "rerank": rerank, **timed_top20(queries, truth, search)})
        return {"open_s": round(open_s, 2), "searches": rows}
    t0 = time.perf_counter()
    index = faiss.read_index(index_path)
    open_s = time.perf_counter() - t0
    rows = []
    for name, value in search_settings(kind):
        if name == "nprobe":
            faiss.extract_index_ivf(index).nprobe = value
        elif name == "efSearch":
            faiss.downcast_index(index).hnsw.efSearch = value
        for refine in rerank_depths(kind):

            def search(q, refine=refine):
                top = index.search(q[None, :], refine or 20)[1][0]
                if refine:  # rerank the candidates with their float16 vectors read from the memmap
                    cand = np.sort(top[top >= 0])
                    exact = np.asarray(vectors[cand], dtype=np.float32) @ q
                    top = cand[np.argsort(-exact)[:20]]
                return top

            rows.append(
                {"setting": f"{name}={value}" if name else "", "rerank": refine, **timed_top20(queries, truth, search)}
            )
    return {"open_s": round(open_s, 2), "searches": rows}


def cmd_vectors(args) -> None:
    from odqa.indexes.vector import FAISS_FILE

    home = scale_home()
    if args.real:
        size, folder = 0, home / "vectors-real"
        folder.mkdir(parents=True, exist_ok=True)
        vectors_path = folder / "vectors.npy"
        if not vectors_path.exists():
            shutil.copy(home / "real" / "passages.npy", vectors_path)
        size = len(np.load(vectors_path, mmap_mode="r"))
    else:
        size = parse_size(args.size)
        folder = home / f"vectors-{size_name(size)}"
        folder.mkdir(parents=True, exist_ok=True)
        vectors_path = folder / "vectors.npy"
        if not vectors_path.exists():
            t0 = time.perf_counter()
            synthetic_vectors(size, vectors_path)
            print(f"generated {size} vectors in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    queries_path = home / "real" / "queries.npy"
    truth_path = folder / "truth.npy"
    if not truth_path.exists():
        # in a child: the pages exact search reads would otherwise count in the RSS of every stage forked after it
        run_stage(["vector-truth", str(vectors_path), str(queries_path), str(truth_path)])
    for kind in args.kinds:
        index_path = folder / f"{kind}.faiss"
        result = {
            "what": "vectors",
            "size": size,
            "real": bool(args.real),
            "kind": kind,
            "factory": "" if kind in ("flat", ODQA_KIND) else factory(kind, size),
        }
        if not index_path.exists():
            out, rss = run_stage(["vector-build", str(vectors_path), kind, str(index_path)])
            result.update(out, build_peak_rss_gb=round(rss / 2**30, 2))
        faiss_file = index_path / FAISS_FILE if index_path.is_dir() else index_path
        result["disk_gb"] = round(faiss_file.stat().st_size / 1e9, 3)
        out, rss = run_stage(
            [
                "vector-query",
                str(vectors_path),
                str(index_path),
                kind,
                str(truth_path),
                str(queries_path),
                ",".join(args.depths) if kind == ODQA_KIND else "",
            ]
        )
        result.update(out, query_peak_rss_gb=round(rss / 2**30, 2))
        record(result)
        if not args.keep:
            shutil.rmtree(index_path) if index_path.is_dir() else index_path.unlink()


def synthetic_entities(size: int):
    """`size` knowledge-base entries: the subset's entities drawn again and again; round r > 0 renames the id
    (`r{r}-{id}`) and qualifies the title (`Title (r)`), keeping the original aliases, so a common name gets
    one candidate per round, as a common name of full Wikipedia gets many. Streamed, as `KnowledgeBase.write`
    takes them."""
    from dataclasses import replace

    from odqa.corpus.readers import iter_documents
    from odqa.linker.kb import entry_from_document, is_disambiguation

    base = [entry_from_document(d) for d in iter_documents(WIKI) if not is_disambiguation(d) and d.title]
    for n in range(size):
        r, e = divmod(n, len(base))
        entry = base[e]
        if r:
            title = f"{entry.title} ({r})"
            entry = replace(entry, id=f"r{r}-{entry.id}", title=title, aliases=(title, *entry.aliases))
        yield entry


def reference_kb(path: str | None) -> Path:
    """The real subset KB (`run_qa.py build-kb --corpus ../shared/data/wiki --out work_indexes/kb`): its entity
    vectors seed the simulated ones, and its links are what the simulated KB should still find."""
    from odqa.core.paths import odqa_home

    kb = Path(path) if path else odqa_home() / "work_indexes" / "kb"
    if not (kb / "manifest.json").is_file():
        sys.exit(
            f"scale.py kb: no knowledge base at {kb}; build the subset's with `python run_qa.py build-kb "
            f"--corpus ../shared/data/wiki --out {kb}` (about 7 minutes), or pass --reference-kb"
        )
    return kb


def synthetic_entity_vectors(
    size: int, reference: Path, path: Path, block: int = 200_000, copy_cosine: float = 0.9, namesakes: str = "distinct"
) -> None:
    """`size` entity vectors following synthetic_entities: row n is the real entity n % R of the reference KB,
    itself in round 0; in round r > 0 a namesake (same aliases), whose vector is another real entity's, drawn at
    random (`distinct`: one name, unrelated meanings, as "Paris" the city and Paris Hilton), or the original's
    (`near`: a near-duplicate), plus isotropic noise at about `copy_cosine` to it, normalised. float16, renamed
    when whole."""
    from odqa.linker.kb import KnowledgeBase

    kb = KnowledgeBase.load(reference)
    real = np.asarray(kb.vectors, dtype=np.float32)
    base_ids = [e.id for e in synthetic_entities(len(real))]
    if base_ids != [e.id for e in kb.entries]:
        sys.exit(f"scale.py kb: {reference} holds other entities than {WIKI}; rebuild it from that corpus")
    sigma = float(np.sqrt((1 / copy_cosine**2 - 1) / real.shape[1]))
    rng = np.random.default_rng(0)
    partial = path.with_name(path.name + ".partial")
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float16, shape=(size, real.shape[1]))
    for start in range(0, size, block):
        rows = np.arange(start, min(size, start + block))
        copy = rows >= len(real)
        source = rows % len(real)
        if namesakes == "distinct":
            source = np.where(copy, rng.integers(0, len(real), len(rows)), source)
        v = real[source] + copy[:, None] * sigma * rng.standard_normal((len(rows), real.shape[1])).astype(np.float32)
        out[start : start + len(rows)] = v / np.linalg.norm(v, axis=1, keepdims=True)
    out.flush()
    del out
    os.replace(partial, path)


def stage_kb_build(size: int, vectors_path: str, kind: str, out: str) -> dict:
    from odqa.indexes.vector import VectorIndexParams
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

    config = Linker.from_pretrained("linker").config
    vectors = np.load(vectors_path, mmap_mode="r")[:size]
    t0 = time.perf_counter()
    KnowledgeBase.write(
        synthetic_entities(size),
        vectors,
        out,
        config.entity_encoder,
        config.entity_dim,
        {"synthetic": True},
        VectorIndexParams(kind=kind),
    )
    return {"write_s": round(time.perf_counter() - t0, 1), "disk_gb": round(disk_bytes(Path(out)) / 1e9, 2)}


def resident_gb() -> float:
    from retrieval import rss_mb  # bench/retrieval.py: this script's folder is first on sys.path

    return round(rss_mb() / 1024, 2)


def stage_kb_query(kb_path: str, questions: int, reference: str) -> dict:
    """Load the KB and the shipped linker, link one question (lazy structures built), then each of the others
    alone: the time a question waits for its entities. Then the same questions over the reference (real) KB:
    `links_kept` is the share of its links (span, entity) that the simulated KB also gives, a namesake's copy
    counting as wrong."""
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

    t0 = time.perf_counter()
    kb = KnowledgeBase.load(kb_path)
    load_s, load_rss = time.perf_counter() - t0, resident_gb()
    linker = Linker.from_pretrained("linker", kb=kb)
    texts = nq_questions(questions + 1)
    t0 = time.perf_counter()
    linked = linker.link([texts[0]])
    first_s = time.perf_counter() - t0
    timer = Timer()
    for text in texts[1:]:
        with timer:
            linked += linker.link([text])
    after = resident_gb()
    expected = Linker.from_pretrained("linker", kb=KnowledgeBase.load(reference)).link(texts)

    def links(mentions) -> set:
        return {(m.start, m.end, m.entity.id) for m in mentions if m.entity is not None}

    found = [links(m) for m in linked]
    wanted = [links(m) for m in expected]
    kept = sum(len(f & w) for f, w in zip(found, wanted))
    return {
        "count": len(kb),
        "kind": kb.index.manifest.params.get("kind") if kb.index else None,
        "load_s": round(load_s, 1),
        "load_rss_gb": load_rss,
        "first_question_s": round(first_s, 2),
        "rss_after_gb": after,
        "questions": len(texts),
        "mentions": sum(map(len, found)),
        "reference_mentions": sum(map(len, wanted)),
        "links_kept": round(kept / max(1, sum(map(len, wanted))), 3),
        "link": timer.summary(),
    }


def cmd_kb(args) -> None:
    """The linker over `--size` simulated entities (KnowledgeBase.load, then Linker.link one question at a time):
    KB build time and disk, load time and memory, the first question (lazy structures) and p50/p99 after it."""
    size = parse_size(args.size)
    reference = reference_kb(args.reference_kb)
    folder = scale_home() / f"entity-vectors-{size_name(size)}-{args.namesakes}"
    if not (folder / "vectors.npy").exists():
        folder.mkdir(parents=True, exist_ok=True)
        synthetic_entity_vectors(size, reference, folder / "vectors.npy", namesakes=args.namesakes)
    for kind in args.kinds or ["auto"]:
        kb_path = scale_home() / f"kb-{size_name(size)}-{kind}-{args.namesakes}"
        result = {"what": "kb", "size": size, "requested_kind": kind, "namesakes": args.namesakes}
        if not (kb_path / "manifest.json").exists():
            out, rss = run_stage(["kb-build", str(size), str(folder / "vectors.npy"), kind, str(kb_path)])
            result.update(out, build_peak_rss_gb=round(rss / 2**30, 2))
        out, rss = run_stage(["kb-query", str(kb_path), str(args.questions), str(reference)])
        result.update(out, query_peak_rss_gb=round(rss / 2**30, 2))
        record(result)
        print(json.dumps(result))
        if args.delete:
            shutil.rmtree(kb_path)


def disk_read_bytes() -> int:
    """Bytes this process has caused to be read from the disk (page-cache misses, readahead included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def evict(path: Path) -> None:
    """Drop the file's clean pages from the page cache (those no process maps), so a read starts cold."""
    with path.open("rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def cmd_rows(args) -> None:
    """Random rows of a large vector file, as an ivfpq index rescoring its candidates reads them: through the
    plain memory map (the kernel reads ahead around each miss: up to the device's read_ahead_kb) and through one
    advised MADV_RANDOM (each miss reads its page alone). Each variant runs alone from a cold page cache (the
    file evicted first: one variant's readahead would otherwise serve the other's reads)."""
    from odqa.indexes.vector import advise_random_rows, prefetch_rows

    size = parse_size(args.size)
    path = scale_home() / f"vectors-{size_name(size)}" / "vectors.npy"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python bench/scale.py vectors --size {args.size}` first")
    result = {
        "what": "rows",
        "size": size,
        "rows": args.rows,
        "questions": args.questions,
        "read_ahead_kb": read_ahead_kb(path),
    }
    for name in ("plain", "random", "random-willneed"):
        vectors = np.load(path, mmap_mode="r")
        if name != "plain":
            advise_random_rows(vectors)
        evict(path)
        rng = np.random.default_rng(args.seed)  # the same rows for each
        timer, before = Timer(), disk_read_bytes()
        for _ in range(args.questions):
            rows = np.sort(rng.choice(len(vectors), size=args.rows, replace=False))
            with timer:
                if name == "random-willneed":  # every row's pages asked for at once, read in parallel
                    prefetch_rows(vectors, rows)
                np.asarray(vectors[rows], dtype=np.float32).sum()
        result[name] = {
            **timer.summary(),
            "disk_mb_per_question": round((disk_read_bytes() - before) / args.questions / 1e6, 2),
        }
        del vectors
    record(result)
    print(json.dumps(result))


def read_ahead_kb(path: Path) -> int | None:
    """The readahead of the block device that holds `path` (what a page-cache miss may read), if found."""
    try:
        dev = os.stat(path).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        for folder in (block, block.parent):
            if (folder / "queue" / "read_ahead_kb").exists():
                return int((folder / "queue" / "read_ahead_kb").read_text())
    except OSError:
        pass
    return None


# ---- whole ask -----------------------------------------------------------------------------------------------
OLD_BLOCK = 4 << 20  # the block of a 16 GB file before sidecars: 64 KiB doubled until at most 4096 blocks


def file_records(passages_folder: str, vector_index: str, checks: str) -> dict:
    """Digest records of the store's and the vectors' files as `index` writes them (`checks` "64KiB": 64 KiB
    blocks, a sidecar beside a large file) or as it wrote them before ("4MiB": at most 4096 blocks inline),
    computed once and kept beside the data."""
    from odqa.corpus.store import DATA_FILE
    from odqa.indexes.integrity import describe_file
    from odqa.indexes.vector import EMBEDDINGS

    files = {"store": Path(passages_folder) / "passages" / DATA_FILE, "vectors": Path(vector_index) / EMBEDDINGS}
    saved = Path(passages_folder) / f"records-{checks}.json"
    if saved.exists():
        return json.loads(saved.read_text())
    records = {}
    for name, path in files.items():
        if checks == "64KiB":
            records[name] = describe_file(path)
        else:
            import xxhash

            with path.open("rb") as f:
                digests = b"".join(xxhash.xxh3_64_digest(d) for d in iter(lambda: f.read(OLD_BLOCK), b""))
            records[name] = {"size": path.stat().st_size, "blocks": {"size": OLD_BLOCK, "xxh3": digests.hex()}}
    saved.write_text(json.dumps(records))
    return records


def stage_ask(
    passages_folder: str, vector_index: str, questions: int, checks: str = "none", cold: str = "", settings: str = "{}"
) -> dict:
    """A default `ask` over the simulated corpus: the hybrid of its BM25 index and the dense index over its
    simulated vectors (built by `vectors --kinds odqa-ivfpq --keep`), rrf fusion, the shipped reader on the fused
    top k, the real question encoder; the pipeline's own ask_batch, linking off (the kb command measures it).
    The dense hits are simulated vectors' rows, so the answers mean nothing: the times and memory do."""
    from odqa.config import OdqaConfig
    from odqa.core.models import DEFAULT_ENCODER
    from odqa.core.protocols import TEXT, VECTORS
    from odqa.core.types import BackendInfo, EncoderRecord, SearchHit
    from odqa.corpus.articles import StoreArticlePassages
    from odqa.corpus.store import PassageStore
    from odqa.indexes.bm25 import default_max_df, load_text_index
    from odqa.indexes.vector import VectorIndex
    from odqa.pipeline import Pipeline
    from odqa.reader.settings import resolve_reader
    from odqa.retriever.registry import build_retriever

    class SimulatedCorpusPipeline(Pipeline):
        """The pipeline over retrievers given to it, not over an index folder's bundle."""

        def __init__(self, config, retriever, size):
            super().__init__(config)
            self._retrievers[config.retrieval.retriever] = retriever
            self._reader_name, self._size = resolve_reader(config.reader.model)[0], size  # no index: no language

        @property
        def corpus_size(self) -> int:
            return self._size

        def language_differs(self, question):
            return None

    class SimulatedStore:
        """The simulated corpus's passage store, BM25 index and vectors as one store (a SearchBackend)."""

        def __init__(self, store, text_index, vectors):
            self.store, self.text_index, self.vectors = store, text_index, vectors

        def __len__(self) -> int:
            return len(self.store)

        def info(self) -> BackendInfo:
            prunes = hasattr(self.text_index, "drop_frequent_terms")
            return BackendInfo(
                location=str(passages_folder),
                vectors=True,
                encoder=EncoderRecord(DEFAULT_ENCODER),
                bm25_max_df=default_max_df(self.text_index.num_docs()) if prunes else 0.0,
            )

        def text_search(self, questions, k, max_df):
            found = (
                self.text_index.search(list(questions), k, max_df=max_df)
                if max_df
                else self.text_index.search(list(questions), k)
            )
            return [[SearchHit(row=row, score=score, source="bm25") for row, score in hits] for hits in found]

        def vector_search(self, vectors, k):
            scores, rows = self.vectors.search(vectors, k)
            return [
                [SearchHit(row=int(r), score=float(s), source="dense") for s, r in zip(qs, qr) if r >= 0]
                for qs, qr in zip(scores, rows)
            ]

        def passages(self, rows):
            return self.store.get_rows(list(rows))

        def article_passages(self):
            return StoreArticlePassages(self.store)

        def capabilities(self):
            return frozenset({TEXT, VECTORS})

        def check_available(self, capability):
            pass

    from odqa.indexes.integrity import FileCheck
    from odqa.indexes.vector import EMBEDDINGS

    config = OdqaConfig.load(None, {"linker.enabled": False, **json.loads(settings)})
    records = file_records(passages_folder, vector_index, checks) if checks != "none" else None
    if cold:  # every file a question reads evicted from the page cache: the first questions read from disk
        for folder in (Path(passages_folder), Path(vector_index)):
            for file in folder.rglob("*"):
                if file.is_file():
                    evict(file)
    t0 = time.perf_counter()
    store = PassageStore.open(Path(passages_folder) / "passages")
    store.advise_random_reads()  # as an index's bundle opens it
    vector_check = None
    if records:  # what an index's bundle does: every byte an answer is built from checked at its first read
        store.verify_with(
            FileCheck(
                records["store"],
                store.byte_reader(),
                "passages",
                "rebuild it",
                folder=Path(passages_folder) / "passages",
            )
        )

        def vector_check(name, read):
            return (
                FileCheck(records["vectors"], read, name, "rebuild it", folder=vector_index)
                if name == EMBEDDINGS
                else None
            )

    simulated = SimulatedStore(
        store, load_text_index(Path(passages_folder) / "bm25"), VectorIndex.load(vector_index, check=vector_check)
    )
    hybrid = build_retriever(simulated, config.retrieval, config.retriever_runtime(), "hybrid")
    method = hybrid.fusion.method
    pipeline = SimulatedCorpusPipeline(config, hybrid, len(store))
    open_s = time.perf_counter() - t0
    asked = nq_questions(questions + 5)
    for question in asked[:5]:  # the reader and the encoder load, and their first calls
        pipeline.ask(question)
    total, parts = Timer(), {"retrieve": [], "read": []}
    for question in asked[5:]:
        with total:
            result = pipeline.ask(question)
        for name in parts:
            parts[name].append(result.timings[name])
    return {
        "open_s": round(open_s, 2),
        "questions": len(total.wall),
        "fusion": method,
        "checks": checks,
        "cold": bool(cold),
        "settings": json.loads(settings),
        "bm25_max_df": hybrid.sparse.max_df,
        "k": config.retrieval.k,
        "ask": percentiles(total.wall),
        **{name: percentiles(values) for name, values in parts.items()},
        "rss_gb": resident_gb(),
    }


def cmd_ask(args) -> None:
    size = parse_size(args.size)
    passages = scale_home() / f"passages-{size_name(size)}"
    vector_index = scale_home() / f"vectors-{size_name(size)}" / f"{ODQA_KIND}.faiss"
    for needed, command in (
        (passages / "bm25" / "manifest.json", f"passages --size {args.size}"),
        (vector_index / "manifest.json", f"vectors --size {args.size} --kinds {ODQA_KIND} --keep"),
    ):
        if not needed.exists():
            raise SystemExit(f"{needed} is missing: run `python bench/scale.py {command}` first")
    from qa import parse_settings  # config overrides as strings: OdqaConfig.load coerces them

    settings = parse_settings(",".join(args.set)) if args.set else {}
    result = {"what": "ask", "size": size, "checks": args.checks}
    out, rss = run_stage(
        [
            "ask",
            str(passages),
            str(vector_index),
            str(args.questions),
            args.checks,
            "cold" if args.cold else "",
            json.dumps(settings),
        ]
    )
    result.update(out, peak_rss_gb=round(rss / 2**30, 2))
    record(result)


def stage(argv: list[str]) -> None:
    name, rest = argv[0], argv[1:]
    if name == "store":
        out = stage_store(rest[0], int(rest[1]))
    elif name == "bm25":
        out = stage_bm25(rest[0], rest[1])
    elif name == "bm25-query":
        out = stage_bm25_query(rest[0], rest[1], int(rest[2]), *rest[3:])
    elif name == "vector-build":
        out = stage_vector_build(*rest)
    elif name == "vector-query":
        out = stage_vector_query(*rest)
    elif name == "kb-build":
        out = stage_kb_build(int(rest[0]), rest[1], rest[2], rest[3])
    elif name == "ask":
        out = stage_ask(rest[0], rest[1], int(rest[2]), *rest[3:])
    elif name == "kb-query":
        out = stage_kb_query(rest[0], int(rest[1]), rest[2])
    elif name == "vector-truth":
        np.save(rest[2], exact_top(np.load(rest[0], mmap_mode="r"), np.load(rest[1]), 20))
        out = {}
    else:
        raise SystemExit(f"unknown stage {name}")
    print(json.dumps(out))


def cmd_report(args) -> None:
    from odqa.core.device import cpu_model_and_flags

    model, flags = cpu_model_and_flags(["avx2", "avx512f", "avx512_bf16", "amx_bf16"])
    print(f"CPU: {model} ({', '.join(flags)}), {os.cpu_count()} cores\n")
    for line in (scale_home() / "results.jsonl").read_text().splitlines():
        print(line)


def main(argv=None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "stage":
        return stage(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("passages")
    p.add_argument("--size", default="1M")
    p.add_argument("--questions", type=int, default=300)
    p.add_argument(
        "--max-df",
        type=float,
        nargs="+",
        default=[0.0],
        help="search with each [retrieval] bm25_max_df in turn (0: every term)",
    )
    p.add_argument("--delete", action="store_true", help="remove the generated store and index afterwards")
    p.set_defaults(run=cmd_passages)
    p = sub.add_parser("real")
    p.add_argument("--passages", type=int, default=20000)
    p.add_argument("--questions", type=int, default=300)
    p.set_defaults(run=cmd_real)
    p = sub.add_parser("vectors")
    p.add_argument("--size", default="1M")
    p.add_argument("--real", action="store_true", help="the real passage vectors of `real` instead")
    p.add_argument("--kinds", nargs="+", default=list(INDEX_KINDS), choices=[*INDEX_KINDS, "hnsw-sq"])
    p.add_argument("--keep", action="store_true", help="keep the built FAISS files")
    p.add_argument(
        "--depths",
        nargs="*",
        default=[],
        metavar="NPROBE:RERANK",
        help=f"{ODQA_KIND}: also search with these settings (e.g. 128:200 192:200)",
    )
    p.set_defaults(run=cmd_vectors)
    p = sub.add_parser("kb")
    p.add_argument("--size", default="1M")
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=["auto", "flat", "hnsw", "ivf", "ivfpq"],
        help="entity index kinds (default: auto, what build-kb picks)",
    )
    p.add_argument("--questions", type=int, default=200)
    p.add_argument("--delete", action="store_true", help="remove the built KB afterwards")
    p.add_argument(
        "--namesakes",
        choices=["distinct", "near"],
        default="distinct",
        help="a later round's vector: another real entity's (distinct) or the original's (near)",
    )
    p.add_argument(
        "--reference-kb",
        help="the real KB whose entities are drawn again (default: "
        "$ODQA_HOME/work_indexes/kb, built from ../shared/data/wiki)",
    )
    p.set_defaults(run=cmd_kb)
    p = sub.add_parser("ask", help="a default ask (hybrid + reader) over the simulated passages and vectors")
    p.add_argument("--size", default="1M")
    p.add_argument("--questions", type=int, default=200)
    p.add_argument(
        "--checks",
        choices=["none", "64KiB", "4MiB"],
        default="64KiB",
        help="check the bytes read against block digests as an index does (64KiB: now, a sidecar "
        "beside a large file; 4MiB: before, at most 4096 blocks inline); none: unchecked",
    )
    p.add_argument("--cold", action="store_true", help="evict the index's files from the page cache first")
    p.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="config settings, e.g. retrieval.bm25_max_df=0"
    )
    p.set_defaults(run=cmd_ask)
    p = sub.add_parser("rows", help="random vector rows read through a plain and a MADV_RANDOM memory map")
    p.add_argument("--size", default="21M")
    p.add_argument("--rows", type=int, default=200, help="rows a question reads (ivfpq's rerank depth)")
    p.add_argument("--questions", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_rows)
    p = sub.add_parser("report")
    p.set_defaults(run=cmd_report)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
