"""Elasticsearch faults (issue 26, defects 3 and 15): the local Elasticsearch-API server restarted in the
middle of an `es-index` load, and answers that are not JSON (an HTML page from a proxy, with HTTP 200 or
502) at the start or in the middle of a load and of a search. For each: exit 0 with exactly the expected
documents, or one line naming the problem (and the numbers) with exit 1 or 2; never a traceback."""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from pathlib import Path

import pytest

import odqa.indexes.elastic_bulk
from odqa.cli import main
from odqa.config import ElasticConfig
from odqa.indexes.elastic import ElasticIndex
from tests.es_server import NoidaServer, free_port, start_or_skip

pytestmark = pytest.mark.elastic

PASSAGES = 308  # the demo corpus


@pytest.fixture(scope="module")
def demo_bundle() -> Path:
    from odqa.demo_corpus import demo_index_path

    return demo_index_path(quiet=True)


@pytest.fixture(scope="module")
def es_server(tmp_path_factory):
    server = start_or_skip(NoidaServer(tmp_path_factory.mktemp("noida-faults") / "data"))
    yield server
    server.stop()


def run_cli(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def es_count(url: str, name: str) -> int:
    index = ElasticIndex.open(ElasticConfig(hosts=url, index_name=name))
    return index.count(refresh=True)


# ---- the server restarted in the middle of a load ------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("how", ["graceful", "killed"])
def test_server_restarted_mid_load_ends_exact_or_names_the_numbers(tmp_path, demo_bundle, monkeypatch, capsys, how):
    """After the second bulk request the server stops (SIGTERM, or SIGKILL: what it had not saved is lost)
    and starts again on the same port a second later, inside es-index's retry backoff."""
    server = start_or_skip(NoidaServer(tmp_path / "data", port=free_port()))
    send_chunk, sent, restarts = odqa.indexes.elastic_bulk._send_chunk, [], []

    def restart() -> None:
        time.sleep(1.0)
        server.start()
        restarts.append(time.monotonic())

    def send_then_restart(*args, **kwargs):
        send_chunk(*args, **kwargs)
        sent.append(1)
        if len(sent) == 2:
            server.stop(kill=how == "killed")
            threading.Thread(target=restart, daemon=True).start()

    monkeypatch.setattr(odqa.indexes.elastic_bulk, "_send_chunk", send_then_restart)
    try:
        code, out, err = run_cli(
            [
                "es-index",
                "--index",
                demo_bundle,
                "--hosts",
                server.url,
                "--index-name",
                "restart",
                "--replicas",
                "0",
                "--no-vectors",
                "--chunk-size",
                "50",
                "--backoff",
                "0.5",
                "--max-retries",
                "6",
                "--no-progress",
            ],
            capsys,
        )
        assert restarts, "the server was not restarted during the load"
        assert "Traceback" not in out + err
        if code == 0:  # exactly the corpus: nothing lost, nothing twice
            assert es_count(server.url, "restart") == PASSAGES
        else:
            last = err.strip().splitlines()[-1]
            assert code in (1, 2) and last.startswith("odqa: error:") and f"of {PASSAGES}" in last, err
    finally:
        server.stop()


# ---- answers that are not JSON -------------------------------------------------------------------------
class _Proxy(http.server.BaseHTTPRequestHandler):
    """Passes requests to the real server until `garbage_after` requests of `garbage_on` (a path part such as
    "_bulk", or "" for any) have passed; from then on answers every request with an HTML page."""

    upstream: str = ""
    garbage_on = ""
    garbage_after = 0
    status = 200
    content_type = "text/html"
    seen = 0

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        cls = type(self)
        if cls.garbage_on in self.path:
            cls.seen += 1
        if cls.garbage_on in self.path and cls.seen > cls.garbage_after:
            page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
            self.send_response(cls.status)
            self.send_header("Content-Type", cls.content_type)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        host, port = cls.upstream.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def proxy(es_server):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Proxy.upstream = es_server.url.removeprefix("http://")
    _Proxy.seen = 0
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


GARBAGE = {  # (HTTP status, content type)
    "HTML with 200": (200, "text/html"),
    "HTML with 502": (502, "text/html"),
    "HTML labelled JSON with 200": (200, "application/json"),
}
WHEN = {  # (requests whose path holds this, passed before the garbage starts)
    "from the first request": ("", 0),
    "in the middle of the load": ("_bulk", 2),
}


@pytest.mark.parametrize("when", list(WHEN))
@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_es_index_given_no_json_ends_in_one_line(proxy, demo_bundle, capsys, garbage, when):
    _Proxy.status, _Proxy.content_type = GARBAGE[garbage]
    _Proxy.garbage_on, _Proxy.garbage_after = WHEN[when]
    code, out, err = run_cli(
        [
            "es-index",
            "--index",
            demo_bundle,
            "--hosts",
            proxy,
            "--index-name",
            "garbage",
            "--recreate",
            "--replicas",
            "0",
            "--no-vectors",
            "--chunk-size",
            "50",
            "--backoff",
            "0.05",
            "--max-retries",
            "2",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert err.count("odqa: error:") == 1 and err.strip().splitlines()[-1].startswith("odqa: error:"), err
    assert "not Elasticsearch" in err or "not JSON" in err or "HTTP 502" in err, err


@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_es_search_given_no_json_ends_in_one_line(es_server, proxy, demo_bundle, capsys, garbage):
    code, _, _ = run_cli(
        [
            "es-index",
            "--index",
            demo_bundle,
            "--hosts",
            es_server.url,
            "--index-name",
            "search-garbage",
            "--replicas",
            "0",
            "--no-vectors",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0
    _Proxy.status, _Proxy.content_type = GARBAGE[garbage]
    _Proxy.garbage_on, _Proxy.garbage_after = "_msearch", 0  # connecting works, the search gets HTML
    code, out, err = run_cli(["es-search", "--hosts", proxy, "--index-name", "search-garbage", "who"], capsys)
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert err.count("odqa: error:") == 1, err
