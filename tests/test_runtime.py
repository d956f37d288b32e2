"""The inference plan (`precision` x `runtime`) and the cached ONNX Runtime graphs, on tiny random models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.core.runtime import InferenceSettings, plan_inference
from odqa.core.types import Passage
from tests.conftest import REPO_ROOT
from tests.retrievers import built_retriever

pytest.importorskip("onnxruntime")

PASSAGES = [
    Passage("a", "", "The Eiffel Tower was built in 1889 by Gustave Eiffel in Paris."),
    Passage("b", "", "Rome is the capital of Italy and lies on the Tiber."),
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tests.reader_fixtures import save_tiny_qa

    return save_tiny_qa(tmp_path_factory.mktemp("tiny-reader"))


@pytest.fixture(autouse=True)
def _cpu_with_native_int8(monkeypatch):
    """The CPUs with native bf16 made so far have native int8 dot products too (VNNI, AMX): the tests start on one,
    whatever CPU runs them; the one test of a bf16 CPU without them says so."""
    _machine(monkeypatch, fast_int8=True)


def _machine(
    monkeypatch, *, fast_bf16: bool | None = None, onnx: bool | None = None, fast_int8: bool | None = None
) -> None:
    """Make the CPU checks (and onnxruntime's presence) answer as on the machine described; None leaves one as is."""
    import odqa.core.device
    import odqa.core.runtime

    for module, name, value in (
        (odqa.core.device, "cpu_has_fast_bf16", fast_bf16),
        (odqa.core.device, "cpu_has_fast_int8", fast_int8),
        (odqa.core.runtime, "onnx_runtime_available", onnx),
    ):
        if value is not None:
            monkeypatch.setattr(module, name, lambda value=value: value)


@pytest.mark.parametrize("native_bf16", [True, False])
def test_auto_runs_the_int8_measured_models_in_int8_on_every_cpu_by_rule_not_by_timing(monkeypatch, native_bf16):
    """The issue-77 rule: a model whose int8 cost is measured within `auto`'s band runs ONNX Runtime int8 on CPUs
    with native bf16 (AMX, AVX512-BF16) and without (AVX2) alike; nothing is timed, so a busy machine cannot turn
    it, and every process (ask, shell, server, Python) plans the same."""
    import odqa.core.runtime

    _machine(monkeypatch, fast_bf16=native_bf16, onnx=True)
    assert not hasattr(odqa.core.runtime, "time_bf16_and_int8")  # no timing left to disagree between processes
    plan = plan_inference("cpu", InferenceSettings(), auto_int8=True)
    assert plan.label == "onnx int8" and "int8 measured within auto's band" in plan.reason
    assert plan == plan_inference("cpu", InferenceSettings(), auto_int8=True, question_time=True)
    assert plan_inference("cpu", InferenceSettings(runtime="onnx"), auto_int8=True).label == "onnx int8"
    assert plan_inference("cpu", InferenceSettings("bf16" if native_bf16 else "fp32"), auto_int8=True).label == (
        "torch bf16" if native_bf16 else "torch fp32"
    )
    torch_asked = plan_inference("cpu", InferenceSettings(runtime="torch"), auto_int8=True)
    assert torch_asked.label == ("torch bf16" if native_bf16 else "torch fp32")
    assert "runtime torch asked for" in torch_asked.reason or not native_bf16
    assert set(InferenceSettings.__dataclass_fields__) == {"precision", "runtime"}  # nothing of the process


def test_int8_over_native_bf16_needs_native_int8_dot_products(monkeypatch):
    """A CPU with native bf16 but no VNNI or AMX int8 would run int8 on AVX2's kernels, slower than its bf16 there
    (bench/results/speed-avx512-bf16.md's stand-in): bf16, by the flags; without native bf16 int8 stays."""
    from odqa.core.device import flags_have_fast_int8

    zen4 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx2 avx512f avx512_vnni avx512_bf16\n"
    assert flags_have_fast_int8(zen4) and flags_have_fast_int8(zen4.replace("avx512_vnni", "amx_int8"))
    assert not flags_have_fast_int8(zen4.replace(" avx512_vnni", ""))
    _machine(monkeypatch, fast_bf16=True, fast_int8=False, onnx=True)
    plan = plan_inference("cpu", InferenceSettings(), auto_int8=True)
    assert plan.label == "torch bf16" and "no native int8" in plan.reason
    _machine(monkeypatch, fast_bf16=False)
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True).label == "onnx int8"


def test_a_reader_runs_int8_under_auto_only_where_its_folder_records_int8_measured(monkeypatch, tmp_path):
    """A reader's `"auto_int8": true` (reader_config.json) is its int8 cost measured within 1 F1: the shipped
    English reader has it, reader-multilingual does not (1.4 F1 measured), nor does a checkpoint that records
    nothing; those take the next path (bf16 with native bf16, else onnx fp32)."""
    import json

    from odqa.reader.model import Reader
    from tests.reader_fixtures import save_tiny_qa

    def recorded(name: str) -> bool:
        return json.loads(Path(REPO_ROOT / "models" / name / "reader_config.json").read_text())["auto_int8"]

    assert recorded("reader") is True and recorded("reader-multilingual") is False
    folder = save_tiny_qa(tmp_path / "reader")
    for native_bf16, unmeasured in ((True, "torch bf16"), (False, "onnx fp32")):
        _machine(monkeypatch, fast_bf16=native_bf16, onnx=True)
        (folder / "reader_config.json").unlink(missing_ok=True)
        reader = Reader.from_pretrained(str(folder), device="cpu")
        assert reader.plan.label == unmeasured and "int8 not measured" in reader.plan.reason
        (folder / "reader_config.json").write_text(json.dumps({"auto_int8": True}))
        assert Reader.from_pretrained(str(folder), device="cpu").plan.label == "onnx int8"


def test_auto_picks_bf16_with_native_bf16_else_onnx_for_models_without_int8(monkeypatch):
    _machine(monkeypatch, fast_bf16=True)
    assert plan_inference("cpu", InferenceSettings()).label == "torch bf16"
    assert plan_inference("cpu", InferenceSettings(runtime="onnx")).label == "onnx fp32"
    _machine(monkeypatch, fast_bf16=False)
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True).label == "onnx int8"
    assert plan_inference("cpu", InferenceSettings(runtime="torch"), auto_int8=True).label == "torch fp32"
    assert plan_inference("cpu", InferenceSettings("int8")).label == "onnx int8"
    assert plan_inference("cpu", InferenceSettings("int8", "torch")).label == "torch int8"
    assert plan_inference("cpu", InferenceSettings("fp32")).label == "torch fp32"
    assert plan_inference("cuda", InferenceSettings()).label == "torch fp16"


def test_auto_never_picks_int8_for_models_whose_int8_quality_is_unmeasured(monkeypatch):
    """Only the reader's int8 F1 loss was measured: under `auto` on a CPU without native bf16 the encoders and the
    linker run fp32 on onnx (torch's numbers; torch without onnxruntime); int8 asked for explicitly still runs."""
    _machine(monkeypatch, fast_bf16=False)
    assert plan_inference("cpu", InferenceSettings()).label == "onnx fp32"
    assert plan_inference("cpu", InferenceSettings(runtime="onnx")).label == "onnx fp32"
    assert plan_inference("cpu", InferenceSettings(runtime="torch")).label == "torch fp32"
    assert plan_inference("cpu", InferenceSettings("int8")).label == "onnx int8"
    assert plan_inference("cpu", InferenceSettings("int8", "torch")).label == "torch int8"
    _machine(monkeypatch, fast_bf16=True)
    assert plan_inference("cpu", InferenceSettings()).label == "torch bf16"
    _machine(monkeypatch, fast_bf16=False, onnx=False)
    assert plan_inference("cpu", InferenceSettings()).label == "torch fp32"
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True).label == "torch fp32"
    _machine(monkeypatch, fast_bf16=True, onnx=False)
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True).label == "torch bf16"


def test_questions_run_onnx_fp32_under_auto_even_where_bulk_work_runs_bf16(monkeypatch):
    """With native bf16, `auto` reads questions (linker, question encoder) on onnx fp32 (a cached graph needs no
    torch import) and keeps bf16 for bulk work; the int8-measured models, torch asked for, or no onnxruntime
    keep their own rules."""
    _machine(monkeypatch, fast_bf16=True, onnx=True)
    assert plan_inference("cpu", InferenceSettings(), question_time=True).label == "onnx fp32"
    assert plan_inference("cpu", InferenceSettings()).label == "torch bf16"
    assert plan_inference("cpu", InferenceSettings(runtime="torch"), question_time=True).label == "torch bf16"
    assert plan_inference("cpu", InferenceSettings("bf16"), question_time=True).label == "torch bf16"
    assert plan_inference("cpu", InferenceSettings("int8"), question_time=True).label == "onnx int8"
    assert plan_inference("cuda", InferenceSettings(), question_time=True).label == "torch fp16"
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True, question_time=True).label == "onnx int8"
    _machine(monkeypatch, fast_bf16=False)
    assert plan_inference("cpu", InferenceSettings(), question_time=True).label == "onnx fp32"
    assert plan_inference("cpu", InferenceSettings(), auto_int8=True, question_time=True).label == "onnx int8"
    _machine(monkeypatch, fast_bf16=True, onnx=False)
    assert plan_inference("cpu", InferenceSettings(), question_time=True).label == "torch bf16"


def test_an_encoder_reads_questions_and_passages_on_their_own_plans(monkeypatch, tmp_path, home, caplog):
    """One encoder, native bf16: encode_queries on onnx fp32, encode_passages (an index build) in bf16."""
    from odqa.core.encoder import TextEncoder
    from odqa.linker.linker import Linker
    from tests.reader_fixtures import save_tiny_qa

    _machine(monkeypatch, fast_bf16=True, onnx=True)
    encoder = TextEncoder.from_pretrained(str(save_tiny_qa(tmp_path / "enc", qa=False)), device="cpu")
    caplog.set_level("INFO", logger="odqa")
    encoder.encode_queries(["who built the eiffel tower?"])
    assert "runs onnx fp32" in caplog.text
    encoder.encode_passages([p.text for p in PASSAGES])
    assert "runs torch bf16" in caplog.text
    linker = Linker.__new__(Linker)  # plan reads only the device, precision and runtime
    linker.device, linker.precision, linker.runtime = "cpu", "auto", "auto"
    assert linker.plan.label == "onnx fp32"


def test_components_apply_the_auto_rule(monkeypatch, tiny_dir, tmp_path):
    """On a CPU without native bf16, `auto`: a reader recording its int8 cost measured onnx int8; text encoder and
    linker onnx fp32 (int8 asked for explicitly still runs)."""
    from odqa.core.encoder import TextEncoder
    from odqa.linker.linker import Linker
    from odqa.reader.model import Reader
    from tests.reader_fixtures import save_tiny_qa

    _machine(monkeypatch, fast_bf16=False, onnx=True)
    assert Reader.from_pretrained(str(tiny_dir), device="cpu", auto_int8=True).plan.label == "onnx int8"
    encoder = TextEncoder.from_pretrained(str(save_tiny_qa(tmp_path / "enc", qa=False)), device="cpu")
    assert encoder.plan().label == "onnx fp32"
    assert encoder.plan("int8").label == "onnx int8"
    linker = Linker.__new__(Linker)  # plan reads only the device, precision and runtime
    linker.device, linker.precision, linker.runtime = "cpu", "auto", "auto"
    assert linker.plan.label == "onnx fp32"
    linker.precision = "int8"
    assert linker.plan.label == "onnx int8"


def test_an_encoder_marked_int8_measured_runs_int8_under_auto(monkeypatch, tmp_path):
    """`"auto_int8": true` in an encoder's retriever_info.json (its int8 recall measured, as for the shipped fast
    passage encoder) lets `auto` pick onnx int8, on CPUs with native bf16 too."""
    import json

    from odqa.core.encoder import TextEncoder
    from odqa.core.text_encoding import int8_measured, paired_query_encoder
    from tests.reader_fixtures import save_tiny_qa

    _machine(monkeypatch, fast_bf16=False, onnx=True)
    folder = save_tiny_qa(tmp_path / "enc", qa=False)
    assert not int8_measured(str(folder))
    (folder / "retriever_info.json").write_text(json.dumps({"query_encoder": "retriever", "auto_int8": True}))
    encoder = TextEncoder.from_pretrained(str(folder), device="cpu")
    assert encoder.plan().label == "onnx int8"
    assert encoder.plan("fp32").label == "torch fp32"
    _machine(monkeypatch, fast_bf16=True)
    assert encoder.plan().label == "onnx int8"
    assert int8_measured("fast-passage-encoder") and paired_query_encoder("fast-passage-encoder") == "retriever"


@pytest.mark.parametrize(
    "device,precision,runtime",
    [
        ("cpu", "fp8", "auto"),
        ("cpu", "auto", "tensorrt"),
        ("cpu", "fp16", "auto"),
        ("cpu", "bf16", "onnx"),
        ("cuda", "int8", "auto"),
        ("cuda", "auto", "onnx"),
    ],
)
def test_impossible_plans_are_refused_with_a_clear_error(device, precision, runtime):
    with pytest.raises(OdqaError):
        plan_inference(device, InferenceSettings(precision, runtime))


def test_config_refuses_an_unknown_precision():
    from odqa.config import OdqaConfig

    assert OdqaConfig.load(None, {"precision": "int8", "runtime": "onnx"}).precision == "int8"
    with pytest.raises(OdqaError, match="precision"):
        OdqaConfig.load(None, {"precision": "int4"})


def _logits(reader, precision, runtime):
    reader.settings.precision, reader.settings.runtime = precision, runtime
    w, starts, ends = reader.logits(["Who built the Eiffel Tower?"] * 2, [p.text for p in PASSAGES])
    return np.concatenate(starts), np.concatenate(ends)


def test_onnx_reader_matches_torch_and_its_graph_is_cached_by_weights(tiny_dir, home, caplog):
    import logging

    from odqa.reader.model import Reader

    caplog.set_level("INFO", logger="odqa")
    root_handlers = logging.getLogger().handlers[:]

    reader = Reader.from_pretrained(str(tiny_dir), device="cpu")
    ref_start, ref_end = _logits(reader, "fp32", "torch")
    start, end = _logits(reader, "fp32", "onnx")
    np.testing.assert_allclose(start, ref_start, atol=1e-4)
    np.testing.assert_allclose(end, ref_end, atol=1e-4)
    q_start, _ = _logits(reader, "int8", "onnx")
    assert np.corrcoef(q_start, ref_start)[0, 1] > 0.9  # quantised, yet the same function
    assert reader.read("Who built the Eiffel Tower?", PASSAGES, no_answer_threshold=None)
    graphs = sorted(home.glob("onnx/reader-*"))
    assert len(graphs) == 1 and (graphs[0] / "model.onnx").is_file() and (graphs[0] / "model.int8.onnx").is_file()
    assert "building" in caplog.text
    assert logging.getLogger().handlers == root_handlers  # the int8 export left no root handler behind
    caplog.clear()

    again = Reader.from_pretrained(str(tiny_dir), device="cpu", precision="int8", runtime="onnx")
    again.read("Who built the Eiffel Tower?", PASSAGES)
    assert "building" not in caplog.text  # same weights: the cached graph
    assert sorted(home.glob("onnx/reader-*")) == graphs

    with torch.no_grad():  # weights changed in place (as an optimiser step does): a new graph, new logits
        again.model.qa_outputs.bias.add_(1.0)
    new_start, _ = _logits(again, "fp32", "onnx")
    assert len(sorted(home.glob("onnx/reader-*"))) == 2
    np.testing.assert_allclose(new_start, ref_start + 1.0, atol=1e-4)
    assert not list(home.glob("onnx/*.*"))  # no temporary build folder left behind


def test_onnx_encoder_vectors_match_torch(tmp_path, home):
    from odqa.core.encoder import TextEncoder
    from tests.reader_fixtures import save_tiny_qa

    path = save_tiny_qa(tmp_path / "tiny-encoder", qa=False)
    encoder = TextEncoder.from_pretrained(str(path), device="cpu", precision="fp32", runtime="torch")
    texts = [p.text for p in PASSAGES] + ["a short one"]
    ref = encoder.encode(texts)
    encoder.runtime = "onnx"
    np.testing.assert_allclose(encoder.encode(texts), ref, atol=1e-4)
    assert encoder.plan().label == "onnx fp32"
    quantised = encoder.encode(texts, precision="int8")
    np.testing.assert_allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-4)
    assert (np.sum(quantised * ref, axis=1) > 0.9).all()


def test_a_reader_loaded_from_a_folder_names_its_graph_by_the_files_digest(tiny_dir, home, monkeypatch):
    import odqa.core.runtime as runtime
    from odqa.reader.model import Reader

    reader = Reader.from_pretrained(str(tiny_dir), device="cpu", precision="int8", runtime="onnx")

    def no_hashing(module):
        raise AssertionError("the live weights were hashed")

    monkeypatch.setattr(runtime, "weights_fingerprint", no_hashing)
    assert reader.read("Who built the Eiffel Tower?", PASSAGES)  # unchanged weights: the files name them
    with torch.no_grad():
        reader.model.qa_outputs.bias.add_(1.0)
    with pytest.raises(AssertionError, match="live weights were hashed"):  # changed: the files no longer do
        reader.read("Who built the Eiffel Tower?", PASSAGES)


def test_int8_graph_is_made_only_when_asked_for_and_then_from_the_cached_fp32_graph(tiny_dir, home, monkeypatch):
    import odqa.core.runtime as runtime
    from odqa.reader.model import Reader

    reader = Reader.from_pretrained(str(tiny_dir), device="cpu")
    ref_start, _ = _logits(reader, "fp32", "onnx")
    (graph,) = sorted(home.glob("onnx/reader-*"))
    assert (graph / "model.onnx").is_file() and not (graph / "model.int8.onnx").exists()

    exports = []
    monkeypatch.setattr(runtime, "_build", lambda *a, **k: exports.append(a))  # int8 must come from the cache
    q_start, _ = _logits(reader, "int8", "onnx")
    assert not exports and (graph / "model.int8.onnx").is_file()
    assert np.corrcoef(q_start, ref_start)[0, 1] > 0.9
    assert sorted(p.name for p in graph.iterdir()) == ["model.int8.onnx", "model.onnx"]  # no temporary file left


def test_a_large_cpu_build_with_the_default_encoder_is_told_of_the_fast_passage_encoder(capsys):
    from odqa.core.runtime import InferencePlan
    from odqa.indexing import LARGE_BUILD, _suggest_fast_encoder

    class Planned:
        def __init__(self, precision, device_type="cpu", name="retriever"):
            self.precision, self.device_type, self.name = precision, device_type, name

        def plan(self):
            return InferencePlan("onnx", self.precision)

    for precision in ("fp32", "int8"):  # CPUs without native bf16
        _suggest_fast_encoder(Planned(precision), LARGE_BUILD)
        assert "--encoder fast-passage-encoder" in capsys.readouterr().err
    for encoder, passages in [
        (Planned("fp32"), LARGE_BUILD - 1),
        (Planned("bf16"), LARGE_BUILD),
        (Planned("fp32", device_type="cuda"), LARGE_BUILD),
        (Planned("fp32", name="minilm"), LARGE_BUILD),
    ]:
        _suggest_fast_encoder(encoder, passages)
        assert capsys.readouterr().err == ""


def test_auto_encodes_a_large_cpu_build_with_the_fast_passage_encoder_where_bf16_is_not_native(monkeypatch, capsys):
    from odqa.indexing import LARGE_BUILD, IndexSpec, asked_plan, auto_passage_encoder

    _machine(monkeypatch, onnx=True, fast_bf16=False)
    plan = asked_plan(IndexSpec(corpus="c", out="o", device="cpu", query_encoder="retriever"))
    fast = auto_passage_encoder(plan, LARGE_BUILD)
    assert fast.passages.name == "fast-passage-encoder" and fast.query_encoder == "retriever"  # the teacher's questions
    assert fast.precision == "int8" and fast.passages.max_length == plan.passages.max_length
    err = capsys.readouterr().err
    assert "auto` encodes them with fast-passage-encoder" in err and "--precision int8 keeps retriever" in err
    # an explicit precision, a small build, another encoder or a GPU keep the encoder asked for, silently
    for kept, passages in [
        (asked_plan(IndexSpec(corpus="c", out="o", device="cpu", precision="int8")), LARGE_BUILD),
        (plan, LARGE_BUILD - 1),
        (asked_plan(IndexSpec(corpus="c", out="o", device="cpu", encoder="minilm")), LARGE_BUILD),
        (asked_plan(IndexSpec(corpus="c", out="o", device="cuda")), LARGE_BUILD),
    ]:
        assert auto_passage_encoder(kept, passages) is kept
    _machine(monkeypatch, fast_bf16=True)  # native bf16 too: the passages run int8 there, as the student's do
    plan = asked_plan(IndexSpec(corpus="c", out="o", device="cpu", query_encoder="retriever"))
    assert auto_passage_encoder(plan, LARGE_BUILD).passages.name == "fast-passage-encoder"
    _machine(monkeypatch, fast_bf16=True, onnx=False)  # no onnxruntime: bf16, fast enough for the 6-layer encoder
    plan = asked_plan(IndexSpec(corpus="c", out="o", device="cpu", query_encoder="retriever"))
    assert auto_passage_encoder(plan, LARGE_BUILD) is plan


def test_index_builds_encode_passages_in_int8_where_only_passage_int8_was_measured(monkeypatch):
    from odqa.core.encoder import TextEncoder
    from odqa.core.text_encoding import int8_measured
    from odqa.indexing import IndexSpec, asked_plan

    def precision(**spec) -> str:
        return asked_plan(IndexSpec(corpus="c", out="o", **spec)).precision

    _machine(monkeypatch, onnx=True, fast_bf16=False)
    # the shipped retriever: int8 measured for its passage vectors only
    assert int8_measured("retriever", passages=True) and not int8_measured("retriever")
    assert precision(device="cpu") == "int8"
    assert asked_plan(IndexSpec(corpus="c", out="o", device="cpu")).load_encoder().plan().precision == "int8"
    assert TextEncoder.from_pretrained("retriever", device="cpu").plan().precision == "fp32"  # its questions
    assert precision(device="cpu", precision="fp32") == "fp32"
    assert precision(device="cpu", encoder="minilm") == "fp32"
    assert precision(device="cuda") == "fp16"
    _machine(monkeypatch, fast_bf16=True)
    assert precision(device="cpu") == "int8"
    assert precision(device="cpu", encoder="minilm") == "bf16"


def test_a_large_auto_build_records_the_fast_passage_encoder_and_is_searched_with_the_teachers_questions(
    monkeypatch, tmp_path
):
    import json

    import odqa.indexing
    from odqa.indexes.folder import FolderIndex
    from odqa.indexing import IndexSpec, build_index

    _machine(monkeypatch, onnx=True, fast_bf16=False)
    monkeypatch.setattr(odqa.indexing, "LARGE_BUILD", 4)  # four passages stand for a large corpus
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": str(i), "title": t, "text": f"{t} is a subject of passage {i}."}) + "\n"
            for i, t in enumerate(["Rivers", "Volcanoes", "Opera", "Bridges", "Chemistry"])
        )
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "index"), backends=["dense"], device="cpu"))
    manifest = json.loads((tmp_path / "index" / "dense" / "manifest.json").read_text())
    assert manifest["encoder"] == "fast-passage-encoder" and manifest["params"]["query_encoder"] == "retriever"
    assert manifest["params"]["passage_precision"] == "int8"
    dense = built_retriever(FolderIndex.open(tmp_path / "index"), "dense", device="cpu")
    assert dense.encoder.name == "retriever"
    assert dense.search(["Which passage is about volcanoes?"], 1)[0][0].row == 1


def _tiny_sentence_transformer(tmp_path, *extra_modules, prompts=None):
    """A sentence-transformers folder around the tiny encoder: Transformer at the top, mean Pooling, Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer

    from tests.reader_fixtures import save_tiny_qa

    bert = save_tiny_qa(tmp_path / "tiny-bert", qa=False)
    transformer = Transformer(str(bert))
    modules = [transformer, Pooling(transformer.get_word_embedding_dimension(), "mean"), *extra_modules, Normalize()]
    st = SentenceTransformer(modules=modules, device="cpu", prompts=prompts or {})
    st.save(str(tmp_path / "tiny-st"))
    return tmp_path / "tiny-st"


def test_a_sentence_transformers_folder_is_searched_from_its_cached_graph_without_torch_modules(tmp_path, home):
    """The first load builds the graph under the folder's files digest; the next finds it by the files alone
    (no torch module built), with the folder's own prefixes, length and pooling, and the same vectors."""
    from odqa.core.encoder import TextEncoder
    from odqa.core.encoder_loading import load_text_encoder
    from odqa.core.text_encoding import EncoderSettings, OnnxTextEncoder

    folder = _tiny_sentence_transformer(tmp_path, prompts={"query": "query: ", "passage": "passage: "})
    torch_encoder = TextEncoder.from_pretrained(str(folder), device="cpu", precision="fp32", runtime="onnx")
    questions = ["Who built the Eiffel Tower?", "a short one"]
    ref_questions = torch_encoder.encode_queries(questions)
    ref_passages = torch_encoder.encode([p.text for p in PASSAGES])

    fast = load_text_encoder(EncoderSettings(str(folder), precision="fp32", runtime="onnx"))
    assert isinstance(fast, OnnxTextEncoder)
    assert (fast.query_prefix, fast.passage_prefix) == ("query: ", "passage: ")
    assert (fast.pooling, fast.similarity, fast.max_length) == ("mean", "cosine", torch_encoder.max_length)
    np.testing.assert_allclose(fast.encode_queries(questions), ref_questions, atol=1e-4)
    np.testing.assert_allclose(fast.encode([p.text for p in PASSAGES]), ref_passages, atol=1e-4)

    # a pooling the folder does not compute is refused as the torch path refuses it
    with pytest.raises(OdqaError, match="keeps its own pooling"):
        load_text_encoder(EncoderSettings(str(folder), precision="fp32", runtime="onnx", pooling="cls"))


def test_a_changed_module_configuration_does_not_reuse_the_graph(tmp_path, home):
    """The graph's name covers the module files that shape the vectors, not only the weights: mean pooling
    turned to [CLS] in 1_Pooling/config.json finds no graph, and the torch load builds the right one."""
    from odqa.core.encoder import TextEncoder
    from odqa.core.encoder_loading import load_text_encoder
    from odqa.core.text_encoding import EncoderSettings, OnnxTextEncoder

    folder = _tiny_sentence_transformer(tmp_path)
    TextEncoder.from_pretrained(str(folder), device="cpu", precision="fp32", runtime="onnx").encode(["warm"])
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    if "pooling_mode" in config:  # sentence-transformers 6
        config["pooling_mode"] = "cls"
    else:
        config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    fp32_onnx = EncoderSettings(str(folder), precision="fp32", runtime="onnx")
    assert not isinstance(load_text_encoder(fp32_onnx), OnnxTextEncoder)
    cls_encoder = TextEncoder.from_pretrained(str(folder), device="cpu", precision="fp32", runtime="onnx")
    assert cls_encoder.pooling == "cls"
    ref = cls_encoder.encode(["Who built the Eiffel Tower?"])
    fast = load_text_encoder(EncoderSettings(str(folder), precision="fp32", runtime="onnx"))
    assert isinstance(fast, OnnxTextEncoder) and fast.pooling == "cls"
    np.testing.assert_allclose(fast.encode(["Who built the Eiffel Tower?"]), ref, atol=1e-4)


def test_a_sentence_transformers_folder_with_other_modules_loads_with_torch(tmp_path, home):
    """A Dense layer between pooling and normalisation is not a layout the files describe to odqa: torch."""
    from sentence_transformers.models import Dense

    from odqa.core.encoder_loading import load_text_encoder
    from odqa.core.text_encoding import EncoderSettings, OnnxTextEncoder, sentence_transformers_layout

    folder = _tiny_sentence_transformer(tmp_path, Dense(32, 16))
    assert sentence_transformers_layout(folder) is None
    encoder = load_text_encoder(EncoderSettings(str(folder), precision="fp32", runtime="onnx"))
    assert not isinstance(encoder, OnnxTextEncoder)
    assert encoder.encode(["Who built the Eiffel Tower?"]).shape == (1, 16)


def test_building_a_graph_removes_the_least_recently_used_beyond_the_cache_budget(tiny_dir, home, monkeypatch):
    """Old graphs of weights no longer used go once the cache is over its budget, oldest first; a graph used
    recently (by this process or another) and the one just built stay."""
    import os
    import time

    import odqa.core.runtime as runtime
    from odqa.reader.model import Reader

    old = []
    for i, age_days in enumerate((30, 20, 10)):
        folder = home / "onnx" / f"reader-old{i}"
        folder.mkdir(parents=True)
        (folder / "model.onnx").write_bytes(b"x" * 1000)
        when = time.time() - age_days * 86400
        os.utime(folder, (when, when))
        old.append(folder)
    recent = home / "onnx" / "encoder-recent"
    recent.mkdir()
    (recent / "model.onnx").write_bytes(b"x" * 1000)
    leftover = home / "onnx" / "reader-old0.tmp1234"  # another process's build in progress
    leftover.mkdir()
    monkeypatch.setattr(runtime, "ONNX_CACHE_BUDGET_BYTES", 2500)

    reader = Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32", runtime="onnx")
    assert reader.read("Who built the Eiffel Tower?", PASSAGES)
    built = [f for f in (home / "onnx").iterdir() if f.name.startswith("reader-") and f not in old + [leftover]]
    assert len(built) == 1 and (built[0] / "model.onnx").is_file()
    assert recent.is_dir() and leftover.is_dir()  # used within the grace period; not a graph folder
    assert [f.is_dir() for f in old] == [False, False, False]  # the new graph alone is over 2,500 bytes

    monkeypatch.setattr(runtime, "ONNX_CACHE_BUDGET_BYTES", 1 << 40)  # within budget: nothing goes
    before = sorted((home / "onnx").iterdir())
    assert runtime.prune_graph_cache(keep=built[0]) == []
    assert sorted((home / "onnx").iterdir()) == before


def test_a_cached_graph_in_use_is_marked_recently_used(tiny_dir, home):
    import os
    import time

    from odqa.reader.model import Reader

    Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32", runtime="onnx").read(
        "Who built the Eiffel Tower?", PASSAGES
    )
    (graph,) = [f for f in (home / "onnx").iterdir() if f.name.startswith("reader-")]
    when = time.time() - 90 * 86400
    os.utime(graph, (when, when))
    Reader.from_pretrained(str(tiny_dir), device="cpu", precision="fp32", runtime="onnx").read(
        "Who built the Eiffel Tower?", PASSAGES
    )
    assert time.time() - graph.stat().st_mtime < 600
