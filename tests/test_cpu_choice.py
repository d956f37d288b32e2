"""`auto`'s choice between int8 and bf16 on a CPU with native bf16: timed once on the CPU, kept per $ODQA_HOME."""

from __future__ import annotations

import json

import pytest

import odqa.core.cpu_choice as cpu_choice
from odqa.core.errors import OdqaError

pytest.importorskip("onnxruntime")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A new $ODQA_HOME, the timing not set aside by the environment, nothing remembered in the process."""
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ODQA_CPU_CHOICE", raising=False)
    cpu_choice.int8_or_bf16.cache_clear()
    yield tmp_path / "home"
    cpu_choice.int8_or_bf16.cache_clear()


class Timer:
    """Stands in for odqa.core.runtime.time_bf16_and_int8 with set timings (ms per round, or one for all of 5
    rounds), counting its calls."""

    def __init__(self, bf16_ms: float | list[float], int8_ms: float | list[float], cpu_share: float = 0.98) -> None:
        bf16, int8 = (list(t) if isinstance(t, list) else [t] * 5 for t in (bf16_ms, int8_ms))
        self.timing, self.calls = cpu_choice.ProbeTiming(bf16, int8, cpu_share), 0

    def __call__(self) -> cpu_choice.ProbeTiming:
        self.calls += 1
        return self.timing


def test_the_probe_times_both_paths_on_this_cpu(fresh):
    from odqa.core.runtime import time_bf16_and_int8

    timing = time_bf16_and_int8(rounds=2)
    assert len(timing.bf16_ms) == len(timing.int8_ms) == 2 and min(timing.bf16_ms + timing.int8_ms) > 0
    assert 0 < timing.cpu_share < 1.5
    assert any(fresh.glob("onnx/cpu-probe-*/model.int8.onnx"))  # its graph is cached like any model's


def test_the_verdict_is_timed_once_and_kept(fresh):
    timer = Timer(150.0, 100.0)
    choice = cpu_choice.int8_or_bf16(timer)
    assert choice.prefers_int8 and choice.how == "measured"
    assert "int8 timed 1.50x bf16's speed on this CPU" in choice.reason
    kept = json.loads(cpu_choice.choice_path().read_text())
    assert kept["prefers_int8"] is True and kept["bf16_ms"] == 150.0 and kept["int8_speedup"] == 1.5
    cpu_choice.int8_or_bf16.cache_clear()  # a new process
    assert cpu_choice.int8_or_bf16(Timer(100.0, 150.0)) == choice and timer.calls == 1


def test_int8_must_be_clearly_faster_since_it_costs_f1(fresh):
    assert not cpu_choice.int8_or_bf16(Timer(104.0, 100.0)).prefers_int8


def test_int8_must_win_all_rounds_but_one_since_other_work_can_disturb_some():
    int8 = [100.0] * 5
    one_disturbed = cpu_choice.verdict([150.0, 150.0, 60.0, 150.0, 150.0], int8)
    assert one_disturbed.prefers_int8 and one_disturbed.int8_speedup == 1.5
    two_disturbed = cpu_choice.verdict([150.0, 60.0, 150.0, 95.0, 150.0], int8)
    assert two_disturbed.int8_speedup == 1.5 and not two_disturbed.prefers_int8
    with pytest.raises(ValueError, match="unusable timings"):
        cpu_choice.verdict([150.0, 0.0], [100.0, 100.0])


def test_a_busy_machine_is_timed_once_and_keeps_bf16_since_load_favours_int8(fresh):
    """Issue 64 item 10: a busy machine's int8 verdict was timed again by each of the next runs, so three `ask`s
    in a row each paid 20-35 s. Now it is kept as bf16 (marked busy) and not timed again."""
    busy = Timer(150.0, 100.0, cpu_share=0.6)
    for _ in range(3):  # three processes
        cpu_choice.int8_or_bf16.cache_clear()
        choice = cpu_choice.int8_or_bf16(busy)
        assert not choice.prefers_int8 and choice.how == "busy" and busy.calls == 1
        assert "while other work had the cores" in choice.reason and "ODQA_CPU_CHOICE=retime" in choice.reason
    kept = json.loads(cpu_choice.choice_path().read_text())
    assert kept["busy"] is True and kept["prefers_int8"] is False and kept["cpu_share"] == 0.6
    assert not cpu_choice.choice_path().with_suffix(".busy").exists()


def test_bf16_is_kept_however_busy_and_a_quiet_int8_verdict_is_kept(fresh):
    assert not cpu_choice.int8_or_bf16(Timer(100.0, 100.0, cpu_share=0.5)).prefers_int8
    assert cpu_choice.kept_choice().how == "measured"
    cpu_choice.choice_path().unlink()
    cpu_choice.int8_or_bf16.cache_clear()
    assert cpu_choice.int8_or_bf16(Timer(150.0, 100.0, cpu_share=0.9)).prefers_int8
    assert cpu_choice.kept_choice().prefers_int8


def test_retime_times_again_and_keeps_the_new_verdict(fresh, monkeypatch):
    cpu_choice.int8_or_bf16(Timer(150.0, 100.0, cpu_share=0.6))  # busy: bf16 kept
    monkeypatch.setenv("ODQA_CPU_CHOICE", "retime")
    cpu_choice.int8_or_bf16.cache_clear()
    quiet = Timer(150.0, 100.0)
    assert cpu_choice.int8_or_bf16(quiet).prefers_int8 and quiet.calls == 1
    monkeypatch.delenv("ODQA_CPU_CHOICE")
    cpu_choice.int8_or_bf16.cache_clear()
    again = Timer(100.0, 150.0)
    assert cpu_choice.int8_or_bf16(again).prefers_int8 and again.calls == 0  # the retimed verdict, kept


def test_the_plans_info_line_says_how_to_time_again(fresh, monkeypatch, caplog):
    import logging

    import odqa.core.device as device
    from odqa.core import runtime

    cpu_choice.int8_or_bf16(Timer(150.0, 100.0))  # kept: the plan reads it without timing
    cpu_choice.int8_or_bf16.cache_clear()
    monkeypatch.setattr(device, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(runtime, "_announced", set())
    plan = runtime.plan_inference("cpu", runtime.INFERENCE, auto_int8=True)
    with caplog.at_level(logging.INFO, logger="odqa"):
        runtime.announce("reader", plan)
    (line,) = [r.getMessage() for r in caplog.records if "reader runs" in r.getMessage()]
    assert "onnx int8" in line and "int8 timed 1.50x" in line and "ODQA_CPU_CHOICE=retime times it again" in line


def test_a_damaged_or_older_verdict_is_timed_again(fresh):
    path = cpu_choice.choice_path()
    path.parent.mkdir(parents=True)
    older = {"prefers_int8": True, "bf16_ms": 2.0, "int8_ms": 1.0, "int8_speedup": 2.0, "version": 0}
    for text in (
        "{not json",
        json.dumps(older),
        json.dumps({**older, "version": cpu_choice.CHOICE_VERSION, "int8_ms": 0}),
    ):
        path.write_text(text)
        cpu_choice.int8_or_bf16.cache_clear()
        timer = Timer(100.0, 100.0)
        assert not cpu_choice.int8_or_bf16(timer).prefers_int8 and timer.calls == 1
        assert json.loads(path.read_text())["version"] == cpu_choice.CHOICE_VERSION


def test_the_environment_sets_or_skips_the_timing(fresh, monkeypatch):
    timer = Timer(100.0, 200.0)
    for setting, int8 in (("int8", True), ("bf16", False)):
        monkeypatch.setenv("ODQA_CPU_CHOICE", setting)
        cpu_choice.int8_or_bf16.cache_clear()
        assert cpu_choice.int8_or_bf16(timer).prefers_int8 is int8
    monkeypatch.setenv("ODQA_CPU_CHOICE", "flags")
    cpu_choice.int8_or_bf16.cache_clear()
    assert cpu_choice.int8_or_bf16(timer).how == "flags"
    monkeypatch.setenv("ODQA_CPU_CHOICE", "fastest")
    cpu_choice.int8_or_bf16.cache_clear()
    with pytest.raises(OdqaError, match="ODQA_CPU_CHOICE='fastest': use measure"):
        cpu_choice.int8_or_bf16(timer)
    assert timer.calls == 0 and not cpu_choice.choice_path().exists()


def test_a_failed_timing_leaves_the_flags_to_decide_and_keeps_nothing(fresh):
    def broken() -> cpu_choice.ProbeTiming:
        raise RuntimeError("no kernel")

    assert cpu_choice.int8_or_bf16(broken).how == "flags"
    assert not cpu_choice.choice_path().exists()
    cpu_choice.int8_or_bf16.cache_clear()
    assert cpu_choice.int8_or_bf16(Timer([100.0, -1.0], [50.0, 50.0])).how == "flags"  # a timer gone wrong
    assert not cpu_choice.choice_path().exists()


def test_the_kept_verdict_belongs_to_the_cpu_and_runtimes(fresh, monkeypatch):
    key = cpu_choice.cpu_key()
    monkeypatch.setattr(cpu_choice, "_version", lambda package: "9.9" if package == "onnxruntime" else "1.0")
    assert cpu_choice.cpu_key() != key
