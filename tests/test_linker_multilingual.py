"""Korean and Chinese questions are linked (issue 74): over the demo, `ask`'s pipeline, `link` and `/link` route a
question by its language, English to the English linker and Korean or Chinese to the multilingual one over the
demo's multilingual KB; a Korean or Chinese index's KB is encoded for the multilingual linker, which then links
against it. Asserted: every link is a span of the question and an entity of the KB it was linked against, never
which entity a model picks."""

from __future__ import annotations

import json

import pytest

from odqa.cli import main
from odqa.config import OdqaConfig
from odqa.core.models import SHIPPED_MODELS
from odqa.demo_corpus import DEMO_QUESTIONS_BY_LANGUAGE, demo_index_path, demo_kb_path
from odqa.linker.heads import MULTILINGUAL_LINKER
from odqa.pipeline import Pipeline

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHIPPED_MODELS / MULTILINGUAL_LINKER / "linker.safetensors").is_file()
        or not (SHIPPED_MODELS / "encoder-multilingual" / "model.safetensors").is_file(),
        reason="models/linker-multilingual or models/encoder-multilingual absent",
    ),
]


def _questions(language: str, n: int = 8) -> list[str]:
    lines = DEMO_QUESTIONS_BY_LANGUAGE[language].read_text(encoding="utf-8").splitlines()[:n]
    return [json.loads(line)["question"] for line in lines]


@pytest.fixture(scope="module")
def demo_pipeline():
    return Pipeline(OdqaConfig.load(None, {}), default_index=demo_index_path, default_kb=demo_kb_path)


def _check_links(question: str, mentions, kb) -> None:
    ids = {kb.entity(i).id for i in range(len(kb))}
    for m in mentions:
        assert 0 <= m.start < m.end <= len(question) and question[m.start : m.end] == m.text, (question, m)
        assert m.entity is not None and m.entity.id in ids, (question, m)


@pytest.mark.parametrize("language", ["ko", "zh"])
def test_korean_and_chinese_questions_are_linked_by_the_multilingual_linker(demo_pipeline, language):
    linker = demo_pipeline.linker_for(language)
    assert linker is not None and language in linker.config.languages
    assert linker.config.entity_encoder == "encoder-multilingual"
    assert demo_pipeline.linker_for("en") is demo_pipeline.linker  # English keeps the English linker
    questions = _questions(language)
    linked = demo_pipeline.link(questions)
    for question, mentions in zip(questions, linked):
        _check_links(question, mentions, linker.kb)
    assert sum(map(len, linked)) > 0, "no Korean or Chinese question of the demo linked anything"
    assert "linker:multilingual" in demo_pipeline.inference_plans()


def test_a_batch_of_mixed_languages_keeps_each_question_its_own_links(demo_pipeline):
    questions = [_questions("en", 1)[0], _questions("ko", 1)[0], _questions("zh", 1)[0]]

    def spans(linked):
        return [[(m.start, m.end, m.entity.id if m.entity else None) for m in mentions] for mentions in linked]

    assert spans(demo_pipeline.link(questions)) == spans([demo_pipeline.link([q])[0] for q in questions])


def test_link_prints_spans_of_the_korean_question(capsys):
    question = _questions("ko", 1)[0]
    assert main(["link", "--json", question]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["question"] == question
    for m in out["mentions"]:
        assert question[m["start"] : m["end"]] == m["text"] and m["entity_id"]


def test_a_korean_index_gets_a_kb_the_multilingual_linker_links_against(tmp_path):
    from odqa.indexing import IndexSpec, build_index
    from odqa.linker.kb import KnowledgeBase

    corpus = tmp_path / "ko.jsonl"
    docs = [
        {"id": "k1", "title": "한글", "text": "한글은 1443년 세종대왕이 창제한 문자이다. 훈민정음이라고도 부른다."},
        {"id": "k2", "title": "서울", "text": "서울은 대한민국의 수도이며 한강이 도시를 가로지른다."},
        {"id": "k3", "title": "세종대왕", "text": "세종대왕은 조선의 제4대 왕으로 한글을 창제하였다."},
    ]
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], language="ko"))
    kb = KnowledgeBase.load(tmp_path / "idx-kb")
    assert kb.encoder == "encoder-multilingual" and len(kb) == 3
    pipeline = Pipeline(OdqaConfig.load(None, {"index": str(tmp_path / "idx")}))
    assert pipeline.linker is not None and pipeline.linker.config.entity_encoder == "encoder-multilingual"
    for question in ["세종대왕은 무엇을 창제했나?", "Who created Hangul?"]:
        _check_links(question, pipeline.link([question])[0], kb)
