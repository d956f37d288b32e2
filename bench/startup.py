#!/usr/bin/env python3
"""Time to first answer: `odqa ask` on the demo corpus in a fresh process, after a first run has built the
demo index, the knowledge base and the runtime's graphs (the figure a user sees from the second run on).

    python bench/startup.py                 # 1 untimed run (builds what is missing), then 3 timed runs
    python bench/startup.py --runs 5 --json

Each run is a new Python process started from the repository root (`python run_qa.py ask --json Q`), so
imports, model loading and the first question's retrieval and reading all count. The last line with --json is
one JSON object: wall and CPU seconds per run, their medians, and the stage timings the answer itself reports.
On a machine shared with another job the CPU seconds are the figure to read (wall time there measures the
other job); on an idle 2-core machine the wall time lies between half the CPU time and the CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Who discovered penicillin?"


def ask_once(question: str, extra: list[str], env: dict) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds (user + system of the child: the steadier figure on a shared machine) and the
    answer's JSON."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(ROOT / "run_qa.py"), "ask", "--json", question, *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"startup.py: `odqa ask` failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return seconds, cpu, json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="timed runs after the untimed first one")
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("ask_flags", nargs="*", help="extra flags for `odqa ask` (after --), e.g. -- --no-linker")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ask_once(args.question, args.ask_flags, env)  # builds the demo index, KB and graphs if missing
    seconds, cpu_seconds, answer = [], [], {}
    for _ in range(args.runs):
        s, cpu, answer = ask_once(args.question, args.ask_flags, env)
        seconds.append(round(s, 2))
        cpu_seconds.append(round(cpu, 2))
        print(
            f"first answer in {s:.2f} s ({cpu:.2f} s of CPU): "
            f"{answer['answers'][0]['text'] if answer['answers'] else '(none)'}",
            flush=True,
        )
    summary = {
        "question": args.question,
        "seconds": seconds,
        "median_s": round(statistics.median(seconds), 2),
        "cpu_seconds": cpu_seconds,
        "median_cpu_s": round(statistics.median(cpu_seconds), 2),
        "stage_ms": answer.get("timings_ms", {}),
        "inference": answer.get("inference", {}),
    }
    print(f"median time to first answer: {summary['median_s']} s over {len(seconds)} fresh processes")
    if args.json:
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
