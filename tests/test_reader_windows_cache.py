"""A resumed `train-reader` reads its windows from the run folder instead of re-tokenising its training files
(reader.training.windows_cache): the same windows, a new key when a file or setting changes, and a damaged cache
rebuilt rather than read."""

from __future__ import annotations

import json
import logging

import pytest

from odqa.cli import main
from odqa.reader.training.train import TrainConfig, featurising_modules, read_training_windows
from odqa.reader.training.windows_cache import PREFIX, load_windows, save_windows, windows_key
from tests.reader_fixtures import minilm_tokenizer, save_tiny_qa, tiny_train_reader_argv

pytestmark = [pytest.mark.slow]

CONTEXT = (
    "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911. She was born in Warsaw, studied in "
    "Paris, and led the Radium Institute, where her daughter Irene later shared a Nobel Prize of her own."
)


def _data(path, questions=6):
    qas = [
        {"id": f"q{i}", "question": f"Who won prize {i}?", "answers": [{"text": "Marie Curie", "answer_start": 0}]}
        for i in range(questions)
    ]
    qas.append({"id": "none", "question": "Who lost?", "answers": [], "is_impossible": True})
    path.write_text(json.dumps({"data": [{"title": "Curie", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}))
    return path


def _config(tmp_path, **changes):
    settings = {"max_length": 32, "stride": 8, "negative_ratio": 1.0}
    settings.update(changes)
    return TrainConfig(train_files=[str(tmp_path / "train.json")], output_dir=str(tmp_path / "run"), **settings)


def test_kept_windows_are_the_windows_the_files_give(tmp_path):
    _data(tmp_path / "train.json")
    cfg, tokenizer = _config(tmp_path), minilm_tokenizer()
    feats, stats, languages = read_training_windows(cfg, tokenizer)
    key = windows_key(cfg, tokenizer, featurising_modules())
    save_windows(tmp_path, key, feats, stats, languages)
    kept = load_windows(tmp_path, key)
    assert kept is not None
    assert kept.feats == feats
    assert kept.stats["questions"] == stats.questions and kept.languages == sorted(languages)
    assert len(feats["input_ids"]) > stats.questions  # short windows: the passage is cut into several


def test_the_key_follows_the_files_the_settings_and_the_tokenizer(tmp_path):
    data = _data(tmp_path / "train.json")
    tokenizer = minilm_tokenizer()
    modules = featurising_modules()
    key = windows_key(_config(tmp_path), tokenizer, modules)
    assert windows_key(_config(tmp_path), tokenizer, modules) == key
    assert windows_key(_config(tmp_path, stride=4), tokenizer, modules) != key
    assert windows_key(_config(tmp_path, seed=7), tokenizer, modules) != key
    assert windows_key(_config(tmp_path), tokenizer, modules[:1]) != key
    tokenizer.add_tokens(["[NEW]"])
    assert windows_key(_config(tmp_path), tokenizer, modules) != key
    _data(data, questions=7)
    assert windows_key(_config(tmp_path), minilm_tokenizer(), modules) != key


@pytest.mark.parametrize("damage", ["byte changed", "truncated", "description missing its groups"])
def test_damaged_kept_windows_are_named_and_not_read(tmp_path, caplog, damage):
    _data(tmp_path / "train.json")
    cfg, tokenizer = _config(tmp_path), minilm_tokenizer()
    feats, stats, languages = read_training_windows(cfg, tokenizer)
    save_windows(tmp_path, "k", feats, stats, languages)
    folder = tmp_path / f"{PREFIX}k"
    arrays = folder / "windows.npz"
    if damage == "byte changed":
        data = bytearray(arrays.read_bytes())
        data[len(data) // 2] ^= 0x01
        arrays.write_bytes(bytes(data))
    elif damage == "truncated":
        arrays.write_bytes(arrays.read_bytes()[:100])
    else:
        meta = json.loads((folder / "windows.json").read_text())
        del meta["groups"]
        (folder / "windows.json").write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING):
        assert load_windows(tmp_path, "k") is None
    assert "damaged" in caplog.text and str(folder) in caplog.text


def _argv(tmp_path, steps):
    return tiny_train_reader_argv(tmp_path / "train.json", tmp_path, steps, max_length=48)


def test_a_resumed_run_reads_its_kept_windows_and_a_changed_file_replaces_them(tmp_path, capsys):
    save_tiny_qa(tmp_path / "init")
    _data(tmp_path / "train.json")
    assert main(_argv(tmp_path, 2)) == 0
    kept = sorted((tmp_path / "run").glob(f"{PREFIX}*"))
    assert len(kept) == 1
    capsys.readouterr()
    assert main(_argv(tmp_path, 3)) == 0
    err = capsys.readouterr().err
    assert "windows read from" in err and "resumed from" in err, err
    _data(tmp_path / "train.json", questions=7)  # a curriculum's next file: new windows, the old ones removed
    assert main(_argv(tmp_path, 4)) == 0
    err = capsys.readouterr().err
    assert "windows read from" not in err, err
    now = sorted((tmp_path / "run").glob(f"{PREFIX}*"))
    assert len(now) == 1 and now != kept
    info = json.loads((tmp_path / "run" / "final" / "train_info.json").read_text())
    assert info["steps"] == 4 and info["questions"] == 8
