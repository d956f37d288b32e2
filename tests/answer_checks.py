"""What any answer must be, whichever span the model picks.

Tests assert these properties instead of a model's choice: the reader's pick can flip with the CPU, the precision
that `auto` chose, the machine's load or a retrained model, while these hold for every extractive answer."""

from __future__ import annotations

import re
from typing import Any


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def _passage_texts(passages) -> dict[str, str]:
    texts = {}
    for p in passages:
        if isinstance(p, dict):
            texts[str(p.get("id", p.get("passage_id", "")))] = p.get("text", "")
        elif hasattr(p, "passage"):  # a SearchHit
            if p.passage is not None:
                texts[p.passage.id] = p.passage.text
        else:
            texts[p.id] = p.text
    return texts


def assert_answer_read_from(answer, passages) -> None:
    """`answer` (an Answer or its JSON) is a non-empty span of one of `passages` (SearchHits, Passages or their
    JSON), at the offsets it gives, with a probability in [0, 1]."""
    text = _field(answer, "text")
    assert isinstance(text, str) and text.strip(), f"empty answer: {answer!r}"
    texts = _passage_texts(passages)
    passage_id = str(_field(answer, "passage_id"))
    assert passage_id in texts, f"answer {text!r} names passage {passage_id!r}, not one of {sorted(texts)}"
    start, end = _field(answer, "start"), _field(answer, "end")
    span = texts[passage_id][start:end]
    # decoding may trim a closing particle or punctuation from the span it points at, never add to it
    assert text in span or span in text and span, f"answer {text!r} is not the span {span!r} its offsets point at"
    probability = _field(answer, "probability")
    assert 0.0 <= probability <= 1.0, f"probability {probability} out of [0, 1]"


ANSWER_LINE = re.compile(r"^\s+1\. \S.*\s(p=|uncalibrated )[01]\.\d\d\s", re.MULTILINE)


def assert_cli_answered(stdout: str | bytes) -> None:
    """A one-shot `ask` or the shell printed a first answer with its probability (whichever span it is)."""
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    assert "Traceback" not in text and ANSWER_LINE.search(text), text[-800:]
