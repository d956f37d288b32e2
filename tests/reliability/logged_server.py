"""`odqa serve`'s app over a stub pipeline, run by uvicorn as the command runs it, and every log record it writes
(`Records`): what the secret tests (tests/reliability) search for a planted key."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from tests.es_server import free_port
from tests.reliability.stub_pipeline import StubPipeline

LOGGERS = ("", "odqa", "uvicorn", "uvicorn.error", "uvicorn.access")


class Records(logging.Handler):
    """Every record of the loggers above, as its message and traceback would be written."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))

    def __enter__(self) -> Records:
        for name in LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self)


SERVER_KEY = "the-servers-own-key-5150"


@pytest.fixture(scope="module")
def server():
    """create_app over a stub pipeline, served by uvicorn with its own log configuration and the access log on, as
    `odqa serve` runs it; yields (base URL, the records of every logger)."""
    import uvicorn

    import odqa.serve.app
    from odqa.serve.settings import ServeSettings

    saved = odqa.serve.app.warm_up
    odqa.serve.app.warm_up = lambda pipeline: {"passages": 1, "language": "en", "location": "stub-index"}
    app = odqa.serve.app.create_app(StubPipeline(), ServeSettings(), api_key=SERVER_KEY)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, access_log=True, log_level="info")  # its dictConfig
    server = uvicorn.Server(config)
    records = Records().__enter__()
    thread = threading.Thread(target=server.run, name="uvicorn-secrets-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", records
    finally:
        server.should_exit = True
        thread.join(30)
        records.__exit__()
        odqa.serve.app.warm_up = saved
