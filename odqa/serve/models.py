"""The HTTP API's request and response bodies (pydantic; FastAPI writes the OpenAPI schema from them).

Requests are strict (a number sent as a string, a boolean as a number: 422) and closed (an unknown field, e.g.
a misspelt "retreiver", is named instead of ignored); a number is held to the rule its setting has on the command
line and in a config file (odqa.core.settings.Number: k is RetrievalConfig.k's). Responses hold finite numbers only:
a NaN or an infinity is a failure (500), never `null` or the invalid JSON `NaN`."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from odqa.config import RetrievalConfig
from odqa.core.settings import Number, number_rule
from odqa.core.types import Mention, SearchHit
from odqa.indexes.analysis import LANGUAGES
from odqa.retriever.registry import RETRIEVERS

AUTO_LANGUAGE = "auto"
LANGUAGE_CHOICES = (AUTO_LANGUAGE, *LANGUAGES)  # of a request's `language`
Outcome = Literal["answer", "best_guess", "no_answer", "no_passages", "language_differs"]  # how an /ask ended
K_RULE: Number = number_rule(RetrievalConfig, "k")  # type: ignore[assignment]


def number_problem(value: Any, rule: Number, limit: str = "") -> str | None:
    """Why a request's number breaks `rule`, in one line naming the value as sent, that it came in the request
    body and the range (`limit`: why the range is so); None where it keeps it."""
    why = rule.refusal(value)
    if why is None:
        return None
    return f"{json.dumps(value)} (from the request body) {why}; send {rule.describe()}{limit}"


class Response(BaseModel):
    """A response body: its floats finite (NaN or an infinity fails here, not as `null` or invalid JSON)."""

    model_config = ConfigDict(allow_inf_nan=False)


class Question(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    question: str = Field(
        min_length=1,
        description="the question, in plain language (English, Korean, Chinese)",
        examples=["Who discovered penicillin?"],
    )


def _names_or_null(names) -> Any:
    """json_schema_extra of an optional text field: its string branch lists the names (an enum beside `anyOf`
    would refuse the null the server takes as "the default")."""

    def extra(schema: dict[str, Any]) -> None:
        for branch in schema.get("anyOf", [schema]):
            if branch.get("type") == "string":
                branch["enum"] = list(names)

    return extra


class Passages(BaseModel):
    """How many passages and which retriever: a search's, a question's or a batch's."""

    model_config = ConfigDict(strict=True, extra="forbid")

    k: int | None = Field(None, ge=K_RULE.minimum, description="passages to return (default: the server's retrieval.k)")
    retriever: str | None = Field(
        None,
        description="the retriever (default: the server's retrieval.retriever)",
        json_schema_extra=_names_or_null(RETRIEVERS.names),
    )

    @field_validator("k", mode="before")
    @classmethod
    def _k_rule(cls, value: Any) -> Any:
        problem = None if value is None else number_problem(value, K_RULE)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("retriever")
    @classmethod
    def _known_retriever(cls, value: str | None) -> str | None:
        if value is not None and value not in RETRIEVERS:
            raise ValueError(f"unknown retriever {value!r}; choose one of {', '.join(RETRIEVERS.names)}")
        return value


class SearchRequest(Passages, Question):
    pass


class Reading(Passages):
    """What /ask and /ask/batch read with: passages, retriever and the questions' language."""

    k: int | None = Field(None, ge=K_RULE.minimum, description="passages read (default: the server's retrieval.k)")
    language: Literal[LANGUAGE_CHOICES] | None = Field(  # type: ignore[valid-type]
        AUTO_LANGUAGE,
        description="the question's language (auto or null: from its script); a question in another "
        "language than the index's gets a notice",
    )


class AskRequest(Reading, Question):
    pass


# the most questions one POST /ask/batch carries (its schema says so); more: 422, send them in several batches
MAX_BATCH_QUESTIONS = 64


class Questions(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    questions: list[str] = Field(
        min_length=1,
        max_length=MAX_BATCH_QUESTIONS,
        description=f"the questions, each as /ask's `question` (at most {MAX_BATCH_QUESTIONS}); k, retriever and "
        "language apply to all",
        examples=[["Who discovered penicillin?", "Who painted the Mona Lisa?"]],
    )


class AskBatchRequest(Reading, Questions):
    pass


class LinkRequest(Question):
    pass


class PassageOut(Response):
    rank: int
    id: str
    title: str
    text: str
    doc_id: str = ""
    start: int = Field(0, description="character offset of the passage in its document")
    end: int = 0
    url: str = Field("", description="the source article's address, where the corpus gives one (else empty)")
    score: float
    source: str = Field("", description="the retriever that found it: bm25, dense, hybrid, entity")
    fusion: str = Field(
        "",
        description="what made the score where it is no retriever's own: rrf (a hybrid's reciprocal rank fusion, "
        "about 0.03 at the top), minmax (a hybrid's weighted scores scaled to [0, 1]), es-rrf (Elasticsearch's "
        "rrf), minmax+entity (the entity bonus over scaled scores); empty: the retriever's own score",
    )

    @classmethod
    def of(cls, rank: int, hit: SearchHit) -> PassageOut:
        p = hit.passage
        return cls(
            rank=rank,
            id=hit.passage_id,
            title=p.title if p else "",
            text=p.text if p else "",
            doc_id=p.doc_id if p else "",
            start=p.start if p else 0,
            end=p.end if p else 0,
            url=p.url if p else "",
            score=hit.score,
            source=hit.source,
            fusion=hit.fusion,
        )


class Evidence(Response):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    passage_id: str
    title: str = ""
    start: int = Field(description="character offset of the span in the passage's text")
    end: int
    text: str
    score: float = 0.0


class AnswerOut(Response):
    text: str
    probability: float = Field(description="calibrated probability that the answer is right")
    confident: bool = Field(description="probability at or above the reader's threshold")
    score: float
    passage_id: str
    title: str
    start: int = Field(description="character offset of the answer in its passage's text (Unicode code points)")
    end: int
    context: str = Field(description="the passage text the offsets refer to")
    evidence: list[Evidence] = Field(description="every span merged into this answer, with its passage and offsets")

    @classmethod
    def of(cls, answer) -> AnswerOut:
        return cls(
            text=answer.text,
            probability=answer.probability,
            confident=answer.confident,
            score=answer.score,
            passage_id=answer.passage_id,
            title=answer.title,
            start=answer.start,
            end=answer.end,
            context=answer.context,
            evidence=[Evidence.model_validate(e) for e in answer.evidence],
        )


class MentionOut(Response):
    start: int = Field(description="character offset in the question")
    end: int
    text: str
    entity_id: str | None
    title: str | None
    description: str = ""
    mention_score: float
    entity_score: float
    score: float

    @classmethod
    def of(cls, m: Mention) -> MentionOut:
        e = m.entity
        return cls(
            start=m.start,
            end=m.end,
            text=m.text,
            entity_id=e.id if e else None,
            title=e.title if e else None,
            description=e.description if e else "",
            mention_score=m.mention_score,
            entity_score=m.entity_score,
            score=m.score,
        )


class AskResponse(Response):
    question: str = Field(description="the question as read (whitespace folded, maybe truncated: see notices)")
    language: str = Field(description="the question's language, as given or detected")
    confident: bool = Field(description="the best answer reaches the reader's threshold; else it is a best guess")
    outcome: Outcome = Field(
        description="what happened: a confident answer; a best guess; passages read but no answer in them; no "
        "passage retrieved; or not searched, the question's language differing from the index's (notices)"
    )
    answer: AnswerOut | None = Field(description="the best answer (or best guess), None when nothing was found")
    answers: list[AnswerOut]
    passages: list[PassageOut]
    mentions: list[MentionOut]
    timings_ms: dict[str, float] = Field(
        description="milliseconds per stage (link, retrieve, read, total), and queue: the wait for the models"
    )
    batch_size: int = Field(description="questions read in the same batch as this one")
    notices: list[str]
    route: dict[str, str] | None = Field(
        default=None,
        description="how the question was answered: question_language, passage_language, retriever, reader, and why "
        "where that differs from the configuration (a question in another language than the passages')",
    )


class AskBatchResponse(Response):
    results: list[AskResponse] = Field(description="one /ask answer a question, in the order asked")


class SearchResponse(Response):
    question: str
    passages: list[PassageOut]
    timings_ms: dict[str, float]
    notices: list[str]


class LinkResponse(Response):
    question: str
    mentions: list[MentionOut]
    linker_enabled: bool
    timings_ms: dict[str, float]
    notices: list[str]


class HealthResponse(Response):
    status: Literal["ok"] = "ok"
    passages: int


class InfoResponse(Response):
    version: str
    index: dict[str, Any] = Field(description="the index: where, passages, backends, language, encoder, built")
    models: dict[str, str] = Field(
        description="reader, linker and encoder in use (linker empty: no entity is linked, the linker being off or "
        "the index having no knowledge base)"
    )
    inference: dict[str, dict[str, str]] = Field(description="runtime and precision of each model loaded")
    retrievers: list[str]
    languages: list[str] = Field(default_factory=lambda: [AUTO_LANGUAGE, *LANGUAGES])
    defaults: dict[str, Any]
    limits: dict[str, int]
    api_key_required: bool
    batches: dict[int, int] = Field(description="batch size -> batches read since start")


class LockedInfo(Response):
    """/info to a client that sent no key, where the server wants one: that it does, and in which header."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")  # never mistaken for a full InfoResponse

    version: str
    api_key_required: Literal[True] = True
    api_key_header: str = Field(description="the header that carries the key")


class ErrorDetail(BaseModel):
    """One problem, as FastAPI's own 422 gives it."""

    loc: list[str | int] = Field(
        description='where: ["body", field] or ["header", name]; ["body"] for the body '
        'as a whole, ["server"] for a failure inside'
    )
    msg: str = Field(description="what is wrong, in one line")
    type: str = Field(description="a machine-readable kind, e.g. missing, json_invalid, value_error")


class ErrorResponse(BaseModel):
    error: str = Field(description="one line: what is wrong and what to do")
    field: str | None = Field(None, description="the request field at fault, if one is")
    detail: list[ErrorDetail] = Field(description="every problem, in FastAPI's shape (at least one)")
