"""Issue 78, class 3: every OS error a user can cause is one line naming the path and the cause, exit 2, never
"internal error": a symbolic link loop as an input (ELOOP), a name of 300 bytes or a path of 5,000 in an output
(ENAMETOOLONG, refused before any work), a file on the way (ENOTDIR), and two writers of one file racing. The
errno classes are mapped in one place (odqa.core.errors.os_error_line); the server's access log on a full disk
reports the failure once and goes on, instead of a traceback a request."""

from __future__ import annotations

import errno
import logging
import os

import pytest

from tests.reliability.cli_checks import DOCS, jsonl, run_cli

LONG_NAME = "n" * 300
LONG_PATH = "/".join(["d" * 200] * 25)


@pytest.fixture()
def loop(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _one_line(code: int, text: str, *words: str) -> str:
    assert code == 2, text[-1500:]
    lines = [line for line in text.splitlines() if line.strip() and "psg/s" not in line]
    assert len(lines) == 1 and lines[0].startswith("odqa: error: "), text[-1500:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--index", "{loop}", "penicillin"],
        ["index", "--corpus", "{loop}", "--out", "{tmp}/out"],
        ["eval-retrieval", "--questions", "{loop}", "--index", "{tmp}/nowhere"],
        ["ask", "--config", "{loop}", "penicillin"],
    ],
    ids=["search --index", "index --corpus", "eval-retrieval --questions", "ask --config"],
)
def test_a_link_loop_as_an_input_is_one_line_naming_it(argv, loop, tmp_path, capsys):
    code, text = run_cli([a.format(loop=loop, tmp=tmp_path) for a in argv], capsys)
    line = _one_line(code, text, str(loop))
    assert "leads back to itself" in line or "Too many levels of symbolic links" in line, line  # the cause


@pytest.mark.parametrize(
    "flag,argv",
    [
        ("--out", ["index", "--corpus", "{corpus}", "--out", "{tmp}/" + LONG_NAME]),
        ("--out", ["index", "--corpus", "{corpus}", "--out", "{tmp}/" + LONG_PATH]),
        ("--trec-run", ["search", "--trec-run", "{tmp}/" + LONG_NAME, "--index", "{tmp}/nowhere", "penicillin"]),
        ("--dpr-json", ["search", "--dpr-json", "{tmp}/" + LONG_PATH + "/r.json", "--index", "{tmp}/no", "penicillin"]),
    ],
    ids=["index 300-byte name", "index 5,000-byte path", "search 300-byte name", "search 5,000-byte path"],
)
def test_a_name_too_long_for_the_filesystem_is_refused_before_any_work(flag, argv, tmp_path, capsys):
    corpus = jsonl(tmp_path / "c.jsonl", DOCS[:2])
    before = sorted(p.name for p in tmp_path.iterdir())
    code, text = run_cli([a.format(corpus=corpus, tmp=tmp_path) for a in argv], capsys)
    line = _one_line(code, text, f"error: {flag} ", "over the filesystem's limit")
    assert len(line) < 600, line  # the path shown by its ends, not 5,000 characters
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created, no work done


def test_a_file_on_the_way_of_an_input_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, text = run_cli(["index", "--corpus", tmp_path / "file" / "c.jsonl", "--out", tmp_path / "out"], capsys)
    _one_line(code, text, str(tmp_path / "file" / "c.jsonl"))


def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path):
    """Before, both wrote `.F.tmp`: the second rename found it gone (FileNotFoundError, an internal error)."""
    from odqa.core.atomic import atomic_file

    target = tmp_path / "run.trec"
    with atomic_file(target) as first:
        first.write_text("first\n")
        with atomic_file(target) as second:
            second.write_text("second\n")
        assert target.read_text() == "second\n"
    assert target.read_text() == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trec"]


@pytest.mark.parametrize(
    "number",
    [
        errno.ENOENT,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EROFS,
        errno.EEXIST,
        errno.ENOTEMPTY,
        errno.EBUSY,
        errno.EXDEV,
        errno.ENOSPC,
        errno.EMFILE,
        errno.EIO,
    ],
    ids=errno.errorcode.get,
)
def test_each_os_error_a_user_can_cause_reads_as_one_line_with_its_path(number):
    from odqa.core.errors import os_error_line

    exc = OSError(number, os.strerror(number), "/data/some/path")
    line = os_error_line(exc)
    assert line is not None and line.startswith("/data/some/path: ") and "\n" not in line, line
    assert "; " in line  # the cause, then what to do
    rust = ValueError(f"Failed to open file for write: 'IoError {{ io_error: ... }}' (os error {number})")
    assert os_error_line(rust) is not None  # tantivy's words carry the number only


def test_an_os_error_of_odqa_s_own_making_keeps_its_traceback():
    from odqa.core.errors import os_error_line

    assert os_error_line(OSError(errno.EBADF, "Bad file descriptor")) is None
    assert os_error_line(ValueError("something else")) is None


class _FullDisk:
    """A stream on a disk with no room left."""

    name = "/var/log/odqa-access.log"

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass


def test_a_log_on_a_full_disk_reports_the_failure_once_and_goes_on(capsys):
    from odqa.core.logs import failures_reported_once

    logger = logging.getLogger("odqa-test.access")
    handler = logging.StreamHandler(_FullDisk())
    logger.addHandler(handler)
    logger.propagate = False
    try:
        failures_reported_once("odqa-test.access")
        for request in range(5):
            logger.warning("GET /ask %d", request)  # each one fails to be written
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Logging error" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and _FullDisk.name in lines[0] and "no room left" in lines[0], err


def test_the_server_reports_its_access_log_failures_once(monkeypatch):
    """create_app's startup puts the once-only report on the access log's handlers (uvicorn has made them)."""
    from fastapi.testclient import TestClient

    import odqa.serve.app
    from odqa.serve.settings import ServeSettings
    from tests.reliability.stub_pipeline import StubPipeline

    monkeypatch.setattr(
        odqa.serve.app, "warm_up", lambda pipeline: {"passages": 1, "language": "en", "location": "stub-index"}
    )
    access = logging.getLogger("uvicorn.access")
    handler = logging.StreamHandler(_FullDisk())
    access.addHandler(handler)
    try:
        with TestClient(odqa.serve.app.create_app(StubPipeline(), ServeSettings())) as client:
            assert client.get("/health").status_code == 200
        assert getattr(handler, "_odqa_reports_once", False)
    finally:
        access.removeHandler(handler)
