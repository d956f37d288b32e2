"""Cloze questions for reader pretraining: answer offsets, wh-words by entity type, excluded articles."""

from __future__ import annotations

import json
import random

import pytest

from odqa.core.errors import OdqaError
from odqa.reader.training.cloze import WH_WORD, build_cloze_data, cloze_question
from odqa.reader.training.train import LoadStats, load_squad_examples

spacy = pytest.importorskip("spacy")

LINCOLN = (
    "Abraham Lincoln was born on February 12, 1809, in a one-room log cabin on the Sinking Spring Farm near "
    "Hodgenville, Kentucky. His family moved to Indiana in 1816, where he grew up working on the farm and reading "
    "whatever books he could borrow. In 1830 the family settled in Illinois, and Lincoln later worked as a "
    "shopkeeper, a postmaster and a surveyor in New Salem before he studied law and joined the Illinois bar in 1836."
)
PARIS = (
    "Paris is the capital and most populous city of France, with an estimated population of 2,165,423 residents "
    "in 2019 in an area of more than 105 square kilometres. Since the 17th century Paris has been one of the major "
    "centres of finance, diplomacy, commerce, fashion, gastronomy and science in Europe, and the city hosted the "
    "Summer Olympic Games in 1900, 1924 and 2024 as well as several World Fairs during the nineteenth century."
)


@pytest.fixture(scope="module")
def nlp():
    from odqa.core.nlp import load_spacy

    try:
        return load_spacy()
    except OdqaError as exc:
        pytest.skip(str(exc))


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "wiki.jsonl"
    rows = [
        {"id": "1", "title": "Abraham Lincoln", "text": "Abraham Lincoln.\n" + LINCOLN},
        {"id": "2", "title": "Paris", "text": "Paris.\n" + PARIS},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_question_drops_the_answer_and_starts_with_its_wh_word(nlp):
    doc = nlp("Abraham Lincoln was born in Hodgenville, Kentucky, in a log cabin on a farm.")
    person = next(e for e in doc.ents if e.label_ == "PERSON")
    question = cloze_question(person.sent, person, random.Random(0), drop=0.0)
    # ten tokens after the entity (punctuation counts towards the window, then is left out)
    assert question == "who was born in Hodgenville Kentucky in a log?"
    assert "Lincoln" not in question


def test_too_short_a_sentence_gives_no_question(nlp):
    doc = nlp("Abraham Lincoln slept well.")
    person = next(e for e in doc.ents if e.label_ == "PERSON")
    assert cloze_question(person.sent, person, random.Random(0), drop=0.0) is None


def test_build_writes_answers_at_their_offsets_and_skips_excluded_articles(nlp, corpus, tmp_path):
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"data": [{"title": "Paris", "paragraphs": []}]}))
    out = tmp_path / "cloze.json"
    stats = build_cloze_data(
        corpus, out, questions=4, every=1, per_paragraph=4, exclude=[squad], nlp=nlp, progress=False
    )
    data = json.loads(out.read_text())
    assert [a["title"] for a in data["data"]] == ["Abraham Lincoln"]
    assert stats["questions"] == 4 and stats["excluded_titles"] == 1
    labels = {e.text: e.label_ for e in nlp(LINCOLN).ents}
    for paragraph in data["data"][0]["paragraphs"]:
        assert paragraph["context"] == LINCOLN
        for qa in paragraph["qas"]:
            answer = qa["answers"][0]
            assert LINCOLN[answer["answer_start"] :].startswith(answer["text"])
            assert qa["question"].startswith(WH_WORD[labels[answer["text"]]] + " ")
    stats = LoadStats()
    assert len(load_squad_examples(out, stats=stats)) == 4 and stats.skipped_bad_offset == 0
    assert not list(tmp_path.glob("*.tmp"))


def test_same_seed_same_questions(nlp, corpus, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for path in (first, second):
        build_cloze_data(corpus, path, questions=3, every=1, nlp=nlp, progress=False)
    assert json.loads(first.read_text()) == json.loads(second.read_text())


def test_exactly_the_requested_number_when_paragraphs_give_several(nlp, corpus, tmp_path):
    out = tmp_path / "cloze.json"
    stats = build_cloze_data(corpus, out, questions=3, every=1, per_paragraph=2, nlp=nlp, progress=False)
    data = json.loads(out.read_text())
    assert stats["questions"] == 3
    assert sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"]) == 3


def test_per_article_caps_the_paragraphs_taken_from_each_article(nlp, tmp_path):
    path = tmp_path / "wiki.jsonl"
    # one article of two long paragraphs: with one paragraph per article only one of them is asked about
    path.write_text(json.dumps({"id": "1", "title": "Two", "text": "Two.\n" + LINCOLN + "\n" + PARIS}) + "\n")
    counts = {}
    for per_article in (1, 2):
        out = tmp_path / f"cloze{per_article}.json"
        build_cloze_data(
            path, out, questions=10, every=1, per_paragraph=1, per_article=per_article, nlp=nlp, progress=False
        )
        counts[per_article] = sum(len(a["paragraphs"]) for a in json.loads(out.read_text())["data"])
    assert counts == {1: 1, 2: 2}
    with pytest.raises(OdqaError, match="--per-article"):
        build_cloze_data(path, tmp_path / "o.json", questions=2, per_article=0, nlp=nlp)


def test_bad_requests_say_what_to_change(nlp, tmp_path):
    with pytest.raises(OdqaError, match="--questions must be positive"):
        build_cloze_data(tmp_path / "x.jsonl", tmp_path / "o.json", questions=0, nlp=nlp)
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"id": "1", "title": "T", "text": "Too short to ask about."}) + "\n")
    with pytest.raises(OdqaError, match="no cloze question"):
        build_cloze_data(short, tmp_path / "o.json", questions=2, every=1, nlp=nlp, progress=False)
    assert not (tmp_path / "o.json").exists()
