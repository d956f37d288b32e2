"""What every reader must do, whichever answers its model picks (odqa.core.protocols.Reader): call
`check_reader(reader)` from a test of your reader. It asserts behaviour only (the shape and honesty of answers:
each one a span of a passage read, at the offsets it gives; probabilities in [0, 1]; best first; `top_n`
respected; bad input refused in one line), never which answer a model chooses.

    from odqa.testing.reader_conformance import check_reader

    def test_my_reader_conforms():
        check_reader(MyReader())
"""

from __future__ import annotations

from collections.abc import Sequence

from odqa.core.errors import OdqaError
from odqa.core.protocols import Reader
from odqa.core.types import Answer, Passage

QUESTIONS = ("Who discovered penicillin?", "Where is the Eiffel Tower?")
PASSAGES = (
    [
        Passage(id="fleming", title="Penicillin", text="Alexander Fleming discovered penicillin in 1928 in London."),
        Passage(id="empty", title="Empty", text="   "),
        Passage(id="mould", title="Mould", text="Penicillin comes from the Penicillium mould."),
    ],
    [Passage(id="eiffel", title="Eiffel Tower", text="The Eiffel Tower stands on the Champ de Mars in Paris.")],
)


def check_answer(answer: Answer, passages: Sequence[Passage]) -> None:
    """`answer` is a non-empty span of one of `passages`, at its offsets, with a probability in [0, 1]."""
    assert isinstance(answer, Answer), f"an answer must be an odqa.core.types.Answer, got {type(answer).__name__}"
    assert answer.text.strip(), f"empty answer: {answer!r}"
    texts = {p.id: p.text for p in passages}
    assert answer.passage_id in texts, f"answer {answer.text!r} names passage {answer.passage_id!r}, not one read"
    span = texts[answer.passage_id][answer.start : answer.end]
    assert 0 <= answer.start < answer.end <= len(texts[answer.passage_id]), f"offsets out of the passage: {answer!r}"
    # a reader may trim a closing particle or punctuation from the span it points at, never add to it
    assert answer.text in span, f"answer {answer.text!r} is not the span {span!r} its offsets point at"
    assert 0.0 <= answer.probability <= 1.0, f"probability {answer.probability} of {answer.text!r} is not in [0, 1]"
    assert not (answer.confident and not answer.calibrated), "an uncalibrated answer is never confident"


def check_declares_what_the_pipeline_uses(reader: Reader) -> None:
    assert isinstance(reader, Reader), "a reader has name, languages, no_answer_threshold, calibration, plan, read*"
    assert isinstance(reader.name, str) and reader.name
    languages = reader.languages
    assert languages is None or (isinstance(languages, list) and all(isinstance(x, str) for x in languages))
    assert 0.0 <= reader.calibration.threshold <= 1.0
    assert reader.plan.label.strip(), "the plan names the runtime and precision it reads with"


def check_reads_spans_best_first(reader: Reader) -> None:
    for question, passages in zip(QUESTIONS, PASSAGES):
        answers = reader.read(question, list(passages), [1.0] * len(passages), top_n=2)
        assert len(answers) <= 2, f"top_n=2 gave {len(answers)} answers"
        for answer in answers:
            check_answer(answer, passages)
        scores = [a.score for a in answers]
        assert scores == sorted(scores, reverse=True), f"answers not best first: {scores}"
        assert len({a.text for a in answers}) == len(answers), "the same answer twice"


def check_read_many_is_read_per_question(reader: Reader) -> None:
    together = reader.read_many(
        list(QUESTIONS), [list(p) for p in PASSAGES], None, top_n=1, subjects=[None] * len(QUESTIONS)
    )
    assert len(together) == len(QUESTIONS), "one answer list per question, in order"
    for question, passages, answers in zip(QUESTIONS, PASSAGES, together):
        alone = reader.read(question, list(passages), None, top_n=1)
        assert [(a.text, a.passage_id, a.start) for a in answers] == [(a.text, a.passage_id, a.start) for a in alone]


def check_read_batch_gives_one_answer_per_question(reader: Reader) -> None:
    contexts = [PASSAGES[0][0].text, PASSAGES[1][0].text]
    answers = reader.read_batch(list(QUESTIONS), contexts, None)
    assert len(answers) == len(QUESTIONS), "one answer (or None) per question"
    for answer, context in zip(answers, contexts):
        assert answer is not None, "without a threshold a reader always answers"
        assert answer.text and answer.text in context[answer.start : answer.end]


def check_refuses_bad_input_in_one_line(reader: Reader) -> None:
    for question, passages in (("", list(PASSAGES[0])), ("Who?", [])):
        try:
            reader.read(question, passages)
        except OdqaError as exc:
            assert "\n" not in str(exc) and str(exc), f"not one line: {exc!r}"
        else:
            raise AssertionError(f"read({question!r}, {len(passages)} passages) was not refused")
    try:
        reader.read(QUESTIONS[0], list(PASSAGES[0]), [1.0])
    except OdqaError:
        pass
    else:
        raise AssertionError("one retrieval score for three passages was not refused")


CHECKS = (
    check_declares_what_the_pipeline_uses,
    check_reads_spans_best_first,
    check_read_many_is_read_per_question,
    check_read_batch_gives_one_answer_per_question,
    check_refuses_bad_input_in_one_line,
)


def check_reader(reader: Reader) -> None:
    """Every check above, in order; the first that fails raises AssertionError naming the problem."""
    for check in CHECKS:
        check(reader)
