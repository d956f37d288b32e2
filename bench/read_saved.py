"""Compare readers on saved retrieval: the open-dev questions with the passages the retriever gave them, read
without the index.

Reading is what differs between readers, so retrieving once and saving the passages (text, title and score
of each hit) lets readers be compared on a machine that has no index: a GPU machine that trains a teacher,
say. The figures are `bench/qa.py --suite open-dev`'s (EM, F1, EM given an answer read, recall, AUROC, ECE,
share confident), on the same questions and passages, with the reader's default settings.

    python bench/read_saved.py save --wiki-index $ODQA_HOME/work_indexes/wiki --questions 300 --k 10 \\
        --out $ODQA_HOME/runs/open-dev-bm25-top10.jsonl
    python bench/read_saved.py read --passages $ODQA_HOME/runs/open-dev-bm25-top10.jsonl --readers reader runs/x
    python bench/read_saved.py read --passages ... --readers reader --set early_stop_passages=0 --set temperature=0.01

`save --linker-kb KB` links each question first, as `ask` does with a linker (its retrieval takes the linked
entities too), and saves their titles, which `read` hands the readers (entity marks, `subject_weight`).
`read --sweep KEY=V1,V2,...` compares values of one question-time setting (odqa.reader.settings
.QUESTION_TIME_SETTINGS) on one reading: each passage is read once and every value ranks the same spans.
`read --answer-passage-only` keeps each question's first passage that holds an answer and reads it alone: how well
a reader reads, apart from how well it chooses between passages.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import SEED, open_dev_sample, variant_pipeline  # noqa: E402 (after the path line)
from qa import open_dev_rows, results_table  # noqa: E402  (bench/ is the script's folder)


class SavedPassages:
    """A pipeline over saved retrieval: `ask_batch` reads each question's saved hits with `reader`, as
    `Pipeline.ask_batch` reads retrieved ones (the same retrieval-score bonus and answers kept)."""

    def __init__(self, reader, hits_by_question: dict, top_n: int, subjects_by_question: dict | None = None):
        self.reader, self.hits_by_question, self.top_n = reader, hits_by_question, top_n
        self.subjects_by_question = subjects_by_question or {}

    def ask_batch(self, questions: list[str], k: int | None = None, retriever: str | None = None) -> list:
        from odqa.pipeline import Result, relative_scores

        hits = [self.hits_by_question[q][:k] if k else self.hits_by_question[q] for q in questions]
        asked = [i for i, h in enumerate(hits) if h]
        results = [Result(question=q, answers=[], passages=h) for q, h in zip(questions, hits)]
        if asked:
            answers = self.reader.read_many(
                [questions[i] for i in asked],
                [[x.passage for x in hits[i]] for i in asked],
                [relative_scores([x.score for x in hits[i]]) for i in asked],
                top_n=self.top_n,
                subjects=[self.subjects_by_question.get(questions[i]) for i in asked],
            )
            for i, a in zip(asked, answers):
                results[i].answers = a
        return results


def save(args) -> int:
    index = Path(args.wiki_index)
    if not (index / "manifest.json").exists():
        print(
            f"error: no index at {index}; build it with `python run_qa.py index --corpus ../shared/data/wiki "
            f"--out {index} --backends bm25`",
            file=sys.stderr,
        )
        return 2
    sources = open_dev_sample(Path(args.data), args.questions)
    linked = {"linker.kb": args.linker_kb} if args.linker_kb else {}
    pipeline, _ = variant_pipeline(str(index), args.retriever, args.k, bool(linked), "reader", linked)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with tmp.open("w", encoding="utf-8") as f:
        for name, items in sources.items():
            for lo in range(0, len(items), 32):
                batch = items[lo : lo + 32]
                texts = [q.question for q in batch]
                mentions = pipeline.link(texts) if linked else [[] for _ in batch]
                found = pipeline.retrieve(texts, mentions, k=args.k)
                for item, hits, linked_here in zip(batch, found, mentions):
                    f.write(
                        json.dumps(
                            {
                                "source": name,
                                "item": dataclasses.asdict(item),
                                **({"subjects": [m.entity.title for m in linked_here if m.entity]} if linked else {}),
                                "hits": [
                                    {"row": h.row, "score": h.score, "source": h.source, "passage": h.passage.to_dict()}
                                    for h in hits
                                ],
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
    tmp.replace(out)
    print(f"saved {sum(len(v) for v in sources.values())} questions' top {args.k} {args.retriever} passages to {out}")
    return 0


def load_saved(path: Path) -> tuple[dict[str, list], dict[str, list], int, dict]:
    """(questions per source, hits per question text, k, linked subjects per question text) of a file `save`
    wrote."""
    from odqa.core.types import Passage, SearchHit
    from odqa.corpus.questions import QAItem
    from odqa.reader.entity_marks import subjects_from_titles

    sources: dict[str, list] = {}
    hits: dict[str, list] = {}
    subjects: dict = {}
    k = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            item = QAItem(**row["item"])
            sources.setdefault(row["source"], []).append(item)
            hits[item.question] = [
                SearchHit(h["row"], h["score"], Passage(**h["passage"]), h["source"]) for h in row["hits"]
            ]
            k = max(k, len(row["hits"]))
            if "subjects" in row:
                subjects[item.question] = subjects_from_titles(row["subjects"])
    return sources, hits, k, subjects


def answer_passage_only(
    sources: dict[str, list], hits: dict[str, list]
) -> tuple[dict[str, list], dict[str, list], int]:
    """Each question with only its first saved passage that holds an answer; questions with none are dropped. It
    measures reading apart from choosing between passages."""
    from odqa.core.answers import has_answer

    kept_sources: dict[str, list] = {}
    kept_hits: dict[str, list] = {}
    for source, items in sources.items():
        for item in items:
            bearing = [h for h in hits[item.question] if has_answer(h.passage.text, item.answers, item.regex)]
            if bearing:
                kept_sources.setdefault(source, []).append(item)
                kept_hits[item.question] = bearing[:1]
    return kept_sources, kept_hits, 1


def parse_settings(pairs: list[str]) -> dict:
    """KEY=VALUE reader settings (odqa.reader.settings.ReaderSettings); values are JSON (0.5, null, "bf16") or
    plain words."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --set takes KEY=VALUE, got {pair!r} (e.g. --set temperature=2)")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def parse_sweep(arg: str) -> tuple[str | None, list]:
    """--sweep KEY=V1,V2,...: a question-time reader setting and its values (JSON numbers or null)."""
    from odqa.reader.settings import QUESTION_TIME_SETTINGS

    if not arg:
        return None, []
    key, sep, values = arg.partition("=")
    if not sep or key not in QUESTION_TIME_SETTINGS or not values:
        raise SystemExit(
            f"error: --sweep takes KEY=V1,V2,... with KEY one of {', '.join(QUESTION_TIME_SETTINGS)}, got {arg!r}"
        )
    try:
        return key, [json.loads(v) for v in values.split(",")]
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: --sweep {arg}: each value is a number or null ({exc})") from exc


def remember_decoded(reader) -> None:
    """Each (question as read, passage) pair decoded once: the sweep's values rank the same spans, never a
    second forward pass (nor one whose batch companions differ)."""
    decode = reader.decode_passages
    seen: dict = {}

    def decode_once(questions, texts, indexes, read_as=None):
        asked = read_as or questions
        keys = list(zip(asked, texts, indexes))
        new = [i for i, key in enumerate(keys) if key not in seen]
        if new:
            found = decode(
                [questions[i] for i in new], [texts[i] for i in new], [indexes[i] for i in new], [asked[i] for i in new]
            )
            seen.update((keys[i], out) for i, out in zip(new, found))
        return [copy.deepcopy(seen[key]) for key in keys]

    reader.decode_passages = decode_once


def read(args) -> int:
    from dataclasses import replace

    from odqa.config import OdqaConfig
    from odqa.reader.registry import build_reader

    path = Path(args.passages)
    if not path.is_file():
        print(f"error: {path} not found; write it with `python bench/read_saved.py save ...`", file=sys.stderr)
        return 2
    sources, hits, k, subjects = load_saved(path)
    if args.answer_passage_only:
        sources, hits, k = answer_passage_only(sources, hits)
    overrides = parse_settings(args.set)
    config = OdqaConfig.load(None, {f"reader.{key}": value for key, value in overrides.items()})
    top_n = config.reader.top_n
    sweep_key, sweep_values = parse_sweep(args.sweep)
    rows = []
    for name in args.readers:
        # as ask reads: the config's reader settings and inference
        reader = build_reader(
            replace(config.reader, model=name), device=args.device or None, inference=config.inference()
        )
        label = name + "".join(f" {key}={value}" for key, value in overrides.items())
        if sweep_key is None:
            rows += open_dev_rows(SavedPassages(reader, hits, top_n, subjects), "saved", label, k, sources)
            continue
        remember_decoded(reader)
        base = reader.settings
        for value in sweep_values:
            reader.settings = replace(base, **{sweep_key: value})
            rows += open_dev_rows(
                SavedPassages(reader, hits, top_n, subjects), "saved", f"{label} {sweep_key}={value}", k, sources
            )
    table = results_table(rows)
    text = (
        f"# Readers on saved open-dev passages\n\nWritten by `python bench/read_saved.py "
        f"{' '.join(sys.argv[1:])}` ({time.strftime('%Y-%m-%d')}; passages: {path.name}, sample seed {SEED}).\n\n"
        f"{table}\n"
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    print(text)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("save", help="retrieve for the open-dev questions and save the passages")
    p.add_argument("--wiki-index", required=True)
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--questions", type=int, default=300, help="per source (0: all)")
    p.add_argument("--retriever", default="bm25")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--linker-kb", default="", help="link each question over this KB first and save its entities")
    p.add_argument("--out", required=True)
    p = sub.add_parser("read", help="read saved passages with several readers")
    p.add_argument("--passages", required=True)
    p.add_argument("--readers", nargs="+", default=["reader"])
    p.add_argument("--device", default="", help="cpu or cuda (default: the reader's choice)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a reader setting for every reader, e.g. temperature=2 or early_stop_passages=0 (repeatable)",
    )
    p.add_argument("--sweep", default="", metavar="KEY=V1,V2,...", help="values of one question-time setting")
    p.add_argument(
        "--answer-passage-only",
        action="store_true",
        help="read each question's first passage that holds an answer, alone (reading apart from passage choice)",
    )
    p.add_argument("--out", default="")
    args = parser.parse_args(argv)
    return save(args) if args.command == "save" else read(args)


if __name__ == "__main__":
    sys.exit(main())
