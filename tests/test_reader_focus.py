"""Reading a focused part of each passage (reader/focus.py): which sentences are chosen, and that answers read
from the part keep offsets into the whole passage."""

from __future__ import annotations

import pytest
import torch

from odqa.core.types import Passage
from odqa.indexes.bm25 import english_analyzer
from odqa.reader.focus import Focus, focus_span, sentence_spans
from odqa.reader.model import Reader
from tests.reader_fixtures import save_tiny_qa

ANALYZE = english_analyzer()
FLEMING = (
    "Penicillin is a group of antibiotics. It was the first drug of its kind. "
    "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London. "
    "He noticed that a mould killed the bacteria around it. "
    "Mass production began during the Second World War."
)


def test_sentence_spans_cover_each_sentence_without_the_space_between():
    text = 'First one. "Second?" he asked.\nThird line!  Last'
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "First one.",
        '"Second?"',
        "he asked.",
        "Third line!",
        "Last",
    ]
    cjk = "東京は首都です。大阪は都市です。"
    assert [cjk[a:b] for a, b in sentence_spans(cjk)] == ["東京は首都です。", "大阪は都市です。"]


def terms(question: str) -> set[str]:
    return set(ANALYZE(question))


def test_focus_keeps_the_best_matching_sentence_and_widens_within_the_budget():
    a, b = focus_span(terms("Who discovered penicillin in London?"), FLEMING, 25, ANALYZE)
    part = FLEMING[a:b]
    assert "Alexander Fleming discovered penicillin in 1928" in part
    assert len(part.split()) <= 25 and part != FLEMING
    # the earlier neighbour shares "penicillin" with the question: it is added before the later one
    assert part.startswith("Penicillin is a group") or part.startswith("It was the first")
    wide = FLEMING[slice(*focus_span(terms("Who discovered penicillin in London?"), FLEMING, 40, ANALYZE))]
    assert part in wide and len(wide.split()) <= 40


def test_whole_passage_when_short_or_when_no_sentence_shares_a_term():
    assert focus_span(terms("Who discovered penicillin?"), FLEMING, 1000, ANALYZE) == (0, len(FLEMING))
    assert focus_span(terms("Quelle est la capitale?"), FLEMING, 10, ANALYZE) == (0, len(FLEMING))
    assert focus_span(terms("Who discovered penicillin?"), FLEMING, 0, ANALYZE) == (0, len(FLEMING))


def test_a_best_sentence_longer_than_the_budget_is_read_whole():
    a, b = focus_span(terms("Where did Fleming discover penicillin?"), FLEMING, 5, ANALYZE)
    assert FLEMING[a:b] == "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London."


def test_focus_spans_of_several_questions():
    spans = Focus(12).spans(["What did the mould kill?", "When did mass production begin?"], [FLEMING, FLEMING])
    assert "mould killed the bacteria" in FLEMING[slice(*spans[0])]
    assert "Mass production began" in FLEMING[slice(*spans[1])]


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    torch.set_num_threads(1)
    # whole passages unless a test focuses them (the defaults focus all but the first two: reader.settings)
    return Reader.from_pretrained(
        str(save_tiny_qa(tmp_path_factory.mktemp("tiny-qa"))),
        device="cpu",
        precision="fp32",
        runtime="torch",
        focus_words=0,
        whole_passages=0,
    )


def test_reader_reads_the_focused_part_and_answers_with_offsets_into_the_whole_passage(reader):
    question = "Who discovered penicillin in London?"
    passages = [Passage("p1", "Penicillin", FLEMING), Passage("p2", "Short", "Fleming was a Scottish doctor.")]
    reader.settings.focus_words = 20
    try:
        a, b = reader.focus_spans([question], [FLEMING])[0]
        answers = reader.read(question, passages, top_n=20, no_answer_threshold=None)
    finally:
        reader.settings.focus_words = 0
    assert (a, b) != (0, len(FLEMING))
    from_p1 = [x for x in answers if x.passage_id == "p1"]
    assert from_p1
    for x in answers:
        assert x.context[x.start : x.end] == x.text
    for x in from_p1:  # nothing outside the part read
        assert a <= x.start and x.end <= b
    whole = reader.read(question, passages, top_n=20, no_answer_threshold=None)
    assert any(not (a <= x.start and x.end <= b) for x in whole if x.passage_id == "p1")


def test_the_first_passages_are_read_whole_with_whole_passages(reader):
    question = "Who discovered penicillin in London?"
    passages = [Passage(f"p{i}", "Penicillin", FLEMING) for i in range(3)]
    reader.settings.focus_words = 20
    reader.settings.whole_passages = 2
    try:
        a, b = reader.focus_spans([question], [FLEMING])[0]  # no places given: every passage focused
        spans = reader.focus_spans([question] * 3, [FLEMING] * 3, [0, 1, 2])
        answers = reader.read(question, passages, top_n=60, no_answer_threshold=None)
    finally:
        reader.settings.focus_words = 0
        reader.settings.whole_passages = 0
    assert (a, b) != (0, len(FLEMING))
    assert spans == [(0, len(FLEMING)), (0, len(FLEMING)), (a, b)]
    assert any(not (a <= x.start and x.end <= b) for x in answers if x.passage_id in ("p0", "p1"))
    assert all(a <= x.start and x.end <= b for x in answers if x.passage_id == "p2")


def test_a_korean_question_focuses_on_the_sentence_sharing_its_words_whatever_their_particles():
    pytest.importorskip("kiwipiepy")
    from odqa.reader.focus import Focus

    text = (
        "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다. 이순신 장군이 한산도 대첩에서 승리하였다. "
        "한글은 1443년 세종대왕이 창제한 문자이다."
    )
    start, end = Focus(6).spans(["이순신 장군이 승리한 대첩은?"], [text])[0]
    assert text[start:end] == "이순신 장군이 한산도 대첩에서 승리하였다."


def test_chinese_text_is_measured_in_words_of_two_characters():
    from odqa.reader.focus import words_of

    assert words_of("Albert Einstein was born in Ulm.") == 6
    assert words_of("爱因斯坦出生在乌尔姆。") == 5  # ten Han characters, no spaces
