"""Issue 65, class B: a secret never reaches an output. A marker secret is planted in each place one can be
given (a config file's syntax error on the secret's line, a secret setting of the wrong type, the environment,
the query string and the headers of a request to `odqa serve`), and every output is searched for it: standard
output and error, log records, response bodies and headers, and the files the run wrote.

Before the fix a YAML syntax error on the password line quoted the line, a password of the wrong type was echoed
(`must be str, got ['...']`), and the server's access log wrote the query string whole (`?api_key=...`).
No model is loaded: the config refusals come before the pipeline, and the server runs over a stub pipeline.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.es_server import free_port
from tests.reliability.cli_checks import run_cli
from tests.reliability.logged_server import Records, server  # noqa: F401 (a fixture)

MARKER = "S3CRET-MARKER-123"


def files_holding(root, secret: str, planted=()) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and p not in planted and secret.encode() in p.read_bytes()]


# ---- the command line --------------------------------------------------------------------------------------
CONFIGS = {
    "YAML syntax error on the password line (unclosed quote)": (
        "c.yaml",
        f'elastic:\n  username: odqa\n  password: "{MARKER}\n  hosts: http://127.0.0.1:9\n',
    ),
    "YAML syntax error on the password line (a colon in it)": (
        "c.yaml",
        f"elastic:\n  username: odqa\n  password: {MARKER}: more\n",
    ),
    "YAML syntax error on the password line (text after the quote)": (
        "c.yaml",
        f'elastic:\n  password: "{MARKER}" x\n',
    ),
    "YAML syntax error on the api_key line (unclosed quote)": ("c.yaml", f"elastic:\n  api_key: '{MARKER}\n"),
    "YAML syntax error on the password line (a tab)": ("c.yaml", f"elastic:\n  password:\t{MARKER}\t: x\n"),
    "YAML syntax error after the password line": ("c.yaml", f"elastic:\n  password: {MARKER}\n  - x\n"),
    # (tomllib's syntax errors give the line and column only: a TOML file's never quoted the secret)
    "YAML password of the wrong type (a list)": ("c.yaml", f"elastic:\n  password: [{MARKER}]\n"),
    "YAML api_key of the wrong type (a table)": ("c.yaml", f"elastic:\n  api_key: {{id: {MARKER}}}\n"),
    "TOML password of the wrong type (a list)": ("c.toml", f'[elastic]\npassword = ["{MARKER}"]\n'),
    "TOML api_key of the wrong type (a table)": ("c.toml", f'[elastic]\napi_key = {{ id = "{MARKER}" }}\n'),
}


@pytest.mark.parametrize("case", list(CONFIGS))
@pytest.mark.parametrize("command", ["ask", "search"])
def test_a_secret_in_a_bad_config_file_is_never_printed(tmp_path, monkeypatch, capsys, case, command):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    name, text = CONFIGS[case]
    config = tmp_path / name
    config.write_text(text)
    with Records() as records:
        code, output = run_cli([command, "--config", config, "who wrote hamlet"], capsys)
    assert code == 2 and "Traceback" not in output, output[-1500:]
    errors = [line for line in output.splitlines() if "error:" in line]
    assert len(errors) == 1 and str(config) in errors[0], output[-1500:]  # one line, naming the file
    assert MARKER not in output, output[-1500:]
    assert not [t for t in records.texts if MARKER in t], records.texts
    assert not files_holding(tmp_path, MARKER, planted=[config])


def test_a_dump_of_the_config_masks_its_secrets(tmp_path):
    """OdqaConfig.to_dict() (what prints or writes the settings) and its repr hold no secret's value; the config
    itself keeps it, to connect with."""
    import json

    from odqa.config import OdqaConfig

    config_file = tmp_path / "odqa.toml"
    config_file.write_text(f'[elastic]\nusername = "odqa"\npassword = "{MARKER}"\napi_key = "{MARKER}-key"\n')
    config = OdqaConfig.load(config_file)
    assert config.elastic.password == MARKER and config.elastic.api_key == f"{MARKER}-key"
    dump = config.to_dict()
    assert MARKER not in json.dumps(dump) and MARKER not in repr(config)
    assert dump["elastic"]["password"] == dump["elastic"]["api_key"] == "***"
    assert dump["elastic"]["username"] == "odqa" and dump["retrieval"] == OdqaConfig().to_dict()["retrieval"]
    assert OdqaConfig().to_dict()["elastic"]["password"] == ""  # none given: an empty one says so


def test_the_servers_key_from_the_environment_is_scrubbed_like_any_credential(tmp_path, monkeypatch, capsys):
    """`odqa serve --api-key-env VAR`: the key read from VAR is scrubbed from all output as the Elasticsearch
    credentials of ODQA_ES_API_KEY / ODQA_ES_PASSWORD are (tests/reliability/test_secrets.py), so a library
    error quoting it (as a client rejecting a header does) prints *** instead."""
    import odqa.commands.serve

    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ODQA_TEST_SERVER_KEY", MARKER)

    def broken(args):
        raise RuntimeError(f"Invalid header value b'{MARKER}' for X-API-Key")

    monkeypatch.setattr(odqa.commands.serve, "make_pipeline", broken)
    with Records() as records:
        code, output = run_cli(["serve", "--api-key-env", "ODQA_TEST_SERVER_KEY", "--port", free_port()], capsys)
    assert code == 1 and "internal error" in output and "Invalid header value" in output, output[-1500:]
    assert MARKER not in output, output[-1500:]
    assert not [t for t in records.texts if MARKER in t], records.texts
    assert not files_holding(tmp_path, MARKER)


# ---- the server --------------------------------------------------------------------------------------------
# each with the marker in headers too (a wrong X-API-Key, a bearer token, a cookie): none of them is ever logged
HEADERS = {"X-API-Key": MARKER, "Authorization": f"Bearer {MARKER}", "Cookie": f"session={MARKER}"}
REQUESTS = {  # (method, path with query, JSON body)
    "api_key in the query of /health": ("GET", f"/health?api_key={MARKER}", None),
    "token in the query of /info": ("GET", f"/info?token={MARKER}", None),
    "key in the query of /ask": ("POST", f"/ask?key={MARKER}", {"question": "who wrote hamlet"}),
    "api_key in the query of /search": ("POST", f"/search?api_key={MARKER}", {"question": "hamlet"}),
    "password in the query of an unknown path": ("GET", f"/nowhere?password={MARKER}&x=1", None),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_a_secret_sent_to_the_server_is_never_logged_or_echoed(server, capfd, case):  # noqa: F811
    url, records = server
    method, path, body = REQUESTS[case]
    seen = len(records.texts)
    response = httpx.request(method, url + path, headers=HEADERS, json=body, timeout=30)
    assert response.status_code in (200, 401, 404), response.text
    deadline = time.monotonic() + 5  # the access line is written as the response goes
    while not [t for t in records.texts[seen:] if path.split("?")[0] in t] and time.monotonic() < deadline:
        time.sleep(0.02)
    logged = records.texts[seen:]
    assert [t for t in logged if path.split("?")[0] in t], f"no access line for {path}: {logged}"
    out, err = capfd.readouterr()
    for where, text in (
        ("response body", response.text),
        ("response headers", str(response.headers)),
        ("log records", "\n".join(logged)),
        ("stdout", out),
        ("stderr", err),
    ):
        assert MARKER not in text, f"{where}: {text[-1500:]}"
    if "?" in path:  # the query's names stay, for whoever reads the log
        assert any(f"{path.split('?')[1].split('=')[0]}=***" in t for t in logged), logged
