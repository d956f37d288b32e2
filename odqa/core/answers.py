"""Answer matching as the reference implementations do it.

* `has_answer`: DPR's retrieval check: the answer's tokens occur as a contiguous run of the passage's
  tokens (NFD-normalised, uncased, DPR's SimpleTokenizer); for regex answers (CuratedTREC) a regex search.
  An answer with Chinese, Japanese or Korean characters is matched as a substring instead (NFKC, uncased,
  whitespace removed): DPR's tokens are runs of letters, so "欧洲" would never match "在欧洲" and "임종석"
  never "임종석이".
* `normalize_answer`, `exact_match`, `f1_score`: the official SQuAD v1.1 evaluation script.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

import regex

from odqa.core.errors import DataFormatError

# DPR's SimpleTokenizer: runs of letters/digits/marks, or any single non-space non-control char.
_TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


def dpr_tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFD", text)
    return [m.group().lower() for m in _TOKEN.finditer(text)]


@lru_cache(maxsize=65536)
def _answer_tokens(answer: str) -> tuple[str, ...]:
    return tuple(dpr_tokens(answer))


_ESCAPE = re.compile(r"\\(.)", flags=re.DOTALL)


def _answer_pattern(pattern: str, nfd: bool) -> str:
    """`pattern` as matched: a backslash before a non-ASCII letter (CuratedTREC writes `Fran\\çois`) escapes
    nothing in Python's `re` and is dropped, so that NFD, which splits `\\ç` into `\\c` and a combining mark,
    cannot turn it into a bad escape."""
    pattern = _ESCAPE.sub(lambda m: m.group(1) if not m.group(1).isascii() else m.group(0), pattern)
    return unicodedata.normalize("NFD", pattern) if nfd else pattern


# CPU seconds one answer pattern may take over one text: patterns with nested repeats, such as (a+)+$, try every
# way to split a text and never end; a real answer pattern takes microseconds
REGEX_TIMEOUT_S = 1.0


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> regex.Pattern | str:
    """The pattern compiled (the `regex` module in its `re`-compatible V0 mode, which can bound a match in time),
    or why it does not compile."""
    try:
        return regex.compile(pattern, flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE | regex.V0)
    except regex.error as exc:
        return str(exc)


def _compile_regex(pattern: str) -> regex.Pattern:
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        raise DataFormatError(f"the answer regular expression {pattern!r} does not compile ({compiled})")
    return compiled


def _bounded(pattern: str, find, text: str):
    """`find(text, timeout=...)` (a compiled pattern's search or match), refused in one line naming the pattern
    where it takes more than REGEX_TIMEOUT_S of CPU."""
    try:
        return find(text, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise DataFormatError(
            f"the answer regular expression {pattern!r} took over {REGEX_TIMEOUT_S:g} s to match one text of "
            f"{len(text):,} characters (nested repeats such as (a+)+ try every way to split a text); rewrite it "
            "without repeats inside repeats"
        ) from None


def answer_regex_error(pattern: str) -> str | None:
    """Why a regex answer (CuratedTREC) cannot be used, or None: the question files refuse such a line, since
    a pattern that does not compile could only ever count as a miss."""
    for nfd in (False, True):
        compiled = _compiled(_answer_pattern(pattern, nfd))
        if isinstance(compiled, str):
            return compiled
    return None


def has_answer(text: str, answers: Sequence[str], regex_answers: bool = False) -> bool:
    if regex_answers:
        text = unicodedata.normalize("NFD", text)
        for pattern in answers:
            compiled = _compile_regex(_answer_pattern(pattern, nfd=True))
            if _bounded(pattern, compiled.search, text):
                return True
        return False
    return bool(answered_questions([text], [answers]))


_CJK = regex.compile(r"[\p{Han}\p{Hangul}\p{Hiragana}\p{Katakana}]")
_SPACE = regex.compile(r"\s+")


def cjk_substring_form(text: str) -> str:
    return _SPACE.sub("", unicodedata.normalize("NFKC", text).lower())


def answered_questions(texts: Iterable[str], answer_lists: Sequence[Sequence[str]]) -> set[int]:
    """Indices of the answer lists (token answers, as `has_answer` matches them) that some text holds: one pass
    over the texts with the answers indexed by first token, so a whole corpus costs one tokenisation."""
    by_first: dict[str, list[tuple[tuple[str, ...], int]]] = collections.defaultdict(list)
    substrings: list[tuple[str, int]] = []
    for index, answers in enumerate(answer_lists):
        for answer in answers:
            if _CJK.search(answer):
                if cjk_substring_form(answer):
                    substrings.append((cjk_substring_form(answer), index))
                continue
            target = _answer_tokens(answer)
            if target:
                by_first[target[0]].append((target, index))
    found: set[int] = set()
    for text in texts:
        if substrings:
            flat = cjk_substring_form(text)
            found.update(index for answer, index in substrings if index not in found and answer in flat)
            if len(found) == len(answer_lists):
                return found
        tokens = dpr_tokens(text)
        for i, token in enumerate(tokens):
            for target, index in by_first.get(token, ()):
                if index not in found and tuple(tokens[i : i + len(target)]) == target:
                    found.add(index)
                    if len(found) == len(answer_lists):
                        return found
    return found


# the official script's character filter and article pattern, built once (normalising is on the reader's hot path)
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (SQuAD v1.1)."""
    text = text.lower().translate(_DROP_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(truth).split()
    common = collections.Counter(pred_tokens) & collections.Counter(truth_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def best_over_truths(metric, prediction: str, truths: Iterable[str]) -> float:
    truths = list(truths)
    if not truths:
        return 0.0
    return max(metric(prediction, t) for t in truths)


def regex_match(prediction: str, patterns: Iterable[str]) -> float:
    """EM for regex answers (CuratedTREC), DrQA's and ORQA's official rule: a pattern matches at the start of
    the prediction (a match, so "Sept 1987" counts for "Sept?(ember)?")."""
    for pattern in patterns:
        compiled = _compile_regex(_answer_pattern(pattern, nfd=False))
        if _bounded(pattern, compiled.match, prediction):
            return 1.0
    return 0.0
