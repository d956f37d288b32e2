"""The API's errors. Every one is JSON, `{"error": one line, "field": the request field at fault or null, "detail":
[{"loc": [...], "msg": ..., "type": ...}]}` (detail as in FastAPI's own 422): 4xx for a bad request (the field
named), 5xx for a failure inside (no traceback, no secret: those go to the server's log under an id the body
gives)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from odqa.core.logs import get_logger
from odqa.serve.http_rules import MAX_PROBLEMS, capped, capped_loc, slash_redirect
from odqa.serve.models import ErrorDetail, ErrorResponse

log = get_logger("odqa.serve")

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


def add_error_handlers(app: FastAPI) -> None:
    """Answer every exception a route raises in the API's error shape."""
    app.exception_handler(RequestValidationError)(invalid_request)
    app.exception_handler(FieldError)(bad_field)
    app.exception_handler(StarletteHTTPException)(http_error)
    app.exception_handler(ServerFailure)(failure)
    app.exception_handler(Exception)(unexpected)


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


async def bad_field(request: Request, exc: FieldError) -> JSONResponse:
    problem = ErrorDetail(loc=exc.loc, msg=exc.message, type=exc.kind)
    return error_response(exc.status, f"{exc.field}: {exc.message}", exc.field, [problem])


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse | RedirectResponse:
    unreadable = _unreadable_body(exc)
    if unreadable:  # FastAPI's "There was an error parsing the body" says neither what nor how to fix it
        problem = ErrorDetail(loc=["body"], msg=unreadable, type="json_invalid")
        return error_response(422, f"body: {unreadable}", "body", [problem])
    if exc.status_code == 404:
        # a path on this server: Starlette's own redirect names the host of the request's Host header, which the
        # client chooses
        bare = slash_redirect(request.url.path, {getattr(r, "path", "") for r in request.app.routes})
        if bare is not None:
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(bare + query, status_code=307)
    message = {
        404: f"no such path {capped(request.url.path)}: the API has POST /ask, /ask/batch, /search, /link and "
        "GET /health, /info, /openapi.json, /docs",
        405: f"{capped(request.method)} is not allowed on {capped(request.url.path)}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))


async def failure(request: Request, exc: ServerFailure) -> JSONResponse:
    return error_response(exc.status, exc.message, headers=exc.headers)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    return error_response(500, log_failure(exc, request.url.path, non_finite(exc)))


def _field_of(error: dict) -> str:
    """The request field a pydantic error is about: ("body", "question") -> question; the body itself (not JSON,
    not an object): body."""
    if error.get("type") == "json_invalid":
        return "body"  # its loc holds the character position, not a field
    return ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"


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
        return not_utf8(cause)
    if isinstance(cause, RecursionError):
        return (
            "JSON nested too deeply to read (arrays or objects inside each other beyond the reader's limit); "
            'send one object of the request\'s fields, e.g. {"question": "..."}'
        )
    return ""


def not_utf8(exc: UnicodeDecodeError) -> str:
    return (
        f'not UTF-8 text (byte {exc.start}: {exc.reason}); send the JSON encoded as UTF-8, e.g. {{"question": "..."}}'
    )


def non_finite(exc: BaseException) -> str:
    """What a response body that failed for a NaN or an infinity (models.Response) says of it, else ""."""
    if not isinstance(exc, ValidationError):
        return ""
    places = [".".join(str(p) for p in e.get("loc", ())) for e in exc.errors() if e.get("type") == "finite_number"]
    return f"the result's {places[0]} is not a finite number, which JSON cannot carry; " if places else ""


def log_failure(exc: BaseException, where: str, what: str = "") -> str:
    """Log the failure with its traceback under a new id; the client gets the id and nothing of the failure
    (`what`: a description that holds nothing of the request or the server, e.g. a non-finite score's place)."""
    failure_id = uuid.uuid4().hex[:12]
    log.error("failure %s in %s", failure_id, where, exc_info=exc)
    return f"internal error (id {failure_id}): {what}the server's log has the details under this id"
