"""Command: serve (the HTTP API and the page, odqa.serve)."""

from __future__ import annotations

import dataclasses
import os

from odqa.commands.common import add_command
from odqa.commands.options import add_options, dataclass_values
from odqa.commands.qa import _pipeline_flags, make_pipeline
from odqa.core.logs import get_logger
from odqa.serve.settings import API_KEY_HEADER, ServeSettings, check_key_and_origins

log = get_logger("odqa.serve")


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "serve",
        "Answer questions over HTTP: POST /ask, /search, /link, GET /health, /info, "
        "/openapi.json, /docs, and a page for people at / (built-in demo corpus unless --index/--config).",
        "odqa serve --index indexes/wiki --port 8080",
        run_serve,
    )
    add_options(p, ServeSettings, [f.name for f in dataclasses.fields(ServeSettings) if f.name != "cors_origin"])
    # repeatable (one origin a flag), which a generated list option (nargs) is not
    p.add_argument(
        "--cors-origin",
        action="append",
        metavar="ORIGIN",
        help=ServeSettings.__dataclass_fields__["cors_origin"].metadata["help"],
    )
    _pipeline_flags(p)


def run_serve(args) -> int:
    from odqa.core.optional import SERVE_INSTALL, modules_of, require

    for module in modules_of(SERVE_INSTALL):  # the extra odqa[serve]: one line, before any model loads
        require(module, "odqa serve")
    import uvicorn

    from odqa.core.errors import OdqaError
    from odqa.core.secrets import remember
    from odqa.serve.app import create_app, warm_up

    settings = ServeSettings(**dataclass_values(args, ServeSettings), cors_origin=tuple(args.cors_origin or ()))
    api_key = None
    if settings.api_key_env:
        api_key = os.environ.get(settings.api_key_env, "")
        if not api_key.strip():
            raise OdqaError(
                f"--api-key-env {settings.api_key_env}: that environment variable is unset or empty; "
                f"export {settings.api_key_env}=SECRET first, or leave --api-key-env out"
            )
        remember(api_key)  # whatever prints it (a library's error, a traceback) prints *** instead
    check_key_and_origins(settings, api_key, key_named=f"--api-key-env {settings.api_key_env}")
    if settings.host not in ("127.0.0.1", "localhost", "::1") and not api_key:
        log.warning(
            f"listening on {settings.host} without an API key: anyone who reaches the port may ask; "
            f"set --api-key-env VAR to require the {API_KEY_HEADER} header"
        )
    check_port_free(settings.host, settings.port)
    pipeline = make_pipeline(args)
    log.info("loading the models...")
    # a missing index or model is one line here, not a traceback from inside uvicorn's startup
    app = create_app(pipeline, settings, api_key, warmed=warm_up(pipeline))
    log.info(
        f"http://{_url_host(settings.host)}:{settings.port}/ (the page; the API schema at /openapi.json, its "
        "docs at /docs); Ctrl-C stops it"
    )
    # create_app put odqa.serve.middleware.MaskedQuery on the access logger, whose filters uvicorn's log config keeps
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        access_log=settings.access_log,
        log_level="info",
        timeout_graceful_shutdown=10,
    )
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_port_free(host: str, port: int) -> None:
    """Before the models load: the address can be bound (else one line, not uvicorn's exit after loading)."""
    import socket

    from odqa.core.errors import OdqaError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OdqaError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise OdqaError(
                f"cannot listen on {host}:{port} ({exc.strerror}): another server holds the port, or the "
                "address is not this machine's; pass another --port or --host"
            ) from None
