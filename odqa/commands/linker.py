"""Commands: build-kb, link, train-linker, eval-linker."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

from odqa.commands.common import add_command, add_config_flag, add_output, print_json_last
from odqa.commands.options import COUNT, POSITIVE_INT, add_options, config_overrides, dataclass_values
from odqa.config import CorpusConfig, OdqaConfig
from odqa.core.cluster import RAY_ADDRESSES, RaySettings
from odqa.core.errors import OdqaError
from odqa.core.terminal import printable
from odqa.core.types import Document
from odqa.linker.settings import LinkerSettings
from odqa.linker.training.train_config import TrainConfig
from odqa.retriever.registry import kb_beside


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "build-kb",
        "Build the entity knowledge base (entities + entity vectors) from a Wikipedia-style corpus.",
        "odqa build-kb --corpus ../shared/data/wiki --out work_indexes/kb",
        run_build_kb,
    )
    p.add_argument(
        "--corpus",
        required=True,
        nargs="+",
        help="corpus files or folders (JSONL(.xz) with id/title/text, WikiExtractor output, SQuAD-style JSON such as "
        "KorQuAD, CMRC 2018 or DRCD: one entity per article title); several make one KB, in any languages",
    )
    add_output(p, "--out", folder=True, required=True, help="knowledge-base folder to create (replaced atomically)")
    p.add_argument(
        "--encoder",
        help="entity encoder (default: the linker's, from its linker_config.json: the default linker's unless "
        "--config names another linker.model); a KB encoded otherwise is refused by the linker",
    )
    p.add_argument("--max-length", type=POSITIVE_INT, default=64, help="tokens of 'title [SEP] description' encoded")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=64)
    p.add_argument("--limit", type=POSITIVE_INT, help="first N documents only")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    add_options(
        p,
        RaySettings,
        ["address", "workers"],
        rename={"address": "ray", "workers": "ray-workers"},
        help={
            "address": "encode the entities' blocks as Ray tasks (a GPU each where the cluster has them): "
            + RAY_ADDRESSES
        },
    )
    add_options(p, CorpusConfig, ["id_field", "title_field", "text_field"], section="corpus")
    add_config_flag(p)

    p = add_command(
        subparsers,
        "link",
        "Link the entities of a question to the knowledge base.",
        'odqa link "Who directed Apollo 13 with Tom Hanks?"',
        run_link,
    )
    p.add_argument("question", nargs="+")
    _model_flags(p)
    p.add_argument("--json", action="store_true", help="print the mentions as one JSON object")
    add_config_flag(p)

    p = add_command(
        subparsers,
        "train-linker",
        "Train the ELQ linker on LC-QuAD, Complex-EL4QA, WebQuestions entities and Wikipedia sentences.",
        "odqa train-linker --kb work_indexes/kb --data-dir ../shared/data --output models/linker",
        run_train,
    )
    add_options(
        p,
        TrainConfig,
        [
            "kb",
            "data_dir",
            "output",
            "encoder",
            "init",
            "steps",
            "max_minutes",
            "batch_size",
            "lr",
            "head_lr",
            "hard_negatives",
            "weak",
            "silver",
            "train_layers",
            "share_frozen",
            "threads",
            "precision",
            "device",
            "seed",
            "save_every",
            "progress",
        ],
    )
    p.add_argument("--json", action="store_true")

    p = add_command(
        subparsers,
        "eval-linker",
        "Entity-linking P/R/F1 (strong/weak, in-KB/overall) and speed.",
        "odqa eval-linker --data ../shared/data/el/qald/qald-{1,2,3,4}.mentions.json --json",
        run_eval,
    )
    p.add_argument(
        "--data", nargs="+", required=True, help="QALD mentions JSON, Complex-EL4QA JSON or LC-QuAD JSON (one or more)"
    )
    p.add_argument(
        "--split",
        choices=["all", "dev"],
        default="all",
        help="dev: only the held-out LC-QuAD questions (every 10th id)",
    )
    p.add_argument(
        "--baseline", choices=["elq", "spacy"], default="elq", help="spacy: the spaCy NER + alias-table baseline"
    )
    p.add_argument("--limit", type=POSITIVE_INT)
    p.add_argument("--no-speed", action="store_true", help="skip the timing runs")
    add_output(p, "--per-question", help="write per-question predictions (JSONL) here")
    _model_flags(p)
    p.add_argument("--json", action="store_true", help="print one JSON object of metrics as the last line")
    add_config_flag(p)


def _model_flags(p) -> None:
    add_options(
        p,
        LinkerSettings,
        ["model", "kb", "mention_threshold", "entity_threshold"],
        section="linker",
        help={"kb": "knowledge-base folder (`link`: else the KB `ask` uses; eval-linker: else work_indexes/kb)"},
    )
    add_options(p, OdqaConfig, ["device"], section="")
    p.add_argument("--threads", type=COUNT, help="torch CPU threads")


def _config(args):
    return OdqaConfig.load(getattr(args, "config", None), config_overrides(args))


def default_kb_path(config) -> Path:
    from odqa.core.models import REPO_ROOT

    if config.linker.kb:
        return Path(config.linker.kb)
    candidates = []
    beside = kb_beside(config.index) if config.index else None
    if beside is not None:
        candidates.append(beside)  # the one place: beside the index, as `ask` looks
    candidates += [Path("work_indexes/kb"), REPO_ROOT / "work_indexes" / "kb"]
    for path in candidates:
        if (path / "entities.jsonl").is_file():
            return path
    raise OdqaError(
        "no knowledge base found: pass --kb DIR (build one with `odqa "
        "build-kb --corpus ../shared/data/wiki --out work_indexes/kb`)"
    )


def _threads(args) -> None:
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)


def _open(args):
    """The linker over the configured KB (`default_kb_path`); thresholds: flags, else a config file's, else the
    model's tuned ones (the flags are overrides of the config's [linker])."""
    from odqa.core.device import check_device_available
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.registry import build_linker

    config = _config(args)
    check_device_available(config.device, "device")
    kb = KnowledgeBase.load(default_kb_path(config))
    linker = build_linker(config.linker, kb, device=config.device or None, inference=config.inference())
    for notice in kb.notices(linker.config.languages):  # names it may leave unlinked: said, not silently empty
        print(f"odqa: {notice}", file=sys.stderr)
    return linker, kb


def run_build_kb(args) -> int:
    import contextlib
    import itertools

    from odqa.core.cluster import ray_cluster
    from odqa.corpus.readers import CorpusFields, iter_documents
    from odqa.indexing import kb_source
    from odqa.linker.kb import KnowledgeBase

    config = _config(args)
    c = config.corpus
    fields = CorpusFields(c.id_field, c.title_field, c.text_field)
    encoder = args.encoder or config.linker.entity_encoder()
    docs: Iterator[Document] = itertools.chain.from_iterable(
        iter_documents(corpus, fields=fields) for corpus in args.corpus
    )
    if args.limit:
        docs = itertools.islice(docs, args.limit)
    start = time.time()
    ray = RaySettings(**dataclass_values(args, RaySettings))
    with contextlib.ExitStack() as stack:
        cluster = None if ray.address is None else stack.enter_context(ray_cluster(ray))
        kb = KnowledgeBase.build(
            docs,
            args.out,
            encoder=encoder,
            max_length=args.max_length,
            batch_size=args.batch_size,
            device=args.device,
            cluster=cluster,
            # what it was made from: `index` keeps a KB of its corpus beside it rather than building it again
            params={"source": kb_source(args.corpus, fields, args.limit)},
        )
    print(
        f"knowledge base: {len(kb)} entities ({', '.join(kb.language_names)}), {kb.dim}-d vectors from "
        f"{kb.encoder!r}, fingerprint "
        f"{kb.manifest.corpus_fingerprint}, in {time.time() - start:.0f}s -> {args.out}"
    )
    return 0


def _link_pipeline(args):
    """The pipeline `ask` answers with, for its linking: the same KB and the linker of each question's language;
    thresholds: flags, else the config's, else the model's tuned ones."""
    from odqa.core.device import check_device_available
    from odqa.demo_corpus import demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline

    config = _config(args)  # the threshold flags are overrides of its [linker]
    check_device_available(config.device, "device")
    config.linker.enabled = True  # `link` is asked to link
    pipeline = Pipeline(config, default_index=demo_index_path, default_kb=demo_kb_path)
    if pipeline.linker is None:
        raise OdqaError(pipeline.linker_off or "no linker")
    for notice in pipeline.linker_notices:  # names it may leave unlinked: said, not silently empty
        print(f"odqa: {notice}", file=sys.stderr)
    return pipeline


def run_link(args) -> int:
    from odqa.indexes.analysis import detect_language

    _threads(args)
    pipeline = _link_pipeline(args)
    question = " ".join(args.question)
    pipeline.linker_for(detect_language([question]))  # its linker loaded before the clock starts
    start = time.perf_counter()
    mentions = pipeline.link([question])[0]
    ms = (time.perf_counter() - start) * 1000
    if args.json:
        print_json_last({"question": question, "mentions": [_mention_json(m) for m in mentions], "ms": round(ms, 1)})
        return 0
    # the question and the knowledge base's titles and ids: their control characters escaped for the terminal
    print(printable(question))
    if not mentions:
        print("  (no entities linked)")
    for m in mentions:
        print(
            printable(
                f"  [{m.start}:{m.end}] {m.text!r} -> {m.entity.title} (id {m.entity.id})  "
                f"mention {m.mention_score:.3f}  entity {m.entity_score:.3f}  joint {m.score:.3f}"
            )
        )
    print(f"  {ms:.1f} ms")
    return 0


def _mention_json(m) -> dict:
    return {
        "start": m.start,
        "end": m.end,
        "text": m.text,
        "entity_id": m.entity.id if m.entity else None,
        "title": m.entity.title if m.entity else None,
        "mention_score": round(m.mention_score, 4),
        "entity_score": round(m.entity_score, 4),
        "score": round(m.score, 4),
    }


def run_train(args) -> int:
    import logging

    from odqa.linker.training.train import train_linker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    cfg = TrainConfig(**dataclass_values(args, TrainConfig))
    report = train_linker(cfg)
    dev = report["tuned"]["dev"]
    print(
        f"trained {report['training']['steps']} steps in {report['training']['seconds']}s; thresholds mention "
        f"{report['tuned']['mention_threshold']} joint {report['tuned']['entity_threshold']}; dev weak in-KB F1 "
        f"{dev['weak_f1_in_kb']:.3f}, strong F1 {dev['strong_f1']:.3f} -> {args.output}"
    )
    if args.json:
        print_json_last(
            {
                "steps": report["training"]["steps"],
                **report["tuned"]["dev"],
                "mention_threshold": report["tuned"]["mention_threshold"],
                "entity_threshold": report["tuned"]["entity_threshold"],
            }
        )
    return 0


def run_eval(args) -> int:
    import torch

    from odqa.eval.evaluators import LinkingEvaluator
    from odqa.eval.linking import load_eval_examples

    _threads(args)
    if args.baseline == "spacy":
        from odqa.linker.baseline import SpacyAliasLinker
        from odqa.linker.kb import KnowledgeBase

        kb = KnowledgeBase.load(default_kb_path(_config(args)))
        linker = SpacyAliasLinker(kb)
        name = "spacy+alias"
    else:
        linker, kb = _open(args)
        name = "elq"
    examples = load_eval_examples(args.data, kb, args.split, args.limit)
    evaluator = LinkingEvaluator(examples, speed=not args.no_speed)
    metrics = evaluator(linker)
    predictions = evaluator.predictions
    metrics.update(linker=name, threads=torch.get_num_threads())
    if args.per_question:
        from odqa.core import strict_json
        from odqa.core.atomic import atomic_file

        with atomic_file(args.per_question) as tmp, tmp.open("w", encoding="utf-8") as f:
            for ex, preds in zip(examples, predictions):
                gold = [{"start": g.start, "end": g.end, "title": g.title, "in_kb": g.in_kb} for g in ex.mentions]
                f.write(
                    strict_json.dumps(
                        {"question": ex.question, "gold": gold, "pred": [_mention_json(m) for m in preds]},
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    out = sys.stderr if args.json else sys.stdout  # under --json standard output holds the JSON alone
    print(
        f"{name} on {len(examples)} questions ({metrics['gold_mentions']} gold mentions, "
        f"{metrics['gold_mentions_in_kb']} in KB)",
        file=out,
    )
    for scope in ("", "_in_kb"):
        for kind in ("strong", "weak", "entity"):
            print(
                f"  {kind + scope:16s} P {metrics[f'{kind}_precision{scope}']:.3f}  R "
                f"{metrics[f'{kind}_recall{scope}']:.3f}  "
                f"F1 {metrics[f'{kind}_f1{scope}']:.3f}",
                file=out,
            )
    if "ms_per_question_batch1" in metrics:
        print(
            f"  speed: {metrics['ms_per_question_batch1']:.1f} ms/question at batch 1, "
            f"{metrics['questions_per_second_batch64']:.0f} questions/s at batch 64 ({metrics['threads']} threads)",
            file=out,
        )
    if args.json:
        print_json_last(metrics)
    return 0
