"""Question sets in the public formats: DPR qas TSV, NQ-open JSONL, SQuAD JSON, WebQuestions JSON,
CuratedTREC TSV (regex answers) and DPR training JSON. `load_questions(path)` detects the format."""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from odqa.core.errors import DataFormatError


@dataclass
class QAItem:
    id: str
    question: str
    answers: list[str]
    regex: bool = False  # answers are regular expressions (CuratedTREC)
    context: str = ""  # gold paragraph where the data names one (SQuAD)
    title: str = ""
    answer_starts: list[int] = field(default_factory=list)
    impossible: bool = False


def load_questions(path: str | Path, limit: int | None = None, include_impossible: bool = False) -> list[QAItem]:
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"question file not found: {path} (check the path)")
    items: list[QAItem] = []
    for item in _read(path, include_impossible):
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise DataFormatError(f"{path}: no questions found; is it a question file in a supported format?")
    return items


def _read(path: Path, include_impossible: bool) -> Iterator[QAItem]:
    name = path.name.lower()
    if name.endswith(".jsonl"):
        return _jsonl(path)
    if name.endswith(".tsv") or name.endswith(".csv"):
        return _tsv(path)
    if name.endswith(".json"):
        return _json(path, include_impossible)
    raise DataFormatError(
        f"{path}: unknown question format (expected .tsv DPR qas or CuratedTREC, .jsonl NQ-open, "
        ".json SQuAD/WebQuestions/DPR training)"
    )


def _jsonl(path: Path) -> Iterator[QAItem]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                question = row["question"]
                answers = row.get("answer", row.get("answers"))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataFormatError(
                    f"{path}:{lineno}: expected a JSON object with 'question' and 'answer' ({exc})"
                ) from exc
            yield QAItem(str(row.get("id", lineno - 1)), question, _answer_list(answers, path, lineno),
                         regex=bool(row.get("regex", False)))


def _tsv(path: Path) -> Iterator[QAItem]:
    # csv handles the quoted fields some published qas files carry (TriviaQA dev), as DPR reads them
    with path.open(encoding="utf-8", newline="") as f:
        for lineno, cols in enumerate(csv.reader(f, delimiter="\t"), 1):
            if not any(c.strip() for c in cols):
                continue
            if len(cols) == 2:  # DPR qas: question <TAB> python list of answers
                try:
                    answers = ast.literal_eval(cols[1])
                except (ValueError, SyntaxError) as exc:
                    raise DataFormatError(
                        f"{path}:{lineno}: second column must be a Python list of answers, got {cols[1][:60]!r}"
                    ) from exc
                yield QAItem(str(lineno - 1), cols[0], _answer_list(answers, path, lineno))
            elif len(cols) == 4:  # CuratedTREC: id, type, question, answer regex
                yield QAItem(cols[0], cols[2], [cols[3]], regex=True)
            else:
                raise DataFormatError(
                    f"{path}:{lineno}: expected 2 tab-separated columns (DPR qas) or 4 (CuratedTREC), got {len(cols)}"
                )


def _json(path: Path, include_impossible: bool) -> Iterator[QAItem]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc})") from exc
    if isinstance(data, dict) and "data" in data:
        yield from _squad(data["data"], include_impossible)
        return
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if "qText" in first:
            for row in data:
                yield QAItem(str(row.get("qId", "")), row["qText"], _answer_list(row.get("answers"), path, 0))
            return
        if "question" in first and "answers" in first:  # DPR training / retriever results
            for i, row in enumerate(data):
                yield QAItem(str(row.get("id", i)), row["question"], _answer_list(row["answers"], path, i))
            return
    raise DataFormatError(f"{path}: JSON is neither SQuAD ('data'), WebQuestions ('qText') nor DPR ('question','answers')")


def squad_titles(path: str | Path) -> set[str]:
    """Article titles of a SQuAD-format file."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"SQuAD file not found: {path} (check the path)")
    data = json.loads(path.read_text(encoding="utf-8"))
    if "data" not in data:
        raise DataFormatError(f"{path}: not SQuAD JSON (no 'data' list of articles)")
    return {article.get("title", "") for article in data["data"]}


def drop_articles(items: list[QAItem], seen: str | Path | None) -> list[QAItem]:
    """The items whose article is not in the SQuAD file `seen` (None: all items).

    SQuAD v2.0 dev reuses 35 of the 48 articles of SQuAD v1.1 dev with the very same answerable questions
    (5,922 of them), so a model trained on v2.0 dev has seen more than half of v1.1 dev; only the other 13
    articles (4,557 questions) measure it on unseen text."""
    if seen is None:
        return items
    titles = squad_titles(seen)
    return [item for item in items if item.title not in titles]


def _squad(articles: list, include_impossible: bool) -> Iterator[QAItem]:
    for article in articles:
        title = article.get("title", "")
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                impossible = bool(qa.get("is_impossible", False))
                if impossible and not include_impossible:
                    continue
                answers = [a["text"] for a in qa.get("answers", [])]
                starts = [int(a.get("answer_start", -1)) for a in qa.get("answers", [])]
                yield QAItem(
                    str(qa.get("id", "")), qa["question"], answers, context=context, title=title,
                    answer_starts=starts, impossible=impossible,
                )


def _answer_list(answers, path: Path, lineno: int) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    if isinstance(answers, list) and all(isinstance(a, str) for a in answers):
        return answers
    raise DataFormatError(f"{path}:{lineno}: answers must be a string or a list of strings, got {answers!r:.80}")
