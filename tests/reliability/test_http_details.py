"""Issue 78, class 7: HTTP details a client or a user gets wrong.

* `GET /docs/` with `Host: evil.example` was redirected to http://evil.example/docs (Starlette builds its
  trailing-slash redirect from the Host header): the redirect is now a path on this server;
* a `--cors-origin` written with capitals or its scheme's default port never matched the Origin browsers send:
  it is taken as browsers write it;
* `/search` (and `/ask`) naming a retriever the index cannot serve (dense over a BM25-only index) answered 500:
  it is the client's choice, 422 naming the field;
* a run file written with `--query-id ""` had five fields, which trec_eval cannot read: an empty id is refused
  before any work."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.reliability.cli_checks import DOCS, jsonl, run_cli
from tests.reliability.stub_pipeline import StubPipeline


@pytest.fixture()
def make_client(monkeypatch):
    import odqa.serve.app
    from odqa.serve.settings import ServeSettings

    monkeypatch.setattr(
        odqa.serve.app, "warm_up", lambda pipeline: {"passages": 1, "language": "en", "location": "stub-index"}
    )

    def client(pipeline=None, **settings):
        app = odqa.serve.app.create_app(pipeline or StubPipeline(), ServeSettings(**settings))
        return TestClient(app, raise_server_exceptions=False)

    return client


@pytest.mark.parametrize("path", ["/docs/", "/redoc/", "/health/", "/docs//"])
def test_a_trailing_slash_never_redirects_to_the_host_the_client_names(make_client, path):
    with make_client() as client:
        response = client.get(path, headers={"host": "evil.example"}, follow_redirects=False)
    location = response.headers.get("location", "")
    assert "evil.example" not in location and not location.startswith("//"), (response.status_code, location)
    if response.status_code in (301, 302, 307, 308):
        assert location == path.rstrip("/"), location
        with make_client() as client:
            assert client.get(location).status_code == 200


def test_a_path_that_would_name_another_host_is_never_a_redirect():
    from odqa.serve.http_rules import slash_redirect

    assert slash_redirect("//evil.example/", {"//evil.example", "/docs"}) is None  # a network-path reference
    assert slash_redirect("/docs/", {"/docs"}) == "/docs"
    assert slash_redirect("/nowhere/", {"/docs"}) is None


@pytest.mark.parametrize(
    "given,sent",
    [
        ("HTTP://LocalHost:80", "http://localhost"),
        ("https://Example.ORG:443", "https://example.org"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("HTTPS://Example.org:8443", "https://example.org:8443"),
        ("http://B\u00fccher.example", "http://xn--bcher-kva.example"),  # an international name, as browsers send it
    ],
)
def test_a_cors_origin_is_matched_as_browsers_send_it(make_client, given, sent):
    with make_client(cors_origin=(given,)) as client:
        response = client.options("/ask", headers={"Origin": sent, "Access-Control-Request-Method": "POST"})
    assert response.status_code == 200 and response.headers.get("access-control-allow-origin") == sent, (
        response.status_code,
        response.text,
    )


@pytest.fixture(scope="module")
def bm25_only(tmp_path_factory):
    from odqa.cli import main

    root = tmp_path_factory.mktemp("bm25-only")
    out = root / "idx"
    assert main(["index", "--corpus", str(jsonl(root / "c.jsonl", DOCS)), "--out", str(out), "--backends", "bm25"]) == 0
    return out


@pytest.mark.parametrize("route", ["/search", "/ask"])
def test_a_retriever_the_index_cannot_serve_is_the_clients_error(make_client, bm25_only, route):
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline

    pipeline = Pipeline(OdqaConfig.load(overrides={"index": str(bm25_only), "linker.enabled": False}))
    with make_client(pipeline) as client:
        response = client.post(route, json={"question": "subject3 shared words", "retriever": "dense"})
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["field"] == "retriever" and "dense" in body["error"], body
        if route == "/search":
            assert client.post(route, json={"question": "subject3 words", "retriever": "bm25"}).status_code == 200


@pytest.mark.parametrize("ids", [[""], ["q1", ""]])
def test_an_empty_query_id_is_refused_before_any_work(ids, tmp_path, capsys):
    run = tmp_path / "run.trec"
    questions = ["who wrote hamlet"] * len(ids)
    argv = ["search", "--retriever", "bm25", "--trec-run", run, *questions, "--query-id", *ids]
    code, text = run_cli(argv, capsys)
    assert code == 2 and text.count("\n") == 1 and "empty id" in text, text
    assert not run.exists()


def test_a_question_file_with_an_empty_id_gives_no_five_field_run(tmp_path, capsys, bm25_only):
    """Refused, naming the file, or given an id of its own: either way no run line lacks a field."""
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "", "question": "subject3", "answer": ["subject3"]}) + "\n")
    run = tmp_path / "run.trec"
    argv = ["eval-retrieval", "--index", bm25_only, "--retriever", "bm25", "--questions", questions, "--trec-run", run]
    code, text = run_cli([*argv, "--k", "2"], capsys)
    if code == 2:
        assert "empty id" in text and str(questions) in text and not run.exists(), text
    else:
        assert code == 0, text
        lines = run.read_text().splitlines()
        assert lines and all(len(line.split()) == 6 for line in lines), lines


def test_every_line_of_a_run_has_six_fields(tmp_path, capsys, bm25_only):
    run = tmp_path / "run.trec"
    argv = ["search", "--index", bm25_only, "--retriever", "bm25", "--trec-run", run, "subject3 shared words"]
    code, text = run_cli([*argv, "--query-id", "my query"], capsys)
    assert code == 0, text
    lines = run.read_text().splitlines()
    assert lines and all(len(line.split()) == 6 for line in lines), lines
