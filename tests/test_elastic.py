"""Elasticsearch backend against a live Elasticsearch-API server.

The server is noida-db (`pip install -e ".[elastic-test]"`), an API-compatible stand-in started here on a
free port of 127.0.0.1 with its own data folder, and stopped at the end. Without noida-db, or when it does
not start, these tests skip and say why. Production uses Elasticsearch 8/9 (docs/elasticsearch.md).
"""

from __future__ import annotations

import base64
import http.server
import json
import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from odqa.config import ElasticConfig
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.demo_corpus import DEMO_ENCODER, DEMO_QUESTIONS
from odqa.indexes.elastic import ElasticIndex, ElasticPassageIndex
from odqa.indexes.elastic_bulk import BulkOptions, load_passages
from odqa.linker.elastic import load_entities
from tests.answer_checks import assert_answer_read_from
from tests.es_server import NoidaServer, free_port, start_or_skip
from tests.retrievers import built_retriever

pytestmark = pytest.mark.elastic


@pytest.fixture(scope="session")
def es_server(tmp_path_factory):
    server = start_or_skip(NoidaServer(tmp_path_factory.mktemp("noida") / "data"))
    yield server
    server.stop()


def _config(url: str, name: str = "odqa-test", **kw) -> ElasticConfig:
    return ElasticConfig(hosts=url, index_name=name, **kw)


@pytest.fixture(scope="session")
def demo_bundle() -> Path:
    from odqa.demo_corpus import demo_index_path

    return demo_index_path(quiet=True)


@pytest.fixture(scope="session")
def demo_es(es_server, demo_bundle) -> ElasticIndex:
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-demo"))
    report = load_passages(
        index, demo_bundle, recreate=True, replicas=0, options=BulkOptions(chunk_size=100, progress=False)
    )
    assert report.created == report.total == report.count and report.failed == 0
    return index


@pytest.fixture(scope="session")
def es_backend(demo_es) -> ElasticPassageIndex:
    return ElasticPassageIndex(demo_es, num_candidates=100)


@pytest.fixture(scope="session")
def bundle(demo_bundle):
    from odqa.indexes.folder import FolderIndex

    return FolderIndex.open(demo_bundle)


@pytest.fixture(scope="session")
def demo_items():
    from odqa.corpus.questions import load_questions
    from odqa.demo_corpus import DEMO_QUESTIONS

    return load_questions(str(DEMO_QUESTIONS))


def test_load_records_meta_and_rerun_sends_nothing(demo_es, demo_bundle):
    assert demo_es.count() == 308 and demo_es.dim == 384
    assert demo_es.meta["encoder"] == DEMO_ENCODER and demo_es.meta["similarity"] == "dot_product"
    again = load_passages(demo_es, demo_bundle, options=BulkOptions(progress=False))
    assert again.skipped == 308 and again.sent == 0 and again.count == 308
    # a different corpus (here: a 10-passage slice) is refused rather than mixed in
    with pytest.raises(IndexMismatchError, match="another corpus"):
        load_passages(demo_es, demo_bundle, limit=10, options=BulkOptions(progress=False))


def test_bm25_recall_matches_embedded(es_backend, bundle, demo_items):
    from odqa.eval.retrieval import evaluate_retrieval

    ks = [5, 10, 20]
    embedded = evaluate_retrieval(built_retriever(bundle, "bm25"), demo_items, ks, progress=False)
    es = evaluate_retrieval(built_retriever(es_backend, "bm25"), demo_items, ks, progress=False)
    for k in ks:
        assert abs(es[f"recall@{k}"] - embedded[f"recall@{k}"]) <= 1.0, (k, es, embedded)


def test_knn_top10_matches_embedded(es_backend, bundle, demo_items):
    from odqa.retriever.dense import DenseRetriever

    dense = built_retriever(bundle, "dense")
    questions = [item.question for item in demo_items]
    vectors = dense.encoder.encode(questions)
    scores, rows = bundle.vector_index().search(vectors, 11)
    es_hits = DenseRetriever(es_backend, dense.encoder).search_vectors(vectors, 10)
    for q, hits in enumerate(es_hits):
        got, want = {h.row for h in hits}, set(rows[q, :10].tolist())
        if got != want:  # only a near-tie at the cut may differ (fp16 vectors re-normalised for dot_product)
            assert abs(float(scores[q, 9]) - float(scores[q, 10])) < 2e-3, (questions[q], got ^ want)
        assert all(h.passage is not None and h.passage.id == bundle.store.get(h.row).id for h in hits)
        np.testing.assert_allclose([h.score for h in hits][:3], scores[q, :3], atol=5e-3)


def test_hybrid_modes_and_rrf_fallback(demo_es, es_backend, demo_items, monkeypatch, caplog):
    from odqa.core.fusion import rrf_fuse

    questions = [item.question for item in demo_items[:8]]
    client_rrf = built_retriever(es_backend, "hybrid", fusion="rrf", candidates=50).search(questions, 10)
    dense = built_retriever(es_backend, "dense").search(questions, 50)
    sparse = built_retriever(es_backend, "bm25").search(questions, 50)
    for fused, d, s in zip(client_rrf, dense, sparse):  # the one fusion function (odqa.core.fusion)
        assert [h.row for h in fused] == [h.row for h in rrf_fuse([d, s], 10, 60)]
    minmax = built_retriever(es_backend, "hybrid", fusion="minmax").search(questions, 10)
    assert all(len(hits) == 10 and hits[0].passage for hits in minmax)

    server = built_retriever(es_backend, "hybrid", fusion="es-rrf", candidates=50).search(questions, 10)
    assert all(len(hits) == 10 and hits[0].passage.text for hits in server)

    # a server without the rrf retriever: one notice, then the same client-side RRF
    old = ElasticIndex(demo_es.client, demo_es.name, demo_es.hosts)
    monkeypatch.setattr(old.client, "info", lambda **kw: {"version": {"number": "8.11.4"}})
    with caplog.at_level(logging.WARNING, logger="odqa.indexes.elastic"):
        old_server = ElasticPassageIndex(old, num_candidates=100)
        fallback = built_retriever(old_server, "hybrid", fusion="es-rrf", candidates=50).search(questions, 10)
    assert [[h.row for h in hits] for hits in fallback] == [[h.row for h in hits] for hits in client_rrf]
    assert old.notices and "8.11.4" in old.notices[0] and "client-side" in caplog.text


def test_a_server_that_cannot_start_fails_in_ci_and_skips_elsewhere(tmp_path, monkeypatch):
    import tests.es_server

    monkeypatch.setattr(tests.es_server, "_noida_command", lambda: None)  # as where noida-db is not installed
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="noida-db is not installed.*CI is set"):
        start_or_skip(NoidaServer(tmp_path / "data"))
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="noida-db is not installed"):
        start_or_skip(NoidaServer(tmp_path / "data"))


def test_server_down_names_the_hosts():
    port = free_port()
    with pytest.raises(OdqaError, match=rf"cannot reach Elasticsearch at http://127\.0\.0\.1:{port}"):
        ElasticIndex.open(_config(f"http://127.0.0.1:{port}"))


def test_lost_mid_build_stops_with_last_committed_id_then_resumes(tmp_path, demo_bundle):
    server = start_or_skip(NoidaServer(tmp_path / "data"))
    try:
        index = ElasticIndex.open(_config(server.url, "odqa-test-resume"))
        committed = []

        def kill_after_two_chunks(report):
            committed.append(report.last_id)
            if len(committed) == 2:
                server.stop()

        options = BulkOptions(
            chunk_size=50, max_retries=2, initial_backoff=0.05, progress=False, on_chunk=kill_after_two_chunks
        )
        with pytest.raises(OdqaError) as info:
            load_passages(index, demo_bundle, replicas=0, options=options)
        message = str(info.value)
        assert "lost Elasticsearch at" in message and repr(committed[-1]) in message and "row 99" in message
        assert "rerun" in message

        server.start()  # same port, same data folder: the 100 committed passages are still there
        report = load_passages(index, demo_bundle, options=BulkOptions(chunk_size=50, progress=False))
        assert report.skipped == 100 and report.created == 208 and report.count == 308
        assert index.get_setting("refresh_interval") in (None, "1s")  # the load's "-1" was undone
    finally:
        server.stop()


class _RejectingClient:
    """Wraps a client: the first bulk request has its first `n` items rejected with HTTP 429 (queue full)."""

    def __init__(self, client, state):
        self._client, self._state = client, state

    def options(self, **kw):
        return _RejectingClient(self._client.options(**kw), self._state)

    def bulk(self, operations):
        n, self._state["reject"] = self._state["reject"], 0
        pairs = [operations[i : i + 2] for i in range(0, len(operations), 2)]
        rejected, passed = pairs[:n], pairs[n:]
        items = [
            {
                "create": {
                    "_id": op[0]["create"]["_id"],
                    "status": 429,
                    "error": {"type": "es_rejected_execution_exception", "reason": "queue full"},
                }
            }
            for op in rejected
        ]
        if passed:
            items += self._client.bulk(operations=[x for pair in passed for x in pair])["items"]
        return {"errors": bool(rejected), "items": items}

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_bulk_rejections_are_retried_counted_and_reported(es_server, demo_bundle):
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-reject"))
    index.client = _RejectingClient(index.client, {"reject": 7})
    report = load_passages(
        index,
        demo_bundle,
        recreate=True,
        replicas=0,
        options=BulkOptions(chunk_size=100, initial_backoff=0.01, progress=False),
    )
    assert report.rejected == 7 and report.failed == 0
    assert report.created == 308 and report.count == 308
    assert "7 rejections" in report.summary()


class _ForgetfulClient:
    """Wraps a client: acknowledges the documents of the rows in `state["drop"]` as created without storing
    them, as a server that restarts inside a retry wait loses what it had acknowledged but not saved.
    `state["times"]` bulk requests drop them; later ones store everything."""

    def __init__(self, client, state):
        self._client, self._state = client, state

    def options(self, **kw):
        return _ForgetfulClient(self._client.options(**kw), self._state)

    def bulk(self, operations):
        pairs = [operations[i : i + 2] for i in range(0, len(operations), 2)]
        dropping = self._state["times"] > 0
        if dropping:
            self._state["times"] -= 1
        lost = [pair for pair in pairs if dropping and pair[1]["row"] in self._state["drop"]]
        kept = [pair for pair in pairs if pair not in lost]
        items = self._client.bulk(operations=[x for pair in kept for x in pair])["items"] if kept else []
        return {
            "errors": False,
            "items": items + [{"create": {"_id": p[0]["create"]["_id"], "status": 201}} for p in lost],
        }

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_documents_lost_after_acknowledgement_are_sent_again(es_server, demo_bundle):
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-lost"))
    index.client = _ForgetfulClient(index.client, {"drop": set(range(120, 180)) | {307}, "times": 4})
    report = load_passages(
        index,
        demo_bundle,
        recreate=True,
        replicas=0,
        with_vectors=False,
        options=BulkOptions(chunk_size=100, progress=False),
    )
    assert report.resent == 61 and report.count == report.total == 308


def test_documents_still_missing_fail_the_load_with_the_numbers(es_server, demo_bundle):
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-lost2"))
    index.client = _ForgetfulClient(index.client, {"drop": set(range(10, 18)), "times": 10**6})
    with pytest.raises(OdqaError, match=r"holds 300 of 308 documents after the load \(8 missing ones sent again"):
        load_passages(
            index,
            demo_bundle,
            recreate=True,
            replicas=0,
            with_vectors=False,
            options=BulkOptions(chunk_size=100, progress=False),
        )


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def _answer(self):
        type(self).seen.append(self.headers.get("Authorization", ""))
        body = json.dumps(
            {
                "error": {
                    "type": "security_exception",
                    "reason": "unable to authenticate user for REST request [/]",
                    "root_cause": [{"type": "security_exception", "reason": "unable to authenticate"}],
                },
                "status": 401,
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("WWW-Authenticate", 'Basic realm="security"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def unauthorized_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Unauthorized.seen.clear()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_auth_failure_is_clear_and_never_shows_credentials(unauthorized_server, tmp_path, monkeypatch, capsys, caplog):
    from odqa.cli import main

    password, api_key, url_password = "pw-S3cret-4711", "QVBJLWtleS1zZWNyZXQtOTk=", "url-Pa55-0815"
    config = tmp_path / "odqa.toml"
    config.write_text(f'[elastic]\napi_key = "{api_key}"\n')
    monkeypatch.setenv("ODQA_ES_PASSWORD", password)
    caplog.set_level(logging.DEBUG)
    runs = [
        ["es-search", "--hosts", f"http://{unauthorized_server}", "--username", "elastic", "who"],
        [
            "es-search",
            "--hosts",
            f"http://{unauthorized_server}",
            "--config",
            str(config),
            "--retriever",
            "dense",
            "who",
        ],
        ["es-index", "--index", str(tmp_path), "--hosts", f"http://elastic:{url_password}@{unauthorized_server}"],
    ]
    for argv in runs:
        assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("rejected the credentials (HTTP 401)") == 3 and unauthorized_server in err
    assert len(_Unauthorized.seen) >= 3 and all(_Unauthorized.seen)  # credentials were sent...
    shown = out + err + caplog.text
    basic = base64.b64encode(f"elastic:{password}".encode()).decode()
    for secret in (password, api_key, url_password, basic):  # ...but never shown
        assert secret not in shown


def test_entity_index_from_the_demo_kb(es_server):
    from odqa.demo_corpus import demo_kb_path
    from odqa.linker.kb import KnowledgeBase

    path = demo_kb_path(quiet=True)
    kb = KnowledgeBase.load(path)
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-entities"))
    report = load_entities(index, path, recreate=True, options=BulkOptions(progress=False))
    assert report.count == len(kb) and index.meta["kind"] == "kb"
    rows = [0, 5, len(kb) - 1]
    hits = index.search_knn(np.asarray(kb.index.embeddings[rows], dtype=np.float32), 1)
    assert [h[0]["row"] for h in hits] == rows and hits[0][0]["id"] == kb.entries[0].id


def test_cli_es_index_and_es_search(es_server, demo_bundle, capsys):
    from odqa.cli import main

    base = ["--hosts", es_server.url, "--index-name", "odqa-test-cli"]
    assert (
        main(
            [
                "es-index",
                "--index",
                str(demo_bundle),
                *base,
                "--replicas",
                "0",
                "--no-vectors",
                "--recreate",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["created"] == 308 and report["count"] == 308
    assert main(["es-search", *base, "--k", "3", "--json", "In which city was Albert Einstein born?"]) == 0
    hits = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["hits"]
    assert len(hits) == 3 and hits[0]["title"] == "Albert Einstein"
    assert main(["es-search", *base, "--retriever", "dense", "who"]) == 2
    assert "holds no vectors" in capsys.readouterr().err


def test_elastic_and_local_hybrids_fuse_identical_lists_identically(es_backend, bundle, demo_items):
    from odqa.core.fusion import FUSIONS

    questions = [item.question for item in demo_items[:8]]
    dense = built_retriever(es_backend, "dense").search(questions, 30)
    sparse = built_retriever(es_backend, "bm25").search(questions, 30)
    for method in FUSIONS.names:
        es = built_retriever(es_backend, "hybrid", fusion=method, alpha=0.3, rrf_k=20)
        local = built_retriever(bundle, "hybrid", fusion=method, alpha=0.3, rrf_k=20)
        assert type(es) is type(local) and es.fusion.describe() == local.fusion.describe()
        for d, s in zip(dense, sparse):
            assert [(h.row, h.score) for h in es.fuse(d, s, 10)] == [(h.row, h.score) for h in local.fuse(d, s, 10)]


def _location(es_server, index) -> str:
    return f"es://127.0.0.1:{es_server.port}/{index.name}"


def test_pipeline_and_shell_run_on_an_elastic_index(demo_es, es_server):
    import io

    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell

    pipeline = Pipeline(OdqaConfig.load(None, {"index": _location(es_server, demo_es), "retrieval.k": 5}))
    assert pipeline.corpus_size == 308
    result = pipeline.ask("In which city was Albert Einstein born?", retriever="bm25")
    assert [h.source for h in result.passages] == ["bm25"] * 5 and result.passages[0].passage.title == "Albert Einstein"
    assert_answer_read_from(result.answers[0], result.passages)
    hybrid = pipeline.ask("In which city was Albert Einstein born?")  # the default: hybrid, the index holds vectors
    assert {h.source for h in hybrid.passages} == {"hybrid"}
    assert_answer_read_from(hybrid.answers[0], hybrid.passages)
    assert pipeline.linker is None  # no KB beside an Elasticsearch index: linking is off, said on stderr
    out = io.StringIO()
    Shell(pipeline, out=out).run_lines([":retriever dense", "In which city was Albert Einstein born?", ":passages"])
    assert "retriever = dense" in out.getvalue() and " dense] " in out.getvalue()


def test_ask_and_eval_qa_on_an_elastic_index(demo_es, es_server, demo_bundle, capsys):
    from odqa.cli import main

    location = _location(es_server, demo_es)
    question = "In which city was Albert Einstein born?"
    answers = {}
    for name, index in (("es", location), ("folder", str(demo_bundle))):
        assert main(["ask", "--index", index, "--no-linker", "--json", question]) == 0
        answers[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # which city the reader picks is the reader's call, not the index's: the Elasticsearch passages reach the
    # reader, and it answers from them what it answers from the same corpus in an index folder
    assert (
        answers["es"]["passages"][0]["title"] == "Albert Einstein"
        and answers["es"]["passages"][0]["source"] == "hybrid"
    )
    picked = {name: [(a["text"], a["title"]) for a in a_["answers"]] for name, a_ in answers.items()}
    assert picked["es"] and picked["es"][0] in picked["folder"], picked

    runs = {}
    for name, index in (("es", location), ("folder", str(demo_bundle))):
        assert (
            main(
                [
                    "eval-qa",
                    "--index",
                    index,
                    "--no-linker",
                    "--questions",
                    str(DEMO_QUESTIONS),
                    "--limit",
                    "20",
                    "--k",
                    "5",
                    "--recall-k",
                    "5",
                    "--json",
                ]
            )
            == 0
        )
        runs[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert runs["es"]["questions"] == 20 and abs(runs["es"]["em"] - runs["folder"]["em"]) <= 10.0, runs
    assert abs(runs["es"]["recall@5"] - runs["folder"]["recall@5"]) <= 10.0, runs


def test_eval_retrieval_on_an_elastic_index(demo_es, es_server, capsys):
    from odqa.cli import main

    location = _location(es_server, demo_es)
    assert (
        main(
            [
                "eval-retrieval",
                "--index",
                location,
                "--retriever",
                "bm25",
                "--questions",
                str(DEMO_QUESTIONS),
                "--limit",
                "40",
                "--batch-size",
                "8",
                "--k",
                "1",
                "5",
                "20",
                "--json",
            ]
        )
        == 0
    )
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["questions"] == 40 and metrics["recall@20"] >= metrics["recall@5"] >= metrics["recall@1"]
    assert metrics["recall@20"] > 50
    assert (
        main(
            [
                "eval-retrieval",
                "--index",
                location,
                "--fusion",
                "es-rrf",
                "--questions",
                str(DEMO_QUESTIONS),
                "--k",
                "5",
                "--limit",
                "10",
                "--batch-size",
                "5",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["questions"] == 10


def test_an_elastic_index_location_never_shows_its_credentials(unauthorized_server, capsys, caplog):
    from odqa.cli import main

    caplog.set_level(logging.DEBUG)
    password = "loc-Pa55-4242"
    assert main(["ask", "--index", f"es://elastic:{password}@{unauthorized_server}/wiki", "--no-linker", "who"]) == 2
    out, err = capsys.readouterr()
    assert "rejected the credentials (HTTP 401)" in err and unauthorized_server in err
    basic = base64.b64encode(f"elastic:{password}".encode()).decode()
    assert all(secret not in out + err + caplog.text for secret in (password, basic))
    assert _Unauthorized.seen and _Unauthorized.seen[-1].startswith("Basic ")  # sent, never shown


def test_article_passages_match_the_folder_store(demo_es, bundle):
    # the entity bonus's candidates: every article's passages, rows and order as the folder's store gives them
    from odqa.indexes.elastic import ElasticArticlePassages

    local, elastic = bundle.article_passages(), ElasticArticlePassages(demo_es)
    doc_ids = sorted(set(bundle.store.column("doc_id").to_pylist()))
    assert len(doc_ids) > 10
    for doc_id in doc_ids:
        want = [(row, p.id, p.title, p.text, p.doc_id) for row, p in local.article(doc_id, 200)]
        assert [(row, p.id, p.title, p.text, p.doc_id) for row, p in elastic.article(doc_id, 200)] == want, doc_id
        assert [row for row, _ in elastic.article(doc_id, 2)] == [w[0] for w in want[:2]]
    assert elastic.article("no-such-article", 5) == []


def _assert_same_ranking_up_to_ties(got, want, question, atol=1e-3):
    """Same passages with the same scores, in the same order except where two scores tie within float rounding
    (Lucene and FAISS sum in different orders; near-zero fused scores swap on some CPUs)."""
    np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=atol, err_msg=question)
    wanted = {(h.row, h.source): h.score for h in want}
    for hit in got:
        if (hit.row, hit.source) in wanted:
            assert abs(hit.score - wanted[hit.row, hit.source]) <= atol, (question, hit)
        else:  # only a tie at the cut-off may bring in another passage
            assert abs(hit.score - want[-1].score) <= atol, (question, hit)


def test_entity_bonus_on_an_elastic_index_ranks_as_on_the_folder_index(demo_es, es_server, demo_bundle, demo_items):
    """The same questions, linker and bonus over the folder index and over its Elasticsearch copy: the same
    passages, in the same order. Dense retrieval gives both backends the same lists (exact kNN on 308 passages),
    so any difference would be the bonus's; BM25 differs by engine (tantivy vs Lucene over text + title^0.5),
    which the bonus then carries (test_bm25_recall_matches_embedded bounds that)."""
    from odqa.config import OdqaConfig
    from odqa.demo_corpus import demo_kb_path
    from odqa.pipeline import Pipeline

    questions = [item.question for item in demo_items[:40]]
    settings = {
        "linker.kb": str(demo_kb_path(quiet=True)),
        "retrieval.retriever": "dense",
        "retrieval.k": 10,
        "retrieval.entity_bonus": 1.0,
    }
    plain, fused = {}, {}
    for name, location in (("folder", str(demo_bundle)), ("es", _location(es_server, demo_es))):
        pipeline = Pipeline(OdqaConfig.load(None, {**settings, "index": location}))
        plain[name] = pipeline.retriever().search(questions, 10)
        fused[name] = pipeline.retrieve(questions, pipeline.link(questions))
    for question, folder, es in zip(questions, fused["folder"], fused["es"]):
        _assert_same_ranking_up_to_ties(es, folder, question)
    # the bonus did act on Elasticsearch: lists reordered, and passages the retriever missed brought in
    changed = [
        q
        for q, before, after in zip(questions, plain["es"], fused["es"])
        if [h.row for h in before] != [h.row for h in after]
    ]
    assert len(changed) >= 3, changed
    assert any(h.source == "entity" for hits in fused["es"] for h in hits)


def test_bm25_max_df_is_refused_in_one_line_for_elasticsearch(es_backend):
    assert built_retriever(es_backend, "bm25", bm25_max_df=0.0).search(["Who wrote Hamlet?"], 1)[0]
    for make in (
        lambda: built_retriever(es_backend, "bm25", bm25_max_df=0.1),
        lambda: built_retriever(es_backend, "hybrid", bm25_max_df=0.1),
    ):
        with pytest.raises(OdqaError, match="bm25_max_df.*Elasticsearch"):
            make()


@pytest.fixture(scope="session")
def sharded_bundle(tmp_path_factory) -> Path:
    """45 demo articles in 3 files, indexed as 3 shards (what `index --ray` builds too)."""
    from odqa.indexing import IndexSpec, build_sharded_index

    root = tmp_path_factory.mktemp("es-shards")
    corpus = root / "corpus"
    corpus.mkdir()
    lines = (Path(DEMO_QUESTIONS).parent / "articles.jsonl").read_text().splitlines()[:45]
    for name, part in zip("abc", (lines[:10], lines[10:30], lines[30:])):
        (corpus / f"part-{name}.jsonl").write_text("\n".join(part) + "\n")
    assert build_sharded_index(IndexSpec(corpus=str(corpus), out=str(root / "idx"), precision="fp32"), 3).finished
    return root / "idx"


def test_a_sharded_index_loads_shard_by_shard_in_parallel_and_resumes(es_server, sharded_bundle):
    """es-index reads a sharded index (`index --shards N` / `--ray`) as the index numbers its rows: each document
    at its row holds that row's passage and vector; with --parallel each shard has its own loader, and a load
    stopped midway resumes every shard after its committed rows."""
    from odqa.indexes.folder import FolderIndex
    from odqa.indexes.layout import IndexLayout

    bundle = FolderIndex.open(sharded_bundle)
    index = ElasticIndex.open(_config(es_server.url, "odqa-test-sharded"))
    chunks = []

    def stop_after_three(report):
        chunks.append(report.last_row)
        if len(chunks) == 3:
            raise OdqaError("stopped by the test")

    stopped = BulkOptions(chunk_size=10, progress=False, parallel=3, on_chunk=stop_after_three)
    with pytest.raises(OdqaError, match="stopped by the test"):
        load_passages(index, sharded_bundle, recreate=True, replicas=0, options=stopped)
    assert 0 < index.count(refresh=True) < len(bundle)
    report = load_passages(index, sharded_bundle, options=BulkOptions(chunk_size=10, progress=False, parallel=3))
    assert report.count == len(bundle) and report.failed == 0 and report.skipped > 0
    assert report.created + report.skipped + report.already_present == len(bundle)

    starts = np.cumsum([0] + [len(shard) for shard in bundle.shards]).tolist()
    rows = [0, starts[1], starts[2] - 1, len(bundle) - 1]
    vectors = [
        np.load(IndexLayout(shard.path).embeddings, mmap_mode="r")[row - start]
        for row in rows
        for shard, start, end in zip(bundle.shards, starts, starts[1:])
        if start <= row < end
    ]
    hits = index.search_knn(np.asarray(vectors, dtype=np.float32), 1)
    assert [h[0]["row"] for h in hits] == rows
    assert [h[0]["id"] for h in hits] == [bundle.store.get(row).id for row in rows]
    again = load_passages(index, sharded_bundle, options=BulkOptions(progress=False))  # one loader: nothing sent
    assert again.skipped == len(bundle) and again.sent == 0
