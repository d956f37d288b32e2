"""What stands around the routes: the body limit, the API's 500 for an exception no handler took, CORS in the API's
error shape, and the access log's masking of every query-string value (a client may put a key there)."""

from __future__ import annotations

import logging

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware

from odqa.core.logs import get_logger
from odqa.core.secrets import mask_query
from odqa.serve.errors import error_response, log_failure, non_finite, not_utf8
from odqa.serve.http_rules import normalized_origin
from odqa.serve.models import ErrorDetail
from odqa.serve.settings import API_KEY_HEADER

log = get_logger("odqa.serve")

# a body far beyond any question (a 1 MB question still reaches the field check, which names it); bigger ones
# are refused before they are read whole
MAX_BODY_BYTES = 2 * 1024 * 1024
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
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
                problem = ErrorDetail(loc=["body"], msg=not_utf8(exc), type="json_invalid")
                return await error_response(422, f"body: {problem.msg}", "body", [problem])(scope, receive, send)
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}], receive), send)

    async def _refuse(self, size: int, scope, receive, send):
        message = (
            f"the request body holds {size:,} bytes or more, over the "
            f"{self.limit:,} this server reads; send one question per request"
        )
        await error_response(413, message, "body")(scope, receive, send)


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
            message = log_failure(exc, scope.get("path", "the server"), non_finite(exc))
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
