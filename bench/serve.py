#!/usr/bin/env python3
"""`odqa serve` under load: N concurrent clients (1, 4, 16) asking POST /ask over loopback, against the demo
corpus (and any index given with --index and --questions, e.g. squad-open's), beside `eval-qa`'s own throughput on
the same questions in the same run, so the cost of HTTP and of answering one request at a time is a ratio.

    python bench/serve.py                                   # demo corpus; writes bench/results/serve.md
    python bench/serve.py --requests 200 --soak 10000       # each level 200 requests, then 10,000 at 16 clients
    python bench/serve.py --max-batch 16 1                  # batching the questions that wait together, and not
    python bench/serve.py --index INDEX --questions FILE    # another index (e.g. squad-open), its questions

Each --max-batch setting gets its own server (`run_qa.py serve` in a child process on a free port of 127.0.0.1,
access log off), all running at once; each client level sends --requests questions (the questions cycled) to each
server in turn: questions per second, p50 and p99 latency, errors (anything but 200; must be 0). The soak then
sends --soak requests at the highest level to the first setting's server (the others stopped) and reads the server's
resident memory (RSS) before and after, and every 10% on the way. `eval-qa` runs alone before the servers start and
again after they stop: the evaluator `odqa eval-qa` runs (QAEvaluator, batches of 8), in this process, on a pipeline
warmed by one question, over the same questions.

The clients are threads of this process and share the machine's cores with the server: on a 2-core machine the
figures are a floor. Run it on an idle machine for figures to quote; on a shared one, say so.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "serve.md"
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def load_questions(path: str | None, limit: int | None) -> list[str]:
    from odqa.corpus.questions import load_questions as load
    from odqa.demo_corpus import DEMO_QUESTIONS

    return [item.question for item in load(str(path or DEMO_QUESTIONS), limit=limit)]


def eval_qa_throughput(index: str | None, questions_path: str | None, limit: int | None) -> dict:
    """What `odqa eval-qa` reports, on a warm pipeline (its own figure includes loading the models)."""
    from odqa.config import OdqaConfig
    from odqa.corpus.questions import load_questions as load
    from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path, demo_kb_path
    from odqa.eval.evaluators import QAEvaluator
    from odqa.pipeline import Pipeline

    config = OdqaConfig.load(None, {"index": index} if index else {})
    pipeline = Pipeline(config, default_index=demo_index_path, default_kb=demo_kb_path)
    pipeline.ask("Who wrote it?")
    items = load(str(questions_path or DEMO_QUESTIONS), limit=limit)
    metrics = QAEvaluator(items, [config.retrieval.k], k=config.retrieval.k, progress=False)(pipeline)
    del pipeline
    gc.collect()
    return {"questions": metrics["questions"], "qps": metrics["questions_per_second"], "em": metrics.get("em")}


class Server:
    """`run_qa.py serve` in a child process on a free loopback port."""

    def __init__(self, index: str | None, max_batch: int, log: Path):
        from tests.es_server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            str(ROOT / "run_qa.py"),
            "serve",
            "--port",
            str(self.port),
            "--no-access-log",
            "--max-batch",
            str(max_batch),
            *(["--index", index] if index else []),
        ]
        self.log = log.open("w")
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 1800) -> float:
        import httpx

        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited with {self.process.returncode}; see {self.log.name}")
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"the server did not answer /health in {timeout:.0f} s")

    def rss_mib(self) -> float:
        import psutil

        return psutil.Process(self.process.pid).memory_info().rss / 2**20

    def stop(self) -> None:
        import signal

        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def load(url: str, questions: list[str], clients: int, requests: int, on_progress=None) -> dict:
    """`clients` threads, each with its own HTTP connection, send `requests` questions in all (cycled)."""
    import httpx

    order = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=url, timeout=600) as http:
            while True:
                with lock:
                    i = next(order)
                if i >= requests:
                    return
                started = time.perf_counter()
                try:
                    response = http.post("/ask", json={"question": questions[i % len(questions)]})
                    ok = response.status_code == 200 and response.json().get("question")
                    problem = None if ok else f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                seconds = time.perf_counter() - started
                with lock:
                    latencies.append(seconds)
                    if problem:
                        errors.append(problem)
                    if on_progress:
                        on_progress(len(latencies))

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {
        "clients": clients,
        "requests": len(latencies),
        "seconds": round(wall, 1),
        "qps": round(len(latencies) / wall, 2),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
    }


def batches(url: str) -> dict:
    import httpx

    return httpx.get(url + "/info", timeout=60).json()["batches"]


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--requests", type=int, default=300, help="requests per client level")
    parser.add_argument(
        "--soak", type=int, default=10_000, help="requests of the memory run at the highest client level (0: none)"
    )
    parser.add_argument(
        "--max-batch", type=int, nargs="+", default=[16, 1], help="server settings compared (1: one question at a time)"
    )
    parser.add_argument("--index", help="an index folder (default: the demo corpus)")
    parser.add_argument("--questions", help="its questions (default: the 100 demo questions)")
    parser.add_argument("--limit", type=int, help="the first N questions only (eval-qa's and the clients')")
    parser.add_argument("--name", default="", help="the corpus's name in the table")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--note", default="", help="a line about the machine's state, written under the table")
    args = parser.parse_args()
    if args.index and not args.questions:
        parser.error("--index needs --questions (the demo questions are about the demo corpus)")

    from odqa.core.device import cpu_model_and_flags

    cpu, flags = cpu_model_and_flags(SIMD_FLAGS)
    questions = load_questions(args.questions, args.limit)
    corpus = args.name or (Path(args.index).name if args.index else "demo (308 passages)")
    log(f"{len(questions)} questions; eval-qa first, alone")
    evaluated = eval_qa_throughput(args.index, args.questions, args.limit)
    log(f"eval-qa: {evaluated}")

    rows, soak = [], None
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    # every setting's server runs at once and the levels alternate between them, so a change in the machine's
    # load falls on all settings alike; the models of each load while the others do
    servers = [
        Server(args.index, max_batch, logs / f"odqa-serve-bench-{max_batch}.log") for max_batch in args.max_batch
    ]
    try:
        for max_batch, server in zip(args.max_batch, servers):
            log(
                f"server (max batch {max_batch}) ready after "
                f"{server.wait_ready():.0f} s; RSS {server.rss_mib():.0f} MiB"
            )
        for clients in args.clients:
            for max_batch, server in zip(args.max_batch, servers):
                row = load(server.url, questions, clients, args.requests)
                row.update(max_batch=max_batch, ratio=round(row["qps"] / evaluated["qps"], 2))
                rows.append(row)
                log(json.dumps(row))
        for max_batch, server in zip(args.max_batch, servers):
            log(f"max batch {max_batch}: batch sizes read (size: count): {batches(server.url)}")
        if args.soak:
            server, others = servers[0], servers[1:]
            for other in others:  # the soak's server alone
                other.stop()
            servers = [server]
            before = server.rss_mib()
            marks: list[tuple[int, float]] = []
            step = max(1, args.soak // 10)

            def progress(done: int) -> None:
                if done % step == 0:
                    marks.append((done, round(server.rss_mib(), 1)))

            result = load(server.url, questions, max(args.clients), args.soak, progress)
            soak = {
                **result,
                "rss_before_mib": round(before, 1),
                "rss_after_mib": round(server.rss_mib(), 1),
                "rss_marks": marks,
                "max_batch": args.max_batch[0],
            }
            log(json.dumps(soak))
    finally:
        for server in servers:
            server.stop()
    after = eval_qa_throughput(args.index, args.questions, args.limit)
    log(f"eval-qa again, after: {after}")
    evaluated["qps_after"] = after["qps"]

    write(args, cpu, flags, corpus, evaluated, rows, soak)
    print(json.dumps({"cpu_model": cpu, "cpu_flags": flags, "eval_qa": evaluated, "levels": rows, "soak": soak}))
    return 0


def write(args, cpu: str, flags: list[str], corpus: str, evaluated: dict, rows: list[dict], soak: dict | None) -> None:
    lines = [
        "# `odqa serve` under load",
        "",
        f"CPU: {cpu} ({', '.join(flags)}), {os.cpu_count()} cores; Python {platform.python_version()}. Corpus: "
        f"{corpus}; {evaluated['questions']} questions cycled; the server's defaults (hybrid, k = 10, linker on).",
        f"Command: `python bench/serve.py {' '.join(sys.argv[1:])}`.",
        "",
        f"`eval-qa` on the same questions, same run (QAEvaluator, batches of 8, warm), alone before the servers start "
        f"and after they stop: **{evaluated['qps']} and {evaluated.get('qps_after', '-')} questions/s**. Ratio: the "
        "server's questions/s over eval-qa's first figure. The settings' servers run side by side and the rows "
        "alternate between them, so a change in the machine's load falls on both; with one client no batch can "
        "form, so the two settings' one-client rows differ only by that load.",
        "",
        "| server max batch | clients | requests | questions/s | p50 ms | p99 ms | errors | ratio to eval-qa |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['max_batch']} | {r['clients']} | {r['requests']:,} | {r['qps']} | {r['p50_ms']} | "
            f"{r['p99_ms']} | {r['errors']} | {r['ratio']} |"
        )
    if soak:
        lines += [
            "",
            f"Memory: {soak['requests']:,} requests at {soak['clients']} clients (max batch "
            f"{soak['max_batch']}, {soak['qps']} questions/s, {soak['errors']} errors): server RSS "
            f"{soak['rss_before_mib']} MiB before, {soak['rss_after_mib']} MiB after; on the way (requests, "
            f"MiB): {', '.join(f'{d:,} {m}' for d, m in soak['rss_marks'])}.",
        ]
    if args.note:
        lines += ["", args.note]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
