"""Split a document into passages of about N words along sentence boundaries.

DPR cuts every 100 words regardless of sentences; we pack whole sentences instead (a sentence longer than
the budget is cut by words), never cross a paragraph mid-sentence (short paragraphs share a passage, joined
by their newline), and keep exact character offsets so
`doc.text[p.start:p.end] == p.text`.
"""

from __future__ import annotations

import re

from odqa.core.types import Document, Passage

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace and a capital,
# digit or opening quote. Good enough for encyclopedic prose; abbreviations cost a slightly early cut only.
_SENTENCE_END = re.compile(r"""(?<=[.!?])(["'”’)\]]*)\s+(?=["'“‘(\[]?[A-Z0-9])""")
_WORD = re.compile(r"\S+")


def _sentences(text: str) -> list[tuple[int, int, int]]:
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
            spans.append((cut, p_start + match.end(1)))  # closing quotes and brackets stay with their sentence
            cut = p_start + match.end()
        spans.append((cut, p_start + len(paragraph.rstrip())))
    out = []
    for start, end in spans:
        segment = text[start:end]
        lead = len(segment) - len(segment.lstrip())
        if segment.strip():
            out.append((start + lead, end, len(segment.split())))
    return out


def _split_long(text: str, start: int, end: int, words: int) -> list[tuple[int, int, int]]:
    spans = [m.span() for m in _WORD.finditer(text, start, end)]
    return [
        (spans[i][0], spans[min(i + words, len(spans)) - 1][1], min(words, len(spans) - i))
        for i in range(0, len(spans), words)
    ]


def chunk_document(doc: Document, words: int = 100, min_words: int | None = None) -> list[Passage]:
    """Pack sentences into passages of at most `words` words (a tail shorter than `min_words` joins the
    passage before it when the two together stay within 1.5 x `words`)."""
    if words <= 0:
        raise ValueError("words must be positive")
    min_words = words // 4 if min_words is None else min_words
    units: list[tuple[int, int, int]] = []
    for start, end, n in _sentences(doc.text):
        units.extend(_split_long(doc.text, start, end, words) if n > words else [(start, end, n)])
    groups: list[list[int]] = []  # [start, end, words]
    for start, end, n in units:
        if groups and groups[-1][2] + n <= words:
            groups[-1][1] = end
            groups[-1][2] += n
        else:
            groups.append([start, end, n])
    if len(groups) > 1 and groups[-1][2] < min_words and groups[-2][2] + groups[-1][2] <= words * 1.5:
        tail = groups.pop()
        groups[-1][1], groups[-1][2] = tail[1], groups[-1][2] + tail[2]
    return [
        Passage(id=f"{doc.id}_{i}", title=doc.title, text=doc.text[s:e], doc_id=doc.id, start=s, end=e)
        for i, (s, e, _) in enumerate(groups)
    ]
