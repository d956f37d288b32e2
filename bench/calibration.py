#!/usr/bin/env python3
"""Does the reader's probability mean something? For "the top answer is correct" (EM): the AUROC of the
calibrated probability (and, beside it, of the raw share: a softmax over one question's own candidates), the
expected calibration error (10 bins), and EM when only the most confident half of the questions is answered.

Suites:
* squad-v2: SQuAD v2.0 dev, each question read from its gold paragraph (`--distractors N` adds N other
  paragraphs of its article). Unanswerable questions (half of them) have no right answer. By default the
  `check` half of the articles (fit-calibration fits on the other half) and a seeded sample of `--limit`
  questions; `--all` reads every question of that half.
* open (with `--index` and `--questions`): open-domain questions (NQ dev, ...) through the pipeline over an
  index (`--retriever`, `--k` passages read).

    python bench/calibration.py                                      # 300 squad-v2 questions, shipped reader
    python bench/calibration.py --model runs/reader-v2/final --all --out bench/results/calibration.md
    python bench/calibration.py --index work_indexes/wiki --questions ../shared/data/dpr-qas/nq-dev.qa.tsv --limit 500

The shipped reader (v3 and later) never trained on SQuAD v2.0 dev, and its calibration was fitted on the other
half of the articles (and on EfficientQA dev), so the squad-v2 check half is unseen by both. NQ dev is in the
reader's distant supervision: for an unseen open suite read NQ test (`dpr-qas/nq-test.qa.tsv`); nothing here
is tuned on it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odqa.retriever.registry import RETRIEVERS  # noqa: E402 (after the path line)

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def figures(judged, cal) -> dict:
    """The figures of `judged` with probabilities from the calibration `cal`, and of the raw share beside them."""
    from dataclasses import replace

    from odqa.eval.confidence import auroc, confidence_metrics

    out = confidence_metrics(
        [replace(j, probability=cal.probability(j.margin, j.share)) for j in judged], cal.threshold
    )
    area = auroc([j.share for j in judged], [j.em for j in judged])
    out["auroc_share"] = round(area, 4) if area is not None else None
    # the share read as a probability: how far it is from calibrated
    out["ece_share"] = confidence_metrics([replace(j, probability=j.share) for j in judged])["ece"]
    return out


def rows_for(suite: str, judged, calibrations, seconds: float) -> list[dict]:
    return [
        {"suite": suite, "calibration": name, **figures(judged, cal), "seconds": seconds} for name, cal in calibrations
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="reader", help="reader name or path (default: the shipped models/reader)")
    ap.add_argument("--calibration", help="calibration.json (default: the model folder's, else the unfitted one)")
    ap.add_argument("--data", default=str(DATA / "squad" / "dev-v2.0.json"), help="SQuAD v2.0 dev JSON")
    ap.add_argument("--part", choices=("fit", "check", "all"), default="check", help="articles of --data read")
    ap.add_argument("--limit", type=int, default=300, help="questions sampled from --data (seeded)")
    ap.add_argument("--all", action="store_true", help="every question of --part")
    ap.add_argument("--distractors", type=int, default=0, help="other paragraphs of the article read per question")
    ap.add_argument("--index", help="index folder for the open suite")
    ap.add_argument("--questions", help="open-domain questions with answers (e.g. NQ dev) for the open suite")
    ap.add_argument("--open-limit", type=int, default=300, help="open-domain questions sampled (0: all)")
    ap.add_argument("--retriever", choices=RETRIEVERS.names, default="bm25")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="Markdown table to write (default: print only)")
    args = ap.parse_args(argv)

    import torch

    from odqa.config import OdqaConfig
    from odqa.core.device import cpu_description
    from odqa.corpus.questions import load_questions
    from odqa.eval.confidence import article_split, judge_pipeline, judge_reader, sample_questions
    from odqa.pipeline import Pipeline
    from odqa.reader.calibration import Calibration

    torch.set_num_threads(args.threads)
    pipeline = Pipeline(
        OdqaConfig.load(
            None,
            {
                "index": args.index,
                "reader.model": args.model,
                "reader.calibration": args.calibration,
                "retrieval.retriever": args.retriever,
                "retrieval.k": args.k,
                "linker.enabled": False,
            },
        )
    )
    reader = pipeline.reader
    cal = reader.calibration
    # every figure is recomputed from the same reads: the unfitted default beside the fitted calibration
    calibrations = [("none: sigmoid(margin)", Calibration())]
    if cal.fitted:
        calibrations.append(("fitted", cal))
    rows = []
    t0 = time.time()
    items = article_split(load_questions(args.data, include_impossible=True), args.part)
    items = sample_questions(items, 0 if args.all else args.limit, args.seed)
    judged = judge_reader(reader, items, distractors=args.distractors, seed=args.seed, progress=True)
    suite = f"SQuAD v2.0 dev ({args.part} articles), gold paragraph" + (
        f" + {args.distractors} distractors" if args.distractors else ""
    )
    rows += rows_for(suite, judged, calibrations, round(time.time() - t0, 1))
    if args.index and args.questions:
        t0 = time.time()
        open_items = sample_questions(load_questions(args.questions), args.open_limit, args.seed)
        judged = judge_pipeline(pipeline, open_items, progress=True)
        suite = f"{Path(args.questions).name} over {args.index} ({args.retriever}, top {args.k})"
        rows += rows_for(suite, judged, calibrations, round(time.time() - t0, 1))

    fitted_on = json.dumps(cal.source.get("sources", "")) if cal.fitted else "none"
    head = (
        f"Reader `{args.model}`; fitted calibration: {fitted_on}. {cpu_description()}, "
        f"{args.threads} thread(s), machine shared with other jobs."
    )
    cols = [
        "suite",
        "calibration",
        "questions",
        "em",
        "auroc",
        "auroc_share",
        "ece",
        "ece_share",
        "em_at_50_coverage",
        "threshold",
        "confident_share",
        "em_when_confident",
        "mean_probability",
    ]
    table = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    table += ["| " + " | ".join(str(r.get(c)) for c in cols) + " |" for r in rows]
    text = "\n".join(table) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
