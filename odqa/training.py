"""What every trainer (reader, retriever, linker) shares: seeding, finding the checkpoint to resume, and picking
the device and mixed precision (whose autocast context is `odqa.precision.autocast_for`)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from odqa.errors import OdqaError


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint (one whose trainer state was written) in a training output folder."""
    cks = [p for p in output_dir.glob("checkpoint-*") if (p / "trainer_state.pt").exists()]
    if not cks:
        return None
    return max(cks, key=lambda p: int(p.name.split("-")[-1]))


def training_device(device: str, precision: str, threads: int = 0) -> tuple[torch.device, str]:
    """The device to train on (CUDA when visible unless named) and the precision resolved for it:
    `auto` = bf16 (else fp16) on a GPU, fp32 on CPU; fp16 on CPU is refused."""
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    on_gpu = dev.type == "cuda"
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if on_gpu else "fp32"
    if precision == "fp16" and not on_gpu:
        raise OdqaError("--precision fp16 needs a GPU; on CPU use fp32, or bf16 where the CPU has AMX/AVX512-BF16")
    return dev, precision
