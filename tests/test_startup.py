"""A fresh `odqa ask` answers from the cached ONNX graphs alone (no torch module built, torch never imported),
with the answers the torch modules' path gives (odqa.core.runtime.cached_graph)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from odqa.config import OdqaConfig
from odqa.corpus.questions import load_questions
from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path, demo_kb_path
from odqa.pipeline import Pipeline
from tests.answer_checks import assert_answer_read_from
from tests.conftest import REPO_ROOT

pytest.importorskip("onnxruntime")

# the plan `auto` gives on a CPU without native bf16, where the cached graphs are what answers
ONNX_PLAN = {"precision": "auto", "runtime": "onnx"}


def _pipeline() -> Pipeline:
    return Pipeline(OdqaConfig.load(None, ONNX_PLAN), default_index=demo_index_path, default_kb=demo_kb_path)


def _answers(pipeline: Pipeline, questions: list[str]) -> list[tuple[str, float, list[str]]]:
    return [
        (
            r.answers[0].text if r.answers else "",
            r.answers[0].score if r.answers else 0.0,
            [m.entity.title for m in r.mentions],
        )
        for r in pipeline.ask_batch(questions)
    ]


@pytest.fixture(scope="module")
def questions() -> list[str]:
    return [item.question for item in load_questions(DEMO_QUESTIONS, limit=6)]


@pytest.fixture(scope="module")
def module_way(questions):
    """Answers of a pipeline whose components build their torch modules first (and export the graphs from them
    when missing): the path of every start before the cached graphs could answer alone."""
    import odqa.core.encoder_loading
    import odqa.linker.linker
    import odqa.reader.model

    with pytest.MonkeyPatch.context() as patch:
        for component in (odqa.reader.model, odqa.linker.linker, odqa.core.encoder_loading):
            patch.setattr(component, "cached_graph", lambda *args, **kwargs: None)
        pipeline = _pipeline()
        answers = _answers(pipeline, questions)
    assert pipeline.reader._model is not None and pipeline.linker._model is not None
    return answers


def test_a_pipeline_from_cached_graphs_answers_as_the_torch_modules_do(module_way, questions):
    from odqa.core.text_encoding import OnnxTextEncoder

    pipeline = _pipeline()
    answers = _answers(pipeline, questions)
    assert pipeline.reader._model is None and pipeline.linker._model is None  # no torch module was built
    assert isinstance(pipeline.retriever().dense.encoder, OnnxTextEncoder)
    assert [a[0] for a in answers] == [a[0] for a in module_way]
    assert [a[2] for a in answers] == [a[2] for a in module_way]
    np.testing.assert_allclose([a[1] for a in answers], [a[1] for a in module_way], atol=1e-4)
    assert sum(bool(a[0]) for a in answers) >= len(questions) - 1


def test_a_fresh_ask_with_cached_graphs_never_imports_torch(module_way):
    """The graphs exist (built by `module_way`): building the pipeline and answering imports neither torch nor
    transformers' model code."""
    code = (
        "import sys\n"
        "from odqa.cli import main\n"
        "main(['ask', '--json', '--runtime', 'onnx', 'Who discovered penicillin?'])\n"
        "print('IMPORTED', [m for m in ('torch', 'transformers.modeling_utils') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("{")))
    assert_answer_read_from(result["answers"][0], result["passages"])
    assert "IMPORTED []" in out.stdout, out.stdout[-500:]


def test_the_linkers_numpy_heads_score_as_its_torch_model(tmp_path):
    """linker.heads.LinkHeads (inference) and ELQModel's methods (training) are the same functions."""
    import torch

    from odqa.linker.heads import ELQConfig, LinkHeads
    from odqa.linker.model import ELQModel

    torch.manual_seed(0)
    config = ELQConfig(hidden_size=8, entity_dim=6)
    model = ELQModel(torch.nn.Identity(), config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    heads = LinkHeads.from_model(model)
    hidden, scores = torch.randn(2, 7, 8), torch.randn(2, 7, 3)
    spans = torch.tensor([[0, 1, 1], [0, 2, 5], [1, 0, 6], [1, 3, 4]])
    cands, features = torch.randn(4, 5, 6), torch.randn(4, 5, 2)
    with torch.no_grad():
        vectors = model.span_vectors(hidden, spans)
        expected = [model.mention_logits(scores, spans), vectors, model.entity_logits(vectors, cands, features)]
    got = [
        heads.mention_logits(scores.numpy(), spans.numpy()),
        heads.span_vectors(hidden.numpy(), spans.numpy()),
        heads.entity_logits(vectors.numpy(), cands.numpy(), features.numpy()),
    ]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e.numpy(), atol=1e-5)
