"""The HTTP API and the page (FastAPI on uvicorn), assembled: the routes (odqa.serve.routes) over one
`PipelineWorker` thread that owns the models (odqa.serve.worker), the middleware (odqa.serve.middleware) and the
errors, each JSON in one shape (odqa.serve.errors)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from odqa import __version__
from odqa.core.logs import failures_reported_once, get_logger
from odqa.core.paths import odqa_home
from odqa.core.secrets import remember
from odqa.pipeline import Pipeline
from odqa.serve.errors import add_error_handlers
from odqa.serve.middleware import (
    ACCESS_LOGGER,
    CORS,
    MAX_BODY_BYTES,
    BodyLimit,
    UnexpectedFailure,
    cors_origins,
    mask_access_log,
)
from odqa.serve.public import server_places
from odqa.serve.routes import DOCS_ASSETS, JSON_PATHS, STATIC, ServerState, router
from odqa.serve.settings import API_KEY_HEADER, ServeSettings, check_key_and_origins
from odqa.serve.worker import PipelineWorker

log = get_logger("odqa.serve")
WARM_UP_QUESTION = "Who wrote it?"


def create_app(
    pipeline: Pipeline,
    settings: ServeSettings | None = None,
    api_key: str | None = None,
    warmed: dict[str, Any] | None = None,
) -> FastAPI:
    """The app over `pipeline` (its models load when the app starts: uvicorn's startup, or entering a TestClient).
    `api_key`: every request but /health, the page and the schema must send it in the X-API-Key header.
    `warmed`: what `warm_up(pipeline)` gave, where the caller warmed it up already (`odqa serve`, for a one-line
    error before uvicorn starts): the app does not warm it up again."""
    settings = settings or ServeSettings()
    check_key_and_origins(settings, api_key)
    origins = cors_origins(settings.cors_origin)
    if api_key:
        remember(api_key)  # scrubbed wherever it shows: a log line, a path segment in the access log
    mask_access_log()
    # FastAPI's own /docs and /redoc load their scripts from a CDN (blank offline) and run an inline one
    app = FastAPI(
        title="odqa",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # a trailing slash is answered by odqa.serve.errors.http_error, with a path on this server
        redirect_slashes=False,
        description="Open-domain question answering over one index: ask, search, link.",
    )
    worker = PipelineWorker(pipeline, max_batch=settings.max_batch, max_queue=settings.max_queue)
    app.state.server = ServerState(pipeline, settings, api_key, worker, index=dict(warmed or {}))
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
    app.include_router(router)
    add_error_handlers(app)
    return app


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The worker runs while the app does; the models load, and the index is described, before the first
    request."""
    # uvicorn made its handlers by now: a log that cannot be written (a full disk) says so once, not per request
    failures_reported_once(ACCESS_LOGGER, "uvicorn.error", "odqa")
    state: ServerState = app.state.server
    state.worker.start()
    started = time.perf_counter()
    if not state.index:
        state.index = await asyncio.wrap_future(state.worker.call(warm_up))
    config = state.pipeline.config
    state.places = server_places(
        [state.index["location"], config.index, config.linker.kb, state.pipeline.reader_name, odqa_home()]
    )
    log.info("models loaded in %.1f s; %d passages", time.perf_counter() - started, state.index["passages"])
    try:
        yield
    finally:
        await asyncio.get_running_loop().run_in_executor(None, state.worker.stop)


def index_summary(pipeline: Pipeline) -> dict[str, Any]:
    """Where the index is, its size, and what it says of itself (`SearchBackend.info()`: a folder's manifest, an
    Elasticsearch index's `_meta`)."""
    info = pipeline.bundle.info()
    return {"location": info.location, "passages": len(pipeline.bundle), **info.summary}


def warm_up(pipeline: Pipeline) -> dict[str, Any]:
    """Load every model once, before the first request, and describe the index. One question goes all the way
    through: the runtimes open their sessions and graphs on first use, which would otherwise fall on the first
    person to ask."""
    pipeline.ask(WARM_UP_QUESTION)
    return index_summary(pipeline)
