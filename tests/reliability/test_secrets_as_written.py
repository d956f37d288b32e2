"""Issue 78, class 4: a secret is parsed before anything prints the text around it, masked wherever a client may
put it, and taken as written or refused.

* An `es://` password (or one in an elastic.hosts URL) holding an unencoded `/`, `#` or `?` was cut there, and
  the URL checks printed the rest as an index name or a port;
* an API key sent as a path parameter (`/search;api_key=KEY`, percent-encoded or not) or as a path segment
  reached the access log (only what followed `?` was masked);
* YAML 1.1 reads an unquoted `password: 0777` as 511 and `api_key: 12:30:00` as 45000, which were sent as "511"
  and "45000": a secret that is not text as written is refused in one line saying to quote it, never shown."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.reliability.cli_checks import run_cli
from tests.reliability.logged_server import SERVER_KEY, server  # noqa: F401 (a fixture)

PASSWORD = "Zq7/Xk9#Wm3?Rt5"
PIECES = ("Zq7", "Xk9", "Wm3", "Rt5")


def _no_piece(text: str) -> None:
    for piece in PIECES:
        assert piece not in text, f"a piece of the password ({piece}) was printed: {text[-1500:]}"


@pytest.mark.parametrize(
    "location",
    [
        f"es://elastic:{PASSWORD}@127.0.0.1:1/passages",
        f"es+https://elastic:{PASSWORD}@127.0.0.1:1/passages",
        f"es://elastic:{PASSWORD}@127.0.0.1:99999/passages",  # a bad port: a URL check that prints the host
        f"es://elastic:{PASSWORD}@127.0.0.1:1/bad/name",  # a bad index name: a check that prints the name
    ],
    ids=["refused connection", "https", "bad port", "bad index name"],
)
def test_an_es_password_with_url_delimiters_is_never_printed(location, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    code, text = run_cli(["search", "--index", location, "--retriever", "bm25", "who wrote hamlet"], capsys)
    assert code == 2 and "Traceback" not in text, text[-1500:]
    _no_piece(text)


def test_a_hosts_url_password_with_url_delimiters_is_never_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    config = tmp_path / "odqa.toml"
    config.write_text(f'index = "es://"\n[elastic]\nhosts = "http://elastic:{PASSWORD}@127.0.0.1:x"\n')
    code, text = run_cli(["search", "--config", config, "--retriever", "bm25", "who wrote hamlet"], capsys)
    assert code == 2 and "Traceback" not in text, text[-1500:]
    _no_piece(text)


def test_the_password_is_read_whole_before_the_url_is_parsed():
    from odqa.core.secrets import url_credentials
    from odqa.indexes.elastic_connection import parse_location

    hosts, name = parse_location(f"es://elastic:{PASSWORD}@db.example:9200/passages")
    assert name == "passages" and url_credentials(hosts) == ("elastic", PASSWORD)
    assert "db.example:9200" in hosts and "#" not in hosts and "?" not in hosts


PATHS = {
    "path parameter": f"/health;api_key=MARK-{SERVER_KEY}-X",
    "path parameter, percent-encoded": f"/health%3Bapi_key%3DMARK-{SERVER_KEY}-X",
    "path parameter without a name": f"/search;MARK-{SERVER_KEY}-X",
    "the key as a path segment": f"/{SERVER_KEY}/info",
    "a query behind an encoded question mark": f"/health%3Fapi_key%3DMARK-{SERVER_KEY}-X",
}


@pytest.mark.parametrize("case", list(PATHS))
def test_a_key_anywhere_in_the_request_line_is_masked_in_the_access_log(server, case):  # noqa: F811
    url, records = server
    path = PATHS[case]
    seen = len(records.texts)
    httpx.get(url + path, timeout=30)
    deadline = time.monotonic() + 5  # the access line is written as the response goes
    while not [t for t in records.texts[seen:] if '"GET ' in t] and time.monotonic() < deadline:
        time.sleep(0.02)
    logged = [t for t in records.texts[seen:] if '"GET ' in t]
    assert logged, records.texts[seen:]
    assert not [t for t in logged if SERVER_KEY in t], logged


YAML_SECRETS = {  # the config, and what must not be shown: the value as written and as YAML 1.1 reads it
    "octal-looking password": ("elastic:\n  password: 0777\n", ("0777", "511")),
    "sexagesimal api key": ("elastic:\n  api_key: 12:30:00\n", ("12:30:00", "45000")),
    "a boolean password": ("elastic:\n  password: on\n", ("True",)),
    "a float password": ("elastic:\n  password: 3.10\n", ("3.10", "3.1")),
}


@pytest.mark.parametrize("case", list(YAML_SECRETS))
def test_a_secret_yaml_reads_as_something_else_is_refused_saying_to_quote_it(case, tmp_path, capsys):
    text_of_config, hidden = YAML_SECRETS[case]
    config = tmp_path / "odqa.yaml"
    config.write_text(text_of_config)
    code, text = run_cli(["search", "--config", config, "who wrote hamlet"], capsys)
    assert code == 2 and text.count("\n") == 1, text
    assert "quote" in text and str(config) in text, text
    for shown in hidden:
        assert shown not in text.replace(str(config), ""), text


def test_a_toml_secret_written_as_a_number_is_refused(tmp_path, capsys):
    config = tmp_path / "odqa.toml"
    config.write_text("[elastic]\npassword = 424242\n")
    code, text = run_cli(["search", "--config", config, "who wrote hamlet"], capsys)
    assert code == 2 and "quote" in text and "424242" not in text, text


def test_a_quoted_secret_is_kept_as_written(tmp_path):
    from odqa.config import OdqaConfig

    config = tmp_path / "odqa.yaml"
    config.write_text("elastic:\n  password: '0777'\n  api_key: \"12:30:00\"\n")
    loaded = OdqaConfig.load(config)
    assert loaded.elastic.password == "0777" and loaded.elastic.api_key == "12:30:00"
