"""Split a document into passages of about N words along sentence boundaries.

DPR cuts every 100 words regardless of sentences; we pack whole sentences instead (a sentence longer than
the budget is cut by words), never cross a paragraph mid-sentence (short paragraphs share a passage, joined
by their newline), and keep exact character offsets so
`doc.text[p.start:p.end] == p.text`.

Chinese and Japanese write no spaces between words, so their characters are counted instead: one word per
CJK_CHARS_PER_WORD characters (a 100-word passage holds about 160 Chinese characters), and sentences also
end at 。！？. Korean separates its words by spaces and is counted as English is.
"""

from __future__ import annotations

import re

from odqa.core.types import Document, Passage

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace and a capital,
# digit, Hangul or opening quote; or at 。！？ (Chinese, Japanese) with or without a space after. Good enough
# for encyclopedic prose; abbreviations cost a slightly early cut only.
_SENTENCE_END = re.compile(
    r"""(?<=[.!?])(["'”’)\]]*)\s+(?=["'“‘(\[]?[A-Z0-9\uac00-\ud7a3\u3131-\u318e])"""
    r"""|(?<=[。！？])([”’」』）)】]*)\s*"""
)
# Characters of scripts written without spaces between words: CJK punctuation, kana, Han, full-width forms
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# A token: one such character, or a run of other non-space characters (a word)
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_WORD = re.compile(r"\S+")
# Characters of Chinese text per English word (translators' rule of thumb: 1,000 English words come to
# about 1,500-1,800 Chinese characters)
CJK_CHARS_PER_WORD = 1.6


def _mostly_cjk(text: str) -> bool:
    """Whether most of `text`'s characters are CJK: such text is measured in characters (English with a name
    in Chinese characters stays measured in words, so its passages do not move)."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk > 0 and 2 * cjk > len(text) - sum(c.isspace() for c in text)


def _tokens(text: str, start: int, end: int) -> list[tuple[int, int, float]]:
    """(start, end, words) of each token of text[start:end]. Mostly CJK text: a CJK character counts
    1/CJK_CHARS_PER_WORD of a word, any other run of non-space characters one word; else whitespace words."""
    if not _mostly_cjk(text[start:end]):
        return [(m.start(), m.end(), 1.0) for m in _WORD.finditer(text, start, end)]
    return [
        (m.start(), m.end(), 1 / CJK_CHARS_PER_WORD if _CJK_CHAR.fullmatch(m.group()) else 1.0)
        for m in _TOKEN.finditer(text, start, end)
    ]


def count_words(text: str) -> float:
    """Length in words: whitespace words, or for mostly CJK text CJK characters at CJK_CHARS_PER_WORD a word."""
    if not _mostly_cjk(text):
        return float(len(text.split()))
    return sum(w for _, _, w in _tokens(text, 0, len(text)))


def _sentences(text: str) -> list[tuple[int, int, float]]:
    """(start, end, words) of each sentence; paragraphs (lines) never share a sentence."""
    spans = []
    offset = 0
    for paragraph in text.split("\n"):
        p_start = offset
        offset += len(paragraph) + 1
        if not paragraph.strip():
            continue
        cut = p_start
        for match in _SENTENCE_END.finditer(paragraph):
            closing = 1 if match.group(1) is not None else 2
            spans.append((cut, p_start + match.end(closing)))  # closing quotes and brackets stay with their sentence
            cut = p_start + match.end()
        spans.append((cut, p_start + len(paragraph.rstrip())))
    out = []
    for start, end in spans:
        segment = text[start:end]
        lead = len(segment) - len(segment.lstrip())
        if segment.strip():
            out.append((start + lead, end, count_words(segment)))
    return out


def _split_long(text: str, start: int, end: int, words: int) -> list[tuple[int, int, float]]:
    """A sentence longer than `words`, cut into pieces of at most `words` words (CJK: between characters)."""
    pieces: list[list] = []  # [start, end, words]
    for s, e, w in _tokens(text, start, end):
        if pieces and pieces[-1][2] + w <= words + 1e-9:
            pieces[-1][1] = e
            pieces[-1][2] += w
        else:
            pieces.append([s, e, w])
    return [(s, e, w) for s, e, w in pieces]


def chunk_document(doc: Document, words: int = 100, min_words: int | None = None) -> list[Passage]:
    """Pack sentences into passages of at most `words` words (a tail shorter than `min_words` joins the
    passage before it when the two together stay within 1.5 x `words`)."""
    if words <= 0:
        raise ValueError("words must be positive")
    min_words = words // 4 if min_words is None else min_words
    units: list[tuple[int, int, float]] = []
    for start, end, n in _sentences(doc.text):
        units.extend(_split_long(doc.text, start, end, words) if n > words else [(start, end, n)])
    groups: list[list] = []  # [start, end, words]
    for start, end, n in units:
        if groups and groups[-1][2] + n <= words + 1e-9:
            groups[-1][1] = end
            groups[-1][2] += n
        else:
            groups.append([start, end, n])
    if len(groups) > 1 and groups[-1][2] < min_words and groups[-2][2] + groups[-1][2] <= words * 1.5:
        tail = groups.pop()
        groups[-1][1], groups[-1][2] = tail[1], groups[-1][2] + tail[2]
    return [
        Passage(id=f"{doc.id}_{i}", title=doc.title, text=doc.text[s:e], doc_id=doc.id, start=s, end=e, url=doc.url)
        for i, (s, e, _) in enumerate(groups)
    ]
