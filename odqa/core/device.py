"""The device and the inference precision of every model (encoders, reader, linker): one rule for each."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from odqa.core.errors import OdqaError

if TYPE_CHECKING:
    import torch

# present where a GPU driver is loaded (NVIDIA, AMD ROCm): without one torch sees no CUDA device either
GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/kfd")


# The help of every `device` setting (odqa.config's, the trainers', the index build's): defined here once.
DEVICE_HELP = "cpu, cuda or cuda:N (empty: cuda when available, else the cpu)"
_DEVICE_NAME = re.compile(r"(cpu|cuda(:\d+)?)")


def check_device_name(device: str | None, setting: str = "device") -> None:
    """A device name odqa accepts ("", cpu, cuda, cuda:N), checked without importing torch."""
    if device and not _DEVICE_NAME.fullmatch(device):
        raise OdqaError(f"{setting} {device!r} is not a device odqa knows; use {DEVICE_HELP}")


def check_device_available(device: str | None, setting: str = "--device") -> None:
    """Before any work: a CUDA device that this torch build or this machine lacks is refused in one line (torch is
    imported only where a GPU driver is loaded)."""
    check_device_name(device, setting)
    if not device or not device.startswith("cuda"):
        return
    if sys.platform == "linux" and not any(Path(f).exists() for f in GPU_DRIVER_FILES):
        raise OdqaError(f"{setting} {device}: this machine has no GPU driver loaded; use {setting} cpu")
    import torch

    if not torch.backends.cuda.is_built() and getattr(torch.version, "hip", None) is None:
        raise OdqaError(
            f"{setting} {device}: the installed torch {torch.__version__} is a CPU-only build; install "
            f"a CUDA build of torch, or use {setting} cpu"
        )
    index = int(device.partition(":")[2] or 0)
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        raise OdqaError(
            f"{setting} {device}: torch sees {torch.cuda.device_count()} "
            f"CUDA device(s); use {setting} cpu or another device"
        )


def pick_device(device: str | None = None) -> torch.device:
    """The named device, else CUDA when visible, else the CPU."""
    import torch

    return torch.device(device or device_type())


def device_type(device: str | None = None) -> str:
    """The type ("cpu", "cuda") of the device `pick_device` gives, without importing torch where no GPU driver
    is loaded (a CPU-only Linux machine): importing torch is seconds of a fresh process's start."""
    if device:
        return device.split(":")[0]
    if sys.platform == "linux" and not any(Path(f).exists() for f in GPU_DRIVER_FILES):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# CPU flags of native bf16 matrix arithmetic: AMX tiles (Intel Sapphire Rapids on) and AVX512-BF16 dot
# products (Intel Cooper Lake, AMD Zen 4 on). Measured on 2 cores, MiniLM-L6: bf16 autocast reads the top 10
# passages 2.0x faster than fp32 with AMX and 1.7x faster with AVX512-BF16 (EPYC), at equal SQuAD F1; without
# either, bf16 is emulated and slower than fp32.
FAST_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def _flags(cpuinfo: str) -> set[str]:
    flags = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return flags


def native_bf16_flags(cpuinfo: str) -> list[str]:
    """The native bf16 instruction sets (`FAST_BF16_FLAGS`) that a /proc/cpuinfo text's flags name."""
    flags = _flags(cpuinfo)
    return [flag for flag in FAST_BF16_FLAGS if flag in flags]


def flags_have_fast_bf16(cpuinfo: str) -> bool:
    """Whether a /proc/cpuinfo text names a native bf16 instruction set."""
    return bool(native_bf16_flags(cpuinfo))


@lru_cache(maxsize=1)
def _cpuinfo() -> str:
    """This machine's /proc/cpuinfo ("" where there is none: no native bf16, no int8 preference)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


# CPU flags of native int8 dot products (VNNI, AMX's int8 tiles): where the CPU also has native bf16, ONNX Runtime's
# int8 kernels outran torch bf16 with them (AVX512-BF16 + AVX512-VNNI EPYC: bench/results/speed-avx512-bf16.md);
# a bf16 CPU without them would run int8 on AVX2's emulation, slower than its bf16 (the same file's stand-in runs)
FAST_INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def flags_have_fast_int8(cpuinfo: str) -> bool:
    """Whether a /proc/cpuinfo text names a native int8 dot-product instruction set (`FAST_INT8_FLAGS`)."""
    return bool(_flags(cpuinfo) & set(FAST_INT8_FLAGS))


@lru_cache(maxsize=1)
def cpu_has_fast_int8() -> bool:
    return flags_have_fast_int8(_cpuinfo())


@lru_cache(maxsize=1)
def cpu_has_fast_bf16() -> bool:
    """True on CPUs with native bf16 arithmetic (`FAST_BF16_FLAGS`), where `auto` runs bf16 the models it does not
    run in int8 (odqa.core.runtime)."""
    return flags_have_fast_bf16(_cpuinfo())


# Autocast precisions: training's, and an encoding's outside the inference plan (fp16 needs a GPU; auto: fp32 on a
# CPU without bf16)
AUTOCAST_PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def resolve_precision(device: torch.device, precision: str) -> str:
    """`auto` made concrete for a device: fp16 on CUDA, bf16 on CPUs with native bf16, else fp32."""
    if precision not in AUTOCAST_PRECISIONS:
        raise OdqaError(
            f"unknown precision {precision!r}; use {', '.join(AUTOCAST_PRECISIONS[:-1])} or {AUTOCAST_PRECISIONS[-1]}"
        )
    if precision == "auto":
        return "fp16" if device.type == "cuda" else ("bf16" if cpu_has_fast_bf16() else "fp32")
    return precision


def autocast_for(device: torch.device, precision: str):
    """Autocast context for a forward pass (inference or training).

    `auto` = fp16 on CUDA, bf16 on CPUs with native bf16 (AMX, AVX512-BF16), else fp32."""
    import torch

    precision = resolve_precision(device, precision)
    if precision == "fp32" or (precision == "fp16" and device.type != "cuda"):
        return contextlib.nullcontext()
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device.type, dtype=dtype)


def cpu_model_name(cpuinfo: str, default: str = "?") -> str:
    """The CPU's model name in a /proc/cpuinfo text (`default` where it names none)."""
    return next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), default
    )


def cpu_model_and_flags(wanted: Sequence[str]) -> tuple[str, list[str]]:
    """This CPU's model name ("unknown" where /proc/cpuinfo names none) and which of the `wanted` flags it has,
    in their order: what a benchmark records beside its timings."""
    info = _cpuinfo()
    flags = _flags(info)
    return cpu_model_name(info, "unknown"), [flag for flag in wanted if flag in flags]


def cpu_description() -> str:
    """The CPU model, its widest vector unit and whether it has native bf16 (benchmarks' timings depend on all)."""
    info = _cpuinfo()
    if not info:
        return "CPU model unknown"
    model = cpu_model_name(info)
    flags = _flags(info)
    vector = "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    native = native_bf16_flags(info)
    return f"CPU {model}, {vector} ({'native bf16: ' + ', '.join(native) if native else 'no native bf16'})"
