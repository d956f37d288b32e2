"""Credentials never reach the terminal: they are checked before use, and the CLI's output is scrubbed of them.

`check_credential` refuses a credential with a control character (a pasted line break), or a non-ASCII
character where it goes into a header or URL as it is (an API key, a password inside a host URL), before any
request is made, naming the setting and never the value: HTTP clients reject such header values with an
error that quotes the whole header (`ApiKey <the key>`). A basic-auth user and password are sent base64-coded
UTF-8, so non-ASCII ones stay allowed. `remember` keeps every wire
form of a credential (as given, URL-quoted, base64 as in a Basic or ApiKey header); `scrub` removes them, any
Authorization header value and any password written into a URL from a text. `scrubbed_output` wraps stdout
and stderr so that whatever is printed (messages, warnings, log lines, tracebacks and their exception chains)
passes `scrub` first: the last resort for a credential some library quotes in its own words.

Which settings are secrets is decided by name, once (`is_secret_setting`: a password, secret, token or API key,
such as elastic.password, elastic.api_key, the server's key): an error about one never quotes its value, a config
file's syntax error never quotes the secret lines (`secret_values_in`), and the server's access log masks the
query string's values (`mask_query`), where a client may have put a key.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO
from urllib.parse import quote, unquote

from odqa.core.errors import OdqaError

# The environment variables that may hold a credential (read by indexes.elastic_connection.connect).
API_KEY_ENV = "ODQA_ES_API_KEY"
PASSWORD_ENV = "ODQA_ES_PASSWORD"
SECRET_ENVS = (API_KEY_ENV, PASSWORD_ENV)
MIN_SECRET = 4  # shorter values are not replaced everywhere in the output: that would garble it, not protect it

_known: set[str] = set()
# the words of a secret setting's name: elastic.password, api_key, ODQA_ES_API_KEY, X-API-Key, auth_token...
_SECRET_WORDS = {
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "credential",
    "credentials",
    "authorization",
    "cookie",
}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key")}
# a setting in a line of a config file: `password = "..."`, `api_key: ...`, `{"token": ...`
_KEY = re.compile(r"""(?:^|[\s{,])["']?([\w.-]+)["']?\s*[:=]""")
_AUTH_VALUE = re.compile(r"(?i)\b(Basic|ApiKey|Bearer)(\s+)[A-Za-z0-9+/=_.~-]{8,}")
# a password in a URL, unencoded `/`, `#` and `?` included (up to the last `@` before a space)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):\S+@")


def check_credential(setting: str, value: str, ascii_only: bool = True) -> None:
    """Refuse a credential that no HTTP request can carry, in one line naming `setting`, not the value."""
    if not value:
        return
    bad = next((ch for ch in value if ord(ch) < 32 or ord(ch) == 127 or (ascii_only and ord(ch) > 126)), None)
    if bad is None:
        return
    what = (
        "a line break"
        if bad in "\r\n"
        else "a control character"
        if ord(bad) < 32 or ord(bad) == 127
        else "a non-ASCII character"
    )
    raise OdqaError(
        f"{setting} holds {what}, which no HTTP request can carry; set it again as the server gave it "
        f"({'printable ASCII' if ascii_only else 'printable characters'}, no line break)"
    )


def is_secret_setting(name: str) -> bool:
    """Whether a setting, header, query parameter or variable of this name holds a secret (its value is never
    shown): one of its words is password, secret, token... or it names an API key. `max_answer_tokens` is not."""
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w]
    return any(w in _SECRET_WORDS for w in words) or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


def secret_values_in(text: str) -> set[str]:
    """The values a config file's text gives its secret settings (as written, unquoted, and each word of them),
    so that a message about the file (a syntax error) can be scrubbed of them whatever the parser quoted."""
    values: set[str] = set()
    for line in text.splitlines():
        for key in _KEY.finditer(line):
            if is_secret_setting(key.group(1)):
                raw = line[key.end() :].strip()
                quoted = [q for pair in re.findall(r"\"([^\"]*)\"|'([^']*)'", raw) for q in pair]
                values |= {raw, raw.strip("\"'"), *quoted, *re.split(r"[\s\"',\[\]{}]+", raw)}
    return {v for v in values if len(v) >= MIN_SECRET}


def mask_query(target: str) -> str:
    """A request target with every value a client could have put a key in masked: each query value
    (`/ask?api_key=***&v=***`), each path parameter (`/search;api_key=***`), percent-encoded or not, and any known
    secret anywhere in it (`scrub`: the server's key sent as a path segment). The API reads none of these. Read
    decoded, so `%3B` and `%3F` hide nothing; written back with control characters, spaces and non-ASCII
    percent-encoded, so a log line stays one line."""
    decoded = unquote(target, errors="replace")
    path, mark, query = decoded.partition("?")
    segments = []
    for segment in path.split("/"):
        name, *params = segment.split(";")
        segments.append(";".join([name, *(f"{p.partition('=')[0]}=***" if "=" in p else "***" for p in params)]))
    masked = "/".join(segments)
    if mark:
        masked += "?" + "&".join(f"{part.partition('=')[0]}=***" if part else part for part in query.split("&"))
    return quote(scrub(masked), safe=_LOGGED_AS_IS)


# printable ASCII but the space, `%` and `"` (which end or garble a logged request line): written as they are
_LOGGED_AS_IS = "".join(chr(c) for c in range(33, 127) if chr(c) not in '%"')


def wire_forms(passwords: Iterable[str] = (), users: Iterable[str] = (), keys: Iterable[str] = ()) -> set[str]:
    """Every form a credential takes on the wire: as given, URL-quoted and -unquoted, and base64 as in the
    Authorization header (`Basic b64(user:password)`, `ApiKey b64(id:key)`), which a server or proxy may echo."""
    passwords = {p for p in passwords if p} | {unquote(p) for p in passwords if p}
    keys = {k for k in keys if k}
    users = set(users) | {"", "elastic"}
    out = passwords | keys | {quote(p, safe="") for p in passwords}
    out |= {base64.b64encode(f"{u}:{p}".encode()).decode() for u in users for p in passwords}
    out |= {base64.b64encode(k.encode()).decode() for k in keys if ":" in k}
    return {s for s in out if s}


def split_url_credentials(url: str) -> tuple[str, str, str]:
    """(user, password, the URL without them) of a URL that may hold `user:password@` (unquoted). The user
    information runs to the URL's last `@`, so a password holding an unencoded `/`, `#` or `?` (which would end the
    host part of a URL) is read whole, never taken for a path, a query or a fragment that a message would quote:
    credentials are parsed before any check of the URL prints it. Read by hand: urlsplit drops line breaks and
    tabs, which would hide the very characters `check_credential` looks for."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return "", "", url
    user, _, password = userinfo.partition(":")
    return unquote(user), unquote(password), f"{scheme}{sep}{host}"


def url_credentials(url: str) -> tuple[str, str]:
    """(user, password) written into a URL, unquoted; empty where there are none (`split_url_credentials`)."""
    user, password, _ = split_url_credentials(url)
    return user, password


def with_quoted_credentials(url: str) -> str:
    """The URL with its user and password percent-encoded (as written where they were already), so that a client
    parsing it reads them whole; every wire form of them is remembered for scrubbing first."""
    user, password, bare = split_url_credentials(url)
    if not (user or password) and "@" not in url:
        return url
    remember(*wire_forms(passwords=[password], users=[user]))
    scheme, sep, host = bare.partition("://")
    if not sep:
        scheme, host = "", bare
    userinfo = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
    return f"{scheme}{sep}{userinfo}@{host}"


def remember(*forms: str) -> None:
    """Scrub these values (give `wire_forms`) from all output from now on."""
    _known.update(f for f in forms if f and len(f) >= MIN_SECRET)


def known() -> list[str]:
    """The values to scrub, longest first: those remembered and the credentials in the environment."""
    env = [os.environ.get(name, "") for name in SECRET_ENVS]
    forms = _known | {f for f in wire_forms(passwords=[env[1]], keys=[env[0]]) if len(f) >= MIN_SECRET}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the known credentials, those in `secrets`, Authorization header values and URL
    passwords."""
    for secret in sorted({*known(), *(s for s in secrets if s)}, key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _AUTH_VALUE.sub(r"\1\2***", text)


class ScrubbingStream:
    """A text stream that writes through `scrub`; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """stdout and stderr pass through `scrub` for the duration."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
