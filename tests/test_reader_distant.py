"""Distant supervision: answer-bearing retrieved passages -> SQuAD span examples; others -> no-answer."""

from __future__ import annotations

import json

from odqa.core.types import Passage, SearchHit
from odqa.reader.training.distant import build_distant_data, locate_answer
from odqa.reader.training.train import LoadStats, load_squad_examples

PASSAGES = [
    Passage("w1", "Moon", "Apollo 17 left the Moon on 14 December 1972, the last crewed landing."),
    Passage("w2", "Apollo", "The Apollo program was run by NASA."),
    Passage("w3", "Moon", "Some say december 1972 was cold."),
]


def fake_search(questions, k):
    return [[SearchHit(row=i, score=10.0 - i, passage=p) for i, p in enumerate(PASSAGES[:k])] for _ in questions]


def test_locate_answer_whole_word_case_insensitive_longest_first():
    text = PASSAGES[0].text
    a, b = locate_answer(text, ["December 1972", "14 December 1972"])
    assert text[a:b] == "14 December 1972"
    assert locate_answer("Moonlight", ["Moon"]) is None  # not a whole word
    a, b = locate_answer(text, [r"Dec(ember)?\s+19\d\d"], regex=True)
    assert text[a:b] == "December 1972"


def test_build_writes_squad_that_the_trainer_reads(tmp_path):
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"question": "when did apollo 17 leave the moon", "answer": ["December 1972"]}) + "\n")
    out = tmp_path / "distant.json"
    stats = build_distant_data([str(qs)], str(out), fake_search, k=3, positives=2, negatives=1)
    assert stats["questions"] == 1 and stats["positives"] == 2 and stats["negatives"] == 1
    data = json.loads(out.read_text())
    qas = [qa for art in data["data"] for p in art["paragraphs"] for qa in p["qas"]]
    assert sorted(qa["is_impossible"] for qa in qas) == [False, False, True]
    for art in data["data"]:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                for a in qa["answers"]:
                    assert p["context"][a["answer_start"] :].startswith(a["text"])
    st = LoadStats()
    examples = load_squad_examples(out, stats=st)
    assert len(examples) == 3 and st.skipped_bad_offset == 0


def test_answers_already_in_the_question_are_not_used(tmp_path):
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"question": "where is the moon in december 1972", "answer": ["December 1972"]}) + "\n")
    stats = build_distant_data([str(qs)], str(tmp_path / "o.json"), fake_search, k=3)
    assert stats["positives"] == 0 and stats["questions_without_usable_answer"] == 1


def test_passages_of_excluded_articles_never_enter_the_data(tmp_path):
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"question": "when did apollo 17 leave the moon", "answer": ["December 1972"]}) + "\n")
    test_set = tmp_path / "dev.json"  # a SQuAD test set holding the article "Moon" (as SQuAD writes titles)
    test_set.write_text(json.dumps({"data": [{"title": "moon", "paragraphs": []}]}))
    out = tmp_path / "distant.json"
    stats = build_distant_data([str(qs)], str(out), fake_search, k=3, exclude_articles_of=[str(test_set)])
    titles = {art["title"] for art in json.loads(out.read_text())["data"]}
    assert titles == {"Apollo"}  # both Moon passages dropped, the answerless Apollo one kept as the negative
    assert stats["excluded_passages"] == 2 and stats["positives"] == 0 and stats["negatives"] == 1
    assert stats["excluded_articles"] == 1


def test_article_keys_match_squad_and_wikipedia_titles():
    from odqa.corpus.questions import article_key

    assert article_key("Jacksonville,_Florida") == article_key("Jacksonville, Florida") == "jacksonville, florida"
    assert article_key("Sky_(United_Kingdom)") == "sky (united kingdom)"


def test_efficientqa_dev_loads_as_questions_with_answers(shared_data):
    from odqa.corpus.questions import load_questions

    items = load_questions(shared_data / "nq-open" / "NQ-open.efficientqa.dev.1.1.jsonl")
    assert len(items) == 1800 and all(q.question and q.answers and not q.regex for q in items)


def test_test_sets_are_refused_before_any_retrieval(tmp_path):
    import pytest

    from odqa.core.errors import OdqaError

    ok = tmp_path / "q.jsonl"
    ok.write_text(json.dumps({"question": "when did apollo 17 leave the moon", "answer": ["December 1972"]}) + "\n")
    nq_test = tmp_path / "NQ-open.dev.jsonl"  # NQ-open dev holds NQ test's questions
    nq_test.write_text(ok.read_text())
    asked = []

    def search(questions, k):
        asked.append(questions)
        return fake_search(questions, k)

    out = tmp_path / "distant.json"
    with pytest.raises(OdqaError, match="NQ test"):
        build_distant_data([str(ok), str(nq_test)], str(out), search, k=3)
    assert not asked and not out.exists()


def _squad_file(tmp_path, questions):
    context = "Apollo 17 was the final mission of the Apollo program; it left the Moon in December 1972."
    qas = [
        {
            "id": f"q{i}",
            "question": q,
            "answers": [{"text": "December 1972", "answer_start": context.index("December")}],
        }
        for i, q in enumerate(questions)
    ]
    path = tmp_path / "train-small.json"
    path.write_text(json.dumps({"data": [{"title": "Apollo 17", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path, context


def test_gold_paragraphs_are_the_positives_and_retrieved_passages_only_negatives(tmp_path):
    squad, context = _squad_file(tmp_path, ["when did apollo 17 leave the moon"])
    out = tmp_path / "gold.json"
    stats = build_distant_data([str(squad)], str(out), fake_search, k=3, negatives=5, gold=True)
    paragraphs = [(art["title"], p) for art in json.loads(out.read_text())["data"] for p in art["paragraphs"]]
    answered = [(t, p) for t, p in paragraphs if not p["qas"][0]["is_impossible"]]
    unanswerable = [p["context"] for t, p in paragraphs if p["qas"][0]["is_impossible"]]
    # the own paragraph is the one positive; w1 and w3 hold the answer string, so they are neither positive nor negative
    assert [(t, p["context"]) for t, p in answered] == [("Apollo 17", context)]
    assert unanswerable == [PASSAGES[1].text]
    assert stats["positives"] == 1 and stats["negatives"] == 1 and stats["with_positive"] == 1
    # one question text in one file: the trainer's shared normalisation puts the three windows in one softmax
    st = LoadStats()
    examples = load_squad_examples(out, stats=st)
    assert len(examples) == 2 and len({e.question for e in examples}) == 1 and st.skipped_bad_offset == 0


def test_gold_mode_limit_draws_questions_at_random_and_reproducibly(tmp_path):
    squad, _ = _squad_file(tmp_path, [f"question number {i} about apollo" for i in range(40)])

    def drawn(seed):
        out = tmp_path / f"gold-{seed}.json"
        build_distant_data([str(squad)], str(out), fake_search, k=1, limit=5, seed=seed, gold=True)
        data = json.loads(out.read_text())["data"]
        return sorted(qa["question"] for art in data for p in art["paragraphs"] for qa in p["qas"])

    first = drawn(3)
    assert len(set(first)) == 5 and first == drawn(3)
    assert first != [f"question number {i} about apollo" for i in range(5)]  # not simply the file's first five
    assert first != drawn(4)
