"""Commands: index, search, eval-retrieval."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from pathlib import Path

from odqa.commands.common import add_command, add_config_flag, add_output, print_json_last
from odqa.commands.options import POSITIVE_INT, add_inference_options, add_options, config_overrides, dataclass_values
from odqa.config import CorpusConfig, OdqaConfig, RetrievalConfig
from odqa.core.cluster import RaySettings
from odqa.core.models import DEFAULT_ENCODER
from odqa.indexes.vector import VectorIndexParams
from odqa.indexing import BACKENDS, FAST_PASSAGE_ENCODER, IndexSpec
from odqa.retriever.registry import RETRIEVERS


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "index",
        "Build BM25 and dense indexes for a corpus file or folder, and the linker's knowledge base beside them.",
        "odqa index --corpus ../shared/data/wiki/enwiki-AA.jsonl.xz --out work_indexes/wiki-aa",
        run_index,
    )
    p.add_argument(
        "--corpus",
        required=True,
        help="JSONL (.gz/.xz/.bz2; BEIR corpus.jsonl, Pyserini contents), "
        "WikiExtractor folder, DPR passage TSV, SQuAD JSON, CSV/TSV "
        "with a header, Parquet, Arrow, or a datasets save_to_disk folder",
    )
    add_options(p, CorpusConfig, ["id_field", "title_field", "text_field"], section="corpus")
    add_output(
        p,
        "--out",
        folder=True,
        required=True,
        help="index folder to create (replaced atomically when the build succeeds)",
    )
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated: {', '.join(BACKENDS)}")
    p.add_argument(
        "--encoder",
        "--passage-encoder",
        dest="encoder",
        help=f"passage encoder (default: config retrieval.passage_encoder / encoder, else {DEFAULT_ENCODER}, the "
        f"shipped fine-tuned one; {FAST_PASSAGE_ENCODER}: its distilled 4-layer student, faster on CPUs "
        "without native bf16, at some recall): 'minilm' (off the shelf), a shipped model name, a folder "
        "(sentence-transformers, DPR or any transformers model) or a hub name",
    )
    add_options(
        p,
        RetrievalConfig,
        ["query_encoder"],
        section="retrieval",
        help={
            "query_encoder": "question encoder recorded in the index for search (empty: the one the passage encoder's "
            "retriever_info.json names, as a distill-encoder student names its teacher; else the passage "
            "encoder); for DPR: a DPRQuestionEncoder folder"
        },
    )
    _encoder_setting_flags(p)
    add_config_flag(p)
    add_options(p, IndexSpec, ["words", "bm25_engine", "language", "analyzer"])
    add_options(
        p, VectorIndexParams, ["kind", "hnsw_m", "ef_search", "nlist", "nprobe"], rename={"kind": "vector-index"}
    )
    add_options(p, IndexSpec, ["batch_size", "max_length", "chunk_size"])
    p.add_argument("--shard", help="i/n: encode only this shard of the chunks (merge by rerunning without it)")
    p.add_argument(
        "--shards",
        type=POSITIVE_INT,
        help="build the index as N shards, one per consecutive group of the "
        "corpus's files, searched as one (BM25 statistics over all shards, dense results merged); each "
        "shard resumable, a rerun keeps the finished ones",
    )
    add_options(p, IndexSpec, ["device", "precision", "kb"])
    add_options(p, RaySettings, ["address", "workers"], rename={"address": "ray", "workers": "ray-workers"})

    p = add_command(
        subparsers,
        "verify-index",
        "Check an index folder whole: every part's files against the digests "
        "recorded at build time, row counts, and the passage fingerprint recomputed.",
        "odqa verify-index --index work_indexes/wiki",
        run_verify,
    )
    # --index as every other command names it; the positional form of before still works
    p.add_argument("index", nargs="?", help="index folder built by `odqa index` (or --index)")
    p.add_argument("--index", dest="index_option", metavar="INDEX", help="index folder built by `odqa index`")

    p = add_command(
        subparsers,
        "search",
        "Show the top passages for each question.",
        'odqa search --index work_indexes/wiki-aa "who founded the Visigoth kingdom"',
        run_search,
    )
    p.add_argument(
        "question",
        nargs="*",
        help="one or more quoted questions; unquoted words make one question (or --questions FILE)",
    )
    p.add_argument(
        "--questions",
        "--queries",
        dest="questions",
        metavar="FILE",
        help="search every question of this file instead (any format eval-retrieval reads; - reads "
        "standard input): the runs carry its question ids",
    )
    p.add_argument(
        "--query-id",
        nargs="+",
        metavar="ID",
        help="the runs' query ids of the questions given as arguments, one each (default: 1, 2, ...)",
    )
    p.add_argument("--limit", type=POSITIVE_INT, help="--questions: first N questions only")
    _index_flags(p)
    add_options(p, RetrievalConfig, ["k"], section="retrieval", help={"k": "passages to show"})
    p.add_argument("--json", action="store_true", help="print each question's hits as one JSON object on its own line")
    _run_file_flags(p)
    _retrieval_flags(p)
    add_config_flag(p)

    p = add_command(
        subparsers,
        "eval-retrieval",
        "Top-k retrieval accuracy (DPR-style answer match), MRR, gold-passage recall.",
        "odqa eval-retrieval --index work_indexes/wiki --questions ../shared/data/dpr-qas/nq-test.qa.tsv "
        "--retriever bm25 --limit 500 --k 1 5 20 100 --json",
        run_eval,
    )
    _index_flags(p, retriever=False)
    p.add_argument(
        "--questions",
        "--queries",
        dest="questions",
        required=True,
        help="DPR qas TSV, NQ-open JSONL, SQuAD JSON, WebQuestions JSON, CuratedTREC TSV, TriviaQA JSON, "
        "or (with --qrels) BEIR queries.jsonl",
    )
    p.add_argument(
        "--qrels",
        help="relevance judgments (BEIR qrels TSV or TREC qrels): report nDCG@10, MRR@10 and "
        "R@k by ir-measures over documents instead of answer-match accuracy",
    )
    add_options(p, RetrievalConfig, ["retriever"], section="retrieval")
    p.add_argument(
        "--retrievers",
        nargs="+",
        choices=RETRIEVERS.names,
        metavar="NAME",
        help=f"evaluate each of these retrievers in turn on the same questions ({', '.join(RETRIEVERS.names)}): "
        "one table and one --plot curve each (instead of --retriever)",
    )
    p.add_argument("--limit", type=POSITIVE_INT, help="first N questions only")
    p.add_argument("--k", type=POSITIVE_INT, nargs="+", default=[1, 5, 10, 20, 50, 100])
    p.add_argument("--batch-size", type=POSITIVE_INT, default=32)
    add_output(
        p,
        "--plot",
        metavar="FILE.png",
        help="draw recall@k against k, one curve per retriever (as DPR's figures), into this .png/.svg/.pdf "
        "(the plot extra: pip install 'odqa[plot]')",
    )
    add_output(p, "--per-question", help="write per-question hits (JSONL) here for error analysis")
    add_output(
        p,
        "--run-out",
        help="write every question's top max(--k) passages, scores and answer matches (JSONL) here, for merge-runs",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object of metrics as the last line")
    _run_file_flags(p)
    _retrieval_flags(p)
    add_config_flag(p)

    p = add_command(
        subparsers,
        "merge-runs",
        "Merge the rankings of corpus shards (eval-retrieval --run-out) "
        "into one, or fuse runs of different retrievers (--fusion rrf), and score it: full-corpus recall "
        "from shards searched apart. Reads odqa's JSONL runs, TREC runs and DPR retrieval JSON.",
        "odqa merge-runs runs/nq-test.AB.jsonl runs/nq-test.CD.jsonl --k 1 5 20 100 --json",
        run_merge,
    )
    p.add_argument("runs", nargs="+", help="run files of the same questions (format detected per file)")
    p.add_argument("--k", type=POSITIVE_INT, nargs="+", default=[1, 5, 10, 20, 50, 100])
    p.add_argument(
        "--fusion",
        choices=["score", "rrf"],
        default="score",
        help="score: best score wins (shards of one corpus and model); rrf: reciprocal rank fusion "
        "(runs of different retrievers, scores not comparable)",
    )
    p.add_argument(
        "--qrels",
        help="score the merged run against these relevance judgments (needed for TREC "
        "runs, which do not say which passages hold an answer)",
    )
    add_output(p, "--trec-run", help="write the merged run as a TREC run file")
    add_output(p, "--run-out", help="write the merged run in odqa's JSONL run format")
    p.add_argument("--json", action="store_true", help="print one JSON object of metrics as the last line")


def _run_file_flags(p: argparse.ArgumentParser) -> None:
    add_output(
        p,
        "--trec-run",
        help="write the rankings as a TREC run file (qid Q0 docid rank score tag), for "
        "trec_eval, ir-measures, Pyserini and merge-runs; docids are documents where qrels judge the "
        "questions (--qrels, or questions without answers), else passages",
    )
    add_output(
        p,
        "--dpr-json",
        help="write the rankings as DPR retrieval JSON (question, answers, ctxs with "
        "id, title, text, score, has_answer), for DPR's and Pyserini's evaluation and merge-runs",
    )
    p.add_argument("--run-tag", help="the TREC run's tag column (default: odqa-RETRIEVER)")


def _index_flags(p: argparse.ArgumentParser, retriever: bool = True) -> None:
    add_options(
        p,
        OdqaConfig,
        ["index"],
        section="",
        help={"index": "index folder or es://HOST:9200/NAME (empty: the built-in demo corpus)"},
    )
    if retriever:
        add_options(p, RetrievalConfig, ["retriever"], section="retrieval")


def _retrieval_flags(p: argparse.ArgumentParser) -> None:
    add_options(p, RetrievalConfig, ["encoder", "query_encoder"], section="retrieval")
    _encoder_setting_flags(p)
    add_options(p, RetrievalConfig, ["fusion", "alpha", "candidates"], section="retrieval")
    add_inference_options(p)
    p.add_argument(
        "--accept-encoder-change",
        action="store_true",
        help="search a dense index although its encoder's weights changed since it was built",
    )


def _encoder_setting_flags(p: argparse.ArgumentParser) -> None:
    add_options(p, RetrievalConfig, ["pooling", "similarity", "query_prefix", "passage_prefix"], section="retrieval")


def _config(args):
    return OdqaConfig.load(getattr(args, "config", None), config_overrides(args))


def open_retriever(config, accept_encoder_change: bool = False):
    """The index backend the config names (folder or Elasticsearch; else the demo corpus) and its retriever, the
    device and the optional packages checked first."""
    from odqa.core.device import check_device_available
    from odqa.demo_corpus import demo_index_path
    from odqa.retriever.registry import build_retriever, open_index

    check_device_available(config.device, "device")
    bundle = open_index(config.index or demo_index_path(), config)
    runtime = config.retriever_runtime(accept_encoder_change=accept_encoder_change)
    return bundle, build_retriever(bundle, config.retrieval, runtime)


def run_index(args) -> int:
    from odqa.corpus.readers import CorpusFields
    from odqa.indexing import build_index, build_sharded_index, parse_shard

    config = _config(args)
    r, c = config.retrieval, config.corpus
    spec = IndexSpec(
        corpus=args.corpus,
        out=args.out,
        backends=[b.strip() for b in args.backends.split(",") if b.strip()],
        encoder=args.encoder or r.passage_encoder or r.encoder or DEFAULT_ENCODER,
        query_encoder=r.query_encoder,
        pooling=r.pooling,
        similarity=r.similarity,
        query_prefix=r.query_prefix,
        passage_prefix=r.passage_prefix,
        fields=CorpusFields(c.id_field, c.title_field, c.text_field),
        vector=VectorIndexParams(**dataclass_values(args, VectorIndexParams)),
        shard=parse_shard(args.shard),
        linker=config.linker.model,  # its entity encoder encodes the knowledge base built beside the index
        **dataclass_values(args, IndexSpec),
    )
    ray = RaySettings(**dataclass_values(args, RaySettings))
    if ray.address is not None:
        return _index_on_ray(spec, ray, args.shards)
    _check_index_parts_available(spec)
    report = build_sharded_index(spec, args.shards) if args.shards is not None else build_index(spec)
    print(report.message)
    return 0


def _index_on_ray(spec: IndexSpec, ray: RaySettings, shards: int | None) -> int:
    """`index --ray`: the shards built as Ray tasks, joined here. Everything the build can refuse is refused before
    Ray starts."""
    from odqa.core.cluster import LOCAL, ray_cluster
    from odqa.core.errors import OdqaError
    from odqa.indexing import build_sharded_index, corpus_part, ray_shards, validate_spec

    address = ray.check()
    if spec.shard is not None:
        raise OdqaError("--shard i/n splits one build by hand; --ray splits the build itself: drop --shard")
    validate_spec(spec)
    corpus_part(spec.corpus, (0, shards or 1))
    if address == LOCAL:
        _check_index_parts_available(spec)  # the workers run on this machine
    with ray_cluster(ray) as cluster:
        report = build_sharded_index(spec, shards or ray_shards(spec, cluster), cluster)
    print(report.message)
    return 0


def _check_index_parts_available(spec) -> None:
    """Before the build reads a passage: the device, FAISS for an hnsw or ivf index, the analyser's package."""
    from odqa.core.device import check_device_available
    from odqa.indexes.analysis import analyzer_for, check_analyzer_available
    from odqa.indexes.layout import BM25, DENSE
    from odqa.indexes.vector import check_kind_available

    if DENSE in spec.backends:
        check_device_available(spec.device)
        check_kind_available(spec.vector.kind)
    if BM25 in spec.backends and (spec.analyzer or spec.language != "auto"):
        check_analyzer_available(
            analyzer_for(spec.language, spec.analyzer) if spec.language != "auto" else spec.analyzer
        )


def run_verify(args) -> int:
    from odqa.core.errors import OdqaError
    from odqa.indexes.folder import FolderIndex

    if args.index and args.index_option and args.index != args.index_option:
        raise OdqaError(f"two index folders given ({args.index} and --index {args.index_option}); name one")
    index = args.index_option or args.index
    if not index:
        raise OdqaError("no index folder to check: odqa verify-index --index DIR")
    for line in FolderIndex.open(index).verify():
        print(line)
    print(f"{index}: ok")
    return 0


def run_search(args) -> int:
    from odqa.core.fusion import score_label
    from odqa.core.terminal import printable
    from odqa.eval.qrels import passages_asked, ranks_documents
    from odqa.pipeline import clean_question
    from odqa.retriever.base import fit_k

    config = _config(args)
    items = [dataclasses.replace(item, question=clean_question(item.question)[0]) for item in _search_questions(args)]
    questions = [item.question for item in items]
    bundle, retriever = open_retriever(config, args.accept_encoder_change)
    k = fit_k(config.retrieval.k, len(bundle))
    documents = bool(args.trec_run) and ranks_documents(items)
    # k documents need more passages when several of a document's rank high; those beyond k are not shown
    rankings = retriever.search(questions, max(k, passages_asked(k, len(bundle))) if documents else k)
    _write_search_run(args, config, items, rankings, k, documents)
    rankings = [hits[:k] for hits in rankings]
    for question, hits in zip(questions, rankings):
        if args.json:
            print_json_last(
                {
                    "question": question,
                    "hits": [
                        {"rank": i, "score": h.score, "fusion": h.fusion, **h.passage.to_dict()}
                        for i, h in enumerate(hits, 1)
                    ],
                }
            )
            continue
        if len(questions) > 1:
            print(printable(question))
        for i, hit in enumerate(hits, 1):
            # the corpus's own characters: escaped, so that none of them acts on the terminal
            print(printable(f"{i:>3}. [{score_label(hit)}] {hit.passage.title}  ({hit.passage.id})"))
            print(printable(textwrap.indent(textwrap.fill(hit.passage.text, 100), "     ")))
    return 0


def _search_questions(args) -> list:
    """The questions searched, with the query ids the runs give them: a --questions file's own, else --query-id's
    or 1, 2, ... in order."""
    from odqa.commands.qa import split_questions
    from odqa.core.errors import OdqaError
    from odqa.corpus.questions import QAItem, load_questions
    from odqa.eval.run_formats import check_query_ids

    if args.questions:
        if args.question:
            raise OdqaError("search takes questions as arguments or --questions FILE, not both; drop one")
        if args.query_id:
            raise OdqaError(
                "--query-id names questions given as arguments; a --questions file's questions keep "
                "their own ids, so drop --query-id"
            )
        items = load_questions(args.questions, limit=args.limit)
        if args.trec_run:
            check_query_ids([item.id for item in items], str(args.questions))
        return items
    if not args.question:
        raise OdqaError(
            'no question to search: give one as an argument (odqa search "who wrote Hamlet") or --questions FILE'
        )
    questions = split_questions(args.question)
    ids = args.query_id or [str(i) for i in range(1, len(questions) + 1)]
    if len(ids) != len(questions):
        raise OdqaError(f"--query-id gives {len(ids)} ids for {len(questions)} questions; give one id a question")
    check_query_ids(ids, "--query-id")
    return [QAItem(qid, question, []) for qid, question in zip(ids, questions)]


def _write_search_run(args, config, items: list, rankings, k: int, documents: bool) -> None:
    """search --trec-run / --dpr-json: each question's top k under its query id; the TREC run names documents
    where qrels are what can judge it (odqa.eval.qrels.ranks_documents, as eval-retrieval --qrels)."""
    from odqa.core.atomic import atomic_file
    from odqa.eval.qrels import document_ranking
    from odqa.eval.retrieval import QuestionResult, dpr_ctxs
    from odqa.eval.run_formats import DprJsonWriter, TrecRunWriter

    if args.trec_run:
        with atomic_file(args.trec_run) as tmp, tmp.open("w", encoding="utf-8") as f:
            writer = TrecRunWriter(f, args.run_tag or f"odqa-{config.retrieval.retriever}")
            for item, hits in zip(items, rankings):
                writer.write(
                    item.id, document_ranking(hits, k) if documents else [(h.passage_id, h.score) for h in hits[:k]]
                )
    if args.dpr_json:
        with atomic_file(args.dpr_json) as tmp, tmp.open("w", encoding="utf-8") as f:
            dpr_writer = DprJsonWriter(f)
            for item, hits in zip(items, rankings):
                dpr_writer.write(
                    item.id, item.question, item.answers, dpr_ctxs(QuestionResult(item, hits[:k], None, None))
                )
            dpr_writer.close()


def _ks(values) -> list[int]:
    from odqa.core.errors import OdqaError

    ks = sorted(set(values))
    if ks[0] <= 0:
        raise OdqaError("--k values must be positive")
    return ks


def run_eval(args) -> int:
    from odqa.eval.plots import check_plot_target

    ks = _ks(args.k)
    check_plot_target(args.plot)
    if args.plot and args.qrels:
        from odqa.core.errors import OdqaError

        raise OdqaError("--plot draws answer-match recall@k; with --qrels write the run (--trec-run) and plot that")
    configs = _retriever_configs(args)
    reports = [_evaluate_one(args, config, ks) for config in configs]
    if args.plot:
        from odqa.eval.plots import recall_curves

        recall = [m for m in reports if f"recall@{ks[0]}" in m]
        if not recall:
            from odqa.core.errors import OdqaError

            raise OdqaError("--plot draws answer-match recall@k; with --qrels write the run (--trec-run) instead")
        path = recall_curves(
            {m["retriever"]: m for m in recall}, ks, args.plot, f"recall@k, {Path(args.questions).name}"
        )
        print(f"odqa: recall@k curves written to {path}", file=sys.stderr)
    if args.json:
        print_json_last(reports[0] if len(reports) == 1 else {"retrievers": {m["retriever"]: m for m in reports}})
    return 0


def _retriever_configs(args) -> list:
    """The config of each retriever evaluated: --retrievers' in turn, else the one --retriever (or the config)
    names."""
    from odqa.core.errors import OdqaError

    if args.retrievers and args.retriever:
        raise OdqaError("--retriever names one retriever, --retrievers several; give one of them")
    if args.retrievers and (args.per_question or args.run_out or args.trec_run or args.dpr_json):
        raise OdqaError(
            "--per-question, --run-out, --trec-run and --dpr-json write one retriever's run; evaluate one "
            "retriever (--retriever) to write them"
        )
    config = _config(args)
    names = list(dict.fromkeys(args.retrievers or [config.retrieval.retriever]))
    return [dataclasses.replace(config, retrieval=dataclasses.replace(config.retrieval, retriever=n)) for n in names]


def _evaluate_one(args, config, ks) -> dict:
    """One retriever's metrics, its table and speed line printed."""
    from odqa.core.errors import OdqaError
    from odqa.corpus.questions import load_questions, with_answers
    from odqa.eval.evaluators import RetrievalEvaluator
    from odqa.eval.retrieval import format_table
    from odqa.eval.run_formats import check_query_ids

    tag = args.run_tag or f"odqa-{config.retrieval.retriever}"
    if args.qrels:
        return _eval_qrels(args, config, ks, tag)
    items = with_answers(load_questions(args.questions, limit=args.limit), args.questions)
    if args.trec_run:
        check_query_ids([item.id for item in items], str(args.questions))
    bundle, retriever = open_retriever(config, args.accept_encoder_change)
    if ks[-1] > len(bundle):
        raise OdqaError(f"--k {ks[-1]} is larger than the corpus ({len(bundle)} passages); use smaller k values")
    evaluator = RetrievalEvaluator(
        items,
        ks,
        batch_size=args.batch_size,
        per_question=args.per_question,
        run_out=args.run_out,
        trec_run=args.trec_run,
        dpr_json=args.dpr_json,
        run_tag=tag,
    )
    metrics = evaluator(retriever)
    return _report(metrics, config, ks, format_table, args)


def _report(metrics: dict, config, ks, format_table, args) -> dict:
    """The metrics table and the speed line (both kinds of evaluation); the metrics, named by their retriever."""
    metrics["retriever"] = config.retrieval.retriever
    out = sys.stderr if args.json else sys.stdout  # under --json standard output holds the JSON alone
    if getattr(args, "retrievers", None):
        print(f"retriever {metrics['retriever']}:", file=out)
    print(format_table(metrics, ks), file=out)
    print(
        f"{metrics['questions']} questions in {metrics['seconds']} s ({metrics['questions_per_second']} q/s)", file=out
    )
    return metrics


def _eval_qrels(args, config, ks, tag) -> dict:
    from odqa.core.errors import OdqaError
    from odqa.corpus.questions import load_qrels, load_questions
    from odqa.eval.qrels import evaluate_qrels, format_table
    from odqa.eval.run_formats import check_query_ids

    for flag in ("per_question", "run_out", "dpr_json"):
        if getattr(args, flag):
            raise OdqaError(
                f"--{flag.replace('_', '-')} records answer matches, which qrels do not give; with "
                "--qrels write the ranking with --trec-run"
            )
    qrels = load_qrels(args.qrels)
    items = load_questions(args.questions, limit=args.limit)
    if args.trec_run:
        check_query_ids([item.id for item in items], str(args.questions))
    bundle, retriever = open_retriever(config, args.accept_encoder_change)
    metrics = evaluate_qrels(
        retriever, items, qrels, ks, len(bundle), batch_size=args.batch_size, trec_run=args.trec_run, run_tag=tag
    )
    return _report(metrics, config, ks, format_table, args)


def run_merge(args) -> int:
    from odqa.core.atomic import atomic_file
    from odqa.core.errors import OdqaError
    from odqa.eval.retrieval import format_table
    from odqa.eval.run_formats import TrecRunWriter
    from odqa.eval.runs import judged, merge_runs, summarize_run

    ks = _ks(args.k)
    rows = merge_runs(args.runs, ks[-1], fusion=args.fusion)
    if args.trec_run:
        with atomic_file(args.trec_run) as tmp, tmp.open("w", encoding="utf-8") as f:
            writer = TrecRunWriter(f, f"odqa-merged-{args.fusion}")
            for row in rows:
                writer.write(row["id"], [(h.passage_id, h.score) for h in row["hits"]])
    if args.run_out:
        from odqa.core import strict_json

        with atomic_file(args.run_out) as tmp, tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(
                    strict_json.dumps(
                        {
                            "id": row["id"],
                            "question": row["question"],
                            "gold": row["gold"],
                            "hits": [h.to_dict() for h in row["hits"]],
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    if args.qrels:
        from odqa.corpus.questions import load_qrels
        from odqa.eval.qrels import format_table as qrels_table
        from odqa.eval.qrels import score_run

        metrics = score_run(
            {row["id"]: [(h.passage_id, h.score) for h in row["hits"]] for row in rows}, load_qrels(args.qrels), ks
        )
        table = qrels_table(metrics, ks)
    elif judged(rows, ks[-1]):
        metrics = summarize_run(rows, ks)
        table = format_table(metrics, ks)
    elif args.trec_run or args.run_out:
        print(
            "odqa: merged run written; not scored: TREC runs do not say which passages hold an answer "
            "(pass --qrels to score against relevance judgments)",
            file=sys.stderr,
        )
        return 0
    else:
        raise OdqaError(
            "cannot score these runs: TREC runs do not say which passages hold an answer; pass --qrels "
            "FILE, or merge eval-retrieval --run-out / --dpr-json runs"
        )
    metrics["runs"] = len(args.runs)
    metrics["fusion"] = args.fusion
    print(table, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print_json_last(metrics)
    return 0
