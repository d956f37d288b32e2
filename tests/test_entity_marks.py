"""Entity marks (reader.entity_marks): the question's linked entities and each passage's article, read alike by
training, `ask`, `eval-reader` and `fit-calibration`; training data linked by link-reader-data."""

from __future__ import annotations

import json

import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.core.types import Entity, Mention, Passage
from odqa.reader.entity_marks import (
    OTHER_MARK,
    SUBJECT_MARK,
    UNLINKED_MARK,
    add_mark_tokens,
    marked_question,
    subjects_from_titles,
    subjects_of,
)
from odqa.reader.model import Reader
from odqa.reader.settings import READER_CONFIG
from odqa.reader.training.distant import link_training_questions
from odqa.reader.training.train import TrainConfig, load_squad_examples, train
from tests.reader_fixtures import minilm_tokenizer, save_tiny_qa

CURIE = "Marie Curie was a physicist and chemist. She won the Nobel Prize in Physics in 1903."
EINSTEIN = "Albert Einstein was born in Ulm in 1879."


def _mention(title: str) -> Mention:
    return Mention(0, 5, "x", Entity(id=title, title=title))


def test_the_mark_says_whether_the_passage_is_about_a_linked_entity():
    einstein = subjects_of([_mention("Albert Einstein")])
    assert marked_question("where was einstein born?", "Albert Einstein", einstein) == (
        f"where was einstein born? {SUBJECT_MARK} Albert Einstein"
    )
    assert marked_question("where was einstein born?", "Marie Curie", einstein).split()[-3] == OTHER_MARK
    assert marked_question("where was einstein born?", "Marie Curie", None).split()[-3] == UNLINKED_MARK
    # titles match as article keys: SQuAD's underscores, case and spacing do not matter
    assert subjects_from_titles(["Albert_Einstein"]) == einstein
    assert marked_question("q?", "albert  einstein", einstein).split()[1] == SUBJECT_MARK


def test_nothing_linked_is_no_subject():
    assert subjects_of([]) is None and subjects_of(None) is None
    assert subjects_of([Mention(0, 1, "x", None)]) is None
    assert subjects_from_titles([]) is None and subjects_from_titles(None) is None


def test_the_marks_are_single_tokens_of_the_vocabulary():
    tokenizer = minilm_tokenizer()
    add_mark_tokens(tokenizer)
    size = len(tokenizer)
    for mark in (SUBJECT_MARK, OTHER_MARK, UNLINKED_MARK):
        assert tokenizer.tokenize(f"who? {mark} Ulm") == ["who", "?", mark, "ul", "##m"]
    assert len(tokenizer) == size  # word pieces it had: no new embedding rows


def _linked_squad(path, subjects=True):
    qas = [
        {"id": "a", "question": "Who won the prize?", "answers": [{"text": "Marie Curie", "answer_start": 0}]},
        {"id": "n", "question": "Who won in 1950?", "is_impossible": True, "answers": []},
    ]
    if subjects:
        qas[0]["subjects"] = ["Nobel Prize"]
        qas[1]["subjects"] = []
    path.write_text(json.dumps({"data": [{"title": "Marie_Curie", "paragraphs": [{"context": CURIE, "qas": qas}]}]}))
    return path


def test_training_examples_keep_their_article_and_linked_entities(tmp_path):
    examples = load_squad_examples(_linked_squad(tmp_path / "t.json"))
    assert [(e.title, e.subjects) for e in examples] == [("Marie_Curie", ["Nobel Prize"]), ("Marie_Curie", [])]


def _config(tmp_path, files) -> TrainConfig:
    return TrainConfig(
        train_files=[str(f) for f in files],
        output_dir=str(tmp_path / "run"),
        init=str(save_tiny_qa(tmp_path / "init")),
        batch_size=2,
        max_steps=2,
        lr=1e-3,
        warmup=0.0,
        progress=False,
        max_length=64,
        stride=16,
        shared_norm=1.0,
        entity_marks=True,
    )


def test_training_with_marks_refuses_data_without_linked_entities(tmp_path):
    with pytest.raises(OdqaError, match="link-reader-data"):
        train(_config(tmp_path, [_linked_squad(tmp_path / "t.json", subjects=False)]))


def test_a_reader_trained_with_marks_records_them_and_reads_them(tmp_path):
    torch.set_num_threads(1)
    final = train(_config(tmp_path, [_linked_squad(tmp_path / "t.json")]))
    assert json.loads((final / READER_CONFIG).read_text()) == {"entity_marks": True}
    reader = Reader.from_pretrained(str(final), device="cpu")
    assert reader.settings.entity_marks
    assert reader.tokenizer.tokenize(f"x {SUBJECT_MARK}")[-1] == SUBJECT_MARK  # saved with its tokenizer

    seen: list[str] = []
    logits = reader.logits

    def recording(questions, contexts, *args, **kwargs):
        seen.extend(questions)
        return logits(questions, contexts, *args, **kwargs)

    reader.logits = recording  # type: ignore[method-assign]
    passages = [Passage("1", "Albert Einstein", EINSTEIN), Passage("2", "Marie Curie", CURIE)]
    reader.read("Where was Einstein born?", passages, subjects=subjects_from_titles(["Albert Einstein"]))
    assert sorted(seen) == sorted(
        [
            f"Where was Einstein born? {SUBJECT_MARK} Albert Einstein",
            f"Where was Einstein born? {OTHER_MARK} Marie Curie",
        ]
    )
    seen.clear()
    reader.read_batch(["Who won?"], [CURIE], titles=["Marie_Curie"])
    assert seen == [f"Who won? {UNLINKED_MARK} Marie Curie"]
    with pytest.raises(OdqaError, match="subject sets"):
        reader.read_many(["a?", "b?"], [passages, passages], subjects=[None])


def test_subject_weight_lifts_the_answers_of_the_linked_entitys_article(tmp_path):
    from odqa.reader.decode import PassageSpan
    from odqa.reader.model import ReadState

    passages = [
        Passage(id="c", text=CURIE, title="Marie_Curie"),
        Passage(id="e", text=EINSTEIN, title="Albert Einstein"),
    ]
    curie, einstein = PassageSpan(0, 0, 6, "Warsaw", 6.0, 0.0), PassageSpan(1, 0, 3, "Ulm", 5.0, 0.0)

    def best(weight, subjects):
        reader = Reader.from_pretrained(str(save_tiny_qa(tmp_path / "m")), device="cpu", subject_weight=weight)
        job = ReadState.make("Where was Einstein born?", passages, None, 5, subjects)
        job.read = [([curie], -5.0), ([einstein], -5.0)]
        return reader.rank(job, None)[0][0].text

    assert best(0.0, subjects_from_titles(["Albert Einstein"])) == "Warsaw"
    assert best(2.0, subjects_from_titles(["Albert Einstein"])) == "Ulm"
    assert best(2.0, None) == "Warsaw"  # nothing linked: no passage is lifted
    assert best(2.0, subjects_from_titles(["Marie Curie"])) == "Warsaw"


def test_a_reader_without_marks_reads_the_question_alone(tmp_path):
    reader = Reader.from_pretrained(str(save_tiny_qa(tmp_path / "m")), device="cpu")
    assert not reader.settings.entity_marks
    assert reader.read_as(["Who won?"], ["Marie Curie"]) == ["Who won?"]


def test_link_reader_data_adds_each_questions_linked_titles(tmp_path):
    source = _linked_squad(tmp_path / "t.json", subjects=False)
    asked: list[list[str]] = []

    def link(questions):
        asked.append(list(questions))
        return [[_mention("Nobel Prize")] if "prize" in q else [] for q in questions]

    stats = link_training_questions(source, tmp_path / "out.json", link, {"kb": "kb"}, batch_size=1)
    data = json.loads((tmp_path / "out.json").read_text())
    qas = data["data"][0]["paragraphs"][0]["qas"]
    assert [qa["subjects"] for qa in qas] == [["Nobel Prize"], []]
    assert data["linked_with"] == {"kb": "kb"} and stats["questions"] == 2 and stats["linked"] == 1
    assert len(asked) == 2  # in batches, each question once
    assert json.loads(source.read_text())["data"][0]["paragraphs"][0]["qas"][0].get("subjects") is None


def test_the_pipeline_hands_the_reader_each_questions_linked_entities():
    from odqa.config import OdqaConfig
    from odqa.demo_corpus import demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline

    pipeline = Pipeline(
        OdqaConfig.load(None, {"reader.model": "reader"}), default_index=demo_index_path, default_kb=demo_kb_path
    )
    assert pipeline.linker is not None, pipeline.linker_off
    reader = pipeline.reader
    handed: list = []
    read_many = reader.read_many

    def recording(*args, subjects=None, **kwargs):
        handed.extend(subjects)
        return read_many(*args, subjects=subjects, **kwargs)

    reader.read_many = recording  # type: ignore[method-assign]
    results = pipeline.ask_batch(["Where was Albert Einstein born?", "Which element did Marie Curie discover?"])
    assert handed == [subjects_of(result.mentions) for result in results]
