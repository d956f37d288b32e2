"""`--device` on the answering commands and the config's `device` key: a device odqa does not know, or a CUDA device
this torch build or machine lacks, is refused in one line before any work (no model or index is opened)."""

from __future__ import annotations

import pytest

from odqa.cli import build_parser, main
from odqa.config import OdqaConfig
from odqa.core import device as device_module
from odqa.core.errors import OdqaError

ANSWERING = ("ask", "shell", "predict", "search", "eval-qa", "eval-retrieval", "eval-reader", "eval-linker", "link")


def _subcommands():
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_answering_command_has_a_device_option():
    commands = _subcommands()
    for name in ANSWERING:
        assert "--device" in commands[name].format_help(), name


def test_the_config_key_is_checked_when_loaded(tmp_path):
    (tmp_path / "c.toml").write_text('device = "gpu"\n')
    with pytest.raises(OdqaError, match="device 'gpu' is not a device odqa knows; use cpu, cuda or cuda:N"):
        OdqaConfig.load(tmp_path / "c.toml")
    assert OdqaConfig.load(overrides={"device": "cuda:1"}).device == "cuda:1"


@pytest.mark.parametrize(
    "command",
    [["ask", "Who discovered penicillin?"], ["search", "penicillin"], ["eval-reader", "--data", "missing.json"]],
)
def test_an_unknown_device_is_one_line_before_any_work(command, capsys, monkeypatch):
    opened = []
    monkeypatch.setattr("odqa.retriever.registry.open_index", lambda *a, **k: opened.append(a))
    assert main([*command, "--device", "gpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'gpu' is not a device odqa knows" in err[0] and not opened


def test_cuda_on_a_machine_or_torch_without_it_is_one_line(capsys, monkeypatch):
    # a machine without a GPU driver: refused without importing torch
    monkeypatch.setattr(device_module, "GPU_DRIVER_FILES", ("/nonexistent/driver",))
    assert main(["ask", "--device", "cuda", "--no-linker", "Who discovered penicillin?"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device cuda: this machine has no GPU driver loaded; use device cpu" in err[0]
    # a driver, but a CPU-only torch build
    import torch

    monkeypatch.setattr(device_module, "GPU_DRIVER_FILES", ("/",))
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    monkeypatch.setattr(torch.version, "hip", None)
    with pytest.raises(OdqaError, match="is a CPU-only build; install a CUDA build of torch"):
        device_module.check_device_available("cuda")
    device_module.check_device_available("cpu")  # always there
