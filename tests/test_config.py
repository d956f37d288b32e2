import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError


def test_defaults_validate():
    config = OdqaConfig.load()
    assert config.retrieval.retriever == "hybrid" and config.retrieval.k > 0


def test_toml_then_flags_override(tmp_path):
    path = tmp_path / "odqa.toml"
    path.write_text(
        'index = "idx"\n[retrieval]\nretriever = "bm25"\nk = 7\nalpha = 0.3\n'
        "[reader]\ntop_n = 2\n[linker]\nenabled = false\n"
    )
    config = OdqaConfig.load(path, {"retrieval.k": 12, "retrieval.retriever": None})
    assert config.index == "idx" and config.retrieval.retriever == "bm25"
    assert config.retrieval.k == 12 and config.retrieval.alpha == 0.3
    assert config.reader.top_n == 2 and config.linker.enabled is False


def test_yaml(tmp_path):
    path = tmp_path / "odqa.yaml"
    path.write_text("retrieval:\n  fusion: minmax\n  alpha: 0.7\n")
    config = OdqaConfig.load(path)
    assert config.retrieval.fusion == "minmax" and config.retrieval.alpha == 0.7


@pytest.mark.parametrize(
    "text,message",
    [
        ("[retrieval]\nk = 0\n", r"retrieval.k = 0 \(from .*bad.toml\) is out of range; give a positive whole number"),
        ('[retrieval]\nretriever = "magic"\n', "must be one of"),
        ("[retrieval]\nalpha = 1.5\n", "retrieval.alpha = 1.5 .* is out of range; give a finite number >= 0 <= 1"),
        ('[retrieval]\nk = "many"\n', "'retrieval.k' must be int"),
        ("[retriever]\nk = 3\n", "unknown setting 'retriever'"),
        ("[linker]\nmention_threshold = -1\n", "mention_threshold"),
        ("[reader]\nfocus_words = -5\n", "reader.focus_words = -5 .* give a whole number >= 0"),
        ("[reader]\nwhole_passages = -1\n", "reader.whole_passages = -1 .* give a whole number >= 0"),
        ("[reader]\nearly_stop_passages = -1\n", "reader.early_stop_passages = -1 .* give a whole number >= 0"),
        ("[reader]\nearly_stop_probability = 1.5\n", "early_stop_probability = 1.5 .* give a finite number >= 0 <= 1"),
        ("retrieval = 3\n", "must be a table"),
        ("[retrieval\n", "not valid"),
    ],
)
def test_bad_values_name_the_setting(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(OdqaError, match=message):
        OdqaConfig.load(path)


def test_missing_file():
    with pytest.raises(OdqaError, match="config file not found"):
        OdqaConfig.load("/nonexistent/odqa.toml")


def test_flag_strings_are_coerced():
    config = OdqaConfig.load(None, {"retrieval.k": "15", "retrieval.alpha": "0.25", "linker.enabled": "false"})
    assert config.retrieval.k == 15 and config.retrieval.alpha == 0.25 and config.linker.enabled is False
