"""`odqa serve` keeps the conventions users of a FastAPI service expect (issue 64, item 8): /docs and /redoc served
by the app (saying where the schema is when their CDN cannot be reached), CORS from `--cors-origin` only, every
error in FastAPI's shape (`detail: [{loc, msg, type}]`) beside the one-line `error`, 415 for a body not sent as
JSON, a schema that shows which optional fields take null, and a page that asks for the key of a guarded server
and says so when the server has gone. Over the demo corpus (FastAPI's TestClient); the page's script run by Node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from fastapi.testclient import TestClient

from odqa.serve.app import MAX_BODY_BYTES, create_app
from odqa.serve.settings import API_KEY_HEADER, ServeSettings
from tests.conftest import REPO_ROOT
from tests.es_server import free_port
from tests.serve_fixtures import serve_pipeline  # noqa: F401 (a fixture)

KEY = "k3y-of-the-conventions-test"
ORIGIN = "http://localhost:3000"
QUESTION = "Who wrote Hamlet?"


@pytest.fixture(scope="module")
def client(serve_pipeline):  # noqa: F811
    with TestClient(create_app(serve_pipeline, ServeSettings()), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def guarded(serve_pipeline):  # noqa: F811
    """A server with an API key whose pages at ORIGIN may call it."""
    with TestClient(
        create_app(serve_pipeline, ServeSettings(cors_origin=(ORIGIN,)), api_key=KEY), raise_server_exceptions=False
    ) as c:
        yield c


# ---- /docs and /redoc ----------------------------------------------------------------------------------------
def _policy(response) -> dict[str, list[str]]:
    directives = [d.split() for d in response.headers["content-security-policy"].split(";") if d.strip()]
    return {d[0]: d[1:] for d in directives}


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_pages_are_served_whole_by_the_server_and_name_the_schema(client, path):
    page = client.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'href="{client.app.openapi_url}"' in page.text and client.app.openapi_url == "/openapi.json"
    scripts = re.findall(r"<script([^>]*)>", page.text)
    assert scripts and all("src=" in attributes for attributes in scripts)  # no inline script to allow
    sources = [
        re.search(r'(?:src|href)="([^"]+)"', tag).group(1) for tag in re.findall(r"<(?:script|link)[^>]*>", page.text)
    ]
    sizes = []
    for source in sources:  # the UI's own files too: nothing from elsewhere, so it works offline
        assert source.startswith("/"), source
        asset = client.get(source)
        assert asset.status_code == 200 and len(asset.content) > 0, source
        sizes.append(len(asset.content))
    assert max(sizes) > 100_000  # Swagger UI's or ReDoc's bundle
    policy = _policy(page)
    assert all(value.startswith("'") or value.endswith(":") for values in policy.values() for value in values), policy
    assert policy["script-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
    assert "'self'" in policy["connect-src"]  # the schema, and "try it out", are fetched from this server
    assert client.get("/openapi.json").status_code == 200


# ---- CORS ----------------------------------------------------------------------------------------------------
def _preflight(c, origin: str, headers: str = f"content-type, {API_KEY_HEADER.lower()}"):
    return c.options(
        "/ask",
        headers={"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": headers},
    )


def test_cors_answers_the_origins_given_only(guarded):
    allowed = _preflight(guarded, ORIGIN)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ORIGIN
    assert API_KEY_HEADER.lower() in allowed.headers["access-control-allow-headers"].lower()
    other = _preflight(guarded, "http://evil.example")
    assert "access-control-allow-origin" not in other.headers
    assert other.status_code == 400 and other.json()["detail"][0]["loc"] == ["header", "Origin"]
    asked = guarded.post("/ask", json={"question": QUESTION}, headers={"Origin": ORIGIN, API_KEY_HEADER: KEY})
    assert asked.status_code == 200 and asked.headers["access-control-allow-origin"] == ORIGIN
    refused = guarded.post("/ask", json={"question": QUESTION}, headers={"Origin": ORIGIN})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN  # readable
    stranger = guarded.post(
        "/ask", json={"question": QUESTION}, headers={"Origin": "http://evil.example", API_KEY_HEADER: KEY}
    )
    assert "access-control-allow-origin" not in stranger.headers


def test_an_unexpected_failure_is_a_500_the_page_at_the_origin_can_read(serve_pipeline):  # noqa: F811
    secret = "sk-live-77c1"
    app = create_app(serve_pipeline, ServeSettings(cors_origin=(ORIGIN,)))

    @app.get("/fails")  # a failure no handler of the API takes (outside the pipeline's own error path)
    async def fails():
        raise RuntimeError(f"https://admin:{secret}@db.internal refused")

    with TestClient(app, raise_server_exceptions=False) as c:
        response = c.get("/fails", headers={"Origin": ORIGIN})
        assert response.status_code == 500 and response.headers["access-control-allow-origin"] == ORIGIN
        body = response.json()
        assert body["error"].startswith("internal error (id ") and body["detail"][0]["loc"] == ["server"]
        assert secret not in response.text and "db.internal" not in response.text
        assert c.post("/search", json={"question": "Hamlet", "k": 1}).status_code == 200  # the server goes on


def test_no_cors_origin_adds_no_cors_header(client):
    for response in (
        _preflight(client, ORIGIN),
        client.get("/health", headers={"Origin": ORIGIN}),
        client.post("/search", json={"question": "Hamlet", "k": 1}, headers={"Origin": ORIGIN}),
    ):
        assert not [h for h in response.headers if h.lower().startswith("access-control-")], response.headers


def test_serve_takes_cors_origin_repeated(monkeypatch, capsys):
    import uvicorn

    import odqa.commands.serve
    import odqa.serve.app
    from odqa.cli import main

    built = {}
    monkeypatch.setattr(odqa.commands.serve, "make_pipeline", lambda args: "pipeline")
    monkeypatch.setattr(odqa.serve.app, "warm_up", lambda pipeline: {})
    monkeypatch.setattr(odqa.serve.app, "create_app", lambda pipeline, settings, key, **_: built.update(s=settings))
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    argv = ["serve", "--port", str(free_port()), "--cors-origin", ORIGIN, "--cors-origin", "https://qa.example.org"]
    assert main(argv) == 0
    assert built["s"].cors_origin == (ORIGIN, "https://qa.example.org")
    assert main(["serve", "--port", str(free_port())]) == 0 and built["s"].cors_origin == ()
    built.clear()
    assert main(["serve", "--port", str(free_port()), "--cors-origin", f"{ORIGIN}/"]) == 2  # a browser never sends it
    said = capsys.readouterr().err
    assert not built and f"CORS origin '{ORIGIN}/' (--cors-origin): holds more than an origin" in said


# ---- errors in FastAPI's shape -------------------------------------------------------------------------------
def _failing(c, monkeypatch, how: str):
    from odqa.serve.worker import QueueFull

    worker = c.app.state.server.worker

    def busy(*args):
        raise QueueFull("every place in the queue is taken")

    def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(worker, "ask", busy if how == "busy" else broken)
    return c.post("/ask", json={"question": QUESTION})


ERRORS = {  # how -> status, field, loc of the first problem
    "field missing": (422, "question", ["body", "question"]),
    "k out of range": (422, "k", ["body", "k"]),
    "broken JSON": (422, "body", ["body", 13]),
    "no key": (401, API_KEY_HEADER, ["header", API_KEY_HEADER]),
    "wrong key": (401, API_KEY_HEADER, ["header", API_KEY_HEADER]),
    "too large": (413, "body", ["body"]),
    "text body": (415, "Content-Type", ["header", "Content-Type"]),
    "no such path": (404, None, ["path"]),
    "wrong method": (405, None, ["method"]),
    "failure inside": (500, None, ["server"]),
    "busy": (503, None, ["server"]),
}


@pytest.mark.parametrize("how", list(ERRORS))
def test_every_error_has_fastapis_detail_and_the_one_line_error(client, guarded, monkeypatch, how):
    json_type = {"content-type": "application/json"}
    response = {
        "field missing": lambda: client.post("/ask", json={}),
        "k out of range": lambda: client.post("/ask", json={"question": QUESTION, "k": 0}),
        "broken JSON": lambda: client.post("/ask", content=b'{"question": "Who', headers=json_type),
        "no key": lambda: guarded.post("/ask", json={"question": QUESTION}),
        "wrong key": lambda: guarded.get("/info", headers={API_KEY_HEADER: "wrong"}),
        "too large": lambda: client.post("/ask", content=b"x" * (MAX_BODY_BYTES + 1), headers=json_type),
        "text body": lambda: client.post("/ask", content=QUESTION, headers={"content-type": "text/plain"}),
        "no such path": lambda: client.get("/nowhere"),
        "wrong method": lambda: client.get("/ask"),
        "failure inside": lambda: _failing(client, monkeypatch, how),
        "busy": lambda: _failing(client, monkeypatch, how),
    }[how]()
    status, field, loc = ERRORS[how]
    assert response.status_code == status and response.headers["content-type"] == "application/json", response.text
    body = response.json()
    assert set(body) == {"error", "field", "detail"} and body["field"] == field
    assert body["error"] and "\n" not in body["error"] and len(body["error"]) < 400
    assert body["detail"] and body["detail"][0]["loc"] == loc
    for problem in body["detail"]:
        assert set(problem) == {"loc", "msg", "type"} and isinstance(problem["loc"], list)
        assert problem["msg"] and isinstance(problem["msg"], str) and problem["type"]
    if field:
        assert body["detail"][0]["msg"] in body["error"]
    assert KEY not in response.text and "a bug" not in response.text
    if how == "busy":
        assert response.headers["retry-after"] == "1"


def test_the_schema_gives_errors_their_shape(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    detail = schemas["ErrorDetail"]
    assert set(detail["required"]) == {"loc", "msg", "type"}
    assert schemas["ErrorResponse"]["properties"]["detail"]["items"]["$ref"].endswith("/ErrorDetail")
    responses = client.get("/openapi.json").json()["paths"]["/ask"]["post"]["responses"]
    assert {"401", "413", "415", "422", "500", "503"} <= set(responses)


# ---- a body not sent as JSON ---------------------------------------------------------------------------------
NOT_JSON = {
    "text/plain": {"content": QUESTION, "headers": {"content-type": "text/plain; charset=utf-8"}},
    "JSON as text/plain": {"content": json.dumps({"question": QUESTION}), "headers": {"content-type": "text/plain"}},
    "form data": {"data": {"question": QUESTION}},
    "multipart form": {"files": {"question": ("q.txt", QUESTION.encode())}},
    "no content type": {"content": QUESTION.encode()},
}


@pytest.mark.parametrize("how", list(NOT_JSON))
@pytest.mark.parametrize("path", ["/ask", "/search", "/link"])
def test_a_body_not_sent_as_json_is_a_415_saying_to_send_json(client, how, path):
    response = client.post(path, **NOT_JSON[how])
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert "application/json" in error and "\n" not in error and len(error) < 300


def test_broken_json_sent_as_json_stays_a_422(client):
    for kind in ("application/json", "application/json; charset=utf-8", "application/problem+json"):
        response = client.post("/ask", content=b'{"question": "Who wrote', headers={"content-type": kind})
        assert response.status_code == 422 and response.json()["field"] == "body", (kind, response.text)
    assert client.post("/ask", content=b"", headers={"content-type": "application/json"}).status_code == 422
    good = client.post(
        "/search",
        content=json.dumps({"question": "Hamlet", "k": 1}),
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert good.status_code == 200


# ---- null where the server takes it --------------------------------------------------------------------------
def _takes_null(schema: dict) -> bool:
    branches = schema.get("anyOf", [schema])
    if "enum" in schema and None not in schema["enum"]:
        return False  # an enum beside anyOf holds for every branch, the null one too
    return any(b.get("type") == "null" or None in b.get("enum", ()) for b in branches)


def test_the_schema_shows_null_where_the_server_takes_it(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model, fields in (("AskRequest", ("retriever", "k", "language")), ("SearchRequest", ("retriever", "k"))):
        for name in fields:
            assert _takes_null(schemas[model]["properties"][name]), (model, name, schemas[model]["properties"][name])
    assert not _takes_null(schemas["AskRequest"]["properties"]["question"])
    retriever = schemas["AskRequest"]["properties"]["retriever"]
    assert {"type": "string", "enum": ["bm25", "dense", "hybrid"]} in retriever["anyOf"]
    for name in ("retriever", "k", "language"):
        response = client.post("/ask", json={"question": QUESTION, name: None})
        assert response.status_code == 200, (name, response.text)
    assert client.post("/ask", json={"question": QUESTION, "language": None}).json()["language"] == "en"
    assert client.post("/search", json={"question": "Hamlet", "retriever": None, "k": None}).status_code == 200
    assert client.post("/ask", json={"question": None}).status_code == 422  # where null is not taken


# ---- the page ------------------------------------------------------------------------------------------------
def test_info_tells_a_client_without_the_key_only_that_one_is_needed(guarded, client):
    locked = guarded.get("/info")
    assert locked.status_code == 200
    assert locked.json() == {
        "version": locked.json()["version"],
        "api_key_required": True,
        "api_key_header": API_KEY_HEADER,
    }
    full = guarded.get("/info", headers={API_KEY_HEADER: KEY}).json()
    assert full["api_key_required"] is True and full["index"]["passages"] == 308
    assert client.get("/info").json()["api_key_required"] is False and "index" in client.get("/info").json()
    assert guarded.get("/", headers={}).status_code == 200 and "key-form" in guarded.get("/").text


# the page's script (odqa/serve/static/page.js) run by Node: a stand-in for the DOM calls it makes, and a fetch that
# answers what the test says (a JSON response, or a network failure)
PAGE_CALLS_IN_NODE = r"""
const fs = require("fs"), vm = require("vm");
class Element {
  constructor(tag) { Object.assign(this, { tag, children: [], textContent: "", hidden: false, className: "", lang: "",
    value: "", disabled: false, dataset: {}, listeners: {}, classList: { toggle() {} } }); }
  replaceChildren(...nodes) { this.children = nodes; }
  append(...nodes) { this.children.push(...nodes); }
  addEventListener(kind, f) { this.listeners[kind] = f; }
  focus() { this.focused = true; }
}
const byId = {}, stored = {}, sent = [], steps = JSON.parse(fs.readFileSync(0, "utf8"));
let ready = null;
const document = { getElementById: (id) => byId[id] || (byId[id] = new Element("#" + id)),
  createElement: (tag) => new Element(tag), createTextNode: (text) => ({ textContent: text }),
  addEventListener(kind, f) { ready = f; } };
for (const id of ["key-form", "result", "error"]) document.getElementById(id).hidden = true;  // as in index.html
const get = (id) => document.getElementById(id);
let answers = [];
async function fetch(path, options) {
  sent.push({ path, method: options.method, headers: options.headers });
  const next = answers.shift();
  if (next === "gone") throw new TypeError("Failed to fetch");
  return { ok: next.status < 400, status: next.status, statusText: "", json: async () => next.body };
}
const page = vm.createContext({ document, fetch, location: { origin: "http://127.0.0.1:8080" },
  performance: { now: () => 0 }, sessionStorage: { getItem: (k) => stored[k] ?? null,
  setItem: (k, v) => { stored[k] = String(v); }, removeItem: (k) => { delete stored[k]; } } });
vm.runInContext(fs.readFileSync(process.argv[1], "utf8"), page);
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
(async () => {
  const seen = [];
  for (const step of steps) {
    answers = step.answers;
    if (step.do === "load") { ready(); }
    else if (step.do === "ask") { get("question").value = step.question;
      get("ask-form").listeners.submit({ preventDefault() {} }); }
    else if (step.do === "key") { get("api-key").value = step.key;
      get("key-form").listeners.submit({ preventDefault() {} }); }
    for (let i = 0; i < 5; i++) await settle();
    seen.push({ keyForm: !get("key-form").hidden, keyPrompt: get("key-prompt").textContent,
      error: get("error").hidden ? "" : get("error").textContent, result: !get("result").hidden,
      answer: get("answer").textContent, passages: get("passages").children.length,
      sent: sent.splice(0).map((s) => ({ path: s.path, key: s.headers["X-API-Key"] || null })),
      stored: { ...stored } });
  }
  console.log(JSON.stringify(seen));
})();
"""


def _page_steps(steps: list[dict]) -> list[dict]:
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip(
            "node not found: the page's script is run by Node here (tests/test_serve_browser.py runs it in Chromium)"
        )
    proc = subprocess.run(
        [node, "-e", PAGE_CALLS_IN_NODE, str(REPO_ROOT / "odqa" / "serve" / "static" / "page.js")],
        input=json.dumps(steps),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_page_asks_a_guarded_server_for_its_key_and_says_when_the_server_is_gone(guarded):
    locked = guarded.get("/info").json()
    refused = guarded.post("/ask", json={"question": QUESTION}, headers={API_KEY_HEADER: "wrong"})
    info = guarded.get("/info", headers={API_KEY_HEADER: KEY}).json()
    answered = guarded.post("/ask", json={"question": QUESTION}, headers={API_KEY_HEADER: KEY}).json()
    reply = lambda response: {"status": 200, "body": response}  # noqa: E731
    opened, keyed, asked, wrong, rekeyed, again, gone = _page_steps(
        [
            {"do": "load", "answers": [reply(locked)]},
            {"do": "key", "key": KEY, "answers": [reply(info)]},
            {"do": "ask", "question": QUESTION, "answers": [reply(answered)]},
            {"do": "ask", "question": QUESTION, "answers": [{"status": 401, "body": refused.json()}]},
            {"do": "key", "key": KEY, "answers": [reply(info)]},
            {"do": "ask", "question": QUESTION, "answers": [reply(answered)]},
            {"do": "ask", "question": QUESTION, "answers": ["gone"]},
        ]
    )
    # a guarded server: the page opens on the key's input, not on an error
    assert opened["keyForm"] and "needs an API key" in opened["keyPrompt"] and opened["error"] == ""
    assert keyed["sent"] == [{"path": "/info", "key": KEY}] and not keyed["keyForm"]
    assert keyed["stored"] == {"odqa-api-key": KEY}  # sessionStorage only (the stand-in has no localStorage)
    assert asked["sent"] == [{"path": "/ask", "key": KEY}] and asked["answer"] == answered["answer"]["text"]
    # a 401 (the key changed on the server): the input again, the old answer gone, the key forgotten
    assert wrong["keyForm"] and "not accepted" in wrong["keyPrompt"] and wrong["error"] == ""
    assert not wrong["result"] and wrong["answer"] == "" and wrong["passages"] == 0 and wrong["stored"] == {}
    assert rekeyed["stored"] == {"odqa-api-key": KEY} and again["result"] and again["passages"]
    # the server gone: said in words, the old answer cleared
    assert gone["error"].startswith("The server at http://127.0.0.1:8080 is not answering")
    assert not gone["result"] and gone["answer"] == "" and gone["passages"] == 0


def test_the_page_says_a_server_gone_at_load_in_words():
    (loaded,) = _page_steps([{"do": "load", "answers": ["gone"]}])
    assert loaded["error"].startswith("The server at http://127.0.0.1:8080 is not answering") and not loaded["keyForm"]


def test_the_models_warm_up_once_where_the_caller_warmed_them(serve_pipeline, monkeypatch):  # noqa: F811
    """`odqa serve` warms the pipeline up before uvicorn starts (a missing model is one line there), and hands
    what that gave to the app, which then does not ask its warm-up question a second time."""
    import odqa.serve.app

    asked = []
    monkeypatch.setattr(
        odqa.serve.app, "warm_up", lambda pipeline: asked.append(pipeline) or {"location": "demo", "passages": 1}
    )
    warmed = {"location": "demo", "passages": len(serve_pipeline.bundle)}
    with TestClient(create_app(serve_pipeline, ServeSettings(), warmed=warmed)) as c:
        assert c.get("/health").status_code == 200
    assert asked == []
    with TestClient(create_app(serve_pipeline, ServeSettings())) as c:
        assert c.get("/health").status_code == 200
    assert asked == [serve_pipeline]
