"""Rankings in the formats other tools read, and back.

* TREC run files, `qid Q0 docid rank score tag` a line: trec_eval, pytrec_eval, ir-measures and Pyserini read
  them. Ids holding whitespace (SQuAD paragraph ids are "Title#0") are percent-escaped (`%20`), since the
  format splits on whitespace; `from_trec_id` undoes it. trec_eval orders a query's documents by score (ties
  by document id), not by the rank column, so scores are written at full precision, and finite: an infinite
  or NaN score (which trec_eval cannot order) is written as the nearest finite one (`finite_scores`).
* DPR's retrieval JSON: a list of {question, answers, ctxs: [{id, title, text, score, has_answer}]}, what DPR's
  dense_retriever writes and its and Pyserini's answer-based evaluation read (top-k accuracy: a question counts
  at k when one of its first k ctxs has an answer). odqa adds each question's `id`; files without one are
  numbered by position, as DPR's qas files are.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO
from urllib.parse import quote, unquote

from odqa.core import strict_json
from odqa.core.errors import OdqaError

_ESCAPED = re.compile(r"[%\s]")


def trec_id(text: str) -> str:
    return _ESCAPED.sub(lambda m: quote(m.group()), text)


def from_trec_id(text: str) -> str:
    return unquote(text) if "%" in text else text


EMPTY_ID = (
    "a TREC run line is `qid Q0 docid rank score tag`, six fields split on white space, so an empty id would leave "
    "five, which trec_eval cannot read"
)


def check_query_ids(ids: Iterable[str], source: str) -> None:
    """Refuse, before any work, a query id a TREC run cannot hold: an empty one (`--query-id ""`, `"id": ""`)."""
    for position, qid in enumerate(ids, 1):
        if not str(qid):
            raise OdqaError(f"{source}: question {position} has an empty id; {EMPTY_ID}: give each question an id")


class TrecRunWriter:
    def __init__(self, f: IO[str], tag: str):
        self.f, self.tag = f, trec_id(tag) or "odqa"

    def write(self, query_id: str, ranking: Iterable[tuple[str, float]]) -> None:
        qid = trec_id(query_id)
        if not qid:
            raise OdqaError(f"a question has an empty id; {EMPTY_ID}: give each question an id")
        lines = []
        for rank, (doc, score) in enumerate(finite_scores(ranking), 1):
            if not trec_id(doc):
                raise OdqaError(f"question {query_id} ranks a document with an empty id; {EMPTY_ID}")
            lines.append(f"{qid} Q0 {trec_id(doc)} {rank} {score!r} {self.tag}\n")
        self.f.writelines(lines)


def finite_scores(ranking: Iterable[tuple[str, float]]) -> Iterable[tuple[str, float]]:
    """A ranking's scores as finite floats in the same order: trec_eval orders by score and reads inf/nan as no
    order at all. +-inf become the largest finite magnitudes; NaN takes the score written above it (the largest
    at the top), so the document keeps its rank (a tie, broken by document id as trec_eval breaks ties)."""
    above = sys.float_info.max
    for doc, score in ranking:
        score = float(score)
        if math.isnan(score):
            score = above
        elif math.isinf(score):
            score = math.copysign(sys.float_info.max, score)
        above = score
        yield doc, score


class DprJsonWriter:
    """One JSON list written an entry at a time, so a long evaluation never holds all of it."""

    def __init__(self, f: IO[str]):
        self.f, self.count = f, 0
        f.write("[")

    def write(self, question_id: str, question: str, answers: Sequence[str], ctxs: list[dict]) -> None:
        entry = {"id": question_id, "question": question, "answers": list(answers), "ctxs": ctxs}
        self.f.write(("," if self.count else "") + "\n" + strict_json.dumps(entry, ensure_ascii=False))
        self.count += 1

    def close(self) -> None:
        self.f.write("\n]\n")


def dpr_ctx(passage_id: str, title: str, text: str, score: float, has_answer: bool) -> dict:
    return {"id": passage_id, "title": title, "text": text, "score": float(score), "has_answer": bool(has_answer)}


def detect_run_format(path: Path) -> str:
    """ "odqa" (eval-retrieval --run-out JSONL), "dpr-json" or "trec", from the file's first bytes."""
    with path.open(encoding="utf-8", errors="replace") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        return "dpr-json"
    if head.startswith("{"):
        return "odqa"
    first = head.split("\n", 1)[0].split()
    if len(first) == 6:
        return "trec"
    return "unknown"


def read_trec_run(path: Path) -> list[dict]:
    """Run rows (see odqa.eval.runs) of a TREC run: each query's documents by score, as trec_eval orders them;
    whether a document holds an answer is not in the format (None)."""
    import ir_measures

    rankings: dict[str, list[tuple[str, float]]] = {}
    for doc in ir_measures.read_trec_run(str(path)):
        rankings.setdefault(doc.query_id, []).append((doc.doc_id, float(doc.score)))
    rows = []
    for qid, ranking in rankings.items():
        ranking.sort(key=lambda d: (-d[1], _reversed_key(d[0])))  # trec_eval: score, then document id descending
        rows.append(
            {
                "id": from_trec_id(qid),
                "question": "",
                "gold": False,
                "hits": [(from_trec_id(doc), score, None, None) for doc, score in ranking],
            }
        )
    return rows


def _reversed_key(text: str):
    return [-ord(c) for c in text] + [1]  # sorts descending, a prefix after the longer id as trec_eval's strcmp


def read_dpr_json(path: Path) -> list[dict]:
    """Run rows of a DPR retrieval JSON file (ctxs in the file's order; has_answer as the file says)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("not a JSON list of questions")
    rows = []
    for i, entry in enumerate(data):
        hits = [
            (str(c["id"]), float(c.get("score", 0.0)), bool(c["has_answer"]) if "has_answer" in c else None, False)
            for c in entry["ctxs"]
        ]
        rows.append(
            {
                "id": str(entry.get("id", i)),
                "question": entry["question"],
                "gold": False,
                "hits": hits,
                "answers": entry.get("answers", []),
            }
        )
    return rows
