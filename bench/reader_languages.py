#!/usr/bin/env python3
"""Readers compared on the gold paragraphs of each language's dev set, in one run: KorQuAD 1.0 dev (Korean,
KorQuAD's official EM/F1), CMRC 2018 dev (Chinese, CMRC 2018's) and SQuAD v1.1 dev (English, SQuAD's), every
question unless `--limit`, with each reader's seconds per set on the CPU the header names.

    python bench/reader_languages.py --readers reader-multilingual reader --out bench/results/reader-languages.md
    python bench/reader_languages.py --readers runs/mreader-export reader --sets korquad cmrc --limit 1000
    python bench/reader_languages.py --readers reader-multilingual --sets korquad cmrc drcd-test --cut both

`--cut both` decodes each forward pass twice, answers cut as their language cuts words (reader.cutting) and not,
so the two rows differ by the cutting alone (bench/results/answer-cutting.md).

The multilingual reader never trains on KorQuAD dev or CMRC dev (docs/multilingual-reader.md); Korean is zero-shot.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
SETS = {
    "korquad": ("KorQuAD 1.0 dev", DATA / "multilingual" / "korquad-v1.0-dev.json"),
    "cmrc": ("CMRC 2018 dev", DATA / "multilingual" / "cmrc2018-dev.json"),
    "squad": ("SQuAD v1.1 dev", DATA / "squad" / "dev-v1.1.json"),
    # DRCD dev trains reader-multilingual; DRCD test fits its calibration and is never trained on
    "drcd-test": ("DRCD test", DATA / "multilingual" / "drcd-test.json"),
    "drcd-dev": ("DRCD dev", DATA / "multilingual" / "drcd-dev.json"),
}
CUT_ROWS = {"off": (False,), "on": (True,), "both": (False, True)}


def evaluate_cut_both_ways(reader, path: Path, limit: int | None, cuts: tuple[bool, ...], chunk: int = 64) -> dict:
    """evaluate_reader's figures, each forward pass decoded once per value of `cuts` (reader.settings.cut_answers):
    {cut: metrics}; the seconds are those of the whole run, and `changed` counts the questions whose answer
    the cutting changed."""
    import time

    from odqa.corpus.questions import load_questions
    from odqa.eval.reader_eval import metric_for, rounded, squad_metrics

    items = load_questions(path)[: limit or None]
    metric = metric_for(items)
    preds: dict[bool, dict[str, str]] = {cut: {} for cut in cuts}
    gold: dict[str, list[str]] = {}
    started = time.time()
    for lo in range(0, len(items), chunk):
        part = items[lo : lo + chunk]
        found = reader.logits([q.question for q in part], [q.context for q in part])
        for cut in cuts:
            reader.settings.cut_answers = cut
            for q, a in zip(part, reader.decode_batch([q.context for q in part], found)):
                preds[cut][q.id] = a.text if a is not None else ""
        for q in part:
            gold[q.id] = list(q.answers)
        print(f"  {min(lo + chunk, len(items))}/{len(items)} questions", file=sys.stderr, flush=True)
    seconds = time.time() - started
    out = {cut: {**rounded(squad_metrics(preds[cut], gold, metric), seconds), "metric": metric} for cut in cuts}
    if len(cuts) > 1:
        changed = sum(len({preds[cut][qid] for cut in cuts}) > 1 for qid in gold)
        for cut in cuts:
            out[cut]["changed"] = changed
    return out


def main(argv=None) -> int:
    from odqa.core.runtime import INFERENCE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--readers",
        nargs="*",
        default=["reader-multilingual", "reader"],
        help="names or folders (none: only the tables of --merge)",
    )
    ap.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    ap.add_argument("--limit", type=int, default=0, help="first N questions of each set (0: all)")
    ap.add_argument(
        "--precision",
        default=INFERENCE.precision,
        choices=(INFERENCE.precision, "fp32", "bf16", "int8"),
        help="inference precision of every reader (auto: the reader's own plan on this CPU; int8: onnxruntime's "
        "dynamic quantisation, what auto picks on CPUs without native bf16)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cut",
        choices=["reader", *CUT_ROWS],
        default="reader",
        help="Korean and Chinese answers cut as their language cuts words (on), as the pieces end (off), both from "
        "the same forward passes (both: a row each), or as the reader's settings say (reader)",
    )
    ap.add_argument("--out", help="Markdown table to write")
    ap.add_argument("--json-out", help="every figure as JSON")
    ap.add_argument(
        "--merge",
        nargs="*",
        default=[],
        metavar="JSON",
        help="--json-out files of earlier runs whose rows join the table (e.g. the same sets read by "
        "another reader while this one trained); their header lines are kept beside it",
    )
    args = ap.parse_args(argv)

    import torch

    from odqa.core.device import cpu_description
    from odqa.eval.reader_eval import evaluate_reader
    from odqa.reader.model import Reader

    torch.set_num_threads(args.threads)
    header = f"{cpu_description()}; {args.threads} threads; precision {args.precision}"
    print(header, flush=True)
    results: dict[str, dict[str, dict]] = {}
    for name in args.readers:
        reader = Reader.from_pretrained(name, device="cpu")
        if args.precision != INFERENCE.precision:
            reader.settings.precision = args.precision
        rows = {cut: f"{name} (cut {'on' if cut else 'off'})" for cut in CUT_ROWS.get(args.cut, ())} or {None: name}
        for row in rows.values():
            results[row] = {}
        for key in args.sets:
            label, path = SETS[key]
            if args.cut in CUT_ROWS:
                by_cut = evaluate_cut_both_ways(reader, path, args.limit or None, CUT_ROWS[args.cut])
            else:
                by_cut = {None: evaluate_reader(reader, path, limit=args.limit or None, progress=True)}
            for cut, metrics in by_cut.items():
                metrics["plan"] = reader.plan.to_dict()
                results[rows[cut]][key] = metrics
                print(f"{rows[cut]} {label}: {json.dumps(metrics)}", flush=True)
    headers = [header] if args.readers else []
    for earlier in args.merge:
        loaded = json.loads(Path(earlier).read_text())
        headers.append(f"{', '.join(loaded['results'])}: {loaded['header']}")
        for name, by_set in loaded["results"].items():
            results.setdefault(name, by_set)
    lines = [
        *headers,
        "",
        "Gold paragraph, official metrics, "
        + ("every question" if not args.limit else f"first {args.limit} questions of each set")
        + ".",
        "",
        "| reader | " + " | ".join(f"{SETS[k][0]} EM / F1 (s)" for k in args.sets) + " |",
        "|---|" + "---|" * len(args.sets),
    ]
    for name, by_set in results.items():
        cells = [
            f"{by_set[k]['em']:.2f} / {by_set[k]['f1']:.2f} ({by_set[k]['seconds']:.0f})" if k in by_set else "-"
            for k in args.sets
        ]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    questions = {k: next(r[k]["questions"] for r in results.values() if k in r) for k in args.sets}
    lines += ["", "Questions: " + ", ".join(f"{SETS[k][0]} {n:,}" for k, n in questions.items()) + "."]
    changed = {
        k: next((r[k]["changed"] for r in results.values() if "changed" in r.get(k, {})), None) for k in args.sets
    }
    if any(n is not None for n in changed.values()):
        lines += [
            "Answers the cutting changed: "
            + ", ".join(f"{SETS[k][0]} {n:,}" for k, n in changed.items() if n is not None)
            + " (seconds: both decodings of one forward pass)."
        ]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"header": header, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
