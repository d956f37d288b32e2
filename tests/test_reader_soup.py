"""Reader soups (`average-readers`): the weight average of several readers, and the refusals."""

from __future__ import annotations

import json

import pytest
import torch

from odqa.cli import main
from odqa.core.errors import OdqaError
from odqa.reader.training.soup import average_readers
from tests.reader_fixtures import minilm_tokenizer, save_tiny_qa, tiny_config

KEY = "bert.encoder.layer.0.attention.self.query.weight"


def _state(path):
    from transformers import AutoModelForQuestionAnswering

    return AutoModelForQuestionAnswering.from_pretrained(str(path)).state_dict()


def test_a_soup_is_the_mean_of_its_readers_and_names_them(tmp_path):
    readers = [save_tiny_qa(tmp_path / f"r{seed}", seed=seed) for seed in (0, 1, 2)]
    states = [_state(r) for r in readers]
    out = average_readers([str(r) for r in readers], tmp_path / "soup")
    soup = _state(out)
    assert torch.allclose(soup[KEY], sum(s[KEY] for s in states) / 3, atol=1e-6)
    assert torch.allclose(soup["qa_outputs.bias"], sum(s["qa_outputs.bias"] for s in states) / 3, atol=1e-6)
    info = json.loads((out / "soup.json").read_text())
    assert [i["model"] for i in info["ingredients"]] == [str(r) for r in readers]
    weighted = average_readers([str(readers[0]), str(readers[1])], tmp_path / "weighted", [0.75, 0.25])
    assert torch.allclose(_state(weighted)[KEY], 0.75 * states[0][KEY] + 0.25 * states[1][KEY], atol=1e-6)


def test_readers_of_other_architectures_are_refused_and_nothing_is_written(tmp_path):
    from transformers import BertForQuestionAnswering

    small = save_tiny_qa(tmp_path / "small")
    config = tiny_config(len(minilm_tokenizer()))
    config.hidden_size, config.intermediate_size = 48, 96
    BertForQuestionAnswering(config).save_pretrained(str(tmp_path / "wider"))
    minilm_tokenizer().save_pretrained(str(tmp_path / "wider"))
    with pytest.raises(OdqaError, match="same architecture"):
        average_readers([str(small), str(tmp_path / "wider")], tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_the_command_refuses_one_reader_and_shares_that_do_not_fit(tmp_path, capsys):
    a, b = save_tiny_qa(tmp_path / "a", seed=0), save_tiny_qa(tmp_path / "b", seed=1)
    assert main(["average-readers", "--models", str(a), "--output", str(tmp_path / "one")]) == 2
    assert "two or more readers" in capsys.readouterr().err
    assert (
        main(["average-readers", "--models", str(a), str(b), "--shares", "0.5", "--output", str(tmp_path / "x")]) == 2
    )
    assert "one share per reader" in capsys.readouterr().err
    assert (
        main(["average-readers", "--models", str(a), str(b), "--shares", "0.7", "0.7", "--output", str(tmp_path / "y")])
        == 2
    )
    assert "sum to 1" in capsys.readouterr().err
    assert main(["average-readers", "--models", str(a), str(b), "--output", str(tmp_path / "ok")]) == 0
    assert (tmp_path / "ok" / "soup.json").exists() and not (tmp_path / "x").exists()


def test_average_weights_reads_a_stream_of_states_and_counts_them():
    from odqa.core.weight_averaging import average_weights

    def stream(n):  # as average_readers loads them: one at a time
        for i in range(n):
            yield {"w": torch.full((2,), float(i)), "ids": torch.tensor([i])}

    mean = average_weights(stream(3), [0.5, 0.25, 0.25], ["a", "b", "c"])
    assert torch.equal(mean["w"], torch.full((2,), 0.75)) and mean["ids"].tolist() == [2]  # integers: the last's
    with pytest.raises(OdqaError, match="2 models for 3 shares"):
        average_weights(stream(2), [0.5, 0.25, 0.25], ["a", "b", "c"])
