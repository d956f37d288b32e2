#!/usr/bin/env python3
"""Entity linking in English, Korean and Chinese, linkers side by side (issue 74).

    python bench/linker_languages.py --models linker=work_indexes/kb linker-multilingual=work_indexes/kb-multi \
        --demo-kbs linker=DEMO_KB_MINILM linker-multilingual=DEMO_KB_MULTI --out bench/results/linker-languages.md

Sets, each linked by every model against the KB named for it (a KB of the model's entity encoder):
* LC-QuAD dev (the held-out 10 % of LC-QuAD 1.0 train, every 10th id) and QALD 1-4 (gold mentions, the test set):
  English, over the Wikipedia subset's KB.
* Silver dev splits of KorQuAD 1.0 dev, CMRC 2018 dev and trial, DRCD dev and test: article titles found in the
  questions and sentences of every 5th article (by a hash of its title; `linker.data.silver_examples`), never
  trained on; over a KB that holds those articles (the multilingual training KB).
* Cross-language: the demo's Korean and Chinese questions (odqa/demo/questions-{ko,zh}.jsonl) with their subject's
  mention, over the demo's English KB.

Figures: weak F1 in-KB (a predicted mention overlapping a gold one with its entity; ELQ's and GERBIL's in-KB),
recall@1 (the gold entity is the best of the gold span's candidates: disambiguation with the mention given), and the
milliseconds a question takes at batch 1. The CPU model and flags are printed with the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
SILVER = {
    "KorQuAD dev (silver)": "multilingual/korquad-v1.0-dev.json",
    "CMRC dev (silver)": "multilingual/cmrc2018-dev.json",
    "CMRC trial (silver)": "multilingual/cmrc2018-trial.json",
    "DRCD dev (silver)": "multilingual/drcd-dev.json",
    "DRCD test (silver)": "multilingual/drcd-test.json",
}


def cpu_line() -> str:
    from odqa.core.device import cpu_description

    return cpu_description()


def english_sets(kb) -> dict:
    from odqa.eval.linking import load_eval_examples

    return {
        "LC-QuAD dev (10%)": load_eval_examples([DATA / "el" / "lcquad1-train.json"], kb, "dev"),
        "QALD 1-4 (test)": load_eval_examples(
            [DATA / "el" / "qald" / f"qald-{i}.mentions.json" for i in range(1, 5)], kb, "all"
        ),
    }


def silver_sets(kb) -> dict:
    from odqa.linker.data import silver_examples

    return {name: silver_examples(kb, DATA / path).dev for name, path in SILVER.items()}


def demo_sets(kb) -> dict:
    from odqa.demo_corpus import DEMO_QUESTIONS_BY_LANGUAGE
    from odqa.linker.data import ELExample, GoldMention

    out = {}
    for language in ("ko", "zh"):
        examples = []
        for line in DEMO_QUESTIONS_BY_LANGUAGE[language].read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            start = row["question"].find(row["mention"])
            entity = kb.row_of_title(row["title"])
            gold = GoldMention(start, start + len(row["mention"]), row["title"], -1 if entity is None else entity)
            examples.append(ELExample(row["question"], [gold], f"demo-{language}", complete=False))
        out[f"demo {language} -> English KB"] = examples
    return out


def measure(linker, examples) -> dict:
    from odqa.linker.metrics import evaluate

    started = time.perf_counter()
    predictions = [linker.link([ex.question])[0] for ex in examples]
    ms = (time.perf_counter() - started) * 1000 / max(1, len(examples))
    metrics = evaluate(examples, predictions)
    golds = [(ex, g) for ex in examples for g in ex.mentions if g.has_span and g.in_kb]
    right = 0
    for ex, g in golds:
        found = linker.disambiguate(ex.question, [(g.start, g.end)])[0]
        right += found is not None and found.entity is not None and found.entity.title == g.title
    return {
        "questions": len(examples),
        "gold_in_kb": len(golds),
        "weak_f1_in_kb": metrics["weak_f1_in_kb"],
        "weak_recall_in_kb": metrics["weak_recall_in_kb"],
        "weak_precision_in_kb": metrics["weak_precision_in_kb"],
        "recall_at_1": right / max(1, len(golds)),
        "ms_per_question": ms,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", required=True, metavar="MODEL=KB", help="each linker with its KB")
    parser.add_argument("--demo-kbs", nargs="*", default=[], metavar="MODEL=KB", help="each linker's demo KB")
    parser.add_argument("--sets", nargs="+", default=["english", "silver", "demo"])
    parser.add_argument("--limit", type=int, default=0, help="first N examples of each set (0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--out", help="write the Markdown table here too")
    args = parser.parse_args(argv)

    import torch

    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

    torch.set_num_threads(args.threads)
    demo_kbs = dict(pair.split("=", 1) for pair in args.demo_kbs)
    rows = []
    for pair in args.models:
        model, kb_path = pair.split("=", 1)
        kb = KnowledgeBase.load(kb_path)
        linker = Linker.from_pretrained(model, kb=kb, precision=args.precision)
        sets: dict = {}
        if "english" in args.sets:
            sets.update(english_sets(kb))
        if "silver" in args.sets:
            sets.update(silver_sets(kb))
        if "demo" in args.sets and model in demo_kbs:
            demo_kb = KnowledgeBase.load(demo_kbs[model])
            demo_linker = Linker.from_pretrained(model, kb=demo_kb, precision=args.precision)
            for name, examples in demo_sets(demo_kb).items():
                rows.append((name, model, measure(demo_linker, examples[: args.limit or None])))
                print(rows[-1], flush=True)
        for name, examples in sets.items():
            rows.append((name, model, measure(linker, examples[: args.limit or None])))
            print(rows[-1], flush=True)
    lines = [
        f"CPU: {cpu_line()}; {args.threads} threads; precision {args.precision}",
        "",
        "| set | linker | questions | gold in KB | weak F1 in-KB | weak P/R in-KB | recall@1 (gold span) | ms/q |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, model, m in sorted(rows, key=lambda r: (r[0], r[1])):
        lines.append(
            f"| {name} | {model} | {m['questions']} | {m['gold_in_kb']} | {m['weak_f1_in_kb']:.3f} | "
            f"{m['weak_precision_in_kb']:.3f}/{m['weak_recall_in_kb']:.3f} | {m['recall_at_1']:.3f} | "
            f"{m['ms_per_question']:.1f} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(
            f"# Entity linking by language\n\n`python bench/linker_languages.py {' '.join(argv or sys.argv[1:])}`\n\n"
            + text
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
