"""Question sets in the public formats: DPR qas TSV, NQ-open JSONL, SQuAD JSON, WebQuestions JSON,
CuratedTREC TSV (regex answers), DPR training JSON, TriviaQA JSON, BEIR queries.jsonl, Pyserini topics
(`qid<TAB>query`, .tsv or .txt, no answers), and plain text (one question a line, no answers).
`load_questions(path)` detects the format; `load_qrels` reads relevance judgments (BEIR's qrels TSV or TREC
qrels)."""

from __future__ import annotations

import ast
import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from odqa.core.answers import answer_regex_error
from odqa.core.errors import DataFormatError
from odqa.core.inputs import FILE, check_input, input_label, read_input

# the keys a JSON Lines question file names its question ids by (else ids count lines from 0)
QUESTION_ID_KEYS = ("id", "qid", "_id", "query_id", "question_id", "example_id")


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
    line: int = 0  # where the file has lines (JSONL, TSV, text): the question's, for messages


def load_questions(path: str | Path, limit: int | None = None, include_impossible: bool = False) -> list[QAItem]:
    """The questions of a file in any format above; `-` (or /dev/stdin) reads them from standard input and a
    named pipe as it streams (odqa.core.inputs: a folder or a device is refused for what it is)."""
    if check_input(path, "question file", streams=True) == FILE:
        path = Path(path)
    else:
        path = cast(Path, _Streamed(path, read_input(path, "question file")))  # read as a Path is (_Streamed)
    items: list[QAItem] = []
    try:
        for item in _read(path, include_impossible):
            if not isinstance(item.question, str) or not item.question.strip():
                where = f"{path}:{item.line}" if item.line else str(path)
                raise DataFormatError(
                    f"{where}: question {item.id!r} is empty or not a string ({item.question!r:.40}); fix or remove it"
                )
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            f"{path}: not UTF-8 text in the block after question {len(items)} ({exc.reason}); "
            "re-encode the file as UTF-8"
        ) from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise DataFormatError(
            f"{path}: question {len(items) + 1} lacks a field its format needs "
            f"({exc.__class__.__name__}: {exc}); fix or remove it"
        ) from exc
    except RecursionError:
        raise DataFormatError(
            f"{path}: JSON nested too deeply to read (after question {len(items)}); is it a question file?"
        ) from None
    if not items:
        raise DataFormatError(f"{path}: no questions found; is it a question file in a supported format?")
    return items


class _Streamed:
    """Questions piped in (standard input, a named pipe), read once: what the readers ask of a path (`name`,
    `open`, `read_text`, str() for messages) over the bytes read. Where its name shows no format (`-`, a pipe's
    name), `name` carries the one its content shows."""

    def __init__(self, path: str | Path, data: bytes):
        self.data, self.label = data, input_label(path)
        name = Path(str(path)).name.lower()
        known = name.endswith((".txt", ".jsonl", ".tsv", ".csv", ".json"))
        self.name = name if known else "stdin" + _content_suffix(data)

    def open(self, mode: str = "r", encoding: str | None = None, newline: str | None = None):
        raw = io.BytesIO(self.data)
        return raw if "b" in mode else io.TextIOWrapper(raw, encoding=encoding or "utf-8", newline=newline)

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.data.decode(encoding)

    def __str__(self) -> str:
        return self.label


def _content_suffix(data: bytes) -> str:
    """The format piped questions show: a JSON document (SQuAD, TriviaQA, a list), JSON Lines, TSV, else text."""
    text = data[: 1 << 20].decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    first = text.split("\n", 1)[0]
    if text.startswith("["):
        return ".json"
    if text.startswith("{"):
        try:
            row = json.loads(first)
        except (ValueError, RecursionError):
            return ".json"  # an object over several lines
        return ".json" if isinstance(row, dict) and ("data" in row or "Data" in row) else ".jsonl"
    return ".tsv" if "\t" in first else ".txt"


def _read(path: Path, include_impossible: bool) -> Iterator[QAItem]:
    name = path.name.lower()
    if name.endswith(".txt"):
        return _text_lines(path)
    if name.endswith(".jsonl"):
        return _jsonl(path)
    if name.endswith(".tsv") or name.endswith(".csv"):
        return _tsv(path)
    if name.endswith(".json"):
        return _json(path, include_impossible)
    raise DataFormatError(
        f"{path}: unknown question format (expected .tsv DPR qas, Pyserini topics or CuratedTREC, .jsonl NQ-open or "
        "BEIR queries, .json SQuAD/WebQuestions/DPR training/TriviaQA, .txt one question a line or Pyserini topics)"
    )


def _text_lines(path: Path) -> Iterator[QAItem]:
    """One question a line, no answers (`odqa predict`); ids count lines from 0 as DPR's qas files do. A file
    whose first line holds a tab is Pyserini's topics (`qid<TAB>query`, their `topics.*.txt`): ids are its own."""
    with path.open(encoding="utf-8-sig") as f:  # -sig: a byte-order mark at the start is no question
        topics = None
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if topics is None:
                topics = "\t" in line.strip()
            if topics:
                yield _topic(line.rstrip("\r\n").split("\t"), path, lineno)
            else:
                yield QAItem(str(lineno - 1), line.strip(), [], line=lineno)


def _topic(cols: list[str], path: Path, lineno: int) -> QAItem:
    """A line of Pyserini's topics: query id, tab, query; no answers (judged by qrels: eval-retrieval --qrels)."""
    if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
        raise DataFormatError(
            f"{path}:{lineno}: a topics line is qid<TAB>query (as the file's first line), got {len(cols)} "
            f"tab-separated column(s) ({chr(9).join(cols)[:60]!r}); fix or remove it"
        )
    return QAItem(cols[0].strip(), cols[1].strip(), [], line=lineno)


def _jsonl(path: Path) -> Iterator[QAItem]:
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(
                    f"{path}:{lineno}: not UTF-8 text ({exc.reason}); re-encode the file as UTF-8"
                ) from exc
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if "question" not in row and "_id" in row and "text" in row:  # BEIR queries.jsonl
                    yield QAItem(str(row["_id"]), row["text"], [], line=lineno)
                    continue
                question = row["question"]
                answers = row.get("answer", row.get("answers"))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataFormatError(
                    f"{path}:{lineno}: expected a JSON object with 'question' (and 'answer'), or BEIR's '_id' and "
                    f"'text' ({exc.__class__.__name__}: {exc})"
                ) from exc
            except RecursionError:
                raise DataFormatError(
                    f"{path}:{lineno}: JSON nested too deeply to read; fix or remove this line"
                ) from None
            regex = bool(row.get("regex", False))
            answers = [] if answers is None else _answer_list(answers, path, lineno)
            yield QAItem(
                str(next((row[key] for key in QUESTION_ID_KEYS if row.get(key) not in (None, "")), lineno - 1)),
                question,
                _regex_answers(answers, path, lineno) if regex else answers,
                regex=regex,
                line=lineno,
            )


def _tsv(path: Path) -> Iterator[QAItem]:
    """DPR qas (`question<TAB>python list of answers`), Pyserini's topics (`qid<TAB>query`, no answers: the
    second column of the file's first row is no list) or CuratedTREC (4 columns)."""
    # csv handles the quoted fields some published qas files carry (TriviaQA dev), as DPR reads them
    with path.open(encoding="utf-8-sig", newline="") as f:
        topics = None
        for lineno, cols in enumerate(csv.reader(f, delimiter="\t"), 1):
            if not any(c.strip() for c in cols):
                continue
            if len(cols) == 2 and topics is None:
                topics = not cols[1].lstrip().startswith("[")
            if topics:
                yield _topic(cols, path, lineno)
            elif len(cols) == 2:  # DPR qas: question <TAB> python list of answers
                try:
                    answers = ast.literal_eval(cols[1])
                except (ValueError, SyntaxError) as exc:
                    raise DataFormatError(
                        f"{path}:{lineno}: second column must be a Python list of answers (DPR qas, as the file's "
                        f"first row), got {cols[1][:60]!r}"
                    ) from exc
                yield QAItem(str(lineno - 1), cols[0], _answer_list(answers, path, lineno), line=lineno)
            elif len(cols) == 4:  # CuratedTREC: id, type, question, answer regex
                yield QAItem(cols[0], cols[2], _regex_answers([cols[3]], path, lineno), regex=True, line=lineno)
            else:
                raise DataFormatError(
                    f"{path}:{lineno}: expected 2 tab-separated columns (DPR qas, or Pyserini topics qid<TAB>query) "
                    f"or 4 (CuratedTREC), got {len(cols)}"
                )


def _json(path: Path, include_impossible: bool) -> Iterator[QAItem]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc})") from exc
    if isinstance(data, dict) and "data" in data:
        yield from _squad(data["data"], include_impossible, path)
        return
    if isinstance(data, dict) and isinstance(data.get("Data"), list):
        yield from _triviaqa(data["Data"], path)
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
    raise DataFormatError(
        f"{path}: JSON is neither SQuAD ('data'), TriviaQA ('Data'), "
        "WebQuestions ('qText') nor DPR ('question','answers')"
    )


def _triviaqa(rows: list, path: Path) -> Iterator[QAItem]:
    """TriviaQA's JSON (unfiltered or web/wikipedia): answers are the answer's Aliases, as DPR's TriviaQA qas
    files list them (else NormalizedAliases, else Value); the test set has no answers."""
    for i, row in enumerate(rows):
        answer = row.get("Answer") or {}
        answers = (
            answer.get("Aliases")
            or answer.get("NormalizedAliases")
            or ([answer["Value"]] if answer.get("Value") else [])
        )
        yield QAItem(str(row.get("QuestionId", i)), row["Question"], _answer_list(answers, path, i))


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Relevance judgments {query id: {document id: grade}}: BEIR's qrels TSV (`query-id corpus-id score`,
    with its header) or TREC qrels (`qid iteration docid grade`, read by ir-measures)."""
    check_input(path, "qrels file", "check the path passed to --qrels")
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        first = f.readline()
    qrels: dict[str, dict[str, int]] = {}
    if len(first.split()) == 4:
        import ir_measures

        try:
            for qrel in ir_measures.read_trec_qrels(str(path)):
                qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
        except ValueError as exc:
            raise DataFormatError(f"{path}: not TREC qrels (qid 0 docid grade) ({exc})") from exc
    else:
        with path.open(encoding="utf-8", newline="") as f:
            for lineno, cols in enumerate(csv.reader(f, delimiter="\t"), 1):
                if not cols or (lineno == 1 and cols[0] == "query-id"):
                    continue
                try:
                    query_id, doc_id, grade = cols
                    qrels.setdefault(query_id, {})[doc_id] = int(grade)
                except ValueError:
                    raise DataFormatError(
                        f"{path}:{lineno}: a qrels line is query-id<TAB>corpus-id<TAB>score "
                        "(BEIR) or qid 0 docid grade (TREC); fix or remove it"
                    ) from None
    if not qrels:
        raise DataFormatError(f"{path}: no relevance judgments found")
    return qrels


def with_answers(items: list[QAItem], path: str | Path) -> list[QAItem]:
    """The items that have a reference answer; the others could only ever count as misses, so they are left
    out with a notice (and an error when none is left)."""
    kept = [item for item in items if any(a.strip() for a in item.answers)]
    if len(kept) < len(items):
        import sys

        print(
            f"odqa: skipped {len(items) - len(kept)} of {len(items)} questions of {path} that have no reference answer",
            file=sys.stderr,
        )
    if not kept:
        raise DataFormatError(
            f"{path}: no question has a reference answer, so none can be scored by answers "
            "(for a set judged by qrels, such as BEIR's, pass --qrels)"
        )
    return kept


# Sets this project reports as tests (or that hold the same questions): never training data.
TEST_SETS = {
    "nq-test.qa.tsv": "NQ test",
    "nq-open.dev.jsonl": "NQ-open dev (the same questions as DPR's NQ test)",
    "dev-v1.1.json": "SQuAD v1.1 dev",
    "squad-dev.qa.jsonl": "SQuAD v1.1 dev (open-domain form)",
    "devtest.json": "WebQuestions test",
}


def check_not_test_set(path: str | Path) -> None:
    """Refuse a file that is (or holds the questions of) a set this project reports as a test, by its name."""
    name = Path(path).name.lower()
    if name in TEST_SETS:
        raise DataFormatError(
            f"{path} is {TEST_SETS[name]}, a set this project reports as a test; never train on "
            "it. Use the dev/train splits (NQ dev, TriviaQA dev, WebQuestions train/val, CuratedTREC "
            "train, SQuAD v1.1 train, SQuAD v2.0 dev)."
        )


def squad_titles(path: str | Path) -> set[str]:
    """Article titles of a SQuAD-format file."""
    check_input(path, "SQuAD file")
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if "data" not in data:
        raise DataFormatError(f"{path}: not SQuAD JSON (no 'data' list of articles)")
    return {article.get("title", "") for article in data["data"]}


def article_key(title: str) -> str:
    """An article title as the corpus readers write it, for matching across sources: SQuAD's
    "Jacksonville,_Florida" and the Wikipedia subset's "Jacksonville, Florida" give one key."""
    return " ".join(title.replace("_", " ").split()).lower()


def squad_article_keys(paths) -> set[str]:
    """`article_key` of every article title of the SQuAD-format files `paths`."""
    return {article_key(title) for path in paths for title in squad_titles(path)}


def drop_articles(items: list[QAItem], seen: str | Path | None) -> list[QAItem]:
    """The items whose article is not in the SQuAD file `seen` (None: all items).

    SQuAD v2.0 dev reuses 35 of the 48 articles of SQuAD v1.1 dev with the very same answerable questions
    (5,922 of them), so a model trained on v2.0 dev has seen more than half of v1.1 dev; only the other 13
    articles (4,557 questions) measure it on unseen text."""
    if seen is None:
        return items
    titles = squad_titles(seen)
    return [item for item in items if item.title not in titles]


def keep_articles(items: list[QAItem], kept: str | Path | None) -> list[QAItem]:
    """The items whose article is in the SQuAD file `kept` (None: all items); `drop_articles`' complement, e.g.
    squad-open's articles kept for choosing settings (those SQuAD v2.0 dev shares)."""
    if kept is None:
        return items
    titles = squad_titles(kept)
    return [item for item in items if item.title in titles]


def _squad(articles: list, include_impossible: bool, path: Path | str = "SQuAD file") -> Iterator[QAItem]:
    try:
        yield from _squad_items(articles, include_impossible)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataFormatError(
            f"{path}: not SQuAD JSON: articles need 'paragraphs' with 'context' and 'qas' of 'question' "
            f"and 'answers' ({exc.__class__.__name__}: {exc})"
        ) from exc


def _squad_items(articles: list, include_impossible: bool) -> Iterator[QAItem]:
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
                    str(qa.get("id", "")),
                    qa["question"],
                    answers,
                    context=context,
                    title=title,
                    answer_starts=starts,
                    impossible=impossible,
                )


def _regex_answers(patterns: list[str], path: Path, lineno: int) -> list[str]:
    for pattern in patterns:
        error = answer_regex_error(pattern)
        if error:
            raise DataFormatError(
                f"{path}:{lineno}: the answer {pattern!r} is not a valid regular expression "
                f"({error}); fix or remove the line"
            )
    return patterns


def _answer_list(answers, path: Path, lineno: int) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    if isinstance(answers, list) and all(isinstance(a, str) for a in answers):
        return answers
    raise DataFormatError(f"{path}:{lineno}: answers must be a string or a list of strings, got {answers!r:.80}")
