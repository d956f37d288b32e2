"""The inference precision of every model (encoders, reader, linker): one rule for `auto`."""

from __future__ import annotations

import contextlib
from functools import lru_cache
from pathlib import Path

import torch

from odqa.errors import OdqaError


@lru_cache(maxsize=1)
def cpu_has_fast_bf16() -> bool:
    """True on CPUs with AMX tiles for bf16, where autocast is several times faster than fp32; on CPUs without
    them bf16 is emulated and slower, so `auto` stays fp32 there."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags


def autocast_for(device: torch.device, precision: str):
    """Autocast context for a forward pass (inference or training).

    `auto` = fp16 on CUDA, bf16 on AMX CPUs, else fp32."""
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise OdqaError(f"unknown precision {precision!r}; use auto, fp32, bf16 or fp16")
    if precision == "auto":
        precision = "fp16" if device.type == "cuda" else ("bf16" if cpu_has_fast_bf16() else "fp32")
    if precision == "fp32" or (precision == "fp16" and device.type != "cuda"):
        return contextlib.nullcontext()
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device.type, dtype=dtype)
