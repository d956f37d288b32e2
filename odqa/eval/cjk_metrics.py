"""The official reader metrics of KorQuAD 1.0 and CMRC 2018, as their evaluation scripts compute them.

* KorQuAD 1.0 (`evaluate-v1.0.py`): the answer is normalised (quotes, 《》〈〉<>() and ‘’ to spaces,
  lower case, ASCII punctuation removed, whitespace collapsed); EM compares the normalised strings, F1 counts
  the characters the two share (whitespace dropped), so a particle more or less costs a little, not all.
* CMRC 2018 (`cmrc2018_evaluate.py`): "mixed segmentation": every Chinese character (and each of the
  script's punctuation marks) is a token, other stretches are split into words by NLTK's word tokenizer; F1
  from the longest common substring of the two token lists; EM after removing that punctuation.
Per question both take the maximum over the gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_KORQUAD_SPACED = re.compile("['\"《》<>〈〉()‘’]")
_ASCII_PUNCT = set(string.punctuation)
# the separator list of cmrc2018_evaluate.py (its '……' is two characters, so never one character of a text)
_CMRC_PUNCT = {
    "-",
    ":",
    "_",
    "*",
    "^",
    "/",
    "\\",
    "~",
    "`",
    "+",
    "=",
    "，",
    "。",
    "：",
    "？",
    "！",
    "“",
    "”",
    "；",
    "’",
    "《",
    "》",
    "……",
    "·",
    "、",
    "「",
    "」",
    "（",
    "）",
    "－",
    "～",
    "『",
    "』",
}
_HAN = re.compile("[\u4e00-\u9fa5]")


def korquad_normalize(text: str) -> str:
    text = _KORQUAD_SPACED.sub(" ", text).lower()
    return " ".join("".join(ch for ch in text if ch not in _ASCII_PUNCT).split())


def korquad_exact_match(prediction: str, truth: str) -> float:
    return float(korquad_normalize(prediction) == korquad_normalize(truth))


def korquad_f1(prediction: str, truth: str) -> float:
    pred = list(korquad_normalize(prediction).replace(" ", ""))
    gold = list(korquad_normalize(truth).replace(" ", ""))
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _word_tokenize(text: str) -> list[str]:
    from nltk.tokenize import NLTKWordTokenizer  # the word step of nltk.word_tokenize (needs no punkt data)

    return NLTKWordTokenizer().tokenize(text)


def mixed_segmentation(text: str, remove_punctuation: bool = False) -> list[str]:
    segments: list[str] = []
    pending = ""
    for char in str(text).lower().strip():
        if remove_punctuation and char in _CMRC_PUNCT:
            continue
        if _HAN.match(char) or char in _CMRC_PUNCT:
            if pending:
                segments.extend(_word_tokenize(pending))
                pending = ""
            segments.append(char)
        else:
            pending += char
    if pending:
        segments.extend(_word_tokenize(pending))
    return segments


def _longest_common_substring(a: list[str], b: list[str]) -> int:
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def cmrc_f1(prediction: str, truth: str) -> float:
    gold = mixed_segmentation(truth, remove_punctuation=True)
    pred = mixed_segmentation(prediction, remove_punctuation=True)
    same = _longest_common_substring(gold, pred)
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def cmrc_exact_match(prediction: str, truth: str) -> float:
    def strip(text: str) -> str:
        return "".join(ch for ch in str(text).lower().strip() if ch not in _CMRC_PUNCT)

    return float(strip(prediction) == strip(truth))
