"""Issue 78, class 1: every value a model folder carries goes through the rule flags and configs go through (type,
range, finite). reader_config.json, calibration.json, linker_config.json, retriever_info.json and a
sentence-transformers module's config: a bad value is refused in one line naming the file, the key, the value and
the range (it made every question "no answer found", one-token answers, every answer confident or none, a linker
that links nothing, or a traceback); a file that is no JSON object (truncated, a key given twice) is one line
naming the file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from odqa.core.errors import OdqaError

REPO = Path(__file__).resolve().parents[2]

# (key, value as written in the file) for a reader_config.json
READER_CASES = [
    ("max_answer_tokens", "0"),
    ("max_answer_tokens", "-3"),
    ("max_answer_tokens", "NaN"),
    ("max_answer_tokens", "true"),
    ("max_answer_tokens", '"20"'),
    ("max_answer_tokens", "2.5"),
    ("max_length", "1e308"),
    ("stride", "-1"),
    ("temperature", "0"),
    ("spans_per_window", "Infinity"),
    ("precision", '"fp64"'),
    ("languages", '"en"'),
    ("early_stop_probability", "5"),
]
CALIBRATION_CASES = [
    ("threshold", "5"),
    ("threshold", "-1"),
    ("threshold", "NaN"),
    ("weights", "[1e308, 0]"),
    ("weights", "[0.3, NaN]"),
    ("bias", '"high"'),
    ("bias", "-1e308"),
    ("fitted", '"yes"'),
]
LINKER_CASES = [
    ("mention_threshold", "NaN"),
    ("mention_threshold", "1.5"),
    ("entity_threshold", "-0.1"),
    ("entity_threshold", '"0.2"'),
    ("candidates", "0"),
    ("max_length", "64.5"),
]
RETRIEVER_INFO_CASES = [
    ("auto_int8", '"yes"'),
    ("auto_int8", "1"),
    ("query_encoder", "5"),
]


def _with_value(original: str, key: str, value: str) -> str:
    """The JSON text `original` with `key` set to the raw text `value` (NaN, Infinity as Python's json reads)."""
    data = json.loads(original)
    data[key] = "@@VALUE@@"
    return json.dumps(data, indent=2).replace('"@@VALUE@@"', value)


def _assert_one_line(message: str, path: Path, key: str | None = None, value: str | None = None) -> None:
    assert "\n" not in message, message
    assert str(path) in message, message
    if key is not None:
        assert re.search(rf"\b{key} = ", message), message
        shown = json.dumps(json.loads(value))  # as written, up to JSON's own spelling (1e308: 1e+308)
        assert f"{key} = {shown} " in message, message
        assert "give " in message, message  # what to give: the range or the type


def _folder_of(model: str, tmp_path: Path) -> Path:
    """A copy of the shipped model folder `model`: its small files copied, its weights linked (they are read only)."""
    source = REPO / "models" / model
    folder = tmp_path / model
    folder.mkdir()
    for item in source.iterdir():
        if item.stat().st_size > 2_000_000:
            (folder / item.name).symlink_to(item)
        elif item.is_file():
            shutil.copy(item, folder / item.name)
    return folder


@pytest.mark.parametrize("key,value", READER_CASES, ids=[f"{k}={v}" for k, v in READER_CASES])
def test_a_reader_config_value_out_of_its_rule_is_one_line(key, value, tmp_path):
    from odqa.reader.model import Reader

    folder = _folder_of("reader", tmp_path)
    config = folder / "reader_config.json"
    config.write_text(_with_value(config.read_text(), key, value))
    with pytest.raises(OdqaError) as refused:
        Reader.from_pretrained(str(folder), device="cpu")
    _assert_one_line(str(refused.value), config, key, value)


@pytest.mark.parametrize("damage", ["truncated", "duplicate key", "array"])
def test_a_damaged_reader_config_names_the_file(damage, tmp_path):
    from odqa.reader.model import Reader

    folder = _folder_of("reader", tmp_path)
    config = folder / "reader_config.json"
    text = config.read_text()
    config.write_text(
        {
            "truncated": text[: len(text) // 2],
            "duplicate key": text.replace("{", '{\n  "max_answer_tokens": 3,', 1),
            "array": "[]",
        }[damage]
    )
    with pytest.raises(OdqaError) as refused:
        Reader.from_pretrained(str(folder), device="cpu")
    _assert_one_line(str(refused.value), config)
    if damage == "duplicate key":
        assert "max_answer_tokens" in str(refused.value) and "twice" in str(refused.value)


def test_ask_with_a_reader_whose_answer_bound_is_zero_is_one_line_exit_2(tmp_path, capsys):
    """Before, every question was "no answer found", exit 0."""
    from odqa.cli import main
    from tests.reader_fixtures import save_tiny_qa

    folder = save_tiny_qa(tmp_path / "tiny-reader")
    (folder / "reader_config.json").write_text(json.dumps({"max_answer_tokens": 0}))
    capsys.readouterr()
    code = main(["ask", "--retriever", "bm25", "--no-linker", "--reader", str(folder), "Who discovered penicillin?"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.startswith("odqa: error: ") and err.count("\n") == 1, err
    assert "reader_config.json: max_answer_tokens = 0 is out of range; give a positive whole number" in err


@pytest.mark.parametrize("key,value", CALIBRATION_CASES, ids=[f"{k}={v}" for k, v in CALIBRATION_CASES])
def test_a_calibration_value_out_of_its_rule_is_one_line(key, value, tmp_path):
    from odqa.reader.calibration import Calibration

    path = tmp_path / "calibration.json"
    path.write_text(_with_value((REPO / "models" / "reader" / "calibration.json").read_text(), key, value))
    with pytest.raises(OdqaError) as refused:
        Calibration.load(path)
    _assert_one_line(str(refused.value), path, key, value)


@pytest.mark.parametrize("damage", ["truncated", "not UTF-8"])
def test_a_damaged_calibration_names_the_file(damage, tmp_path):
    from odqa.reader.calibration import Calibration

    path = tmp_path / "calibration.json"
    text = (REPO / "models" / "reader" / "calibration.json").read_bytes()
    path.write_bytes(text[:100] if damage == "truncated" else text.replace(b'"fitted"', b'"fitt\xe9d"'))
    with pytest.raises(OdqaError) as refused:
        Calibration.load(path)
    _assert_one_line(str(refused.value), path)


@pytest.mark.parametrize("key,value", LINKER_CASES, ids=[f"{k}={v}" for k, v in LINKER_CASES])
def test_a_linker_config_value_out_of_its_rule_is_one_line(key, value, tmp_path):
    from odqa.linker.linker import Linker

    folder = _folder_of("linker", tmp_path)
    config = folder / "linker_config.json"
    config.write_text(_with_value(config.read_text(), key, value))
    with pytest.raises(OdqaError) as refused:
        Linker.from_pretrained(folder)
    _assert_one_line(str(refused.value), config, key, value)


def test_a_truncated_linker_config_names_the_file(tmp_path):
    from odqa.linker.linker import Linker

    folder = _folder_of("linker", tmp_path)
    config = folder / "linker_config.json"
    config.write_text(config.read_text()[:-30])
    with pytest.raises(OdqaError) as refused:
        Linker.from_pretrained(folder)
    _assert_one_line(str(refused.value), config)


@pytest.mark.parametrize("key,value", RETRIEVER_INFO_CASES, ids=[f"{k}={v}" for k, v in RETRIEVER_INFO_CASES])
def test_a_retriever_info_value_out_of_its_rule_is_one_line(key, value, tmp_path):
    from odqa.core.text_encoding import int8_measured, paired_query_encoder

    folder = _folder_of("fast-passage-encoder", tmp_path)
    info = folder / "retriever_info.json"
    info.write_text(_with_value(info.read_text(), key, value))
    for read in (int8_measured, paired_query_encoder):
        with pytest.raises(OdqaError) as refused:
            read(str(folder))
        _assert_one_line(str(refused.value), info, key, value)


def test_a_truncated_retriever_info_names_the_file(tmp_path):
    from odqa.core.text_encoding import paired_query_encoder

    folder = _folder_of("fast-passage-encoder", tmp_path)
    info = folder / "retriever_info.json"
    info.write_text(info.read_text()[:40])
    with pytest.raises(OdqaError) as refused:
        paired_query_encoder(str(folder))
    _assert_one_line(str(refused.value), info)


@pytest.mark.parametrize("value", ["0", "NaN", '"512"'])
def test_a_sentence_transformers_length_out_of_its_rule_is_one_line(value, tmp_path):
    from odqa.core.text_encoding import encoder_max_length

    folder = _folder_of("encoder-multilingual", tmp_path)
    config = folder / "sentence_bert_config.json"
    config.write_text(_with_value(config.read_text(), "max_seq_length", value))
    with pytest.raises(OdqaError) as refused:
        encoder_max_length(str(folder))
    _assert_one_line(str(refused.value), config, "max_seq_length", value)


def test_the_shipped_model_folders_keep_the_rule():
    from odqa.core.text_encoding import encoder_max_length, paired_query_encoder
    from odqa.linker.heads import LINKER_CONFIG, load_linker_config
    from odqa.reader.calibration import Calibration
    from odqa.reader.settings import READER_CONFIG, load_reader_config

    for reader in ("reader", "reader-multilingual"):
        assert load_reader_config(REPO / "models" / reader / READER_CONFIG)["max_answer_tokens"] >= 1
        assert Calibration.for_model(REPO / "models" / reader).fitted
    assert 0 < load_linker_config(REPO / "models" / "linker" / LINKER_CONFIG).mention_threshold < 1
    assert paired_query_encoder("fast-passage-encoder") == "retriever"
    assert encoder_max_length("encoder-multilingual") == 512
