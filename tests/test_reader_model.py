"""Reader end to end on a tiny randomly initialised BERT (MiniLM tokenizer): loading, errors, read(), save."""

from __future__ import annotations

import json

import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.core.types import Answer, Passage
from odqa.reader.model import Reader
from tests.reader_fixtures import save_tiny_qa

PASSAGES = [
    Passage("p1", "Paris", "Paris is the capital and most populous city of France, on the Seine."),
    Passage("p2", "Lyon", "Lyon is the third-largest city of France, at the confluence of the Rhône and the Saône."),
    Passage("p3", "Empty", ""),
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_qa(tmp_path_factory.mktemp("tiny-qa"))


@pytest.fixture(scope="module")
def reader(tiny_dir):
    torch.set_num_threads(1)
    return Reader.from_pretrained(str(tiny_dir), device="cpu")


def test_read_returns_answers_with_exact_offsets(reader):
    answers = reader.read("What is the capital of France?", PASSAGES, top_n=3, no_answer_threshold=None)
    assert 1 <= len(answers) <= 3
    by_id = {p.id: p for p in PASSAGES}
    for a in answers:
        assert isinstance(a, Answer)
        assert a.passage_id in ("p1", "p2") and a.title == by_id[a.passage_id].title
        assert a.context == by_id[a.passage_id].text
        assert a.context[a.start : a.end] == a.text and a.text
        assert 0.0 <= a.probability <= 1.0 and 0.0 <= a.share <= 1.0
        assert a.evidence and a.evidence[0]["passage_id"] == a.passage_id and a.evidence[0]["text"] == a.text
    assert [a.share for a in answers] == sorted((a.share for a in answers), reverse=True)


def test_retrieval_scores_must_match_passages(reader):
    with pytest.raises(OdqaError):
        reader.read("q?", PASSAGES, retrieval_scores=[1.0])


def test_empty_question_and_empty_passage_list_are_errors(reader):
    with pytest.raises(OdqaError, match="question is empty"):
        reader.read("  ", PASSAGES)
    with pytest.raises(OdqaError, match="passage list is empty"):
        reader.read("What?", [])


def test_best_guess_when_null_wins(reader):
    # a huge threshold: no span beats its passage's null score by that much, so the answers are best guesses
    guesses = reader.read("What is the capital of France?", PASSAGES, no_answer_threshold=1e6)
    sure = reader.read("What is the capital of France?", PASSAGES, no_answer_threshold=None)
    assert guesses and not any(a.confident for a in guesses)
    assert [(a.text, a.probability) for a in guesses] == [(a.text, a.probability) for a in sure]


def test_non_qa_checkpoint_is_rejected(tmp_path):
    path = save_tiny_qa(tmp_path / "encoder", qa=False)
    with pytest.raises(OdqaError, match="not an extractive question-answering checkpoint"):
        Reader.from_pretrained(str(path))


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(OdqaError):
        Reader.from_pretrained(str(tmp_path / "nothing-here"))


def test_save_fp16_and_reload_gives_the_same_answer(reader, tmp_path):
    reader.save_pretrained(tmp_path / "saved", fp16=True)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "saved" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    again = Reader.from_pretrained(str(tmp_path / "saved"), device="cpu")
    assert next(again.model.parameters()).dtype == torch.float32  # computed in fp32 on CPU
    assert json.loads((tmp_path / "saved" / "reader_config.json").read_text())["max_answer_tokens"] == 30
    q = "What is the capital of France?"
    a1 = reader.read(q, PASSAGES[:2], no_answer_threshold=None)[0]
    a2 = again.read(q, PASSAGES[:2], no_answer_threshold=None)[0]
    assert (a1.passage_id, a1.start, a1.end) == (a2.passage_id, a2.start, a2.end)


def test_read_batch_one_passage_per_question(reader):
    out = reader.read_batch(["Where?", "Who?"], [PASSAGES[0].text, PASSAGES[1].text])
    assert len(out) == 2
    for a, ctx in zip(out, [PASSAGES[0].text, PASSAGES[1].text]):
        assert a is not None and ctx[a.start : a.end] == a.text


def test_int8_quantisation_still_reads(tiny_dir):
    r = Reader.from_pretrained(str(tiny_dir), device="cpu").quantize_int8()
    assert r.read("Where?", PASSAGES[:1], no_answer_threshold=None)


def test_bf16_on_cpu_reads_valid_spans_and_switching_back_to_fp32_is_exact(tiny_dir):
    r = Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32")
    texts = [p.text for p in PASSAGES[:2]]
    _, exact_starts, _ = r.logits(["Where?"] * 2, texts)
    r.settings.precision = "bf16"
    for a in r.read("Where?", PASSAGES[:2], no_answer_threshold=None):
        assert a.context[a.start : a.end] == a.text
    _, fast_starts, _ = r.logits(["Where?"] * 2, texts)
    # the bf16 copy is a copy: the fp32 weights and their logits are untouched
    assert next(r.model.parameters()).dtype == torch.float32
    for exact, fast in zip(exact_starts, fast_starts):
        assert fast.shape == exact.shape and abs(fast - exact).max() < 0.1
    r.settings.precision = "fp32"
    _, again, _ = r.logits(["Where?"] * 2, texts)
    assert all((a == b).all() for a, b in zip(again, exact_starts))


QUESTIONS = ["What is the capital of France?", "Where do the Rhône and the Saône meet?"]


@pytest.fixture(scope="module")
def fp32_reader(tiny_dir):
    return Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32", runtime="torch")


def _key(answers):
    return [(a.passage_id, a.start, a.end, a.text, round(a.probability, 4)) for a in answers]


def test_read_many_answers_each_question_as_read_does(fp32_reader):
    lists = [PASSAGES, list(reversed(PASSAGES[:2]))]
    scores = [[1.0, 0.5, 0.0], [1.0, 0.0]]
    together = fp32_reader.read_many(QUESTIONS, lists, scores, top_n=3, no_answer_threshold=None)
    alone = [
        fp32_reader.read(q, ps, s, top_n=3, no_answer_threshold=None) for q, ps, s in zip(QUESTIONS, lists, scores)
    ]
    assert [_key(a) for a in together] == [_key(a) for a in alone]
    with pytest.raises(OdqaError, match="2 questions, 1 passage lists"):
        fp32_reader.read_many(QUESTIONS, [PASSAGES])


def test_an_int8_answer_does_not_depend_on_the_other_questions_read_with_it(tiny_dir):
    """int8 quantises each forward batch's activations with one scale: windows of other questions (long ones,
    with their padding) in the batch would move a question's logits, so its probability would change with the
    batch it happens to be read in (`ask` alone against the same question inside `predict`)."""
    r = Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32", runtime="torch").quantize_int8()
    r.settings.precision = "int8"
    question, passages = QUESTIONS[0], PASSAGES[:2]
    others = [
        Passage(f"o{i}", "Other", " ".join(["The Rhône meets the Saône at Lyon, a city of silk."] * (6 + i)))
        for i in range(4)
    ]
    alone = r.read(question, passages, top_n=3, no_answer_threshold=None)
    together = r.read_many(
        ["Which river crosses Lyon?", question, "Where is silk woven?"],
        [others[:2], passages, others[2:]],
        top_n=3,
        no_answer_threshold=None,
    )[1]
    exact = [(a.passage_id, a.start, a.end, a.score, a.probability) for a in alone]
    assert exact == [(a.passage_id, a.start, a.end, a.score, a.probability) for a in together]


def test_early_stop_reads_the_rest_only_when_the_first_passages_are_not_decisive(fp32_reader):
    """With a fitted calibration; without one (sigmoid of the margin, no probability) every passage is read."""
    import dataclasses

    settings, unfitted = fp32_reader.settings, fp32_reader.calibration
    full = fp32_reader.read(QUESTIONS[0], PASSAGES[:2], no_answer_threshold=None)
    try:
        settings.early_stop_passages, settings.early_stop_probability = 1, 0.0
        before = fp32_reader.passages_read
        fp32_reader.read(QUESTIONS[0], PASSAGES[:2], no_answer_threshold=None)
        assert not unfitted.fitted and fp32_reader.passages_read - before == 2
        fp32_reader.calibration = dataclasses.replace(unfitted, fitted=True)
        settings.early_stop_probability = 0.0  # any answer decides: the second passage is never read
        before = fp32_reader.passages_read
        stopped = fp32_reader.read(QUESTIONS[0], PASSAGES[:2], no_answer_threshold=None)
        assert fp32_reader.passages_read - before == 1
        assert stopped and {a.passage_id for a in stopped} == {"p1"}
        settings.early_stop_probability = 1.1  # nothing decides: both passages are read, as without stopping
        before = fp32_reader.passages_read
        assert _key(fp32_reader.read(QUESTIONS[0], PASSAGES[:2], no_answer_threshold=None)) == _key(full)
        assert fp32_reader.passages_read - before == 2
    finally:
        settings.early_stop_passages, settings.early_stop_probability = 0, 1.0
        fp32_reader.calibration = unfitted


def test_early_stop_unset_stops_where_the_reader_would_call_the_answer_confident(fp32_reader):
    """Issue 64 item 7: unset, the bar is the reader's own confidence threshold, so one reader's probabilities are
    never judged by a number chosen for another's."""
    import dataclasses

    settings, unfitted = fp32_reader.settings, fp32_reader.calibration
    try:
        settings.early_stop_passages, settings.early_stop_probability = 1, None
        for threshold, passages_read in ((0.0, 1), (1.1, 2)):  # every answer confident / none confident
            fp32_reader.calibration = dataclasses.replace(unfitted, fitted=True, threshold=threshold)
            before = fp32_reader.passages_read
            fp32_reader.read(QUESTIONS[0], PASSAGES[:2], no_answer_threshold=None)
            assert fp32_reader.passages_read - before == passages_read, threshold
    finally:
        settings.early_stop_passages, settings.early_stop_probability = 0, 1.0
        fp32_reader.calibration = unfitted
