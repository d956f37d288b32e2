"""Span decoding, window handling and aggregation on hand-made logits (no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from odqa.reader.decode import PassageSpan, null_score
from tests.reader_fixtures import aggregated, best_spans_of, decoded

NEG = -10.0


def test_best_span_is_max_start_plus_end():
    start = [0, 1, 5, 2, 0, 0]
    end = [0, 0, 1, 4, 3, 0]
    spans = best_spans_of(start, end, 1, 4, max_answer_tokens=30, top_k=3)
    assert (spans[0].start_token, spans[0].end_token, spans[0].score) == (2, 3, 9.0)
    # runner-up: s=2,e=4 (5+3=8)
    assert (spans[1].start_token, spans[1].end_token, spans[1].score) == (2, 4, 8.0)


def test_span_never_ends_before_it_starts_nor_leaves_the_context():
    start = [100, NEG, NEG, 10, NEG]  # [CLS] has the best start but is outside the context
    end = [100, 10, NEG, NEG, NEG]  # best end (token 1) lies before the best start (token 3)
    spans = best_spans_of(start, end, 1, 3, top_k=50)
    assert all(c.start_token <= c.end_token for c in spans)
    assert all(1 <= c.start_token and c.end_token <= 3 for c in spans)
    # the invalid (3, 1) would score 20; valid spans tie at 0 ((1,1) and (3,3)): the earlier wins
    assert spans[0].score == 0.0 and (spans[0].start_token, spans[0].end_token) == (1, 1)
    assert (spans[1].start_token, spans[1].end_token) == (3, 3)


def test_max_answer_length_limits_the_span():
    start = [0, 5, 0, 0, 0]
    end = [0, 0, 0, 0, 5]
    long = best_spans_of(start, end, 1, 4, max_answer_tokens=4, top_k=1)[0]
    assert (long.start_token, long.end_token) == (1, 4)
    short = best_spans_of(start, end, 1, 4, max_answer_tokens=3, top_k=1)[0]
    assert short.end_token - short.start_token + 1 <= 3
    # ties at 5: (1,1),(1,2),(1,3) score 5 and (2,4),(3,4),(4,4) score 5: the earliest, shortest wins
    assert (short.start_token, short.end_token) == (1, 1)


def test_null_score_is_cls_start_plus_end():
    assert null_score([2.5, 0, 0], [1.5, 0, 0]) == 4.0


def _window(text_tokens, token_range, peaks, q_len=2):
    """A window over passage tokens token_range=[a, b): [CLS] q q [SEP] tokens [SEP]; peaks = (start_tok, end_tok)
    in passage-token numbering (None: no peak). Returns (start_logits, end_logits, cs, ce, offsets)."""
    a, b = token_range
    offsets = [None] * (1 + q_len + 1) + [text_tokens[i] for i in range(a, b)] + [None]
    n = len(offsets)
    s, e = np.full(n, NEG), np.full(n, NEG)
    s[0] = e[0] = 0.0  # null score 0
    cs, ce = 1 + q_len + 1, 1 + q_len + 1 + (b - a) - 1
    if peaks is not None:
        ps, pe = peaks
        if a <= ps < b:
            s[cs + ps - a] = 8.0
        if a <= pe < b:
            e[ce - (b - 1 - pe)] = 8.0
    return s, e, cs, ce, offsets


def _offsets(text):
    out, pos = [], 0
    for word in text.split(" "):
        out.append((pos, pos + len(word)))
        pos += len(word) + 1
    return out


def test_span_crossing_a_window_boundary_comes_from_the_overlapping_window():
    text = "w0 w1 w2 w3 w4 w5 w6 w7 w8"
    toks = _offsets(text)
    # window A holds tokens 0-4, window B tokens 3-8 (overlap 3-4); the answer is tokens 4-6 ("w4 w5 w6")
    win_a = _window(toks, (0, 5), (4, 6))  # A sees the start but not the end
    win_b = _window(toks, (3, 9), (4, 6))
    spans, null = decoded(0, text, [win_a, win_b], max_answer_tokens=30, top_k=5)
    assert spans[0].text == "w4 w5 w6"
    assert (spans[0].start_char, spans[0].end_char) == (text.index("w4"), text.index("w6") + 2)
    assert spans[0].score == 16.0
    assert null == 0.0
    # the same character span seen by two windows is returned once
    keys = [(s.start_char, s.end_char) for s in spans]
    assert len(keys) == len(set(keys))


def test_answer_at_the_very_end_of_the_passage():
    text = "The capital of France is Paris"
    toks = _offsets(text)
    win = _window(toks, (0, len(toks)), (5, 5))
    spans, _ = decoded(0, text, [win], top_k=1)
    assert spans[0].text == "Paris"
    assert spans[0].end_char == len(text)


def _span(p, text, score, null=0.0, start=0):
    return PassageSpan(p, start, start + len(text), text, score, null)


def test_aggregation_merges_equal_normalised_answers_by_summing_probability():
    spans = [
        _span(0, "Paris", 5.0),
        _span(1, "Lyon", 5.5),
        _span(2, "paris.", 4.9),  # normalises to "paris"
        _span(3, "the Paris", 4.8),  # article dropped: "paris"
    ]
    ranked = aggregated(spans, [0.0] * 4, no_answer_threshold=None, top_n=5)
    assert [normalize(a.text) for a in ranked] == ["paris", "lyon"]
    z = sum(math.exp(s.score) for s in spans) + math.exp(0.0)  # the no-answer option (null 0) takes its share
    assert ranked[0].probability == pytest.approx((math.exp(5.0) + math.exp(4.9) + math.exp(4.8)) / z)
    assert ranked[1].probability == pytest.approx(math.exp(5.5) / z)
    assert ranked[0].score == 5.0  # max, not sum
    assert ranked[0].text == "Paris" and ranked[0].best.passage_index == 0
    assert [sp.passage_index for sp in ranked[0].spans] == [0, 2, 3]  # the evidence, best first


def normalize(t):
    from odqa.core.answers import normalize_answer

    return normalize_answer(t)


def test_retrieval_weight_reorders_answers():
    spans = [_span(0, "Paris", 5.0), _span(1, "Lyon", 4.0)]
    assert aggregated(spans, [0.0, 0.0], [0.0, 3.0], 0.0, None)[0].text == "Paris"
    top = aggregated(spans, [0.0, 0.0], [0.0, 3.0], retrieval_weight=1.0, no_answer_threshold=None)[0]
    assert top.text == "Lyon" and top.score == 7.0


def test_selection_weight_prefers_the_passage_the_reader_finds_answering():
    # Paris scores higher, but its passage's null is high (the reader doubts it holds an answer); Lyon's is low
    spans = [_span(0, "Paris", 5.0, null=4.0), _span(1, "Lyon", 4.5, null=-1.0)]
    assert aggregated(spans, [4.0, -1.0], no_answer_threshold=None)[0].text == "Paris"
    top = aggregated(spans, [4.0, -1.0], no_answer_threshold=None, selection_weight=0.5)[0]
    assert top.text == "Lyon" and top.score == pytest.approx(4.5 + 0.5)
    # the null threshold still compares a span with its own passage's null score, selection or not
    assert [a.text for a in aggregated(spans, [4.0, -1.0], no_answer_threshold=2.0, selection_weight=0.5)] == ["Lyon"]


def test_passage_bonus_lifts_the_spans_of_its_passage_only():
    spans = [_span(0, "Ulm", 5.0), _span(1, "Warsaw", 4.0), _span(2, "Paris", 3.0)]
    top = aggregated(spans, [0.0, 0.0, 0.0], no_answer_threshold=None, passage_bonus=[0.0, 2.0, 0.0])
    assert [(a.text, a.score) for a in top] == [("Warsaw", 6.0), ("Ulm", 5.0), ("Paris", 3.0)]
    # the null threshold compares a span with its own passage's null score, bonus or not
    assert aggregated([_span(1, "Warsaw", 4.0, null=5.0)], [0.0, 5.0], passage_bonus=[0.0, 9.0]) == []


def test_no_answer_when_no_span_beats_its_passage_null_score():
    spans = [_span(0, "Paris", 5.0, null=6.0), _span(1, "Lyon", 4.0, null=4.5)]
    assert aggregated(spans, [6.0, 4.5], no_answer_threshold=0.0) == []
    # a lower threshold lets "Lyon" (4.0 - 4.5 = -0.5) through, but not "Paris" (-1.0)
    got = aggregated(spans, [6.0, 4.5], no_answer_threshold=-0.75)
    assert [a.text for a in got] == ["Lyon"]
    # the no-answer option takes probability mass: logits Lyon 4.0, null min(6, 4.5)=4.5
    assert got[0].probability == pytest.approx(math.exp(4.0) / (math.exp(4.0) + math.exp(4.5)))
    # None disables the null option entirely
    assert [a.text for a in aggregated(spans, [6.0, 4.5], no_answer_threshold=None)] == ["Paris", "Lyon"]


def test_top_n_limits_answers():
    spans = [_span(i, f"a{i}", float(i)) for i in range(6)]
    assert len(aggregated(spans, [0.0] * 6, no_answer_threshold=None, top_n=2)) == 2


def test_a_span_inside_another_of_the_same_passage_is_one_answer():
    text = "The novel was written by Leo Tolstoy in Yasnaya Polyana."
    leo = _span(0, "Leo Tolstoy", 6.0, start=text.index("Leo"))
    tolstoy = _span(0, "Tolstoy", 5.0, start=text.index("Tolstoy"))
    elsewhere = _span(1, "Tolstoy", 4.0, start=3)  # same text in another passage: merged by text
    other = _span(0, "Yasnaya Polyana", 5.5, start=text.index("Yasnaya"))
    ranked = aggregated([leo, tolstoy, elsewhere, other], [0.0, 0.0], no_answer_threshold=None)
    assert [a.text for a in ranked] == ["Leo Tolstoy", "Yasnaya Polyana"]
    assert ranked[0].spans == [leo, tolstoy, elsewhere]
    z = math.exp(6.0) + math.exp(5.0) + math.exp(4.0) + math.exp(5.5) + 1.0
    assert ranked[0].probability == pytest.approx((math.exp(6.0) + math.exp(5.0) + math.exp(4.0)) / z)
    assert ranked[0].score == 6.0 and ranked[0].margin == 6.0


def test_nested_spans_of_different_passages_stay_apart():
    a = _span(0, "Leo Tolstoy", 6.0, start=0)
    b = _span(1, "Tolstoy", 5.0, start=4)  # offsets inside a's, but another passage and another text
    assert [x.text for x in aggregated([a, b], [0.0, 0.0], no_answer_threshold=None)] == ["Leo Tolstoy", "Tolstoy"]


def _merged_by_scanning_every_answer(spans, nulls, scores):
    """aggregated()'s merging as specified, done the slow way: a span joins the answer its normalised text first
    went to, else the first answer (in order of creation) holding a span nested with it in the same passage."""
    from odqa.core.answers import normalize_answer

    bonus = [10.0 * s for s in scores]
    answers: list[list] = []
    went_to: dict[str, list] = {}
    for sp in sorted(
        spans, key=lambda s: (-(s.score + bonus[s.passage_index]), s.passage_index, s.start_char, s.end_char)
    ):
        key = normalize_answer(sp.text) or sp.text.strip()
        home = went_to.get(key) or next(
            (
                a
                for a in answers
                if any(
                    o.passage_index == sp.passage_index
                    and (
                        o.start_char <= sp.start_char
                        and sp.end_char <= o.end_char
                        or sp.start_char <= o.start_char
                        and o.end_char <= sp.end_char
                    )
                    for o in a
                )
            ),
            None,
        )
        if home is None:
            answers.append(home := [])
        home.append(sp)
        went_to.setdefault(key, home)
    return sorted([o.text for o in a] for a in answers)


def test_merging_by_passage_equals_scanning_every_answer():
    """Many overlapping and repeated spans over ten passages (the reader's usual 200 candidates)."""
    rng = np.random.default_rng(7)
    words = ["Leo", "Tolstoy", "the", "war", "Peace", "1828", "Tula", "of", "a", "Moscow"]
    for _ in range(20):
        texts = [" ".join(rng.choice(words, 60)) for _ in range(10)]
        spans = []
        for p, text in enumerate(texts):
            for _ in range(20):
                a = int(rng.integers(0, len(text) - 20))
                b = a + int(rng.integers(1, 20))
                spans.append(PassageSpan(p, a, b, text[a:b], float(rng.normal(5, 3)), 0.0))
        scores = list(rng.random(10))
        ranked = aggregated(spans, [0.0] * 10, scores, 10.0, None, top_n=len(spans))
        assert sorted([o.text for o in a.spans] for a in ranked) == _merged_by_scanning_every_answer(
            spans, [0.0] * 10, scores
        )
        assert sum(a.probability for a in ranked) < 1.0


@pytest.mark.parametrize(
    "text, start, end, expected",
    [
        ("War and Peace by Tolstoy.", 20, 23, "Tolstoy"),  # "sto" -> the whole word
        ("War and Peace by Tolstoy.", 19, 25, "Tolstoy."),  # a span ending on punctuation keeps it
        ("Born in 1828 in Tula", 9, 11, "1828"),
        ("Heading.\nThe answer is here", 0, 18, "Heading."),  # cut at the line break
        ("Heading.\nThe answer is here", 8, 18, "The answer"),  # starts on the break: the next line
        ("a.\n\nb", 1, 4, None),  # nothing but punctuation and breaks
        ("the second-largest city, Lyon", 10, 24, "largest city"),  # dangling hyphen and comma dropped
        ("首都是北京市", 3, 5, "北京"),  # no spaces between words: never widened
        # Korean is cut by its grammar after snapping (indexes.cutting, tests/test_answer_cutting.py), not here
        ("닉슨 대통령이 말했다", 0, 7, "닉슨 대통령이"),
        ("시나가와 역", 0, 3, "시나가"),
        # a bracket whose partner is outside the span is dropped (sentencepiece's "91)" piece); pairs are kept
        ("Mozart (1756 - 1791) died", 15, 20, "1791"),
        ("Mozart (1756 - 1791) died", 7, 12, "1756"),
        ("The band Queen (band) played", 9, 21, "Queen (band)"),
        ("x (a) y) z", 0, 8, "x (a) y"),
        ("他写了《红楼梦》。", 3, 8, "《红楼梦》"),
        ("他写了《红楼梦》。", 3, 7, "红楼梦"),
        ("(", 0, 1, None),
    ],
)
def test_spans_snap_to_words_and_never_cross_a_line_break(text, start, end, expected):
    from odqa.reader.decode import snap_span

    got = snap_span(text, start, end)
    assert (text[got[0] : got[1]] if got else None) == expected


def test_decoding_snaps_a_subword_span_to_its_word():
    text = "written by Tolstoy"
    # sub-word tokens: "written", "by", "Tol", "stoy"; the model peaks on the last piece only
    toks = [(0, 7), (8, 10), (11, 14), (14, 18)]
    spans, _ = decoded(0, text, [_window(toks, (0, 4), (3, 3))], top_k=3)
    assert spans[0].text == "Tolstoy" and (spans[0].start_char, spans[0].end_char) == (11, 18)
    # "Tol" and "stoy" and "Tolstoy" are one character span, listed once
    assert [s.text for s in spans].count("Tolstoy") == 1


def test_evidence_lists_only_the_places_the_same_answer_was_found():
    """A longer span merged into an answer because it holds it ("Portugal and Brazil" for "Brazil") adds to its
    share but is not evidence of it; the same answer found twice at one offset is listed once."""
    text = "Portugal and Brazil"
    spans = [
        _span(0, "Brazil", 6.0, start=13),
        _span(0, text, 5.0),
        _span(1, "brazil", 4.0, start=20),
        _span(2, "Brazil", 3.0, start=2),
        _span(2, "Brazil", 2.0, start=2),  # the same place again
    ]
    top = aggregated(spans, [0.0] * 3, no_answer_threshold=None, top_n=1)[0]
    assert top.text == "Brazil" and len(top.spans) == 5  # all of them add to the share
    assert [(sp.passage_index, sp.start_char) for sp in top.evidence] == [(0, 13), (1, 20), (2, 2)]
    assert all(normalize(sp.text) == "brazil" for sp in top.evidence)
