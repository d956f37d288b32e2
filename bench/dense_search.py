#!/usr/bin/env python3
"""Dense search per question: a flat float16 index searched from memory (the default up to
`odqa.indexes.vector.RESIDENT_FP16_BYTES`) against the memmap in blocks (larger indexes), both exact; and the
linker's entity search, float16 copies against the exact float32 scan.

    python bench/dense_search.py --index $ODQA_HOME/bench/squad-open/index-retriever-int8
    python bench/dense_search.py --synthetic 759461      # random 384-d vectors of the Wikipedia subset's size
    python bench/dense_search.py --kb work_indexes/kb --link ../shared/data/squad/dev-v1.1.json   # linking

Times `VectorIndex.search` for one question at a time (what `ask` and the shell do; `eval-qa` batches) and for
batches of 8, top 100, after one warm-up search (the copy in memory is built there: its time is given apart),
and checks both paths return the same rows. `--kb` links `--link-limit` questions one at a time with the shipped
linker on both entity searches (each question on both, which goes first alternating) and counts equal links.
With `--ask QUESTIONS` it also times whole `ask`s over `--index` with
the default settings (hybrid retrieval, reader; the linker off, as an index may have no knowledge base), one
question at a time, each question on both paths (which goes first alternates).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def dense_folder(path: Path) -> Path:
    """An index root's `dense/` folder, or the folder itself."""
    return path / "dense" if (path / "dense" / "manifest.json").is_file() else path


def synthetic_index(rows: int, dim: int, folder: Path):
    from odqa.indexes.manifest import Manifest
    from odqa.indexes.vector import VectorIndex

    rng = np.random.default_rng(0)
    source = np.lib.format.open_memmap(folder / "vectors.npy", mode="w+", dtype=np.float16, shape=(rows, dim))
    for start in range(0, rows, 100_000):
        block = rng.standard_normal((min(100_000, rows - start), dim)).astype(np.float32)
        source[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    source.flush()
    del source
    return VectorIndex.build(folder / "vectors.npy", folder / "index", Manifest(kind="faiss"))


def time_searches(search, queries: np.ndarray, batch: int, k: int) -> tuple[list[float], np.ndarray]:
    seconds, rows = [], []
    for start in range(0, len(queries), batch):
        t0 = time.perf_counter()
        _, found = search(queries[start : start + batch], k)
        seconds.append((time.perf_counter() - t0) / len(queries[start : start + batch]))
        rows.append(found)
    return seconds, np.concatenate(rows)


def time_asks(index: Path, questions: Path, limit: int) -> dict[str, float]:
    """Median ms of a whole `ask` with the float16 vectors in memory and from the memmap, same questions."""
    import odqa.indexes.vector
    from odqa.config import OdqaConfig
    from odqa.corpus.questions import load_questions
    from odqa.pipeline import Pipeline

    pipeline = Pipeline(OdqaConfig.load(None, {"index": str(index), "linker.enabled": False}))
    items = load_questions(questions)[: limit + 1]
    pipeline.ask(items[0].question)  # loads every model and builds the copy in memory
    limits = {"in memory": odqa.indexes.vector.RESIDENT_FP16_BYTES, "memmap blocks": -1}
    seconds: dict[str, list[float]] = {name: [] for name in limits}
    for n, item in enumerate(items[1:]):
        for name in list(limits)[:: 1 if n % 2 else -1]:  # each question on both paths, in turns first
            odqa.indexes.vector.RESIDENT_FP16_BYTES = limits[name]
            t0 = time.perf_counter()
            pipeline.ask(item.question)
            seconds[name].append(time.perf_counter() - t0)
    odqa.indexes.vector.RESIDENT_FP16_BYTES = limits["in memory"]
    return {name: round(1000 * statistics.median(s), 1) for name, s in seconds.items()}


def time_links(kb_path: Path, questions: Path, limit: int) -> dict:
    """Median ms of linking one question with the KB searched through float16 copies (the default) and by an
    exact float32 scan, each question on both; and how many questions got the same links."""
    import faiss

    from odqa.corpus.questions import load_questions
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

    kb = KnowledgeBase.load(kb_path)
    linker = Linker.from_pretrained("linker", kb=kb)
    texts = [item.question for item in load_questions(questions)[:limit]]
    linker.link(texts[:3])  # loads the model and builds the default search
    exact = faiss.IndexFlatIP(kb.vectors.shape[1])
    exact.add(kb.vectors)
    searches = {"float16 copies": kb._candidate_index, "float32 exact": exact}
    seconds: dict[str, list[float]] = {name: [] for name in searches}
    same = 0
    for n, text in enumerate(texts):
        links = {}
        for name in list(searches)[:: 1 if n % 2 else -1]:
            kb._candidate_index = searches[name]
            t0 = time.perf_counter()
            links[name] = linker.link([text])
            seconds[name].append(time.perf_counter() - t0)
        same += links["float16 copies"] == links["float32 exact"]
    kb._candidate_index = searches["float16 copies"]
    return {
        "questions": len(texts),
        "same_links": same,
        "link_ms_median": {name: round(1000 * statistics.median(s), 2) for name, s in seconds.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--kb", type=Path, help="a knowledge base folder (build-kb): time linking, with --link")
    ap.add_argument("--link", type=Path, metavar="QUESTIONS", help="with --kb: the questions to link")
    ap.add_argument("--link-limit", type=int, default=400)
    source.add_argument("--index", type=Path, help="an index folder with a flat float16 dense index")
    source.add_argument("--synthetic", type=int, metavar="ROWS", help="random unit vectors, this many")
    ap.add_argument("--dim", type=int, default=384, help="with --synthetic")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--ask", type=Path, metavar="QUESTIONS", help="with --index: time whole asks of these questions")
    ap.add_argument("--ask-limit", type=int, default=100)
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args(argv)

    from odqa.core.device import cpu_description
    from odqa.indexes.vector import VectorIndex, _blocked_flat_search

    if args.kb:
        if not args.link:
            ap.error("--kb needs --link QUESTIONS")
        result = {"kb": str(args.kb), "cpu": cpu_description(), **time_links(args.kb, args.link, args.link_limit)}
        print(
            f"{args.kb}; {result['cpu']}; linking {result['questions']} questions one at a time, median ms: "
            + ", ".join(f"{name} {ms}" for name, ms in result["link_ms_median"].items())
            + f"; the same links for {result['same_links']} of them"
        )
        if args.json:
            print(json.dumps(result))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        if args.synthetic:
            index = synthetic_index(args.synthetic, args.dim, Path(tmp))
            what = f"{args.synthetic:,} random {args.dim}-d float16 vectors"
        else:
            index = VectorIndex.load(dense_folder(args.index), use_gpu=False)
            what = f"{dense_folder(args.index)} ({len(index):,} x {index.dim}, {index.embeddings.dtype})"
        if index.faiss_index is not None or index.embeddings.dtype != np.float16:
            print(f"{what}: not a flat float16 index, nothing to compare", file=sys.stderr)
            return 2
        rng = np.random.default_rng(1)
        picks = rng.choice(len(index), args.queries)
        noise = 0.1 * rng.standard_normal((args.queries, index.dim)).astype(np.float32)  # near a stored vector
        queries = np.asarray(index.embeddings[picks], dtype=np.float32) + noise

        t0 = time.perf_counter()
        index.search(queries[:1], args.k)
        build_s = time.perf_counter() - t0
        paths = {
            "in memory": index.search,
            "memmap blocks": lambda q, k: _blocked_flat_search(index.embeddings, q, k, 262144),
        }
        _blocked_flat_search(index.embeddings, queries[:1], args.k, 262144)  # warm the page cache
        result = {"index": what, "cpu": cpu_description(), "first_search_s": round(build_s, 2), "paths": {}}
        found = {}
        for name, search in paths.items():
            for batch in (1, 8):
                seconds, found[name, batch] = time_searches(search, queries, batch, args.k)
                result["paths"][f"{name}, batch {batch}"] = round(1000 * statistics.median(seconds), 2)
        result["same_rows"] = all(np.array_equal(found["in memory", b], found["memmap blocks", b]) for b in (1, 8))

    print(f"{result['index']}; {result['cpu']}; first search (builds the copy in memory) {build_s:.2f} s\n")
    print("| path | ms per question, one at a time | ms per question, batches of 8 |\n|---|---:|---:|")
    for name in paths:
        print(f"| {name} | {result['paths'][f'{name}, batch 1']} | {result['paths'][f'{name}, batch 8']} |")
    print(f"\nsame rows on both paths: {result['same_rows']}")
    if args.ask and args.index:
        result["ask_ms_median"] = time_asks(args.index, args.ask, args.ask_limit)
        print(
            f"\nwhole `ask`s, {args.ask_limit} questions of {args.ask}, median ms:",
            ", ".join(f"{name} {ms}" for name, ms in result["ask_ms_median"].items()),
        )
    if args.json:
        print(json.dumps(result))
    return 0 if result["same_rows"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
