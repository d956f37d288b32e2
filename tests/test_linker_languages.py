"""The linker in Korean and Chinese (issue 74): aliases matched a character at a time with Traditional folded to
Simplified, mention spans that begin and end inside CJK words and leave a Korean particle out, silver mentions held
out by whole articles, and a linker that reads its frozen weights from its base model. Which entity a trained model
picks is not asserted: only what any link must be."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.core.types import Document
from odqa.linker.aliases import AliasMatcher, alias_key, han_folding
from odqa.linker.heads import word_masks
from odqa.linker.kb import KnowledgeBase, entries_of
from odqa.linker.linker import LINKER_CONFIG, WEIGHTS, Linker, mention_bounds

pytest.importorskip("kiwipiepy")


def test_korean_and_chinese_names_are_found_inside_longer_words():
    matcher = AliasMatcher()
    matcher.add("알베르트 아인슈타인", 0)
    matcher.add("阿尔伯特·爱因斯坦", 1)
    matcher.add("인도", 2)
    found = {m.text: m.entities for m in matcher.find("알베르트 아인슈타인은 어디에서 태어났나?")}
    assert found == {"알베르트 아인슈타인": [0]}  # the particle 은 is left out of the match
    assert [m.text for m in matcher.find("阿尔伯特·爱因斯坦出生在哪里？")] == ["阿尔伯特·爱因斯坦"]
    assert [m.text for m in matcher.find("인도의 수도는?")] == ["인도"]
    assert matcher.find("동인도 회사") == []  # a Korean name begins a word: not inside 동인도


@pytest.mark.skipif(not han_folding(), reason="OpenCC (the cjk extra) folds Traditional to Simplified")
def test_a_traditional_question_finds_a_simplified_alias():
    matcher = AliasMatcher()
    matcher.add("阿尔伯特·爱因斯坦", 0)
    assert alias_key("阿爾伯特·愛因斯坦") == alias_key("阿尔伯特·爱因斯坦")
    assert [m.entities for m in matcher.find("阿爾伯特·愛因斯坦在哪裡出生？")] == [[0]]


def test_english_keys_are_unchanged():
    assert alias_key("Albert Einstein's") == ("albert", "einstein")


def test_a_mention_leaves_out_the_space_before_it_and_a_korean_particle_after_it():
    question = "알베르트 아인슈타인은 어디에서 태어났나?"
    start, end = mention_bounds(question, 4, 11)  # a SentencePiece span " 아인슈타인은"
    assert question[start:end] == "아인슈타인"
    english = "Where was Albert Einstein born?"
    assert mention_bounds(english, 10, 25) == (10, 25)


def test_a_span_of_nothing_but_a_particle_is_no_mention():
    question = "정도전은 어느 왕조의 개국공신인가?"
    assert mention_bounds(question, 3, 4) is None  # the 은 of 정도전은
    assert mention_bounds(question, 0, 4) == (0, 3)


def test_spans_may_begin_and_end_at_every_cjk_token():
    # one word of four tokens: in Latin script a span covers the whole word, in CJK any run of its tokens
    word_ids = [[None, 0, 0, 0, 0, None]]
    start, end = word_masks(word_ids)
    assert start[0].tolist() == [False, True, False, False, False, False]
    start, end = word_masks(word_ids, [[False, True, True, True, True, False]])
    assert start[0, 1:5].all() and end[0, 1:5].all()


def test_paragraphs_of_one_article_are_one_entity_described_by_the_first():
    docs = [
        Document("a#0", "임진왜란", "임진왜란은 1592년에 시작된 전쟁이다."),
        Document("a#1", "임진왜란", "이순신 장군이 한산도 대첩에서 승리하였다."),
        Document("b#0", "한글", "한글은 세종대왕이 창제한 문자이다."),
    ]
    entries = list(entries_of(docs))
    assert [e.title for e in entries] == ["임진왜란", "한글"]
    assert entries[0].description.startswith("임진왜란은") and entries[0].doc_id == "a#0"
    assert entries[0].length == len(docs[0].text) + len(docs[1].text)


def _squad(tmp_path, articles):
    path = tmp_path / "squad.json"
    data = {
        "data": [
            {
                "title": title,
                "paragraphs": [
                    {
                        "context": text,
                        "qas": [{"id": f"{title}-{i}", "question": q, "answers": []} for i, q in enumerate(qs)],
                    }
                ],
            }
            for title, text, qs in articles
        ]
    }
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_silver_mentions_hold_out_whole_articles(tmp_path):
    from odqa.linker.data import silver_examples

    titles = [f"문서{i}" for i in range(12)]
    articles = [
        (t, f"{t}는 오래된 이야기를 담고 있다. {titles[(i + 1) % 12]}와 함께 읽힌다.", [f"{t}는 언제 쓰였나?"])
        for i, t in enumerate(titles)
    ]
    path = _squad(tmp_path, articles)
    kb = KnowledgeBase(list(entries_of(Document(t, t, text) for t, text, _ in articles)))
    split = silver_examples(kb, path, dev_every=3)
    assert split.train and split.dev and split.dev_articles + len({ex.id.split(":")[1] for ex in split.train}) <= 12
    dev_articles = {ex.id.split(":")[1] for ex in split.dev}
    assert not dev_articles & {ex.id.split(":")[1] for ex in split.train}
    for example in split.train + split.dev:
        assert not example.complete  # the rest of the sentence is unlabelled
        for mention in example.mentions:
            assert alias_key(example.question[mention.start : mention.end]) == alias_key(mention.title)
            assert kb.entries[mention.row].title == mention.title


def test_a_linker_reads_its_frozen_weights_from_its_base_model(tmp_path):
    torch.manual_seed(0)
    docs = [Document("1", "Paris", "Paris is the capital of France."), Document("2", "Rome", "Rome is in Italy.")]
    kb = KnowledgeBase.build(docs, tmp_path / "kb", encoder="minilm", progress=False, device="cpu")
    linker = Linker.from_encoder("minilm", kb=kb, mention_threshold=0.0, entity_threshold=0.0)
    linker.config.base_model = "minilm"
    layers = linker.model.encoder.encoder.layer
    with torch.no_grad():  # a trained top layer and heads; everything else as the base has it
        for p in [*layers[-1].parameters(), *linker.model.mention_heads.parameters()]:
            p.add_(0.01 * torch.randn_like(p))
    linker.save_pretrained(tmp_path / "linker")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "linker" / WEIGHTS), "pt") as f:
        saved = set(f.keys())
    assert "encoder.embeddings.word_embeddings.weight" not in saved and "mention_heads.weight" in saved
    assert any(k.startswith(f"encoder.encoder.layer.{len(layers) - 1}.") for k in saved)
    assert not any(k.startswith("encoder.encoder.layer.0.") for k in saved)
    loaded = Linker.from_pretrained(tmp_path / "linker", kb=kb, runtime="torch", precision="fp32")
    question = "What is the capital of France?"
    batch = {k: v for k, v in linker.tokenize([question]).items() if k != "offset_mapping"}
    with torch.inference_mode():
        before, _ = linker.model.eval().encode(**batch)
        after, _ = loaded.model.encode(**batch)
    assert np.allclose(before.numpy(), after.numpy(), atol=2e-2)  # the saved weights are fp16

    config = json.loads((tmp_path / "linker" / LINKER_CONFIG).read_text())
    config["base_weights"] = "minilm:another-version"
    (tmp_path / "linker" / LINKER_CONFIG).write_text(json.dumps(config))
    with pytest.raises(OdqaError, match="reads its frozen weights from 'minilm'") as refused:
        Linker.from_pretrained(tmp_path / "linker", kb=kb, runtime="torch", precision="fp32")
    assert "\n" not in str(refused.value)
