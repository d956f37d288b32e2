"""Span decoding and multi-passage aggregation, on logits directly (no model needed; unit-tested by hand).

Scores are sums of a start and an end logit. The null score of a window is the score of its [CLS]
span (start = end = 0); the null score of a passage is the lowest null score of its windows (the window
that best sees an answer decides, as in the SQuAD v2 reference post-processing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from odqa.core.answers import normalize_answer


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
    max_answer_tokens: int = 30,
    top_k: int = 20,
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
    idx = sorted(idx, key=lambda t: (-flat[t], t))[:k]
    out = []
    for t in idx:
        a, b = divmod(int(t), n)
        if not np.isfinite(flat[t]):
            continue
        out.append(SpanCandidate(float(flat[t]), a + context_start, b + context_start))
    return out


def null_score(start_logits: Sequence[float] | np.ndarray, end_logits: Sequence[float] | np.ndarray) -> float:
    """Score of the [CLS] (no-answer) span of one window."""
    return float(start_logits[0]) + float(end_logits[0])


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
    max_answer_tokens: int = 30,
    top_k: int = 20,
) -> tuple[list[PassageSpan], float]:
    """Decode every window of one passage; `windows` holds (start_logits, end_logits, context_start,
    context_end, offsets) with offsets[i] = (char_start, char_end) for passage tokens.

    Returns the passage's spans (one per distinct character span, its best score, best first) and the
    passage's null score. A span seen by two overlapping windows is kept once with the higher score; a span
    crossing a window boundary is found in the next window, whose overlap (the stride) holds it whole.
    """
    best: dict[tuple[int, int], float] = {}
    nulls = []
    for start_logits, end_logits, cs, ce, offsets in windows:
        nulls.append(null_score(start_logits, end_logits))
        for c in best_spans(start_logits, end_logits, cs, ce, max_answer_tokens, top_k):
            a, b = offsets[c.start_token][0], offsets[c.end_token][1]
            if b <= a:
                continue
            key = (a, b)
            if c.score > best.get(key, -math.inf):
                best[key] = c.score
    passage_null = min(nulls) if nulls else math.inf
    spans = [PassageSpan(passage_index, a, b, text[a:b], sc, passage_null) for (a, b), sc in best.items()]
    spans.sort(key=lambda p: (-p.score, p.start_char, p.end_char))
    return spans[:top_k], passage_null


@dataclass
class AggregatedAnswer:
    text: str
    score: float  # max over merged spans of span score + retrieval_weight * retrieval score
    probability: float  # summed over merged spans
    best: PassageSpan = field(repr=False, default=None)  # the highest-scoring span carrying this answer


def aggregate(
    spans: list[PassageSpan],
    passage_nulls: Sequence[float],
    retrieval_scores: Sequence[float] | None = None,
    retrieval_weight: float = 0.0,
    no_answer_threshold: float | None = 0.0,
    top_n: int = 5,
    temperature: float = 1.0,
) -> list[AggregatedAnswer]:
    """Combine spans from several passages into ranked answers.

    * Combined score of a span: span score + retrieval_weight * retrieval score of its passage.
    * No-answer: with a threshold, a span counts only if its span score beats its passage's null score by
      more than the threshold; when no span does, the result is empty (no answer rather than a guess).
      `no_answer_threshold=None` disables the null option (always answer, as SQuAD v1.1 expects).
    * Probability: a softmax (temperature `temperature`) over the combined scores of all candidate spans
      plus one no-answer option, whose logit is the lowest passage null score (shifted by the same
      retrieval term); so the probabilities of all answers and "no answer" sum to 1.
    * Merging: spans whose normalised text (SQuAD normalisation) is equal are one answer. Their
      probabilities are **summed**, because they are disjoint events (different spans) that all yield
      the same answer string, so the answer's probability is the marginal over its spans; this is what
      lets an answer repeated across several retrieved passages outrank a single slightly higher span
      (evidence aggregation). Their scores are merged by **max**: scores are unnormalised logits, and a sum
      would grow with the number of copies on a scale that has no meaning. Answers are ranked by
      probability, then score. The surface text, offsets and passage are those of the best-scoring span.
    """
    n = len(passage_nulls)
    if retrieval_scores is None:
        retrieval_scores = [0.0] * n
    bonus = [retrieval_weight * float(r) for r in retrieval_scores]
    kept = []
    for sp in spans:
        if no_answer_threshold is not None and not sp.score - sp.null_score > no_answer_threshold:
            continue
        kept.append((sp.score + bonus[sp.passage_index], sp))
    if not kept:
        return []
    logits = [c for c, _ in kept]
    if no_answer_threshold is not None and n:
        logits.append(min(passage_nulls[i] + bonus[i] for i in range(n)))
    t = max(temperature, 1e-6)
    m = max(logits)
    z = sum(math.exp((x - m) / t) for x in logits)
    merged: dict[str, AggregatedAnswer] = {}
    for combined, sp in kept:
        p = math.exp((combined - m) / t) / z
        key = normalize_answer(sp.text) or sp.text.strip()
        cur = merged.get(key)
        if cur is None:
            merged[key] = AggregatedAnswer(sp.text, combined, p, sp)
        else:
            cur.probability += p
            if combined > cur.score:
                cur.score, cur.text, cur.best = combined, sp.text, sp
    ranked = sorted(merged.values(), key=lambda a: (-a.probability, -a.score))
    return ranked[:top_n]
