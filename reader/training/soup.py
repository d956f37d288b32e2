"""A model soup of readers: the weight average of several fine-tunings of one starting reader (different data
mixes, seeds or lengths of training). `python -m odqa.reader.export` then makes it a shippable fp16 reader."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.weight_averaging import average_weights
from odqa.reader.training.train import load_qa_model

SOUP_INFO = "soup.json"


def average_readers(models: Sequence[str], output: str | Path, shares: Sequence[float] | None = None) -> Path:
    """Write the (by default uniform) weight average of `models` to `output`: fp32 weights, the last model's
    tokenizer and config, and `soup.json` naming the ingredients and their shares."""
    if len(models) < 2:
        raise OdqaError("a soup needs two or more readers (--models A B ...)")
    shares = list(shares) if shares else [1.0 / len(models)] * len(models)
    if len(shares) != len(models):
        raise OdqaError(f"{len(models)} readers but {len(shares)} shares: give one share per reader, or none")
    latest: list = []  # the model loaded last (and its tokenizer): the average is written into it

    def states():  # one reader in memory at a time, beside the running sum
        for name in models:
            latest[:] = load_qa_model(name)
            yield latest[0].state_dict()

    averaged = average_weights(states(), shares, list(models))
    model, tokenizer = latest
    model.load_state_dict(averaged)
    with atomic_folder(output) as tmp:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / SOUP_INFO).write_text(
            json.dumps({"ingredients": [{"model": str(m), "share": s} for m, s in zip(models, shares)]}, indent=2)
        )
    return Path(output)
