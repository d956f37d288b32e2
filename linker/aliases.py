"""Aliases of knowledge-base entities and a case-insensitive, longest-match alias matcher.

Aliases come from what a plain-text Wikipedia article supports (no redirects, no anchor texts):
the title, the title without its parenthetical or comma qualifier, the subject of the first sentence,
forms introduced by "also known as / also called / or simply", acronyms in parentheses in the first
sentence, and a person's surname. Matching compares normalised word tokens: lower-cased, possessive
"'s" dropped and a plural "s" dropped, so "Egypt's" and "presidents" find "Egypt" and "President".
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Hangul, Han and kana are matched a character at a time: Chinese writes no spaces between words and Korean glues
# particles to them (알베르트 아인슈타인은), so an alias is found as a run of characters inside a longer word
_CJK_CHAR = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK_CHAR}]|(?:(?![{_CJK_CHAR}])\w)+(?:[-'’.&](?:(?![{_CJK_CHAR}])\w)+)*|[^\w\s]", re.UNICODE)
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# the most tokens an alias key may have: a CJK name of 20 characters is 20 tokens
MAX_ALIAS_TOKENS = 20
_PAREN = re.compile(r"\s*(?:\([^()]*\)|（[^（）]*）)")
_SUBJECT_VERB = re.compile(r"^(.{2,80}?)\s+(?:is|was|are|were|refers to|may refer to)\s", re.UNICODE)
_ALSO = re.compile(
    r"(?:also known as|also called|better known as|commonly known as|or simply)\s+"
    r"(?:the\s+)?\"?([A-Z][\w'’\-.& ]{1,50}?)\"?(?=[,;.)(]|\s+(?:is|was|or|and)\s)",
    re.UNICODE,
)
_ACRONYM = re.compile(r"\((?:the\s+)?([A-Z][A-Za-z0-9&.\-]{1,8})(?=[),;])")
_PERSON_DATES = re.compile(
    r"^[^.]{0,80}\((?:[^()]*?;\s*)?(?:born\s|[A-Z][a-z]+ \d{1,2}, \d{3,4}|\d{1,2} [A-Z][a-z]+ \d{3,4})"
)
KEY_SEPARATOR = "\x1f"  # between the normalised tokens of a stored alias key: never inside a token
STOPWORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom whose when "
    "where why how does do did give me list all that this these those it its as name many much".split()
)


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    return [Token(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def normalize_token(token: str) -> str:
    if _HAN.fullmatch(token):  # Traditional folded to Simplified, as the Chinese BM25 analysers fold it
        return fold_han(token)
    token = unicodedata.normalize("NFKD", token.lower())
    token = "".join(ch for ch in token if not unicodedata.combining(ch)).replace("’", "'")
    token = token.rstrip(".")
    if token.endswith("'s"):
        token = token[:-2]
    elif token.endswith("s'"):
        token = token[:-1]
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    return token


@functools.lru_cache(maxsize=1 << 16)
def fold_han(char: str) -> str:
    """A Han character in its Simplified form (OpenCC t2s, the `cjk` extra), unchanged where OpenCC is not
    installed: a knowledge base records whether its keys were folded (`ALIAS_SCHEME`)."""
    convert = _t2s()
    return convert(char) if convert is not None else char


@functools.lru_cache(maxsize=1)
def _t2s():
    try:
        import opencc
    except ImportError:
        return None
    return opencc.OpenCC("t2s").convert


def han_folding() -> bool:
    """Whether Han characters are folded to Simplified here (OpenCC installed)."""
    return _t2s() is not None


def alias_scheme() -> str:
    """How alias keys are made here, recorded by a knowledge base when its alias table is written: a table made
    another way finds other keys (`KnowledgeBase.matcher` compares)."""
    return "cjk-chars" + ("+t2s" if han_folding() else "")


def alias_key(text: str) -> tuple[str, ...]:
    return tuple(t for t in (normalize_token(tok.text) for tok in tokenize(text)) if t)


def strip_qualifier(title: str) -> str:
    """'Planner (programming language)' -> 'Planner'; 'Harpers Ferry, West Virginia' -> 'Harpers Ferry'."""
    base = _PAREN.sub("", title).strip()
    if "," in base:
        head = base.split(",", 1)[0].strip()
        if head:
            base = head
    return base


def first_sentence(text: str) -> str:
    paragraph = text.split("\n", 1)[0]
    match = re.search(r"(?<=[a-z0-9)\]\"])\.\s+(?=[A-Z])", paragraph)
    return paragraph[: match.start() + 1] if match else paragraph


def make_aliases(title: str, text: str = "") -> tuple[str, ...]:
    """The aliases of one article, title first, without duplicates (compared by `alias_key`)."""
    candidates = [title, strip_qualifier(title)]
    sentence = first_sentence(text) if text else ""
    if sentence:
        clean = _PAREN.sub("", sentence)
        clean = re.sub(r"^(?:In [^,]{1,60},\s*)", "", clean)
        match = _SUBJECT_VERB.match(clean)
        title_words = {w for w in alias_key(strip_qualifier(title)) if w not in STOPWORDS}
        if match:
            parts = [
                re.sub(r"^(?:the|an?)\s+", "", part.strip(" ,\"'"), flags=re.IGNORECASE)
                for part in re.split(r",?\s+or\s+", match.group(1))
            ]
            # The subject names this article only when it contains the whole title ("Andre Kirk Agassi" for
            # Andre Agassi); "The United States is ..." opening "Economy of the United States" does not.
            if parts and title_words and title_words <= set(alias_key(parts[0])):
                for subject in parts:
                    if any(ch in subject for ch in ',;:"[]()') or not subject:
                        continue
                    if len(subject.split()) <= 6 and not subject.lower().startswith(("this ", "it ", "there ")):
                        candidates.append(subject)
        for found in _ALSO.findall(sentence)[:2]:
            if len(found.split()) <= 6:
                candidates.append(found.strip())
        for acronym in _ACRONYM.findall(sentence[:200]):
            acronym = acronym.rstrip(".,")
            if sum(ch.isupper() for ch in acronym) >= 2 and acronym[0] == title[:1].upper():
                candidates.append(acronym)
        base = strip_qualifier(title)
        words = base.split()
        if 2 <= len(words) <= 4 and all(w[:1].isupper() for w in words) and _PERSON_DATES.match(sentence):
            candidates.append(words[-1])  # a person's surname: "Lincoln" for Abraham Lincoln
    out, seen = [], set()
    for alias in candidates:
        alias = alias.strip()
        key = alias_key(alias)
        if not key or key in seen or len(key) > MAX_ALIAS_TOKENS:
            continue
        if len(key) == 1 and (key[0] in STOPWORDS or alias.lower() in STOPWORDS or len(key[0]) < 2):
            continue
        seen.add(key)
        out.append(alias)
    return tuple(out)


def matchable_key(alias: str, max_tokens: int = MAX_ALIAS_TOKENS) -> tuple[str, ...] | None:
    """The alias's key, or None for an alias that never matches: empty, longer than `max_tokens`, or a single
    stopword."""
    key = alias_key(alias)
    if not key or len(key) > max_tokens:
        return None
    if len(key) == 1 and (key[0] in STOPWORDS or alias.strip().lower() in STOPWORDS):
        return None
    return key


def entity_alias_prior(prior: float, position: int) -> float:
    """An entity's first alias is its title: an exact title outranks any other alias."""
    return prior + (1000.0 if position == 0 else 0.0)


@dataclass
class AliasMatch:
    start: int  # character offsets into the text
    end: int
    text: str
    entities: list[int]  # candidate entity rows, most popular first


class AliasMatcher:
    """Finds non-overlapping alias occurrences, longest first, scanning left to right.

    `add(alias, row, prior)` registers an alias of entity `row`; candidates of one alias are ranked by
    `prior` (e.g. article length). Single stopwords never match.
    """

    def __init__(self, max_tokens: int = MAX_ALIAS_TOKENS):
        self.max_tokens = max_tokens
        self._table: dict[tuple[str, ...], dict[int, float]] = {}
        self._ranked: dict[tuple[str, ...], list[int]] | None = None

    def add(self, alias: str, row: int, prior: float = 0.0) -> None:
        key = matchable_key(alias, self.max_tokens)
        if key is None:
            return
        bucket = self._table.setdefault(key, {})
        bucket[row] = max(prior, bucket.get(row, float("-inf")))
        self._ranked = None

    @classmethod
    def from_entities(cls, aliases: Sequence[Iterable[str]], priors: Sequence[float] | None = None) -> AliasMatcher:
        """The first alias of each entity is its title: an exact title outranks any other alias."""
        matcher = cls()
        for row, names in enumerate(aliases):
            prior = priors[row] if priors is not None else 0.0
            for n, alias in enumerate(names):
                matcher.add(alias, row, entity_alias_prior(prior, n))
        return matcher

    def __len__(self) -> int:
        return len(self._table)

    def candidates(self, text: str) -> list[int]:
        return self.lookup(alias_key(text))

    def lookup(self, key: tuple[str, ...]) -> list[int]:
        """The entity rows of one alias key, most popular first."""
        return list(self._rank().get(key, []))

    def ranked(self) -> Iterator[tuple[tuple[str, ...], list[int]]]:
        return iter(self._rank().items())

    def _rank(self) -> dict[tuple[str, ...], list[int]]:
        if self._ranked is None:
            self._ranked = {k: [r for r, _ in sorted(v.items(), key=lambda kv: -kv[1])] for k, v in self._table.items()}
        return self._ranked

    def find(self, text: str, spans: Sequence[tuple[int, int]] | None = None) -> list[AliasMatch]:
        """All matches in `text`; with `spans`, only inside those character ranges."""
        tokens = tokenize(text)
        keys = [normalize_token(t.text) for t in tokens]
        allowed = None
        if spans is not None:
            allowed = [any(s <= t.start and t.end <= e for s, e in spans) for t in tokens]
        out = []
        i = 0
        while i < len(tokens):
            if not _starts_word(text, tokens[i]):
                i += 1
                continue
            found = None
            for n in range(min(self.max_tokens, len(tokens) - i), 0, -1):
                if allowed is not None and not all(allowed[i : i + n]):
                    continue
                rows = self.lookup(tuple(keys[i : i + n]))
                if rows:
                    found = (n, rows)
                    break
            if found is None:
                i += 1
                continue
            n, rows = found
            start = tokens[i].start
            end = trim_possessive(text, start, tokens[i + n - 1].end)
            out.append(AliasMatch(start, end, text[start:end], list(rows)))
            i += n
        return out


def _starts_word(text: str, token: Token) -> bool:
    """A match may begin here: anywhere in Chinese, but a Korean name begins a word (인도 is not found inside
    인도네시아's neighbour 동인도)."""
    return not (_HANGUL.match(token.text) and token.start > 0 and _HANGUL.match(text[token.start - 1]))


def trim_possessive(text: str, start: int, end: int) -> int:
    """End offset without a trailing possessive ('s / ’s)."""
    if text[start:end].endswith(("'s", "’s")) and end - start > 2:
        return end - 2
    return end


class StoredAliases(AliasMatcher):
    """An AliasMatcher's ranked table in an SQLite file, looked up on disk: a knowledge base of millions of
    entities answers its first question without building the table in memory (minutes and gigabytes at full
    Wikipedia's size). Read-only; one connection shared by threads under a lock."""

    def __init__(self, path: str | Path, max_tokens: int = MAX_ALIAS_TOKENS):
        super().__init__(max_tokens)
        import sqlite3
        import threading

        self.path = Path(path)
        self._connection = sqlite3.connect(
            f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        self._lock = threading.Lock()
        self._count: int | None = None

    @staticmethod
    def write_entities(
        path: str | Path, entities: Iterable[tuple[Sequence[str], float]], max_tokens: int = MAX_ALIAS_TOKENS
    ) -> None:
        """Store the table `AliasMatcher.from_entities` would rank, from (aliases, prior) of each row in order,
        without holding it in memory: the (alias, row, prior) triples are sorted by SQLite on disk."""
        import sqlite3

        with contextlib.closing(sqlite3.connect(str(path))) as connection:
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA temp_store = FILE")  # the pending triples of millions of entities sort on disk
            connection.execute("CREATE TABLE aliases (alias TEXT PRIMARY KEY, entities BLOB NOT NULL) WITHOUT ROWID")
            connection.execute(
                "CREATE TEMP TABLE pending (alias TEXT NOT NULL, row INTEGER NOT NULL, prior REAL NOT NULL)"
            )

            def triples():
                for row, (names, prior) in enumerate(entities):
                    for n, alias in enumerate(names):
                        key = matchable_key(alias, max_tokens)
                        if key is not None:
                            yield KEY_SEPARATOR.join(key), row, entity_alias_prior(prior, n)

            connection.executemany("INSERT INTO pending VALUES (?, ?, ?)", triples())
            # ties in prior keep the lower row first, as the in-memory matcher's stable sort does
            ranked = connection.execute(
                "SELECT alias, row, MAX(prior) AS best FROM pending GROUP BY alias, row ORDER BY alias, best DESC, row"
            )
            grouped = itertools.groupby(ranked, key=lambda found: found[0])
            connection.cursor().executemany(
                "INSERT INTO aliases VALUES (?, ?)",
                ((alias, np.asarray([row for _, row, _ in rows], dtype="<i4").tobytes()) for alias, rows in grouped),
            )
            connection.execute("DROP TABLE pending")
            connection.commit()

    def __len__(self) -> int:
        if self._count is None:
            with self._lock:
                self._count = self._connection.execute("SELECT COUNT(*) FROM aliases").fetchone()[0]
        return self._count

    def add(self, alias: str, row: int, prior: float = 0.0) -> None:
        raise TypeError("a stored alias table is read-only: rebuild the knowledge base to change its aliases")

    def lookup(self, key: tuple[str, ...]) -> list[int]:
        with self._lock:
            found = self._connection.execute(
                "SELECT entities FROM aliases WHERE alias = ?", (KEY_SEPARATOR.join(key),)
            ).fetchone()
        return np.frombuffer(found[0], dtype="<i4").tolist() if found else []

    def ranked(self) -> Iterator[tuple[tuple[str, ...], list[int]]]:
        with self._lock:
            rows = self._connection.execute("SELECT alias, entities FROM aliases").fetchall()
        return ((tuple(alias.split(KEY_SEPARATOR)), np.frombuffer(blob, dtype="<i4").tolist()) for alias, blob in rows)

    def close(self) -> None:
        self._connection.close()
