"""Korean and Chinese answers cut as their language cuts words, in decoding (indexes.cutting, issue 75 item 3).

What a cut span must be is asserted by the analyser the cutting claims to follow (Kiwi's morphemes for Korean) and
by counting brackets (Chinese), over spans of real KorQuAD, CMRC and DRCD paragraphs as well as hand-made ones;
never which span a model picks."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from odqa.indexes.cutting import PAIRS, STRAY, cut_span
from odqa.reader.decode import snap_span
from tests.reader_fixtures import decoded

pytest.importorskip("kiwipiepy")

from odqa.indexes.cutting import word_morphemes  # noqa: E402  (after the skip: Kiwi is the `cjk` extra's)

_CLOSERS = set(PAIRS.values())
_NOUN_END = ("N", "SN", "SL", "SH", "XSN", "XR", "SW", "SSC")


def _word_at(text: str, i: int) -> tuple[int, int]:
    a, b = i, i + 1
    while a > 0 and not text[a - 1].isspace():
        a -= 1
    while b < len(text) and not text[b].isspace():
        b += 1
    return a, b


def _korean_problems(text: str, start: int, end: int) -> list[str]:
    """What is wrong with [start, end) as a Korean answer, by Kiwi: an edge inside a morpheme (inside a word), or
    a particle, ending or copula closing it after a noun phrase."""
    problems = []
    for edge in (start, end):
        a, b = _word_at(text, min(edge, len(text) - 1) if edge == start else edge - 1)
        for m_start, m_end, _ in word_morphemes(text, a, b):
            if a + m_start < edge < a + m_end and not text[a + m_start : a + m_end].isspace():
                problems.append(f"edge {edge} inside the morpheme {text[a + m_start : a + m_end]!r}")
    a, b = _word_at(text, end - 1)
    # a morpheme without characters (the copula of "라는" after a vowel) closes no span
    inside = [m for m in word_morphemes(text, a, b) if a + m[1] <= end and a + m[0] >= max(a, start) and m[1] > m[0]]
    trailing = []
    while inside and inside[-1][2].startswith(("J", "E", "VCP")):
        trailing.append(inside.pop())
    if (
        trailing
        and inside
        and inside[-1][2].startswith(_NOUN_END)
        and a + inside[-1][1] <= min(a + t[0] for t in trailing)
    ):
        problems.append(f"ends in {[text[a + t[0] : a + t[1]] + '/' + t[2] for t in trailing]} after a noun")
    return problems


def _balanced(span: str) -> bool:
    stack: list[str] = []
    for ch in span:
        if ch in ('"', "＂"):
            if stack and stack[-1] == ch:
                stack.pop()
            else:
                stack.append(ch)
        elif ch in PAIRS:
            stack.append(PAIRS[ch])
        elif ch in _CLOSERS:
            if not stack or stack.pop() != ch:
                return False
    return not stack


@pytest.mark.parametrize(
    "text, answer, expected",
    [
        ("그는 3명의 아이를 두었다", "3명의", "3명"),
        ("2006년 10월 14일에 발표되었다", "2006년 10월 14일에", "2006년 10월 14일"),
        ("경상남도 통영군 장목면 거제도의 남쪽", "경상남도 통영군 장목면 거제", "경상남도 통영군 장목면 거제도"),
        ("이 사람은 이순신이다.", "이순신이다", "이순신"),
        ("그는 학교였다", "학교였다", "학교"),  # the copula contracted with the past ending
        ("《삼국사기》에서 이르기를", "《삼국사기》에서", "《삼국사기》"),
        ("서울에서 열린 대회", "에서 열린", "열린"),  # a span starting on a particle starts after it
        ("닉슨 대통령이 말했다", "닉슨 대통령이", "닉슨 대통령"),
        ("그 정통 제병 연합부대로 편성", "정통 제병 연합부대로", "정통 제병 연합부대"),
        ("서울에서 열린", "서울에서", "서울"),
        ("그는 밥을 먹었다", "먹었다", "먹었다"),  # a verb keeps its ending
        ("표는 286만 표였다", "286만", "286만"),  # a number keeps its unit
        ("장애 아이 두 명", "장애 아이", "장애 아이"),  # "아이" (a child) is one word
        ("시나가와 역", "시나가", "시나가와"),  # never inside a word
        (
            "대한민국 임시정부(大韓民國臨時政府) 수립",
            "대한민국 임시정부(大韓民國臨時政府",
            "대한민국 임시정부(大韓民國臨時政府)",
        ),
    ],
)
def test_korean_spans_end_before_their_particle_and_never_inside_a_word(text, answer, expected):
    start = text.index(answer)
    got = cut_span(text, start, start + len(answer), "ko")
    assert got is not None and text[got[0] : got[1]] == expected
    assert not _korean_problems(text, *got)


@pytest.mark.parametrize(
    "text, answer, expected",
    [
        ("他参加了「战史演武」&「争霸演武」。之后", "战史演武」&「争霸演武」。", "「战史演武」&「争霸演武」"),
        ("书名为《红楼梦》，作者是曹雪芹", "红楼梦》，", "《红楼梦》"),
        ("首都是，北京。", "，北京。", "北京"),
        ("他说“你好”就走了", "你好”", "“你好”"),
        ('他说"你好"就走了', '你好"', '"你好"'),
        ("甲（乙）丙", "甲（乙", "甲（乙）"),
        ("事件（发生于1949年）之后", "1949年）之后", "之后"),  # after a closer opened farther back: the main text
        ("5万余人死亡（莒州死亡2万余人）", "5万余人死亡（莒州死亡", "5万余人死亡"),  # before an unclosed aside
        ("他生于（1949年）", "（1949年）", "1949年"),  # round brackets around the whole span: an aside
        ("他生于（1949年）", "（1949年", "1949年"),
        ("（即原“中国一汽”、“一汽”）", "“中国一汽”、“一汽”）", "“中国一汽”、“一汽”"),  # a closer carried along
        ("（即原“中国一汽”、“一汽”）", "（即原“中国一汽", "即原“中国一汽”"),
        ("在《水浒传》与《三国演义》中", "水浒传》与《三国演义", "《水浒传》与《三国演义》"),
    ],
)
def test_chinese_spans_keep_brackets_in_pairs_and_drop_stray_punctuation(text, answer, expected):
    start = text.index(answer)
    got = cut_span(text, start, start + len(answer), "zh")
    assert got is not None and text[got[0] : got[1]] == expected
    span = text[got[0] : got[1]]
    assert _balanced(span) and span[0] not in STRAY and span[-1] not in STRAY


TANGLED = [
    '키 라우다(Nik" Lauda)의 페라리가',  # a quote opened inside round brackets and never closed
    "「a（b」c）d",
    '"a(b"c)d"',
    "《x「y》z」",
    "(((a)",
    "「」」「「」",
    '""a""b"',
]


def test_every_span_of_tangled_brackets_comes_out_balanced_and_the_cutting_ends():
    """Taking in a partner and cutting one off must not undo each other: every span of text whose brackets
    cross or never close gets a balanced span or none, in bounded time (an alarm fails the test where the
    cutting would loop)."""
    import signal

    def too_long(*_):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, too_long)
    try:
        for text in TANGLED:
            for start in range(len(text)):
                for end in range(start + 1, len(text) + 1):
                    signal.setitimer(signal.ITIMER_REAL, 2.0)
                    try:
                        got = cut_span(text, start, end, "zh")
                    except TimeoutError:
                        pytest.fail(f"the cutting of {text[start:end]!r} in {text!r} did not end")
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    assert got is None or _balanced(text[got[0] : got[1]]), (text[start:end], got)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_nothing_but_punctuation_is_no_span():
    assert cut_span("北京。，！", 2, 5, "zh") is None
    assert cut_span("「」", 0, 2, "zh") is not None  # a pair alone is balanced; snap_span drops spans without letters


def test_english_spans_are_left_as_they_are():
    text = "He wrote (in 1869) War and Peace."
    assert cut_span(text, 3, 15, "en") == (3, 15)


def _spans_of(paragraphs: list[str], count: int, seed: int) -> list[tuple[str, int, int]]:
    """Spans as decoding hands them to the cutting: random starts and ends at any character, up to 30 long,
    cleaned by snap_span (whole words of spaced scripts, no dangling punctuation)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = rng.choice(paragraphs)
        start = rng.randrange(0, len(text) - 1)
        snapped = snap_span(text, start, rng.randrange(start + 1, min(len(text), start + 30) + 1))
        if snapped is not None:
            out.append((text, *snapped))
    return out


def _paragraphs(path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [p["context"] for article in data["data"][:40] for p in article["paragraphs"]]


def test_korquad_spans_cut_by_kiwi_have_no_trailing_particle_and_stay_in_their_passage(shared_data):
    spans = _spans_of(_paragraphs(shared_data / "multilingual" / "korquad-v1.0-dev.json"), 400, seed=3)
    changed = 0
    for text, start, end in spans:
        got = cut_span(text, start, end, "ko")
        if got is None:
            continue
        a, b = got
        assert 0 <= a < b <= len(text) and text[a:b].strip() == text[a:b]  # a span of the passage, at its offsets
        assert not _korean_problems(text, a, b), (text[start:end], text[a:b])
        changed += (a, b) != (start, end)
    assert changed > len(spans) // 4  # the check above saw real cuts, not spans left alone


@pytest.mark.parametrize("name", ["cmrc2018-dev.json", "drcd-test.json"])
def test_chinese_spans_are_balanced_without_stray_punctuation(shared_data, name):
    spans = _spans_of(_paragraphs(shared_data / "multilingual" / name), 400, seed=5)
    cut = [cut_span(text, start, end, "zh") for text, start, end in spans]
    assert sum(got is None for got in cut) < len(spans) // 20  # a span is dropped only when nothing of it is left
    for (text, start, end), got in zip(spans, cut):
        if got is None:
            continue
        a, b = got
        span = text[a:b]
        assert 0 <= a < b <= len(text) and _balanced(span), (text[start:end], span)
        assert span[0] not in STRAY and span[-1] not in STRAY, span


def _window(text: str, spans: list[tuple[int, int, float]]):
    """One window over `text` with one token per character (offsets), [CLS] at 0, and start/end logits that
    make each (start char, end char, score) a candidate."""
    offsets = [(0, 0), *[(i, i + 1) for i in range(len(text))]]
    start_logits = np.full(len(offsets), -20.0)
    end_logits = np.full(len(offsets), -20.0)
    start_logits[0] = end_logits[0] = -5.0
    for a, b, score in spans:
        start_logits[a + 1] = max(start_logits[a + 1], score / 2)
        end_logits[b] = max(end_logits[b], score / 2)
    return start_logits, end_logits, 1, len(text), offsets


def test_decoding_cuts_before_spans_are_merged_and_cut_false_keeps_the_pieces():
    text = "그는 3명의 아이를 두었다"
    a = text.index("3명의")
    window = _window(text, [(a, a + 3, 10.0)])
    cut, _ = decoded(0, text, [window], top_k=5)
    assert cut[0].text == "3명" and (cut[0].start_char, cut[0].end_char) == (a, a + 2)
    assert [s.text for s in cut].count("3명") == 1  # "3명의" and "3명" are one span, with the best score
    kept, _ = decoded(0, text, [window], top_k=5, cut=False)
    assert kept[0].text == "3명의"


def test_chinese_passage_spans_come_out_balanced_from_decoding():
    text = "他参加了「战史演武」&「争霸演武」。之后"
    a, b = text.index("战"), text.index("。") + 1
    spans, _ = decoded(0, text, [_window(text, [(a, b, 10.0)])], top_k=3)
    assert (
        spans[0].text == "「战史演武」&「争霸演武」" and text[spans[0].start_char : spans[0].end_char] == spans[0].text
    )


def test_without_kiwi_korean_spans_stay_uncut_and_say_why_once(monkeypatch, caplog):
    import sys

    import odqa.indexes.cutting as cutting

    monkeypatch.setitem(sys.modules, "kiwipiepy", None)
    monkeypatch.setattr(cutting, "_warned_no_kiwi", False)
    text = "그는 3명의 아이를 두었다"
    with caplog.at_level("WARNING"):
        assert cut_span(text, 3, 6, "ko") == (3, 6)
        assert cut_span(text, 3, 6, "ko") == (3, 6)
    said = [r.getMessage() for r in caplog.records if "odqa[cjk]" in r.getMessage()]
    assert len(said) == 1
