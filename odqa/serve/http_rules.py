"""Rules of the HTTP server that hold whatever a client sends: a redirect never leaves this server (the Host
header is the client's word), CORS origins are compared as browsers write them, and an error never echoes more
than a few lines of what was sent."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# an error response names at most this many problems of a request (a body of 100,000 unknown keys drew a 9.9 MB
# 422 listing each), and quotes at most this many characters of any one thing the client sent
MAX_PROBLEMS = 20
MAX_ECHO_CHARS = 200


def normalized_origin(origin: str) -> str:
    """`origin` as a browser sends it in its Origin header: scheme and host in lower case, the scheme's default
    port left out (`HTTPS://Example.ORG:443` -> `https://example.org`); `*` as it is. The text is assumed to have
    passed `odqa.serve.settings.cors_origin_problem`."""
    if origin == "*":
        return origin
    parts = urlsplit(origin)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:  # a browser sends an international name in its ASCII (punycode) form
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        pass
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != DEFAULT_PORTS.get(scheme) else "")


def slash_redirect(path: str, routes: set[str]) -> str | None:
    """Where a request for `path` with a trailing slash (`/docs/`) goes instead: the route without it, as a path
    on this server (no scheme, no host), or None where there is no such route. Starlette's own redirect builds
    an absolute URL from the request's Host header, which a client chooses (`Host: evil.example`)."""
    if not path.endswith("/") or path == "/":
        return None
    bare = path.rstrip("/")
    return bare if bare in routes and bare.startswith("/") and not bare.startswith("//") else None


def capped(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def capped_loc(loc: list) -> list:
    """A problem's place (`["body", "<a key the client sent>"]`) with each part cut to MAX_ECHO_CHARS."""
    return [capped(part) if isinstance(part, str) else part for part in loc]
