"""`load_text_encoder`: the question encoder a search starts with, from the cached ONNX graph alone where it can
(no torch imported: seconds of a fresh `odqa ask`), else the torch TextEncoder."""

from __future__ import annotations

from odqa.core.device import device_type
from odqa.core.models import resolve_model
from odqa.core.runtime import INFERENCE, InferenceSettings, cached_graph, fast_tokenizer, plan_inference
from odqa.core.text_encoding import (
    DEFAULT_MAX_LENGTH,
    KIND_DEFAULTS,
    POOLINGS,
    SIMILARITIES,
    EncodesTexts,
    OnnxTextEncoder,
    check_choice,
    encoder_kind,
    encoder_max_length,
    graph_variant,
    int8_measured,
    sentence_transformers_layout,
    sentence_transformers_variant,
)


def load_text_encoder(
    name_or_path: str,
    max_length: int | None = None,
    device: str | None = None,
    precision: str = INFERENCE.precision,
    pooling: str | None = None,
    similarity: str | None = None,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    runtime: str = INFERENCE.runtime,
) -> EncodesTexts:
    """The encoder to search with: the cached graph alone where the plan runs onnx and the graph of these weight
    files was built (no torch imported), else odqa.core.encoder.TextEncoder.from_pretrained (same arguments)."""

    def load_torch():
        from odqa.core.encoder import TextEncoder

        return TextEncoder.from_pretrained(
            name_or_path,
            max_length=max_length,
            device=device,
            precision=precision,
            pooling=pooling,
            similarity=similarity,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            runtime=runtime,
        )

    path = resolve_model(name_or_path)
    kind = encoder_kind(path)
    if kind == "sentence-transformers":
        layout = sentence_transformers_layout(path)
        # another layout, or a pooling the folder does not compute (TextEncoder refuses it): torch
        if layout is None or (pooling is not None and pooling != layout.pooling):
            return load_torch()
        pooling, similarity = layout.pooling, similarity or layout.similarity
        variant = sentence_transformers_variant(layout, similarity)
        max_length = max_length or encoder_max_length(name_or_path)
        query_prefix = layout.query_prefix if query_prefix is None else query_prefix
        passage_prefix = layout.passage_prefix if passage_prefix is None else passage_prefix
    else:
        pooling, similarity = pooling or KIND_DEFAULTS[kind]["pooling"], similarity or KIND_DEFAULTS[kind]["similarity"]
        variant = graph_variant(kind, pooling, similarity)
    check_choice("pooling", pooling, POOLINGS)
    check_choice("similarity", similarity, SIMILARITIES)
    auto_int8 = int8_measured(name_or_path)
    plan = plan_inference(
        device_type(device),
        InferenceSettings(precision, runtime),
        auto_int8=auto_int8,
        question_time=True,
    )
    session = cached_graph("encoder", name_or_path, plan, variant)
    if session is None:
        return load_torch()
    encoder = OnnxTextEncoder(
        session,
        fast_tokenizer(path),
        name_or_path,
        kind,
        max_length or DEFAULT_MAX_LENGTH,
        pooling,
        similarity,
        query_prefix or "",
        passage_prefix or "",
        precision,
        runtime,
        load_torch,
        auto_int8,
    )
    return encoder
