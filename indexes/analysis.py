"""Text analysers for BM25 in English, Korean and Chinese, and the language of a corpus.

English keeps Tantivy's own analyser (lowercase, stop words, Snowball stems; see indexes/bm25.py). Korean and
Chinese have no spaces between words (Chinese) or glue particles and endings to them (Korean), so their text
is analysed here in Python into terms that Tantivy then indexes as whitespace-separated tokens:

* `whitespace`: lower-cased whitespace tokens, punctuation removed (the baseline a CJK analyser must beat).
* `ko-kiwi`: Kiwi (kiwipiepy) morphemes without particles, endings, affixes and punctuation, i.e. the part-
  of-speech stop tags of Lucene's Nori analyser; verbs and adjectives by their stem.
* `zh-jieba`: Traditional folded to Simplified (OpenCC t2s), then jieba's search-mode words (a long word
  also yields its dictionary sub-words).
* `ko-bigram`, `zh-bigram`: overlapping character bigrams over runs of CJK characters (a lone character
  stays a unigram), other words whole, as Lucene's CJKAnalyzer; `zh-bigram` folds to Simplified first.

`DEFAULT_ANALYZER` names each language's default, chosen on the dev-paragraph benchmark in
bench/README.md (bench/retrieval_cjk.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache

import regex

from odqa.core.errors import OdqaError
from odqa.core.optional import installed, require

LANGUAGES = ("en", "ko", "zh")
LANGUAGE_NAMES = {"en": "English", "ko": "Korean", "zh": "Chinese"}
# `en` is Tantivy's native English analyser; the others are Python analysers (names below)
DEFAULT_ANALYZER = {"en": "en", "ko": "ko-bigram", "zh": "zh-bigram"}
ANALYZERS = ("en", "whitespace", "ko-kiwi", "ko-bigram", "zh-jieba", "zh-bigram")

# the optional packages (odqa[cjk]) each Python analyser needs
ANALYZER_NEEDS = {"ko-kiwi": ("kiwipiepy",), "zh-jieba": ("jieba", "opencc"), "zh-bigram": ("opencc",)}

_PUNCT = re.compile(r"[^\w\s]+", flags=re.UNICODE)
_CJK_RUN = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
# Nori's default stop tags (Lucene KoreanPartOfSpeechStopFilter), in Kiwi's tag names: endings, particles,
# adverbs, determiners, interjections, affixes, symbols
_KO_STOP_TAGS = ("E", "J", "IC", "MAG", "MAJ", "MM", "XP", "XS", "SF", "SP", "SS", "SE", "SO", "SW", "UN", "W_")


def get_analyzer(name: str) -> Callable[[str], list[str]]:
    """The Python analyser `name` (text -> terms); `en` has none (Tantivy analyses English itself)."""
    makers = {
        "whitespace": _whitespace,
        "ko-kiwi": _korean_morphemes,
        "ko-bigram": lambda: _bigrams(fold=False),
        "zh-jieba": _chinese_words,
        "zh-bigram": lambda: _bigrams(fold=True),
    }
    if name not in makers:
        raise OdqaError(f"unknown analyzer {name!r}; choose one of {', '.join(ANALYZERS)}")
    return makers[name]()


def check_analyzer_available(name: str) -> None:
    """Before a build or a search starts: an analyser whose package is missing is refused in one line."""
    for module in ANALYZER_NEEDS.get(name, ()):
        require(module, f"the {name} analyser")


def detect_language(texts: Sequence[str]) -> str:
    """`ko` if Hangul letters outnumber Han characters and Latin letters in `texts`, `zh` if Han characters
    do, else `en`. Script counts decide well for these three (Korean text carries some Hanja and Latin,
    Chinese some Latin; neither is mistaken for the other)."""
    counts = {"hangul": 0, "han": 0, "latin": 0}
    for text in texts:
        for char in text:
            code = ord(char)
            if 0xAC00 <= code < 0xD7B0 or 0x1100 <= code < 0x1200 or 0x3130 <= code < 0x3190:
                counts["hangul"] += 1
            elif 0x4E00 <= code < 0xA000 or 0x3400 <= code < 0x4DC0 or 0xF900 <= code < 0xFB00:
                counts["han"] += 1
            elif char.isascii() and char.isalpha():
                counts["latin"] += 1
    top = max(counts, key=counts.__getitem__)
    return {"hangul": "ko", "han": "zh"}.get(top, "en") if counts[top] else "en"


def language_tag(text: str) -> str:
    """The BCP 47 tag of `text`, for a page's `lang` attribute: `en`, `ko`, `zh-Hans` or `zh-Hant` (detect_language;
    Chinese is Traditional where OpenCC's Traditional-to-Simplified conversion changes more of its characters than
    the reverse does, Simplified where fewer); plain `zh` where neither tells (no character of one script only, or
    OpenCC not installed)."""
    language = detect_language([text])
    if language != "zh":
        return language
    if not installed("opencc"):
        return "zh"
    simplified, traditional = _script_changes(_to_simplified(), text), _script_changes(_to_traditional(), text)
    return "zh-Hant" if simplified > traditional else "zh-Hans" if traditional > simplified else "zh"


def _script_changes(convert: Callable[[str], str], text: str) -> int:
    converted = convert(text)
    return sum(a != b for a, b in zip(text, converted)) + abs(len(text) - len(converted))


def analyzer_for(language: str, analyzer: str | None = None) -> str:
    if language not in LANGUAGES:
        raise OdqaError(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)} or auto")
    return analyzer or DEFAULT_ANALYZER[language]


# The one text normalisation of BM25, of passages when they are indexed and of questions when they are searched, on
# every engine and analyser (indexes.bm25): NFKC (full-width Latin, ligatures and decomposed accents written as
# the usual letters) without Unicode format characters (zero-width spaces and joiners, soft hyphens, byte-order
# marks), which split or hide words. An index records that its passages went through it (its BM25 manifest's
# `normalization`); an index built before that searches its questions as it was built.
TEXT_NORMALIZATION = "nfkc-no-format-1"
_FORMAT_CHARS = regex.compile(r"\p{Cf}+")


def normalize_text(text: str) -> str:
    """`text` in NFKC, without format characters (TEXT_NORMALIZATION); ASCII text is returned as it is."""
    if text.isascii():
        return text
    return _FORMAT_CHARS.sub("", unicodedata.normalize("NFKC", text))


def query_normalizer(params: dict) -> Callable[[str], str]:
    """How the questions of a BM25 index with these manifest params are normalised: as its passages were."""
    return normalize_text if params.get("normalization") == TEXT_NORMALIZATION else (lambda text: text)


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _whitespace():
    def analyze(text: str) -> list[str]:
        return _PUNCT.sub(" ", _normalize(text)).split()

    return analyze


def _require(module: str, purpose: str):
    import importlib

    require(module, purpose)
    return importlib.import_module(module)


@lru_cache(maxsize=1)
def _kiwi():
    import warnings

    kiwipiepy = _require("kiwipiepy", "Korean analysis")
    with warnings.catch_warnings():  # it warns that 0 meant "all cores" before 0.21; one thread is what we ask
        warnings.simplefilter("ignore", DeprecationWarning)
        return kiwipiepy.Kiwi(num_workers=0)


def _korean_morphemes():
    kiwi = _kiwi()

    def analyze(text: str) -> list[str]:
        return [
            t.form.lower()
            for t in kiwi.tokenize(unicodedata.normalize("NFKC", text))
            if not t.tag.startswith(_KO_STOP_TAGS)
        ]

    return analyze


def korean_morphemes(text: str) -> list[tuple[int, int, str]]:
    """Kiwi's morphemes of `text` as (start, end, tag) in characters of `text` as given (not normalised, so the
    offsets index it); tags are Kiwi's (Sejong): NNG noun, JKG genitive particle, EF final ending ... The same
    Kiwi as the `ko-kiwi` analyser's, loaded once."""
    return [(t.start, t.start + t.len, t.tag) for t in _kiwi().tokenize(text)]


@lru_cache(maxsize=1)
def _to_simplified():
    return _require("opencc", "Chinese analysis").OpenCC("t2s").convert


@lru_cache(maxsize=1)
def _to_traditional():
    return _require("opencc", "Chinese analysis").OpenCC("s2t").convert


def to_simplified(text: str) -> str:
    """`text` with Traditional Chinese folded to Simplified (OpenCC t2s; other scripts unchanged)."""
    return _to_simplified()(text)


def _chinese_words():
    jieba = _require("jieba", "Chinese word segmentation")
    import logging

    jieba.setLogLevel(logging.WARNING)
    fold = _to_simplified()

    def analyze(text: str) -> list[str]:
        words = jieba.lcut_for_search(fold(_normalize(text)))
        return [w for w in (_PUNCT.sub("", w).strip() for w in words) if w]

    return analyze


def _bigrams(fold: bool):
    to_simplified = _to_simplified() if fold else (lambda text: text)

    def analyze(text: str) -> list[str]:
        terms = []
        for token in _PUNCT.sub(" ", to_simplified(_normalize(text))).split():
            last = 0
            for run in _CJK_RUN.finditer(token):
                if run.start() > last:
                    terms.append(token[last : run.start()])
                chars = run.group()
                terms.extend([chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)])
                last = run.end()
            if last < len(token):
                terms.append(token[last:])
        return terms

    return analyze
