"""Distant supervision: answer-bearing retrieved passages -> SQuAD span examples; others -> no-answer."""

from __future__ import annotations

import json

from odqa.core.types import Passage, SearchHit
from odqa.corpus.questions import QAItem
from reader.distant import build_distant_data, locate_answer
from reader.train import LoadStats, load_squad_examples

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
