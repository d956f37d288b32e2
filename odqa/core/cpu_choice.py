"""Whether int8 or bf16 is faster on this CPU, measured once on it and kept in `$ODQA_HOME/cpu-choice/`.

On a CPU with native bf16 `auto` has two paths for the models whose int8 quality was measured (the reader,
encoders marked so): torch bf16 and ONNX Runtime int8. Which is faster depends on the matrix units: with
AVX512-BF16 and VNNI but no AMX, int8 was measured faster (bench/results/speed-avx512-bf16.md); AMX has both
bf16 and int8 tiles, and other CPUs will come. So `auto` does not guess from the flags: the first time it needs
the answer on a CPU, it times both paths on a 6-layer, 384-wide BERT encoder (the shipped models' shape; random
weights cost the same arithmetic as trained ones) over 32 texts of 128 tokens, in rounds of one call each, and
keeps the timings and the verdict in a small JSON file named by the CPU, its core count and the two runtimes'
versions. Later processes read the verdict (no torch import). int8 wins only when it is at least `INT8_MARGIN`
times faster in the median round and faster in every round but one: it gives up a little F1 that bf16 keeps (at
most 1 F1, which is what `auto` accepts), so near a tie, or where other work on the machine made the rounds
disagree, bf16 (the path `auto` took before the timing existed) stays. Other work on the machine all through the
timing favours int8 (one or two busy-looping processes on the 2-core EPYC moved the median from 1.21-1.27x to
1.68-1.86x: torch's threads lose more to a shared core), so an int8 verdict timed while the process got less than
`QUIET_CPU_SHARE` of its threads' time is kept as bf16, marked busy. Every verdict is kept, busy or not: an earlier
rule timed a busy machine's int8 verdict again on each of the next runs, and three `odqa ask` in a row on a busy
machine each paid the timing (20-35 s there) for the same answer. `ODQA_CPU_CHOICE=retime` times again and keeps
the new verdict (on a quiet machine, say); the plan's line says so. The batch is an index build's: at the reader's
10 short texts torch's per-call overheads made int8 look faster than the reader and the encoder found it
(bench/results/speed-avx512-bf16.md, "int8 or bf16, timed"; the busy machine is its section of the eighteenth
session).

The timing itself runs in odqa.core.runtime (`time_bf16_and_int8`), beside the graphs it builds.
Without onnxruntime, with `ODQA_CPU_CHOICE=flags`, or where the timing fails, the flags decide as before the
measurement existed (`odqa.core.device.flags_prefer_int8`); `ODQA_CPU_CHOICE=int8|bf16` sets the verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from odqa.core.atomic import write_json_atomic
from odqa.core.logs import get_logger
from odqa.core.paths import odqa_home

log = get_logger(__name__)

# bf16 keeps the reader's F1 (bench/results/speed-avx512-bf16.md: 87.43 vs 86.53 in int8); int8 must be clearly
# faster to be worth that, beyond the few per cent two timings on a busy machine differ by
INT8_MARGIN = 1.10
PROBE_ROUNDS = 5
PROBE_SHAPE = {
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "vocab_size": 2048,
    "max_position_embeddings": 512,
}
PROBE_BATCH = (32, 128)  # an index build's batch at bench/speed.py's 128 tokens; see the module's note
# the share of its threads' time the timing got: 0.98 on the idle 2-core EPYC, 0.63 and 0.49 beside one and two
# busy-looping processes
QUIET_CPU_SHARE = 0.85
RETIME = "ODQA_CPU_CHOICE=retime times it again"  # in every measured verdict's reason, so in the plan's INFO line
# bump when the probe or the rule changes: older verdicts are then measured again. 3: ONNX Runtime's threads no
# longer spin after a run; spinning, they slowed the torch call that followed (1.36-1.49x for int8 then, 1.26-1.27x
# now on the same CPU)
CHOICE_VERSION = 3


@dataclass(frozen=True)
class ProbeTiming:
    """What odqa.core.runtime.time_bf16_and_int8 measured: ms per round of each path, and the share of its
    threads' time the process got during the rounds (1.0: the cores were its own)."""

    bf16_ms: list[float]
    int8_ms: list[float]
    cpu_share: float


@dataclass(frozen=True)
class CpuChoice:
    prefers_int8: bool
    how: str  # "measured", "busy" (int8 timed faster on a busy machine: bf16), "flags", or else the reason itself
    bf16_ms: float | None = None  # the medians of the rounds
    int8_ms: float | None = None
    int8_speedup: float | None = None  # the median round's bf16 time over its int8 time

    @property
    def reason(self) -> str:
        """Why, for the plan's line: "int8 timed 1.53x bf16's speed on this CPU", "ODQA_CPU_CHOICE=bf16", ..."""
        if self.how == "measured":
            return f"int8 timed {self.int8_speedup:.2f}x bf16's speed on this CPU (kept; {RETIME})"
        if self.how == "busy":
            return (
                f"int8 timed {self.int8_speedup:.2f}x bf16's speed on this CPU while other work had the cores, "
                f"which favours int8: bf16 kept ({RETIME}, on a quiet machine)"
            )
        if self.how == "flags":
            return f"by the flags, int8 {'faster' if self.prefers_int8 else 'not faster'} (not timed)"
        return self.how


def cpu_key() -> str:
    """Names what the verdict depends on: the CPU model and flags, the core count, torch's and ONNX Runtime's
    versions (new kernels can turn it)."""
    from odqa.core.device import _cpuinfo, _flags, cpu_model_name

    info = _cpuinfo()
    model = cpu_model_name(info, platform.processor() or "unknown")
    flags = " ".join(sorted(_flags(info)))
    parts = [f"v{CHOICE_VERSION}", model, flags, str(os.cpu_count()), _version("torch"), _version("onnxruntime")]
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "-"


def choice_path() -> Path:
    return odqa_home() / "cpu-choice" / f"{cpu_key()}.json"


@lru_cache(maxsize=1)
def int8_or_bf16(timer: Callable[[], ProbeTiming]) -> CpuChoice:
    """The verdict for this CPU (which has native bf16 and onnxruntime; the caller checks): set, kept, or timed
    now by `timer` on `PROBE_BATCH` (odqa.core.runtime.time_bf16_and_int8)."""
    from odqa.core.device import _cpuinfo, flags_prefer_int8

    setting = os.environ.get("ODQA_CPU_CHOICE", "measure")
    if setting in ("int8", "bf16"):
        return CpuChoice(setting == "int8", f"ODQA_CPU_CHOICE={setting}")
    if setting == "flags":
        return CpuChoice(flags_prefer_int8(_cpuinfo()), "flags")
    if setting not in ("measure", "retime"):
        from odqa.core.errors import OdqaError

        raise OdqaError(f"ODQA_CPU_CHOICE={setting!r}: use measure (the default), retime, flags, int8 or bf16")
    path = choice_path()
    kept = kept_choice(path) if setting == "measure" else None
    if kept is not None:
        return kept
    log.info("timing bf16 against int8 on this CPU, once (5-10 s; kept in %s)...", path.parent)
    try:
        timing = timer()
        choice = verdict(timing.bf16_ms, timing.int8_ms)
    except Exception as exc:  # noqa: BLE001 - a failed timing must not cost the answer: the flags decide, unkept
        log.warning("the timing failed (%s: %s); the CPU flags decide", type(exc).__name__, exc)
        return CpuChoice(flags_prefer_int8(_cpuinfo()), "flags")
    return _kept(path, choice, timing.cpu_share)


def _kept(path: Path, choice: CpuChoice, cpu_share: float) -> CpuChoice:
    """`choice` kept at `path`, as bf16 marked busy where int8 won at a CPU share under `QUIET_CPU_SHARE`: load
    favours int8, so such a timing cannot show that int8 is faster, and timing again would only cost each run."""
    if choice.prefers_int8 and cpu_share < QUIET_CPU_SHARE:
        log.info(
            "other work had %.0f%% of the cores while timing, which favours int8: bf16 kept (%s, on a quiet machine)",
            100 * (1 - cpu_share),
            RETIME,
        )
        choice = replace(choice, prefers_int8=False, how="busy")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        path,
        {**asdict(choice), "busy": choice.how == "busy", "version": CHOICE_VERSION, "cpu_share": round(cpu_share, 3)},
    )
    path.with_suffix(".busy").unlink(missing_ok=True)  # the busy-timing counter of the rule before this one
    return choice


def verdict(bf16_rounds: list[float], int8_rounds: list[float]) -> CpuChoice:
    """int8 or bf16 from paired rounds (ms): int8 when it is `INT8_MARGIN` times faster in the median round and
    faster in all rounds but one, which a burst of other work may have slowed."""
    import statistics

    if not bf16_rounds or len(bf16_rounds) != len(int8_rounds) or min(bf16_rounds + int8_rounds) <= 0:
        raise ValueError(f"unusable timings: bf16 {bf16_rounds}, int8 {int8_rounds}")
    speedups = sorted(b / i for b, i in zip(bf16_rounds, int8_rounds))
    speedup = statistics.median(speedups)
    all_but_one = speedups[1] if len(speedups) > 1 else speedups[0]
    return CpuChoice(
        speedup >= INT8_MARGIN and all_but_one > 1.0,
        "measured",
        round(statistics.median(bf16_rounds), 2),
        round(statistics.median(int8_rounds), 2),
        round(speedup, 3),
    )


def kept_choice(path: Path | None = None) -> CpuChoice | None:
    """The verdict kept for this CPU (at `path`, default `choice_path()`), or None where there is none or it is
    unreadable (then timed again and rewritten)."""
    path = choice_path() if path is None else path
    try:
        data = json.loads(path.read_text())
        if data.get("version") != CHOICE_VERSION:
            return None
        bf16_ms, int8_ms, speedup = (float(data[k]) for k in ("bf16_ms", "int8_ms", "int8_speedup"))
        if not (bf16_ms > 0 and int8_ms > 0 and speedup > 0):
            return None
        busy = data.get("busy") is True
        return CpuChoice(
            bool(data["prefers_int8"]) and not busy, "busy" if busy else "measured", bf16_ms, int8_ms, speedup
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
