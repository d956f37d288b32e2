"""Encoders of every kind a user brings, as tiny random-weight models saved locally (no hub): a
sentence-transformers folder, a DPR question/context pair, and a plain transformers model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from odqa.core.encoder import TextEncoder
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.models import resolve_model
from tests.retrievers import built_retriever

QUESTIONS = ["who discovered penicillin", "where is mount fuji"]
PASSAGES = [
    ("Penicillin", "Alexander Fleming discovered penicillin in 1928."),
    ("Mount Fuji", "The highest mountain in Japan is an active stratovolcano."),
]


def _tiny_bert_config(**extra):
    return dict(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
        **extra,
    )


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model("minilm"))


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory, tokenizer):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("plain")
    BertModel(BertConfig(**_tiny_bert_config())).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory, plain_model):
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("st")
    transformer = models.Transformer(str(plain_model), max_seq_length=64)
    modules = [transformer, models.Pooling(32, pooling_mode="cls"), models.Dense(32, 16), models.Normalize()]
    SentenceTransformer(modules=modules, prompts={"query": "query: ", "passage": "passage: "}).save(str(path))
    return path


@pytest.fixture(scope="module")
def dpr_pair(tmp_path_factory, tokenizer):
    from transformers import DPRConfig, DPRContextEncoder, DPRQuestionEncoder

    torch.manual_seed(2)
    root = tmp_path_factory.mktemp("dpr")
    config = DPRConfig(**_tiny_bert_config())
    for name, cls in (("ctx", DPRContextEncoder), ("question", DPRQuestionEncoder)):
        model = cls(config)
        model.config.architectures = [cls.__name__]
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root / "question", root / "ctx"


def test_sentence_transformers_folder_matches_sentence_transformers(st_folder):
    from sentence_transformers import SentenceTransformer

    encoder = TextEncoder.from_pretrained(str(st_folder), device="cpu", precision="fp32")
    reference = SentenceTransformer(str(st_folder), device="cpu")
    assert encoder.kind == "sentence-transformers" and encoder.dim == 16 and encoder.pooling == "cls"
    assert (encoder.query_prefix, encoder.passage_prefix) == ("query: ", "passage: ")
    queries = encoder.encode_queries(QUESTIONS)
    assert queries.shape == (2, 16)
    assert np.allclose(queries, reference.encode(QUESTIONS, prompt_name="query"), atol=1e-5)
    texts = ["a passage about Fleming", "another about Fuji"]
    assert np.allclose(encoder.encode_passages(texts), reference.encode(texts, prompt_name="passage"), atol=1e-5)
    assert not np.allclose(encoder.encode(texts), encoder.encode_passages(texts))  # the prefix matters


def test_prefixes_from_settings_override_the_folder(st_folder):
    encoder = TextEncoder.from_pretrained(str(st_folder), device="cpu", precision="fp32", query_prefix="")
    plain = encoder.encode(QUESTIONS)
    assert np.allclose(encoder.encode_queries(QUESTIONS), plain)


def test_dpr_encoders_load_with_their_classes_and_read_title_text_pairs(dpr_pair, tokenizer):
    from transformers import DPRContextEncoder, DPRQuestionEncoder

    question_path, ctx_path = dpr_pair
    ctx = TextEncoder.from_pretrained(str(ctx_path), device="cpu", precision="fp32")
    question = TextEncoder.from_pretrained(str(question_path), device="cpu", precision="fp32")
    assert isinstance(ctx.model, DPRContextEncoder) and isinstance(question.model, DPRQuestionEncoder)
    assert (ctx.kind, ctx.similarity, ctx.pooling) == ("dpr", "dot", "cls")
    reference = DPRContextEncoder.from_pretrained(str(ctx_path)).eval()
    with torch.no_grad():
        batch = tokenizer([t for t, _ in PASSAGES], [x for _, x in PASSAGES], padding=True, return_tensors="pt")
        expected = reference(**batch).pooler_output.numpy()
    assert np.allclose(ctx.encode_passages(PASSAGES), expected, atol=1e-5)  # the saved weights, not random ones
    assert not np.allclose(np.linalg.norm(expected, axis=1), 1.0)  # dot product: no normalisation


def test_plain_model_pooling_and_similarity(plain_model, tokenizer):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(plain_model)).eval()
    with torch.no_grad():
        hidden = model(**tokenizer(QUESTIONS[:1], return_tensors="pt")).last_hidden_state[0]
    cls_dot = TextEncoder.from_pretrained(
        str(plain_model), device="cpu", precision="fp32", pooling="cls", similarity="dot"
    )
    assert np.allclose(cls_dot.encode(QUESTIONS[:1])[0], hidden[0].numpy(), atol=1e-5)
    mean_cos = TextEncoder.from_pretrained(str(plain_model), device="cpu", precision="fp32")
    mean = hidden.mean(0).numpy()
    assert np.allclose(mean_cos.encode(QUESTIONS[:1])[0], mean / np.linalg.norm(mean), atol=1e-5)
    with pytest.raises(OdqaError, match="pooling must be one of"):
        TextEncoder.from_pretrained(str(plain_model), pooling="max")


def test_index_with_a_dpr_pair_records_and_uses_the_question_encoder(dpr_pair, st_folder, tmp_path):
    from odqa.indexes.folder import FolderIndex
    from odqa.indexing import IndexSpec, build_index

    question_path, ctx_path = dpr_pair
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(PASSAGES))
    )
    out = tmp_path / "index"
    build_index(
        IndexSpec(
            corpus=str(corpus),
            out=str(out),
            backends=["dense"],
            encoder=str(ctx_path),
            query_encoder=str(question_path),
            device="cpu",
        )
    )
    manifest = json.loads((out / "dense" / "manifest.json").read_text())
    assert manifest["encoder"] == str(ctx_path) and manifest["params"]["query_encoder"] == str(question_path)
    assert manifest["params"]["encoder_settings"]["similarity"] == "dot"
    bundle = FolderIndex.open(out)
    dense = built_retriever(bundle, "dense", device="cpu")
    assert dense.encoder.name == str(question_path) and dense.encoder.kind == "dpr"
    hits = dense.search(QUESTIONS, 2)
    expected = (
        dense.encoder.encode(QUESTIONS)
        @ np.asarray(TextEncoder.from_pretrained(str(ctx_path), device="cpu").encode_passages(PASSAGES)).T
    )
    assert np.allclose([h.score for h in hits[0]], sorted(expected[0], reverse=True), atol=1e-2)
    # any question encoder of the same dimension may be named as such; as --encoder it must be the index's
    assert built_retriever(bundle, "dense", query_encoder=str(ctx_path), device="cpu").encoder.name == str(ctx_path)
    with pytest.raises(IndexMismatchError):
        built_retriever(bundle, "dense", encoder=str(question_path), device="cpu")
    with pytest.raises(IndexMismatchError, match="16-d"):
        built_retriever(bundle, "dense", query_encoder=str(st_folder), device="cpu")
