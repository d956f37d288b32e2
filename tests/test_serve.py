"""`odqa serve`: every endpoint, every kind of bad request, failures inside, the API key, concurrent requests and
the batching queue, Korean and Chinese text; over the demo corpus (FastAPI's TestClient, and once the real
`odqa serve` command on a free port of 127.0.0.1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from odqa.serve.app import MAX_BODY_BYTES, create_app
from odqa.serve.settings import API_KEY_HEADER, ServeSettings
from odqa.serve.worker import Job, PipelineWorker
from tests.answer_checks import assert_answer_read_from
from tests.conftest import REPO_ROOT
from tests.es_server import free_port
from tests.serve_fixtures import serve_pipeline, wait_until_healthy  # noqa: F401 (serve_pipeline: a fixture)

SETTINGS = ServeSettings()


@pytest.fixture(scope="module")
def client(serve_pipeline):  # noqa: F811
    with TestClient(create_app(serve_pipeline, SETTINGS), raise_server_exceptions=False) as c:
        yield c


def _passage(result: dict, passage_id: str) -> dict:
    return next(p for p in result["passages"] if p["id"] == passage_id)


def test_ask_answers_with_offsets_into_its_passage(client):
    response = client.post("/ask", json={"question": "In what year did Alexander Fleming discover penicillin?"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    result = response.json()
    best = result["answer"]
    assert_answer_read_from(best, result["passages"])
    assert result["confident"] == best["confident"] and result["answers"][0] == best
    # the offsets cut the answer out of its passage as the response gives it, and out of every evidence passage
    assert _passage(result, best["passage_id"])["text"][best["start"] : best["end"]] == best["text"]
    for evidence in best["evidence"]:
        assert _passage(result, evidence["passage_id"])["text"][evidence["start"] : evidence["end"]] == evidence["text"]
    assert [p["rank"] for p in result["passages"]] == list(range(1, len(result["passages"]) + 1))
    assert {m["title"] for m in result["mentions"]} >= {"Alexander Fleming"}
    assert set(result["timings_ms"]) >= {"link", "retrieve", "read", "total", "queue"}
    assert result["language"] == "en" and result["batch_size"] == 1
    assert result["outcome"] == ("answer" if result["confident"] else "best_guess")


def test_ask_takes_retriever_and_k(client):
    result = client.post("/ask", json={"question": "Who painted the Mona Lisa?", "retriever": "bm25", "k": 3}).json()
    assert len(result["passages"]) == 3 and {p["source"] for p in result["passages"]} <= {"bm25", "entity"}
    assert_answer_read_from(result["answer"], result["passages"])


def test_unsure_answer_is_a_best_guess_with_a_notice(client):
    result = client.post("/ask", json={"question": "What is the colour of the wind on Tuesdays?"}).json()
    if result["answer"] is None:
        assert "no answer found in the retrieved passages" in result["notices"]
    else:
        assert not result["confident"] and any(n.startswith("no confident answer") for n in result["notices"])


def test_search_returns_passages_only(client):
    result = client.post("/search", json={"question": "penicillin discovery", "k": 4, "retriever": "bm25"}).json()
    assert len(result["passages"]) == 4 and "answers" not in result
    assert result["passages"][0]["title"] in ("Penicillin", "Alexander Fleming")
    assert all(p["source"] == "bm25" for p in result["passages"])


def test_link_returns_entities(client):
    result = client.post("/link", json={"question": "Who painted the Mona Lisa?"}).json()
    assert result["linker_enabled"] and [m["title"] for m in result["mentions"]] == ["Mona Lisa"]
    mention = result["mentions"][0]
    assert "Who painted the Mona Lisa?"[mention["start"] : mention["end"]] == mention["text"] == "Mona Lisa"


def test_health_and_info(client, serve_pipeline):  # noqa: F811
    assert client.get("/health").json() == {"status": "ok", "passages": serve_pipeline.corpus_size}
    info = client.get("/info").json()
    assert info["index"]["passages"] == 308 and info["index"]["language"] == "en"
    assert info["index"]["backends"] == ["bm25", "dense"] and info["index"]["corpus_fingerprint"]
    assert info["models"]["reader"] == "reader" and set(info["inference"]) == {"reader", "linker", "encoder"}
    assert info["models"]["linker"] == "linker"  # the demo's knowledge base is there: its linker is listed
    assert info["retrievers"] == ["bm25", "dense", "hybrid"] and info["api_key_required"] is False
    assert info["limits"]["max_k"] == SETTINGS.max_k and info["defaults"]["retriever"] == "hybrid"


def test_openapi_schema_is_typed(client):
    schema = client.get("/openapi.json").json()
    assert {"/ask", "/search", "/link", "/health", "/info"} <= set(schema["paths"])
    ask = schema["components"]["schemas"]["AskRequest"]
    assert ask["required"] == ["question"] and ask["additionalProperties"] is False
    assert {"type": "string", "enum": ["bm25", "dense", "hybrid"]} in ask["properties"]["retriever"]["anyOf"]
    response = schema["paths"]["/ask"]["post"]["responses"]
    assert response["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/AskResponse")
    assert response["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")


def test_ask_batch_answers_each_question_as_ask_does_in_order(client):
    """POST /ask/batch (issue 77): {"questions": [...]} -> {"results": [...]}, each result an /ask answer of its
    question, in the order asked; the batch's limit is in the schema."""
    from odqa.serve.models import MAX_BATCH_QUESTIONS

    questions = ["Who painted the Mona Lisa?", "페니실린은 누가 발견했나?", "Who discovered penicillin?"]
    response = client.post("/ask/batch", json={"questions": questions, "retriever": "bm25", "k": 3})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["question"] for r in results] == questions
    # the demo's vectors are multilingual: a Korean question is answered from its English passages, dense
    route = results[1]["route"]
    assert (route["question_language"], route["passage_language"], route["retriever"]) == ("ko", "en", "dense")
    alone = client.post("/ask", json={"question": questions[2], "retriever": "bm25", "k": 3}).json()
    assert set(results[2]) == set(alone) and len(results[2]["passages"]) == 3
    assert [p["id"] for p in results[2]["passages"]] == [p["id"] for p in alone["passages"]]
    assert_answer_read_from(results[2]["answer"], results[2]["passages"])
    schema = client.get("/openapi.json").json()
    batch = schema["components"]["schemas"]["AskBatchRequest"]
    assert batch["properties"]["questions"]["maxItems"] == MAX_BATCH_QUESTIONS
    assert schema["paths"]["/ask/batch"]["post"]["responses"]["200"]["content"]["application/json"]["schema"][
        "$ref"
    ].endswith("/AskBatchResponse")
    assert client.get("/info").json()["limits"]["max_batch_questions"] == MAX_BATCH_QUESTIONS


def test_a_batch_is_queued_whole_or_refused_whole(serve_pipeline):  # noqa: F811
    from odqa.serve.worker import QueueFull

    worker = PipelineWorker(serve_pipeline, max_queue=3)  # not started: nothing leaves the queue
    worker.ask("Who wrote Hamlet?", None, None)
    with pytest.raises(QueueFull, match="no room for 3 more"):
        worker.ask_many(["a?", "b?", "c?"], None, None)
    assert len(worker._pending) == 1 and len(worker.ask_many(["a?", "b?"], None, None)) == 2


def test_the_browser_icon_is_served(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.content.lstrip().startswith(b"<svg") and 'rel="icon"' in client.get("/").text


def test_notices_sent_over_http_name_no_folder_of_the_server(nothing_retrieved, tmp_path):
    """The "languages differ" notice named the index folder; no notice sent to a visitor names one (issue 77)."""
    from odqa.serve.public import SERVER_PLACE, public_text, server_places

    for result in nothing_retrieved.values():
        assert not [n for n in result["notices"] if "/" in n or "\\" in n], result["notices"]
    index = tmp_path / "work_indexes" / "wiki"
    index.mkdir(parents=True)
    places = server_places([str(index), "reader", "es://host:9200/name"])
    said = public_text(f"the index {index} and {index.resolve()}/x; ~/models/r and reader: C:\\odqa\\idx", places)
    assert str(tmp_path) not in said and "~/models" not in said and "C:" not in said and "reader:" in said
    assert said.startswith(f"the index {SERVER_PLACE} and {SERVER_PLACE}")
    assert public_text("answers may be poor (0.5/1 and km/h)", places) == "answers may be poor (0.5/1 and km/h)"


def test_page_ships_everything_it_needs(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assets = ["/static/page.js", "/static/page.css"]
    for path in assets:
        assert path in page.text and client.get(path).status_code == 200
    for text in [page.text, *(client.get(p).text for p in assets)]:
        assert "http://" not in text and "https://" not in text  # no CDN, nothing fetched from elsewhere
    assert "innerHTML" not in client.get("/static/page.js").text  # untrusted passages go in as text


BIG = "x" * 1_000_000
BAD_REQUESTS = [
    ("/ask", {}, "question", "missing"),
    ("/ask", {"question": ""}, "question", "empty"),
    ("/ask", {"question": "   ?! "}, "question", "only punctuation"),
    ("/ask", {"question": BIG}, "question", "1 MB question"),
    ("/ask", {"question": 42}, "question", "question not a string"),
    ("/ask", {"question": ["Who wrote Hamlet?"]}, "question", "question a list"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": "5"}, "k", "k a string"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": 2.5}, "k", "k a fraction"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": True}, "k", "k a boolean"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": 0}, "k", "k zero"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": -3}, "k", "k negative"),
    ("/ask", {"question": "Who wrote Hamlet?", "k": SETTINGS.max_k + 1}, "k", "k above the limit"),
    ("/ask", {"question": "Who wrote Hamlet?", "retriever": "sparse"}, "retriever", "unknown retriever"),
    ("/ask", {"question": "Who wrote Hamlet?", "retriever": 1}, "retriever", "retriever not a string"),
    ("/ask", {"question": "Who wrote Hamlet?", "language": "fr"}, "language", "unknown language"),
    ("/ask", {"question": "Who wrote Hamlet?", "retreiver": "bm25"}, "retreiver", "misspelt field"),
    ("/ask", ["Who wrote Hamlet?"], "body", "body not an object"),
    ("/search", {}, "question", "search: missing"),
    ("/search", {"question": "Hamlet", "k": 0}, "k", "search: k zero"),
    ("/search", {"question": "Hamlet", "retriever": "sparse"}, "retriever", "search: unknown retriever"),
    ("/search", {"question": BIG}, "question", "search: 1 MB question"),
    ("/link", {"question": ""}, "question", "link: empty"),
    ("/link", {"question": None}, "question", "link: null"),
    ("/ask/batch", {"questions": []}, "questions", "batch: no question"),
    ("/ask/batch", {"questions": ["Who wrote Hamlet?", ""]}, "questions.1", "batch: an empty question"),
    ("/ask/batch", {"questions": ["Who wrote Hamlet?", None]}, "questions.1", "batch: a null question"),
    ("/ask/batch", {"questions": ["Hamlet?"] * 65}, "questions", "batch: over the limit"),
    ("/ask/batch", {"questions": ["Hamlet?"], "k": 0}, "k", "batch: k zero"),
    ("/ask/batch", {"question": "Who wrote Hamlet?"}, "questions", "batch: /ask's body"),
]


@pytest.mark.parametrize("path, body, field, kind", BAD_REQUESTS, ids=[case[3] for case in BAD_REQUESTS])
def test_bad_request_is_a_4xx_naming_the_field(client, path, body, field, kind):
    response = client.post(path, json=body)
    assert response.status_code == 422 and response.headers["content-type"] == "application/json"
    error = response.json()
    assert error["field"] == field and error["error"].startswith(f"{field}: ")
    assert len(error["error"]) < 300 and "\n" not in error["error"]  # one line, never the 1 MB echoed back
    assert client.post("/search", json={"question": "Hamlet", "k": 1}).status_code == 200  # still serving


def test_unreadable_or_oversized_body(client):
    response = client.post("/ask", content=b'{"question": "Who wrote', headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["field"] == "body"
    response = client.post("/ask", content=b"x" * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["field"] == "body"

    def chunks():  # no Content-Length: refused as it passes the limit
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536

    response = client.post("/ask", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and "bytes" in response.json()["error"]
    assert client.get("/nowhere").json()["error"].startswith("no such path /nowhere")
    assert client.get("/ask").status_code == 405 and "error" in client.get("/ask").json()
    assert client.get("/health").status_code == 200


def test_internal_failure_is_a_500_without_traceback_or_secret(client, serve_pipeline, monkeypatch):  # noqa: F811
    secret = "sk-live-4f9a1c77"

    def fail(*args, **kwargs):
        raise RuntimeError(f"connection to https://admin:{secret}@db.internal failed")

    monkeypatch.setattr(serve_pipeline.reader, "read_many", fail)
    response = client.post("/ask", json={"question": "Who wrote Hamlet?"})
    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    body = response.text
    assert secret not in body and "Traceback" not in body and "RuntimeError" not in body and "db.internal" not in body
    assert response.json()["error"].startswith("internal error (id ")
    monkeypatch.undo()
    result = client.post("/ask", json={"question": "Who wrote Hamlet?"}).json()
    assert_answer_read_from(result["answer"], result["passages"])


def test_api_key(serve_pipeline):  # noqa: F811
    key = "k3y-of-the-test"
    with TestClient(create_app(serve_pipeline, SETTINGS, api_key=key)) as keyed:
        for sent in (None, "wrong"):
            response = keyed.post(
                "/ask", json={"question": "Who wrote Hamlet?"}, headers={API_KEY_HEADER: sent} if sent else {}
            )
            assert response.status_code == 401 and response.json()["field"] == API_KEY_HEADER
            assert key not in response.text
        assert keyed.get("/info", headers={API_KEY_HEADER: "wrong"}).status_code == 401
        assert set(keyed.get("/info").json()) == {"version", "api_key_required", "api_key_header"}  # no key: only that
        assert keyed.get("/health").status_code == 200 and keyed.get("/").status_code == 200
        good = keyed.post("/search", json={"question": "Hamlet", "k": 1}, headers={API_KEY_HEADER: key})
        assert good.status_code == 200 and keyed.get("/info", headers={API_KEY_HEADER: key}).json()["api_key_required"]
        assert key not in repr(keyed.app.state.server)  # what the routes share shows the pipeline, not the key


def test_concurrent_requests_get_their_own_answers(client, serve_pipeline):  # noqa: F811
    from odqa.corpus.questions import load_questions
    from odqa.demo_corpus import DEMO_QUESTIONS

    questions = [item.question for item in load_questions(str(DEMO_QUESTIONS))[:8]]
    alone = {r.question: r.answers[0].text for r in (serve_pipeline.ask(q) for q in questions)}
    with ThreadPoolExecutor(len(questions)) as pool:
        responses = list(pool.map(lambda q: client.post("/ask", json={"question": q}), questions * 2))
    assert all(r.status_code == 200 for r in responses)
    for question, response in zip(questions * 2, responses):
        result = response.json()
        best = result["answer"]
        assert (
            result["question"] == question
            and _passage(result, best["passage_id"])["text"][best["start"] : best["end"]] == best["text"]
        )
        # the int8 reader quantises each batch's activations with that batch's own range, so a question read
        # beside others may end its span a word sooner or later; never another question's answer
        assert best["text"] in alone[question] or alone[question] in best["text"]


def test_worker_reads_waiting_questions_in_one_batch_and_isolates_a_failure(serve_pipeline, monkeypatch):  # noqa: F811
    worker = PipelineWorker(serve_pipeline, max_batch=3)
    asked = [
        "Who wrote Hamlet?",
        "Who painted the Mona Lisa?",
        "Who assassinated Abraham Lincoln?",
        "Which philosopher tutored Alexander the Great?",
    ]
    futures = [worker.ask(q, None, None) for q in asked]
    other = worker.ask("Who wrote Hamlet?", 3, "bm25")  # another k and retriever: not in the same batch
    worker.start()
    try:
        done = [f.result(timeout=120) for f in futures]
        assert [d.batch_size for d in done] == [3, 3, 3, 1]
        assert [d.result.question for d in done] == asked
        assert other.result(timeout=120).batch_size == 1 and len(other.result().result.passages) == 3
        read_many = serve_pipeline.reader.read_many

        def fail_on_one(questions, *args, **kwargs):
            if "Who wrote Hamlet?" in questions:
                raise RuntimeError("this question breaks the reader")
            return read_many(questions, *args, **kwargs)

        monkeypatch.setattr(serve_pipeline.reader, "read_many", fail_on_one)
        with worker._ready:  # three waiting together: the batch fails, then each is read alone
            futures = [worker.submit(Job("ask", q)) for q in asked[:3]]
        with pytest.raises(RuntimeError, match="breaks the reader"):
            futures[0].result(timeout=120)
        for question, future in zip(asked[1:3], futures[1:]):
            read, alone = (
                future.result(timeout=120).result.answers[0].text,
                serve_pipeline.ask(question).answers[0].text,
            )
            assert read in alone or alone in read  # its own answer (int8 batches may move a span's end a word)
    finally:
        worker.stop()


def test_korean_and_chinese_text(bm25_index_of):
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline

    docs = [
        {
            "id": "ko1",
            "title": "임진왜란",
            "text": "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다. 이순신 장군이 "
            "한산도 대첩에서 승리하였다.",
        },
        {"id": "ko2", "title": "한글", "text": "한글은 1443년 세종대왕이 창제한 문자이다. 훈민정음이라고도 부른다."},
        {"id": "ko3", "title": "서울", "text": "서울은 대한민국의 수도이며 한강이 도시를 가로지른다."},
        {"id": "zh1", "title": "长城", "text": "长城是中国古代的军事防御工程，秦始皇统一六国后修筑了万里长城。"},
    ]
    index = bm25_index_of(docs, "cjk")
    pipeline = Pipeline(
        OdqaConfig.load(None, {"index": str(index), "retrieval.retriever": "bm25", "linker.enabled": False})
    )
    with TestClient(create_app(pipeline, SETTINGS)) as cjk:
        found = cjk.post("/search", json={"question": "세종대왕이 창제한 문자는?", "k": 2}).json()
        assert found["question"] == "세종대왕이 창제한 문자는?" and found["passages"][0]["text"] == docs[1]["text"]
        assert found["passages"][0]["lang"] == "ko"  # the page's lang attribute
        found = cjk.post("/search", json={"question": "谁修筑了万里长城？", "k": 1}).json()
        assert found["passages"][0]["title"] == "长城" and found["passages"][0]["text"] == docs[3]["text"]
        assert found["passages"][0]["lang"] == "zh-Hans"
        response = cjk.post("/ask", json={"question": "임진왜란은 몇 년에 시작되었나?", "k": 2})
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        result = json.loads(response.content.decode("utf-8"))
        assert result["language"] == "ko" and result["passages"][0]["title"] == "임진왜란"
        for answer in result["answers"]:
            assert _passage(result, answer["passage_id"])["text"][answer["start"] : answer["end"]] == answer["text"]
            assert answer["lang"] == _passage(result, answer["passage_id"])["lang"]
        assert cjk.post("/ask", json={"question": "谁修筑了长城？", "language": "zh"}).json()["language"] == "zh"
        assert cjk.get("/info").json()["index"]["language"] == "ko"
        assert cjk.post("/link", json={"question": "서울"}).json()["linker_enabled"] is False


OUTCOME_DOCS = [  # no "wrote": the server's warm-up question retrieves nothing, so no reader is loaded here
    {"id": "p1", "title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in 1928 in London."},
    {"id": "e1", "title": "Everest", "text": "Mount Everest is the highest mountain above sea level on Earth."},
]


@pytest.fixture(scope="module")
def nothing_retrieved(bm25_index_of):
    """The server's answers to a question in another language than the English index's, and to one whose words
    no passage holds (issue 64 item 5)."""
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline

    pipeline = Pipeline(
        OdqaConfig.load(
            None,
            {
                "index": str(bm25_index_of(OUTCOME_DOCS, "outcomes")),
                "retrieval.retriever": "bm25",
                "linker.enabled": False,
            },
        )
    )
    with TestClient(create_app(pipeline, SETTINGS)) as outcomes:
        return {
            "language_differs": outcomes.post("/ask", json={"question": "페니실린은 누가 발견했나?"}).json(),
            "no_passages": outcomes.post("/ask", json={"question": "xylophone quokka zeppelin"}).json(),
        }


def test_ask_says_nothing_was_retrieved_and_claims_no_answer(nothing_retrieved):
    other, none = nothing_retrieved["language_differs"], nothing_retrieved["no_passages"]
    for result in (other, none):
        assert result["answer"] is None and result["answers"] == [] and result["passages"] == []
        assert not [n for n in result["notices"] if "answers may be poor" in n or "retrieved passages" in n]
    assert other["outcome"] == "language_differs" and other["language"] == "ko"
    assert [n for n in other["notices"] if n.startswith("languages differ: the question is Korean and the index")]
    assert none["outcome"] == "no_passages"
    assert "no passage was retrieved for the question, so none was read" in none["notices"]


# the page's script (odqa/serve/static/page.js) run by Node over a stand-in for the few DOM calls it makes
PAGE_IN_NODE = r"""
const fs = require("fs"), vm = require("vm");
class Element {
  constructor(tag) { Object.assign(this, { tag, children: [], textContent: "", hidden: false, className: "", lang: "",
    dataset: {}, classList: { toggle() {} } }); }
  replaceChildren(...nodes) { this.children = nodes; }
  append(...nodes) { this.children.push(...nodes); }
}
const byId = {};
const document = { getElementById: (id) => byId[id] || (byId[id] = new Element("#" + id)),
  createElement: (tag) => new Element(tag), createTextNode: (text) => ({ textContent: text }), addEventListener() {} };
const page = vm.createContext({ document, URL, sessionStorage: { getItem: () => null, setItem() {} } });
vm.runInContext(fs.readFileSync(process.argv[1], "utf8"), page);
const parts = (node) => node.children.map((c) => ({ tag: c.tag || "#text", text: c.textContent,
  href: c.href || null }));
const shown = JSON.parse(fs.readFileSync(0, "utf8")).map((result) => {
  page.render(result);
  return { verdict: byId.verdict.textContent, answer: byId.answer.textContent,
           notices: byId.notices.children.map((n) => n.textContent), passages: byId.passages.children.length,
           answerLineHidden: byId["answer-line"].hidden, passagesHeadingHidden: byId["passages-heading"].hidden,
           entitiesHeadingHidden: byId["entities-heading"].hidden, source: parts(byId["answer-source"]),
           heads: byId.passages.children.map((item) => parts(item.children[0])),
           langs: { question: byId["question-echo"].lang, answer: byId.answer.lang, result: byId.result.lang,
                    source: byId["answer-source"].children.map((node) => node.lang || ""),
                    passages: byId.passages.children.map((p) => p.lang),
                    others: byId["other-answers"].children.map((li) => li.children[0].lang) } };
});
console.log(JSON.stringify(shown));
"""


def _rendered(results: list[dict]) -> list[dict]:
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip(
            "node not found: the page's script is run by Node here (tests/test_serve_browser.py runs it in Chromium)"
        )
    proc = subprocess.run(
        [node, "-e", PAGE_IN_NODE, str(REPO_ROOT / "odqa" / "serve" / "static" / "page.js")],
        input=json.dumps(results),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _answered(confident: bool) -> dict:
    answer = {
        "text": "Alexander Fleming",
        "probability": 0.9 if confident else 0.2,
        "confident": confident,
        "title": "Penicillin",
        "passage_id": "p1_0",
        "start": 28,
        "end": 45,
        "evidence": [],
    }
    passage = {
        "rank": 1,
        "id": "p1_0",
        "title": "Penicillin",
        "text": OUTCOME_DOCS[0]["text"],
        "source": "bm25",
        "score": 1.5,
    }
    return {
        "question": "Who discovered penicillin?",
        "language": "en",
        "confident": confident,
        "outcome": "answer" if confident else "best_guess",
        "answer": answer,
        "answers": [answer],
        "passages": [passage],
        "mentions": [],
        "timings_ms": {"total": 5.0},
        "batch_size": 1,
        "notices": [],
    }


def test_the_page_says_what_happened(nothing_retrieved):
    read_no_answer = {**_answered(True), "outcome": "no_answer", "confident": False, "answer": None, "answers": []}
    older_server = {key: value for key, value in nothing_retrieved["no_passages"].items() if key != "outcome"}
    shown = _rendered(
        [
            nothing_retrieved["language_differs"],
            nothing_retrieved["no_passages"],
            read_no_answer,
            _answered(True),
            _answered(False),
            older_server,
        ]
    )
    other, none, unanswered, confident, guess, older = shown
    assert other["verdict"].startswith("Nothing retrieved: the question is in another language than the index")
    assert other["answer"] == "" and other["passages"] == 0
    assert other["notices"] == nothing_retrieved["language_differs"]["notices"]
    assert none["verdict"] == older["verdict"] == "No passages were retrieved for this question, so nothing was read."
    assert unanswered["verdict"] == "No answer found in the retrieved passages."
    assert (confident["verdict"], confident["answer"]) == ("Answer", "Alexander Fleming")
    assert (guess["verdict"], guess["answer"]) == ("No confident answer. Best guess:", "Alexander Fleming")
    for result in shown:  # no answer is claimed where none was given
        assert "answers may be poor" not in " ".join(result["notices"])


def _in(lang: str, text: str, title: str, answer: str, pid: str, probability: float) -> tuple[dict, dict]:
    """(answer, passage) of a result, both tagged `lang` as the server tags them."""
    start = text.index(answer)
    found = {
        "text": answer,
        "probability": probability,
        "confident": False,
        "title": title,
        "passage_id": pid,
        "start": start,
        "end": start + len(answer),
        "evidence": [],
        "lang": lang,
    }
    return found, {"rank": 1, "id": pid, "title": title, "text": text, "source": "bm25", "score": 1.0, "lang": lang}


def test_the_page_shows_each_answer_and_passage_in_its_own_language():
    korean = _in(
        "ko", "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다.", "임진왜란", "1592년", "ko1_0", 0.4
    )
    simplified = _in("zh-Hans", "长城是中国古代的军事防御工程。", "长城", "长城", "zh1_0", 0.3)
    traditional = _in("zh-Hant", "長城是中國古代的軍事防禦工程。", "長城", "長城", "zh2_0", 0.2)
    result = {
        **_answered(False),
        "question": "임진왜란은 언제 시작되었나?",
        "language": "ko",
        "answer": korean[0],
        "answers": [korean[0], simplified[0], traditional[0]],
        "passages": [korean[1], simplified[1], traditional[1]],
    }
    (shown,) = _rendered([result])
    assert shown["langs"] == {
        "question": "ko",
        "answer": "ko",
        "result": "",  # the page's own words (the verdict, the labels) stay in its language, English
        "source": ["", "ko", ""],  # from “임진왜란”: the title in its language, the words around it the page's
        "passages": ["ko", "zh-Hans", "zh-Hant"],
        "others": ["zh-Hans", "zh-Hant"],
    }


def test_the_page_keeps_korean_words_whole_and_never_slants_hangul_or_han():
    css = (REPO_ROOT / "odqa" / "serve" / "static" / "page.css").read_text()
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S)))
    korean = [body for selector, body in rules.items() if selector.strip() == ":lang(ko)"]
    assert korean and "word-break: keep-all" in korean[0]
    upright = [body for selector, body in rules.items() if ".unsure .answer-text:lang(ko)" in selector]
    assert (
        upright
        and "font-style: normal" in upright[0]
        and ":lang(zh)" in next(s for s in rules if ".unsure .answer-text:lang(ko)" in s)
    )


def test_passages_and_answers_carry_the_language_tag_of_their_text():
    from odqa.core.types import Answer, Passage, SearchHit
    from odqa.serve.models import AnswerOut, PassageOut

    pytest.importorskip("opencc")  # tells Traditional from Simplified (the `cjk` extra)
    texts = {
        "ko": "한글은 1443년 세종대왕이 창제한 문자이다.",
        "zh-Hans": "长城是中国古代的军事防御工程，秦始皇修筑了万里长城。",
        "zh-Hant": "長城是中國古代的軍事防禦工程，秦始皇修築了萬里長城。",
        "en": "Penicillin was discovered by Alexander Fleming in 1928.",
    }
    for tag, text in texts.items():
        assert PassageOut.of(1, SearchHit(0, 1.0, Passage("p", "t", text))).lang == tag
        assert AnswerOut.of(Answer(text[:2], 1.0, 0.5, "p", "t", 0, 2, text)).lang == tag


def test_the_page_shows_no_empty_answer_box_nor_empty_headings_and_links_the_source(nothing_retrieved):
    """A question with no answer shows the verdict alone (no empty answer line), no "Passages" heading over no
    passage, no "Entities" heading where nothing was searched; a passage's source address is a link where it is
    http(s), text otherwise (issue 77)."""
    linked = _answered(True)
    linked["passages"] = [
        {**linked["passages"][0], "url": "https://en.wikipedia.org/wiki/Penicillin", "fusion": "rrf"},
        {**linked["passages"][0], "id": "p2_0", "url": "javascript:alert(1)"},
    ]
    other, answered = _rendered([nothing_retrieved["language_differs"], linked])
    assert other["answerLineHidden"] and other["passagesHeadingHidden"] and other["entitiesHeadingHidden"]
    assert other["source"] == [] and other["verdict"]
    assert not answered["answerLineHidden"] and not answered["passagesHeadingHidden"]
    assert answered["source"][1] == {
        "tag": "a",
        "text": "Penicillin",
        "href": "https://en.wikipedia.org/wiki/Penicillin",
    }
    first, second = answered["heads"]
    assert first[0]["tag"] == "a" and first[1]["text"] == " · bm25 1.500 (rrf)"
    assert second[0] == {"tag": "span", "text": "Penicillin", "href": None}  # javascript: is no link


def _serve(*args, env=None):
    return subprocess.Popen(
        [sys.executable, "run_qa.py", "serve", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_command_starts_answers_and_stops():
    port = free_port()
    server = _serve(
        "--port", str(port), "--no-access-log", "--api-key-env", "ODQA_TEST_KEY", env={"ODQA_TEST_KEY": "local-key"}
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, server, lambda: server.stdout.read())
        response = httpx.post(
            f"{url}/ask", json={"question": "Who wrote Hamlet?"}, headers={API_KEY_HEADER: "local-key"}, timeout=60
        )
        assert_answer_read_from(response.json()["answer"], response.json()["passages"])
        assert httpx.post(f"{url}/ask", json={"question": "Who wrote Hamlet?"}, timeout=60).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=60)[0]
    assert server.returncode == 0, output
    assert f"http://127.0.0.1:{port}/" in output and "local-key" not in output


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "args, env, says",
    [
        (["--api-key-env", "ODQA_UNSET_KEY_VAR"], {}, "ODQA_UNSET_KEY_VAR: that environment variable is unset"),
        (["--port", "0"], {}, "expected a whole number >= 1 <= 65535"),
    ],
    ids=["api-key-env unset", "port 0"],
)
def test_serve_refuses_bad_settings_in_one_line(args, env, says):
    server = _serve(*args, env=env)
    output = server.communicate(timeout=300)[0]
    assert server.returncode == 2 and says in output and "Traceback" not in output


@pytest.mark.subprocess
def test_serve_refuses_a_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = _serve("--port", str(taken.getsockname()[1]))
        output = server.communicate(timeout=300)[0]
    assert server.returncode == 2 and "cannot listen on 127.0.0.1" in output and "Traceback" not in output
