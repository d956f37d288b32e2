"""Elasticsearch connections: hosts and index locations (`es://host:9200/name`), credentials, the client, and
errors turned into one-line messages.

Credentials (API key, basic-auth password, passwords inside host URLs) are never printed or logged: error
messages name the hosts with any user information removed (`scrub`, `describe_hosts`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from odqa.core.errors import OdqaError
from odqa.core.secrets import (
    API_KEY_ENV,
    PASSWORD_ENV,
    check_credential,
    remember,
    split_url_credentials,
    url_credentials,
    wire_forms,
    with_quoted_credentials,
)
from odqa.core.secrets import scrub as scrub_known

log = logging.getLogger(__name__)


def parse_hosts(hosts: str | Sequence[str]) -> list[str]:
    """The host URLs, each with its user and password percent-encoded (a password holding `/`, `#` or `?` is read
    whole and remembered for scrubbing before anything checks or prints the URL)."""
    items = hosts.split(",") if isinstance(hosts, str) else list(hosts)
    return [with_quoted_credentials(h.strip()) for h in items if h and h.strip()]


def redact_url(url: str) -> str:
    """A host URL without user:password@ (taken off before the URL is parsed, so no part of a password holding
    `/`, `#` or `?` is left in a path)."""
    url = split_url_credentials(url)[2]
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:
        return "<unparseable host>"
    netloc = parts.hostname or ""
    port = _port_text(parts)
    if port:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _port_text(parts) -> str:
    """The port as written after the host (never the credentials before it), valid or not."""
    host_port = parts.netloc.rpartition("@")[2]
    return host_port.rpartition(":")[2] if ":" in host_port.rpartition("]")[2] else ""


def check_hosts(hosts: Sequence[str]) -> None:
    """Refuse, in one line naming the host without its credentials, a host URL whose port is not a number from
    1 to 65535 or that names no host, before any client is made."""
    for url in hosts:
        bare = split_url_credentials(url)[2]
        try:
            parts = urlsplit(bare if "://" in bare else f"http://{bare}")
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or port == 0 or (_port_text(parts) and port is None):
            raise OdqaError(
                f"Elasticsearch host {redact_url(url)}: the port must be "
                "a number from 1 to 65535 (e.g. http://127.0.0.1:9200)"
            )
        if not parts.hostname:
            raise OdqaError(f"Elasticsearch host {redact_url(url)} names no host; write it like http://127.0.0.1:9200")


def describe_hosts(hosts: str | Sequence[str]) -> str:
    return ", ".join(redact_url(h) for h in parse_hosts(hosts)) or "(no hosts)"


LOCATION_SCHEMES = {"es": "http", "es+http": "http", "es+https": "https"}


def parse_location(location: str) -> tuple[str, str]:
    """(hosts, index name) of an index location `es://host:9200/name` (`es+https://` for TLS; several hosts:
    `es://h1:9200,h2:9200/name`; credentials as in any URL, `es://user:password@host`). An empty part means
    "the [elastic] section's": `es://` alone names its hosts and index name."""
    scheme, sep, _ = str(location).partition("://")
    if not sep or scheme.lower() not in LOCATION_SCHEMES:
        raise OdqaError("an Elasticsearch index location looks like es://HOST:9200/INDEX_NAME (es+https:// for TLS)")
    # the credentials first (to the last @), so that no part of a password holding '/', '?' or '#' is read as the
    # index name, the hosts or anything else a message quotes
    user, password, bare = split_url_credentials(str(location))
    userinfo = ""
    if user or password or bare != str(location):
        remember(*wire_forms(passwords=[password], users=[user]))
        userinfo = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    netloc, _, path = bare.partition("://")[2].partition("/")
    name = path.strip("/")
    hosts = ",".join(
        f"{LOCATION_SCHEMES[scheme.lower()]}://{userinfo}{h.strip()}" for h in netloc.split(",") if h.strip()
    )
    if "/" in name or "?" in name or "#" in name:
        raise OdqaError(
            f"Elasticsearch index name {name!r} (of an es:// index location) holds '/', '?' or '#'; "
            "write es://HOST:9200/INDEX_NAME"
        )
    return hosts, name


def settings_for(location: str, elastic):
    """[elastic] settings (an ElasticConfig) with the hosts and index name that an es:// location names."""
    import dataclasses

    hosts, name = parse_location(location)
    return dataclasses.replace(elastic, hosts=hosts or elastic.hosts, index_name=name or elastic.index_name)


def credentials(config) -> tuple[str, str, str]:
    """(api key, user, password) of an ElasticConfig, the environment's where the config has none, each checked
    (odqa.core.secrets.check_credential) before any request and remembered for scrubbing."""
    api_key = config.api_key or os.environ.get(API_KEY_ENV, "")
    password = config.password or os.environ.get(PASSWORD_ENV, "")
    check_credential("elastic.api_key" if config.api_key else API_KEY_ENV, api_key)
    check_credential("elastic.password" if config.password else PASSWORD_ENV, password, ascii_only=False)
    check_credential("elastic.username", config.username, ascii_only=False)
    for host in parse_hosts(config.hosts):
        user, secret = url_credentials(host)
        check_credential("the user in an elastic.hosts URL", user)
        check_credential("the password in an elastic.hosts URL", secret)
    remember(*secrets_of(config))
    return api_key, config.username, password


def secrets_of(config) -> list[str]:
    """Every form the config's credentials can take on the wire (odqa.core.secrets.wire_forms)."""
    passwords = [config.password, os.environ.get(PASSWORD_ENV, "")]
    users = [config.username or ""]
    for host in parse_hosts(config.hosts):
        user, password = url_credentials(host)
        passwords.append(password)
        users.append(user)
    keys = [config.api_key, os.environ.get(API_KEY_ENV, "")]
    return sorted(wire_forms(passwords, users, keys), key=len, reverse=True)


def scrub(text: str, secrets: Sequence[str]) -> str:
    return scrub_known(text, secrets)


def connect(config, *, request_timeout: float = 30.0, check: bool = True):
    """An Elasticsearch client for an ElasticConfig ([elastic] section); with `check`, fail early and clearly."""
    from elasticsearch import Elasticsearch

    hosts = parse_hosts(config.hosts)
    if not hosts:
        raise OdqaError("no Elasticsearch hosts configured; set elastic.hosts (e.g. http://127.0.0.1:9200)")
    check_hosts(hosts)
    kwargs: dict[str, Any] = {"hosts": hosts, "request_timeout": request_timeout, "verify_certs": config.verify_certs}
    api_key, _, password = credentials(config)
    if api_key:
        kwargs["api_key"] = api_key
    elif config.username:
        kwargs["basic_auth"] = (config.username, password)
    if config.ca_certs:
        if not Path(config.ca_certs).is_file():
            raise OdqaError(f"elastic.ca_certs: no CA bundle at {config.ca_certs}")
        kwargs["ca_certs"] = config.ca_certs
    if not config.verify_certs:
        kwargs["ssl_show_warn"] = False
        log.warning("TLS certificate verification is off for %s (elastic.verify_certs = false)", describe_hosts(hosts))
    try:
        client = Elasticsearch(**kwargs)
    except ValueError:  # malformed host URL; its text may hold the URL, so it is not echoed
        raise OdqaError(
            f"elastic.hosts is not a list of URLs like http://127.0.0.1:9200 (got {describe_hosts(hosts)})"
        ) from None
    if check:
        call(
            lambda: client.options(max_retries=1, request_timeout=min(request_timeout, 10.0)).info(),
            hosts,
            "connecting",
            secrets_of(config),
        )
    return client


def call(fn: Callable[[], Any], hosts, what: str, secrets: Sequence[str] = ()):
    """Run one client call; turn the client's exceptions into one-line OdqaErrors without credentials."""
    try:
        result = fn()
    except Exception as exc:
        error = translate_error(exc, hosts, what, secrets)
        if error is None:
            raise
        raise error from None
    return require_json(result, hosts, what, secrets)


def require_json(result, hosts, what: str, secrets: Sequence[str] = ()):
    """`result` unless it is a text answer where Elasticsearch answers JSON (an HTML page from a proxy or
    another service at that address): the client hands those over as text, which fails later as a traceback."""
    import elastic_transport

    if isinstance(result, elastic_transport.TextApiResponse):
        raise not_json_error(hosts, what, str(result.body), secrets)
    return result


def not_json_error(hosts, what: str, text: str, secrets: Sequence[str] = ()) -> OdqaError:
    snippet = " ".join(text.split())[:80]
    return OdqaError(
        scrub(
            f"the server at {describe_hosts(hosts)} answered {what} with something that is not "
            f"Elasticsearch JSON ({snippet!r}); is a proxy or another "
            "service at that address? check elastic.hosts / --hosts",
            secrets,
        )
    )


def translate_error(exc: BaseException, hosts, what: str, secrets: Sequence[str] = ()) -> OdqaError | None:
    import elastic_transport
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException, UnsupportedProductError

    where = describe_hosts(hosts)
    if isinstance(exc, AuthenticationException):
        return OdqaError(
            f"Elasticsearch at {where} rejected the credentials (HTTP 401) while {what}; check elastic.api_key, or "
            "elastic.username and elastic.password (or the ODQA_ES_API_KEY / ODQA_ES_PASSWORD environment variables)"
        )
    if isinstance(exc, AuthorizationException):
        return OdqaError(
            f"Elasticsearch at {where} refused the request (HTTP 403) while {what}: the user or API key lacks the "
            "privileges (it needs create_index, write and read on the index)"
        )
    if isinstance(exc, UnsupportedProductError):
        return OdqaError(f"the server at {where} is not Elasticsearch (or not a supported version) while {what}")
    if isinstance(exc, elastic_transport.TlsError):
        return OdqaError(
            f"TLS verification of {where} failed while {what}; set elastic.ca_certs to the cluster's CA certificate "
            "(or, for a throw-away test cluster only, elastic.verify_certs = false)"
        )
    if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)):
        return OdqaError(
            f"cannot reach Elasticsearch at {where} while {what} "
            f"({exc.__class__.__name__}); start the server or fix elastic.hosts / --hosts"
        )
    if isinstance(exc, ApiError):
        return OdqaError(
            scrub(f"Elasticsearch at {where} answered HTTP {exc.status_code} while {what}: {reason(exc)}", secrets)
        )
    if isinstance(exc, elastic_transport.SerializationError):  # labelled JSON, but is not
        return not_json_error(hosts, what, str(exc).removeprefix("Unable to deserialize as JSON: "), secrets)
    return None


class SearchFailed(OdqaError):
    """One search of a multi-search failed on the server."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


def auth_error(exc) -> bool:
    from elasticsearch import AuthenticationException

    if isinstance(exc, AuthenticationException):
        return True
    body = getattr(exc, "body", None)
    return (
        isinstance(body, dict)
        and isinstance(body.get("error"), dict)
        and body["error"].get("type") == "security_exception"
        and "license" not in str(body["error"].get("reason", ""))
    )


def reason(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        root = (err.get("root_cause") or [{}])[0]
        return f"{err.get('type', '')}: {root.get('reason') or err.get('reason', '')}"
    return str(getattr(exc, "message", "") or exc.__class__.__name__)


def retryable(exc: BaseException) -> bool:
    import elastic_transport
    from elasticsearch import ApiError

    if isinstance(exc, (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)):
        return not isinstance(exc, elastic_transport.TlsError)
    return isinstance(exc, ApiError) and exc.status_code in (429, 502, 503, 504)


def server_version(info: dict) -> tuple[int, ...]:
    number = str(info.get("version", {}).get("number", "0"))
    out = []
    for part in number.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)
