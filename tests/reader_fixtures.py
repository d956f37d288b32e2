"""Tiny models for the reader tests: the MiniLM tokenizer with a randomly initialised 2-layer BERT."""

from __future__ import annotations

from pathlib import Path

import torch


def minilm_tokenizer():
    from transformers import AutoTokenizer

    from odqa.core.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("minilm"))


def tiny_config(vocab_size: int, qa: bool = True):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        architectures=["BertForQuestionAnswering" if qa else "BertModel"],
    )


def save_tiny_qa(path: Path, qa: bool = True, seed: int = 0) -> Path:
    from transformers import BertForQuestionAnswering, BertModel

    tok = minilm_tokenizer()
    torch.manual_seed(seed)
    cls = BertForQuestionAnswering if qa else BertModel
    model = cls(tiny_config(len(tok), qa=qa))
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path
