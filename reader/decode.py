"""Span decoding and multi-passage aggregation, on logits directly (no model needed; unit-tested by hand).

Scores are sums of a start and an end logit. The null score of a window is the score of its [CLS]
span (start = end = 0); the null score of a passage is the lowest null score of its windows (the window
that best sees an answer decides, as in the SQuAD v2 reference post-processing).

Spans come out clean: snapped outwards to whole words (a sub-word token never yields "toy" out of "Tolstoy"),
cut at the first line break (an answer never runs across a paragraph or heading), Korean and Chinese ones cut as
their language cuts words (indexes.cutting: no trailing particle, brackets in pairs), and one answer per
distinct answer (equal normalised text, or one span inside another in the same passage), its evidence listed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from odqa.core.answers import normalize_answer
from odqa.indexes.cutting import cut_span, passage_language


@dataclass
class SpanCandidate:
    score: float  # start logit + end logit
    start_token: int
    end_token: int  # inclusive
    window: int = 0


def best_spans(
    start_logits: Sequence[float] | np.ndarray,
    end_logits: Sequence[float] | np.ndarray,
    context_start: int,
    context_end: int,
    *,
    max_answer_tokens: int,
    top_k: int,
) -> list[SpanCandidate]:
    """The `top_k` spans [s, e] with context_start <= s <= e <= context_end and e - s + 1 <= max_answer_tokens,
    ranked by start_logits[s] + end_logits[e] (ties: the earlier, then the shorter span)."""
    if context_end < context_start or top_k <= 0 or max_answer_tokens <= 0:
        return []
    s = np.asarray(start_logits, dtype=np.float64)[context_start : context_end + 1]
    e = np.asarray(end_logits, dtype=np.float64)[context_start : context_end + 1]
    n = len(s)
    scores = s[:, None] + e[None, :]
    i, j = np.indices((n, n))
    valid = (j >= i) & (j - i < max_answer_tokens)
    scores = np.where(valid, scores, -np.inf)
    flat = scores.ravel()
    k = min(top_k, int(valid.sum()))
    if k <= 0:
        return []
    idx = np.argpartition(-flat, k - 1)[:k] if k < flat.size else np.arange(flat.size)
    ranked = sorted(idx, key=lambda t: (-flat[t], t))[:k]
    out = []
    for t in ranked:
        a, b = divmod(int(t), n)
        if not np.isfinite(flat[t]):
            continue
        out.append(SpanCandidate(float(flat[t]), a + context_start, b + context_start))
    return out


def null_score(start_logits: Sequence[float] | np.ndarray, end_logits: Sequence[float] | np.ndarray) -> float:
    """Score of the [CLS] (no-answer) span of one window."""
    return float(start_logits[0]) + float(end_logits[0])


def _joins_words(ch: str) -> bool:
    """A character that continues a word. Scripts written without spaces between words (Thai and later
    blocks: CJK, kana, Hangul with its attached particles) have no word boundary to snap to, so never."""
    return ch.isalnum() and ord(ch) < 0x0E00


_NO_START = ",.;:!?)]}-\u2013\u2014"  # punctuation that closes or joins: never the first character of an answer
_NO_END = ",;:([{-\u2013\u2014"  # ...that opens or joins: never the last (a final "." may end "U.S.")


_PAIRS = {"(": ")", "[": "]", "{": "}", "\uff08": "\uff09", "\u300a": "\u300b", "\u300c": "\u300d", "\u300e": "\u300f"}
_CLOSERS = {close: open_ for open_, close in _PAIRS.items()}


def _drop_unpaired_brackets(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop a bracket at either end of [start, end) whose partner is not inside it: tokenizers that merge
    punctuation into word pieces (sentencepiece's "91)" of "(1756-1791)") can only end an answer there."""

    def unpaired(ch: str, partner: str) -> bool:
        span = text[start:end]
        return span.count(ch) > span.count(partner)

    while end > start and text[end - 1] in _CLOSERS and unpaired(text[end - 1], _CLOSERS[text[end - 1]]):
        end -= 1
        while end > start and text[end - 1].isspace():
            end -= 1
    while start < end and text[start] in _PAIRS and unpaired(text[start], _PAIRS[text[start]]):
        start += 1
        while start < end and text[start].isspace():
            start += 1
    return start, end


def snap_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The character span [start, end) cleaned for display: leading/trailing whitespace and dangling
    punctuation dropped, cut at the first line break (kept: the line the answer starts on), then widened to
    whole words (of the scripts that space their words; Korean and Chinese are cut by their own rules:
    indexes.cutting). None when nothing but whitespace or punctuation is left."""
    while start < end and (text[start].isspace() or text[start] in _NO_START):
        start += 1
    newline = text.find("\n", start, end)
    if newline != -1:
        end = newline
    while end > start and (text[end - 1].isspace() or text[end - 1] in _NO_END):
        end -= 1
    start, end = _drop_unpaired_brackets(text, start, end)
    if end <= start:
        return None
    while start > 0 and _joins_words(text[start - 1]) and _joins_words(text[start]):
        start -= 1
    while end < len(text) and _joins_words(text[end]) and _joins_words(text[end - 1]):
        end += 1
    if not any(ch.isalnum() for ch in text[start:end]):
        return None
    return start, end


@dataclass
class PassageSpan:
    """A decoded span of one passage, in characters of the passage text."""

    passage_index: int
    start_char: int
    end_char: int
    text: str
    score: float  # span score (logits)
    null_score: float  # the passage's null score


def decode_passage(
    passage_index: int,
    text: str,
    windows: list[tuple[np.ndarray, np.ndarray, int, int, list]],
    *,
    max_answer_tokens: int,
    top_k: int,
    cut: bool,
) -> tuple[list[PassageSpan], float]:
    """Decode every window of one passage; `windows` holds (start_logits, end_logits, context_start,
    context_end, offsets) with offsets[i] = (char_start, char_end) for passage tokens.

    Returns the passage's spans (one per distinct character span, its best score, best first) and the
    passage's null score. A span seen by two overlapping windows is kept once with the higher score; a span
    crossing a window boundary is found in the next window, whose overlap (the stride) holds it whole. With
    `cut`, the `top_k` best spans of a Korean or Chinese passage are cut as its language cuts words
    (indexes.cutting), and spans that become one keep the higher score.
    """
    best: dict[tuple[int, int], float] = {}
    nulls = []
    for start_logits, end_logits, cs, ce, offsets in windows:
        nulls.append(null_score(start_logits, end_logits))
        for c in best_spans(start_logits, end_logits, cs, ce, max_answer_tokens=max_answer_tokens, top_k=top_k):
            key = snap_span(text, offsets[c.start_token][0], offsets[c.end_token][1])
            if key is None:
                continue
            if c.score > best.get(key, -math.inf):
                best[key] = c.score
    passage_null = min(nulls) if nulls else math.inf
    if cut and best and (language := passage_language(text)) != "en":
        best = _cut(text, language, best, top_k)
    spans = [PassageSpan(passage_index, a, b, text[a:b], sc, passage_null) for (a, b), sc in best.items()]
    spans.sort(key=lambda p: (-p.score, p.start_char, p.end_char))
    return spans[:top_k], passage_null


def _cut(text: str, language: str, best: dict[tuple[int, int], float], top_k: int) -> dict[tuple[int, int], float]:
    """The `top_k` best spans cut (indexes.cutting.cut_span), each cut span with the best score of the spans
    that became it; only those are returned by decode_passage, so the rest are never analysed."""
    out: dict[tuple[int, int], float] = {}
    for (a, b), score in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]:
        key = cut_span(text, a, b, language)
        if key is not None and score > out.get(key, -math.inf):
            out[key] = score
    return out


@dataclass
class AggregatedAnswer:
    text: str
    score: float  # max over merged spans of span score + retrieval_weight * retrieval score
    probability: float  # share: summed over merged spans of the softmax over candidates and no-answer
    best: PassageSpan = field(repr=False)  # the highest-scoring span carrying this answer
    spans: list[PassageSpan] = field(repr=False, default_factory=list)  # every merged span, best first

    @property
    def margin(self) -> float:
        """The best span's score over its own passage's null score: how much the reader prefers this answer
        to "no answer here", on one scale for every question (the input of calibration)."""
        return self.best.score - self.best.null_score

    @property
    def evidence(self) -> list[PassageSpan]:
        """The places this very answer was found: the merged spans whose text is the answer's (normalised), one
        per passage offset, best first. Spans merged because they hold the answer or lie inside it ("Portugal
        and Brazil" for "Brazil") add to its share but are other answers, not evidence of this one."""
        key = normalize_answer(self.best.text) or self.best.text.strip()
        seen: set[tuple[int, int, int]] = set()
        out = []
        for sp in self.spans:
            place = (sp.passage_index, sp.start_char, sp.end_char)
            if place not in seen and (normalize_answer(sp.text) or sp.text.strip()) == key:
                seen.add(place)
                out.append(sp)
        return out


def _nested(start: int, end: int, sp: PassageSpan) -> bool:
    """The span [start, end) inside `sp` or `sp` inside it (both of one passage)."""
    return (start <= sp.start_char and sp.end_char <= end) or (sp.start_char <= start and end <= sp.end_char)


def aggregate(
    spans: list[PassageSpan],
    passage_nulls: Sequence[float],
    retrieval_scores: Sequence[float] | None,
    *,
    retrieval_weight: float,
    no_answer_threshold: float | None,
    top_n: int,
    temperature: float,
    selection_weight: float,
    passage_bonus: Sequence[float] | None = None,
) -> list[AggregatedAnswer]:
    """Combine spans from several passages into ranked answers.

    * Combined score of a span: span score + retrieval_weight * retrieval score of its passage
      - selection_weight * its passage's null score (the reader's own passage selection: a passage whose null
      score is low holds an answer by the reader's reckoning, whatever its span scores) + `passage_bonus` of its
      passage (the subject bonus: its article is an entity linked in the question).
    * No-answer: with a threshold, a span counts only if its span score beats its passage's null score by
      more than the threshold; when no span does, the result is empty (no answer rather than a guess).
      `no_answer_threshold=None` keeps every span (always answer, as SQuAD v1.1 expects).
    * Share (`probability`): a softmax (temperature `temperature`) over the combined scores of all candidate
      spans plus one no-answer option, whose logit is the lowest passage null score (shifted by the same
      retrieval term); so the shares of all answers and "no answer" sum to 1. It is relative to one
      question's candidates; the calibrated probability (reader.calibration) is what compares across questions.
    * Merging: spans whose normalised text (SQuAD normalisation) is equal, or one inside the other in the same
      passage ("Tolstoy" in "Leo Tolstoy"), are one answer. Their shares are **summed**, because they are
      disjoint events (different spans) that all yield the same answer, so the answer's share is the marginal
      over its spans; this is what lets an answer repeated across several retrieved passages outrank a single
      slightly higher span (evidence aggregation). Their scores are merged by **max**: scores are
      unnormalised logits, and a sum would grow with the number of copies on a scale that has no meaning.
      Answers are ranked by share, then score. The surface text, offsets and passage are those of the
      best-scoring span; `spans` lists them all (the evidence).
    """
    n = len(passage_nulls)
    if retrieval_scores is None:
        retrieval_scores = [0.0] * n
    if passage_bonus is None:
        passage_bonus = [0.0] * n
    bonus = [
        retrieval_weight * float(r) - selection_weight * float(null) + float(extra)
        for r, null, extra in zip(retrieval_scores, passage_nulls, passage_bonus)
    ]
    kept = []
    for sp in spans:
        if no_answer_threshold is not None and not sp.score - sp.null_score > no_answer_threshold:
            continue
        kept.append((sp.score + bonus[sp.passage_index], sp))
    if not kept:
        return []
    kept.sort(key=lambda c: (-c[0], c[1].passage_index, c[1].start_char, c[1].end_char))
    logits = [c for c, _ in kept]
    if n:
        logits.append(min(passage_nulls[i] + bonus[i] for i in range(n)))
    t = max(temperature, 1e-6)
    m = max(logits)
    z = sum(math.exp((x - m) / t) for x in logits)
    answers: list[AggregatedAnswer] = []
    by_text: dict[str, int] = {}  # normalised text -> answer number (its place in `answers`)
    # the merged spans of each passage as (start, end, answer number): nesting is looked up within the span's
    # own passage, not across every answer's spans (that was quadratic in the spans of all ten passages)
    by_passage: dict[int, list[tuple[int, int, int]]] = {}
    for combined, sp in kept:  # best first, so the first span of an answer is its best
        p = math.exp((combined - m) / t) / z
        key = normalize_answer(sp.text) or sp.text.strip()
        number = by_text.get(key)
        if number is None:  # no answer of this text yet: the earliest holding a span nested with this one
            number = min((n for a, b, n in by_passage.get(sp.passage_index, ()) if _nested(a, b, sp)), default=None)
        if number is None:
            number = len(answers)
            answers.append(AggregatedAnswer(sp.text, combined, 0.0, sp))
        answer = answers[number]
        answer.probability += p
        answer.spans.append(sp)
        by_passage.setdefault(sp.passage_index, []).append((sp.start_char, sp.end_char, number))
        by_text.setdefault(key, number)
    ranked = sorted(answers, key=lambda a: (-a.probability, -a.score))
    return ranked[:top_n]
