"""`load_text_encoder(settings)`: the one loader of a text encoder (odqa.core.text_encoding.EncoderSettings), from
the cached ONNX graph alone where it can (no torch imported: seconds of a fresh `odqa ask`), else the torch
TextEncoder."""

from __future__ import annotations

from dataclasses import replace

from odqa.core.device import device_type
from odqa.core.models import resolve_model
from odqa.core.runtime import InferenceSettings, cached_graph, fast_tokenizer, plan_inference
from odqa.core.text_encoding import (
    DEFAULT_MAX_LENGTH,
    KIND_DEFAULTS,
    POOLINGS,
    SIMILARITIES,
    EncoderSettings,
    EncodesTexts,
    OnnxTextEncoder,
    check_choice,
    encoder_kind,
    folder_max_length,
    graph_variant,
    read_retriever_info,
    sentence_transformers_layout,
    sentence_transformers_variant,
)


def load_text_encoder(settings: EncoderSettings) -> EncodesTexts:
    """The encoder `settings` describe, its model resolved to a folder once here and passed down: the cached graph
    alone where the question-time plan runs onnx and the graph of these weight files was built (no torch
    imported), else odqa.core.encoder.TextEncoder. An index build's passage encoder (`settings.passages`) is the
    torch one: a build imports torch anyway, and the torch encoder builds the graph as it first runs."""
    folder = resolve_model(settings.name)

    def load_torch():
        from odqa.core.encoder import TextEncoder

        return TextEncoder.from_settings(settings, folder)

    if settings.passages:
        return load_torch()
    kind = encoder_kind(folder)
    pooling, similarity = settings.pooling, settings.similarity
    max_length, query_prefix, passage_prefix = settings.max_length, settings.query_prefix, settings.passage_prefix
    if kind == "sentence-transformers":
        layout = sentence_transformers_layout(folder)
        # another layout, or a pooling the folder does not compute (TextEncoder refuses it): torch
        if layout is None or (pooling is not None and pooling != layout.pooling):
            return load_torch()
        pooling, similarity = layout.pooling, similarity or layout.similarity
        variant = sentence_transformers_variant(layout, similarity)
        max_length = max_length or folder_max_length(folder)
        query_prefix = layout.query_prefix if query_prefix is None else query_prefix
        passage_prefix = layout.passage_prefix if passage_prefix is None else passage_prefix
    else:
        pooling, similarity = pooling or KIND_DEFAULTS[kind]["pooling"], similarity or KIND_DEFAULTS[kind]["similarity"]
        variant = graph_variant(kind, pooling, similarity)
    check_choice("pooling", pooling, POOLINGS)
    check_choice("similarity", similarity, SIMILARITIES)
    auto_int8 = read_retriever_info(folder).allows_int8()
    inference = InferenceSettings(settings.precision, settings.runtime)
    plan = plan_inference(device_type(settings.device), inference, auto_int8=auto_int8, question_time=True)
    session = cached_graph("encoder", settings.name, plan, variant, folder)
    if session is None:
        return load_torch()
    resolved = replace(
        settings,
        max_length=max_length or DEFAULT_MAX_LENGTH,
        pooling=pooling,
        similarity=similarity,
        query_prefix=query_prefix or "",
        passage_prefix=passage_prefix or "",
    )
    return OnnxTextEncoder(session, fast_tokenizer(folder), kind, resolved, load_torch, auto_int8)
