"""Top-k retrieval accuracy as DPR reports it, plus MRR and (where the data names it) gold-passage recall."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tqdm.auto import tqdm

from odqa.core import strict_json
from odqa.core.answers import has_answer
from odqa.core.atomic import atomic_file
from odqa.core.terminal import display_width, pad
from odqa.core.types import SearchHit
from odqa.corpus.questions import QAItem
from odqa.eval.run_formats import DprJsonWriter, TrecRunWriter, dpr_ctx

DEFAULT_KS = (1, 5, 10, 20, 50, 100)


@dataclass
class QuestionResult:
    item: QAItem
    hits: list[SearchHit]
    first_hit_rank: int | None  # 1-based rank of the first passage holding an answer
    first_gold_rank: int | None  # 1-based rank of the first passage cut from the gold paragraph

    def to_dict(self) -> dict:
        return {
            "id": self.item.id,
            "question": self.item.question,
            "answers": self.item.answers,
            "first_hit_rank": self.first_hit_rank,
            "first_gold_rank": self.first_gold_rank,
            "top": [
                {"passage_id": h.passage_id, "title": h.passage.title if h.passage else "", "score": round(h.score, 4)}
                for h in self.hits[:10]
            ],
        }


def holds_answer(item: QAItem, text: str) -> bool:
    return has_answer(text, item.answers, regex_answers=item.regex)


def in_gold_paragraph(item: QAItem, text: str) -> bool:
    return bool(item.context and text and text in item.context)


def judge(item: QAItem, hits: Sequence[SearchHit]) -> QuestionResult:
    first_hit = first_gold = None
    for rank, hit in enumerate(hits, 1):
        text = hit.passage.text if hit.passage else ""
        if first_hit is None and holds_answer(item, text):
            first_hit = rank
        if first_gold is None and in_gold_paragraph(item, text):
            first_gold = rank
        if first_hit is not None and (first_gold is not None or not item.context):
            break
    return QuestionResult(item, list(hits), first_hit, first_gold)


def summarize(results: Sequence[QuestionResult], ks: Sequence[int]) -> dict:
    n = len(results)
    metrics: dict = {}
    for k in ks:
        metrics[f"recall@{k}"] = (
            round(100.0 * sum(r.first_hit_rank is not None and r.first_hit_rank <= k for r in results) / n, 2)
            if n
            else 0.0
        )
    # in percent, as the recalls beside it
    metrics["mrr"] = (
        round(100.0 * sum(1.0 / r.first_hit_rank for r in results if r.first_hit_rank) / n, 2) if n else 0.0
    )
    with_gold = [r for r in results if r.item.context]
    if with_gold:
        metrics["gold_questions"] = len(with_gold)
        for k in ks:
            metrics[f"gold_recall@{k}"] = round(
                100.0
                * sum(r.first_gold_rank is not None and r.first_gold_rank <= k for r in with_gold)
                / len(with_gold),
                2,
            )
    metrics["questions"] = n
    return metrics


def _open_output(files: contextlib.ExitStack, target: str | Path):
    tmp = files.enter_context(atomic_file(target))  # an interrupted run leaves no truncated file
    return files.enter_context(tmp.open("w", encoding="utf-8"))


def evaluate_retrieval(
    retriever,
    items: Sequence[QAItem],
    ks: Sequence[int] = DEFAULT_KS,
    batch_size: int = 32,
    per_question: str | Path | None = None,
    progress: bool = True,
    run_out: str | Path | None = None,
    trec_run: str | Path | None = None,
    dpr_json: str | Path | None = None,
    run_tag: str = "odqa",
) -> dict:
    """`run_out`: also save every question's ranking, judged (`run_row`), to merge with other shards';
    `trec_run` / `dpr_json`: the same rankings as a TREC run file (tagged `run_tag`) / DPR retrieval JSON."""
    depth = max(ks)
    results: list[QuestionResult] = []  # judged, without their hits: memory stays flat in the question count
    start = time.perf_counter()
    bar = tqdm(
        total=len(items), desc=f"eval {getattr(retriever, 'name', '')}", unit=" q", disable=not progress, mininterval=2
    )
    # the bar is closed on the way out, an error too, so the error is the last line printed
    with bar, contextlib.ExitStack() as files:
        writers: list[Callable[[QuestionResult], object]] = []  # each question's lines: written once it is judged
        for target, row in ((per_question, QuestionResult.to_dict), (run_out, run_row)):
            if target:
                f = _open_output(files, target)

                def write_row(result: QuestionResult, f=f, row=row) -> None:
                    f.write(strict_json.dumps(row(result), ensure_ascii=False) + "\n")

                writers.append(write_row)
        if trec_run:
            trec = TrecRunWriter(_open_output(files, trec_run), run_tag)
            writers.append(lambda result: trec.write(result.item.id, [(h.passage_id, h.score) for h in result.hits]))
        if dpr_json:
            dpr = DprJsonWriter(_open_output(files, dpr_json))
            writers.append(
                lambda result: dpr.write(result.item.id, result.item.question, result.item.answers, dpr_ctxs(result))
            )
        for i in range(0, len(items), batch_size):
            batch = items[i : i + batch_size]
            for item, hits in zip(batch, retriever.search([q.question for q in batch], depth)):
                result = judge(item, hits)
                for write in writers:
                    write(result)
                results.append(QuestionResult(item, [], result.first_hit_rank, result.first_gold_rank))
            bar.update(len(batch))
        if dpr_json:
            dpr.close()
    seconds = time.perf_counter() - start
    metrics = summarize(results, ks)
    metrics["seconds"] = round(seconds, 2)
    metrics["questions_per_second"] = round(len(items) / seconds, 2) if seconds > 0 else 0.0
    return metrics


def dpr_ctxs(r: QuestionResult) -> list[dict]:
    """A question's hits as DPR's ctxs: id, title, text, score and whether it holds an answer."""
    return [
        dpr_ctx(
            h.passage_id,
            h.passage.title if h.passage else "",
            h.passage.text if h.passage else "",
            h.score,
            holds_answer(r.item, h.passage.text if h.passage else ""),
        )
        for h in r.hits
    ]


class RunHit(NamedTuple):
    """One ranked passage of a run, judged where the passage text was (None: the run does not say, as a TREC
    run does not)."""

    passage_id: str
    score: float
    holds_answer: bool | None
    in_gold_paragraph: bool | None

    def to_dict(self) -> dict:
        return {
            "passage_id": self.passage_id,
            "score": self.score,
            "holds_answer": self.holds_answer,
            "in_gold_paragraph": self.in_gold_paragraph,
        }


def run_row(r: QuestionResult) -> dict:
    """One question's line of a run file (`odqa.eval.runs` reads them back): {"id", "question", "gold",
    "hits": [{"passage_id", "score", "holds_answer", "in_gold_paragraph"}, ...]}."""
    hits = []
    for hit in r.hits:
        text = hit.passage.text if hit.passage else ""
        hits.append(
            RunHit(
                hit.passage_id, round(float(hit.score), 6), holds_answer(r.item, text), in_gold_paragraph(r.item, text)
            ).to_dict()
        )
    return {"id": r.item.id, "question": r.item.question, "gold": bool(r.item.context), "hits": hits}


# printed under the gold-paragraph table: what it counts, beside the answer-match recall above it
GOLD_RECALL_NOTE = (
    "gold_recall@k: of the questions whose data names the paragraph their answer was written from (SQuAD), the "
    "share with a passage cut from that paragraph in the top k; recall@k above counts any passage holding an "
    "answer string"
)


def format_table(metrics: dict, ks: Sequence[int]) -> str:
    """The metrics under their JSON names, every one in percent; where the questions name gold paragraphs, their
    gold_recall@k in a table of its own, explained beneath."""
    header = [*(f"recall@{k} %" for k in ks), "mrr %", "questions"]
    rows = [[*(f"{metrics[f'recall@{k}']:.2f}" for k in ks), f"{metrics['mrr']:.2f}", str(metrics["questions"])]]
    table = aligned_table(header, rows)
    if f"gold_recall@{ks[0]}" not in metrics:
        return table
    gold = aligned_table(
        [*(f"gold_recall@{k} %" for k in ks), "questions with a gold paragraph"],
        [[*(f"{metrics[f'gold_recall@{k}']:.2f}" for k in ks), str(metrics.get("gold_questions", ""))]],
    )
    return f"{table}\n\n{gold}\n{GOLD_RECALL_NOTE}"


def aligned_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table that also reads as printed: every cell padded to its column's width in terminal columns
    (a Korean or Chinese cell's wide characters count two), right-aligned (the cells are numbers), so each value
    stands under its header."""
    widths = [max(map(display_width, column)) for column in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(pad(cell, width, right=True) for cell, width in zip(cells, widths)) + " |"

    return "\n".join(
        [line(header), "|" + "|".join("-" * (width + 1) + ":" for width in widths) + "|", *map(line, rows)]
    )
