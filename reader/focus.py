"""Reading less of each passage: the run of its sentences that best matches the question.

The reader's cost grows with the tokens it reads, and a retrieved passage of about 100 words usually holds
the answer in the sentence that shares the most terms with the question (or next to it). `focus_span` picks
that sentence, then widens the run one neighbouring sentence at a time (the neighbour sharing more question
terms first, the earlier one on a tie: it tends to name what a pronoun in the best sentence refers to) for as
long as the run stays within `max_words` words. The reader then reads that run only and maps its answers'
offsets back into the whole passage.

A passage already within `max_words`, or one where no sentence shares a term with the question (another
language, a question the terms do not reach), is read whole: there is nothing to choose by.
Terms are those of the BM25 index's English analyser (lower-cased, stop words dropped, stemmed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# a sentence ends at ., ! or ? (closing quotes and brackets included) before white space, at a full-width
# stop (no space follows it in Chinese or Japanese), or at a line break
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+|[\u3002\uff01\uff1f]+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the sentences of `text`, surrounding white space left out."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def words_of(text: str) -> float:
    """The length of `text` in words: white-space words (a Korean word with its particles is one), with two Han
    characters counting as one word (Chinese writes no spaces; its words average under two characters)."""
    return sum(max(1.0, len(_HAN.findall(word)) / 2) for word in text.split())


def focus_span(
    question_terms: set[str], text: str, max_words: int, analyze: Callable[[str], list[str]]
) -> tuple[int, int]:
    """The character span [start, end) of `text` to read for a question with `question_terms` (see the module
    docstring); (0, len(text)) when the whole passage is to be read."""
    whole = (0, len(text))
    if max_words <= 0 or words_of(text) <= max_words:
        return whole
    sentences = sentence_spans(text)
    if len(sentences) <= 1:
        return whole
    overlap = [len(question_terms.intersection(analyze(text[a:b]))) for a, b in sentences]
    words = [words_of(text[a:b]) for a, b in sentences]
    best = max(range(len(sentences)), key=lambda i: (overlap[i], -i))
    if overlap[best] == 0:
        return whole
    lo = hi = best
    used = words[best]
    while True:
        sides = [i for i in (lo - 1, hi + 1) if 0 <= i < len(sentences) and used + words[i] <= max_words]
        if not sides:
            break
        pick = max(sides, key=lambda i: (overlap[i], -i))
        used += words[pick]
        lo, hi = min(lo, pick), max(hi, pick)
    return sentences[lo][0], sentences[hi][1]


class Focus:
    """`focus_span` for many (question, passage) pairs, with the analyser of each passage's language (English: the
    BM25 index's; Korean and Chinese: character bigrams, which find a question's words however particles and
    segmentation differ); with `whole_first` N, the passages placed first to N-th among their question's are read
    whole. `analyze` given: that one for every language."""

    def __init__(self, max_words: int, analyze: Callable[[str], list[str]] | None = None, whole_first: int = 0):
        self.max_words = max_words
        self.whole_first = whole_first
        self._given = analyze
        self._analyzers: dict[str, Callable[[str], list[str]]] = {}

    def analyzer(self, text: str) -> Callable[[str], list[str]]:
        """The analyser of `text`'s language."""
        if self._given is not None:
            return self._given
        from odqa.indexes.analysis import detect_language

        language = detect_language([text])
        if language not in self._analyzers:
            self._analyzers[language] = _analyzer_for(language)
        return self._analyzers[language]

    def spans(
        self, questions: Sequence[str], texts: Sequence[str], places: Sequence[int] | None = None
    ) -> list[tuple[int, int]]:
        """The span of each text to read; `places` (each passage's place among its question's, from 0) let the
        first `whole_first` be read whole; without them every passage is focused."""
        terms: dict[tuple[str, int], set[str]] = {}
        out = []
        for i, (question, text) in enumerate(zip(questions, texts)):
            if places is not None and places[i] < self.whole_first:
                out.append((0, len(text)))
                continue
            analyze = self.analyzer(text)
            key = (question, id(analyze))
            if key not in terms:
                terms[key] = set(analyze(question))
            out.append(focus_span(terms[key], text, self.max_words, analyze))
        return out


def _analyzer_for(language: str) -> Callable[[str], list[str]]:
    if language == "en":
        from odqa.indexes.bm25 import english_analyzer

        return english_analyzer()
    from odqa.indexes.analysis import get_analyzer

    return get_analyzer(f"{language}-bigram")
