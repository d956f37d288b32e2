"""Other inference backends and graph recipes for a text encoder, for bench/encoder_int8.py's comparison (issue
#23: passage encoding on CPUs without VNNI). Each builds, once, a graph of the encoder's torch module under
`$ODQA_HOME/bench-encoders/` and returns an encoder with `encode_passages`/`encode_queries` (odqa's batching,
length sorting and normalisation; only the forward pass differs). Their extra packages are optional: openvino and
nncf (`pip install openvino nncf`), ctranslate2 (`pip install ctranslate2`).

* onnx-int8-fastgelu: the shipped int8 recipe with GELU's tanh approximation (FastGelu);
* onnx-int8-mha: the shipped int8 recipe with MultiHeadAttention instead of the fused QAttention (Q, K, V
  projections as separate int8 matmuls);
* onnx-int8-static: static int8 (QDQ, activations calibrated on the demo articles, per-channel weights), so no
  DynamicQuantizeLinear per matmul;
* openvino-fp32 / openvino-int8 (NNCF post-training quantisation, transformer preset, the same calibration);
* ctranslate2-int8: CTranslate2's BertModel encoder, int8 weights and compute, mean pooling outside.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from odqa.core.paths import odqa_home
from odqa.core.runtime import InferencePlan
from odqa.core.text_encoding import EncodesTexts

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = (
    "onnx-int8-fastgelu",
    "onnx-int8-mha",
    "onnx-int8-static",
    "openvino-fp32",
    "openvino-int8",
    "ctranslate2-int8",
)


class BackendEncoder(EncodesTexts):
    """An encoder whose forward pass is `forward(token arrays) -> vectors` of another backend."""

    device_type = "cpu"

    def __init__(self, torch_encoder, label: str, forward):
        for name in (
            "name",
            "kind",
            "tokenizer",
            "max_length",
            "similarity",
            "query_prefix",
            "passage_prefix",
            "pooling",
            "dim",
        ):
            setattr(self, name, getattr(torch_encoder, name))
        self.precision, self.runtime, self._label, self._forward = "fp32", "torch", label, forward

    def plan(self, precision: str | None = None, question_time: bool = False) -> InferencePlan:
        runtime, _, precision = self._label.partition("-")
        return InferencePlan(runtime, precision, "bench/encoder_backends.py")

    def _encode_batch(self, texts: list, plan: InferencePlan, max_length: int | None) -> np.ndarray:
        return self._forward(self.token_arrays(texts, max_length))


def build_backend(name: str, torch_encoder, threads: int) -> BackendEncoder:
    """The encoder `name` (one of BACKENDS) of `torch_encoder`'s weights (a mean-pooled BERT-style model)."""
    folder = odqa_home() / "bench-encoders" / Path(str(torch_encoder.name)).name
    folder.mkdir(parents=True, exist_ok=True)
    if name.startswith("ctranslate2"):
        return BackendEncoder(torch_encoder, name, _ctranslate2(torch_encoder, folder, threads))
    exported = _export(torch_encoder, folder)
    if name.startswith("openvino"):
        return BackendEncoder(
            torch_encoder, name, _openvino(exported, folder, name.endswith("int8"), threads, torch_encoder)
        )
    target = folder / f"{name}.onnx"
    if not target.is_file():
        _onnx_recipe(name, exported, target, torch_encoder)
    from odqa.core.runtime import OnnxModel

    session = OnnxModel(target, threads=threads)
    return BackendEncoder(torch_encoder, name, lambda feeds: session.run(feeds)[0])


def calibration_feeds(encoder, batches: int = 16, size: int = 8) -> list[dict[str, np.ndarray]]:
    """Token arrays of the demo articles (shipped with odqa, not the benchmark's paragraphs) at 128 tokens."""
    rows = [json.loads(line) for line in (ROOT / "odqa" / "demo" / "articles.jsonl").read_text().splitlines()]
    texts = [f"{r['title']} | {r['text']}" for r in rows][: batches * size]
    return [encoder.token_arrays(texts[i : i + size], 128) for i in range(0, len(texts), size)]


def _export(encoder, folder: Path) -> Path:
    """The plain (unoptimised) ONNX export of the encoder with pooling and normalisation, as odqa's runtime
    exports it."""
    import torch

    from odqa.core.runtime import TOKEN_INPUTS, _exportable

    target = folder / "export.onnx"
    if target.is_file():
        return target
    encoder.model.set_attn_implementation("eager")
    example = torch.ones((2, 16), dtype=torch.long)
    args = tuple(example if n != "token_type_ids" else torch.zeros_like(example) for n in TOKEN_INPUTS)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _exportable(encoder, lambda module, **inputs: module(inputs), TOKEN_INPUTS),
            args,
            str(target),
            input_names=list(TOKEN_INPUTS),
            output_names=["vectors"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in TOKEN_INPUTS},
            opset_version=17,
            dynamo=False,
        )
    return target


def _onnx_recipe(name: str, exported: Path, target: Path, encoder) -> None:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    config = encoder.model.config
    options = FusionOptions("bert")
    options.enable_gelu_approximation = name == "onnx-int8-fastgelu"
    options.use_multi_head_attention = name == "onnx-int8-mha"
    fused = target.with_suffix(".fp32.onnx")
    optimize_model(
        str(exported),
        model_type="bert",
        num_heads=int(config.num_attention_heads),
        hidden_size=int(config.hidden_size),
        opt_level=1,
        optimization_options=options,
    ).save_model_to_file(str(fused))
    float_outputs = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    if name != "onnx-int8-static":
        quantize_dynamic(
            str(fused), str(target), per_channel=True, weight_type=QuantType.QInt8, extra_options=float_outputs
        )
        return

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calibration_feeds(encoder))

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(
        str(fused),
        str(target),
        Calibration(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul"],
        extra_options=float_outputs,
    )


def _openvino(exported: Path, folder: Path, int8: bool, threads: int, encoder):
    import openvino as ov

    target = folder / ("openvino-int8.xml" if int8 else "openvino-fp32.xml")
    if not target.is_file():
        model = ov.convert_model(str(exported))
        if int8:
            import nncf

            feeds = calibration_feeds(encoder)
            model = nncf.quantize(
                model, nncf.Dataset(feeds), subset_size=len(feeds), model_type=nncf.ModelType.TRANSFORMER
            )
        ov.save_model(model, str(target), compress_to_fp16=False)
    compiled = ov.Core().compile_model(
        str(target), "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    )
    request = compiled.create_infer_request()
    names = [i.get_any_name() for i in compiled.inputs]
    return lambda feeds: request.infer({k: feeds[k] for k in names})[compiled.outputs[0]]


def _ctranslate2(encoder, folder: Path, threads: int):
    import ctranslate2

    target = folder / "ctranslate2-int8"
    if not target.is_dir():
        from odqa.core.models import resolve_model

        source = resolve_model(encoder.name)
        ctranslate2.converters.TransformersConverter(str(source)).convert(str(target), quantization="int8")
    model = ctranslate2.Encoder(str(target), device="cpu", compute_type="int8", intra_threads=threads)

    def forward(feeds):
        mask = feeds["attention_mask"]
        hidden = np.array(
            model.forward_batch(
                [row[m.astype(bool)].tolist() for row, m in zip(feeds["input_ids"], mask)]
            ).last_hidden_state
        )
        weights = mask[:, : hidden.shape[1], None].astype(np.float32)
        return (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)

    return forward
