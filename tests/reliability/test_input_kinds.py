"""Issue 65, item 7: messages that were unclear or wrong, and the classes behind them.

* Input paths (odqa.core.inputs, one rule for every reader): `predict -` and `predict /dev/stdin` read the
  questions piped in, a named pipe streams, and a device (/dev/zero never ends), a folder or a socket is
  refused for what it is, never "not found"; standard input that is a device is refused too.
* `ODQA_HOME` naming a file (or a path through one) is one line, not a traceback.
* `serve --api-key-env VAR` with a key no request can send (a line break, a control character, spaces around
  it) is refused at start in one line, instead of a server that refuses every request.
* A request body that is not UTF-8, or nested deeper than JSON is read, is a 422 naming the body and the fault.
* A `.json` config file is read as JSON (as `.yaml`/`.yml` are YAML, any other TOML); a broken one is one line
  naming the format and where.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from tests.es_server import free_port
from tests.reliability.cli_checks import DOCS, REPO, assert_clean, run_cli
from tests.reliability.stub_pipeline import StubPipeline, serve_client  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def index(bm25_index_of):
    return bm25_index_of(DOCS, "input-kinds")


def _cli(*args, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odqa.cli", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def _one_error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith("odqa: error:")]
    assert len(lines) == 1 and "Traceback" not in text, text[-1500:]
    return lines[0]


# ---- input paths ---------------------------------------------------------------------------------------------
PIPED = {  # what `predict` is given, the bytes piped in, the ids and questions it answers
    "-": ("-", b"what is subject3?\n\nwhat is subject5?\n", [("0", "what is subject3?"), ("2", "what is subject5?")]),
    "/dev/stdin": ("/dev/stdin", b'{"id": "q7", "question": "what is subject7?"}\n', [("q7", "what is subject7?")]),
}


@pytest.mark.subprocess
@pytest.mark.parametrize("case", list(PIPED))
def test_predict_reads_the_questions_piped_in(index, case):
    name, data, expected = PIPED[case]
    run = _cli("predict", name, "--index", index, "--no-linker", "--retriever", "bm25", "--k", "2", input=data)
    text = run.stdout.decode() + run.stderr.decode()
    assert run.returncode == 0 and "not found" not in text, text[-1500:]
    rows = [json.loads(line) for line in run.stdout.decode().splitlines()]
    assert [(r["id"], r["question"]) for r in rows] == expected, text[-1500:]


def test_questions_from_a_named_pipe_stream(index, tmp_path, capsys):
    fifo = tmp_path / "questions"  # no suffix: the format is what the content shows
    os.mkfifo(fifo)
    rows = [
        {"question": "what is subject3?", "answer": ["Passage 3"]},
        {"question": "what is subject4?", "answer": ["Passage 4"]},
    ]

    def write():
        with open(fifo, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    code, text = run_cli(
        ["eval-retrieval", "--index", index, "--questions", fifo, "--retriever", "bm25", "--k", "1"], capsys
    )
    writer.join(30)
    assert code == 0 and "2 questions" in text, text[-800:]


DEVICES = {  # argv with {dev} where the device goes
    "predict": ["predict", "{dev}", "--no-linker", "--retriever", "bm25"],
    "eval-retrieval --questions": ["eval-retrieval", "--questions", "{dev}", "--retriever", "bm25", "--k", "1"],
    "search --config": ["search", "--config", "{dev}", "--retriever", "bm25", "subject3"],
}


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
@pytest.mark.parametrize("case", list(DEVICES))
def test_a_device_given_as_an_input_is_refused_for_what_it_is(index, capsys, case, device):
    argv = [a.replace("{dev}", device) for a in DEVICES[case]] + ["--index", str(index)]
    code, text = run_cli(argv, capsys)
    assert_clean(code, text)
    assert code == 2 and "not found" not in text and f"{device} is a character device" in text, text[-800:]


@pytest.mark.parametrize("what", ["a folder", "a socket"])
def test_a_folder_or_socket_given_as_a_config_is_named(index, tmp_path, capsys, what):
    import socket

    path = tmp_path if what == "a folder" else tmp_path / "s.toml"
    with socket.socket(socket.AF_UNIX) as server:
        if what == "a socket":
            server.bind(str(path))
        code, text = run_cli(["search", "--index", index, "--config", path, "--retriever", "bm25", "subject3"], capsys)
    assert_clean(code, text)
    assert code == 2 and "not found" not in text and ("is a folder" if what == "a folder" else "is a socket") in text, (
        text[-800:]
    )


@pytest.mark.subprocess
def test_standard_input_that_never_ends_is_refused(index):
    with open("/dev/zero", "rb") as zero:
        run = _cli("predict", "-", "--index", index, "--no-linker", "--retriever", "bm25", stdin=zero)
    line = _one_error_line(run.stdout.decode() + run.stderr.decode())
    assert run.returncode == 2 and "standard input is a character device" in line and "not found" not in line, line


# ---- ODQA_HOME -----------------------------------------------------------------------------------------------
@pytest.mark.subprocess
@pytest.mark.parametrize("home", ["a file", "a path through a file"])
def test_odqa_home_naming_a_file_is_one_line(tmp_path, home):
    file = tmp_path / "home"
    file.write_text("not a folder")
    path = file if home == "a file" else file / "cache"
    run = _cli("search", "--retriever", "bm25", "--k", "1", "Who discovered penicillin?", env={"ODQA_HOME": str(path)})
    line = _one_error_line(run.stdout.decode() + run.stderr.decode())
    assert run.returncode == 2 and f"ODQA_HOME={path}" in line and "not a folder" in line, line
    assert file.read_text() == "not a folder"


# ---- the server's API key ------------------------------------------------------------------------------------
KEYS = {
    "a final line break": ("the-key-5150\n", "line break"),
    "a Windows line end": ("the-key-5150\r\n", "line break"),
    "a line break inside": ("the-key\n5150", "line break"),
    "a tab": ("the-key\t5150", "control character"),
    "a space before": (" the-key-5150", "space"),
    "a letter outside ASCII": ("the-kéy-5150", "outside ASCII"),
}


@pytest.mark.parametrize("case", list(KEYS))
def test_an_api_key_no_request_can_send_is_refused_at_start(monkeypatch, capsys, case):
    import odqa.commands.serve

    key, says = KEYS[case]

    def models(*args, **kwargs):
        raise AssertionError("the models were loaded: the key was not checked first")

    monkeypatch.setenv("ODQA_TEST_BROKEN_KEY", key)
    monkeypatch.setattr(odqa.commands.serve, "make_pipeline", models)
    code, text = run_cli(["serve", "--api-key-env", "ODQA_TEST_BROKEN_KEY", "--port", free_port()], capsys)
    line = _one_error_line(text)
    assert code == 2 and "ODQA_TEST_BROKEN_KEY" in line and says in line and "X-API-Key" in line, text[-800:]
    assert key.strip() not in text and "5150" not in text  # never the key itself


def test_create_app_refuses_such_a_key_too():
    from odqa.core.errors import OdqaError
    from odqa.serve.app import create_app

    with pytest.raises(OdqaError, match="line break"):
        create_app(StubPipeline(), api_key="the-key-5150\n")


# ---- request bodies ------------------------------------------------------------------------------------------
BODIES = {
    "not UTF-8 in a string": (b'{"question": "who wrote \xff hamlet"}', "not UTF-8"),
    "Latin-1 text": ('{"question": "qui a écrit Hamlet ?"}'.encode("latin-1"), "not UTF-8"),
    "a UTF-16 byte-order mark": (b"\xff\xfe{\x00}\x00", "not UTF-8"),
    "nested too deeply": (b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    "a deep list alone": (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
}


@pytest.mark.parametrize("case", list(BODIES))
def test_an_unreadable_request_body_is_a_422_saying_why(serve_client, case):  # noqa: F811
    body, says = BODIES[case]
    with serve_client() as client:
        response = client.post("/ask", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422 and response.headers["content-type"] == "application/json", response.text
        error = response.json()
        assert error["field"] == "body" and error["error"].startswith("body: ") and says in error["error"], error
        assert len(error["error"]) < 300 and "\n" not in error["error"]
        assert client.post("/ask", json={"question": "who wrote hamlet"}).status_code == 200  # still serving


# ---- config formats ------------------------------------------------------------------------------------------
def test_a_json_config_is_read_as_json(index, tmp_path, capsys):
    from odqa.config import OdqaConfig

    config = tmp_path / "odqa.json"
    config.write_text(json.dumps({"index": str(index), "retrieval": {"retriever": "bm25", "k": 3}}))
    loaded = OdqaConfig.load(config)
    assert (loaded.index, loaded.retrieval.retriever, loaded.retrieval.k) == (str(index), "bm25", 3)
    code, text = run_cli(["search", "--config", config, "--json", "subject3 shared words"], capsys)
    assert code == 0, text[-800:]
    hits = json.loads(text.strip().splitlines()[-1])
    assert hits["hits"][0]["id"] == "d3_0", hits  # the index the JSON names, searched as it says


CONFIGS = {  # file name, text, what the one line says
    "broken JSON": ("odqa.json", '{"retrieval": {"k": 3,}}', ["not valid JSON", "line 1"]),
    "JSON nested too deeply": (
        "odqa.json",
        '{"retrieval": ' + "[" * 100_000 + "]" * 100_000 + "}",
        ["not valid JSON", "nested too deeply"],
    ),
    "JSON that is a list": ("odqa.json", "[1, 2]", ["must hold a table of settings"]),
    "another suffix, not TOML": ("odqa.conf", '{"retrieval": {"k": 3}}', ["not valid TOML", "YAML or JSON named"]),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_broken_config_names_its_format_in_one_line(index, tmp_path, capsys, case):
    name, content, says = CONFIGS[case]
    config = tmp_path / name
    config.write_text(content)
    code, text = run_cli(["search", "--index", index, "--config", config, "subject3"], capsys)
    assert_clean(code, text)
    line = _one_error_line(text)
    assert code == 2 and all(s in line for s in says), line
