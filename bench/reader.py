#!/usr/bin/env python3
"""Reader benchmark: SQuAD v1.1 dev EM/F1 (gold paragraph) and reading speed: fp32, bf16 autocast (the
default on CPUs with native bf16: AMX or AVX512-BF16) and dynamic int8 (one weight scale per output channel).

Speed: for each of `--speed-questions` questions, the reader reads 10 passages of ~100 words (the
question's gold paragraph and 9 other dev paragraphs, each cut to its first 100 words, so the shape matches
the top-10 retrieved passages of the pipeline); we report the median milliseconds per question and the
passages read per second. Threads default to 2 (the target machine). Timings depend on the CPU, which the
table names: bf16 is 2x faster than fp32 with AMX tiles and 1.7x with AVX512-BF16 alone.

    python bench/reader.py                       # all 10,570 questions, fp32, bf16 and int8
    python bench/reader.py --limit 1000 --out runs/bench-reader.md
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SQUAD = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "squad"
SQUAD_V11_DEV = SQUAD / "dev-v1.1.json"
# the shipped reader trains on SQuAD v2.0 dev, whose 35 articles (and answerable questions) are also in v1.1 dev
SQUAD_V20_DEV = SQUAD / "dev-v2.0.json"


def speed(reader, items, n_questions: int, n_passages: int = 10, words: int = 100, seed: int = 0) -> dict:
    from odqa.core.types import Passage

    rng = random.Random(seed)
    contexts = sorted({q.context for q in items})
    picked = rng.sample(items, min(n_questions, len(items)))
    times = []
    for i, q in enumerate(picked):
        others = [c for c in rng.sample(contexts, n_passages) if c != q.context][: n_passages - 1]
        texts = [q.context] + others
        passages = [Passage(f"p{j}", "", " ".join(t.split()[:words])) for j, t in enumerate(texts)]
        if i == 0:  # warm-up
            reader.read(q.question, passages)
        t0 = time.perf_counter()
        reader.read(q.question, passages)
        times.append(time.perf_counter() - t0)
    return {
        "median_ms_top10": round(1000 * statistics.median(times), 1),
        "p90_ms_top10": round(1000 * sorted(times)[int(0.9 * (len(times) - 1))], 1),
        "passages_per_s": round(n_passages * len(times) / sum(times), 1),
        "speed_questions": len(times),
    }


def accuracy(reader, items, heldout_items) -> dict:
    """EM/F1 on `items` and, prefixed `heldout_`, on `heldout_items` (questions of articles the reader never
    trained on), reading each question once: the held-out questions are mostly among the first ones."""
    from odqa.eval.reader_eval import predict_answers, rounded, squad_metrics

    ids = {q.id for q in items}
    t0 = time.time()
    preds, gold = predict_answers(reader, items + [q for q in heldout_items if q.id not in ids])
    seconds = time.time() - t0
    row = rounded(squad_metrics(preds, {q.id: gold[q.id] for q in items}), seconds)
    if heldout_items:
        held = rounded(squad_metrics(preds, {q.id: gold[q.id] for q in heldout_items}), seconds)
        row.update({f"heldout_{k}": v for k, v in held.items() if k != "seconds"})
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="reader", help="reader name or path (default: models/reader)")
    ap.add_argument("--data", default=str(SQUAD_V11_DEV), help="SQuAD v1.1 dev JSON")
    ap.add_argument("--limit", type=int, default=0, help="first N questions for EM/F1 (0: all 10,570)")
    ap.add_argument(
        "--trained-on",
        default=str(SQUAD_V20_DEV),
        help="SQuAD file the reader was trained on: EM/F1 are also reported without its articles "
        "('held-out'); '' to skip",
    )
    ap.add_argument("--speed-questions", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="fp32,bf16,int8", help="comma-separated: fp32, int8, bf16 (CPU autocast)")
    ap.add_argument("--skip-accuracy", action="store_true", help="speed only")
    ap.add_argument("--out", default="runs/bench-reader.md", help="Markdown table to write")
    args = ap.parse_args(argv)

    import torch

    from odqa.core.device import cpu_description
    from odqa.corpus.questions import drop_articles, load_questions
    from odqa.reader.registry import build_reader
    from odqa.reader.settings import ReaderSettings

    torch.set_num_threads(args.threads)
    items = load_questions(args.data)
    heldout_items = drop_articles(items, args.trained_on)[: args.limit or None] if args.trained_on else []
    rows = []
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        reader = build_reader(ReaderSettings(model=args.model), device="cpu")
        if variant == "int8":
            reader.quantize_int8()
        elif variant in ("bf16", "fp32"):
            reader.settings.precision = variant
        else:
            raise SystemExit(f"unknown variant {variant!r}")
        row = {"variant": variant}
        if not args.skip_accuracy:
            row.update(accuracy(reader, items[: args.limit or None], heldout_items))
        row.update(speed(reader, items, args.speed_questions))
        rows.append(row)
        print(json.dumps(row), flush=True)

    n = rows[0].get("questions", 0) if rows else 0
    lines = [
        f"Reader `{args.model}` on {Path(args.data).name} ({n or 'no'} questions, gold paragraph), "
        f"{args.threads} CPU threads of a {cpu_description()}; speed: 10 passages x ~100 words per question, "
        f"{args.speed_questions} questions. "
        f"Held-out: only the articles not in {Path(args.trained_on).name if args.trained_on else '-'} "
        "(the reader's training data shares the other articles and their questions).",
        "",
        "| variant | EM | F1 | questions | held-out EM | held-out F1 | held-out questions "
        "| eval s (both sets, each question read once) | median ms (top-10) | p90 ms | passages/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r.get('em', '-')} | {r.get('f1', '-')} | {r.get('questions', '-')} | "
            f"{r.get('heldout_em', '-')} | {r.get('heldout_f1', '-')} | {r.get('heldout_questions', '-')} | "
            f"{r.get('seconds', '-')} | {r['median_ms_top10']} | {r['p90_ms_top10']} | {r['passages_per_s']} |"
        )
    table = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
