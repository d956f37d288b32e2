"""Question + passage windows, built only with the fast tokenizer (offset mapping, overflowing tokens, stride).

Both training (span labels) and inference (span decoding) use `tokenize_windows`, so the two see the same
windows: `[CLS] question [SEP] passage-slice [SEP]`, consecutive slices overlapping by `stride` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from odqa.core.errors import OdqaError

DEFAULT_MAX_LENGTH = 256
DEFAULT_STRIDE = 96  # tokens shared by two consecutive windows of one passage
DEFAULT_MAX_QUERY_TOKENS = 64


def require_fast(tokenizer) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise OdqaError(
            f"the reader needs a fast (Rust) tokenizer for offset mapping; {type(tokenizer).__name__} is not one. "
            "Use a checkpoint that ships tokenizer.json."
        )


def truncate_question(tokenizer, question: str, max_query_tokens: int) -> str:
    """Cut a question to its first `max_query_tokens` tokens (at a character offset the tokenizer gives)."""
    question = question.strip()
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_query_tokens:
        return question
    return question[: offsets[max_query_tokens - 1][1]]


@dataclass
class Windows:
    """Tokenised windows plus, per window, which input it came from and where its passage tokens lie."""

    encoding: Any  # transformers BatchEncoding (lists, no padding)
    sample: list[int]  # window -> index of its (question, passage) pair
    context_start: list[int]  # first passage token of the window
    context_end: list[int]  # last passage token of the window (inclusive)
    offsets: list[list[tuple[int, int] | None]]  # char offsets into the passage; None outside the passage

    def __len__(self) -> int:
        return len(self.sample)


def tokenize_windows(
    tokenizer,
    questions: Sequence[str],
    contexts: Sequence[str],
    max_length: int = DEFAULT_MAX_LENGTH,
    stride: int = DEFAULT_STRIDE,
    max_query_tokens: int = DEFAULT_MAX_QUERY_TOKENS,
) -> Windows:
    require_fast(tokenizer)
    questions = [truncate_question(tokenizer, q, max_query_tokens) for q in questions]
    # the window must leave room for the passage beyond the overlap
    longest_q = max((len(tokenizer(q, add_special_tokens=False)["input_ids"]) for q in questions), default=0)
    room = max_length - longest_q - 3
    if room <= 8:
        raise OdqaError(f"max_length {max_length} leaves no room for the passage after a {longest_q}-token question")
    stride = min(stride, room // 2)
    pad_right = tokenizer.padding_side == "right"
    enc = tokenizer(
        list(questions) if pad_right else list(contexts),
        list(contexts) if pad_right else list(questions),
        truncation="only_second" if pad_right else "only_first",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )
    ctx_id = 1 if pad_right else 0
    sample = list(enc["overflow_to_sample_mapping"])
    starts, ends, offsets = [], [], []
    for i in range(len(sample)):
        seq = enc.sequence_ids(i)
        idx = [j for j, s in enumerate(seq) if s == ctx_id]
        starts.append(idx[0] if idx else 0)
        ends.append(idx[-1] if idx else -1)
        offsets.append([tuple(o) if s == ctx_id else None for o, s in zip(enc["offset_mapping"][i], seq)])
    return Windows(enc, sample, starts, ends, offsets)


def char_span_to_tokens(windows: Windows, i: int, start_char: int, end_char: int) -> tuple[int, int] | None:
    """Token span [start, end] (inclusive) of window `i` covering characters [start_char, end_char),
    or None when the window does not hold the whole answer."""
    cs, ce = windows.context_start[i], windows.context_end[i]
    if ce < cs:
        return None
    offs = cast("list[tuple[int, int]]", windows.offsets[i])  # the passage's tokens (cs..ce) all have offsets
    if offs[cs][0] > start_char or offs[ce][1] < end_char:
        return None
    s = cs
    while s <= ce and offs[s][1] <= start_char:
        s += 1
    e = ce
    while e >= cs and offs[e][0] >= end_char:
        e -= 1
    if s > e:
        return None
    return s, e
