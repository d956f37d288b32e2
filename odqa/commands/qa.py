"""Commands: ask, shell, eval-qa, demo."""

from __future__ import annotations

import io
import sys
from typing import cast

from odqa.commands.common import add_command, add_config_flag, add_output, print_json_last
from odqa.commands.options import POSITIVE_INT, add_inference_options, add_options, config_overrides
from odqa.config import OdqaConfig, RetrievalConfig
from odqa.linker.settings import LinkerSettings
from odqa.reader.settings import ReaderSettings


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "ask",
        "Answer one question (built-in demo corpus unless --index/--config).",
        'odqa ask "Who discovered penicillin?" --json',
        run_ask,
    )
    p.add_argument("question", nargs="+", help="one or more quoted questions; unquoted words make one question")
    p.add_argument(
        "--json",
        action="store_true",
        help="print each result as one JSON object on its own line (the last line: the last question)",
    )
    _pipeline_flags(p)

    p = add_command(
        subparsers,
        "predict",
        "Answer every question of a file (answers not needed): one JSON line a "
        "question on stdout (id, question, answer, probability, confident, passages), progress on stderr.",
        "odqa predict questions.txt > answers.jsonl",
        run_predict,
    )
    p.add_argument(
        "questions",
        help="one question a line (.txt), JSONL with 'question' (NQ-open) or '_id'/'text' "
        "(BEIR queries), or any question file eval-qa reads; - reads them from standard input",
    )
    p.add_argument("--limit", type=POSITIVE_INT, help="first N questions only")
    p.add_argument("--batch-size", type=POSITIVE_INT, default=16, help="questions linked and retrieved together")
    _pipeline_flags(p)

    p = add_command(
        subparsers,
        "shell",
        "Interactive QA shell (reads one line at a time when stdin is not a terminal).",
        "odqa shell --index work_indexes/wiki --retriever hybrid",
        run_shell,
    )
    _pipeline_flags(p)

    p = add_command(
        subparsers,
        "eval-qa",
        "End-to-end EM/F1 of the top answer, with retrieval recall@k of the same run.",
        "odqa eval-qa --questions odqa/demo/questions.jsonl --json",
        run_eval_qa,
    )
    p.add_argument("--questions", required=True, help="any question file eval-retrieval reads")
    p.add_argument("--limit", type=POSITIVE_INT)
    p.add_argument(
        "--recall-k",
        type=POSITIVE_INT,
        nargs="+",
        default=[1, 5, 10],
        help="recall@k cut-offs; those above --k (passages read) are dropped",
    )
    add_output(p, "--per-question", help="write per-question predictions (JSONL)")
    add_output(
        p,
        "--plot",
        metavar="FILE.png",
        help="draw the reliability diagram of the top answers' calibrated probability (share right by "
        "probability, with the reader's confident threshold) into this .png/.svg/.pdf (the plot extra: pip "
        "install 'odqa[plot]')",
    )
    p.add_argument("--json", action="store_true")
    _pipeline_flags(p)

    p = add_command(
        subparsers,
        "demo",
        "The quickstart: the demo corpus in the shell, or (no terminal) its 100 questions scored.",
        "odqa demo",
        run_demo,
    )
    _pipeline_flags(p)


def _pipeline_flags(p) -> None:
    add_options(p, OdqaConfig, ["index"], section="")
    add_options(p, RetrievalConfig, ["retriever", "k"], section="retrieval")
    add_options(
        p,
        ReaderSettings,
        ["model", "focus_words", "whole_passages", "early_stop_passages", "early_stop_probability"],
        rename={"model": "reader"},
        section="reader",
    )
    add_options(p, LinkerSettings, ["enabled"], rename={"enabled": "linker"}, section="linker")
    add_options(p, RetrievalConfig, ["entity_bonus"], section="retrieval")
    add_inference_options(p)
    add_config_flag(p)


def make_pipeline(args):
    """The pipeline the flags and the config describe, its device and optional packages checked before any
    model loads."""
    from odqa.demo_corpus import demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline

    config = OdqaConfig.load(args.config, config_overrides(args))
    pipeline = Pipeline(config, default_index=demo_index_path, default_kb=demo_kb_path)
    pipeline.check_available()
    return pipeline


def run_ask(args) -> int:
    from odqa.shell import Shell

    pipeline = make_pipeline(args)
    questions = split_questions(args.question)
    for result in pipeline.ask_batch(questions):
        if args.json:
            print_json_last({**result.to_dict(), "inference": pipeline.inference_plans()})
        else:
            shell = Shell(pipeline)
            if len(questions) > 1:
                shell.say(result.question)
            shell.show(result)
    return 0


def run_predict(args) -> int:
    from tqdm.auto import tqdm

    from odqa.core import strict_json
    from odqa.core.errors import OdqaError
    from odqa.core.terminal import printable
    from odqa.corpus.questions import load_questions

    if args.batch_size <= 0:
        raise OdqaError("--batch-size must be positive")
    items = load_questions(args.questions, limit=args.limit)
    pipeline = make_pipeline(args)
    with tqdm(total=len(items), desc="predict", unit=" q", file=sys.stderr, mininterval=2) as bar:
        for start in range(0, len(items), args.batch_size):
            batch = items[start : start + args.batch_size]
            for item, result in zip(batch, pipeline.ask_batch([item.question for item in batch])):
                best = result.answers[0] if result.answers else None
                # each line leaves as soon as it is answered: a long run can be read (or piped) while it goes
                # escaped as JSON escapes (the line still decodes to the same text): questions and passage ids
                # come from files, and their control characters must not act on the terminal
                print(
                    printable(
                        strict_json.dumps(
                            {
                                "id": item.id,
                                "question": item.question,
                                "answer": best.text if best else None,
                                "probability": round(best.probability, 4) if best else None,
                                "confident": result.confident,
                                "calibrated": best.calibrated if best else None,
                                "passages": [hit.passage_id for hit in result.passages],
                            },
                            ensure_ascii=False,
                        )
                    ),
                    flush=True,
                )
            bar.update(len(batch))
    return 0


def split_questions(arguments: list[str]) -> list[str]:
    """`ask "Q1" "Q2"` asks two questions; `ask Who wrote Hamlet?` (no argument holds a space) asks one."""
    if len(arguments) > 1 and not any(" " in a.strip() for a in arguments):
        return [" ".join(arguments)]
    return arguments


def run_shell(args) -> int:
    from odqa.core.paths import odqa_home
    from odqa.shell import Shell

    shell = Shell(make_pipeline(args))
    if not sys.stdin.isatty():
        # a person typed these lines: an undecodable byte becomes U+FFFD instead of ending the shell
        cast(io.TextIOWrapper, sys.stdin).reconfigure(errors="replace")
        return shell.run_lines(sys.stdin)
    seconds = shell.warm_up()
    shell.say(f"ready in {seconds:.1f} s ({shell.pipeline.corpus_size} passages)")
    odqa_home().mkdir(parents=True, exist_ok=True)
    return shell.run_interactive(str(odqa_home() / "shell_history"))


def _eval(pipeline, path, limit, ks, per_question, as_json, plot=None) -> dict:
    from odqa.core.errors import OdqaError
    from odqa.corpus.questions import load_questions, with_answers
    from odqa.eval.evaluators import QAEvaluator

    ks = sorted(set(ks))
    if ks[0] <= 0:
        raise OdqaError("--recall-k values must be positive")
    if ks[-1] > pipeline.corpus_size:
        raise OdqaError(f"--recall-k {ks[-1]} is larger than the corpus ({pipeline.corpus_size} passages)")
    depth = pipeline.config.retrieval.k
    if [k for k in ks if k > depth]:
        print(
            f"odqa: recall@{', '.join(str(k) for k in ks if k > depth)} "
            f"dropped: the reader reads {depth} passages (--k)",
            file=sys.stderr,
        )
        ks = [k for k in ks if k <= depth] or [depth]
    items = with_answers(load_questions(path, limit=limit), path)
    metrics = QAEvaluator(items, ks, k=depth, per_question=per_question, plot=plot)(pipeline)
    # the JSON's names and units (percent); under --json standard output holds the JSON alone
    print(
        f"em {metrics['em']:.2f}  f1 {metrics['f1']:.2f}  "
        + "  ".join(f"recall@{k} {metrics[f'recall@{k}']:.2f}" for k in ks)
        + (
            f"  (percent, {metrics['metric']} metric; {metrics['questions']} questions, "
            f"{metrics['questions_per_second']} q/s)"
        ),
        file=sys.stderr if as_json else sys.stdout,
    )
    metrics["inference"] = pipeline.inference_plans()
    if as_json:
        print_json_last(metrics)
    return metrics


def run_eval_qa(args) -> int:
    from odqa.eval.plots import check_plot_target

    check_plot_target(args.plot)
    _eval(make_pipeline(args), args.questions, args.limit, args.recall_k, args.per_question, args.json, args.plot)
    if args.plot:
        print(f"odqa: reliability diagram written to {args.plot}", file=sys.stderr)
    return 0


def run_demo(args) -> int:
    from odqa.demo_corpus import DEMO_QUESTIONS

    if sys.stdin.isatty() and sys.stdout.isatty():
        return run_shell(args)
    print("odqa demo: no terminal, so answering the 100 demo questions instead of opening the shell.", file=sys.stderr)
    _eval(make_pipeline(args), DEMO_QUESTIONS, None, [1, 5, 10], None, True)
    return 0
