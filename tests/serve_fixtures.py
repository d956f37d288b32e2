"""Shared by tests/test_serve.py and tests/test_serve_browser.py: one demo-corpus pipeline for the session, and a real
uvicorn server on a free port of 127.0.0.1 in a thread."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from tests.es_server import free_port


@pytest.fixture(scope="session")
def serve_pipeline():
    from odqa.config import OdqaConfig
    from odqa.demo_corpus import demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline

    return Pipeline(OdqaConfig.load(), default_index=demo_index_path, default_kb=demo_kb_path)


def wait_until_healthy(url: str, server, output=lambda: "", timeout_s: float = 600.0) -> None:
    """Wait for a started `odqa serve` process (`server`: a Popen) to answer `url`/health; fail with `output()` if it
    exits first, or after `timeout_s` (its first start may build the demo index)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert server.poll() is None, output()
        assert time.monotonic() < deadline, f"odqa serve did not answer /health within {timeout_s:.0f} s"
        time.sleep(0.5)


@contextlib.contextmanager
def running_server(app, startup_s: float = 300.0):
    """`app` served by uvicorn on 127.0.0.1:free port, in a thread; yields the base URL; stops it at the end."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, access_log=False, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the test server did not start on 127.0.0.1:{port}")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


class _ScreenshotList:
    """A plugin registered by the `screenshots` fixture: names every screenshot in the run's terminal summary."""

    def __init__(self):
        self.paths: list[str] = []

    def pytest_terminal_summary(self, terminalreporter):
        if self.paths:
            terminalreporter.write_sep("-", "screenshots of the page")
            for path in self.paths:
                terminalreporter.write_line(path)


@pytest.fixture(scope="session")
def screenshots(request):
    """`screenshots.append(path)`: the path is listed at the end of the test run, for a person to look at."""
    plugin = _ScreenshotList()
    request.config.pluginmanager.register(plugin, "odqa-screenshots")
    return plugin.paths
