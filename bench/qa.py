"""End-to-end QA benchmark: EM/F1 of the top answer and retrieval recall of the same run, with throughput.

Suites:
* `squad-open`: SQuAD v1.1 dev questions (of the 13 articles not in SQuAD v2.0 dev) over the squad-open corpus
  (all SQuAD dev paragraphs + 40k Wikipedia distractor passages), hybrid over the default encoder's index (built
  here if absent).
* `nq`: NQ test (DPR qas) over the full Wikipedia subset, BM25 (no dense index: encoding 759k passages is
  GPU work).
* `demo`: the 100 built-in demo questions over the demo corpus.
* `open-dev`: the open-domain dev split no odqa model trains on (`odqa/corpus/open_dev.json`: TriviaQA dev, NQ
  dev, WebQuestions val, CuratedTREC train) over the Wikipedia subset, per source and overall; the set every
  reader decision is made on (`--questions N`: at most N per source).
* `korquad-open`, `cmrc-open`: KorQuAD 1.0 dev and CMRC 2018 dev questions over their own paragraphs as the
  corpus (`multilingual/`), hybrid over the multilingual e5 index (built here if absent), scored with the
  official KorQuAD / CMRC 2018 metrics; compare `--readers reader-multilingual reader`.

    python bench/qa.py --suite all --questions 500
    python bench/qa.py --suite korquad-open cmrc-open --retrievers hybrid --questions 0 \\
        --readers reader-multilingual reader
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import SEED, open_dev_sample, squad_open_index_dir, variant_pipeline  # noqa: E402 (after the path line)
from odqa.retriever.registry import RETRIEVERS  # noqa: E402 (after the path line)

# the Korean and Chinese test sets read over their own paragraphs (never trained on: docs/multilingual-reader.md)
CJK_OPEN = {"korquad-open": "korquad-v1.0-dev.json", "cmrc-open": "cmrc2018-dev.json"}
CJK_ENCODER = "encoder-multilingual"
NOTES: list[str] = []  # lines for the written table (e.g. how many questions --answer-read-only kept)


# the reader's confirmation split (issue 76): questions of the held-out kind that no choice has used
CONFIRMATION = "webquestions-test"
# the demo's questions by language: English, and Korean and Chinese over the same English articles
DEMO_SUITES = {"demo": "en", "demo-ko": "ko", "demo-zh": "zh"}


def run_suite(
    name: str,
    index: str,
    questions_path: Path,
    retrievers: list[str],
    n: int | None,
    k: int,
    linker: bool,
    exclude_articles_of: Path | None = None,
    readers: tuple[str, ...] = ("reader",),
    answer_read_only: bool = False,
    settings: tuple[dict, ...] = ({},),
    only_articles_of: Path | None = None,
) -> list[list]:
    import torch

    from odqa.corpus.questions import drop_articles, keep_articles, load_questions

    torch.set_num_threads(2)
    items = keep_articles(drop_articles(load_questions(questions_path), exclude_articles_of), only_articles_of)
    if n and n < len(items):
        items = random.Random(SEED).sample(items, n)
    rows = []
    for kind in retrievers:
        sampled, asked = len(items), items
        for reader, variant in [(r, v) for r in readers for v in settings]:
            pipeline, label = variant_pipeline(index, kind, k, linker, reader, variant)
            if answer_read_only and asked is items:
                asked = with_answer_retrieved(pipeline, items, k)
                NOTES.append(
                    f"{name} {kind}: {len(asked)} of {sampled} questions have an answer in the top {k} (only "
                    f"those read); EM over all {sampled} = EM x {len(asked) / sampled:.4f}."
                )
                print(NOTES[-1], flush=True)
            pipeline.retriever(kind), pipeline.reader  # load before the clock starts
            started = time.perf_counter()
            m, judged = _evaluate_with_rows(pipeline, asked, [1, 5, k])
            seconds = time.perf_counter() - started
            rows.append(
                [
                    name,
                    kind,
                    label,
                    k,
                    len(asked),
                    f"{m['em']:.2f}",
                    f"{m['f1']:.2f}",
                    f"{m['em_given_answer_read']:.2f}",
                    f"{m['recall@1']:.2f}",
                    f"{m[f'recall@{k}']:.2f}",
                    f"{len(asked) / seconds:.2f}",
                    *_confidence_cells(judged),
                ]
            )
            print(" | ".join(map(str, rows[-1])), flush=True)
    return rows


def run_open_dev(
    index: str,
    data: Path,
    retrievers: list[str],
    n: int | None,
    k: int,
    linker: bool,
    readers: tuple[str, ...],
    settings: tuple[dict, ...],
) -> list[list]:
    """Every reader (and settings variant) on each open-dev source and on all of them together; the overall
    figures are the per-source ones weighted by their question counts (EM given answer read: by the answers
    read). Beside them, how well the calibrated probability of the top answer tells right (EM) from wrong:
    AUROC and expected calibration error (10 bins), and the share of questions called confident with the EM
    over those."""
    import torch

    torch.set_num_threads(2)
    sources = open_dev_sample(data, n)
    rows = []
    for kind in retrievers:
        for reader, variant in [(r, v) for r in readers for v in settings]:
            pipeline, label = variant_pipeline(index, kind, k, linker, reader, variant)
            pipeline.retriever(kind), pipeline.reader  # load before the clock starts
            rows += open_dev_rows(pipeline, kind, label, k, sources)
    return rows


def results_table(rows: list[list]) -> str:
    """The Markdown table of the suites' rows (with the confidence columns when any row has them)."""
    header = [
        "suite",
        "retriever",
        "reader",
        "k read",
        "questions",
        "EM",
        "F1",
        "EM given answer read",
        "R@1",
        "R@k",
        "q/s",
    ]
    if any(len(row) > len(header) for row in rows):
        header += ["AUROC", "ECE", "% confident", "EM of confident"]
        rows = [row + [""] * (len(header) - len(row)) for row in rows]
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    )


def open_dev_rows(pipeline, kind: str, label: str, k: int, sources: dict[str, list]) -> list[list]:
    """One table row per open-dev source and one for all of them together, for one pipeline (anything with
    `ask_batch`, e.g. `read_saved.SavedPassages`)."""
    rows = []
    totals = {"questions": 0, "em": 0.0, "f1": 0.0, "read": 0.0, "em_read": 0.0, "r1": 0.0, "rk": 0.0, "seconds": 0.0}
    judged_all: list[dict] = []
    for name, items in sources.items():
        started = time.perf_counter()
        m, judged = _evaluate_with_rows(pipeline, items, [1, k])
        seconds = time.perf_counter() - started
        judged_all += judged
        q = len(items)
        read = m["answer_in_read"] * q / 100
        for key, value in (
            ("questions", q),
            ("em", m["em"] * q),
            ("f1", m["f1"] * q),
            ("read", read),
            ("em_read", m["em_given_answer_read"] * read),
            ("r1", m["recall@1"] * q),
            ("rk", m[f"recall@{k}"] * q),
            ("seconds", seconds),
        ):
            totals[key] += value
        rows.append(
            [
                f"open-dev {name}",
                kind,
                label,
                k,
                q,
                f"{m['em']:.2f}",
                f"{m['f1']:.2f}",
                f"{m['em_given_answer_read']:.2f}",
                f"{m['recall@1']:.2f}",
                f"{m[f'recall@{k}']:.2f}",
                f"{q / seconds:.2f}",
                *_confidence_cells(judged),
            ]
        )
        print(" | ".join(map(str, rows[-1])), flush=True)
    q = totals["questions"]
    rows.append(
        [
            "**open-dev all**",
            kind,
            label,
            k,
            q,
            f"{totals['em'] / q:.2f}",
            f"{totals['f1'] / q:.2f}",
            f"{totals['em_read'] / max(totals['read'], 1e-9):.2f}",
            f"{totals['r1'] / q:.2f}",
            f"{totals['rk'] / q:.2f}",
            f"{q / totals['seconds']:.2f}",
            *_confidence_cells(judged_all),
        ]
    )
    print(" | ".join(map(str, rows[-1])), flush=True)
    return rows


def _evaluate_with_rows(pipeline, items, ks: list[int]) -> tuple[dict, list[dict]]:
    """`evaluate_qa`'s metrics and its per-question rows (each with `em`, `probability`, `confident`)."""
    import json
    import tempfile

    from odqa.eval.qa import evaluate_qa

    with tempfile.TemporaryDirectory() as tmp:
        metrics = evaluate_qa(pipeline, items, ks=ks, per_question=Path(tmp) / "rows.jsonl")
        return metrics, [json.loads(line) for line in (Path(tmp) / "rows.jsonl").open(encoding="utf-8")]


def _confidence_cells(judged: list[dict]) -> list[str]:
    from odqa.eval.confidence import auroc, expected_calibration_error

    probability = [row["probability"] for row in judged]
    em = [row["em"] for row in judged]
    area = auroc(probability, em)
    confident = [row["em"] for row in judged if row["confident"]]
    return [
        f"{area:.3f}" if area is not None else "-",
        f"{expected_calibration_error(probability, em):.3f}",
        f"{100 * len(confident) / max(len(judged), 1):.1f}",
        f"{100 * sum(confident) / len(confident):.1f}" if confident else "-",
    ]


def settings_variants(focus_words: list[int] | None, settings: list[str] | None) -> tuple[dict, ...]:
    """The config overrides of each compared variant: --focus-words values, then --settings arguments."""
    variants: list[dict] = [{"reader.focus_words": f} for f in focus_words or []]
    variants += [parse_settings(arg) for arg in settings or []]
    return tuple(variants) or ({},)


def parse_settings(arg: str) -> dict:
    """One --settings argument, KEY=VALUE pairs joined by commas, as config overrides."""
    overrides = {}
    for pair in arg.split(","):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            print(
                f"{Path(sys.argv[0]).name}: error: --settings {arg}: give KEY=VALUE pairs joined by commas",
                file=sys.stderr,
            )
            raise SystemExit(2)
        overrides[key.strip()] = value.strip()  # OdqaConfig.load coerces it to the setting's type
    return overrides


def with_answer_retrieved(pipeline, items, k: int) -> list:
    """The items whose answer is in one of the top `k` passages the pipeline retrieves for them. Every reader
    scores EM 0 on the others, so comparing readers on these alone gives the same EM difference, scaled, for a
    third of the reading on NQ (EM here is the full run's "EM given answer read")."""
    from odqa.eval.retrieval import judge
    from odqa.pipeline import clean_question

    kept = []
    for i in range(0, len(items), 64):
        batch = items[i : i + 64]
        texts = [clean_question(q.question)[0] for q in batch]
        hits = pipeline.retrieve(texts, pipeline.link(texts), k=k)
        kept += [item for item, h in zip(batch, hits) if judge(item, h).first_hit_rank is not None]
    return kept


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--suite",
        nargs="+",
        default=["all"],
        choices=["open-dev", "squad-open", "nq", "efficientqa", CONFIRMATION, *DEMO_SUITES, *CJK_OPEN, "all"],
        help="efficientqa: NQ-open's EfficientQA dev over the Wikipedia subset, the NQ-style set for "
        f"choosing settings (no shipped reader trained on it; nq is NQ test); {CONFIRMATION}: WebQuestions' "
        "test split, which no training run and no setting was chosen on: read only for the final choice "
        "between finished readers (issue 76)",
    )
    parser.add_argument("--questions", type=int, default=500, help="questions sampled per suite (seed 13); 0: all")
    parser.add_argument("--k", type=int, default=10, help="passages read per question")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache", default=str(ROOT / "work_indexes" / "bench"))
    parser.add_argument("--wiki-index", default=str(ROOT / "work_indexes" / "wiki"))
    parser.add_argument(
        "--linker", action="store_true", help="link entities too (off by default: measures retrieval+reading)"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "qa.md"))
    parser.add_argument(
        "--readers",
        nargs="+",
        default=["reader"],
        help="reader models compared side by side in one run (names or paths)",
    )
    parser.add_argument(
        "--retrievers",
        nargs="+",
        choices=RETRIEVERS.names,
        help="retrievers compared (demo, squad-open: default bm25 hybrid; open-dev, nq, efficientqa: "
        "default bm25; dense and hybrid need an index with vectors)",
    )
    parser.add_argument(
        "--focus-words",
        type=int,
        nargs="+",
        help="reader.focus_words values compared side by side (default: the config's; 0: whole passages)",
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="config overrides compared side by side, one variant per argument (e.g. "
        "reader.focus_words=40,reader.whole_passages=2 reader.focus_words=0)",
    )
    parser.add_argument(
        "--answer-read-only",
        action="store_true",
        help="read only the questions whose answer is in the top k retrieved (reader comparisons: "
        "EM is then 'EM given answer read'; the line printed first gives the factor to the "
        "EM over all questions)",
    )
    parser.add_argument(
        "--bm25-only",
        action="store_true",
        help="squad-open: the BM25-only index (no passage encoding; for CPU-only machines)",
    )
    parser.add_argument(
        "--tuning-articles",
        action="store_true",
        help="squad-open: only the 35 articles SQuAD v2.0 dev shares with v1.1 dev, for choosing "
        "pipeline settings (the readers since v3 trained on neither; the 13 others stay the test)",
    )
    parser.add_argument(
        "--all-articles",
        action="store_true",
        help="squad-open: every SQuAD v1.1 dev article (default: the 13 not in SQuAD v2.0 dev, "
        "the only ones the reader trained on v2.0 dev has not seen)",
    )
    args = parser.parse_args(argv)
    data = Path(args.data)
    n = args.questions or None
    suites = ["demo", "squad-open", "nq"] if "all" in args.suite else args.suite
    rows = []
    readers = tuple(args.readers)
    variants = settings_variants(args.focus_words, args.settings)
    retrievers = args.retrievers or (["bm25"] if args.bm25_only else ["bm25", "hybrid"])
    for suite in suites:
        if suite in DEMO_SUITES:
            from odqa.demo_corpus import DEMO_QUESTIONS_BY_LANGUAGE

            rows += run_suite(
                suite,
                "",
                DEMO_QUESTIONS_BY_LANGUAGE[DEMO_SUITES[suite]],
                retrievers,
                None,
                args.k,
                args.linker,
                readers=readers,
                settings=variants,
            )
        elif suite == "squad-open":
            from odqa.core.models import DEFAULT_ENCODER

            index = squad_open_index_dir(args.cache, None if args.bm25_only else DEFAULT_ENCODER)
            if not (index / "manifest.json").exists():
                from bench.retrieval import main as retrieval_bench

                # builds the index; its table goes beside the index, not over bench/results
                encoders = ["--bm25-only"] if args.bm25_only else ["--encoders", DEFAULT_ENCODER]
                retrieval_bench(
                    [
                        "--suite",
                        "squad-open",
                        "--data",
                        args.data,
                        "--cache",
                        args.cache,
                        "--wiki-index",
                        args.wiki_index,
                        *encoders,
                        "--out",
                        str(index.parent / "retrieval-for-qa.md"),
                    ]
                )
            # only the 13 articles SQuAD v2.0 dev (the models' training data) does not share with v1.1 dev
            held_out = None if args.all_articles or args.tuning_articles else data / "squad" / "dev-v2.0.json"
            rows += run_suite(
                "squad-open",
                str(index),
                data / "squad" / "dev-v1.1.json",
                retrievers,
                n,
                args.k,
                args.linker,
                exclude_articles_of=held_out,
                readers=readers,
                answer_read_only=args.answer_read_only,
                settings=variants,
                only_articles_of=data / "squad" / "dev-v2.0.json" if args.tuning_articles else None,
            )
        elif suite in CJK_OPEN:
            path = data / "multilingual" / CJK_OPEN[suite]
            index = Path(args.cache) / suite
            if not (index / "manifest.json").exists():
                from odqa.indexing import IndexSpec, build_index

                build_index(
                    IndexSpec(corpus=str(path), out=str(index), backends=["bm25", "dense"], encoder=CJK_ENCODER)
                )
            rows += run_suite(
                suite,
                str(index),
                path,
                retrievers,
                n,
                args.k,
                args.linker,
                readers=readers,
                answer_read_only=args.answer_read_only,
                settings=variants,
            )
        elif suite == "open-dev":
            index = Path(args.wiki_index)
            if not (index / "manifest.json").exists():
                print(
                    f"error: no Wikipedia index at {index}; build it with `python run_qa.py index --corpus "
                    f"{data / 'wiki'} --out {index} --backends bm25`",
                    file=sys.stderr,
                )
                return 2
            rows += run_open_dev(
                str(index), data, args.retrievers or ["bm25"], n, args.k, args.linker, readers, variants
            )
        else:
            index = Path(args.wiki_index)
            if not (index / "manifest.json").exists():
                print(
                    f"error: no Wikipedia index at {index}; build it with `python run_qa.py index --corpus "
                    f"{data / 'wiki'} --out {index} --backends bm25`",
                    file=sys.stderr,
                )
                return 2
            name, questions = {
                "nq": ("nq-test", data / "dpr-qas" / "nq-test.qa.tsv"),
                "efficientqa": ("efficientqa-dev", data / "nq-open" / "NQ-open.efficientqa.dev.1.1.jsonl"),
                CONFIRMATION: (CONFIRMATION, data / "webquestions" / "devtest.json"),
            }[suite]
            rows += run_suite(
                name,
                str(index),
                questions,
                args.retrievers or ["bm25"],
                n,
                args.k,
                args.linker,
                readers=readers,
                answer_read_only=args.answer_read_only,
                settings=variants,
            )
    table = results_table(rows)
    text = (
        f"# End-to-end QA\n\nWritten by `python bench/qa.py {' '.join(argv or sys.argv[1:])}` "
        f"(2 CPU cores, {time.strftime('%Y-%m-%d')}).\n\n{table}\n" + "".join(f"\n{line}\n" for line in NOTES)
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
