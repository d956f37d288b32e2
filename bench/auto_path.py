"""`auto`'s reading path against the next path on the CPU at hand, idle and busy, in one run.

`precision = auto` reads with ONNX Runtime int8 wherever the model's int8 cost is measured within its band
(odqa.core.runtime): a rule, not a timing, so every process on a machine decides alike. This benchmark checks the
rule's premise on the CPU it runs on: int8 is the faster path whether the machine is idle or busy. The pipeline
retrieves the demo questions once (the default retriever, top k); then each path's reader reads every
question's passages, one question a call as `ask`, the shell and the server read them, the paths taking turns
question by question (so a change in the machine's load falls on all of them). The busy rounds run the same with
`--busy` processes spinning in a loop, pinned to the last cores (on 2 cores: the other core); "idle" adds no
load, and the table gives the load average each round started at (a shared machine is seldom idle).

Paths: onnx int8 (`auto`'s, where measured), and the next path `auto` would take without that record: torch bf16
on CPUs with native bf16, else onnx fp32; torch fp32, the reference arithmetic, with `--all`.

    python bench/auto_path.py --questions 20 --out bench/results/auto-path.md   # ~2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def start_load(workers: int) -> list[subprocess.Popen]:
    """`workers` processes spinning in a loop (the load of other work), pinned to the last cores where the OS
    allows it."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    started = []
    for i in range(workers):
        process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(process.pid, {cores[-1 - i % len(cores)]})
        started.append(process)
    return started


def stop_load(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
        process.wait()


def paths(native_bf16: bool, every: bool) -> list[tuple[str, str]]:
    """(runtime, precision) of each compared path: auto's int8 first."""
    chosen = [("onnx", "int8"), ("torch", "bf16") if native_bf16 else ("onnx", "fp32")]
    return chosen + ([("torch", "fp32")] if every else [])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=20, help="the first N demo questions")
    ap.add_argument("--busy", type=int, default=1, help="spinning processes in the busy rounds")
    ap.add_argument("--all", action="store_true", help="torch fp32 too")
    ap.add_argument("--reader", default="reader")
    ap.add_argument("--out", help="write the Markdown table here")
    args = ap.parse_args(argv)

    from odqa.config import OdqaConfig
    from odqa.core.answers import best_over_truths, exact_match
    from odqa.core.device import cpu_has_fast_bf16, cpu_model_and_flags
    from odqa.core.runtime import InferenceSettings, plan_inference
    from odqa.corpus.questions import load_questions
    from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline, relative_scores
    from odqa.reader.registry import build_reader
    from odqa.reader.settings import ReaderSettings

    model, flags = cpu_model_and_flags(FLAGS)
    native = cpu_has_fast_bf16()
    items = load_questions(DEMO_QUESTIONS, limit=args.questions)
    pipeline = Pipeline(OdqaConfig.load(), default_index=demo_index_path, default_kb=demo_kb_path)
    questions = [item.question for item in items]
    hits = pipeline.retrieve(questions)
    passages = [[h.passage for h in found] for found in hits]
    scores = [relative_scores([h.score for h in found]) for found in hits]
    readers = {}
    for runtime, precision in paths(native, args.all):
        reader = build_reader(
            ReaderSettings(model=args.reader), device="cpu", inference=InferenceSettings(precision, runtime)
        )
        reader.read_many(questions[:1], passages[:1], scores[:1])  # warm: builds or opens its graph
        readers[f"{runtime} {precision}"] = reader
    measured = next(iter(readers.values())).settings.auto_int8  # the folder's record, whatever the path asked
    auto = plan_inference("cpu", InferenceSettings(), auto_int8=measured)

    rows = []
    for condition in ("idle", "busy"):
        load = start_load(args.busy) if condition == "busy" else []
        try:
            time.sleep(0.5 if load else 0)
            load_average = os.getloadavg()[0]  # other work on a shared machine: "idle" adds no load, no more
            seconds: dict[str, list[float]] = {name: [] for name in readers}
            em: dict[str, float] = dict.fromkeys(readers, 0.0)
            order = list(readers)
            for i, item in enumerate(items):
                for name in order if i % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    answers = readers[name].read_many([questions[i]], [passages[i]], [scores[i]], top_n=1)[0]
                    seconds[name].append(time.perf_counter() - start)
                    em[name] += best_over_truths(exact_match, answers[0].text if answers else "", item.answers)
        finally:
            stop_load(load)
        for name in readers:
            total = sum(seconds[name])
            rows.append(
                {
                    "condition": condition,
                    "load_average": round(load_average, 1),
                    "path": name,
                    "auto": name == auto.label,
                    "questions_per_s": round(len(items) / total, 2),
                    "median_ms": round(1000 * statistics.median(seconds[name]), 1),
                    "em": round(100 * em[name] / len(items), 1),
                }
            )
    for condition in ("idle", "busy"):
        mine = {r["path"]: r for r in rows if r["condition"] == condition}
        int8 = mine.pop("onnx int8")
        for other in mine.values():
            other["int8_speedup"] = round(other["median_ms"] / int8["median_ms"], 2)

    header = f"CPU {model}; flags: {' '.join(flags) or 'none of ' + ', '.join(FLAGS)}; native bf16: {native}; "
    header += f"{os.cpu_count()} cores, busy rounds: {args.busy} spinning process(es); {len(items)} demo questions, "
    header += f"top {pipeline.config.retrieval.k} passages ({pipeline.config.retrieval.retriever}); auto: {auto.label}"
    lines = [
        header,
        "",
        "| machine (load average at start) | path | questions/s | median ms a question | EM | int8's speed-up |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        name = r["path"] + (" (auto)" if r["auto"] else "")
        speedup = f"{r['int8_speedup']:.2f}x" if "int8_speedup" in r else ""
        cells = [f"{r['condition']} ({r['load_average']})", name, f"{r['questions_per_s']:.2f}"]
        cells += [f"{r['median_ms']:.1f}", f"{r['em']:.1f}", speedup]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    print(json.dumps({"cpu_model": model, "cpu_flags": flags, "native_bf16": native, "rows": rows}))
    if args.out:
        Path(args.out).write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
