"""Dense retriever training commands: build-dpr-data, mine-negatives, train-retriever, eval-dpr, tune-hybrid."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from odqa.commands.common import add_command, add_output, print_json_last
from odqa.commands.options import COUNT, FRACTION, POSITIVE_INT, add_options, dataclass_values
from odqa.core.settings import TRAINING_PRECISIONS
from odqa.retriever.settings import RetrievalConfig
from odqa.retriever.training.train_config import EncoderDistillConfig, RetrieverTrainConfig


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "build-dpr-data",
        "DPR training data: BM25 top-k per question; answer-bearing passages are positives, the rest hard negatives.",
        "odqa build-dpr-data --questions /work/shared/data/dpr-qas/nq-dev.qa.tsv "
        "/work/shared/data/dpr-qas/trivia-dev.qa.tsv --index work_indexes/wiki --k 20 --output runs/dpr/train.jsonl",
        _build,
    )
    p.add_argument(
        "--questions",
        nargs="+",
        required=True,
        metavar="FILE",
        help="question files with answers (DPR qas TSV, WebQuestions JSON, CuratedTREC TSV, SQuAD v2 JSON); "
        "test sets are refused",
    )
    p.add_argument("--index", required=True, help="index folder with a BM25 index")
    add_output(p, "--output", required=True, help="JSON Lines to write; a rerun appends and skips finished questions")
    p.add_argument("--k", type=POSITIVE_INT, default=20, help="passages retrieved per question")
    p.add_argument("--limit", type=COUNT, default=0, help="first N questions of each file (0: all)")
    p.add_argument("--max-positives", type=COUNT, default=0, help="positives kept per question (0: all in the top k)")
    p.add_argument(
        "--max-hard-negatives", type=COUNT, default=0, help="hard negatives kept per question (0: all in the top k)"
    )
    p.add_argument("--batch-size", type=POSITIVE_INT, default=64, help="questions per BM25 batch (and per append)")
    p.add_argument(
        "--dev-fraction",
        type=FRACTION,
        default=0.0,
        help="share of each source set aside before the positive filter as an unbiased dev split "
        "(for choosing hybrid fusion); never trained on",
    )
    add_output(p, "--dev-dir", folder=True, help="folder for the dev split, one SOURCE.dev.jsonl per source file")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the counts as JSON on the last line")

    p = add_command(
        subparsers,
        "mine-negatives",
        "Append dense hard negatives to DPR data: each question's top-ranked contexts of the file's own pool "
        "that hold no answer (ANCE/RocketQA style).",
        "odqa mine-negatives --train runs/dpr/train.jsonl --encoder retriever --output runs/dpr/mined.jsonl",
        _mine,
    )
    p.add_argument("--train", required=True, help="DPR-format JSONL or JSON")
    add_output(p, "--output", required=True, help="JSON Lines to write (written whole, then renamed into place)")
    p.add_argument("--encoder", default="retriever", help="encoder that ranks the pool (name, shipped model or path)")
    p.add_argument("--per-question", type=POSITIVE_INT, default=3, help="dense negatives appended per question")
    p.add_argument("--depth", type=POSITIVE_INT, default=50, help="ranked contexts looked at per question")
    p.add_argument(
        "--skip-top",
        type=COUNT,
        default=0,
        help="acceptable candidates skipped at the top of each ranking (likely false negatives)",
    )
    p.add_argument("--exclude", help="DPR file whose questions are left out (e.g. train-retriever's heldout.jsonl)")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=64)
    p.add_argument("--threads", type=COUNT, default=0)
    p.add_argument(
        "--precision",
        default=None,
        choices=TRAINING_PRECISIONS,
        help="autocast while encoding (default: the encoder's)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true")

    p = add_command(
        subparsers,
        "train-retriever",
        "Train a dense retriever (DPR loss: in-batch + hard "
        "negatives); resumes from the newest checkpoint in --output.",
        "odqa train-retriever --train runs/dpr/train.jsonl --holdout 500 --output runs/dpr/minilm "
        "--max-steps 300 --batch-size 16 --hard-negatives 1 --threads 1",
        _train,
    )
    p.add_argument(
        "--train", nargs="+", required=True, metavar="FILE", help="DPR-format JSONL or JSON (DPR's own files too)"
    )
    add_output(
        p, "--output", folder=True, required=True, help="folder for checkpoints and the final model (OUTPUT/final)"
    )
    add_options(p, RetrieverTrainConfig, ["init"])
    p.add_argument(
        "--separate-encoders", action="store_true", help="separate question and passage encoders (default: shared)"
    )
    add_options(
        p,
        RetrieverTrainConfig,
        [
            "val_files",
            "holdout",
            "limit",
            "q_max_length",
            "p_max_length",
            "batch_size",
            "gpu_batch_size",
            "hard_negatives",
            "chunk_size",
            "lr",
            "warmup",
            "weight_decay",
            "epochs",
            "max_steps",
            "scale",
            "mask_answer_negatives",
            "distill_weight",
            "distill_from",
            "seed",
            "save_every",
            "eval_every",
            "early_stop",
            "pool_validation",
            "eval_batch_size",
            "log_every",
            "threads",
            "precision",
            "device",
            "progress",
        ],
        rename={"val_files": "val", "mask_answer_negatives": "answer-mask"},
    )
    p.add_argument("--json", action="store_true", help="print the last validation as JSON on the last line")

    p = add_command(
        subparsers,
        "eval-dpr",
        "Compare encoders on held-out DPR data: dense recall@k over a small corpus of all its contexts.",
        "odqa eval-dpr --data runs/dpr/minilm/heldout.jsonl --encoder minilm runs/dpr/minilm/final --json",
        _eval,
    )
    p.add_argument("--data", required=True, help="DPR-format JSONL/JSON (e.g. OUTPUT/heldout.jsonl of train-retriever)")
    p.add_argument("--encoder", nargs="+", default=["minilm"], help="encoder(s) to compare")
    p.add_argument(
        "--question-encoder", help="separate question encoder (for a model trained with --separate-encoders)"
    )
    p.add_argument("--k", type=POSITIVE_INT, nargs="+", default=[1, 5, 20])
    p.add_argument("--q-max-length", type=POSITIVE_INT, default=32)
    p.add_argument("--p-max-length", type=POSITIVE_INT, default=160)
    p.add_argument("--batch-size", type=POSITIVE_INT, default=64)
    p.add_argument("--threads", type=COUNT, default=0)
    p.add_argument(
        "--bf16", action="store_true", help="bf16 autocast while encoding (fast on CPUs with AMX or AVX512-BF16)"
    )
    p.add_argument("--json", action="store_true")

    p = add_command(
        subparsers,
        "tune-hybrid",
        "Choose the hybrid fusion method and alpha on a dev split (never a test set); --record keeps it in the index.",
        "odqa tune-hybrid --index indexes/squad-v2 --questions /work/shared/data/squad/dev-v2.0.json "
        "--limit 500 --output runs/hybrid-tuning.json --record",
        _tune,
    )
    p.add_argument("--index", required=True, help="index folder with bm25 and dense")
    p.add_argument("--questions", required=True, help="dev question file (test sets are refused)")
    p.add_argument("--limit", type=COUNT, default=0)
    p.add_argument("--encoder", help="question encoder (default: the index's)")
    p.add_argument("--alphas", type=FRACTION, nargs="+", default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    p.add_argument("--rrf-k", type=COUNT, nargs="+", default=[RetrievalConfig.rrf_k])
    p.add_argument("--candidates", type=POSITIVE_INT, default=RetrievalConfig.candidates)
    p.add_argument("--k", type=POSITIVE_INT, nargs="+", default=[1, 5, 20])
    p.add_argument("--select", default="recall@20", help="metric to maximise (ties: mrr)")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=32)
    add_output(p, "--output", help="JSON file recording every setting's metrics and the choice")
    p.add_argument(
        "--record",
        action="store_true",
        help="write the choice into the index, where `--fusion auto` (the default) uses it",
    )
    p.add_argument("--json", action="store_true")

    p = add_command(
        subparsers,
        "interpolate-encoders",
        "Average a fine-tuned encoder with the model it started "
        "from (WiSE-FT): keeps most of the gain, less of the loss.",
        "odqa interpolate-encoders --base minilm --tuned runs/dpr/minilm/final --weight 0.5 "
        "--output runs/dpr/minilm-wise",
        _interpolate,
    )
    p.add_argument("--base", default="minilm", help="the model fine-tuning started from")
    p.add_argument("--tuned", required=True, help="the fine-tuned encoder")
    p.add_argument("--weight", type=FRACTION, default=0.5, help="share of the tuned model (0: base, 1: tuned)")
    add_output(p, "--output", folder=True, required=True, help="folder for the interpolated encoder")

    p = add_command(
        subparsers,
        "distill-encoder",
        "Distil a shallower passage encoder from a dense encoder (its vectors, over the index's passages) for faster "
        "index builds; questions stay with the teacher (`index --encoder STUDENT` records it as the question encoder). "
        "Resumes from the newest checkpoint in --output.",
        "odqa distill-encoder --index work_indexes/wiki --teacher retriever --layers 0 4 5 --passages 40000 "
        "--exclude /work/shared/data/squad/dev-v1.1.json --output runs/passage-encoder-l3",
        _distill,
    )
    p.add_argument(
        "--index",
        required=True,
        help="index folder, or corpus file or folder (any format `index "
        "--corpus` reads), whose passages are the training texts",
    )
    add_output(
        p, "--output", folder=True, required=True, help="folder for checkpoints and the final model (OUTPUT/final)"
    )
    add_options(
        p,
        EncoderDistillConfig,
        [
            "teacher",
            "layers",
            "init",
            "exclude",
            "passages",
            "questions",
            "question_weight",
            "recall_eval",
            "max_length",
            "batch_size",
            "lr",
            "warmup",
            "epochs",
            "max_steps",
            "max_minutes",
            "holdout",
            "seed",
            "save_every",
            "log_every",
            "threads",
            "precision",
            "device",
            "progress",
        ],
    )
    p.add_argument("--json", action="store_true", help="print the held-out cosine as JSON on the last line")


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _build(args) -> int:
    from odqa.retriever.training.train_data import build_dpr_data

    _setup_logging()
    stats = build_dpr_data(
        args.questions,
        args.index,
        args.output,
        k=args.k,
        limit=args.limit,
        max_positives=args.max_positives,
        max_hard_negatives=args.max_hard_negatives,
        batch_size=args.batch_size,
        progress=not args.no_progress,
        dev_fraction=args.dev_fraction,
        dev_dir=args.dev_dir,
    )
    print(
        f"{args.output}: {stats.written} questions written, {stats.dropped_no_positive} dropped without a positive "
        f"in the top {args.k}, {stats.dropped_no_answers} without answers, {stats.already_done} done before"
        + (f", {stats.dev} set aside for dev in {args.dev_dir}" if stats.dev else "")
    )
    for name, c in stats.per_source.items():
        print(
            f"  {name}: {c['written']} written, {c['dropped']} dropped, {c['dev']} dev of {c['questions']}, "
            f"{c.get('open_dev_skipped', 0)} open-dev questions skipped"
        )
    if args.json:
        print_json_last(stats.to_dict())
    return 0


def _mine(args) -> int:
    import torch

    from odqa.retriever.training.mine_negatives import mine_dense_negatives

    _setup_logging()
    if args.threads:
        torch.set_num_threads(args.threads)
    stats = mine_dense_negatives(
        args.train,
        args.output,
        encoder=args.encoder,
        per_question=args.per_question,
        depth=args.depth,
        skip_top=args.skip_top,
        exclude=args.exclude,
        batch_size=args.batch_size,
        precision=args.precision,
        progress=not args.no_progress,
    )
    print(
        f"{args.output}: {stats.mined} dense negatives for {stats.questions} questions over {stats.pool} contexts "
        f"({stats.without_new} questions got none; refused {stats.refused_answer} answer-bearing and "
        f"{stats.refused_positive} positive candidates)"
    )
    if args.json:
        print_json_last(stats.to_dict())
    return 0


def _train(args) -> int:
    from odqa.retriever.training.train import train

    _setup_logging()
    cfg = RetrieverTrainConfig(
        train_files=args.train,
        output_dir=args.output,
        shared=not args.separate_encoders,
        **dataclass_values(args, RetrieverTrainConfig),
    )
    final = train(cfg)
    info = json.loads((final / "retriever_info.json").read_text())
    print(f"model saved in {final}")
    if args.json:
        print_json_last({"final": str(final), "steps": info["steps"], "validation": info["last_validation"]})
    return 0


def _eval(args) -> int:
    import torch

    from odqa.retriever.training.train import heldout_corpus_eval
    from odqa.retriever.training.train_data import read_dpr_file

    if args.threads:
        torch.set_num_threads(args.threads)
    examples = read_dpr_file(args.data)
    results = []
    for enc in args.encoder:
        m = heldout_corpus_eval(
            enc,
            examples,
            ks=sorted(set(args.k)),
            q_max_length=args.q_max_length,
            p_max_length=args.p_max_length,
            batch_size=args.batch_size,
            question_encoder=args.question_encoder,
            bf16=args.bf16,
        )
        results.append(m)
        print(" ".join(f"{k}={v}" for k, v in m.items()))
    if args.json:
        print_json_last({"data": args.data, "results": results})
    return 0


def _tune(args) -> int:
    from odqa.corpus.questions import check_not_test_set, load_questions
    from odqa.eval.tuning import tune_hybrid
    from odqa.indexes.folder import FolderIndex
    from odqa.retriever.registry import RetrieverRuntime, build_retriever

    check_not_test_set(args.questions)
    items = load_questions(args.questions, limit=args.limit or None)
    bundle = FolderIndex.open(args.index)
    settings, runtime = RetrievalConfig(encoder=args.encoder or ""), RetrieverRuntime()
    dense, sparse = (build_retriever(bundle, settings, runtime, kind) for kind in ("dense", "bm25"))
    result = tune_hybrid(
        dense,
        sparse,
        items,
        alphas=args.alphas,
        rrf_ks=args.rrf_k,
        candidates=args.candidates,
        ks=args.k,
        select=args.select,
        batch_size=args.batch_size,
    )
    result.update(
        {
            "index": str(args.index),
            "questions_file": str(args.questions),
            "encoder": args.encoder or bundle.manifest.encoder,
        }
    )
    for name in ("bm25", "dense"):
        print(
            f"{name:>24}: "
            + " ".join(f"{k}={result[name][k]}" for k in result[name] if k.startswith(("recall", "mrr")))
        )
    for row in result["settings"]:
        label = f"rrf k={row['rrf_k']}" if row["method"] == "rrf" else f"minmax alpha={row['alpha']}"
        print(f"{label:>24}: " + " ".join(f"{k}={row[k]}" for k in row if k.startswith(("recall", "mrr"))))
    best = result["best"]
    flags = f"--fusion {best['method']}" + (f" --alpha {best['alpha']}" if best["method"] == "minmax" else "")
    print(f"best by {args.select}: {flags}")
    if args.record:
        bundle.record_fusion(
            {
                "method": best["method"],
                "alpha": best.get("alpha", settings.alpha),
                "rrf_k": best.get("rrf_k", settings.rrf_k),
                "select": args.select,
                args.select: result["best_metrics"][args.select],
                "questions_file": str(args.questions),
                "questions": len(items),
            }
        )
        print(f"recorded in {args.index}: `--fusion auto` (the default) now fuses with {flags}")
    if args.output:
        from odqa.core.atomic import write_json_atomic

        write_json_atomic(Path(args.output), result)
        print(f"recorded in {args.output}")
    if args.json:
        print_json_last(result)
    return 0


def _interpolate(args) -> int:
    from odqa.retriever.training.interpolate import interpolate_encoders

    out = interpolate_encoders(args.base, args.tuned, args.output, args.weight)
    print(f"{out}: {1 - args.weight:g} x {args.base} + {args.weight:g} x {args.tuned}")
    return 0


def _distill(args) -> int:
    from odqa.retriever.training.distill_encoder import INFO_FILE, distill_passage_encoder

    _setup_logging()
    cfg = EncoderDistillConfig(index=args.index, output_dir=args.output, **dataclass_values(args, EncoderDistillConfig))
    final = distill_passage_encoder(cfg)
    info = json.loads((final / INFO_FILE).read_text())
    print(f"student written to {final}: held-out cosine with {cfg.teacher} {info.get('heldout')}")
    if args.json:
        print_json_last(
            {
                "output": str(final),
                "heldout": info.get("heldout"),
                "steps": info["steps"],
                "seconds": info.get("seconds"),
            }
        )
    return 0
