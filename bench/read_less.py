#!/usr/bin/env python3
"""Reading less at equal quality: reader variants side by side on the same retrieved passages, in one process.

Each question's top `--k` passages are retrieved once (BM25 over `--index`).

Timed variants (`--variants`), each reading every question:
* `per-question[-B]`: one `read` per question (what the pipeline did before cross-question batching), forward
  batches of B windows (default 16);
* `batched-B`: `read_many` over `--group` questions at once, windows of all of them in shared forward batches
  of B windows (sorted by length, so batches hold windows of similar length);
* `early-M-P`: batched, the first M passages of every question first, the rest only where the best answer's
  calibrated probability is below P;
* `focus-W`: batched-16, each passage cut to the run of its sentences that best matches the question, at most W
  words (reader/focus.py, `reader.focus_words`); `focus-W-whole-N`: the first N passages whole;
  `focus-W-whole-N-early-M-P`: with early stopping as above.
Questions are split into chunks and every variant reads each chunk in turn, so a load that changes during the
run (another job on the machine) weighs on all variants alike; compare the ratios, not the absolute figures.
Both wall time and the process's CPU time are reported: on a machine shared with a higher-priority job the
CPU time is the steadier measure of the work a variant does.

Early stopping grid (`--early-grid`, untimed): every passage of every question decoded once (as the first
variant reads it: whole, or focused), then each
(M, P) replayed through the reader's own decision (`Reader.decided`, `Reader.rank`): EM/F1 and passages read
per question, the cost that early stopping saves.
EM/F1 of the top answer (the pipeline's reader settings: retrieval weight, no-answer threshold) are beside each.

    python bench/read_less.py --questions 200 --out bench/results/read-less.md
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
# sets kept for choosing settings (NQ-open dev is NQ test's questions: results/ runs before 2026-11-25 18:00
# used it, a choice made on test data)
DEFAULT_SETS = [
    str(DATA / "nq-open" / "NQ-open.efficientqa.dev.1.1.jsonl"),
    str(DATA / "dpr-qas" / "trivia-dev.qa.tsv"),
]


def parse_variant(name: str) -> dict:
    if "-early-" in name and name.startswith("focus-"):  # focus-W[-whole-N]-early-M-P: both
        focus, early = name.split("-early-")
        m, p = early.split("-")
        return {**parse_variant(focus), "early_stop_passages": int(m), "early_stop_probability": float(p)}
    parts = name.split("-")
    if name.startswith("per-question"):
        return {"batched": False, "batch_size": int(parts[2]) if len(parts) > 2 else 16, "early_stop_passages": 0}
    if parts[0] == "batched":
        return {"batched": True, "batch_size": int(parts[1]), "early_stop_passages": 0}
    if parts[0] == "early":
        return {
            "batched": True,
            "batch_size": 16,
            "early_stop_passages": int(parts[1]),
            "early_stop_probability": float(parts[2]),
        }
    if parts[0] == "focus" and (len(parts) == 2 or len(parts) == 4 and parts[2] == "whole"):
        return {
            "batched": True,
            "batch_size": 16,
            "early_stop_passages": 0,
            "focus_words": int(parts[1]),
            "whole_passages": int(parts[3]) if len(parts) == 4 else 0,
        }
    raise SystemExit(
        f"read_less.py: unknown variant {name!r} (per-question[-B], batched-B, early-M-P, focus-W, "
        "focus-W-whole-N, focus-W-whole-N-early-M-P)"
    )


def main(argv=None) -> int:
    from odqa.core.runtime import INFERENCE, PRECISIONS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=str(Path.home() / ".cache" / "odqa" / "indexes" / "wiki"))
    ap.add_argument("--sets", nargs="+", default=DEFAULT_SETS, help="question files (sampled, seed 13)")
    ap.add_argument("--questions", type=int, default=200, help="per question file")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--group", type=int, default=8, help="questions per read_many call (eval-qa's batch)")
    ap.add_argument("--chunk", type=int, default=40, help="questions each variant reads before the next one's turn")
    ap.add_argument(
        "--variants", nargs="+", default=["per-question", "batched-16", "batched-32", "early-3-0.5", "early-3-0.7"]
    )
    ap.add_argument(
        "--early-grid",
        nargs="*",
        default=["2-0.5", "3-0.4", "3-0.5", "3-0.7", "5-0.5"],
        help="M-P pairs replayed on decoded passages (untimed)",
    )
    ap.add_argument("--grid-questions", type=int, default=0, help="questions per file for the grid (0: --questions)")
    ap.add_argument(
        "--count-only",
        action="store_true",
        help="no reading: the tokens each batching variant computes per question (padding included), "
        "from the windows alone; deterministic, so it holds on a loaded machine too",
    )
    ap.add_argument(
        "--only-articles-of",
        default="",
        help="SQuAD file: keep the questions of its articles only (e.g. dev-v2.0.json: the squad-open "
        "articles kept for choosing settings)",
    )
    ap.add_argument(
        "--exclude-articles-of",
        default="",
        help="SQuAD file: leave out the questions of its articles (dev-v2.0.json: the held-out articles)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default=INFERENCE.precision, choices=PRECISIONS)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    import torch

    from odqa.config import OdqaConfig
    from odqa.core.device import cpu_description
    from odqa.corpus.questions import drop_articles, keep_articles, load_questions, with_answers
    from odqa.eval.qa import score_answer
    from odqa.pipeline import Pipeline, relative_scores

    torch.set_num_threads(args.threads)
    items = []
    for path in args.sets:
        loaded = with_answers(load_questions(path), path)
        loaded = keep_articles(drop_articles(loaded, args.exclude_articles_of or None), args.only_articles_of or None)
        items += random.Random(13).sample(loaded, min(args.questions, len(loaded)))
    pipeline = Pipeline(
        OdqaConfig.load(
            None,
            {"index": args.index, "retrieval.retriever": "bm25", "linker.enabled": False, "precision": args.precision},
        )
    )
    hits = pipeline.retriever("bm25").search([q.question for q in items], args.k)
    passages = [[h.passage for h in hs] for hs in hits]
    scores = [relative_scores([h.score for h in hs]) for hs in hits]
    if args.count_only:
        return count_tokens(pipeline.config.reader.model, items, passages, args)
    reader = pipeline.reader
    base = dict(vars(reader.settings))
    reader.read(items[0].question, passages[0], scores[0])  # warm-up: builds or loads the runtime's graph

    variants = {name: parse_variant(name) for name in args.variants}
    seconds = dict.fromkeys(variants, 0.0)
    cpu_seconds = dict.fromkeys(variants, 0.0)
    predictions: dict[str, list[str]] = {name: [] for name in variants}
    passages_read = dict.fromkeys(variants, 0)
    for lo in range(0, len(items), args.chunk):
        chunk = range(lo, min(lo + args.chunk, len(items)))
        for name, v in variants.items():
            reader.settings.__dict__.update(base)
            reader.settings.batch_size = v["batch_size"]
            reader.settings.early_stop_passages = v["early_stop_passages"]
            reader.settings.early_stop_probability = v.get("early_stop_probability", 1.0)
            reader.settings.focus_words = v.get("focus_words", 0)
            reader.settings.whole_passages = v.get("whole_passages", 0)
            out = []
            before = reader.passages_read
            t0, c0 = time.perf_counter(), time.process_time()
            if v["batched"]:
                for g in range(chunk.start, chunk.stop, args.group):
                    idx = range(g, min(g + args.group, chunk.stop))
                    out += reader.read_many(
                        [items[i].question for i in idx], [passages[i] for i in idx], [scores[i] for i in idx]
                    )
            else:
                out = [reader.read(items[i].question, passages[i], scores[i]) for i in chunk]
            seconds[name] += time.perf_counter() - t0
            cpu_seconds[name] += time.process_time() - c0
            predictions[name] += [a[0].text if a else "" for a in out]
            passages_read[name] += reader.passages_read - before
    rows = []
    reference = args.variants[0]
    for name in variants:
        em = f1 = 0.0
        for item, prediction in zip(items, predictions[name]):
            e, f = score_answer(prediction, item)
            em, f1 = em + e, f1 + f
        same = sum(a == b for a, b in zip(predictions[name], predictions[reference]))
        rows.append(
            {
                "variant": name,
                "ms_per_question": round(1000 * seconds[name] / len(items), 1),
                "speedup": round(seconds[reference] / seconds[name], 2),
                "cpu_ms_per_question": round(1000 * cpu_seconds[name] / len(items), 1),
                "cpu_speedup": round(cpu_seconds[reference] / cpu_seconds[name], 2),
                "em": round(100 * em / len(items), 2),
                "f1": round(100 * f1 / len(items), 2),
                "same_top_answer": round(100 * same / len(items), 1),
                "passages_read_per_question": round(passages_read[name] / len(items), 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    first = variants[reference]  # the grid replays early stopping over the first variant's reading
    reader.settings.__dict__.update(base)
    reader.settings.focus_words = first.get("focus_words", 0)
    reader.settings.whole_passages = first.get("whole_passages", 0)
    rows += early_grid(reader, items, passages, scores, args)
    columns = list(rows[0])
    table = "\n".join(
        ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        + ["| " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows]
    )
    sets = ", ".join(f"{Path(p).name}" for p in args.sets)
    text = (
        f"`python bench/read_less.py {' '.join(argv if argv is not None else sys.argv[1:])}`: {len(items)} "
        f"questions ({args.questions} sampled from each of {sets}), BM25 top {args.k} over {args.index}, "
        f"reader {reader.plan.label}, {args.threads} threads of a {cpu_description()}.\n\n{table}\n"
    )
    print("\n" + text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


def count_tokens(model: str, items, passages, args) -> int:
    """Tokens per question each variant's forward batches hold (windows sorted by length, longest first, then cut
    into batches of B, as Reader.logits does), and the attention term (batch x longest^2) relative to the first."""
    from transformers import AutoTokenizer

    from odqa.core.models import hub_options, resolve_model
    from odqa.reader.features import tokenize_windows
    from odqa.reader.focus import Focus

    path = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(path, **hub_options(path))

    def window_lengths(focus_words: int, whole_passages: int = 0) -> list[list[int]]:
        focus = Focus(focus_words, whole_first=whole_passages) if focus_words else None
        out = []
        for q, ps in zip(items, passages):
            texts = [p.text for p in ps if (p.text or "").strip()]
            if focus is not None:
                spans = focus.spans([q.question] * len(texts), texts, range(len(texts)))
                texts = [t[a:b] for t, (a, b) in zip(texts, spans)]
            out.append(
                [
                    len(ids)
                    for ids in tokenize_windows(tokenizer, [q.question] * len(texts), texts).encoding["input_ids"]
                ]
            )
        return out

    by_focus = {(0, 0): window_lengths(0)}
    real = sum(map(sum, by_focus[(0, 0)]))
    rows = []
    for name in args.variants:
        v = parse_variant(name)
        key = (v.get("focus_words", 0), v.get("whole_passages", 0))
        if key not in by_focus:
            by_focus[key] = window_lengths(*key)
        lengths = by_focus[key]
        groups = (
            [sum(lengths[i : i + args.group], []) for i in range(0, len(lengths), args.group)]
            if v["batched"]
            else lengths
        )
        padded = attention = 0
        for group in groups:
            ordered = sorted(group, reverse=True)
            for lo in range(0, len(ordered), v["batch_size"]):
                batch = ordered[lo : lo + v["batch_size"]]
                padded += len(batch) * batch[0]
                attention += len(batch) * batch[0] ** 2
        own_real = sum(map(sum, lengths))
        rows.append(
            {
                "variant": name,
                "tokens_per_question": round(padded / len(items)),
                "real_tokens_per_question": round(own_real / len(items)),
                "padding_share": round(100 * (1 - own_real / padded), 1),
                "attention": attention,
            }
        )
    first = rows[0]["attention"]
    for row in rows:
        row["attention_vs_first"] = round(row.pop("attention") / first, 3)
    print(json.dumps({"questions": len(items), "real_tokens_per_question": round(real / len(items))}))
    for row in rows:
        print(json.dumps(row), flush=True)
    return 0


def window_tokens(reader, question: str, texts: list[str]) -> list[int]:
    """Tokens (question and special tokens included, no padding) the reader computes for each passage: the part
    its focus settings read, in windows as Reader.logits cuts them."""
    from odqa.reader.features import tokenize_windows

    parts = reader.focus_spans([question] * len(texts), texts, range(len(texts)))
    s = reader.settings
    w = tokenize_windows(
        reader.tokenizer,
        [question] * len(texts),
        [t[a:b] for t, (a, b) in zip(texts, parts)],
        s.max_length,
        s.stride,
        s.max_query_tokens,
    )
    per_passage = [0] * len(texts)
    for sample, ids in zip(w.sample, w.encoding["input_ids"]):
        per_passage[sample] += len(ids)
    return per_passage


def early_grid(reader, items, passages, scores, args) -> list[dict]:
    """EM/F1 and passages read of each early-stopping setting, replayed on passages decoded once."""
    from odqa.eval.qa import score_answer
    from odqa.reader.model import ReadState

    if not args.early_grid:
        return []
    per_set = args.grid_questions or args.questions
    picked = [
        i
        for s in range(len(args.sets))
        for i in range(s * args.questions, s * args.questions + per_set)
        if i < len(items)
    ]
    threshold = reader.settings.no_answer_threshold
    decoded = []
    texts = {i: ReadState.make(items[i].question, passages[i], scores[i], 1).texts for i in picked}
    tokens = {i: window_tokens(reader, items[i].question, texts[i]) for i in picked}
    for g in range(0, len(picked), args.group):
        idx = picked[g : g + args.group]
        pairs = [(i, n) for i in idx for n in range(len(texts[i]))]
        out = reader.decode_passages(
            [items[i].question for i, _ in pairs], [texts[i][n] for i, n in pairs], [n for _, n in pairs]
        )
        by_question = {i: [] for i in idx}
        for (i, _), result in zip(pairs, out):
            by_question[i].append(result)
        decoded += [by_question[i] for i in idx]
    rows = []
    settings = [(0, 1.0)] + [(int(m), float(p)) for m, p in (x.split("-") for x in args.early_grid)]
    for m, p in settings:
        reader.settings.early_stop_probability = p
        em = f1 = 0.0
        read = tokens_read = 0
        for i, done in zip(picked, decoded):
            state = ReadState.make(items[i].question, passages[i], scores[i], 1)
            state.read = list(done[:m]) if m else list(done)
            if m and not reader.decided(state, threshold):
                state.read = list(done)
            read += len(state.read)
            tokens_read += sum(tokens[i][: len(state.read)])
            ranked, _ = reader.rank(state, threshold)
            e, f = score_answer(ranked[0].text if ranked else "", items[i])
            em, f1 = em + e, f1 + f
        rows.append(
            {
                "variant": f"replay: {'all' if not m else f'early-{m}-{p}'}",
                "em": round(100 * em / len(picked), 2),
                "f1": round(100 * f1 / len(picked), 2),
                "passages_read_per_question": round(read / len(picked), 2),
                "tokens_read_per_question": round(tokens_read / len(picked)),
                "questions": len(picked),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    reader.settings.early_stop_probability = 1.0
    return rows


if __name__ == "__main__":
    sys.exit(main())
