"""A pipeline without a model for the HTTP API's tests (tests/reliability), and a client of `create_app` over it."""

from __future__ import annotations

import pytest

from odqa.config import OdqaConfig
from odqa.core.types import Answer, SearchHit


class StubPipeline:
    """What create_app asks of a pipeline, without a model: ask_batch gives one answer of the score and
    probability set here."""

    def __init__(self, score: float = 1.0, probability: float = 0.9):
        self.config = OdqaConfig()
        self.score, self.probability = score, probability
        self.linker = None
        self.reader_name = "reader"

    def ask_batch(self, questions, k=None, retriever=None):
        from odqa.pipeline import Result

        answer = Answer(
            text="William Shakespeare",
            score=self.score,
            probability=self.probability,
            passage_id="p1",
            title="Hamlet",
            start=0,
            end=19,
            context="William Shakespeare wrote Hamlet.",
        )
        return [
            Result(question=q, answers=[answer], passages=[SearchHit(1, self.score, source="bm25")]) for q in questions
        ]

    def inference_plans(self):
        return {}


@pytest.fixture()
def serve_client(monkeypatch):
    from fastapi.testclient import TestClient

    import odqa.serve.app
    from odqa.serve.settings import ServeSettings

    monkeypatch.setattr(
        odqa.serve.app, "warm_up", lambda pipeline: {"passages": 1, "language": "en", "location": "stub-index"}
    )

    def client(pipeline=None):
        return TestClient(
            odqa.serve.app.create_app(pipeline or StubPipeline(), ServeSettings(max_k=100)),
            raise_server_exceptions=False,
        )

    return client
