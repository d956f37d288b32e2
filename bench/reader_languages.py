#!/usr/bin/env python3
"""Readers compared on the gold paragraphs of each language's dev set, in one run: KorQuAD 1.0 dev (Korean,
KorQuAD's official EM/F1), CMRC 2018 dev (Chinese, CMRC 2018's) and SQuAD v1.1 dev (English, SQuAD's), every
question unless `--limit`, with each reader's seconds per set on the CPU the header names.

    python bench/reader_languages.py --readers reader-multilingual reader --out bench/results/reader-languages.md
    python bench/reader_languages.py --readers runs/mreader-export reader --sets korquad cmrc --limit 1000
    python bench/reader_languages.py --readers reader-multilingual --sets korquad cmrc drcd-test --cut both \\
        --before 6d7a5a9 --limit 1000

`--cut both` decodes each forward pass twice, answers cut as their language cuts words (indexes.cutting) and not,
and `--before REV` once more as reader/decode.py did at a git revision, so the rows differ by the decoding alone
(bench/results/answer-cutting.md).

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


def decoding_of(reader, cut: bool):
    """Best answer texts of a chunk from its forward pass, decoded with reader.settings.cut_answers = `cut`."""

    def decode(contexts: list[str], found) -> list[str]:
        reader.settings.cut_answers = cut
        return [a.text if a is not None else "" for a in reader.decode_batch(contexts, found)]

    return decode


def decoding_at(reader, revision: str):
    """Best answer texts of a chunk from its forward pass, decoded by reader/decode.py as it was at git
    `revision` (its decode_passage and aggregate, called as Reader.decode_batch calls them): the decoding before a
    change, on the very logits the change is measured on."""
    import importlib.util
    import subprocess
    import tempfile

    source = subprocess.run(
        ["git", "show", f"{revision}:reader/decode.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="decode-"))
    (folder / "decode_before.py").write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"decode_at_{revision}", folder / "decode_before.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)

    def decode(contexts: list[str], found) -> list[str]:
        w, starts, ends = found
        s = reader.settings
        windows: list[list] = [[] for _ in contexts]
        for i, p in enumerate(w.sample):
            windows[p].append((starts[i], ends[i], w.context_start[i], w.context_end[i], w.offsets[i]))
        texts = []
        for text, passage_windows in zip(contexts, windows):
            spans, null = module.decode_passage(
                0, text, passage_windows, max_answer_tokens=s.answer_tokens, top_k=s.spans_per_window
            )  # a past revision's decode, before answers were cut
            ranked = module.aggregate(
                spans,
                [null],
                None,
                retrieval_weight=0.0,
                no_answer_threshold=None,
                top_n=1,
                temperature=s.temperature,
                selection_weight=0.0,
            )
            texts.append(ranked[0].best.text if ranked else "")
        return texts

    return decode


def perfect_logits(reader, part: list) -> tuple:
    """What `reader.logits` would give for the questions of `part` were the reader perfect: in each window that
    holds the first gold answer whole, the start and end logits peak on the first and last of the reader's
    pieces that cover it (so decoding reads back the piece span a model trained on these labels is asked to find).
    Decoded, it scores the ceiling the tokenizer and the decoding leave (docs/multilingual-reader.md)."""
    import numpy as np

    from odqa.reader.features import tokenize_windows

    s = reader.settings
    w = tokenize_windows(
        reader.tokenizer,
        [q.question for q in part],
        [q.context for q in part],
        s.max_length,
        s.stride,
        s.max_query_tokens,
    )
    starts, ends = [], []
    for i, pair in enumerate(w.sample):
        n = len(w.encoding["input_ids"][i])
        start_logits, end_logits = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=np.float32)
        q = part[pair]
        if q.answers and q.answer_starts:
            a, b = q.answer_starts[0], q.answer_starts[0] + len(q.answers[0])
            offsets = w.offsets[i]
            covering = [
                t for t in range(w.context_start[i], w.context_end[i] + 1) if offsets[t][1] > a and offsets[t][0] < b
            ]
            if covering and offsets[covering[0]][0] <= a and offsets[covering[-1]][1] >= b:
                start_logits[covering[0]] = end_logits[covering[-1]] = 10.0
        starts.append(start_logits)
        ends.append(end_logits)
    return w, starts, ends


def evaluate_decodings(
    reader, path: Path, limit: int | None, decodings: dict, chunk: int = 64, perfect: bool = False
) -> dict:
    """evaluate_reader's figures, each forward pass decoded by each of `decodings` (row name -> decode(contexts,
    logits) -> answer texts): {row: metrics}. `seconds` is the run's (forward passes and every decoding),
    `decode_seconds` the row's own decoding; `changed` counts the questions whose answers differ between rows.
    `perfect`: a perfect reader's logits instead of the reader's forward passes (perfect_logits)."""
    import time

    from odqa.corpus.questions import load_questions
    from odqa.eval.reader_eval import metric_for, rounded, squad_metrics

    items = load_questions(path)[: limit or None]
    metric = metric_for(items)
    preds: dict[str, dict[str, str]] = {row: {} for row in decodings}
    decode_seconds = dict.fromkeys(decodings, 0.0)
    gold: dict[str, list[str]] = {}
    started = time.time()
    for lo in range(0, len(items), chunk):
        part = items[lo : lo + chunk]
        ids = [q.id or str(lo + i) for i, q in enumerate(part)]
        contexts = [q.context or "" for q in part]
        found = perfect_logits(reader, part) if perfect else reader.logits([q.question for q in part], contexts)
        for row, decode in decodings.items():
            decoding_started = time.time()
            preds[row].update(zip(ids, decode(contexts, found)))
            decode_seconds[row] += time.time() - decoding_started
        gold.update((qid, list(q.answers)) for qid, q in zip(ids, part))
        print(f"  {min(lo + chunk, len(items))}/{len(items)} questions", file=sys.stderr, flush=True)
    seconds = time.time() - started
    changed = sum(len({preds[row][qid] for row in decodings}) > 1 for qid in gold)
    return {
        row: {
            **rounded(squad_metrics(preds[row], gold, metric), seconds),
            "metric": metric,
            "decode_seconds": round(decode_seconds[row], 1),
            "changed": changed,
        }
        for row in decodings
    }


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
    ap.add_argument(
        "--perfect",
        action="store_true",
        help="decode a perfect reader's logits (each gold answer's covering piece span) instead of the readers' "
        "forward passes: the ceiling the tokenizer and the decoding leave, in seconds (with --cut or --before)",
    )
    ap.add_argument(
        "--before",
        metavar="REV",
        help="also decode each forward pass with reader/decode.py as it was at git revision REV (a row of its own): "
        "a decoding change measured on the very same logits",
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
    from odqa.reader.registry import build_reader
    from odqa.reader.settings import ReaderSettings

    torch.set_num_threads(args.threads)
    header = f"{cpu_description()}; {args.threads} threads; precision {args.precision}"
    print(header, flush=True)
    results: dict[str, dict[str, dict]] = {}
    for name in args.readers:
        reader = build_reader(ReaderSettings(model=name), device="cpu")
        if args.precision != INFERENCE.precision:
            reader.settings.precision = args.precision
        decodings = {}
        reading = f"a perfect reader with {name}'s pieces" if args.perfect else name
        if args.before:
            decodings[f"{reading}, decoded as at {args.before}"] = decoding_at(reader, args.before)
        for cut in CUT_ROWS.get(args.cut, ()):
            decodings[f"{reading}, cut {'on' if cut else 'off'}"] = decoding_of(reader, cut)
        if args.perfect and not decodings:
            ap.error("--perfect decodes a perfect reader's logits: name the decodings (--cut, --before)")
        for row in decodings or [name]:
            results[row] = {}
        for key in args.sets:
            label, path = SETS[key]
            if decodings:
                by_row = evaluate_decodings(reader, path, args.limit or None, decodings, perfect=args.perfect)
            else:
                by_row = {name: evaluate_reader(reader, path, limit=args.limit or None, progress=True)}
            for row, metrics in by_row.items():
                metrics["plan"] = reader.plan.to_dict()
                results[row][key] = metrics
                print(f"{row} {label}: {json.dumps(metrics)}", flush=True)
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
        + ("a perfect reader's logits (bench/reader_languages.py perfect_logits), " if args.perfect else "")
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
    timed = {name: by_set for name, by_set in results.items() if any("decode_seconds" in v for v in by_set.values())}
    if timed:
        lines += [
            "",
            "Seconds above: the forward passes and every decoding of the set; each decoding's own:",
            "",
            "| decoding | " + " | ".join(f"{SETS[k][0]} decode s" for k in args.sets) + " |",
            "|---|" + "---|" * len(args.sets),
            *(
                f"| `{name}` | "
                + " | ".join(f"{by_set[k]['decode_seconds']:.1f}" if k in by_set else "-" for k in args.sets)
                + " |"
                for name, by_set in timed.items()
            ),
            "",
            "Questions whose answers differ between the decodings: "
            + ", ".join(f"{SETS[k][0]} {next(iter(timed.values()))[k]['changed']:,}" for k in args.sets)
            + ".",
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
