#!/usr/bin/env python3
"""Passage encoding for index builds: torch fp32 against ONNX Runtime int8 (and the other backends and graph
recipes of bench/encoder_backends.py: `--variants torch-fp32 onnx-int8 openvino-int8 ...`), speed and recall, in
one process.

* Speed: passages/s at `--max-length` tokens (128 by default, the issue's yardstick) on SQuAD v1.1 dev
  paragraphs long enough to fill them; the two variants encode alternate chunks of `--chunk` passages, so a load
  that changes during the run (another job on the machine) weighs on both alike: compare the ratio.
* Recall: every SQuAD v1.1 dev paragraph (2,067) encoded at the index builds' 256 tokens by each variant; the
  first `--questions` questions encoded once by torch fp32 (queries stay on torch fp32 at search time); recall@20
  of the gold paragraph with each variant's passage vectors. `--distractors N` adds N passages of the Wikipedia
  subset (`--wiki-index`; none from SQuAD dev's articles, none a student was trained on) to make it harder.
* Open-domain questions (`--pool-questions FILE`, e.g. NQ test in DPR's tsv): the top `--pool-k` BM25 passages of
  `--wiki-index` for each of the first `--pool-limit` questions, pooled; each variant encodes the pool and every
  question ranks the whole pool by its torch-fp32 question vector; recall@1/5/20 = an answer-bearing passage
  (DPR's answer match) among the top k, over the questions whose pool holds one. A quick check beside the
  speed, in one process; `bench/retrieval.py --suite nq-pool` is the full suite (indexes, hybrid, all 3,610).
* A distilled passage encoder (`run_qa.py distill-encoder`) is a variant `RUNTIME-PRECISION@FOLDER`, e.g.
  `onnx-int8@runs/passage-encoder-l3/final`: its passage vectors are searched with `--encoder`'s questions, as
  an index built with `--encoder FOLDER` is (the student names its teacher as the question encoder).

    python bench/encoder_int8.py --out bench/results/encoder-int8.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from encoder_backends import BACKENDS, build_backend  # noqa: E402

SQUAD_V11_DEV = ROOT.parent / "shared" / "data" / "squad" / "dev-v1.1.json"
VARIANTS = {
    "torch-fp32": ("torch", "fp32"),
    "torch-bf16": ("torch", "bf16"),
    "onnx-int8": ("onnx", "int8"),
    "onnx-fp32": ("onnx", "fp32"),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", default="retriever")
    ap.add_argument("--squad", default=str(SQUAD_V11_DEV))
    ap.add_argument(
        "--variants",
        nargs="+",
        default=["torch-fp32", "onnx-int8"],
        metavar="VARIANT",
        help=f"{', '.join(list(VARIANTS) + list(BACKENDS))}, or VARIANT@FOLDER "
        "(another passage encoder, e.g. a distilled student)",
    )
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--passages", type=int, default=512, help="passages timed per variant")
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--questions", type=int, default=1000, help="for recall@20 (0: skip recall)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wiki-index", default="", help="index whose passages serve as --distractors")
    ap.add_argument("--distractors", type=int, default=0, help="Wikipedia passages added to the recall corpus")
    ap.add_argument(
        "--pool-questions",
        default="",
        help="open-domain questions with answers (DPR tsv, jsonl): "
        "recall over their pooled BM25 passages of --wiki-index",
    )
    ap.add_argument("--pool-k", type=int, default=20, help="BM25 passages pooled per question")
    ap.add_argument("--pool-limit", type=int, default=300, help="first N of --pool-questions")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from odqa.core.device import cpu_description
    from odqa.core.encoder import TextEncoder
    from odqa.corpus.questions import load_questions

    torch.set_num_threads(args.threads)
    items = load_questions(args.squad)
    contexts = sorted({q.context for q in items})
    encoders = {}
    for name in args.variants:
        variant, _, folder = name.partition("@")
        if variant in BACKENDS and not folder:
            base = TextEncoder.from_pretrained(args.encoder, device="cpu", precision="fp32", runtime="torch")
            encoders[name] = build_backend(variant, base, args.threads)
        elif variant in VARIANTS:
            runtime, precision = VARIANTS[variant]
            encoders[name] = TextEncoder.from_pretrained(
                folder or args.encoder, device="cpu", precision=precision, runtime=runtime
            )
        else:
            ap.error(f"--variants {name}: not one of {', '.join(VARIANTS)} (with @FOLDER) or {', '.join(BACKENDS)}")
        encoders[name].encode_passages(contexts[:4], batch_size=4)  # builds or loads the graph before timing
    corpus = list(contexts)
    if args.distractors:
        corpus += distractor_texts(args, [name.partition("@")[2] for name in args.variants])
    long_enough = [c for c in contexts if len(c.split()) >= 120][: args.passages]
    seconds = dict.fromkeys(encoders, 0.0)
    for lo in range(0, len(long_enough), args.chunk):
        part = long_enough[lo : lo + args.chunk]
        for name, encoder in encoders.items():
            t0 = time.perf_counter()
            encoder.encode_passages(part, batch_size=args.batch_size, max_length=args.max_length)
            seconds[name] += time.perf_counter() - t0
    rows = [
        {"variant": name, f"passages_per_s_at_{args.max_length}": round(len(long_enough) / seconds[name], 1)}
        for name in encoders
    ]
    reference = args.variants[0]
    for row in rows:
        row["speedup"] = round(seconds[reference] / seconds[row["variant"]], 2)
    if args.questions:
        asked = items[: args.questions]
        queries = encoders[reference].encode_queries([q.question for q in asked], batch_size=64)
        gold = np.array([contexts.index(q.context) for q in asked])
        for row in rows:
            vectors = encoders[row["variant"]].encode_passages(corpus, batch_size=args.batch_size, max_length=256)
            top = np.argsort(-(queries @ vectors.T), axis=1)[:, :20]
            row["recall@20"] = round(100 * float(np.mean([g in t for g, t in zip(gold, top)])), 2)
            row["recall@1"] = round(100 * float(np.mean(top[:, 0] == gold)), 2)
    pool_note = ""
    if args.pool_questions:
        recalls, pool_note = pool_recalls(args, [encoders[r["variant"]] for r in rows], encoders[reference])
        for row, recall in zip(rows, recalls):
            row.update(recall)
    for row in rows:
        print(json.dumps(row), flush=True)
    columns = list(rows[0])
    table = "\n".join(
        ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        + ["| " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows]
    )
    text = (
        f"`python bench/encoder_int8.py {' '.join(argv if argv is not None else sys.argv[1:])}`: encoder "
        f"`{args.encoder}`, {len(long_enough)} SQuAD v1.1 dev paragraphs timed at {args.max_length} tokens "
        f"(batch {args.batch_size}, length-sorted), recall over all {len(contexts)} paragraphs "
        f"{f'and {args.distractors:,} Wikipedia passages ' if args.distractors else ''}at 256 tokens "
        f"with {args.questions} questions encoded by {reference}; "
        f"{pool_note}{args.threads} threads of a "
        f"{cpu_description()}.\n\n{table}\n"
    )
    print("\n" + text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


def pool_recalls(args, encoders: list, reference) -> tuple[list[dict], str]:
    """Per encoder, recall@1/5/20 of `--pool-questions` over the union of their BM25 top `--pool-k` passages; and
    the pool described for the table's caption."""
    import numpy as np

    from odqa.core.answers import has_answer
    from odqa.core.text_encoding import passage_text
    from odqa.corpus.questions import load_questions
    from odqa.indexes.folder import FolderIndex
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    if not args.wiki_index:
        sys.exit("--pool-questions needs --wiki-index (an index of the Wikipedia subset with BM25)")
    items = load_questions(args.pool_questions, limit=args.pool_limit)
    bm25 = build_retriever(FolderIndex.open(args.wiki_index), RetrievalConfig(), RetrieverRuntime(), "bm25")
    hits = bm25.search([q.question for q in items], args.pool_k)
    rows: dict[int, str] = {}
    for per_question in hits:
        for hit in per_question:
            rows.setdefault(hit.row, passage_text(hit.passage.title, hit.passage.text))
    order = sorted(rows)
    position = {row: n for n, row in enumerate(order)}
    texts = [rows[r] for r in order]
    # the answer match tokenizes a passage per call: asked only of the passages a question ranks, once each
    matches: dict[tuple[int, int], bool] = {}

    def answered(question: int, passage: int) -> bool:
        if (question, passage) not in matches:
            item = items[question]
            matches[question, passage] = has_answer(texts[passage], item.answers, item.regex)
        return matches[question, passage]

    kept = [n for n, per_question in enumerate(hits) if any(answered(n, position[h.row]) for h in per_question)]
    queries = reference.encode_queries([items[n].question for n in kept], batch_size=64)
    out = []
    for encoder in encoders:
        vectors = encoder.encode_passages(texts, batch_size=args.batch_size, max_length=256)
        top = np.argsort(-(queries @ vectors.T), axis=1)[:, :20]
        found = [[answered(n, int(p)) for p in ranked] for n, ranked in zip(kept, top)]
        out.append(
            {f"pool recall@{k}": round(100 * float(np.mean([any(f[:k]) for f in found])), 2) for k in (1, 5, 20)}
        )
    return out, (
        f"pool recall: {Path(args.pool_questions).name}, the first {len(items)} questions' BM25 top "
        f"{args.pool_k} pooled ({len(texts):,} passages), "
        f"{len(kept)} questions with an answer-bearing passage in it; "
    )


def distractor_texts(args, students: list[str]) -> list[str]:
    """`--distractors` passages of `--wiki-index`, none from SQuAD dev's articles and none among
    the training passages of the distilled students given (their sample is drawn again from their recorded
    settings)."""
    from odqa.core.text_encoding import passage_text
    from odqa.retriever.training.distill_encoder import INFO_FILE, sample_passages

    if not args.wiki_index:
        sys.exit("--distractors needs --wiki-index (an index of the Wikipedia subset)")
    trained = set()
    for folder in filter(None, students):
        config = json.loads((Path(folder) / INFO_FILE).read_text()).get("config", {})
        if Path(config.get("index", "")).resolve() == Path(args.wiki_index).resolve():
            trained |= set(
                sample_passages(
                    config["index"], config["passages"] + config["holdout"], config.get("exclude", []), config["seed"]
                )
            )
    excluded = [args.squad, str(Path(args.squad).with_name("dev-v2.0.json"))]
    pool = sample_passages(
        args.wiki_index, args.distractors + len(trained), [e for e in excluded if Path(e).exists()], seed=20261126
    )
    # as text: SQuAD's paragraphs have no title field, and one batch holds either texts or pairs
    return [passage_text(*p) for p in pool if p not in trained][: args.distractors]


if __name__ == "__main__":
    sys.exit(main())
