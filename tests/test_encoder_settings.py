"""One shape for a text encoder (odqa.core.text_encoding.EncoderSettings) and its one loader; one encoding plan per
index build; one guard refusing vectors made by another encoder than the one searching them."""

import json

import pytest

import odqa.indexing
from odqa.core.encoder_loading import load_text_encoder
from odqa.core.errors import IndexMismatchError
from odqa.core.runtime import InferenceSettings
from odqa.core.text_encoding import EncoderSettings, check_vectors_encoder
from odqa.core.types import EncoderRecord
from odqa.indexes.folder import FolderIndex
from odqa.indexes.manifest import Manifest
from odqa.indexing import IndexSpec, build_index
from odqa.retriever.settings import RetrievalConfig
from tests.memory_backend import MemoryIndex
from tests.retrievers import built_retriever

DOCS = [{"id": str(i), "title": f"Topic {i}", "text": f"Passage {i} is about topic {i} alone."} for i in range(5)]


def test_the_guard_compares_the_dimension_first_then_the_names():
    fix = "rebuild it"
    with pytest.raises(IndexMismatchError, match=r"^X holds 384-d vectors from encoder 'a', but encoder 'b' gives 768"):
        check_vectors_encoder("X", ("a", 384), ("b", 768), fix)  # both differ: the dimension is named
    with pytest.raises(IndexMismatchError, match=r"^X was encoded with 'a', not 'b'; rebuild it$"):
        check_vectors_encoder("X", ("a", 384), ("b", 384), fix)
    check_vectors_encoder("X", ("Models/A/", 384), ("models/a", 384), fix)  # one model, named two ways
    check_vectors_encoder("X", ("a", 384), ("b", 384), fix, compare_names=False)  # a question encoder apart
    with pytest.raises(IndexMismatchError, match="768-d"):
        check_vectors_encoder("X", ("a", 384), ("b", 768), fix, compare_names=False)
    check_vectors_encoder("X", ("", 0), ("b", 768), fix)  # nothing recorded: nothing to compare


def test_an_index_manifest_refuses_another_encoder_through_the_guard(tmp_path):
    Manifest(kind="faiss", corpus_fingerprint="abc", encoder="minilm", dim=384).save(tmp_path)
    manifest = Manifest.load(tmp_path, kind="faiss")
    with pytest.raises(IndexMismatchError, match=r"^idx was encoded with 'minilm', not 'mpnet'; query with the"):
        manifest.check_encoder("mpnet", 384, "idx")
    manifest.check_encoder("minilm/", 384, "idx")


def test_a_store_whose_vectors_another_encoder_made_is_refused_when_searched_with_one(tmp_path):
    """Vectors recorded as another encoder's, searched with `retrieval.encoder`: refused in one line by the name,
    and by the dimension where that differs too; the recorded encoder itself searches them."""
    build_index(IndexSpec(corpus=_corpus(tmp_path), out=str(tmp_path / "idx"), backends=["dense"], kb=False))
    folder = FolderIndex.open(tmp_path / "idx")
    record = folder.info().encoder
    assert record is not None and record.dim == 384
    vectors = folder.vector_index().verified_embeddings()
    held = folder.passages(range(len(folder)))
    elsewhere = EncoderRecord(name="another-encoder", dim=384, settings=record.settings)
    store = MemoryIndex("elsewhere", held, vectors, encoder=elsewhere)
    with pytest.raises(IndexMismatchError) as refused:
        built_retriever(store, "dense", device="cpu", encoder=record.name)
    assert str(refused.value).startswith("memory index 'elsewhere' was encoded with 'another-encoder', not ")
    assert "\n" not in str(refused.value)
    wider = MemoryIndex("wider", held, vectors, encoder=EncoderRecord(name=record.name, dim=768))
    with pytest.raises(IndexMismatchError, match=r"holds 768-d vectors from encoder .* gives 384-d vectors"):
        built_retriever(wider, "dense", device="cpu", encoder=record.name)
    hits = built_retriever(folder, "dense", device="cpu", encoder=record.name).search(["topic 3"], 1)
    assert hits[0][0].passage.title == "Topic 3"


def test_question_encoder_settings_keep_the_recorded_ones_unless_named():
    record = EncoderRecord(
        name="passages", query_encoder="questions", max_length=128, settings={"pooling": "cls", "similarity": "dot"}
    )
    inference = InferenceSettings("fp32", "torch")
    recorded = RetrievalConfig().question_encoder_settings("questions", record, inference, "cpu")
    assert recorded == EncoderSettings(
        "questions", max_length=128, pooling="cls", similarity="dot", precision="fp32", runtime="torch", device="cpu"
    )
    other = RetrievalConfig().question_encoder_settings("other-model", record, inference, None)
    assert (other.pooling, other.similarity) == (None, "dot")  # another model pools its own way
    named = RetrievalConfig(pooling="mean", query_prefix="q: ").question_encoder_settings(
        "other", record, inference, None
    )
    assert (named.pooling, named.query_prefix) == ("mean", "q: ")


def test_an_index_spec_asks_for_a_passage_encoder_with_the_model_s_own_values_where_it_names_none():
    settings = IndexSpec(corpus="c", out="o", encoder="minilm", similarity="dot", device="cpu").encoder_settings()
    assert settings == EncoderSettings("minilm", similarity="dot", device="cpu", passages=True)


def test_one_load_resolves_the_model_name_once(monkeypatch):
    import odqa.core.encoder
    import odqa.core.encoder_loading
    import odqa.core.models
    import odqa.core.text_encoding

    resolved = []
    real = odqa.core.models.resolve_model

    def counted(name, **options):
        resolved.append(name)
        return real(name, **options)

    for module in (odqa.core.models, odqa.core.encoder_loading, odqa.core.encoder, odqa.core.text_encoding):
        monkeypatch.setattr(module, "resolve_model", counted)
    for runtime in ("torch", "onnx"):  # the torch encoder, and the graph alone where it was built
        resolved.clear()
        encoder = load_text_encoder(EncoderSettings("minilm", precision="fp32", runtime=runtime, device="cpu"))
        encoder.encode_queries(["warm"])
        assert resolved == ["minilm"], runtime


def test_an_index_build_decides_its_encoding_plan_once_and_records_it(tmp_path, monkeypatch):
    plans = []
    decide = odqa.indexing.encoding_plan

    def recorded(*args):
        plans.append(decide(*args))
        return plans[-1]

    monkeypatch.setattr(odqa.indexing, "encoding_plan", recorded)
    out = tmp_path / "idx"
    build_index(IndexSpec(corpus=_corpus(tmp_path), out=str(out), backends=["bm25", "dense"], kb=False, device="cpu"))
    assert len(plans) == 1
    plan = plans[0]
    dense = json.loads((out / "dense" / "manifest.json").read_text())
    bundle = json.loads((out / "manifest.json").read_text())
    assert dense["encoder"] == bundle["encoder"] == plan.passages.name
    assert dense["params"]["passage_precision"] == plan.precision
    assert dense["params"]["query_encoder"] == bundle["params"]["query_encoder"] == plan.searched_with
    assert dense["params"]["max_length"] == plan.passages.max_length


def _corpus(tmp_path) -> str:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in DOCS))
    return str(path)
