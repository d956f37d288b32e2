"""The HTTP API and the page (FastAPI on uvicorn): POST /ask, /search, /link; GET /health, /info, /openapi.json,
/docs, /redoc and the page at /. One `PipelineWorker` thread owns the models (odqa.serve.worker).

Every error is JSON, `{"error": one line, "field": the request field at fault or null, "detail": [{"loc": [...],
"msg": ..., "type": ...}]}` (detail as in FastAPI's own 422): 4xx for a bad request (the field named), 5xx for a
failure inside (no traceback, no secret: those go to the server's log under an id the body gives). The access log
masks every query-string value (a client may put a key there)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
import uuid
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from odqa import __version__
from odqa.core.errors import OdqaError
from odqa.core.logs import failures_reported_once, get_logger
from odqa.core.paths import odqa_home
from odqa.core.secrets import mask_query, remember
from odqa.indexes.analysis import LANGUAGE_NAMES, detect_language
from odqa.pipeline import Pipeline, clean_question
from odqa.retriever.registry import RETRIEVERS
from odqa.serve.http_rules import MAX_PROBLEMS, capped, capped_loc, normalized_origin, slash_redirect
from odqa.serve.models import (
    AUTO_LANGUAGE,
    K_RULE,
    MAX_BATCH_QUESTIONS,
    AnswerOut,
    AskBatchRequest,
    AskBatchResponse,
    AskRequest,
    AskResponse,
    ErrorDetail,
    ErrorResponse,
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
from odqa.serve.public import public_text, server_places
from odqa.serve.settings import API_KEY_HEADER, ServeSettings, api_key_problem, cors_origin_problem
from odqa.serve.worker import Answered, PipelineWorker, QueueFull

log = get_logger("odqa.serve")

STATIC = resources.files("odqa.serve") / "static"
# a body far beyond any question (a 1 MB question still reaches the field check, which names it); bigger ones
# are refused before they are read whole
MAX_BODY_BYTES = 2 * 1024 * 1024
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
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": what}
    for code, what in (
        (401, "missing or wrong API key"),
        (413, "request body too large"),
        (415, "the body is not sent as JSON (Content-Type: application/json)"),
        (422, "a field is missing or wrong"),
        (500, "a failure inside the server"),
        (503, "too many requests waiting"),
    )
}
# where an error that names no request field is, and its type, by status (FastAPI's loc starts with the part of
# the request at fault; a failure inside the server is in none of them)
NO_FIELD: dict[int, tuple[list[str | int], str]] = {
    400: (["body"], "bad_request"),
    404: (["path"], "not_found"),
    405: (["method"], "method_not_allowed"),
    413: (["body"], "body_too_large"),
    500: (["server"], "internal_error"),
    503: (["server"], "server_busy"),
}


ACCESS_LOGGER = "uvicorn.access"


class MaskedQuery(logging.Filter):
    """On uvicorn's access log: a request target keeps its path and names, the values of its query string and of
    its path parameters (`;api_key=...`) become *** (the API reads none; a client may have sent a key there), and
    a known secret anywhere in it is scrubbed (odqa.core.secrets.mask_query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(mask_query(a) if isinstance(a, str) and _target_like(a) else a for a in record.args)
        elif isinstance(record.msg, str) and _target_like(record.msg) and not record.args:
            record.msg = " ".join(mask_query(word) if _target_like(word) else word for word in record.msg.split(" "))
        return True


def _target_like(text: str) -> bool:
    return any(mark in text for mark in "/?;%")


def mask_access_log() -> None:
    """Put `MaskedQuery` on uvicorn's access logger, once (a logger's filters outlive uvicorn's log config)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, MaskedQuery) for f in logger.filters):
        logger.addFilter(MaskedQuery())


class FieldError(Exception):
    """A request field with a value the types allow but the server does not (too long, k above the limit...)."""

    def __init__(
        self, field: str, message: str, status: int = 422, loc: list[str | int] | None = None, kind: str = "value_error"
    ):
        super().__init__(message)
        self.field, self.message, self.status, self.kind = field, message, status, kind
        self.loc = loc or ["body", field]


class ServerFailure(Exception):
    def __init__(self, message: str, status: int = 500, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message, self.status, self.headers = message, status, headers


def error_response(
    status: int,
    message: str,
    field: str | None = None,
    detail: list[ErrorDetail] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The error body; without `detail`, one problem: the message, where and of the type NO_FIELD gives."""
    if not detail:
        loc, kind = NO_FIELD.get(status, (["request"], "error"))
        detail = [ErrorDetail(loc=loc, msg=message, type=kind)]
    body = ErrorResponse(error=message, field=field, detail=detail)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _field_of(error: dict) -> str:
    """The request field a pydantic error is about: ("body", "question") -> question; the body itself (not JSON,
    not an object): body."""
    if error.get("type") == "json_invalid":
        return "body"  # its loc holds the character position, not a field
    return ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413, by its Content-Length before it is read, a
    chunked one as soon as it passes the limit. A body within it is read here and handed on whole; one sent to
    `json_paths` not as JSON (text, form data, no content type) gets 415; a JSON body that is not UTF-8 gets 422
    naming the byte."""

    def __init__(self, app, limit: int, json_paths: tuple[str, ...] = ()):
        self.app, self.limit, self.json_paths = app, limit, json_paths

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if length.isdigit() and int(length) > self.limit:
            return await self._refuse(int(length), scope, receive, send)
        parts, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message], receive), send)  # the client left
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                return await self._refuse(size, scope, receive, send)
        body = b"".join(parts)
        kind = _content_type(scope)
        # FastAPI reads a body as JSON only where its content type says so (a browser sends text or form data
        # to any site without asking first); it would then fail on the bytes with a message about types
        if scope["method"] == "POST" and scope["path"] in self.json_paths and not _is_json(kind) and (body or kind):
            problem = ErrorDetail(loc=["header", "Content-Type"], msg=_not_json(kind), type="unsupported_media_type")
            return await error_response(415, problem.msg, "Content-Type", [problem])(scope, receive, send)
        if body and _is_json(kind):
            try:  # JSON between systems is UTF-8 (RFC 8259); a reader guessing UTF-16 from the bytes says less
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                problem = ErrorDetail(loc=["body"], msg=_not_utf8(exc), type="json_invalid")
                return await error_response(422, f"body: {problem.msg}", "body", [problem])(scope, receive, send)
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)

    async def _refuse(self, size: int, scope, receive, send):
        message = (
            f"the request body holds {size:,} bytes or more, over the "
            f"{self.limit:,} this server reads; send one question per request"
        )
        await error_response(413, message, "body")(scope, receive, send)


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _content_type(scope) -> str:
    """The request's media type, lower case, without parameters ("" where it gives none)."""
    return Headers(scope=scope).get("content-type", "").split(";")[0].strip().lower()


def _is_json(kind: str) -> bool:
    """Whether FastAPI reads a body of this media type as JSON: application/json or application/...+json."""
    main, _, sub = kind.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def _not_json(kind: str) -> str:
    sent = f"sent as {kind}{' (form data)' if kind in FORM_TYPES else ''}" if kind else "sent with no Content-Type"
    return (
        f"the body is {sent}, which this API does not read; send JSON with the header Content-Type: "
        """application/json, e.g. {"question": "..."} (curl: -H 'content-type: application/json')"""
    )


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return (
        f'not UTF-8 text (byte {exc.start}: {exc.reason}); send the JSON encoded as UTF-8, e.g. {{"question": "..."}}'
    )


def _replay(messages: list[dict], receive):
    async def replayed():
        return messages.pop(0) if messages else await receive()

    return replayed


class UnexpectedFailure:
    """ASGI middleware inside CORS: an exception no handler took becomes the API's 500 here, so the answer
    carries the CORS headers a browser needs to read it (Starlette answers it in its outermost layer, outside
    every middleware). A failure after the response began is left to the server, which closes the connection."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except Exception as exc:
            if started:
                raise
            message = _log_failure(exc, scope.get("path", "the server"), _non_finite(exc))
            await error_response(500, message)(scope, receive, send)


class CORS(CORSMiddleware):
    """Starlette's CORS middleware; a preflight it refuses is answered in the API's error shape, not plain text."""

    def preflight_response(self, request_headers: Headers):
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = bytes(response.body).decode().removeprefix("Disallowed CORS ").split(", ")
        header = {"origin": "Origin", "method": "Access-Control-Request-Method"}.get(
            refused[0], "Access-Control-Request-Headers"
        )
        message = (
            f"CORS preflight refused ({', '.join(refused)} not allowed): pages of the origins the server's "
            f"--cors-origin names may call GET and POST with Content-Type and {API_KEY_HEADER}"
        )
        headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
        problem = ErrorDetail(loc=["header", header], msg=message, type="cors_refused")
        return error_response(response.status_code, message, header, [problem], headers)


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


def index_summary(pipeline: Pipeline) -> dict[str, Any]:
    """Where the index is, its size, and what it says of itself (`SearchBackend.info()`: a folder's manifest, an
    Elasticsearch index's `_meta`)."""
    info = pipeline.bundle.info()
    return {"location": info.location, "passages": len(pipeline.bundle), **info.summary}


WARM_UP_QUESTION = "Who wrote it?"


def warm_up(pipeline: Pipeline) -> dict[str, Any]:
    """Load every model once, before the first request, and describe the index. One question goes all the way
    through: the runtimes open their sessions and graphs on first use, which would otherwise fall on the first
    person to ask."""
    pipeline.ask(WARM_UP_QUESTION)
    return index_summary(pipeline)


def create_app(pipeline: Pipeline, settings: ServeSettings | None = None, api_key: str | None = None) -> FastAPI:
    """The app over `pipeline` (its models load when the app starts: uvicorn's startup, or entering a TestClient).
    `api_key`: every request but /health, the page and the schema must send it in the X-API-Key header."""
    settings = settings or ServeSettings()
    if api_key and api_key_problem(api_key):
        raise OdqaError(
            f"the API key {api_key_problem(api_key)}, which no request can send in the {API_KEY_HEADER} "
            "header; use one line of printable ASCII"
        )
    for origin in settings.cors_origin:
        if cors_origin_problem(origin):
            raise OdqaError(f"CORS origin {origin!r} {cors_origin_problem(origin)}")
    origins = cors_origins(settings.cors_origin)
    if api_key:
        remember(api_key)  # scrubbed wherever it shows: a log line, a path segment in the access log
    mask_access_log()
    k_rule = dataclasses.replace(K_RULE, maximum=settings.max_k)  # k's own rule, and this server's limit
    worker = PipelineWorker(pipeline, max_batch=settings.max_batch, max_queue=settings.max_queue)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # uvicorn made its handlers by now: a log that cannot be written (a full disk) says so once, not per request
        failures_reported_once(ACCESS_LOGGER, "uvicorn.error", "odqa")
        worker.start()
        started = time.perf_counter()
        state["index"] = await asyncio.wrap_future(worker.call(warm_up))
        state["places"] = server_places(
            [state["index"]["location"], pipeline.config.index, pipeline.config.linker.kb, pipeline.reader_name]
            + [odqa_home()]
        )
        log.info("models loaded in %.1f s; %d passages", time.perf_counter() - started, state["index"]["passages"])
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, worker.stop)

    # FastAPI's own /docs and /redoc load their scripts from a CDN (blank offline) and run an inline one
    app = FastAPI(
        title="odqa",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # a trailing slash is answered by http_error below, with a path on this server: Starlette's own redirect
        # names the host of the request's Host header, which the client chooses
        redirect_slashes=False,
        description="Open-domain question answering over one index: ask, search, link.",
    )
    app.add_middleware(UnexpectedFailure)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES, json_paths=JSON_PATHS)
    if origins:  # added last, so outermost: the refusals of BodyLimit carry its headers too
        app.add_middleware(
            CORS,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", API_KEY_HEADER],
            expose_headers=["Retry-After"],
        )
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.mount(DOCS_ASSETS, StaticFiles(packages=[("fastapi_offline", "static")]), name="docs-assets")
    key_header = APIKeyHeader(
        name=API_KEY_HEADER,
        auto_error=False,
        description="the key named by the server's --api-key-env, where it was started with one",
    )

    async def check_key(sent: str | None = Depends(key_header)) -> None:
        if api_key and not (sent and secrets.compare_digest(sent.encode(), api_key.encode())):
            raise FieldError(
                API_KEY_HEADER,
                f"{'wrong' if sent else 'missing'} API key: send the server's key in the {API_KEY_HEADER} header",
                status=401,
                loc=["header", API_KEY_HEADER],
                kind="api_key_wrong" if sent else "api_key_missing",
            )

    # ---- errors -------------------------------------------------------------------------------------------
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors() or [{"loc": ("body",), "msg": "invalid request", "type": "value_error"}]
        # the first MAX_PROBLEMS, each place and message cut short: what is echoed stays small whatever was sent
        problems = [
            ErrorDetail(
                loc=capped_loc(list(e.get("loc", ("body",)))),
                msg=capped(_message(e)),
                type=e.get("type", "value_error"),
            )
            for e in errors[:MAX_PROBLEMS]
        ]
        field = capped(_field_of(errors[0]))
        more = f" (and {len(errors) - 1:,} more)" if len(errors) > 1 else ""
        if len(errors) > MAX_PROBLEMS:
            problems.append(
                ErrorDetail(
                    loc=["body"], msg=f"{len(errors) - MAX_PROBLEMS:,} more problems not listed", type="too_many_errors"
                )
            )
        return error_response(422, f"{field}: {problems[0].msg}{more}", field, problems)

    @app.exception_handler(FieldError)
    async def bad_field(request: Request, exc: FieldError) -> JSONResponse:
        problem = ErrorDetail(loc=exc.loc, msg=exc.message, type=exc.kind)
        return error_response(exc.status, f"{exc.field}: {exc.message}", exc.field, [problem])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse | RedirectResponse:
        unreadable = _unreadable_body(exc)
        if unreadable:  # FastAPI's "There was an error parsing the body" says neither what nor how to fix it
            problem = ErrorDetail(loc=["body"], msg=unreadable, type="json_invalid")
            return error_response(422, f"body: {unreadable}", "body", [problem])
        if exc.status_code == 404:
            bare = slash_redirect(request.url.path, {getattr(r, "path", "") for r in app.routes})
            if bare is not None:
                query = f"?{request.url.query}" if request.url.query else ""
                return RedirectResponse(bare + query, status_code=307)
        message = {
            404: f"no such path {capped(request.url.path)}: the API has POST /ask, /ask/batch, /search, /link and "
            "GET /health, /info, /openapi.json, /docs",
            405: f"{capped(request.method)} is not allowed on {capped(request.url.path)}",
        }.get(exc.status_code, str(exc.detail))
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(ServerFailure)
    async def failure(request: Request, exc: ServerFailure) -> JSONResponse:
        return error_response(exc.status, exc.message, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error_response(500, _log_failure(exc, request.url.path, _non_finite(exc)))

    async def answered(future) -> Any:
        try:
            return await asyncio.wrap_future(future)
        except OdqaError as exc:  # one line written for people, secrets scrubbed where they are raised
            raise ServerFailure(str(exc)) from None
        except Exception as exc:
            raise ServerFailure(_log_failure(exc, "the pipeline", _non_finite(exc))) from None

    def submit(call, *args) -> Any:
        try:
            return call(*args)
        except QueueFull as exc:
            raise ServerFailure(f"the server is busy ({exc}); retry in a moment", 503, {"Retry-After": "1"}) from None

    def checked_question(question: str, field: str = "question") -> tuple[str, list[str]]:
        """The question cleaned, or a 422 naming `field` (a batch's `questions.N`)."""
        loc: list[str | int] = ["body", *(int(part) if part.isdigit() else part for part in field.split("."))]
        if len(question) > settings.max_question_chars:
            raise FieldError(
                field,
                f"{len(question):,} characters, over the {settings.max_question_chars:,} "
                "this server accepts; ask a shorter question",
                loc=loc,
            )
        try:
            return clean_question(question)
        except OdqaError as exc:
            raise FieldError(field, str(exc), loc=loc) from None

    def public_notices(notices: list[str]) -> list[str]:
        """Notices as a visitor may read them: no folder of this server (odqa.serve.public)."""
        return [public_text(notice, state["places"]) for notice in notices]

    async def check_retriever(kind: str | None) -> None:
        """A retriever the request names that this index cannot serve (dense over a BM25-only index) is the
        client's choice: 422 naming the field, not a failure of the server."""
        if kind is None:
            return
        try:
            await asyncio.wrap_future(submit(worker.call, lambda p: p.retriever(kind)))
        except OdqaError as exc:
            raise FieldError("retriever", str(exc)) from None

    def checked_k(k: int | None) -> int | None:
        problem = (
            None if k is None else number_problem(k, k_rule, f" (this server reads {settings.max_k} passages at most)")
        )
        if problem:
            raise FieldError("k", problem)
        return k

    # ---- the API ------------------------------------------------------------------------------------------
    async def ask_response(text: str, language_asked: str | None, future) -> AskResponse:
        """The /ask answer of a question `text` (checked) whose pipeline job is `future`."""
        language = detect_language([text]) if language_asked in (None, AUTO_LANGUAGE) else language_asked
        done: Answered = await answered(future)
        result = done.result
        notices = list(result.notices)
        index_language = state["index"].get("language", "en")
        # the pipeline does not search a question in another language than the index's (its notice says so)
        not_searched = not result.passages and await answered(
            submit(worker.call, lambda p: p.language_differs(result.question) is not None)
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
            notices=public_notices(notices),
            route=result.route.to_dict() if result.route is not None and not result.route.refused else None,
        )

    @app.post(
        "/ask",
        response_model=AskResponse,
        responses=ERRORS,
        dependencies=[Depends(check_key)],
        summary="Answer a question: answers with calibrated probabilities, their passages, linked entities",
    )
    async def ask(body: AskRequest) -> AskResponse:
        text, _ = checked_question(body.question)
        k = checked_k(body.k)
        await check_retriever(body.retriever)
        return await ask_response(text, body.language, submit(worker.ask, body.question, k, body.retriever))

    @app.post(
        "/ask/batch",
        response_model=AskBatchResponse,
        responses=ERRORS,
        dependencies=[Depends(check_key)],
        summary=f"Answer several questions (at most {MAX_BATCH_QUESTIONS}) read together: each result as /ask "
        "gives it, in the order asked",
    )
    async def ask_batch(body: AskBatchRequest) -> AskBatchResponse:
        texts = [checked_question(question, f"questions.{i}")[0] for i, question in enumerate(body.questions)]
        k = checked_k(body.k)
        await check_retriever(body.retriever)
        futures = submit(worker.ask_many, body.questions, k, body.retriever)
        return AskBatchResponse(
            results=[await ask_response(text, body.language, future) for text, future in zip(texts, futures)]
        )

    @app.post(
        "/search",
        response_model=SearchResponse,
        responses=ERRORS,
        dependencies=[Depends(check_key)],
        summary="The passages the retriever ranks first (no reading, no linking)",
    )
    async def search(body: SearchRequest) -> SearchResponse:
        text, notices = checked_question(body.question)
        k = checked_k(body.k)
        await check_retriever(body.retriever)
        started = time.perf_counter()
        hits = await answered(submit(worker.search, text, k, body.retriever))
        return SearchResponse(
            question=text,
            passages=[PassageOut.of(i, h) for i, h in enumerate(hits, 1)],
            timings_ms={"total": round((time.perf_counter() - started) * 1000, 1)},
            notices=public_notices(notices),
        )

    @app.post(
        "/link",
        response_model=LinkResponse,
        responses=ERRORS,
        dependencies=[Depends(check_key)],
        summary="The entities of the knowledge base the question mentions",
    )
    async def link(body: LinkRequest) -> LinkResponse:
        text, notices = checked_question(body.question)
        started = time.perf_counter()
        mentions = await answered(submit(worker.link, text))
        enabled, off = await answered(submit(worker.call, lambda p: (p.linker is not None, p.linker_off)))
        if not enabled:
            notices.append(off or "entity linking is off on this server")
        return LinkResponse(
            question=text,
            mentions=[MentionOut.of(m) for m in mentions],
            linker_enabled=enabled,
            timings_ms={"total": round((time.perf_counter() - started) * 1000, 1)},
            notices=public_notices(notices),
        )

    @app.get("/health", response_model=HealthResponse, summary="The server is up, its models loaded")
    async def health() -> HealthResponse:
        return HealthResponse(passages=state["index"]["passages"])

    @app.get(
        "/info",
        response_model=InfoResponse | LockedInfo,
        responses=ERRORS,
        summary="The index (manifest summary), the models and how each runs; without the key a server wants, "
        "only that it wants one",
    )
    async def info(sent: str | None = Depends(key_header)) -> InfoResponse | LockedInfo:
        if api_key and not sent:  # a client (the page) learns that it must ask for a key; a wrong one is a 401
            return LockedInfo(version=__version__, api_key_header=API_KEY_HEADER)
        await check_key(sent)
        plans, linking = await answered(submit(worker.call, lambda p: (p.inference_plans(), p.linker is not None)))
        config = pipeline.config
        models = {
            "reader": pipeline.reader_name,
            "encoder": state["index"].get("encoder", ""),
            "linker": config.linker.model if linking else "",  # none: disabled, or no knowledge base to link against
        }
        return InfoResponse(
            version=__version__,
            index=state["index"],
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
            api_key_required=bool(api_key),
            batches=dict(worker.batches),
        )

    # ---- the page -----------------------------------------------------------------------------------------
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    icon = (STATIC / "favicon.svg").read_bytes()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def home() -> HTMLResponse:
        return HTMLResponse(page, headers=PAGE_HEADERS)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """The page's icon where a browser asks for it by its old name (an SVG: every current browser draws it)."""
        return Response(icon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400", **PAGE_HEADERS})

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(
            docs_page(
                "Swagger UI",
                "swagger-ui",
                app.openapi_url or "",
                [f"{DOCS_ASSETS}/swagger-ui.css"],
                f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            ),
            headers=DOCS_HEADERS,
        )

    @app.get("/redoc", response_class=HTMLResponse, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return HTMLResponse(
            docs_page("ReDoc", "redoc", app.openapi_url or "", [], f"{DOCS_ASSETS}/redoc.standalone.js"),
            headers=DOCS_HEADERS,
        )

    app.state.worker = worker
    return app


def cors_origins(given: tuple[str, ...]) -> list[str]:
    """The origins as browsers write them (odqa.serve.http_rules.normalized_origin), each one that changes said
    once: `HTTP://Example.org:80` would otherwise never match the `http://example.org` a browser sends."""
    origins = []
    for origin in given:
        normal = normalized_origin(origin)
        if normal != origin:
            log.info("CORS origin %s taken as %s, as browsers send it", origin, normal)
        origins.append(normal)
    return origins


def _message(error: dict) -> str:
    if error.get("type") == "missing":
        return "required, and missing"
    if error.get("type") == "extra_forbidden":
        return "not a field of this request (misspelt?)"
    if error.get("type") == "json_invalid":
        position = error.get("loc", (None, None))[-1]
        return f"not valid JSON (at character {position}: {error.get('ctx', {}).get('error', 'unreadable')})"
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error.get("msg", "invalid"))


def _unreadable_body(exc: StarletteHTTPException) -> str:
    """What is wrong with a request body FastAPI could not read as JSON (it answers 400 and keeps the cause),
    else "": bytes that are not UTF-8, or nesting deeper than a JSON reader goes."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return ""
    if isinstance(cause, UnicodeDecodeError):
        return _not_utf8(cause)
    if isinstance(cause, RecursionError):
        return (
            "JSON nested too deeply to read (arrays or objects inside each other beyond the reader's limit); "
            'send one object of the request\'s fields, e.g. {"question": "..."}'
        )
    return ""


def _non_finite(exc: BaseException) -> str:
    """What a response body that failed for a NaN or an infinity (models.Response) says of it, else ""."""
    if not isinstance(exc, ValidationError):
        return ""
    places = [".".join(str(p) for p in e.get("loc", ())) for e in exc.errors() if e.get("type") == "finite_number"]
    return f"the result's {places[0]} is not a finite number, which JSON cannot carry; " if places else ""


def _log_failure(exc: BaseException, where: str, what: str = "") -> str:
    """Log the failure with its traceback under a new id; the client gets the id and nothing of the failure
    (`what`: a description that holds nothing of the request or the server, e.g. a non-finite score's place)."""
    failure_id = uuid.uuid4().hex[:12]
    log.error("failure %s in %s", failure_id, where, exc_info=exc)
    return f"internal error (id {failure_id}): {what}the server's log has the details under this id"
