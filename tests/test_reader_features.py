"""Windows and offset mapping with the real MiniLM tokenizer, decoded from synthetic logits."""

from __future__ import annotations

import numpy as np
import pytest

from odqa.reader.features import char_span_to_tokens, tokenize_windows
from tests.reader_fixtures import decoded, minilm_tokenizer

PASSAGE = (
    "Ada Lovelace was an English mathematician and writer, chiefly known for her work on Charles Babbage's "
    "proposed mechanical general-purpose computer, the Analytical Engine. She was the first to recognise that "
    "the machine had applications beyond pure calculation, and published the first algorithm intended to be "
    "carried out by such a machine in 1843."
)


@pytest.fixture(scope="module")
def tok():
    return minilm_tokenizer()


def _logits_for(w, i, start_tok, end_tok):
    n = len(w.encoding["input_ids"][i])
    s, e = np.full(n, -5.0), np.full(n, -5.0)
    s[0] = e[0] = 0.0
    s[start_tok] = e[end_tok] = 6.0
    return s, e


def test_offsets_map_tokens_back_to_the_exact_passage_text(tok):
    w = tokenize_windows(tok, ["Who wrote the first algorithm?"], [PASSAGE], max_length=384, stride=64)
    assert len(w) == 1
    cs, ce = w.context_start[0], w.context_end[0]
    offs = w.offsets[0]
    assert offs[0] is None and offs[cs - 1] is None  # [CLS] ... [SEP] are outside the passage
    assert offs[cs][0] == 0 and offs[ce][1] == len(PASSAGE)
    answer = "Charles Babbage"
    a = PASSAGE.index(answer)
    span = char_span_to_tokens(w, 0, a, a + len(answer))
    assert span is not None
    assert PASSAGE[offs[span[0]][0] : offs[span[1]][1]] == answer


def test_long_passage_is_split_into_overlapping_windows(tok):
    w = tokenize_windows(tok, ["When?"], [PASSAGE], max_length=32, stride=8)
    assert len(w) >= 3 and set(w.sample) == {0}
    for i in range(len(w) - 1):
        # consecutive windows share `stride` passage tokens
        this_last = w.offsets[i][w.context_end[i]]
        next_first = w.offsets[i + 1][w.context_start[i + 1]]
        assert next_first[0] < this_last[1]
    assert w.offsets[-1][w.context_end[-1]][1] == len(PASSAGE)


def test_span_crossing_a_window_boundary_is_decoded_from_the_overlap(tok):
    w = tokenize_windows(tok, ["When?"], [PASSAGE], max_length=32, stride=8)
    # find an answer that starts inside window 0 but ends beyond it
    end0 = w.offsets[0][w.context_end[0]][1]
    a = PASSAGE.rfind(" ", 0, end0 - 1) + 1  # the last word of window 0 ...
    b = PASSAGE.index(" ", end0 + 1)  # ... through the first word after it
    answer = PASSAGE[a:b]
    assert char_span_to_tokens(w, 0, a, b) is None  # window 0 does not hold it whole
    holders = [i for i in range(len(w)) if char_span_to_tokens(w, i, a, b) is not None]
    assert holders and holders[0] == 1
    windows = []
    for i in range(len(w)):
        span = char_span_to_tokens(w, i, a, b)
        if span is None:  # a window without the answer: its own best guess is the first passage token, weaker
            s, e = _logits_for(w, i, w.context_start[i], w.context_start[i])
            s -= 4.0
        else:
            s, e = _logits_for(w, i, *span)
        windows.append((s, e, w.context_start[i], w.context_end[i], w.offsets[i]))
    spans, _ = decoded(0, PASSAGE, windows, top_k=3)
    # decoded spans drop dangling punctuation at their edges (reader.decode.snap_span): "computer," -> "computer"
    clean = answer.rstrip(",.;:")
    assert spans[0].text == clean
    assert (spans[0].start_char, spans[0].end_char) == (a, a + len(clean))


def test_answer_at_the_very_end_of_the_passage(tok):
    text = PASSAGE.rstrip(".")  # the passage ends with the answer itself
    w = tokenize_windows(tok, ["When?"], [text], max_length=32, stride=8)
    last = len(w) - 1
    a = text.index("1843")
    span = char_span_to_tokens(w, last, a, a + 4)
    assert span is not None and span[1] == w.context_end[last]
    s, e = _logits_for(w, last, *span)
    spans, _ = decoded(0, text, [(s, e, w.context_start[last], w.context_end[last], w.offsets[last])])
    assert spans[0].text == "1843" and spans[0].end_char == len(text)


def test_several_passages_are_batched_with_their_own_offsets(tok):
    texts = ["Paris is the capital of France.", PASSAGE]
    w = tokenize_windows(tok, ["What?"] * 2, texts, max_length=48, stride=8)
    assert w.sample[0] == 0 and set(w.sample) == {0, 1}
    for i, p in enumerate(w.sample):
        for o in w.offsets[i]:
            if o is not None:
                assert 0 <= o[0] < o[1] <= len(texts[p])


def test_long_question_is_truncated_not_rejected(tok):
    w = tokenize_windows(tok, ["why " * 200], [PASSAGE], max_length=128, stride=16, max_query_tokens=16)
    assert all(len(ids) <= 128 for ids in w.encoding["input_ids"])
    assert w.context_start[0] == 1 + 16 + 1
