"""odqa's messages go through `logging`, under the `odqa` logger: a library call prints nothing itself (Python's
last-resort handler shows warnings where the application configured none), and the command line installs one
handler on `odqa` (never on the root logger) that writes `odqa: message` lines to standard error, with
`--quiet` (warnings and errors only) and `--verbose` (debug messages too)."""

from __future__ import annotations

import contextlib
import logging
import sys

ROOT = "odqa"
_CLI_HANDLER = "odqa-cli"


def get_logger(module: str) -> logging.Logger:
    """The logger of a module of this project, under `odqa` (`indexes.vector` -> `odqa.indexes.vector`)."""
    return logging.getLogger(module if module == ROOT or module.startswith(ROOT + ".") else f"{ROOT}.{module}")


def configure_cli_logging(verbosity: int = 0) -> None:
    """The command line's handler on the `odqa` logger: INFO and up (`verbosity` -1: WARNING, 1: DEBUG) to standard
    error as `odqa: message`. Installed once; calling again only changes the level."""
    logger = logging.getLogger(ROOT)
    logger.setLevel(logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO)
    if not any(h.get_name() == _CLI_HANDLER for h in logger.handlers):
        handler = logging.StreamHandler(_Stderr())
        handler.set_name(_CLI_HANDLER)
        handler.setFormatter(logging.Formatter("odqa: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False  # the root logger's handlers (a user's, a library's) do not repeat the lines


def reset_cli_logging() -> None:
    """Undo `configure_cli_logging` (a process that ran the command line in-process, as the tests do)."""
    logger = logging.getLogger(ROOT)
    for handler in [h for h in logger.handlers if h.get_name() == _CLI_HANDLER]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


class _Stderr:
    """sys.stderr as it is at each write (tests and shells swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextlib.contextmanager
def progress_bars_hidden(hidden: bool = True):
    """`--quiet`: every tqdm bar made while the command runs, odqa's and its libraries', is made disabled. tqdm
    reads its own switch (TQDM_DISABLE) only once, when imported, and each caller passes `disable` itself, so
    the one place to say it is tqdm's constructor; it is restored on the way out (the tests run commands
    in-process)."""
    if not hidden:
        yield
        return
    from tqdm import std

    original = std.tqdm.__dict__["__init__"]  # a partialmethod where TQDM_* variables were set

    def init(self, *args, **kwargs):
        kwargs["disable"] = True
        original.__get__(self, type(self))(*args, **kwargs)

    std.tqdm.__init__ = init
    try:
        yield
    finally:
        std.tqdm.__init__ = original


@contextlib.contextmanager
def loggers_quieted(*names: str, level: int = logging.ERROR):
    """Run a third-party loader with its loggers (`transformers`, `sentence_transformers`) at `level`: their
    load notes describe uses odqa does not make (a pooler it never calls reported as newly initialised, fp16
    weights it computes in fp32) and read like failures; errors still show, and the levels are restored."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        for logger, old in zip(loggers, levels):
            logger.setLevel(old)


@contextlib.contextmanager
def root_logging_kept(into: str = "odqa.core.runtime"):
    """Run third-party code that logs through the root logger (onnxruntime's quantiser and optimiser call
    `logging.warning`, which installs a root handler where there is none) without leaving a handler behind:
    their records go to the `into` logger at DEBUG, and the root logger's handlers and level are restored."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    forward = _Forward(get_logger(into))
    root.handlers = [forward]
    try:
        yield
    finally:
        root.handlers = handlers
        root.setLevel(level)


class _Forward(logging.Handler):
    def __init__(self, target: logging.Logger):
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        self.target.debug("%s: %s", record.name, record.getMessage())


def failures_reported_once(*names: str) -> None:
    """The handlers of these loggers (a server's access log, written to a file or a full disk) report a failed
    write once, in one line on standard error naming the handler's stream and the cause, and go on: Python's
    own `Handler.handleError` prints a traceback for every record, one a request when the disk is full. The
    records that could not be written are dropped; what was being served goes on."""
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if not getattr(handler, "_odqa_reports_once", False):
                handler.handleError = _ReportOnce(handler)  # type: ignore[method-assign]
                handler._odqa_reports_once = True  # type: ignore[attr-defined]


class _ReportOnce:
    def __init__(self, handler: logging.Handler):
        self.handler = handler
        self.reported = False

    def __call__(self, record: logging.LogRecord) -> None:
        if self.reported or not logging.raiseExceptions:
            return
        self.reported = True
        from odqa.core.errors import os_error_cause

        failure = sys.exc_info()[1]
        stream = getattr(getattr(self.handler, "stream", None), "name", None) or self.handler.get_name() or "a log"
        cause = (os_error_cause(failure) if failure is not None else None) or f"{type(failure).__name__}: {failure}"
        with contextlib.suppress(Exception):  # standard error may be on the same full disk
            sys.stderr.write(
                f"odqa: cannot write the {record.name} log to {stream} ({cause}); its records are dropped from "
                "now on, without a word each, and everything else goes on\n"
            )
            sys.stderr.flush()
