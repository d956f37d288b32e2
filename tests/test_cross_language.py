"""Questions in one language over passages of another (issue 75): over vectors of an encoder that shares one space
between the two languages, a Korean or Chinese question is answered from English passages, and an English question
from Korean ones, by dense retrieval and the multilingual reader; without such vectors the question is refused with
what would answer it. Which span the reader picks is not asserted: only what any answer must be (a span of a
retrieved passage, in that passage's language, at its offsets)."""

from __future__ import annotations

import json

import pytest

from odqa.config import OdqaConfig
from odqa.core.models import SHIPPED_MODELS
from odqa.indexes.analysis import detect_language
from odqa.pipeline import Pipeline

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHIPPED_MODELS / "reader-multilingual" / "model.safetensors").is_file()
        or not (SHIPPED_MODELS / "encoder-multilingual" / "model.safetensors").is_file(),
        reason="models/reader-multilingual or models/encoder-multilingual absent",
    ),
]

ENGLISH = [
    {"id": "e1", "title": "Albert Einstein", "text": "Albert Einstein was born in Ulm in 1879."},
    {"id": "e2", "title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in London in 1928."},
    {"id": "e3", "title": "Mount Everest", "text": "Mount Everest is the highest mountain on Earth, in the Himalayas."},
]
KOREAN = [
    {"id": "k1", "title": "한글", "text": "한글은 1443년 세종대왕이 창제한 문자이다. 훈민정음이라고도 부른다."},
    {"id": "k2", "title": "서울", "text": "서울은 대한민국의 수도이며 한강이 도시를 가로지른다."},
    {"id": "k3", "title": "임진왜란", "text": "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다."},
]


def _index(tmp_path_factory, docs, name: str, language: str, backends: list[str], encoder: str | None = None):
    from odqa.indexing import IndexSpec, build_index

    root = tmp_path_factory.mktemp(name)
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    spec = IndexSpec(corpus=str(corpus), out=str(root / "index"), backends=backends, language=language, kb=False)
    if encoder:
        spec.encoder = encoder
    build_index(spec)
    return root / "index"


@pytest.fixture(scope="module")
def english_multilingual(tmp_path_factory):
    return _index(tmp_path_factory, ENGLISH, "en-multi", "en", ["bm25", "dense"], "encoder-multilingual")


@pytest.fixture(scope="module")
def korean_multilingual(tmp_path_factory):
    return _index(tmp_path_factory, KOREAN, "ko-multi", "ko", ["bm25", "dense"], "encoder-multilingual")


@pytest.fixture(scope="module")
def english_bm25(tmp_path_factory):
    return _index(tmp_path_factory, ENGLISH, "en-bm25", "en", ["bm25"])


def _pipeline(index, **overrides) -> Pipeline:
    return Pipeline(
        OdqaConfig.load(None, {"index": str(index), "linker.enabled": False, "retrieval.k": 3, **overrides})
    )


def _check_span_of_passage(result, language: str) -> None:
    assert result.passages, result.to_dict()
    for answer in result.answers:
        passage = next(h.passage for h in result.passages if h.passage.id == answer.passage_id)
        assert passage.text[answer.start : answer.end] == answer.text == answer.context[answer.start : answer.end]
        assert detect_language([passage.text]) == language


@pytest.mark.parametrize("question", ["알베르트 아인슈타인은 어느 도시에서 태어났나?", "爱因斯坦出生在哪座城市？"])
def test_a_korean_or_chinese_question_is_answered_from_english_passages(english_multilingual, question):
    pipeline = _pipeline(english_multilingual, **{"retrieval.retriever": "hybrid"})
    result = pipeline.ask(question)
    route = result.route
    assert route is not None and route.cross_language and not route.refused
    assert (route.asked, route.held, route.retriever, route.reader) == (
        detect_language([question]),
        "en",
        "dense",
        "reader-multilingual",
    )
    assert "dense" in route.why and "BM25" in route.why  # the plan says why hybrid was not used
    assert {h.source for h in result.passages} == {"dense"}
    assert not any(n.startswith("languages differ") for n in result.notices)
    _check_span_of_passage(result, "en")
    assert result.to_dict()["route"]["passage_language"] == "en"
    calibrated_for_pairs = pipeline.reader_named("reader-multilingual").calibration.for_cross_language() is not None
    assert calibrated_for_pairs or not any(a.confident for a in result.answers)


def test_an_english_question_is_answered_from_korean_passages(korean_multilingual):
    result = _pipeline(korean_multilingual).ask("Who created Hangul?")
    assert result.route is not None and (result.route.asked, result.route.held) == ("en", "ko")
    assert result.route.retriever == "dense" and result.route.reader == "reader-multilingual"
    _check_span_of_passage(result, "ko")


def test_a_question_in_the_index_language_keeps_the_configured_path(english_multilingual):
    route = _pipeline(english_multilingual, **{"retrieval.retriever": "hybrid"}).route("Where was Einstein born?")
    assert (route.retriever, route.reader, route.why, route.refused) == ("hybrid", "reader", "", "")


def test_without_shared_vectors_another_language_is_refused_with_the_fix(english_bm25):
    pipeline = _pipeline(english_bm25, **{"retrieval.retriever": "bm25"})
    result = pipeline.ask("알베르트 아인슈타인은 어디에서 태어났나?")
    assert not result.answers and not result.passages
    assert result.notices[-1].startswith("languages differ") and "--encoder encoder-multilingual" in result.notices[-1]
    assert str(english_bm25) not in result.notices[-1]  # no server folder in what a visitor reads
