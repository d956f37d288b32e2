#!/usr/bin/env python3
"""What the index checks cost (issue 47): opening an index and searching it, with the code before the block
checks (`--baseline`, a git revision, checked out into a temporary folder with `git archive`) against this
checkout, on the same files.

    python bench/integrity.py --index $ODQA_HOME/work_indexes/wiki --baseline 5219ed4
    python bench/integrity.py --demo --baseline 5219ed4 --ask     # the demo index, and whole `ask`s

The index is linked (hard links, nothing copied) into two folders: the baseline reads it as built; this
checkout reads a copy whose bundle manifest `verify-index` gave block digests (where it had none), so both
read the same bytes. Each round starts a fresh process per side (which side goes first alternates), which
opens the index (the bundle, its passage store, the retriever: the BM25 files are checked whole here, the
vectors at the first dense search) and answers `--queries` questions one at a time (`--k` hits with their
passages: the store checks the blocks those rows lie in, once each). Reported, in wall and CPU time: the open
time, the first search (the first blocks checked), the median of the others; with `--ask`, whole asks (reader
included, linker off) in the same process. Also: an index built before block digests, read by this checkout (each file
checked whole against its SHA-256 at first use), and the same index with no file records at all, read by this
checkout: nothing checked, so this checkout's own cost without the checks (the baseline differs from this
checkout in more than the checks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURE = r"""
import json, statistics, sys, time
from pathlib import Path
index, retriever, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries, ask = json.loads(sys.argv[4]), sys.argv[5] == "1"
from odqa.indexes.folder import FolderIndex
wall, cpu = time.perf_counter(), time.process_time()
bundle = FolderIndex.open(index)
len(bundle.store)
from odqa.retriever.registry import RetrieverRuntime, build_retriever
from odqa.retriever.settings import RetrievalConfig
search = build_retriever(bundle, RetrievalConfig(), RetrieverRuntime(), retriever)
out = {"open_ms": 1000 * (time.perf_counter() - wall), "open_cpu_ms": 1000 * (time.process_time() - cpu)}
times, cpus = [], []
for q in queries:
    wall, cpu = time.perf_counter(), time.process_time()
    hits = search.search([q], k)[0]
    times.append(1000 * (time.perf_counter() - wall))
    cpus.append(1000 * (time.process_time() - cpu))
out.update({"first_ms": times[0], "first_cpu_ms": cpus[0], "search_ms": statistics.median(times[1:]),
            "search_cpu_ms": statistics.median(cpus[1:]), "top": [h.passage.id for h in hits]})
if ask:
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    pipeline = Pipeline(OdqaConfig.load(None, {"index": index, "linker.enabled": False,
                                               "retrieval.retriever": retriever}))
    pipeline.ask(queries[0])
    asks = []
    for q in queries[1:]:
        t = time.perf_counter()
        pipeline.ask(q)
        asks.append(1000 * (time.perf_counter() - t))
    out["ask_ms"] = statistics.median(asks)
print(json.dumps(out))
"""


def run_side(code_root: Path, index: Path, args, queries: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURE,
            str(index),
            args.retriever,
            str(args.k),
            json.dumps(queries),
            "1" if args.ask else "0",
        ],
        cwd=code_root,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{code_root}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def linked_copy(index: Path, to: Path) -> Path:
    shutil.copytree(index, to, copy_function=os.link)
    return to


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, help="an index folder built before block digests (e.g. by --baseline)")
    parser.add_argument("--demo", action="store_true", help="the demo index, built by --baseline for the comparison")
    parser.add_argument("--baseline", default="HEAD", help="git revision of the code without the block checks")
    parser.add_argument("--retriever", default="bm25")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ask", action="store_true", help="also whole asks (reader included, linker off)")
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only (with and without records)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from odqa.core.device import cpu_model_and_flags

    questions = [json.loads(line)["question"] for line in (ROOT / "odqa/demo/questions.jsonl").read_text().splitlines()]
    queries = (questions * (args.queries // len(questions) + 1))[: args.queries]
    with tempfile.TemporaryDirectory(prefix="odqa-integrity-") as tmp:
        tmp = Path(tmp)
        baseline = tmp / "baseline"
        baseline.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
        if args.demo:
            source = tmp / "demo"
            env = {**os.environ, "PYTHONPATH": str(baseline)}
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "odqa.cli",
                    "index",
                    "--corpus",
                    str(ROOT / "odqa/demo/articles.jsonl"),
                    "--out",
                    str(source),
                ],
                cwd=baseline,
                env=env,
                check=True,
                capture_output=True,
            )
        else:
            source = args.index.resolve()
        before = linked_copy(source, tmp / "before")
        unrecorded = linked_copy(source, tmp / "unrecorded")
        after = linked_copy(source, tmp / "after")
        verify = subprocess.run(
            [sys.executable, "-m", "odqa.cli", "verify-index", str(after)], cwd=ROOT, capture_output=True, text=True
        )
        if verify.returncode != 0:
            raise SystemExit(verify.stderr[-2000:])
        unchecked = linked_copy(source, tmp / "unchecked")
        manifest_path = unchecked / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["params"].pop("parts", None)
        manifest.pop("digest", None)
        manifest_path.unlink()  # a hard link: the source's manifest stays as it is
        manifest_path.write_text(json.dumps(manifest))
        names = ["no file records (nothing checked)", "block checks"]
        if not args.no_baseline:
            names += ["baseline", "built before block digests"]
        rows: dict[str, list[dict]] = {name: [] for name in names}
        where = {
            "baseline": (baseline, before),
            "block checks": (ROOT, after),
            "built before block digests": (ROOT, unrecorded),
            "no file records (nothing checked)": (ROOT, unchecked),
        }
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                rows[name].append(run_side(*where[name], args, queries))
        assert len({tuple(runs[0]["top"]) for runs in rows.values()}) == 1, "the same hits on every side"
    model, flags = cpu_model_and_flags(["avx2", "avx512f"])
    sizes = {p.name: p.stat().st_size for p in source.rglob("*") if p.is_file()}
    print(
        f"CPU: {model} ({', '.join(flags)}); {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} "
        "(wall times wait for the CPU under load; the *_cpu_ms are this process's CPU time)"
    )
    print(
        f"index: {source} ({sum(sizes.values()) / 1e6:.0f} MB; passages.arrow "
        f"{sizes.get('passages.arrow', 0) / 1e6:.0f} MB), "
        f"retriever {args.retriever}, k={args.k}, {args.queries} "
        f"questions one at a time, {args.rounds} fresh processes a side"
    )
    keys = ["open_ms", "open_cpu_ms", "first_ms", "first_cpu_ms", "search_ms", "search_cpu_ms"] + (
        ["ask_ms"] if args.ask else []
    )
    print("\n| code | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for name, runs in rows.items():
        cells = []
        for key in keys:
            values = sorted(run[key] for run in runs)
            cells.append(f"{statistics.median(values):.1f} ({values[0]:.1f}-{values[-1]:.1f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
