"""Distant supervision for the reader: retrieved passages that contain a known answer become span examples.

For each question with answers, `search(questions, k)` retrieves passages (in practice BM25 over the
Wikipedia index). A passage passes DPR's `has_answer` check (or, for CuratedTREC, its regex); the answer is
then located in the passage's own text (first whole-word, case-insensitive occurrence of the longest
matching answer string; for regex answers the first regex match) and written as a SQuAD example. The top
retrieved passages without an answer become unanswerable examples (hard negatives: they teach the reader's
null score to reject passages that merely look relevant). Output is SQuAD v2.0-format JSON, so it feeds the
same trainer. Passages that pass has_answer but where no exact character span can be located (the token
match crosses normalisation) are counted and left out.

With `gold=True` (questions that carry their own paragraph, as SQuAD's do) the question's paragraph is its one
answer-bearing example and the retrieved passages without an answer are its negatives: under shared
normalisation (`train-reader --shared-norm`, which scores a question's windows of one file in one softmax)
the reader learns to prefer the span of the passage about the question's subject over a span of the same type
in another article's passage, the error distant positives teach (they hold the answer string whatever the
passage is about).
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from odqa.core.answers import has_answer, normalize_answer
from odqa.core.atomic import atomic_file
from odqa.core.errors import DataFormatError
from odqa.core.types import Mention, SearchHit
from odqa.corpus.open_dev import drop_open_dev
from odqa.corpus.questions import QAItem, article_key, check_not_test_set, load_questions, squad_article_keys

log = logging.getLogger("odqa.reader.training.distant")

SearchFn = Callable[[Sequence[str], int], list[list[SearchHit]]]
# every batch of questions searched, the results yielded in the batches' order (`build-reader-data --ray` searches
# them on a Ray cluster's workers; in one process each batch in turn)
SearchManyFn = Callable[[list[list[str]], int], Iterator[list[list[SearchHit]]]]


def search_in_turn(search: SearchFn) -> SearchManyFn:
    def search_many(batches: list[list[str]], k: int) -> Iterator[list[list[SearchHit]]]:
        return (search(questions, k) for questions in batches)

    return search_many


def locate_answer(text: str, answers: Sequence[str], regex: bool = False) -> tuple[int, int] | None:
    """Character span [start, end) of an answer in `text`, or None."""
    if regex:
        for pattern in answers:
            try:
                m = re.search(pattern, text, flags=re.IGNORECASE | re.UNICODE)
            except re.error:
                continue
            if m and m.end() > m.start() and m.group().strip():
                return m.start(), m.end()
        return None
    for answer in sorted({a.strip() for a in answers if a.strip()}, key=len, reverse=True):
        m = re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", text, flags=re.IGNORECASE)
        if m:
            return m.start(), m.end()
    return None


def distant_examples(
    items: Sequence[QAItem],
    search: SearchFn | None,
    k: int,
    positives: int = 2,
    negatives: int = 1,
    batch_size: int = 128,
    stats: dict | None = None,
    prefix: str = "",
    excluded_articles: AbstractSet[str] = frozenset(),
    gold: bool = False,
    search_many: SearchManyFn | None = None,
) -> list[dict]:
    """SQuAD paragraphs ({title, context, qas}) built from the retrieved passages of `items`. Passages of
    the articles in `excluded_articles` (`article_key`s: test sets' articles) are skipped, neither
    positives nor negatives. `gold`: each item's own paragraph is its positive (items without one are
    skipped) and retrieved passages serve only as negatives. The questions are searched in batches of
    `batch_size`, by `search_many` where given (e.g. in parallel), else by `search` one batch after another."""
    stats = stats if stats is not None else {}
    for key in ("questions", "with_positive", "positives", "negatives", "unlocated", "excluded_passages"):
        stats.setdefault(key, 0)
    out: list[dict] = []
    parts = [
        part
        for lo in range(0, len(items), batch_size)
        if (
            part := [
                q
                for q in items[lo : lo + batch_size]
                if q.question.strip() and q.answers and (not gold or (q.context and q.answer_starts))
            ]
        )
    ]
    if search_many is None:
        assert search is not None, "distant_examples needs search or search_many"
        search_many = search_in_turn(search)
    for part, results in zip(parts, search_many([[q.question for q in part] for part in parts], k)):
        for q, hits in zip(part, results):
            stats["questions"] += 1
            answers = q.answers
            if not q.regex:  # an answer the question already contains ("where is rome italy?" -> Rome) is noise
                asked = f" {normalize_answer(q.question)} "
                answers = [a for a in answers if normalize_answer(a) and f" {normalize_answer(a)} " not in asked]
                if not answers:
                    stats["questions_without_usable_answer"] = stats.get("questions_without_usable_answer", 0) + 1
                    continue
            pos = neg = 0
            if gold:
                gold_answer = (q.answers[0], q.answer_starts[0])
                out.append(_paragraph(q.title, q.context, f"{prefix}{q.id}", q.question, gold_answer))
                pos = 1
            for rank, hit in enumerate(hits):
                if hit.passage is None or not hit.passage.text.strip():
                    continue
                if excluded_articles and article_key(hit.passage.title) in excluded_articles:
                    stats["excluded_passages"] += 1
                    continue
                text = hit.passage.text
                qid = f"{prefix}{q.id}-{hit.passage.id}"
                if has_answer(text, answers, regex_answers=q.regex):
                    if gold or pos >= positives:
                        continue
                    span = locate_answer(text, answers, regex=q.regex)
                    if span is None:
                        stats["unlocated"] += 1
                        continue
                    a, b = span
                    out.append(_paragraph(hit.passage.title, text, qid, q.question, (text[a:b], a), rank))
                    pos += 1
                elif neg < negatives:
                    out.append(_paragraph(hit.passage.title, text, qid, q.question, None, rank))
                    neg += 1
            stats["with_positive"] += int(pos > 0)
            stats["positives"] += pos
            stats["negatives"] += neg
    return out


def _paragraph(
    title: str, context: str, qid: str, question: str, answer: tuple[str, int] | None, rank: int | None = None
) -> dict:
    """One SQuAD paragraph holding one question: answerable with `answer` (text, start), else unanswerable;
    `rank`: where the retriever ranked the passage (absent for a question's own paragraph)."""
    qa: dict = {
        "id": qid,
        "question": question,
        "is_impossible": answer is None,
        "answers": [] if answer is None else [{"text": answer[0], "answer_start": answer[1]}],
    }
    if rank is not None:
        qa["retrieval_rank"] = rank
    return {"title": title, "context": context, "qas": [qa]}


def write_squad(paragraphs: list[dict], path: str | Path, seed: int = 42) -> None:
    """One SQuAD v2.0 file; paragraphs shuffled (deterministically) so --limit takes a mixed sample."""
    paragraphs = list(paragraphs)
    random.Random(seed).shuffle(paragraphs)
    write_squad_json(
        [{"title": p["title"], "paragraphs": [{"context": p["context"], "qas": p["qas"]}]} for p in paragraphs],
        path,
        version="v2.0",
        source="odqa distant supervision",
    )


def write_squad_json(articles: list[dict], path: str | Path, version: str, source: str) -> None:
    """Write SQuAD-format JSON (`data` = articles) atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps({"version": version, "source": source, "data": articles}, ensure_ascii=False))


def build_distant_data(
    question_files: Sequence[str],
    output: str,
    search: SearchFn | None,
    k: int,
    limit: int = 0,
    positives: int = 2,
    negatives: int = 1,
    seed: int = 42,
    exclude_articles_of: Sequence[str] = (),
    gold: bool = False,
    search_many: SearchManyFn | None = None,
) -> dict:
    """Retrieve with `search` (a retriever's batch search; or `search_many`, all batches at once) for every
    question file and write one SQuAD-format JSON; returns counts per file and in all. `exclude_articles_of`:
    SQuAD files whose articles' passages never enter the data (the test sets'). `gold`: the questions' own
    paragraphs are the positives (`distant_examples`) and `limit` draws that many questions at random (`seed`)
    instead of the first ones, as a SQuAD file lists its questions article by article."""
    for f in question_files:  # before any retrieval: the output is training data
        check_not_test_set(f)
    excluded = squad_article_keys(exclude_articles_of)
    t0 = time.time()
    paragraphs: list[dict] = []
    per_file: dict[str, dict] = {}
    for i, f in enumerate(question_files):
        items, held_out = drop_open_dev(load_questions(f, limit=None if gold else limit or None))
        if gold and limit:
            items = random.Random(seed).sample(items, min(limit, len(items)))
        stats: dict = {"open_dev_skipped": held_out}
        paragraphs += distant_examples(
            items,
            search,
            k,
            positives,
            negatives,
            stats=stats,
            prefix=f"d{i}-",
            excluded_articles=excluded,
            gold=gold,
            search_many=search_many,
        )
        per_file[Path(f).name] = stats
        log.info("%s: %s", f, stats)
    write_squad(paragraphs, output, seed)
    keys = sorted({key for s in per_file.values() for key in s})
    total = {key: sum(s.get(key, 0) for s in per_file.values()) for key in keys}
    total.update(
        {
            "output": str(output),
            "paragraphs": len(paragraphs),
            "seconds": round(time.time() - t0, 1),
            "excluded_articles": len(excluded),
            "per_file": per_file,
        }
    )
    return total


LinkFn = Callable[[list[str]], list[list[Mention]]]


def link_training_questions(
    source: str | Path, output: str | Path, link: LinkFn, linked_with: dict, batch_size: int = 256
) -> dict:
    """The SQuAD-format file `source` written to `output` with each question's linked entities' titles
    (`subjects`; [] where none is linked), for train-reader --entity-marks; `linked_with` (the KB and linker) is
    recorded at the top. A question asked of several passages is linked once."""
    source = Path(source)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
        articles = data["data"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataFormatError(f"{source}: not SQuAD-format JSON (expected {{'data': [...]}}): {exc}") from exc
    qas = [qa for article in articles for paragraph in article.get("paragraphs", []) for qa in paragraph.get("qas", [])]
    questions = list(dict.fromkeys(str(qa.get("question", "")) for qa in qas))
    subjects: dict[str, list[str]] = {}
    t0 = time.time()
    for lo in range(0, len(questions), batch_size):
        part = questions[lo : lo + batch_size]
        for question, mentions in zip(part, link([q if q.strip() else "?" for q in part])):
            titles = [m.entity.title for m in mentions if m.entity is not None and m.entity.title]
            subjects[question] = list(dict.fromkeys(titles))
        log.info(
            "linked %d of %d questions (%.0f s)", min(lo + batch_size, len(questions)), len(questions), time.time() - t0
        )
    for qa in qas:
        qa["subjects"] = subjects[str(qa.get("question", ""))]
    data["linked_with"] = linked_with
    with atomic_file(output) as tmp:
        tmp.write_text(json.dumps(data, ensure_ascii=False))
    linked = sum(1 for titles in subjects.values() if titles)
    return {
        "output": str(output),
        "questions": len(questions),
        "linked": linked,
        "seconds": round(time.time() - t0, 1),
    }
