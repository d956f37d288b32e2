#!/usr/bin/env python3
"""Speed and quality of every inference path on the CPU at hand, side by side (one run, same machine).

Variants: torch fp32 (the reference), torch bf16 (only where the CPU has native bf16), ONNX Runtime fp32 and
ONNX Runtime int8 (dynamic, per channel), each for every model; `auto`, end to end only, each model on the plan
`auto` gives it here (what a default run does); on request `torch-fp32-whole`, end to end as the pipeline was
before it read less (torch fp32, whole passages). Each variant runs in its own process (a clean peak RSS) and
reports:
* reader ms per question reading 10 passages of ~100 words (median, p95; bench/reader.py's shape);
* reader EM/F1 on the first `--reader-questions` SQuAD v1.1 dev questions (gold paragraph; the shipped reader
  never trained on SQuAD dev);
* encoder passages/s (128-token passages, batch 32) and linker ms per question at batch 1;
* end-to-end questions/s of `eval-qa` (BM25, top 10 read, linker on) with its EM/F1;
* dense recall@20 of the encoder over SQuAD v1.1 dev's 2,067 paragraphs (not with --quick).
Once per run, the passage encoder of a default `run_qa.py index` here (its precision as the build picks it):
passages/s.

    python bench/speed.py --quick --json          # demo corpus end to end, ~5 min on 2 cores
    python bench/speed.py --index PATH --e2e-questions FILE   # e.g. squad-open, 200 questions
    python bench/speed.py --index PATH --e2e-questions ../shared/data/squad/dev-v1.1.json \
        --e2e-held-out ../shared/data/squad/dev-v2.0.json --e2e-limit 1000   # squad-open's held-out articles

The last line with --json is one JSON object: cpu_model, cpu_flags, per-variant reader_ms_median, reader_f1,
e2e_qps (and the rest), default_variant (what `auto` picks here for the reader; default_reason: why),
e2e_default_variant
(`auto` where it ran, else default_variant), speedup_vs_torch_fp32 (end to end, e2e_default_variant against
torch fp32 on the same pipeline settings) and f1_loss_vs_torch_fp32 (reader F1, default variant); with
torch-fp32-whole run too, speedup_vs_torch_fp32_whole_passages and e2e_f1_loss_vs_torch_fp32_whole_passages;
with torch-bf16 run on a CPU with native bf16 where the default differs, speedup_vs_torch_bf16,
f1_loss_vs_torch_bf16 (reader) and e2e_f1_loss_vs_torch_bf16;
index_passage_encoder, index_encoder_passages_per_s and index_encoder_speedup_vs_torch_fp32 (against the
retriever's torch fp32 passages/s).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SQUAD_V11_DEV = ROOT.parent / "shared" / "data" / "squad" / "dev-v1.1.json"
VARIANTS = {  # name -> (runtime, precision)
    "torch-fp32": ("torch", "fp32"),
    "torch-bf16": ("torch", "bf16"),
    "onnx-fp32": ("onnx", "fp32"),
    "onnx-int8": ("onnx", "int8"),
    "torch-fp32-whole": ("torch", "fp32"),
    "auto": ("auto", "auto"),
}
# end to end, the pipeline as it was before reading less: torch fp32 reading every passage whole
# (reader.focus_words = 0, reader.early_stop_passages = 0). Only run when asked for; the reader and encoder
# rows equal torch-fp32's.
WHOLE_PASSAGES = "torch-fp32-whole"
E2E_SEED = 13  # bench/qa.py's and bench/retrieval.py's sample of squad-open questions
# end to end exactly as a default run goes here, each model on its own `auto` plan (the reader and encoder rows
# would repeat those of the reader's default variant, so only the pipeline is measured)
AUTO = "auto"
INDEX_DEFAULT = "index-default"  # not a variant: a default index build's passage encoder, measured once per run
DEFAULT_VARIANTS = [v for v in VARIANTS if v != WHOLE_PASSAGES]
SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_bf16",
    "amx_int8",
)


def cpu_info() -> tuple[str, list[str]]:
    """The CPU's model name and its SIMD/matrix flags that matter for these kernels."""
    from odqa.core.device import cpu_model_and_flags

    return cpu_model_and_flags(SIMD_FLAGS)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure_reader(runtime: str, precision: str, args) -> dict:
    from bench.reader import accuracy, speed
    from odqa.core.runtime import InferenceSettings
    from odqa.core.types import Passage
    from odqa.corpus.questions import load_questions
    from odqa.reader.registry import build_reader
    from odqa.reader.settings import ReaderSettings

    reader = build_reader(ReaderSettings(model="reader"), device="cpu", inference=InferenceSettings(precision, runtime))
    reader.read("warm-up?", [Passage("w", "", "A warm-up passage builds or loads the runtime's graph.")])
    items = load_questions(args.squad)
    row = {}
    times = []

    class Timed:  # speed() times reader.read; keep every sample for the p95 too
        def read(self, question, passages):
            t0 = time.perf_counter()
            out = reader.read(question, passages)
            times.append(time.perf_counter() - t0)
            return out

    speed(Timed(), items, args.speed_questions)
    samples = times[1:]  # speed() reads its first question once untimed (warm-up)
    row["reader_ms_median"] = round(1000 * statistics.median(samples), 1)
    row["reader_ms_p95"] = round(1000 * percentile(samples, 0.95), 1)
    acc = accuracy(reader, items[: args.reader_questions], [])
    row.update(reader_em=acc["em"], reader_f1=acc["f1"], reader_questions=acc["questions"])
    return row


def measure_encoder(runtime: str, precision: str, args, encoder=None) -> dict:
    """`encoder`: a loaded encoder to time (default: the shipped retriever in `runtime` and `precision`)."""
    from odqa.core.encoder import TextEncoder
    from odqa.core.models import DEFAULT_ENCODER
    from odqa.corpus.questions import load_questions

    items = load_questions(args.squad)
    contexts = sorted({q.context for q in items})
    if encoder is None:
        encoder = TextEncoder.from_pretrained(
            DEFAULT_ENCODER, max_length=128, device="cpu", precision=precision, runtime=runtime
        )
    long_enough = [c for c in contexts if len(c.split()) >= 120][: args.encoder_passages]
    encoder.encode(long_enough[:8], batch_size=32)
    t0 = time.perf_counter()
    encoder.encode(long_enough, batch_size=32)
    row = {"encoder_passages_per_s": round(len(long_enough) / (time.perf_counter() - t0), 1)}
    if not args.quick:
        import numpy as np

        asked = items[: args.reader_questions]
        p = encoder.encode(contexts, batch_size=32, max_length=256)
        q = encoder.encode([x.question for x in asked], batch_size=64)
        top = np.argsort(-(q @ p.T), axis=1)[:, :20]
        gold = {c: i for i, c in enumerate(contexts)}
        row["dense_recall@20_squad_dev_paragraphs"] = round(
            100 * float(np.mean([gold[x.context] in top[n] for n, x in enumerate(asked)])), 2
        )
    return row


def measure_pipeline(runtime: str, precision: str, args, whole_passages: bool = False) -> dict:
    from odqa.config import OdqaConfig
    from odqa.corpus.questions import load_questions
    from odqa.eval.qa import evaluate_qa
    from odqa.pipeline import Pipeline

    overrides = {
        "index": args.index or None,
        "retrieval.retriever": "bm25",
        "retrieval.k": 10,
        "linker.enabled": True,
        "precision": precision,
        "runtime": runtime,
    }
    if whole_passages:
        overrides["reader.focus_words"] = 0
        overrides["reader.early_stop_passages"] = 0
    elif args.settings:
        from bench.qa import parse_settings

        overrides.update(parse_settings(args.settings))  # checked once in main()
    # no --index: the demo corpus, with its knowledge base (as `odqa eval-qa` without --index)
    from odqa.demo_corpus import demo_index_path, demo_kb_path

    pipeline = Pipeline(OdqaConfig.load(None, overrides), default_index=demo_index_path, default_kb=demo_kb_path)
    if args.e2e_questions:
        items = load_questions(args.e2e_questions)
    else:
        from odqa.demo_corpus import DEMO_QUESTIONS

        items = load_questions(DEMO_QUESTIONS)
    if args.e2e_held_out:
        import random

        from odqa.corpus.questions import drop_articles

        items = drop_articles(items, Path(args.e2e_held_out))
        items = random.Random(E2E_SEED).sample(items, min(args.e2e_limit, len(items)))
    items = items[: args.e2e_limit]
    pipeline.ask(items[0].question)  # load every component (and build graphs) before the clock starts
    linker = pipeline.linker
    row = {}
    if linker is not None:
        times = []
        for item in items[:50]:
            t0 = time.perf_counter()
            linker.link([item.question])
            times.append(time.perf_counter() - t0)
        row["linker_ms_median"] = round(1000 * statistics.median(times), 1)
    m = evaluate_qa(pipeline, items, ks=[10], progress=False)
    row.update(
        e2e_qps=m["questions_per_second"],
        e2e_em=m["em"],
        e2e_f1=m["f1"],
        e2e_questions=m["questions"],
        linker_on=linker is not None,
    )
    return row


def measure_index_encoder(args) -> dict:
    """The passage encoder of a default, large `run_qa.py index` here (encoder and precision as a build of
    LARGE_BUILD passages or more picks them)."""
    from odqa.indexing import LARGE_BUILD, IndexSpec, asked_plan, auto_passage_encoder

    spec = IndexSpec(corpus="", out="", device="cpu", max_length=128)
    encoder = auto_passage_encoder(asked_plan(spec), LARGE_BUILD).load_encoder()
    row = measure_encoder("", "", argparse.Namespace(**{**vars(args), "quick": True}), encoder)
    return {
        "variant": INDEX_DEFAULT,
        "index_passage_encoder": f"{encoder.name} ({encoder.plan().label})",
        "index_encoder_passages_per_s": row["encoder_passages_per_s"],
    }


def run_variant(name: str, args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    if name == INDEX_DEFAULT:
        return measure_index_encoder(args)
    runtime, precision = VARIANTS[name]
    row = {"variant": name}
    if name != AUTO:
        row.update(measure_reader(runtime, precision, args))
        row.update(measure_encoder(runtime, precision, args))
    if not args.no_e2e:
        row.update(measure_pipeline(runtime, precision, args, whole_passages=name == WHOLE_PASSAGES))
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer timing samples, no dense recall")
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    ap.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="comma-separated subset of " + ", ".join(VARIANTS) + f" ({WHOLE_PASSAGES}: end to end "
        "reading whole passages, the pipeline before reading less)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--squad", default=str(SQUAD_V11_DEV))
    ap.add_argument("--reader-questions", type=int, default=1000)
    ap.add_argument("--speed-questions", type=int)
    ap.add_argument("--encoder-passages", type=int)
    ap.add_argument("--index", default="", help="index for the end-to-end run (default: the demo corpus)")
    ap.add_argument("--e2e-questions", default="", help="question file (default: the 100 demo questions)")
    ap.add_argument("--e2e-limit", type=int, default=200)
    ap.add_argument(
        "--e2e-held-out",
        default="",
        help="drop the questions of this file's articles (e.g. SQuAD v2.0 "
        "dev, the shipped models' training data) and sample --e2e-limit "
        "of the rest (seed 13; bench/qa.py's squad-open test articles)",
    )
    ap.add_argument("--no-e2e", action="store_true", help="reader and encoder only (no index needed)")
    ap.add_argument(
        "--settings",
        default="",
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="config overrides for the end-to-end runs of every variant but torch-fp32-whole, e.g. "
        "reader.focus_words=40,reader.whole_passages=1,reader.early_stop_passages=0 (an older "
        "default; bench/qa.py --settings takes the same form)",
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one variant in this process
    ap.add_argument("--out", default="", help="also write the Markdown table here")
    args = ap.parse_args(argv)
    args.speed_questions = args.speed_questions or (50 if args.quick else 100)
    args.encoder_passages = args.encoder_passages or (128 if args.quick else 512)
    if args.one:
        print(json.dumps(run_variant(args.one, args)), flush=True)
        return 0

    from odqa.core.device import cpu_has_fast_bf16
    from odqa.core.runtime import INFERENCE, plan_inference

    model, flags = cpu_info()
    print(f"CPU: {model}; flags: {' '.join(flags)}; {args.threads} threads", flush=True)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"speed.py: error: unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if args.settings:  # here, before any variant runs, rather than failing in each variant's process
        from bench.qa import parse_settings
        from odqa.config import OdqaConfig
        from odqa.core.errors import OdqaError

        try:
            OdqaConfig.load(None, parse_settings(args.settings))
        except OdqaError as exc:
            print(f"speed.py: error: --settings {args.settings}: {exc}", file=sys.stderr)
            return 2
    if "torch-bf16" in names and not cpu_has_fast_bf16():
        names.remove("torch-bf16")  # emulated bf16 is slower than fp32: nothing to compare
    plan = plan_inference("cpu", INFERENCE, auto_int8=True)  # the reader's default
    default = f"{plan.runtime}-{plan.precision}"
    if AUTO in names and default not in names:
        names.insert(names.index(AUTO), default)  # auto's row takes its reader figures from there
    rows = []
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--json",)]
    for name in [*names, INDEX_DEFAULT]:
        out = subprocess.run([sys.executable, __file__, *passthrough, "--one", name], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    index_default = rows.pop() if rows and rows[-1]["variant"] == INDEX_DEFAULT else {}
    by = {r["variant"]: r for r in rows}
    if AUTO in by and default in by:  # auto's reader figures are its default variant's; end to end is its own run
        by[AUTO].update({k: by[default].get(k) for k in ("reader_ms_median", "reader_ms_p95", "reader_f1")})
    columns = [
        "variant",
        "reader_ms_median",
        "reader_ms_p95",
        "reader_f1",
        "encoder_passages_per_s",
        "linker_ms_median",
        "e2e_qps",
        "e2e_f1",
        "dense_recall@20_squad_dev_paragraphs",
        "peak_rss_mb",
    ]
    table = "\n".join(
        ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        + ["| " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows]
    )
    print(
        f"\nCPU {model} ({' '.join(flags)}), {args.threads} threads; default (auto) = {default} ({plan.reason})"
        f"\n\n{table}\n"
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            f"`python bench/speed.py {' '.join(passthrough)}` on {model} "
            f"({' '.join(flags)}), {args.threads} threads\n\n{table}\n"
        )
    # the default: auto's own run where it was measured (every model on its own plan), else the reader's variant
    ref, chosen = by.get("torch-fp32"), by.get(AUTO) or by.get(default)
    summary = {
        "cpu_model": model,
        "cpu_flags": flags,
        "threads": args.threads,
        "default_variant": default,
        "default_reason": plan.reason,
        "e2e_default_variant": AUTO if AUTO in by else default,
        **{key: {r["variant"]: r.get(key) for r in rows} for key in columns[1:]},
        "speedup_vs_torch_fp32": round(chosen["e2e_qps"] / ref["e2e_qps"], 2)
        if ref and chosen and "e2e_qps" in ref
        else None,
        "reader_speedup_vs_torch_fp32": round(ref["reader_ms_median"] / chosen["reader_ms_median"], 2)
        if ref and chosen
        else None,
        "f1_loss_vs_torch_fp32": round(ref["reader_f1"] - chosen["reader_f1"], 2) if ref and chosen else None,
    }
    if index_default:
        summary["index_passage_encoder"] = index_default["index_passage_encoder"]
        summary["index_encoder_passages_per_s"] = index_default["index_encoder_passages_per_s"]
        if ref:
            summary["index_encoder_speedup_vs_torch_fp32"] = round(
                index_default["index_encoder_passages_per_s"] / ref["encoder_passages_per_s"], 2
            )
        print(
            f"index builds (default encoder): {index_default['index_passage_encoder']}, "
            f"{index_default['index_encoder_passages_per_s']} passages/s at 128 tokens\n"
        )
    bf16 = by.get("torch-bf16")
    if bf16 and chosen and chosen is not bf16 and "e2e_qps" in bf16 and "e2e_qps" in chosen:
        # CPUs with native bf16 where auto runs something else: against the all-bf16 path
        summary["speedup_vs_torch_bf16"] = round(chosen["e2e_qps"] / bf16["e2e_qps"], 2)
        summary["f1_loss_vs_torch_bf16"] = round(bf16["reader_f1"] - chosen["reader_f1"], 2)
        summary["e2e_f1_loss_vs_torch_bf16"] = round(bf16["e2e_f1"] - chosen["e2e_f1"], 2)
    whole = by.get(WHOLE_PASSAGES)
    if whole and chosen and "e2e_qps" in whole and "e2e_qps" in chosen:
        summary["speedup_vs_torch_fp32_whole_passages"] = round(chosen["e2e_qps"] / whole["e2e_qps"], 2)
        summary["e2e_f1_loss_vs_torch_fp32_whole_passages"] = round(whole["e2e_f1"] - chosen["e2e_f1"], 2)
    if args.json:
        print(json.dumps(summary), flush=True)
    return 0 if len(rows) == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
