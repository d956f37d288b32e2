"""Spans of text cut where a speaker of its language would cut them: the reader's answers, in decoding
(reader.decode.decode_passage, before spans are merged into answers and scored), and the linker's Korean mentions
(linker.linker.mention_bounds). Here, beside the analysers whose Kiwi it uses, so that both components share it.

The reader's spans end where its sub-word pieces end, and a piece does not know a word's grammar:

* Korean writes particles and endings onto the word they follow (조사/어미: `거제도의`, `2분만`, `14일에`), and a
  piece can hold the last syllables of a noun with its particle, or stop inside a noun (`거제` of `거제도`). A
  Korean span is widened to the end of the morpheme its last character belongs to (never inside a word), then its
  trailing particles, endings and copula are dropped when what stays ends a noun phrase (`3명의` -> `3명`,
  `이순신이다` -> `이순신`; a verb keeps its ending: `먹었다`). Which morphemes those are is Kiwi's analysis
  (kiwipiepy, the analyser of the Korean BM25 terms: indexes.analysis), of the words (eojeol) at the span's
  edges, cached by word.
* Chinese (and Korean) text quotes titles and names in brackets (「」『』《》〈〉“”（）...): a span has them in pairs,
  widened to the partner just outside it or cut before an unmatched one, and drops stray punctuation at its edges
  (`战史演武」&「争霸演武」。` -> `「战史演武」&「争霸演武」`).

English spans keep what reader.decode.snap_span makes of them.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from odqa.core.optional import installed
from odqa.indexes.analysis import detect_language, korean_morphemes

log = logging.getLogger(__name__)

CUT_LANGUAGES = ("ko", "zh")  # the passage languages whose spans are cut here

# Kiwi's tags (the Sejong tag set) of what a Korean answer drops at its end: particles (J*: 의, 에서, 까지 ...),
# endings (E*: 다, 은 ...), and the copula (VCP: 이 of 이다), which ends a noun as a verb's ending ends a verb
_TRAILING_TAGS = ("J", "E", "VCP")
# ... and what must stay before them for the drop to happen: a noun phrase ends in a noun (N*), a number (SN), a
# foreign word or Hanja (SL, SH), a noun suffix (XSN: 들, 적) or a root (XR), a symbol (SW: %), or a closing
# bracket or quote (SSC). After a verb or an adjective the ending is part of the answer as said
_NOUN_END_TAGS = ("N", "SN", "SL", "SH", "XSN", "XR", "SW", "SSC")

# brackets and quotes that come in pairs, opener -> closer (full-width, CJK corner and title marks, ASCII)
PAIRS = {
    "「": "」",
    "『": "』",
    "“": "”",
    "‘": "’",
    "（": "）",
    "《": "》",
    "〈": "〉",
    "【": "】",
    "〔": "〕",
    "［": "］",
    "｛": "｝",
    "〖": "〗",
    "﹁": "﹂",
    "﹃": "﹄",
    "(": ")",
    "[": "]",
    "{": "}",
}
_CLOSERS = {closer: opener for opener, closer in PAIRS.items()}
# round and square brackets hold an aside, not part of a name: a span they enclose whole is said without them (title
# marks and quotes, 《》「」“”, mark the title or the words quoted, and stay)
_ASIDE = {"(": ")", "（": "）", "[": "]", "［": "］"}
_SAME = {'"', "＂"}  # a quote that opens and closes alike: paired by count
# punctuation that ends or joins a clause: never at either edge of a Chinese or Korean answer
STRAY = set("。，、；：！？…‥·・～—–-,;:!?")

_warned_no_kiwi = False


def _hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


def passage_language(text: str) -> str:
    """The language of a passage by its script (indexes.analysis.detect_language): en, ko or zh."""
    return detect_language([text])


def cut_span(text: str, start: int, end: int, language: str) -> tuple[int, int] | None:
    """[start, end) of `text` cut as a speaker of `language` (ko, zh; others unchanged) would cut it; None when
    nothing of it is left. A span snap_span already cleaned goes in; what comes out is a span of the same text."""
    if language not in CUT_LANGUAGES:
        return start, end
    balanced = balanced_span(text, start, end)
    if language != "ko" or balanced is None:
        return balanced
    # brackets first (a cut at an unmatched one can leave a particle at the new end), then the last word's grammar,
    # then the edges again (dropping a particle can bare a punctuation mark before it)
    korean = korean_span(text, *balanced)
    return balanced_span(text, *korean) if korean is not None else None


# ------------------------------------------------------------------------------------------------ Korean
def _word_at(text: str, i: int) -> tuple[int, int]:
    """The whitespace-delimited word (eojeol) holding the character at `i`."""
    a = i
    while a > 0 and not text[a - 1].isspace():
        a -= 1
    b = i + 1
    while b < len(text) and not text[b].isspace():
        b += 1
    return a, b


@lru_cache(maxsize=1 << 16)
def _analysed(words: str) -> tuple[tuple[int, int, str], ...]:
    """Kiwi's morphemes of a few words, cached (the same words recur across spans, passages and questions)."""
    return tuple(korean_morphemes(words))


def word_morphemes(text: str, a: int, b: int) -> list[tuple[int, int, str]]:
    """(start, end, tag) of Kiwi's morphemes of the word text[a:b], in characters of the word, analysed between
    its neighbours: a word alone is ambiguous where its sentence is not ("경은" is a name alone, 경 + 은 in
    "엘긴 경은 그리스에")."""
    before = a
    while before > 0 and text[before - 1].isspace():
        before -= 1
    before = _word_at(text, before - 1)[0] if before > 0 else a
    after = b
    while after < len(text) and text[after].isspace():
        after += 1
    after = _word_at(text, after)[1] if after < len(text) else b
    # a morpheme Kiwi reads across a space (a name of two words: 알베르트 아인슈타인) counts from the word's start
    return [
        (max(m_start + before, a) - a, m_end + before - a, tag)
        for m_start, m_end, tag in _analysed(text[before:after])
        if a < m_end + before <= b
    ]


def _kiwi_ready() -> bool:
    global _warned_no_kiwi
    if installed("kiwipiepy"):
        return True
    if not _warned_no_kiwi:
        _warned_no_kiwi = True
        log.warning(
            "Korean answers keep their particles and endings: cutting them needs Kiwi (pip install 'odqa[cjk]')"
        )
    return False


def korean_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span widened to whole morphemes at both edges (never inside a word), then without the particles,
    endings and copula that close its last word after a noun phrase; None when it starts inside a word and
    holds nothing but that word's particles and endings."""
    if end <= start or not any(_hangul(ch) for ch in text[start:end]) or not _kiwi_ready():
        return start, end
    # the start: at a morpheme's start, never inside one (a piece may begin inside a noun), and past the
    # particles and endings of a word the span starts inside of ("에서 열린" of "서울에서 열린": "열린")
    a, b = _word_at(text, start)
    if a < start:
        first = start
        for m_start, m_end, tag in word_morphemes(text, a, b):
            if a + m_start < first < a + m_end:
                first = a + m_start
            if a + m_start >= first and tag.startswith(_TRAILING_TAGS):
                first = max(first, a + m_end)
            elif a + m_start >= first:
                break
        while first < end and text[first].isspace():
            first += 1
        if first >= end:
            return None  # nothing but the particles and endings of a word
        start = first
    # the end: at the end of the morpheme holding the last character ("거제" of "거제도" -> "거제도")
    a, b = _word_at(text, end - 1)
    word = text[a:b]
    if end == b and not any(_hangul(ch) for ch in word):
        return start, end  # ends a word that has no particle to drop
    morphemes = word_morphemes(text, a, b)
    for m_start, m_end, _ in morphemes:
        if a + m_start < end < a + m_end:
            end = a + m_end
    # drop what closes the last word after a noun phrase: the trailing morphemes tagged _TRAILING_TAGS, from the
    # last one back, while they lie within the span (contracted morphemes share characters: "였" is 이 + 었)
    inside = [m for m in morphemes if a + m[1] <= end and a + m[0] >= max(start, a)]
    cut = end
    while inside and inside[-1][2].startswith(_TRAILING_TAGS):
        cut = min(cut, a + inside.pop()[0])
    if cut == end or not inside:
        return start, end
    _, kept_end, kept_tag = inside[-1]
    if not kept_tag.startswith(_NOUN_END_TAGS) or a + kept_end > cut or cut <= start:
        return start, end
    return start, cut


# ------------------------------------------------------------------------------------------------ brackets
def _unmatched(text: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """Positions of the span's closers without their opener, and of its openers without their closer."""
    open_at: list[int] = []
    lone_closers: list[int] = []
    for i in range(start, end):
        ch = text[i]
        if ch in _SAME:
            if open_at and text[open_at[-1]] == ch:
                open_at.pop()
            else:
                open_at.append(i)
        elif ch in PAIRS:
            open_at.append(i)
        elif ch in _CLOSERS:
            if open_at and text[open_at[-1]] == _CLOSERS[ch]:
                open_at.pop()
            else:
                lone_closers.append(i)
    return lone_closers, open_at


def _partner(ch: str) -> str:
    return ch if ch in _SAME else PAIRS.get(ch) or _CLOSERS[ch]


def balanced_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span with its brackets and quotes in pairs and no stray punctuation at its edges. A bracket whose
    partner stands just outside the span takes it in (`战史演武」` -> `「战史演武」`); one whose partner is farther
    is left out with the aside it opens or closes (the span is cut before an unmatched opener, after an unmatched
    closer: `5万余人死亡（莒州死亡` -> `5万余人死亡`); round or square brackets around the whole span are dropped
    (`(1949年)` -> `1949年`: an aside, not part of a name), title marks and quotes kept (`《红楼梦》`)."""
    start, end = _without_stray(text, start, end)
    # first outward: take in a partner standing just outside the span, while that pairs one more bracket
    while start < end:
        closers, openers = _unmatched(text, start, end)
        candidates = []
        if start > 0 and closers and text[start - 1] == _partner(text[closers[0]]):
            candidates.append((start - 1, end))  # the opener just before the span
        if start > 0 and openers and text[openers[0]] in _SAME and text[start - 1] == text[openers[0]]:
            candidates.append((start - 1, end))  # a quote that opens and closes alike, opened just before
        if end < len(text) and openers and text[end] == _partner(text[openers[-1]]):
            candidates.append((start, end + 1))  # the closer just after it
        unmatched = len(closers) + len(openers)
        fewer = next((c for c in candidates if sum(map(len, _unmatched(text, *c))) < unmatched), None)
        if fewer is None:
            break
        start, end = fewer
    # then only inward (so it ends): cut at what has no partner until every bracket has one
    while True:
        start, end = _without_stray(text, start, end)
        if start >= end:
            return None
        closers, openers = _unmatched(text, start, end)
        if not closers and not openers:
            if _ASIDE.get(text[start]) != text[end - 1] or any(_unmatched(text, start + 1, end - 1)):
                return start, end
            start, end = start + 1, end - 1  # "(1949年)" -> "1949年"
        elif closers and closers[-1] == end - 1:
            end -= 1  # a closer that a piece carried along at the end
        elif openers and openers[0] == start:
            start += 1  # an opener at the start, whose aside the span does not close
        elif closers:
            start = closers[-1] + 1  # what precedes an unmatched closer is the end of an aside opened before
        else:
            end = openers[0]  # what follows an unmatched opener is the start of an aside closed after


def _without_stray(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and (text[start] in STRAY or text[start].isspace()):
        start += 1
    while end > start and (text[end - 1] in STRAY or text[end - 1].isspace()):
        end -= 1
    return start, end
