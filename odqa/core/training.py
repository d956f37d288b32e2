"""What every trainer (reader, retriever, linker) shares: seeding, the trainer state of a checkpoint (saving,
finding the one to resume, restoring, pruning old ones), and picking the device and mixed precision (whose
autocast context is `odqa.core.device.autocast_for`)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import torch

from odqa.core.device import pick_device
from odqa.core.errors import OdqaError


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


TRAINER_STATE = "trainer_state.pt"


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint (one whose trainer state was written) in a training output folder."""
    cks = [p for p in output_dir.glob("checkpoint-*") if (p / TRAINER_STATE).exists()]
    if not cks:
        return None
    return max(cks, key=_step_of)


def save_trainer_state(folder: Path, step: int, optimizer, scheduler, scaler) -> None:
    """Optimizer, schedule, loss scaler, step and RNG states: what a resumed run needs besides the weights."""
    torch.save({
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "step": step,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
    }, folder / TRAINER_STATE)


def restore_trainer_state(checkpoint: Path, optimizer, scheduler, scaler, on_gpu: bool) -> int:
    """Load a checkpoint's trainer state into the given objects; returns the step it was saved at."""
    state = torch.load(checkpoint / TRAINER_STATE, map_location="cpu", weights_only=False)
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (ValueError, KeyError) as exc:
        raise OdqaError(f"{checkpoint}: optimizer state does not fit this model ({exc}); use another --output") from exc
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if on_gpu and state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(state["cuda_rng"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    return int(state["step"])


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Remove all but the newest `keep` checkpoints."""
    cks = sorted(output_dir.glob("checkpoint-*"), key=_step_of)
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
