import numpy as np
import pytest
import torch

from odqa.core.device import autocast_for
from odqa.core.encoder import TextEncoder
from odqa.core.errors import OdqaError

TEXTS = [
    "Ada Lovelace | She wrote the first published algorithm for Babbage's Analytical Engine.",
    "Mount Fuji | The highest mountain in Japan is an active stratovolcano.",
    "who wrote the first algorithm",
]


@pytest.fixture(scope="module")
def encoder():
    return TextEncoder.from_pretrained("minilm", device="cpu", precision="fp32")


def test_vectors_are_unit_length_in_every_precision(encoder):
    for precision in ("fp32", "bf16", "auto"):
        encoder.precision = precision
        vectors = encoder.encode(TEXTS)
        assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    encoder.precision = "fp32"


def test_bf16_vectors_keep_the_fp32_ranking(encoder):
    encoder.precision = "fp32"
    exact = encoder.encode(TEXTS)
    encoder.precision = "bf16"
    fast = encoder.encode(TEXTS)
    encoder.precision = "fp32"
    assert (exact * fast).sum(1).min() > 0.999
    # the question is nearest the passage that answers it under both
    assert np.argmax(exact[:2] @ exact[2]) == np.argmax(fast[:2] @ fast[2]) == 0


def test_batches_are_formed_by_token_count_so_padding_stays_small(encoder, monkeypatch):
    # characters and tokens disagree: digits cost a token each, a long word few
    texts = [
        "1 2 3 4 5 6 7 8 9 10 11 12 13",
        "Photosynthesis",
        "Extraordinarily photosynthetic chlorophyll",
        "a b c d e f g h i j k l m n o p",
    ]
    counts = encoder.token_counts(texts)
    widths = []
    padded = encoder.token_arrays

    def recording(batch, max_length=None):
        arrays = padded(batch, max_length)
        widths.append(arrays["input_ids"].shape[1])
        return arrays

    encoder.precision = "fp32"
    monkeypatch.setattr(encoder, "token_arrays", recording)
    vectors = encoder.encode(texts, batch_size=2)
    by_count = sorted(counts, reverse=True)
    assert widths == [by_count[0], by_count[2]]
    assert np.allclose(vectors, encoder.encode(texts, batch_size=1), atol=1e-5)


def test_auto_precision_recognises_native_bf16_cpus_from_their_flags():
    from odqa.core.device import flags_have_fast_bf16

    def cpuinfo(flags):
        return f"processor\t: 0\nmodel name\t: some cpu\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\n"

    assert flags_have_fast_bf16(cpuinfo("avx2 avx512f amx_bf16 amx_tile"))  # Intel Sapphire Rapids
    assert flags_have_fast_bf16(cpuinfo("avx2 avx512f avx512_bf16"))  # AMD Zen 4, Intel Cooper Lake
    assert not flags_have_fast_bf16(cpuinfo("avx2 avx512f avx512_vnni"))  # bf16 would be emulated
    assert not flags_have_fast_bf16("model name\t: avx512_bf16 in a name, not a flag\n")


def test_unknown_precision_is_refused():
    with pytest.raises(OdqaError, match="unknown precision"):
        autocast_for(torch.device("cpu"), "int4")


def test_the_shipped_fine_tuned_retriever_ranks_the_answer_passage_first():
    encoder = TextEncoder.from_pretrained("retriever", device="cpu")
    question = encoder.encode(["who discovered penicillin"])
    passages = encoder.encode(
        [
            "Penicillin. Penicillin was discovered in 1928 by the Scottish scientist Alexander Fleming.",
            "Eiffel Tower. The tower was built for the 1889 World's Fair in Paris.",
        ]
    )
    assert question.shape == (1, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    scores = (question @ passages.T)[0]
    assert scores[0] > scores[1] + 0.2, scores


def test_model_fingerprint_follows_the_weights_not_only_the_name(tmp_path):
    from odqa.core.models import model_fingerprint

    model = tmp_path / "enc"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights v1")
    first = model_fingerprint(str(model))
    assert model_fingerprint(str(model)) == first
    (model / "model.safetensors").write_bytes(b"weights v2")
    assert model_fingerprint(str(model)) != first
    assert model_fingerprint("minilm") != model_fingerprint("some/hub-name")


def test_model_fingerprint_is_kept_across_processes_until_the_weights_change(tmp_path, monkeypatch):
    import odqa.core.models as models

    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    model = tmp_path / "enc"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights v1" * 1000)
    first = models.model_fingerprint(str(model))
    assert (tmp_path / "home" / models.FINGERPRINT_FILE).is_file()
    hashed = []
    real_hash = models._hash_weights
    monkeypatch.setattr(models, "_hash_weights", lambda name, weights: hashed.append(name) or real_hash(name, weights))
    monkeypatch.setattr(models, "_fingerprints", {})  # a fresh process
    assert models.model_fingerprint(str(model)) == first and not hashed  # read from $ODQA_HOME, not hashed
    (model / "model.safetensors").write_bytes(b"weights v2" * 1000)
    assert models.model_fingerprint(str(model)) != first and hashed == [str(model)]
