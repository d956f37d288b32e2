"""Cloze questions from unlabelled text, for pretraining the reader before its supervised data.

A named entity of a paragraph's sentence becomes the answer; the question is that sentence around the
entity with the entity removed, a wh-word for its type in front ("who", "when", "how many", ...) and 5 % of
the other words dropped, so that answering takes matching the question's words to the context and picking a
span of the right type, as SQuAD's questions mostly do (Lewis et al., 2019, "noisy identity" cloze). The
paragraph is the context. Articles that share a title with a SQuAD file given in `exclude` are skipped, so
an evaluation set's text never becomes training text. Output is SQuAD-format JSON for `train-reader`.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from odqa.core.errors import OdqaError
from odqa.core.nlp import load_spacy
from odqa.corpus.questions import article_key, squad_article_keys
from odqa.corpus.readers import iter_documents
from odqa.reader.training.distant import write_squad_json

log = logging.getLogger("odqa.reader.training.cloze")

WH_WORD = {
    "PERSON": "who",
    "NORP": "what",
    "ORG": "what",
    "GPE": "where",
    "LOC": "where",
    "FAC": "where",
    "DATE": "when",
    "TIME": "when",
    "CARDINAL": "how many",
    "QUANTITY": "how much",
    "MONEY": "how much",
    "PERCENT": "what percentage",
    "ORDINAL": "which",
    "EVENT": "what",
    "WORK_OF_ART": "what",
    "PRODUCT": "what",
    "LAW": "what",
    "LANGUAGE": "what",
}


def cloze_paragraphs(
    corpus: str | Path, exclude_titles: set[str], every: int, per_article: int, seed: int
) -> Iterator[tuple[str, str]]:
    """(title, paragraph) of every `every`-th article: up to `per_article` of its 60-180-word paragraphs."""
    rng = random.Random(seed)
    for i, doc in enumerate(iter_documents(corpus)):
        if i % every or article_key(doc.title) in exclude_titles:
            continue
        lines = [line for line in doc.text.split("\n") if 60 <= len(line.split()) <= 180]
        rng.shuffle(lines)
        for line in lines[:per_article]:
            yield doc.title, line


def cloze_question(sentence, entity, rng: random.Random, drop: float = 0.05, window: int = 10) -> str | None:
    """The question asking for spaCy `entity` of `sentence` (a Span), or None when too few words remain."""
    before = [t for t in sentence if t.i < entity.start and not t.is_space][-window:]
    after = [t for t in sentence if t.i >= entity.end and not t.is_space][:window]
    kept = [t.text for t in before + after if not t.is_punct and rng.random() >= drop]
    if len(kept) < 4:
        return None
    return re.sub(r"\s+", " ", f"{WH_WORD[entity.label_]} {' '.join(kept)}?")


def paragraph_questions(doc, rng: random.Random, limit: int, first_id: int) -> list[dict]:
    """SQuAD `qas` for up to `limit` entities of a parsed paragraph; an entity whose text already occurred
    earlier in its sentence is skipped (its answer would be ambiguous)."""
    entities = [e for e in doc.ents if e.label_ in WH_WORD and len(e.text) < 60]
    rng.shuffle(entities)
    qas: list[dict] = []
    for entity in entities:
        if len(qas) >= limit:
            break
        if any(
            e.text == entity.text
            for e in entities
            if e is not entity and e.sent == entity.sent and e.start < entity.start
        ):
            continue
        question = cloze_question(entity.sent, entity, rng)
        if question is None:
            continue
        qas.append(
            {
                "id": f"cloze-{first_id + len(qas)}",
                "question": question,
                "answers": [{"text": entity.text, "answer_start": entity.start_char}],
            }
        )
    return qas


def build_cloze_data(
    corpus: str | Path,
    output: str | Path,
    questions: int = 24000,
    every: int = 3,
    per_paragraph: int = 2,
    exclude: Sequence[str | Path] = (),
    seed: int = 13,
    nlp=None,
    progress: bool = True,
    per_article: int = 2,
) -> dict:
    """Write `questions` cloze questions over the corpus's paragraphs as SQuAD JSON; returns counts."""
    from tqdm import tqdm

    if questions <= 0:
        raise OdqaError(f"--questions must be positive, got {questions}")
    if per_article <= 0 or per_paragraph <= 0 or every <= 0:
        raise OdqaError(
            f"--per-article ({per_article}), --per-paragraph ({per_paragraph}) and --every ({every}) must be positive"
        )
    if nlp is None:
        nlp = load_spacy()
    t0 = time.time()
    excluded = squad_article_keys(exclude)
    paragraphs = cloze_paragraphs(corpus, excluded, every, per_article, seed)
    rng = random.Random(seed)
    articles: dict[str, list[dict]] = {}
    n = 0
    with tqdm(total=questions, desc="cloze questions", disable=not progress) as bar:
        # streamed: spaCy parses a batch ahead, and the corpus is read only as far as the questions need
        for doc, title in nlp.pipe(((text, title) for title, text in paragraphs), as_tuples=True, batch_size=64):
            qas = paragraph_questions(doc, rng, min(per_paragraph, questions - n), n)
            if qas:
                articles.setdefault(title, []).append({"context": doc.text, "qas": qas})
                n += len(qas)
                bar.update(len(qas))
            if n >= questions:
                break
    if n == 0:
        raise OdqaError(
            f"no cloze question could be made from {corpus}: it needs paragraphs of 60-180 words with named entities"
        )
    if n < questions:
        log.warning("only %d of %d cloze questions: the corpus sample ran out (lower --every)", n, questions)
    write_squad_json(
        [{"title": title, "paragraphs": paragraphs} for title, paragraphs in articles.items()],
        output,
        version="v1.1",
        source="odqa cloze questions",
    )
    return {
        "output": str(output),
        "questions": n,
        "paragraphs": sum(len(p) for p in articles.values()),
        "articles": len(articles),
        "excluded_titles": len(excluded),
        "seconds": round(time.time() - t0, 1),
    }
