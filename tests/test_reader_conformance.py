"""The reader seam: every reader passes odqa.testing.reader_conformance, and a reader family registered with one
line (reader.registry.READERS) serves the pipeline, `eval-reader` and `/ask`, built by build_reader as the
shipped reader is."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.runtime import InferencePlan
from odqa.core.types import Answer, Passage
from odqa.reader.calibration import Calibration
from odqa.reader.registry import READERS, build_reader
from odqa.reader.settings import ReaderSettings
from odqa.testing.reader_conformance import check_answer, check_reader
from tests.answer_checks import assert_answer_read_from

CAPITALISED = re.compile(r"[A-Z][\w-]*(?: [A-Z][\w-]*)*")


class CapitalisedRunReader:
    """A reader without a model: each passage's first run of capitalised words not in the question."""

    def __init__(self, settings: ReaderSettings | None = None):
        self.settings = settings or ReaderSettings()
        self.name = "capitalised-runs"
        self.calibration = Calibration()
        self.plan = InferencePlan("python", "fp32", "no model")

    @property
    def languages(self) -> list[str] | None:
        return ["en"]

    @property
    def no_answer_threshold(self) -> float | None:
        return None

    def _spans(self, question: str, passage: Passage) -> Answer | None:
        asked = set(question.split())
        for found in CAPITALISED.finditer(passage.text):
            if found.group() not in asked:
                text, start = found.group(), found.start()
                return Answer(
                    text=text,
                    score=float(len(text)),
                    probability=0.5,
                    passage_id=passage.id,
                    title=passage.title,
                    start=start,
                    end=start + len(text),
                    context=passage.text,
                    confident=False,
                    calibrated=False,
                )
        return None

    def read(self, question, passages, retrieval_scores=None, top_n=None) -> list[Answer]:
        scores = [retrieval_scores] if retrieval_scores is not None else None
        return self.read_many([question], [passages], scores, top_n)[0]

    def read_many(self, questions, passages, retrieval_scores=None, top_n=None, *, subjects=None) -> list[list[Answer]]:
        out = []
        for i, (question, read) in enumerate(zip(questions, passages)):
            if not question.strip():
                raise OdqaError("the question is empty")
            if not read:
                raise OdqaError("no passages to read (the passage list is empty)")
            if retrieval_scores is not None and len(retrieval_scores[i]) != len(read):
                raise OdqaError(f"{len(retrieval_scores[i])} retrieval scores for {len(read)} passages")
            found = [a for p in read if p.text.strip() and (a := self._spans(question, p)) is not None]
            unique = {a.text: a for a in reversed(found)}  # the first passage's, where two give one text
            ranked = sorted(unique.values(), key=lambda a: -a.score)
            out.append(ranked[: top_n or self.settings.top_n])
        return out

    def read_batch(self, questions: Sequence[str], contexts: Sequence[str], no_answer_threshold=None, titles=None):
        titles = titles if titles is not None else [""] * len(questions)
        return [
            (self.read(q, [Passage(id="", title=t, text=c)], top_n=1) or [None])[0]
            for q, c, t in zip(questions, contexts, titles)
        ]


def _demo_pipeline(reader: str):
    from odqa.demo_corpus import demo_index_path
    from odqa.pipeline import Pipeline

    config = OdqaConfig.load(None, {"reader.model": reader, "linker.enabled": False})
    return Pipeline(config, default_index=demo_index_path)


@pytest.fixture
def registered():
    """The toy family, registered with the one line a new reader family needs."""
    READERS.register("capitalised-runs", lambda settings, device, explicit: CapitalisedRunReader(settings))
    yield "capitalised-runs"
    READERS.unregister("capitalised-runs")


def test_the_toy_reader_conforms():
    check_reader(CapitalisedRunReader())


def test_the_shipped_reader_conforms():
    check_reader(build_reader(ReaderSettings(model="reader")))


def test_the_suite_fails_a_reader_whose_offsets_point_elsewhere():
    class Shifted(CapitalisedRunReader):
        def _spans(self, question, passage):
            answer = super()._spans(question, passage)
            if answer is not None:
                answer.start, answer.end = answer.start + 1, answer.end + 1
            return answer

    with pytest.raises(AssertionError, match="is not the span"):
        check_reader(Shifted())
    with pytest.raises(AssertionError, match="not one read"):
        check_answer(Answer(text="Paris", score=1.0, passage_id="elsewhere"), [Passage("p", "t", "Paris")])


def test_a_registered_reader_serves_the_pipeline(registered):
    pipeline = _demo_pipeline(registered)
    result = pipeline.ask("Which element did Marie Curie name after her native country?")
    assert isinstance(pipeline.reader, CapitalisedRunReader)
    assert result.answers
    for answer in result.answers:
        assert_answer_read_from(answer, result.passages)


def test_a_registered_reader_serves_eval_reader(registered, tmp_path, capsys):
    from odqa.cli import main

    context = "Alexander Fleming discovered penicillin in 1928 in London."
    squad = {
        "data": [
            {
                "title": "Penicillin",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": "q1",
                                "question": "Who discovered penicillin?",
                                "answers": [{"text": "Alexander Fleming", "answer_start": 0}],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(squad), encoding="utf-8")
    assert main(["eval-reader", "--data", str(data), "--model", registered, "--json", "-q"]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["questions"] == 1 and 0.0 <= metrics["f1"] <= 100.0
    assert metrics["inference"]["reader"]["runtime"] == "python"  # the toy read, not a checkpoint


def test_a_registered_reader_serves_ask_over_http(registered):
    from fastapi.testclient import TestClient

    from odqa.serve.app import create_app

    pipeline = _demo_pipeline(registered)
    with TestClient(create_app(pipeline)) as client:
        response = client.post("/ask", json={"question": "Where was Albert Einstein born?"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answers"], body
    for answer in body["answers"]:
        assert_answer_read_from(answer, body["passages"])


def test_an_unknown_reader_name_is_a_checkpoint_and_refused_in_one_line(tmp_path):
    with pytest.raises(OdqaError) as refused:
        build_reader(ReaderSettings(model=str(tmp_path / "no-such-reader")))
    assert "\n" not in str(refused.value)
