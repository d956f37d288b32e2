"""The shared training loop (odqa.core.training.TrainingLoop) on a linear model: early stopping on the primary
metric, and the training seconds a resumed run carries (the linker's time budget spans resumed runs)."""

from __future__ import annotations

import json

import torch

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

    loop = TrainingLoop(LoopSettings(out, progress=False, **settings), params=model.parameters(),
                        optimizer=optimizer, scheduler=None, device=torch.device("cpu"), precision="fp32",
                        train_step=train_step, save_model=save_model, evaluate=evaluate, stopwatch=stopwatch)
    return loop


def test_early_stop_after_evaluations_without_a_better_primary_metric(tmp_path):
    scores = iter([5.0, 6.0, 6.0, 5.0, 9.0])  # at steps 0, 2, 4, 6, ...: no gain at 4 and 6

    loop = _loop(tmp_path, evaluate=lambda step: {"recall@5": next(scores)}, total_steps=20, steps_per_epoch=4,
                 eval_every=2, eval_at_start=True, primary_metric="recall@5", early_stop=2)
    result = loop.run()
    assert (result.step, result.stopped_by) == (6, "early stop")
    history = [json.loads(line) for line in (tmp_path / "val_history.jsonl").read_text().splitlines()]
    assert [(h["step"], h["recall@5"]) for h in history] == [(0, 5.0), (2, 6.0), (4, 6.0), (6, 5.0)]
    assert result.last_eval["step"] == 6


def test_checkpoints_carry_the_training_seconds_and_the_loss_falls(tmp_path):
    first = _loop(tmp_path, stopwatch=Stopwatch(before=100.0), total_steps=4, steps_per_epoch=4, save_every=2,
                  log_every=1)
    result = first.run()
    assert result.stopped_by == "steps" and result.logged[-1]["loss"] < result.logged[0]["loss"]
    assert latest_checkpoint(tmp_path).name == "checkpoint-2"
    # a budget of 50 s is already spent by the 100 s the checkpoint recorded: one step, then stop
    again = _loop(tmp_path, total_steps=4, steps_per_epoch=4, max_seconds=50)
    assert again.resume(latest_checkpoint(tmp_path)) == 2 and again.stopwatch.seconds() >= 100
    result = again.run()
    assert (result.step, result.stopped_by) == (3, "time budget")
