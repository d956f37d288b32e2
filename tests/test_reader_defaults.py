"""One owner of the reader's defaults (reader.settings.ReaderSettings): the [reader] config section, `eval-reader` and
a library user's `Reader.from_pretrained` read alike; and a reader without a fitted calibration labels its score
uncalibrated and never calls an answer confident."""

from __future__ import annotations

import dataclasses
import json

import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.types import Passage
from odqa.reader.calibration import Calibration
from odqa.reader.model import Reader
from odqa.reader.settings import (
    CHECKPOINT_OWN_SETTINGS,
    QUESTION_TIME_SETTINGS,
    RECORDED_SETTINGS,
    TOP_LEVEL_SETTINGS,
    ReaderSettings,
)
from tests.reader_fixtures import save_tiny_qa

PASSAGES = [
    Passage(id=f"p{i}", title="Penicillin", text="Alexander Fleming discovered penicillin in 1928 in London.")
    for i in range(3)
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = save_tiny_qa(tmp_path_factory.mktemp("tiny-reader"))
    # an older checkpoint's saved settings, with the question-time values of before: they do not apply
    (path / "reader_config.json").write_text(
        json.dumps(
            {
                **dataclasses.asdict(ReaderSettings()),
                "max_length": 192,
                "max_answer_tokens": 7,
                "no_answer_threshold": 0.0,
                "retrieval_weight": 0.0,
                "focus_words": 0,
                "whole_passages": 0,
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def reader(tiny_dir):
    return Reader.from_pretrained(str(tiny_dir), precision="fp32", runtime="torch")


def test_the_config_section_is_the_readers_settings_less_what_a_checkpoint_records():
    config = OdqaConfig().reader
    assert type(config) is ReaderSettings and config == ReaderSettings()
    assert {"max_length", "stride", "cut_answers", "languages", "auto_int8"} <= set(RECORDED_SETTINGS)
    for name in [*RECORDED_SETTINGS, *TOP_LEVEL_SETTINGS]:
        with pytest.raises(OdqaError, match=f"reader.{name}"):
            OdqaConfig.load(None, {f"reader.{name}": "any value"})
    for name in QUESTION_TIME_SETTINGS:
        assert OdqaConfig.load(None, {f"reader.{name}": getattr(config, name)}).reader == config
    # the checkpoint's own unless set
    assert [config.max_answer_tokens for _ in CHECKPOINT_OWN_SETTINGS] == [None]
    # the values chosen on dev (retrieval_weight: bench/results/retrieval-weight.md)
    assert (config.no_answer_threshold, config.retrieval_weight, config.focus_words) == (-2.0, 7.5, 80)


def test_a_library_reader_reads_with_the_pipelines_settings(reader):
    config = OdqaConfig().reader
    for name in QUESTION_TIME_SETTINGS:
        assert getattr(reader.settings, name) == getattr(config, name), name
    assert reader.settings.max_length == 192  # what the checkpoint was trained with still applies


def test_a_bound_in_the_checkpoints_tokens_is_its_own_unless_set(tiny_dir, monkeypatch):
    """max_answer_tokens counts the checkpoint's tokens, so each reader records its own; the [reader] section and
    `eval-reader` leave it unset (None) and a number overrides it."""
    config = OdqaConfig().reader
    own = Reader.from_pretrained(str(tiny_dir), max_answer_tokens=config.max_answer_tokens, runtime="torch")
    assert own.settings.max_answer_tokens == 7
    assert Reader.from_pretrained(str(tiny_dir), runtime="torch").settings.max_answer_tokens == 7
    assert Reader.from_pretrained(str(tiny_dir), max_answer_tokens=3, runtime="torch").settings.max_answer_tokens == 3
    import odqa.reader.model as reader_model

    bounds = []

    def decode_passage(*args, **kwargs):
        bounds.append(kwargs["max_answer_tokens"])
        return decode(*args, **kwargs)

    decode = reader_model.decode_passage
    monkeypatch.setattr(reader_model, "decode_passage", decode_passage)
    assert own.read("Who discovered penicillin?", PASSAGES, no_answer_threshold=None)
    assert bounds and set(bounds) == {7}


def test_an_uncalibrated_reader_is_never_confident_and_says_so(reader, monkeypatch):
    from odqa.pipeline import Result
    from odqa.shell import Shell

    monkeypatch.setattr(reader.settings, "no_answer_threshold", None)  # always answer
    assert not reader.calibration.fitted
    answers = reader.read("Who discovered penicillin?", PASSAGES, top_n=3)
    assert answers and all(not a.calibrated and not a.confident for a in answers)
    assert not Calibration(threshold=0.0).confident(0.99)  # unfitted: no probability reaches "confident"
    assert Calibration(threshold=0.5, fitted=True).confident(0.6)

    lines = []
    shell = Shell.__new__(Shell)
    shell.say, shell.color = lines.append, False
    shell.show(Result(question="q", answers=answers, passages=[]))
    shown = "\n".join(lines)
    assert "uncalibrated" in shown and "p=" not in shown and "no confident answer" in shown


def test_a_calibrated_reader_keeps_its_probability(reader, monkeypatch):
    monkeypatch.setattr(reader.settings, "no_answer_threshold", None)
    monkeypatch.setattr(reader, "calibration", Calibration(threshold=0.0, fitted=True))
    answers = reader.read("Who discovered penicillin?", PASSAGES, top_n=1)
    assert answers[0].calibrated and answers[0].confident


def test_every_reader_setting_of_the_config_reaches_the_built_reader(tiny_dir):
    """A new [reader] setting is one field of ReaderSettings (and its use in the reader): the config, its dotted
    overrides and build_reader carry every field that is no checkpoint record without another line."""
    from odqa.reader.registry import build_reader

    keys = [
        f.name
        for f in dataclasses.fields(ReaderSettings)
        if f.name not in (*RECORDED_SETTINGS, *TOP_LEVEL_SETTINGS, "model", "calibration")
    ]
    assert {"top_n", "batch_size", "max_answer_tokens", *QUESTION_TIME_SETTINGS} <= set(keys)
    given = {
        "top_n": 3,
        "batch_size": 4,
        "max_answer_tokens": 9,
        "no_answer_threshold": -1.0,
        "retrieval_weight": 2.5,
        "selection_weight": 0.25,
        "subject_weight": 1.5,
        "early_stop_passages": 2,
        "early_stop_probability": 0.4,
        "focus_words": 60,
        "whole_passages": 1,
    }
    assert set(given) == set(keys), "a new setting: give it a value here"
    config = OdqaConfig.load(None, {"reader.model": str(tiny_dir), **{f"reader.{k}": v for k, v in given.items()}})
    reader = build_reader(config.reader, inference=config.inference())
    assert {k: getattr(reader.settings, k) for k in given} == given
