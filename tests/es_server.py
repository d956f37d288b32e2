"""The local Elasticsearch-API server the tests use: noida-db (`pip install -e ".[elastic-test]"`), an
API-compatible stand-in started on a free port of 127.0.0.1 with its own data folder. Tests that need it skip
and say why where it is not installed or does not start."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _noida_command() -> tuple[list[str], bool] | None:
    """The noida-db binary itself (so stopping it stops the server), else its console script."""
    spec = importlib.util.find_spec("noida_db")
    if spec is not None and spec.submodule_search_locations:
        binary = Path(list(spec.submodule_search_locations)[0]) / "noida-db"
        if binary.is_file():
            binary.chmod(0o755)
            return [str(binary)], False
    script = shutil.which("noida-db")
    return ([script], True) if script else None


class NoidaServer:
    """One noida-db process serving only the Elasticsearch API; data persists in `data_dir` across restarts."""

    def __init__(self, data_dir: Path, port: int | None = None):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log = data_dir.parent / f"noida-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        found = _noida_command()
        if found is None:
            raise RuntimeError("noida-db is not installed (pip install -e '.[elastic-test]')")
        command, via_script = found
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = command + [
            "start",
            "--only",
            "elasticsearch",
            "--host",
            "127.0.0.1",
            "--elasticsearch-port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]
        self.proc = subprocess.Popen(
            args,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=via_script,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"noida-db exited with status {self.proc.returncode}: {self.log.read_text()[-500:]}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"noida-db did not answer on {self.url} within {START_TIMEOUT:.0f} s")

    def stop(self, kill: bool = False) -> None:
        """Graceful stop (SIGTERM: noida-db saves its data), then wait; SIGKILL if it hangs. `kill`: SIGKILL at
        once, as a crash (what the server had not saved is lost)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
            self.proc.wait(timeout=5)
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def start_or_skip(server: NoidaServer) -> NoidaServer:
    """Skip when the server cannot start, except in CI (the CI environment variable set, as .ci/run does),
    where the Elasticsearch tests must run: there it fails."""
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        message = f"no Elasticsearch-API test server: {exc}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so the elastic tests may not skip)", pytrace=False)
        pytest.skip(message)
    return server
