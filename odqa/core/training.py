"""What every trainer (reader, retriever, linker) shares: the training loop (`TrainingLoop`), seeding, the
trainer state of a checkpoint (saving, finding the one to resume, restoring, pruning old ones), and picking the
device and mixed precision (whose autocast context is `odqa.core.device.autocast_for`). The losses, the
batches and the model formats stay with each component."""

from __future__ import annotations

import io
import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from odqa.core.atomic import atomic_folder
from odqa.core.device import autocast_for, pick_device
from odqa.core.errors import OdqaError


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


log = logging.getLogger("odqa.training")

TRAINER_STATE = "trainer_state.pt"
CHECKPOINT_DIGESTS = "checkpoint_digests.json"  # each file's size and xxh3-128, written last


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest intact checkpoint in a training output folder: complete (its trainer state was written) and,
    where it recorded its files' digests, every file as written. A damaged one is named in a warning and the one
    before it is used; when every checkpoint is damaged the run stops rather than start over unasked."""
    cks = sorted(
        (p for p in Path(output_dir).glob("checkpoint-*") if (p / TRAINER_STATE).exists()), key=_step_of, reverse=True
    )
    damaged: list[str] = []
    for checkpoint in cks:
        problem = checkpoint_damage(checkpoint)
        if problem is None:
            if damaged:
                log.warning("resuming from %s instead", checkpoint.name)
            return checkpoint
        damaged.append(f"{checkpoint.name}: {problem}")
        log.warning("%s is damaged (%s); it is left as it is and not resumed from", checkpoint, problem)
    if damaged:
        raise OdqaError(
            f"every checkpoint in {output_dir} is damaged ({'; '.join(damaged)}): remove them to train "
            "from the start, or pass another --output"
        )
    return None


def checkpoint_damage(checkpoint: Path) -> str | None:
    """What is wrong with a checkpoint's files against the digests it recorded (None: nothing, or no record:
    checkpoints written before the record existed are taken as they are)."""
    record = checkpoint / CHECKPOINT_DIGESTS
    if not record.is_file():
        return None
    try:
        files = json.loads(record.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{CHECKPOINT_DIGESTS} unreadable ({type(exc).__name__})"
    for name, (size, digest) in sorted(files.items()):
        path = checkpoint / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} is {path.stat().st_size} bytes, {size} were written"
        if file_digest(path) != digest:
            return f"{name} differs from what was written"
    return None


def file_digest(path: Path, chunk: int = 1 << 22) -> str:
    """xxh3-128 of a file's bytes, read in 4 MiB pieces."""
    import xxhash

    digest = xxhash.xxh3_128()
    with path.open("rb") as f:
        while piece := f.read(chunk):
            digest.update(piece)
    return digest.hexdigest()


def record_checkpoint_digests(folder: Path) -> None:
    """Size and digest of every file of a checkpoint being written (checked by `latest_checkpoint`)."""
    files = {
        str(p.relative_to(folder)): [p.stat().st_size, file_digest(p)]
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != CHECKPOINT_DIGESTS
    }
    (folder / CHECKPOINT_DIGESTS).write_text(json.dumps({"files": files}, indent=1))


def save_trainer_state(folder: Path, step: int, optimizer, scheduler, scaler, loop_state: dict | None = None) -> None:
    """Optimizer, schedule, loss scaler, step and RNG states: what a resumed run needs besides the weights.
    `loop_state`: the loop's own counters (training seconds so far, early-stop record), absent from
    checkpoints written before the shared loop, which still resume. Serialised in memory and written by Python:
    torch's own file writer reports a full disk as an unnumbered RuntimeError."""
    buffer = io.BytesIO()
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler is not None else None,
            "step": step,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
            **({"loop": loop_state} if loop_state is not None else {}),
        },
        buffer,
    )
    with open(folder / TRAINER_STATE, "wb") as f:
        f.write(buffer.getbuffer())


def load_trainer_state(checkpoint: Path, optimizer, scheduler, scaler, on_gpu: bool) -> dict:
    """Load a checkpoint's trainer state into the given objects; returns the state (its `step`, its `loop`)."""
    state = torch.load(checkpoint / TRAINER_STATE, map_location="cpu", weights_only=False)
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (ValueError, KeyError) as exc:
        raise OdqaError(f"{checkpoint}: optimizer state does not fit this model ({exc}); use another --output") from exc
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if on_gpu and state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(state["cuda_rng"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    return state


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Remove all but the newest `keep` checkpoints."""
    cks = sorted(Path(output_dir).glob("checkpoint-*"), key=_step_of)
    for old in cks[: max(0, len(cks) - keep)]:
        shutil.rmtree(old, ignore_errors=True)


def training_device(device: str, precision: str, threads: int = 0) -> tuple[torch.device, str]:
    """The device to train on (CUDA when visible unless named) and the precision resolved for it:
    `auto` = bf16 (else fp16) on a GPU, fp32 on CPU; fp16 on CPU is refused."""
    if threads:
        torch.set_num_threads(threads)
    dev = pick_device(device)
    on_gpu = dev.type == "cuda"
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if on_gpu else "fp32"
    if precision == "fp16" and not on_gpu:
        raise OdqaError("--precision fp16 needs a GPU; on CPU use fp32, or bf16 where the CPU has AMX/AVX512-BF16")
    return dev, precision


# ---------------------------------------------------------------------------------------------------- the loop


class Stopwatch:
    """Training seconds, counting those of the runs that a resumed run continues (a time budget spans them)."""

    def __init__(self, before: float = 0.0):
        self.before = before
        self.started = time.time()

    def seconds(self) -> float:
        return self.before + time.time() - self.started

    def restart_from(self, before: float) -> None:
        self.before, self.started = before, time.time()


@dataclass
class LoopSettings:
    output_dir: Path
    total_steps: int
    steps_per_epoch: int
    name: str = "train"  # the progress bar's label
    save_every: int = 0  # checkpoint-STEP every N steps (0: none)
    keep_checkpoints: int = 2
    log_every: int = 20
    eval_every: int = 0  # evaluate every N steps (0: at the start and end only)
    eval_at_start: bool = False  # evaluate before the first step of a fresh run
    primary_metric: str = ""  # the evaluation metric early stopping watches (higher is better)
    early_stop: int = 0  # stop after this many periodic evaluations without a better primary metric (0: never)
    max_seconds: float = 0.0  # stop after this much training time, resumed runs included (0: no budget)
    clip_norm: float = 1.0
    count: str = ""  # a key of train_step's result summed into a rate in the log lines ("windows": windows/s)
    history_file: str = "val_history.jsonl"  # evaluation records, one JSON line each, in output_dir
    progress: bool = True


@dataclass
class LoopResult:
    step: int
    seconds: float
    stopped_by: str  # "steps", "time budget" or "early stop"
    last_eval: dict | None = None
    logged: list[dict] = field(default_factory=list)  # the figures of every log line


class TrainingLoop:
    """The one training loop of the reader, the retriever and the linker.

    Each calls it with its own `train_step(step) -> {"loss": float, ...}` (step = the 0-based index of the step
    about to run; it computes the forward pass under `autocast()` and calls `backward(loss)`; gradients are
    zeroed before it), its `save_model(folder)` for checkpoints and, optionally, `evaluate(step) -> metrics`.
    The loop owns the rest: gradient clipping, the optimizer and schedule steps, fp16 loss scaling, checkpoints
    (`checkpoint-STEP/` = the component's model files + trainer_state.pt, published atomically, the oldest
    pruned), resuming from the newest one, evaluation every `eval_every` steps into `val_history.jsonl`, early
    stopping, a time budget, the progress bar and the log lines."""

    def __init__(
        self,
        settings: LoopSettings,
        *,
        params,
        optimizer,
        scheduler,
        device: torch.device,
        precision: str,
        train_step: Callable[[int], dict],
        save_model: Callable[[Path], None],
        evaluate: Callable[[int], dict] | None = None,
        on_step: Callable[[int, float], None] | None = None,
        logger: logging.Logger | None = None,
        stopwatch: Stopwatch | None = None,
    ):
        self.settings = settings
        self.params = list(params)
        self.optimizer, self.scheduler = optimizer, scheduler
        self.device, self.precision = device, precision
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        self.train_step, self.save_model, self.evaluate, self.on_step = train_step, save_model, evaluate, on_step
        self.log = logger or log
        self.stopwatch = stopwatch or Stopwatch()
        self.step = 0
        self.best: float | None = None
        self.evals_without_gain = 0

    def autocast(self):
        return autocast_for(self.device, self.precision)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def resume(self, checkpoint: Path | None) -> int:
        """Restore the trainer state of `checkpoint` (the component has loaded its weights); returns the step."""
        if checkpoint is None:
            return self.step
        state = load_trainer_state(checkpoint, self.optimizer, self.scheduler, self.scaler, self.device.type == "cuda")
        self.step = int(state["step"])
        loop = state.get("loop") or {}
        self.stopwatch.restart_from(float(loop.get("seconds", 0.0)))
        self.best = loop.get("best")
        self.evals_without_gain = int(loop.get("evals_without_gain", 0))
        self.log.info("resumed from %s at step %d/%d", checkpoint, self.step, self.settings.total_steps)
        return self.step

    def run(self) -> LoopResult:
        s = self.settings
        total = s.total_steps
        last_eval = self._evaluate() if s.eval_at_start and self.step == 0 else None
        bar = (
            tqdm(total=total, initial=self.step, desc=s.name, unit="step", dynamic_ncols=True, mininterval=5)
            if s.progress
            else None
        )
        stopped_by, logged = "steps", []
        tick, window = time.time(), []
        try:
            while self.step < total:
                self.optimizer.zero_grad(set_to_none=True)
                out = self.train_step(self.step)
                self._optimizer_step()
                self.step += 1
                window.append(out)
                if bar is not None:
                    bar.update(1)
                if self.on_step is not None:
                    self.on_step(self.step, float(out["loss"]))
                if self.step % s.log_every == 0 or self.step == total:
                    logged.append(self._log_line(window, time.time() - tick))
                    tick, window = time.time(), []
                if s.eval_every and self.step % s.eval_every == 0 and self.step < total:
                    last_eval = self._evaluate()
                    if self._no_gain_for_too_long(last_eval):
                        stopped_by = "early stop"
                if s.save_every and self.step % s.save_every == 0 and self.step < total:
                    self.save_checkpoint()
                if stopped_by == "steps" and s.max_seconds and self.stopwatch.seconds() > s.max_seconds:
                    stopped_by = "time budget"
                if stopped_by != "steps":
                    self.log.info("%s at step %d", stopped_by, self.step)
                    if s.save_every and stopped_by == "time budget" and self.step % s.save_every:
                        # the steps since the last checkpoint are kept: the same command with a larger budget
                        # resumes here (an early stop ends the run: there is nothing to resume)
                        self.log.info("saved %s; a larger time budget resumes from it", self.save_checkpoint().name)
                    if window:
                        logged.append(self._log_line(window, time.time() - tick))
                    break
        finally:
            if bar is not None:
                bar.close()
        if self.evaluate is not None and (last_eval is None or last_eval["step"] != self.step):
            last_eval = self._evaluate()
        return LoopResult(self.step, round(self.stopwatch.seconds(), 1), stopped_by, last_eval, logged)

    def save_checkpoint(self) -> Path:
        path = Path(self.settings.output_dir) / f"checkpoint-{self.step}"
        with atomic_folder(path) as tmp:  # a crash mid-save never leaves a half-written checkpoint-STEP
            self.save_model(tmp)
            save_trainer_state(
                tmp,
                self.step,
                self.optimizer,
                self.scheduler,
                self.scaler,
                {
                    "seconds": round(self.stopwatch.seconds(), 3),
                    "best": self.best,
                    "evals_without_gain": self.evals_without_gain,
                },
            )
            record_checkpoint_digests(tmp)
        self.log.info("checkpoint %s", path)
        prune_checkpoints(self.settings.output_dir, self.settings.keep_checkpoints)
        return path

    def _optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, self.settings.clip_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            torch.nn.utils.clip_grad_norm_(self.params, self.settings.clip_norm)
            self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()

    def _lr(self) -> float:
        if self.scheduler is not None:
            return self.scheduler.get_last_lr()[0]
        return self.optimizer.param_groups[0]["lr"]

    def _log_line(self, window: list[dict], seconds: float) -> dict:
        s = self.settings
        n = len(window)
        means = {k: sum(float(o[k]) for o in window) / n for k in window[0] if k != s.count}
        per_step = seconds / n
        parts = [
            f"step {self.step}/{s.total_steps} epoch {self.step / max(1, s.steps_per_epoch):.2f}",
            f"loss {means.pop('loss'):.4f}" if "loss" in means else "",
            f"lr {self._lr():.2e}",
        ]
        parts += [f"{k} {v:.4f}" for k, v in means.items() if k != "loss"]
        if s.count:
            parts.append(f"{sum(o[s.count] for o in window) / max(seconds, 1e-9):.1f} {s.count}/s")
        parts.append(f"{per_step:.2f} s/step eta {(s.total_steps - self.step) * per_step / 60:.0f} min")
        self.log.info(" ".join(p for p in parts if p))
        return {
            "step": self.step,
            "loss": round(sum(float(o["loss"]) for o in window) / n, 4),
            **{k: round(v, 4) for k, v in means.items()},
            "seconds": round(self.stopwatch.seconds()),
        }

    def _evaluate(self) -> dict | None:
        if self.evaluate is None:
            return None
        started = time.time()
        metrics = {"step": self.step, **self.evaluate(self.step)}
        metrics["seconds"] = round(time.time() - started, 1)
        with (Path(self.settings.output_dir) / self.settings.history_file).open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        self.log.info("validation at step %d: %s", self.step, metrics)
        return metrics

    def _no_gain_for_too_long(self, metrics: dict | None) -> bool:
        s = self.settings
        if not (s.early_stop and s.primary_metric and metrics and s.primary_metric in metrics):
            return False
        value = float(metrics[s.primary_metric])
        if self.best is None or value > self.best:
            self.best, self.evals_without_gain = value, 0
            return False
        self.evals_without_gain += 1
        return self.evals_without_gain >= s.early_stop


def keep_transformer_layers(model, layers, option: str, name: str) -> None:
    """Keep only the transformer layers `layers` (in that order) of a BERT-style `model` (one with an
    encoder.layer list), and record the new depth in its config: a shallower student initialised from the named
    layers of its teacher. `option` and `name` (the setting and the model) word the errors."""
    blocks = getattr(getattr(model, "encoder", None), "layer", None)
    if blocks is None:
        raise OdqaError(
            f"{name} is not a BERT-style encoder (no encoder.layer list); a shallower student "
            "is made only from such models"
        )
    if not layers or any(not 0 <= i < len(blocks) for i in layers) or len(set(layers)) != len(layers):
        raise OdqaError(
            f"{option} {' '.join(map(str, layers))}: give distinct layer numbers from 0 to "
            f"{len(blocks) - 1} ({name} has {len(blocks)} layers)"
        )
    model.encoder.layer = torch.nn.ModuleList([blocks[i] for i in layers])
    model.config.num_hidden_layers = len(layers)
