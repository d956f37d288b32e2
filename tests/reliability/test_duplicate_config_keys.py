"""Issue 78, class 8: a config (TOML, YAML or JSON) or a model folder's file that gives a key twice is refused in
one line naming the key and the file; before, JSON and YAML kept the last value without a word, and TOML's
refusal named a line but no key."""

from __future__ import annotations

import json

import pytest

from odqa.cli import main
from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError

TWICE = {
    "toml": "[retrieval]\nk = 5\nretriever = 'bm25'\nk = 50\n",
    "yaml": "retrieval:\n  k: 5\n  retriever: bm25\n  k: 50\n",
    "json": '{"retrieval": {"k": 5, "retriever": "bm25", "k": 50}}',
}
INLINE = "retrieval = { k = 5, retriever = 'bm25', k = 50 }\n"  # a TOML inline table

TOP_LEVEL = {
    "toml": "index = 'a'\n[retrieval]\nk = 5\n[retrieval]\nretriever = 'bm25'\n",
    "yaml": "retrieval:\n  k: 5\nretrieval:\n  retriever: bm25\n",
    "json": '{"retrieval": {"k": 5}, "retrieval": {"retriever": "bm25"}}',
}


@pytest.mark.parametrize("suffix", sorted(TWICE))
def test_a_key_given_twice_is_refused_naming_key_and_file(suffix, tmp_path):
    path = tmp_path / f"odqa.{suffix}"
    path.write_text(TWICE[suffix])
    with pytest.raises(OdqaError) as refused:
        OdqaConfig.load(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message, message
    assert "'k'" in message and "twice" in message, message


def test_a_key_given_twice_in_a_toml_inline_table_is_refused_alike(tmp_path):
    path = tmp_path / "odqa.toml"
    path.write_text(INLINE)
    with pytest.raises(OdqaError) as refused:
        OdqaConfig.load(path)
    assert "the key 'k' is given twice" in str(refused.value) and str(path) in str(refused.value)


@pytest.mark.parametrize("suffix", sorted(TOP_LEVEL))
def test_a_section_given_twice_is_refused_naming_it(suffix, tmp_path):
    path = tmp_path / f"odqa.{suffix}"
    path.write_text(TOP_LEVEL[suffix])
    with pytest.raises(OdqaError) as refused:
        OdqaConfig.load(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "retrieval" in message and "twice" in message, message


def test_the_cli_says_it_in_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "odqa.json"
    path.write_text(TWICE["json"])
    code = main(["search", "--config", str(path), "penicillin"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "'k' is given twice" in err, err


def test_a_secret_key_given_twice_names_the_key_never_the_values(tmp_path):
    path = tmp_path / "odqa.yaml"
    path.write_text("elastic:\n  password: 'first-s3cret'\n  password: 'second-s3cret'\n")
    with pytest.raises(OdqaError) as refused:
        OdqaConfig.load(path)
    message = str(refused.value)
    assert "'password' is given twice" in message and "s3cret" not in message, message


def test_distinct_keys_still_load(tmp_path):
    for suffix, text in {
        "toml": "[retrieval]\nk = 7\n",
        "yaml": "retrieval:\n  k: 7\n",
        "json": json.dumps({"retrieval": {"k": 7}}),
    }.items():
        path = tmp_path / f"odqa.{suffix}"
        path.write_text(text)
        assert OdqaConfig.load(path).retrieval.k == 7
