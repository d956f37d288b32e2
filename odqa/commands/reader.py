"""Reader commands: train-reader, average-readers, build-reader-data, link-reader-data, build-cloze-data,
eval-reader."""

from __future__ import annotations

import logging

from odqa.commands.common import add_command, add_config_flag, add_output, print_json_last
from odqa.commands.options import (
    COUNT,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE_INT,
    SEED,
    add_inference_options,
    add_options,
    config_overrides,
    dataclass_values,
)
from odqa.config import OdqaConfig, RetrievalConfig
from odqa.core.cluster import RAY_ADDRESSES, RaySettings
from odqa.core.logs import get_logger
from odqa.linker.settings import LinkerSettings
from odqa.reader.settings import ReaderSettings
from odqa.reader.training.train_config import TrainConfig
from odqa.retriever.registry import RETRIEVERS

log = get_logger(__name__)


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "train-reader",
        "Train an extractive reader on SQuAD-format JSON (v1 or v2); resumes from the newest checkpoint in --output.",
        "odqa train-reader --train /work/shared/data/squad/dev-v2.0.json --output runs/reader "
        "--epochs 2 --threads 2\n"
        "  odqa train-reader --train runs/distant.json --init runs/reader/final --output runs/reader2",
        _train,
    )
    p.add_argument("--train", nargs="+", required=True, metavar="FILE", help="SQuAD-format JSON training file(s)")
    add_output(
        p, "--output", folder=True, required=True, help="folder for checkpoints and the final model (output/final)"
    )
    add_options(
        p,
        TrainConfig,
        [
            "init",
            "epochs",
            "max_steps",
            "max_minutes",
            "batch_size",
            "gpu_batch_size",
            "lr",
            "warmup",
            "max_length",
            "stride",
            "negative_ratio",
            "shared_norm",
            "selection_loss",
            "all_answers",
            "to_simplified",
            "limit",
            "seed",
            "save_every",
            "threads",
            "precision",
            "device",
            "progress",
            "keep_layers",
            "freeze_embeddings",
            "teacher",
            "distill_weight",
            "distill_temperature",
            "entity_marks",
        ],
    )

    p = add_command(
        subparsers,
        "average-readers",
        "A model soup: the weight average of several readers fine-tuned from one starting reader "
        "(then `python -m odqa.reader.export` for fp16).",
        "odqa average-readers --models runs/reader-a/final runs/reader-b/final --output runs/reader-soup",
        _average,
    )
    p.add_argument(
        "--models", nargs="+", required=True, metavar="MODEL", help="two or more readers of one architecture"
    )
    p.add_argument(
        "--shares",
        nargs="+",
        type=NON_NEGATIVE,
        metavar="SHARE",
        help="weight of each reader in the average, summing to 1 (default: equal)",
    )
    add_output(p, "--output", folder=True, required=True, help="folder for the averaged reader (fp32)")

    p = add_command(
        subparsers,
        "build-reader-data",
        "Distant supervision: retrieve passages for questions with answers and write SQuAD-format training JSON.",
        "odqa build-reader-data --questions /work/shared/data/dpr-qas/nq-dev.qa.tsv "
        "--index work_indexes/wiki --k 10 --limit 2000 --output runs/distant-nq.json",
        _build_data,
    )
    p.add_argument("--questions", nargs="+", required=True, metavar="FILE", help="question files with answers")
    p.add_argument("--index", required=True, help="index folder or es://HOST:9200/NAME, searched by --retriever")
    add_options(
        p, RetrievalConfig, ["retriever", "k"], section="retrieval", help={"k": "passages retrieved per question"}
    )
    p.add_argument("--limit", type=COUNT, default=0, help="questions per file (0: all)")
    p.add_argument("--negatives", type=COUNT, default=1, help="no-answer examples kept per question")
    p.add_argument("--positives", type=POSITIVE_INT, default=2, help="answer-bearing passages kept per question")
    p.add_argument("--seed", type=SEED, default=42)
    p.add_argument(
        "--exclude-articles-of",
        nargs="+",
        default=[],
        metavar="SQUAD_FILE",
        help="never use passages of the articles of these SQuAD files (test sets, e.g. SQuAD v1.1 dev: "
        "24 of its 48 articles are in the Wikipedia subset); titles match with underscores as spaces",
    )
    p.add_argument(
        "--gold-paragraphs",
        action="store_true",
        help="questions that carry their own paragraph (SQuAD) keep it as their answer-bearing example; retrieved "
        "passages without an answer are their negatives, for train-reader --shared-norm; --limit then draws at "
        "random (--seed)",
    )
    add_output(p, "--output", required=True, help="SQuAD-format JSON to write")
    add_config_flag(p)
    add_options(
        p,
        RaySettings,
        ["address", "workers"],
        rename={"address": "ray", "workers": "ray-workers"},
        help={"address": "search the questions' batches as Ray tasks: " + RAY_ADDRESSES},
    )

    p = add_command(
        subparsers,
        "link-reader-data",
        "Link the questions of SQuAD-format training JSON to a knowledge base: each question gets its linked "
        "entities' titles (`subjects`), which train-reader --entity-marks reads beside each passage's title.",
        "python run_qa.py link-reader-data --data runs/distant.json --kb work_indexes/kb-minilm "
        "--output runs/distant-linked.json",
        _link_data,
    )
    p.add_argument("--data", required=True, help="SQuAD-format JSON (build-reader-data's output)")
    p.add_argument("--kb", required=True, help="knowledge-base folder the questions are linked against (build-kb)")
    add_options(p, LinkerSettings, ["model"], section="linker")
    add_output(p, "--output", required=True, help="SQuAD-format JSON to write (the input with `subjects` added)")
    add_config_flag(p)

    p = add_command(
        subparsers,
        "build-topical-negatives",
        "Topical no-answer examples: a share of a SQuAD file's questions, each paired with another paragraph of "
        "its own article that holds none of its answers (SQuAD v2.0-format JSON for train-reader).",
        "python run_qa.py build-topical-negatives --squad ../shared/data/squad/train-v1.1.json --ratio 0.12 "
        "--output runs/squad-train-topical-neg.json",
        _build_topical,
    )
    p.add_argument("--squad", required=True, metavar="SQUAD_FILE", help="SQuAD-format JSON with answers")
    p.add_argument("--ratio", type=FRACTION, default=0.12, help="share of the questions given a negative (0-1)")
    p.add_argument("--seed", type=SEED, default=42)
    add_output(p, "--output", required=True, help="SQuAD v2.0-format JSON to write")

    p = add_command(
        subparsers,
        "build-cloze-data",
        "Cloze questions (a named entity of a paragraph is the answer) as SQuAD-format JSON, to pretrain a reader "
        "before train-reader on real questions. Needs spaCy: pip install -e '.[linker-baseline]'.",
        "odqa build-cloze-data --corpus /work/shared/data/wiki --questions 24000 "
        "--exclude /work/shared/data/squad/dev-v1.1.json "
        "/work/shared/data/squad/dev-v2.0.json --output runs/cloze.json",
        _build_cloze,
    )
    p.add_argument("--corpus", required=True, help="corpus file or folder (any format `index --corpus` reads)")
    add_output(p, "--output", required=True, help="SQuAD-format JSON to write")
    p.add_argument("--questions", type=POSITIVE_INT, default=24000)
    p.add_argument(
        "--every", type=POSITIVE_INT, default=3, help="use every N-th article (spreads the sample over the corpus)"
    )
    p.add_argument("--per-paragraph", type=POSITIVE_INT, default=2, help="questions per paragraph at most")
    p.add_argument("--per-article", type=POSITIVE_INT, default=2, help="paragraphs of 60-180 words per article at most")
    p.add_argument(
        "--exclude",
        nargs="*",
        default=[],
        metavar="SQUAD_FILE",
        help="skip articles whose title is in these SQuAD files (evaluation sets)",
    )
    p.add_argument("--seed", type=SEED, default=13)

    p = add_command(
        subparsers,
        "eval-reader",
        "Official EM/F1 (0-100; SQuAD's, or KorQuAD's / CMRC 2018's for Korean "
        "/ Chinese data) of a reader given each question's gold paragraph.",
        "odqa eval-reader --data /work/shared/data/squad/dev-v1.1.json --limit 1000 --json\n"
        "  odqa eval-reader --data dev-v2.0.json --model runs/reader/final --allow-null --json",
        _eval,
    )
    p.add_argument("--data", required=True, help="SQuAD-format JSON (v1.1 or v2.0)")
    # the pipeline's [reader] settings, each flag an override of the config's: it reads as ask does
    add_options(p, ReaderSettings, ["model"], section="reader")
    p.add_argument("--limit", type=COUNT, default=0, help="first N questions (0: all)")
    add_options(p, ReaderSettings, ["batch_size", "max_answer_tokens"], section="reader")
    p.add_argument(
        "--allow-null",
        action="store_true",
        help="SQuAD v2: score unanswerable questions; predict no answer when the null span wins",
    )
    p.add_argument("--threads", type=COUNT, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument(
        "--exclude-articles-of",
        metavar="SQUAD_FILE",
        help="skip questions of articles in this SQuAD file (the reader's training data), e.g. "
        "SQuAD v2.0 dev, which shares 35 articles and their questions with v1.1 dev",
    )
    add_output(p, "--predictions", help="write {question id: answer} JSON here")
    p.add_argument(
        "--metric",
        default="auto",
        choices=("auto", "squad", "korquad", "cmrc2018"),
        help="EM/F1 definition (auto: KorQuAD's for Korean data, CMRC 2018's for Chinese, else SQuAD's)",
    )
    add_inference_options(p)  # as ask and eval-qa read (torch int8 of before: --precision int8 --runtime torch)
    add_config_flag(p)
    p.add_argument("--json", action="store_true", help="print the metrics as JSON on the last line")

    p = add_command(
        subparsers,
        "fit-calibration",
        "Fit the reader's calibrated probability (Platt: margin over the null score and share -> P(correct)) and "
        "the 'no confident answer' threshold on dev questions; writes calibration.json (put it in the model folder).",
        "python run_qa.py fit-calibration --model runs/reader-v2/final --data ../shared/data/squad/dev-v2.0.json "
        "--limit 2000 --output runs/reader-v2/final/calibration.json\n"
        "  python run_qa.py fit-calibration --model M --questions NQ-open.efficientqa.dev.1.1.jsonl trivia-dev.qa.tsv "
        "--index work_indexes/wiki --limit 500 --target-precision 0.7 --output M/calibration.json",
        _fit_calibration,
    )
    add_options(p, ReaderSettings, ["model"], section="reader")
    p.add_argument(
        "--data",
        metavar="SQUAD_FILE",
        help="SQuAD v2.0-format dev JSON: each question read from its gold paragraph plus --distractors "
        "other paragraphs of its article (unanswerable questions: any answer is wrong)",
    )
    p.add_argument(
        "--part",
        choices=("fit", "check", "all"),
        default="fit",
        help="articles of --data used: fit (even positions; bench/calibration.py measures on check)",
    )
    p.add_argument(
        "--distractors", type=COUNT, default=3, help="other paragraphs of the same article read per question"
    )
    p.add_argument(
        "--questions",
        metavar="FILE",
        nargs="+",
        help="open-domain dev question files (with answers) read over --index; --limit samples each",
    )
    p.add_argument("--index", help="index folder for --questions")
    p.add_argument("--retriever", choices=RETRIEVERS.names, default="bm25")
    add_options(p, RetrievalConfig, ["k"], help={"k": "passages read per open-domain question"})
    p.add_argument("--limit", type=COUNT, default=0, help="questions sampled (seeded) from each source (0: all)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--threads", type=COUNT, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument(
        "--target-precision",
        type=FRACTION,
        metavar="P",
        help="choose the 'no confident answer' threshold as the lowest at which answers called confident "
        "are right (EM) at least this share of the time on the dev questions, e.g. 0.8 (default: the "
        "threshold that best separates right from wrong answers)",
    )
    p.add_argument(
        "--cross-language",
        action="store_true",
        help="fit the calibration of questions asked in another language than --index's passages (each --questions "
        "question must be): stored beside the file's own fit (`cross_language`), which it keeps",
    )
    add_output(p, "--output", required=True, help="calibration JSON to write")
    p.add_argument("--json", action="store_true", help="print the fit's summary as JSON on the last line")
    add_config_flag(p)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _train(args) -> int:
    from odqa.reader.training.train import train

    _setup_logging()
    cfg = TrainConfig(train_files=args.train, output_dir=args.output, **dataclass_values(args, TrainConfig))
    final = train(cfg)
    print(f"model written to {final}")
    return 0


def _build_data(args) -> int:
    import contextlib

    from odqa.core.cluster import ray_cluster
    from odqa.reader.training.distant import build_distant_data
    from odqa.retriever.registry import build_retriever, open_index

    _setup_logging()
    config = OdqaConfig.load(args.config, config_overrides(args))
    ray = RaySettings(**dataclass_values(args, RaySettings))
    with contextlib.ExitStack() as stack:
        if ray.address is None:
            retriever = build_retriever(open_index(args.index, config), config.retrieval, config.retriever_runtime())
            search, search_many = retriever.search, None
        else:
            ray.check()
            open_index(args.index, config)  # a missing or damaged index is refused here, before Ray starts
            cluster = stack.enter_context(ray_cluster(ray))

            def search_many(batches, k):
                return cluster.map_ordered(search_batch, batches, "retrieval", args=(args.index, config, k))

            search = None
        stats = build_distant_data(
            args.questions,
            args.output,
            search,
            k=config.retrieval.k,
            limit=args.limit,
            positives=args.positives,
            negatives=args.negatives,
            seed=args.seed,
            exclude_articles_of=args.exclude_articles_of,
            gold=args.gold_paragraphs,
            search_many=search_many,
        )
    print_json_last(stats)
    return 0


def _link_data(args) -> int:
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.registry import build_linker
    from odqa.reader.training.distant import link_training_questions

    _setup_logging()
    config = OdqaConfig.load(args.config, config_overrides(args))
    linker = build_linker(
        config.linker, KnowledgeBase.load(args.kb), device=config.device or None, inference=config.inference()
    )
    print_json_last(
        link_training_questions(args.data, args.output, linker.link, {"kb": args.kb, "linker": config.linker.model})
    )
    return 0


_RETRIEVER: dict = {}  # a Ray worker's retriever, opened for its first batch and kept for the next ones


def search_batch(questions: list[str], index: str, config: OdqaConfig, k: int):
    """A task of `build-reader-data --ray`: one batch of questions searched on a worker, as this process would."""
    from odqa.retriever.registry import build_retriever, open_index

    key = (index, repr(config))
    if key not in _RETRIEVER:
        _RETRIEVER.clear()
        _RETRIEVER[key] = build_retriever(open_index(index, config), config.retrieval, config.retriever_runtime())
    return _RETRIEVER[key].search(questions, k)


def _build_topical(args) -> int:
    from odqa.reader.training.topical import write_topical_negatives

    print_json_last(write_topical_negatives(args.squad, args.output, args.ratio, args.seed))
    return 0


def _build_cloze(args) -> int:
    from odqa.reader.training.cloze import build_cloze_data

    _setup_logging()
    stats = build_cloze_data(
        args.corpus,
        args.output,
        questions=args.questions,
        every=args.every,
        per_paragraph=args.per_paragraph,
        per_article=args.per_article,
        exclude=args.exclude,
        seed=args.seed,
    )
    print_json_last(stats)
    return 0


def _eval(args) -> int:
    import torch

    from odqa.core.device import check_device_available
    from odqa.corpus.questions import load_questions
    from odqa.eval.evaluators import ReaderEvaluator
    from odqa.eval.reader_eval import items_language
    from odqa.reader.registry import build_reader

    if args.threads:
        torch.set_num_threads(args.threads)
    # the pipeline's settings where no flag is given: what eval-reader measures is what ask and eval-qa read with
    config = OdqaConfig.load(args.config, config_overrides(args))
    check_device_available(config.device)
    reader = build_reader(
        config.reader,
        device=config.device or None,
        inference=config.inference(),
        language=lambda: items_language(load_questions(args.data, limit=50)),  # auto: the data's language
    )
    evaluator = ReaderEvaluator(
        args.data,
        limit=args.limit or None,
        allow_null=args.allow_null,
        predictions_path=args.predictions,
        progress=not args.json,
        exclude_articles_of=args.exclude_articles_of,
        metric=args.metric,
    )
    metrics = evaluator(reader)
    metrics["inference"] = {"reader": reader.plan.to_dict()}  # as ask's and eval-qa's
    _print_metrics(metrics, args.json)
    return 0


def _print_metrics(metrics: dict, as_json: bool) -> None:
    if as_json:
        print_json_last(metrics)
    else:
        for key, value in metrics.items():
            print(f"{key}: {value}")


def _fit_calibration(args) -> int:
    from dataclasses import asdict
    from pathlib import Path

    import torch

    from odqa.config import OdqaConfig
    from odqa.core.errors import OdqaError
    from odqa.core.models import resolve_model
    from odqa.corpus.open_dev import drop_open_dev
    from odqa.corpus.questions import load_questions
    from odqa.eval.confidence import article_split, confidence_metrics, judge_pipeline, judge_reader, sample_questions
    from odqa.pipeline import Pipeline
    from odqa.reader.calibration import Calibration, fit_calibration
    from odqa.reader.model import Reader as CheckpointReader

    if not args.data and not args.questions:
        raise OdqaError("give dev data: --data SQUAD_FILE and/or --questions FILE --index DIR")
    if args.target_precision is not None and not 0.0 < args.target_precision < 1.0:
        raise OdqaError(f"--target-precision must be between 0 and 1 (exclusive), got {args.target_precision}")
    if args.questions and not args.index:
        raise OdqaError("--questions needs --index (the index the questions are answered over)")
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = {
        "index": args.index,
        "reader.model": args.model,
        "retrieval.retriever": args.retriever,
        "retrieval.k": args.k,
        "linker.enabled": False,
    }
    pipeline = Pipeline(OdqaConfig.load(args.config, overrides))
    reader = pipeline.reader  # the pipeline's reader settings (no-answer threshold, retrieval weight)
    if isinstance(reader, CheckpointReader) and reader.settings.entity_marks:
        # it reads the questions' linked entities: they are linked as `ask` links them (the config's [linker])
        linked = {key: value for key, value in overrides.items() if key != "linker.enabled"}
        pipeline = Pipeline(OdqaConfig.load(args.config, linked))
        reader = pipeline.reader
    if not isinstance(reader, CheckpointReader):
        raise OdqaError(f"fit-calibration fits a reader checkpoint's probabilities; {reader.name!r} is none")
    reader.calibration = Calibration()  # judge with raw scores; the fit replaces it
    judged, sources = [], []
    if args.data:
        items = sample_questions(
            article_split(drop_open_dev(load_questions(args.data, include_impossible=True))[0], args.part),
            args.limit,
            args.seed,
        )
        judged += judge_reader(reader, items, distractors=args.distractors, seed=args.seed, progress=not args.json)
        sources.append(
            {"data": args.data, "part": args.part, "distractors": args.distractors, "questions": len(judged)}
        )
    if args.cross_language and args.data:
        raise OdqaError("--cross-language fits questions over --index in another language: give --questions")
    for questions_file in args.questions or ():
        items = sample_questions(drop_open_dev(load_questions(questions_file))[0], args.limit, args.seed)
        if args.cross_language:
            same = [item.question for item in items if not pipeline.route(item.question).cross_language]
            if same:
                raise OdqaError(
                    f"--cross-language: {len(same)} questions of {questions_file} are in the language of {args.index} "
                    f"(e.g. {same[0][:60]!r}); give questions in another language"
                )
        before = len(judged)
        judged += judge_pipeline(pipeline, items, progress=not args.json)
        sources.append(
            {
                "questions_file": questions_file,
                "index": args.index,
                "retriever": args.retriever,
                "k": args.k,
                "questions": len(judged) - before,
            }
        )
    cal = fit_calibration(
        [j.margin for j in judged],
        [j.share for j in judged],
        [j.em for j in judged],
        source={"model": args.model, "sources": sources},
        target_precision=args.target_precision,
    )
    for j in judged:
        j.probability = cal.probability(j.margin, j.share)
    cal.source["dev"] = confidence_metrics(judged, cal.threshold)
    summary = {  # of this fit (a cross-language one is saved inside the file's own)
        "output": args.output,
        "weights": cal.weights,
        "bias": cal.bias,
        "threshold": cal.threshold,
        **cal.source["dev"],
    }
    if args.cross_language:
        kept = Path(args.output)
        base = Calibration.load(kept) if kept.is_file() else Calibration.for_model(resolve_model(args.model))
        base.cross_language = {key: value for key, value in asdict(cal).items() if key != "cross_language"}
        cal = base
    cal.save(args.output)
    _print_metrics(summary, args.json)
    return 0


def _average(args) -> int:
    from odqa.reader.training.soup import average_readers

    out = average_readers(args.models, args.output, args.shares)
    print(f"{out}: the average of {len(args.models)} readers")
    return 0
