"""Training that survives its own damage (issue 65 item 5): rerunning `train-reader` after its newest checkpoint
was truncated or had a byte changed names that checkpoint and resumes from the one before; a checkpoint written
to a full disk ends in the one-line "no room" error, never a traceback. Every trainer resumes through
`odqa.core.training.latest_checkpoint` and saves through `TrainingLoop.save_checkpoint`, so the reader's
command stands for all of them (tests/test_training_loop.py covers the shared functions directly)."""

from __future__ import annotations

import json

import pytest

from odqa.cli import main
from tests.reader_fixtures import save_tiny_qa, tiny_train_reader_argv
from tests.reliability.cli_checks import assert_one_line_no_room, run_with_file_limit

pytestmark = [pytest.mark.slow]

CONTEXT = "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911."


def _data(path):
    qas = [
        {"id": f"q{i}", "question": f"Who won the prize {i}?", "answers": [{"text": "Marie Curie", "answer_start": 0}]}
        for i in range(8)
    ]
    path.write_text(json.dumps({"data": [{"title": "Curie", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}))
    return path


def _argv(tmp_path, steps):
    return tiny_train_reader_argv(_data(tmp_path / "train.json"), tmp_path, steps)


@pytest.mark.parametrize("damage", ["byte changed", "truncated"])
def test_a_damaged_newest_checkpoint_is_named_and_the_previous_one_resumed(tmp_path, capsys, damage):
    save_tiny_qa(tmp_path / "init")
    assert main(_argv(tmp_path, 3)) == 0
    newest = tmp_path / "run" / "checkpoint-2"
    weights = newest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "byte changed":
        data[-7] ^= 0x01
    else:
        data = data[: len(data) // 2]
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(_argv(tmp_path, 4)) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "checkpoint-2 is damaged" in err and "resuming from checkpoint-1" in err and "resumed from" in err, err
    info = json.loads((tmp_path / "run" / "final" / "train_info.json").read_text())
    assert info["steps"] == 4


def test_a_checkpoint_written_to_a_full_disk_is_one_no_room_line(tmp_path):
    save_tiny_qa(tmp_path / "init")
    weights = (tmp_path / "init" / "model.safetensors").stat().st_size
    # the file-size limit lets the run read and start, and stops the first checkpoint's weights half way
    run = run_with_file_limit(_argv(tmp_path, 3), weights // 2)
    assert_one_line_no_room(run)
    assert "checkpoint-1" in run.stderr.strip().splitlines()[-1]
    assert not list((tmp_path / "run").glob(".checkpoint-*")), "the partly written checkpoint is removed"
