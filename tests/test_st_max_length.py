"""A sentence-transformers folder is read at the length sentence-transformers uses, whichever file its version keeps
it in (version 6: tokenizer_config.json; before: sentence_bert_config.json), so passages longer than the limit get
the vectors SentenceTransformer.encode gives them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from odqa.core.models import resolve_model
from odqa.core.text_encoding import encoder_max_length

LIMIT = 32
LONG = [
    (
        "Penicillin was discovered in 1928 by Alexander Fleming at St Mary's Hospital in London, who noticed that "
        "a mould had killed the bacteria around it on a culture plate he had left out during a holiday; "
        "mass production began during the Second World War. "
    )
    * 2,
    "Mount Everest is the highest mountain on Earth above sea level, in the Mahalangur Himal sub-range of the "
    "Himalayas on the border between Nepal and China, first climbed in 1953 by Tenzing and Hillary.",
    "short text",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """minilm saved by the installed sentence-transformers with a limit of LIMIT tokens."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(resolve_model("minilm"), device="cpu", local_files_only=True)
    model.max_seq_length = LIMIT
    folder = tmp_path_factory.mktemp("st") / "minilm-32"
    model.save(str(folder))
    return folder, SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def test_the_limit_is_read_where_sentence_transformers_keeps_it(saved, tmp_path):
    folder, model = saved
    assert model.max_seq_length == LIMIT and encoder_max_length(str(folder)) == LIMIT
    assert encoder_max_length("minilm") == 256  # an older folder: sentence_bert_config.json's max_seq_length
    # an older folder's module config wins over the tokenizer's limit, as sentence-transformers has it
    (tmp_path / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])
    )
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 100}')
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 512}')
    assert encoder_max_length(str(tmp_path)) == 100
    (tmp_path / "sentence_bert_config.json").write_text("{}")
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 300}')
    assert encoder_max_length(str(tmp_path)) == 300  # the tokenizer's limit, capped by the positions


def test_long_passages_get_sentence_transformers_vectors(saved):
    from odqa.core.encoder import TextEncoder

    folder, model = saved
    assert len(model.tokenizer(LONG[0])["input_ids"]) > LIMIT  # truncated: the limit decides the vector
    encoder = TextEncoder.from_pretrained(
        str(folder), max_length=encoder_max_length(str(folder)), device="cpu", precision="fp32", runtime="torch"
    )
    ours = encoder.encode_passages(LONG)
    theirs = model.encode(LONG, normalize_embeddings=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
