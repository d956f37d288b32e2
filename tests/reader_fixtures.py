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


def tiny_train_reader_argv(train: Path, folder: Path, steps: int, max_length: int = 64) -> list[str]:
    """`train-reader` on `train` from the tiny model saved in folder/init into folder/run: a checkpoint every
    step, batch 2, one thread, no progress bar."""
    return [
        "train-reader",
        "--train",
        str(train),
        "--init",
        str(folder / "init"),
        "--output",
        str(folder / "run"),
        "--max-steps",
        str(steps),
        "--save-every",
        "1",
        "--batch-size",
        "2",
        "--max-length",
        str(max_length),
        "--stride",
        "16",
        "--threads",
        "1",
        "--no-progress",
    ]


# the decode functions take every setting by keyword, with no default of their own (a reader passes its
# ReaderSettings'); these are the values the decode tests' cases are written for
DECODE_CASES = {"max_answer_tokens": 30, "top_k": 20, "cut": True}
AGGREGATE_CASES = {
    "retrieval_weight": 0.0,
    "no_answer_threshold": 0.0,
    "top_n": 5,
    "temperature": 1.0,
    "selection_weight": 0.0,
}


def best_spans_of(start_logits, end_logits, context_start, context_end, **given):
    from odqa.reader.decode import best_spans

    options = {k: v for k, v in {**DECODE_CASES, **given}.items() if k != "cut"}
    return best_spans(start_logits, end_logits, context_start, context_end, **options)


def decoded(passage_index, text, windows, **given):
    from odqa.reader.decode import decode_passage

    return decode_passage(passage_index, text, windows, **{**DECODE_CASES, **given})


def aggregated(spans, passage_nulls, retrieval_scores=None, *weights, **given):
    """aggregate() with AGGREGATE_CASES unless given; positional weights in aggregate's keyword order."""
    from odqa.reader.decode import aggregate

    given.update(zip(AGGREGATE_CASES, weights))
    return aggregate(spans, passage_nulls, retrieval_scores, **{**AGGREGATE_CASES, **given})
