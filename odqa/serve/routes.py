"""The routes: POST /ask, /ask/batch, /search, /link; GET /health, /info, the page at /, /docs and /redoc. What
they need of the server (the pipeline, the settings, the worker, the key) is the `ServerState` create_app stores
as `app.state.server`, reached through the `server_state` dependency."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from functools import cached_property
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.security import APIKeyHeader

from odqa import __version__
from odqa.core.errors import OdqaError
from odqa.core.settings import Number
from odqa.indexes.analysis import LANGUAGE_NAMES, detect_language
from odqa.pipeline import Pipeline, clean_question
from odqa.retriever.registry import RETRIEVERS
from odqa.serve.errors import ERRORS, FieldError, ServerFailure, log_failure, non_finite
from odqa.serve.middleware import MAX_BODY_BYTES
from odqa.serve.models import (
    AUTO_LANGUAGE,
    K_RULE,
    MAX_BATCH_QUESTIONS,
    AnswerOut,
    AskBatchRequest,
    AskBatchResponse,
    AskRequest,
    AskResponse,
    HealthResponse,
    InfoResponse,
    LinkRequest,
    LinkResponse,
    LockedInfo,
    MentionOut,
    Outcome,
    PassageOut,
    SearchRequest,
    SearchResponse,
    number_problem,
)
from odqa.serve.public import public_text
from odqa.serve.settings import API_KEY_HEADER, ServeSettings
from odqa.serve.worker import Answered, PipelineWorker, QueueFull

STATIC = resources.files("odqa.serve") / "static"
PAGE_HEADERS = {
    # the page's script and style are files of this server: an injected inline script would not run
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Swagger UI and ReDoc: the files fastapi-offline carries (the serve extra), served by the app itself, so /docs and
# /redoc work offline and their policy lets nothing in from elsewhere
DOCS_ASSETS = "/docs-assets"
DOCS_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
JSON_PATHS = ("/ask", "/ask/batch", "/search", "/link")  # the routes whose body is a JSON object
PAGE = (STATIC / "index.html").read_text(encoding="utf-8")
ICON = (STATIC / "favicon.svg").read_bytes()


@dataclasses.dataclass
class ServerState:
    """One server's pipeline, limits and key; `index` (its summary) and `places` (its folders, kept out of what
    visitors read) are filled in when the models have loaded."""

    pipeline: Pipeline
    settings: ServeSettings
    api_key: str | None = dataclasses.field(repr=False)  # a secret: kept out of any log line that shows the state
    worker: PipelineWorker
    index: dict[str, Any] = dataclasses.field(default_factory=dict)
    places: list[str] = dataclasses.field(default_factory=list)

    @cached_property
    def k_rule(self) -> Number:
        """k's own rule, and this server's limit."""
        return dataclasses.replace(K_RULE, maximum=self.settings.max_k)


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]
key_header = APIKeyHeader(
    name=API_KEY_HEADER,
    auto_error=False,
    description="the key named by the server's --api-key-env, where it was started with one",
)
SentKey = Annotated[str | None, Depends(key_header)]


async def check_key(state: State, sent: SentKey) -> None:
    if state.api_key and not (sent and secrets.compare_digest(sent.encode(), state.api_key.encode())):
        raise FieldError(
            API_KEY_HEADER,
            f"{'wrong' if sent else 'missing'} API key: send the server's key in the {API_KEY_HEADER} header",
            status=401,
            loc=["header", API_KEY_HEADER],
            kind="api_key_wrong" if sent else "api_key_missing",
        )


async def answered(future) -> Any:
    try:
        return await asyncio.wrap_future(future)
    except OdqaError as exc:  # one line written for people, secrets scrubbed where they are raised
        raise ServerFailure(str(exc)) from None
    except Exception as exc:
        raise ServerFailure(log_failure(exc, "the pipeline", non_finite(exc))) from None


def submit(call, *args) -> Any:
    try:
        return call(*args)
    except QueueFull as exc:
        raise ServerFailure(f"the server is busy ({exc}); retry in a moment", 503, {"Retry-After": "1"}) from None


def checked_question(state: ServerState, question: str, field: str = "question") -> tuple[str, list[str]]:
    """The question cleaned, or a 422 naming `field` (a batch's `questions.N`)."""
    loc: list[str | int] = ["body", *(int(part) if part.isdigit() else part for part in field.split("."))]
    limit = state.settings.max_question_chars
    if len(question) > limit:
        raise FieldError(
            field,
            f"{len(question):,} characters, over the {limit:,} this server accepts; ask a shorter question",
            loc=loc,
        )
    try:
        return clean_question(question)
    except OdqaError as exc:
        raise FieldError(field, str(exc), loc=loc) from None


def public_notices(state: ServerState, notices: list[str]) -> list[str]:
    """Notices as a visitor may read them: no folder of this server (odqa.serve.public)."""
    return [public_text(notice, state.places) for notice in notices]


async def check_retriever(state: ServerState, kind: str | None) -> None:
    """A retriever the request names that this index cannot serve (dense over a BM25-only index) is the
    client's choice: 422 naming the field, not a failure of the server."""
    if kind is None:
        return
    try:
        await asyncio.wrap_future(submit(state.worker.call, lambda p: p.retriever(kind)))
    except OdqaError as exc:
        raise FieldError("retriever", str(exc)) from None


def checked_k(state: ServerState, k: int | None) -> int | None:
    max_k = state.settings.max_k
    problem = None if k is None else number_problem(k, state.k_rule, f" (this server reads {max_k} passages at most)")
    if problem:
        raise FieldError("k", problem)
    return k


async def ask_response(state: ServerState, text: str, language_asked: str | None, future) -> AskResponse:
    """The /ask answer of a question `text` (checked) whose pipeline job is `future`."""
    language = detect_language([text]) if language_asked in (None, AUTO_LANGUAGE) else language_asked
    done: Answered = await answered(future)
    result = done.result
    notices = list(result.notices)
    index_language = state.index.get("language", "en")
    # the pipeline does not search a question in another language than the index's (its notice says so)
    not_searched = not result.passages and await answered(
        submit(state.worker.call, lambda p: p.language_differs(result.question) is not None)
    )
    answered_across = result.route is not None and result.route.cross_language  # its plan says how
    if language != index_language and not not_searched and not answered_across:
        notices.append(
            f"the question is {LANGUAGE_NAMES[language]} but the index holds "
            f"{LANGUAGE_NAMES.get(index_language, index_language)} passages"
            + (
                ": answers may be poor"
                if result.answers
                else ", which may be why no answer was found"
                if result.passages
                else ", which may be why no passage was retrieved"
            )
        )
    outcome: Outcome = (
        "language_differs"
        if not_searched
        else "no_passages"
        if not result.passages
        else "no_answer"
        if not result.answers
        else "answer"
        if result.confident
        else "best_guess"
    )
    answers = [AnswerOut.of(a) for a in result.answers]
    timings = {name: round(seconds * 1000, 1) for name, seconds in result.timings.items()}
    timings["queue"] = round(done.waited * 1000, 1)
    return AskResponse(
        question=result.question,
        language=language,
        confident=result.confident,
        outcome=outcome,
        answer=answers[0] if answers else None,
        answers=answers,
        passages=[PassageOut.of(i, h) for i, h in enumerate(result.passages, 1)],
        mentions=[MentionOut.of(m) for m in result.mentions],
        timings_ms=timings,
        batch_size=done.batch_size,
        notices=public_notices(state, notices),
        route=result.route.to_dict() if result.route is not None and not result.route.refused else None,
    )


router = APIRouter()


@router.post(
    "/ask",
    response_model=AskResponse,
    responses=ERRORS,
    dependencies=[Depends(check_key)],
    summary="Answer a question: answers with calibrated probabilities, their passages, linked entities",
)
async def ask(body: AskRequest, state: State) -> AskResponse:
    text, _ = checked_question(state, body.question)
    k = checked_k(state, body.k)
    await check_retriever(state, body.retriever)
    return await ask_response(state, text, body.language, submit(state.worker.ask, body.question, k, body.retriever))


@router.post(
    "/ask/batch",
    response_model=AskBatchResponse,
    responses=ERRORS,
    dependencies=[Depends(check_key)],
    summary=f"Answer several questions (at most {MAX_BATCH_QUESTIONS}) read together: each result as /ask "
    "gives it, in the order asked",
)
async def ask_batch(body: AskBatchRequest, state: State) -> AskBatchResponse:
    texts = [checked_question(state, question, f"questions.{i}")[0] for i, question in enumerate(body.questions)]
    k = checked_k(state, body.k)
    await check_retriever(state, body.retriever)
    futures = submit(state.worker.ask_many, body.questions, k, body.retriever)
    return AskBatchResponse(
        results=[await ask_response(state, text, body.language, future) for text, future in zip(texts, futures)]
    )


@router.post(
    "/search",
    response_model=SearchResponse,
    responses=ERRORS,
    dependencies=[Depends(check_key)],
    summary="The passages the retriever ranks first (no reading, no linking)",
)
async def search(body: SearchRequest, state: State) -> SearchResponse:
    text, notices = checked_question(state, body.question)
    k = checked_k(state, body.k)
    await check_retriever(state, body.retriever)
    started = time.perf_counter()
    hits = await answered(submit(state.worker.search, text, k, body.retriever))
    return SearchResponse(
        question=text,
        passages=[PassageOut.of(i, h) for i, h in enumerate(hits, 1)],
        timings_ms={"total": round((time.perf_counter() - started) * 1000, 1)},
        notices=public_notices(state, notices),
    )


@router.post(
    "/link",
    response_model=LinkResponse,
    responses=ERRORS,
    dependencies=[Depends(check_key)],
    summary="The entities of the knowledge base the question mentions",
)
async def link(body: LinkRequest, state: State) -> LinkResponse:
    text, notices = checked_question(state, body.question)
    started = time.perf_counter()
    mentions = await answered(submit(state.worker.link, text))
    enabled, off = await answered(submit(state.worker.call, lambda p: (p.linker is not None, p.linker_off)))
    if not enabled:
        notices.append(off or "entity linking is off on this server")
    return LinkResponse(
        question=text,
        mentions=[MentionOut.of(m) for m in mentions],
        linker_enabled=enabled,
        timings_ms={"total": round((time.perf_counter() - started) * 1000, 1)},
        notices=public_notices(state, notices),
    )


@router.get("/health", response_model=HealthResponse, summary="The server is up, its models loaded")
async def health(state: State) -> HealthResponse:
    return HealthResponse(passages=state.index["passages"])


@router.get(
    "/info",
    response_model=InfoResponse | LockedInfo,
    responses=ERRORS,
    summary="The index (manifest summary), the models and how each runs; without the key a server wants, "
    "only that it wants one",
)
async def info(state: State, sent: SentKey) -> InfoResponse | LockedInfo:
    if state.api_key and not sent:  # a client (the page) learns that it must ask for a key; a wrong one is a 401
        return LockedInfo(version=__version__, api_key_header=API_KEY_HEADER)
    await check_key(state, sent)
    plans, linking = await answered(submit(state.worker.call, lambda p: (p.inference_plans(), p.linker is not None)))
    settings, config = state.settings, state.pipeline.config
    models = {
        "reader": state.pipeline.reader_name,
        "encoder": state.index.get("encoder", ""),
        "linker": config.linker.model if linking else "",  # none: disabled, or no knowledge base to link against
    }
    return InfoResponse(
        version=__version__,
        index=state.index,
        models=models,
        inference={name: {k: str(v) for k, v in plan.items()} for name, plan in plans.items()},
        retrievers=list(RETRIEVERS.names),
        defaults={"retriever": config.retrieval.retriever, "k": config.retrieval.k},
        limits={
            "max_k": settings.max_k,
            "max_question_chars": settings.max_question_chars,
            "max_batch": settings.max_batch,
            "max_batch_questions": MAX_BATCH_QUESTIONS,
            "max_body_bytes": MAX_BODY_BYTES,
        },
        api_key_required=bool(state.api_key),
        batches=dict(state.worker.batches),
    )


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def home() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=PAGE_HEADERS)


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    """The page's icon where a browser asks for it by its old name (an SVG: every current browser draws it)."""
    return Response(ICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400", **PAGE_HEADERS})


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
async def swagger_ui(request: Request) -> HTMLResponse:
    return HTMLResponse(
        docs_page(
            "Swagger UI",
            "swagger-ui",
            request.app.openapi_url or "",
            [f"{DOCS_ASSETS}/swagger-ui.css"],
            f"{DOCS_ASSETS}/swagger-ui-bundle.js",
        ),
        headers=DOCS_HEADERS,
    )


@router.get("/redoc", response_class=HTMLResponse, include_in_schema=False)
async def redoc(request: Request) -> HTMLResponse:
    return HTMLResponse(
        docs_page("ReDoc", "redoc", request.app.openapi_url or "", [], f"{DOCS_ASSETS}/redoc.standalone.js"),
        headers=DOCS_HEADERS,
    )


def docs_page(name: str, holder: str, openapi_url: str, styles: list[str], script: str) -> str:
    """/docs or /redoc: `name` (Swagger UI or ReDoc) started by static/docs.js on the element `holder`; the note
    beneath says where the schema is, and stays where the UI does not start (a browser without JavaScript)."""
    links = "".join(f'<link rel="stylesheet" href="{href}">' for href in styles)
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>odqa API: {name}</title>{links}</head>
<body>
<div id="{holder}" data-openapi="{openapi_url}"></div>
<p id="docs-fallback">{name} did not start in this browser: the API's schema is at
<a href="{openapi_url}">{openapi_url}</a>, and the page at <a href="/">/</a> asks questions.</p>
<script src="{script}"></script>
<script src="/static/docs.js"></script>
</body>
</html>
"""
