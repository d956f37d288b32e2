"""The open-dev split: fixed, readable from the shared data, and never trained or calibrated on."""

from __future__ import annotations

import json

from odqa.core.types import Passage, SearchHit
from odqa.corpus.open_dev import SOURCES, draw_split, drop_open_dev, is_open_dev, open_dev_questions, split
from odqa.corpus.questions import QAItem, load_questions
from odqa.reader.training.distant import build_distant_data
from odqa.reader.training.train import LoadStats, load_squad_examples


def _an_open_dev_question(shared_data) -> QAItem:
    return open_dev_questions(shared_data, ["nq"])["nq"][0]


def test_the_committed_split_is_the_one_drawn_from_the_data(shared_data):
    assert draw_split(shared_data) == split()
    sizes = {name: len(items) for name, items in open_dev_questions(shared_data).items()}
    assert sizes == {source.name: source.size for source in SOURCES}


def test_matching_ignores_case_punctuation_and_spacing(shared_data):
    question = _an_open_dev_question(shared_data).question
    assert is_open_dev(question) and is_open_dev("  " + question.upper() + " ?")
    assert not is_open_dev(question + " in 1999")


def test_a_file_holding_open_dev_questions_under_other_ids_is_caught(shared_data):
    """CuratedTREC's large train file repeats questions of the small one, under other ids."""
    items = load_questions(shared_data / "curatedtrec" / "large2470-train.tsv")
    kept, dropped = drop_open_dev(items)
    assert dropped > 0 and len(kept) + dropped == len(items)
    assert not any(is_open_dev(item.question) for item in kept)


def test_distant_supervision_skips_open_dev_questions(shared_data, tmp_path):
    held_out = _an_open_dev_question(shared_data)
    asked: list[str] = []

    def search(questions, k):
        asked.extend(questions)
        passage = Passage("p1", "T", f"The answer is {held_out.answers[0]} and Paris is in France.")
        return [[SearchHit(row=0, score=1.0, passage=passage)] for _ in questions]

    qs = tmp_path / "q.jsonl"
    qs.write_text(
        json.dumps({"question": held_out.question, "answer": held_out.answers})
        + "\n"
        + json.dumps({"question": "where is paris", "answer": ["France"]})
        + "\n"
    )
    stats = build_distant_data([str(qs)], str(tmp_path / "distant.json"), search, k=1)
    assert asked == ["where is paris"]
    assert stats["open_dev_skipped"] == 1 and stats["questions"] == 1


def test_training_files_lose_their_open_dev_questions(shared_data, tmp_path):
    held_out = _an_open_dev_question(shared_data)
    context = f"{held_out.answers[0]} is the answer here."
    data = {
        "data": [
            {
                "title": "T",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": "a",
                                "question": held_out.question,
                                "answers": [{"text": held_out.answers[0], "answer_start": 0}],
                            },
                            {
                                "id": "b",
                                "question": "what is the answer here",
                                "answers": [{"text": held_out.answers[0], "answer_start": 0}],
                            },
                        ],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    stats = LoadStats()
    examples = load_squad_examples(path, stats=stats)
    assert [e.id for e in examples] == ["b"] and stats.open_dev == 1
