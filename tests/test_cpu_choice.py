"""`auto`'s choice between int8 and bf16 on a CPU with native bf16: timed once on the CPU, kept per $ODQA_HOME."""

from __future__ import annotations

import json

import pytest

import odqa.core.cpu_choice as cpu_choice
from odqa.core.errors import OdqaError

pytest.importorskip("onnxruntime")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A new $ODQA_HOME, the measurement not set aside by the environment, nothing remembered in the process."""
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ODQA_CPU_CHOICE", raising=False)
    cpu_choice.int8_or_bf16.cache_clear()
    yield tmp_path / "home"
    cpu_choice.int8_or_bf16.cache_clear()


def _timings(monkeypatch, bf16_ms: float, int8_ms: float) -> list[int]:
    calls: list[int] = []

    def measure(rounds: int = cpu_choice.PROBE_ROUNDS):
        calls.append(rounds)
        return bf16_ms, int8_ms

    monkeypatch.setattr(cpu_choice, "measure", measure)
    return calls


def test_the_probe_times_both_paths_on_this_cpu(fresh):
    bf16_ms, int8_ms = cpu_choice.measure(rounds=1)
    assert bf16_ms > 0 and int8_ms > 0
    assert any(fresh.glob("onnx/cpu-probe-*/model.int8.onnx"))  # its graph is cached like any model's


def test_the_verdict_is_measured_once_and_kept(fresh, monkeypatch):
    calls = _timings(monkeypatch, 150.0, 100.0)
    choice = cpu_choice.int8_or_bf16()
    assert choice.prefers_int8 and choice.how == "measured" and "int8 timed 1.50x bf16's speed on this CPU" in choice.reason
    kept = json.loads(cpu_choice.choice_path().read_text())
    assert kept["prefers_int8"] is True and kept["bf16_ms"] == 150.0
    cpu_choice.int8_or_bf16.cache_clear()  # a new process
    _timings(monkeypatch, 100.0, 150.0)
    assert cpu_choice.int8_or_bf16() == choice and calls == [cpu_choice.PROBE_ROUNDS]


def test_int8_must_be_clearly_faster_since_it_costs_f1(fresh, monkeypatch):
    _timings(monkeypatch, 104.0, 100.0)
    assert not cpu_choice.int8_or_bf16().prefers_int8


def test_a_damaged_or_older_verdict_is_measured_again(fresh, monkeypatch):
    path = cpu_choice.choice_path()
    path.parent.mkdir(parents=True)
    for text in ("{not json", json.dumps({"prefers_int8": True, "bf16_ms": 2.0, "int8_ms": 1.0, "version": 0})):
        path.write_text(text)
        cpu_choice.int8_or_bf16.cache_clear()
        calls = _timings(monkeypatch, 100.0, 100.0)
        assert not cpu_choice.int8_or_bf16().prefers_int8 and calls
        assert json.loads(path.read_text())["version"] == cpu_choice.CHOICE_VERSION


def test_the_environment_sets_or_skips_the_measurement(fresh, monkeypatch):
    calls = _timings(monkeypatch, 100.0, 200.0)
    for setting, int8 in (("int8", True), ("bf16", False)):
        monkeypatch.setenv("ODQA_CPU_CHOICE", setting)
        cpu_choice.int8_or_bf16.cache_clear()
        assert cpu_choice.int8_or_bf16().prefers_int8 is int8
    monkeypatch.setenv("ODQA_CPU_CHOICE", "flags")
    cpu_choice.int8_or_bf16.cache_clear()
    assert cpu_choice.int8_or_bf16().how == "flags"
    monkeypatch.setenv("ODQA_CPU_CHOICE", "fastest")
    cpu_choice.int8_or_bf16.cache_clear()
    with pytest.raises(OdqaError, match="ODQA_CPU_CHOICE='fastest': use measure"):
        cpu_choice.int8_or_bf16()
    assert not calls and not cpu_choice.choice_path().exists()


def test_the_kept_verdict_belongs_to_the_cpu_and_runtimes(fresh, monkeypatch):
    key = cpu_choice.cpu_key()
    monkeypatch.setattr(cpu_choice, "_version", lambda package: "9.9" if package == "onnxruntime" else "1.0")
    assert cpu_choice.cpu_key() != key
