"""odqa logs through `logging` under the `odqa` logger: a library call prints nothing to standard error and leaves
no handler on the root logger (the int8 export's quantiser included); the command line shows its notes as
`odqa: ...` lines, fewer with --quiet and more with --verbose."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from odqa.core.logs import configure_cli_logging, get_logger, reset_cli_logging, root_logging_kept
from tests.conftest import REPO_ROOT

QUANTISE_A_TINY_GRAPH = """
import logging, sys, tempfile
from pathlib import Path
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from odqa.core.runtime import _quantise

folder = Path(tempfile.mkdtemp())
weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "W")
graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "tiny",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 64])], [weight])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(folder / "model.onnx"))
_quantise(folder / "model.onnx", folder / "model.int8.onnx")
assert (folder / "model.int8.onnx").is_file()
print("root handlers:", len(logging.getLogger().handlers))
"""


def test_module_loggers_sit_under_odqa():
    assert get_logger("indexes.vector").name == "odqa.indexes.vector"
    assert get_logger("odqa.core.runtime").name == "odqa.core.runtime"


def test_third_party_root_logging_leaves_no_handler_behind():
    root = logging.getLogger()
    before, level = root.handlers[:], root.level
    root.handlers = []  # as in a fresh process: logging.warning() would install a handler
    try:
        with root_logging_kept():
            logging.warning("a quantiser's note")
        assert root.handlers == []
    finally:
        root.handlers = before
        root.setLevel(level)


@pytest.mark.subprocess
def test_the_int8_quantiser_leaves_no_root_handler_and_prints_nothing():
    out = subprocess.run(
        [sys.executable, "-c", QUANTISE_A_TINY_GRAPH], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "root handlers: 0" in out.stdout
    assert out.stderr == ""


def test_a_library_note_prints_nothing_and_the_cli_shows_it(capsys):
    from odqa.core.runtime import InferencePlan, announce

    announce("test-component", InferencePlan("torch", "fp32", "asked for"))
    assert capsys.readouterr().err == ""  # INFO: for the application to show, not printed by the library
    log = get_logger("odqa.test")
    try:
        configure_cli_logging(0)
        log.info("a note")
        log.debug("a detail")
        assert capsys.readouterr().err == "odqa: a note\n"
        configure_cli_logging(-1)  # --quiet
        log.info("a note")
        log.warning("a warning")
        assert capsys.readouterr().err == "odqa: a warning\n"
        configure_cli_logging(1)  # --verbose
        log.debug("a detail")
        assert capsys.readouterr().err == "odqa: a detail\n"
        assert not [h for h in logging.getLogger().handlers if getattr(h, "name", "") == "odqa-cli"]
    finally:
        reset_cli_logging()


def test_quiet_and_verbose_are_options_of_every_command():
    from odqa.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        assert "--quiet" in sub.format_help() and "--verbose" in sub.format_help(), name
    args = commands["ask"].parse_args(["--quiet", "Who wrote Hamlet?"])
    assert args.quiet and not args.verbose


def test_a_sentence_transformers_model_loads_without_third_party_load_notes(capfd):
    """models/encoder-multilingual has no pooler weights (odqa pools itself) and ships fp16: transformers and
    sentence-transformers called that a newly initialised layer and a slow dtype on every index and search."""
    from odqa.core.encoder import TextEncoder

    levels = {name: logging.getLogger(name).level for name in ("transformers", "sentence_transformers")}
    encoder = TextEncoder.from_pretrained("encoder-multilingual")
    printed = capfd.readouterr()
    assert next(encoder.parameters()).dtype.is_floating_point and encoder.dim == 384
    for note in ("MISSING", "newly initialized", "float16"):
        assert note not in printed.out + printed.err
    assert {name: logging.getLogger(name).level for name in levels} == levels


def test_a_sentence_transformers_model_has_the_same_fingerprint_in_every_load():
    """The ONNX graph cache is keyed by the weights' fingerprint: a randomly drawn unused pooler made each
    process build the encoder's graph again."""
    from odqa.core.encoder import TextEncoder
    from odqa.core.runtime import weights_fingerprint

    first, second = (TextEncoder.from_pretrained("encoder-multilingual") for _ in range(2))
    assert weights_fingerprint(first) == weights_fingerprint(second)
