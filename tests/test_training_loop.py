"""The shared training loop (odqa.core.training.TrainingLoop) on a linear model: early stopping on the primary
metric, and the training seconds a resumed run carries (the linker's time budget spans resumed runs)."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from odqa.core.errors import DiskFullError, OdqaError
from odqa.core.training import LoopSettings, Stopwatch, TrainingLoop, latest_checkpoint


def _loop(out, evaluate=None, stopwatch=None, **settings):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(step):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loop.backward(loss)
        return {"loss": float(loss)}

    def save_model(folder):
        torch.save(model.state_dict(), folder / "weights.pt")

    loop = TrainingLoop(
        LoopSettings(out, progress=False, **settings),
        params=model.parameters(),
        optimizer=optimizer,
        scheduler=None,
        device=torch.device("cpu"),
        precision="fp32",
        train_step=train_step,
        save_model=save_model,
        evaluate=evaluate,
        stopwatch=stopwatch,
    )
    return loop


def test_early_stop_after_evaluations_without_a_better_primary_metric(tmp_path):
    scores = iter([5.0, 6.0, 6.0, 5.0, 9.0])  # at steps 0, 2, 4, 6, ...: no gain at 4 and 6

    loop = _loop(
        tmp_path,
        evaluate=lambda step: {"recall@5": next(scores)},
        total_steps=20,
        steps_per_epoch=4,
        eval_every=2,
        eval_at_start=True,
        primary_metric="recall@5",
        early_stop=2,
    )
    result = loop.run()
    assert (result.step, result.stopped_by) == (6, "early stop")
    history = [json.loads(line) for line in (tmp_path / "val_history.jsonl").read_text().splitlines()]
    assert [(h["step"], h["recall@5"]) for h in history] == [(0, 5.0), (2, 6.0), (4, 6.0), (6, 5.0)]
    assert result.last_eval["step"] == 6


def test_checkpoints_carry_the_training_seconds_and_the_loss_falls(tmp_path):
    first = _loop(
        tmp_path, stopwatch=Stopwatch(before=100.0), total_steps=4, steps_per_epoch=4, save_every=2, log_every=1
    )
    result = first.run()
    assert result.stopped_by == "steps" and result.logged[-1]["loss"] < result.logged[0]["loss"]
    assert latest_checkpoint(tmp_path).name == "checkpoint-2"
    # a budget of 50 s is already spent by the 100 s the checkpoint recorded: one step, then stop
    again = _loop(tmp_path, total_steps=4, steps_per_epoch=4, max_seconds=50)
    assert again.resume(latest_checkpoint(tmp_path)) == 2 and again.stopwatch.seconds() >= 100
    result = again.run()
    assert (result.step, result.stopped_by) == (3, "time budget")
    assert latest_checkpoint(tmp_path).name == "checkpoint-2"  # no checkpoints asked for: none written


def test_a_time_budget_stop_between_checkpoints_keeps_its_steps_for_the_next_run(tmp_path):
    first = _loop(
        tmp_path, stopwatch=Stopwatch(before=100.0), total_steps=9, steps_per_epoch=9, max_seconds=50, save_every=4
    )
    result = first.run()
    assert (result.step, result.stopped_by) == (1, "time budget")
    assert latest_checkpoint(tmp_path).name == "checkpoint-1"  # not lost to the last multiple of save_every
    again = _loop(tmp_path, total_steps=9, steps_per_epoch=9, max_seconds=1000, save_every=4)
    assert again.resume(latest_checkpoint(tmp_path)) == 1
    assert again.run().step == 9


def _two_checkpoints(out):
    loop = _loop(out, total_steps=5, steps_per_epoch=5, save_every=2, keep_checkpoints=3)
    loop.run()
    assert [p.name for p in sorted(out.glob("checkpoint-*"))] == ["checkpoint-2", "checkpoint-4"]
    return out / "checkpoint-4", out / "checkpoint-2"


def _flip_byte(path, offset=-20):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage", ["flip weights", "truncate weights", "flip trainer state", "remove weights", "garble record"]
)
def test_a_damaged_newest_checkpoint_is_named_and_the_one_before_resumed(tmp_path, caplog, damage):
    """Issue 65 item 5, for every trainer (they all resume through `latest_checkpoint`)."""
    newest, previous = _two_checkpoints(tmp_path)
    target = newest / ("trainer_state.pt" if "trainer" in damage else "weights.pt")
    if damage.startswith("flip"):
        _flip_byte(target)
    elif damage.startswith("truncate"):
        target.write_bytes(target.read_bytes()[:100])
    elif damage.startswith("remove"):
        target.unlink()
    else:
        (newest / "checkpoint_digests.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="odqa.training"):
        assert latest_checkpoint(tmp_path) == previous
    assert any("checkpoint-4" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    again = _loop(tmp_path, total_steps=5, steps_per_epoch=5)
    assert again.resume(latest_checkpoint(tmp_path)) == 2


def test_every_checkpoint_damaged_stops_with_one_line_instead_of_starting_over(tmp_path):
    newest, previous = _two_checkpoints(tmp_path)
    _flip_byte(newest / "weights.pt")
    _flip_byte(previous / "trainer_state.pt")
    with pytest.raises(OdqaError, match="every checkpoint .* is damaged .*checkpoint-4.*checkpoint-2"):
        latest_checkpoint(tmp_path)


def test_checkpoints_from_before_the_digest_record_still_resume(tmp_path):
    newest, _ = _two_checkpoints(tmp_path)
    (newest / "checkpoint_digests.json").unlink()
    assert latest_checkpoint(tmp_path) == newest


def test_a_full_disk_while_saving_a_checkpoint_is_one_no_room_error_and_leaves_the_old_ones(tmp_path, monkeypatch):
    """torch's own writer reports a full disk as an unnumbered RuntimeError; the trainer state is written by Python
    so the error is the system's, and the partly written checkpoint is removed."""
    import errno

    newest, _ = _two_checkpoints(tmp_path)
    loop = _loop(tmp_path, total_steps=8, steps_per_epoch=8, save_every=2, keep_checkpoints=3)
    loop.resume(latest_checkpoint(tmp_path))
    real_open = open

    def full_disk_open(path, mode="r", *args, **kwargs):
        if "trainer_state" in str(path) and "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full_disk_open)
    with pytest.raises(DiskFullError, match="no room left on the device to write .*checkpoint-6"):
        loop.run()
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".checkpoint", "checkpoint"))) == [
        "checkpoint-2",
        "checkpoint-4",
    ]
    assert latest_checkpoint(tmp_path) == newest
