"""Credentials never print (issue 47, item 1): an Elasticsearch API key, password or credentialed host URL that
no HTTP request can carry (a line break, a carriage return, a control or non-ASCII character), from the
environment or the config, is refused in one line naming the setting before any request; and whatever a
library raises with a credential in it (a traceback and its exception chain) leaves the CLI scrubbed.
No server is needed: nothing listens on port 9 here, and the refusals come before any connection.
"""

from __future__ import annotations

import base64

import pytest

import odqa.indexes.elastic
from tests.reliability.cli_checks import run_cli

KEY = "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw"


def _forms(secret: str) -> list[str]:
    """The secret as given, each line of it, and base64 as in an Authorization header."""
    forms = [secret, base64.b64encode(secret.encode("utf-8")).decode()]
    forms += [part for part in secret.replace("\r", "\n").split("\n") if len(part) >= 6]
    return forms


def assert_no_secret(text: str, secret: str) -> None:
    for form in _forms(secret):
        assert form not in text, f"{form!r} printed:\n{text[-1500:]}"
    assert "Traceback" not in text, text[-1500:]


BAD = {
    "line feed": f"{KEY[:20]}\n{KEY[20:]}",
    "carriage return": f"{KEY}\r",
    "control character": f"{KEY[:30]}\x1b{KEY[30:]}",
    "non-ASCII": f"{KEY[:25]}é{KEY[25:]}",
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_api_key_from_the_environment_is_refused_unprinted(monkeypatch, capsys, case):
    secret = BAD[case]
    monkeypatch.setenv("ODQA_ES_API_KEY", secret)
    code, text = run_cli(["search", "--index", "es://127.0.0.1:9/passages", "who wrote hamlet"], capsys)
    assert code == 2 and "ODQA_ES_API_KEY" in text, text[-800:]
    assert len(text.strip().splitlines()) == 1
    assert_no_secret(text, secret)


@pytest.mark.parametrize("setting", ["api_key", "password"])
def test_malformed_credential_from_the_config_is_refused_unprinted(tmp_path, monkeypatch, capsys, setting):
    monkeypatch.delenv("ODQA_ES_API_KEY", raising=False)
    monkeypatch.delenv("ODQA_ES_PASSWORD", raising=False)
    secret = f"{KEY[:20]}\r\n{KEY[20:]}"
    user = 'username = "odqa"\n' if setting == "password" else ""
    config = tmp_path / "c.toml"
    config.write_text(f'[elastic]\n{user}{setting} = "{secret.encode("unicode_escape").decode()}"\n')
    code, text = run_cli(["search", "--config", config, "--index", "es://127.0.0.1:9/passages", "who"], capsys)
    assert code == 2 and f"elastic.{setting}" in text, text[-800:]
    assert_no_secret(text, secret)


def test_malformed_password_in_a_host_url_is_refused_unprinted(monkeypatch, capsys):
    secret = "Pa55word-line\nbreak"
    url = f"es://odqa:{secret}@127.0.0.1:9/passages"
    code, text = run_cli(["search", "--index", url, "who"], capsys)
    assert code == 2 and "the password in an elastic.hosts URL holds a line break" in text, text[-800:]
    assert_no_secret(text, secret)


def test_a_credential_a_library_quotes_is_scrubbed_from_the_traceback(monkeypatch, capsys):
    """The last resort: an unexpected error whose message and cause quote the key and the credentialed URL
    (as a client rejecting a header does) prints, scrubbed, with exit 1."""
    monkeypatch.setenv("ODQA_ES_API_KEY", KEY)

    def broken_client(config, **kwargs):
        try:
            raise ValueError(f"Invalid header value b'ApiKey {KEY}'")
        except ValueError as exc:
            raise RuntimeError(f"connecting to http://odqa:hunter2-secret@127.0.0.1:9 with {KEY}") from exc

    monkeypatch.setattr(odqa.indexes.elastic, "connect", broken_client)
    code, text = run_cli(["search", "--index", "es://127.0.0.1:9/passages", "who"], capsys)
    assert code == 1 and "internal error" in text, text[-800:]
    assert "Invalid header value" in text and "***" in text  # the traceback and its chain, scrubbed
    for secret in (KEY, "hunter2-secret", base64.b64encode(KEY.encode()).decode()):
        assert secret not in text, text[-1500:]
