"""The server's own settings (`odqa serve`'s options come from these fields, odqa.commands.options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.settings import field_help

API_KEY_HEADER = "X-API-Key"


@dataclass
class ServeSettings:
    host: str = field(
        default="127.0.0.1",
        metadata=field_help(
            "address to listen on (127.0.0.1: this machine only; "
            "0.0.0.0 opens it to the network: set --api-key-env then)"
        ),
    )
    port: int = field(default=8080, metadata=field_help("TCP port to listen on", minimum=1, maximum=65535))
    api_key_env: str = field(
        default="",
        metadata=field_help(
            f"name of an environment variable holding the API key every request must send in the {API_KEY_HEADER} "
            "header (empty: no key; the key itself never goes on the command line)"
        ),
    )
    max_batch: int = field(
        default=16,
        metadata=field_help("questions waiting together are read in one batch of at most N (1: one at a time)"),
    )
    max_k: int = field(default=100, metadata=field_help("the largest k (passages read) a request may ask for"))
    # a question is truncated by the pipeline (odqa.pipeline.MAX_QUESTION_CHARS, with a notice); text far longer
    # than any question is a pasted document or an attack, refused before it costs any work
    max_question_chars: int = field(
        default=2000,
        metadata=field_help(
            "longer questions are refused (422); shorter ones are kept to the pipeline's own limit, with a notice"
        ),
    )
    max_queue: int = field(
        default=256,
        metadata=field_help("requests waiting for the models at most; more are refused with 503 and Retry-After"),
    )
    access_log: bool = field(default=True, metadata=field_help("log one line a request (uvicorn's access log)"))
    # a tuple, not a list option: `odqa serve` declares --cors-origin by hand, repeatable (argparse's append)
    cors_origin: tuple[str, ...] = field(
        default=(),
        metadata=field_help(
            "an origin (scheme://host[:port]) whose pages may call the API from a browser; repeat it for more, * for "
            f"any (none: no CORS headers, only this server's own page); the {API_KEY_HEADER} header is allowed"
        ),
    )


def api_key_problem(key: str) -> str | None:
    """Why no request could send `key` in the X-API-Key header, or None: a header value is one line of printable
    ASCII (clients refuse a line break or another control character, servers strip spaces around the value and
    read other bytes as Latin-1), so a server started with such a key would refuse every request."""
    if "\n" in key or "\r" in key:
        return "holds a line break"
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        return "holds a control character"
    if not key.isascii():
        return "holds a character outside ASCII"
    if key != key.strip(" \t"):
        return "begins or ends with a space"
    return None


def cors_origin_problem(origin: str) -> str | None:
    """Why a browser would never send `origin` as its Origin header, or None: an origin is a scheme, a host and
    maybe a port, with no path (a trailing slash included) and no query, so any other text would match nothing."""
    if origin == "*":
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an origin such as https://example.org or http://localhost:3000"
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return f"holds more than an origin; a browser sends {parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    return None


def check_key_and_origins(settings: ServeSettings, api_key: str | None, key_named: str = "the API key") -> None:
    """Refuse, in one line, a key no request could send (`key_named` says where it came from, e.g. the
    environment variable) or a CORS origin no browser would send; `odqa serve` asks before any model loads,
    a library's create_app when it builds the app."""
    from odqa.core.errors import OdqaError

    for origin in settings.cors_origin:
        if problem := cors_origin_problem(origin):
            raise OdqaError(f"CORS origin {origin!r} (--cors-origin): {problem}")
    if api_key and (problem := api_key_problem(api_key)):  # never the key itself: what is wrong with it
        raise OdqaError(
            f"{key_named}: the key {problem}, which no request can send in the {API_KEY_HEADER} header, so every "
            "request would be refused; use one line of printable ASCII"
        )
