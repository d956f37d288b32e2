"""Entity-linking data: the public question sets as they are published, turned into `ELExample`s with
character spans. Where a set names only the entity, its span is found by matching the entity's aliases
(case-insensitive, longest match), then by a fuzzy window match for misspelt or inflected mentions."""

from __future__ import annotations

import difflib
import json
import random
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odqa.core.errors import DataFormatError
from odqa.core.inputs import check_input
from odqa.linker.aliases import AliasMatcher, make_aliases, tokenize, trim_possessive

_RESOURCE = re.compile(r"<?http://dbpedia\.org/resource/([^>\s]+)>?")


@dataclass
class GoldMention:
    start: int  # -1 where the set gives no span (implicit entity)
    end: int
    title: str | None  # None: a mention whose entity is unknown (span-only supervision)
    row: int = -1  # KB row; -1 when out of KB or unknown

    @property
    def has_span(self) -> bool:
        return self.start >= 0

    @property
    def in_kb(self) -> bool:
        return self.row >= 0


@dataclass
class ELExample:
    question: str
    mentions: list[GoldMention] = field(default_factory=list)
    source: str = ""
    id: str = ""
    complete: bool = True  # every gold entity has a span: the other spans are true negatives
    weight: float = 1.0


def dbpedia_title(uri: str) -> str:
    """http://dbpedia.org/resource/John_Forbes_(British_Army_officer) -> John Forbes (British Army officer)."""
    name = uri.rsplit("/resource/", 1)[-1].strip("<>")
    return urllib.parse.unquote(name).replace("_", " ")


def normalize_question(q: str) -> str:
    return " ".join(re.findall(r"\w+", q.lower()))


def locate(question: str, title: str, aliases: Sequence[str] = (), fuzzy: float = 0.8) -> tuple[int, int] | None:
    """Character span of `title` (or one of its aliases) in `question`, or None."""
    names = list(dict.fromkeys([*aliases, *make_aliases(title)]))
    matcher = AliasMatcher()
    for name in names:
        matcher.add(name, 0)
    found = matcher.find(question)
    if found:
        best = max(found, key=lambda m: m.end - m.start)
        return _drop_article(question, (best.start, best.end))
    if fuzzy <= 0:
        return None
    tokens = [t for t in tokenize(question) if t.text[0].isalnum()]
    targets = [n.lower() for n in names if n]
    best_span, best_ratio = None, fuzzy
    for i in range(len(tokens)):
        for j in range(i, min(i + 10, len(tokens))):
            start, end = tokens[i].start, trim_possessive(question, tokens[i].start, tokens[j].end)
            window = question[start:end].lower()
            for target in targets:
                if abs(len(window) - len(target)) > max(4, len(target) // 3):
                    continue
                ratio = difflib.SequenceMatcher(None, window, target).ratio()
                if ratio > best_ratio or (
                    ratio == best_ratio and best_span and end - start > best_span[1] - best_span[0]
                ):
                    best_span, best_ratio = (start, end), ratio
    return _drop_article(question, best_span) if best_span else None


def _drop_article(question: str, span: tuple[int, int]) -> tuple[int, int]:
    """A lower-case leading "the " is not part of the name ("the sarah jane adventure")."""
    if question[span[0] : span[0] + 4] == "the " and span[1] - span[0] > 4:
        return span[0] + 4, span[1]
    return span


def _example(question: str, titles: Iterable[str], kb, source: str, qid: str = "") -> ELExample:
    mentions = []
    complete = True
    for title in dict.fromkeys(titles):
        row = kb.row_of_title(title) if kb is not None else None
        row = -1 if row is None else row
        aliases = kb.entries[row].aliases if row >= 0 else ()
        span = locate(question, title, aliases)
        if span is None:
            complete = False
            mentions.append(GoldMention(-1, -1, title, row))
        else:
            mentions.append(GoldMention(span[0], span[1], title, row))
    return ELExample(question, mentions, source, qid, complete)


def _read_json(path: str | Path):
    check_input(path, "entity-linking file")
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path} is not valid JSON: {exc}") from exc


def load_lcquad(path, kb=None) -> list[ELExample]:
    out = []
    for row in _read_json(path):
        question = row.get("corrected_question") or row.get("question") or ""
        if not isinstance(question, str) or not question.strip():
            continue
        titles = [dbpedia_title(m) for m in _RESOURCE.findall(row.get("sparql_query", ""))]
        out.append(_example(question, titles, kb, "lcquad", str(row.get("_id", ""))))
    return out


def load_mentions_file(path, kb=None, source: str = "") -> list[ELExample]:
    """QALD `*.mentions.json` (gold mention text) or Complex-EL4QA (`question`, `dbr`), grouped by question."""
    data = _read_json(path)
    rows = data["questions"] if isinstance(data, dict) else data
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["question"], []).append(row)
    out = []
    for question, items in grouped.items():
        mentions, seen, complete = [], set(), True
        for item in items:
            title = dbpedia_title(item["dbr"])
            r = kb.row_of_title(title) if kb is not None else None
            r = -1 if r is None else r
            surface = item.get("mention")
            if surface is None and "mention" not in item and "mention_d1" not in item:  # Complex-EL4QA: locate
                span = locate(question, title, kb.entries[r].aliases if r >= 0 else ())
            elif surface:
                span = _find(question, surface)
            else:
                span = None  # implicit entity ("" or a discontinuous mention)
            if span is None:
                complete = False
            key = (span, title)
            if key in seen:
                continue
            seen.add(key)
            mentions.append(GoldMention(span[0] if span else -1, span[1] if span else -1, title, r))
        out.append(
            ELExample(question, mentions, source or Path(path).stem, str(items[0].get("question_id", "")), complete)
        )
    return out


def _find(question: str, surface: str) -> tuple[int, int] | None:
    pos = question.find(surface)
    if pos < 0:
        pos = question.lower().find(surface.lower())
    if pos < 0:  # "president of the United States" in "... presidents of the United States?"
        matcher = AliasMatcher()
        matcher.add(surface, 0)
        found = matcher.find(question)
        return (found[0].start, found[0].end) if found else None
    end = pos + len(surface)
    while end > pos and not question[end - 1].isalnum():  # "The Sopranos!" -> "The Sopranos"
        end -= 1
    return pos, end


def load_qald_questions(folder) -> set[str]:
    """Normalised question strings of every QALD file in `folder` (to drop duplicates from training)."""
    out = set()
    for path in sorted(Path(folder).glob("qald-*.json")):
        data = _read_json(path)
        rows = data["questions"] if isinstance(data, dict) else data
        for row in rows:
            q = row.get("question")
            if isinstance(q, list):
                for item in q:
                    if item.get("language", "en") == "en" and item.get("string"):
                        out.add(normalize_question(item["string"]))
            elif isinstance(q, str):
                out.add(normalize_question(q))
    return out


def load_webquestions_entities(questions_path, entities_path, kb=None) -> list[ELExample]:
    """WebQuestions with its NER entity strings: spans with entity known only where the string is exactly
    the title of one KB article; otherwise span-only supervision (title None)."""
    questions = {q["qId"]: q["qText"] for q in _read_json(questions_path)}
    out = []
    for row in _read_json(entities_path):
        question = questions.get(row["qId"])
        if not question:
            continue
        mentions = []
        used: list[tuple[int, int]] = []
        for text, tag in row.get("entities", []):
            if tag not in ("PERSON", "LOCATION", "ORGANIZATION", "MISC"):
                continue
            span = _find(question, text)
            if span is None or any(not (span[1] <= s or e <= span[0]) for s, e in used):
                continue
            used.append(span)
            r = kb.row_of_title(question[span[0] : span[1]]) if kb is not None else None
            if r is not None:
                mentions.append(GoldMention(span[0], span[1], kb.entries[r].title, r))
            else:
                mentions.append(GoldMention(span[0], span[1], None, -1))
        out.append(ELExample(question, mentions, "webquestions", row["qId"], True))
    return out


def load_el_file(path, kb=None) -> list[ELExample]:
    """Any supported entity-linking file, by its shape."""
    path = Path(path)
    data = _read_json(path)
    rows = data["questions"] if isinstance(data, dict) and "questions" in data else data
    if isinstance(rows, list) and rows and isinstance(rows[0], dict):
        if "sparql_query" in rows[0]:
            return load_lcquad(path, kb)
        if "dbr" in rows[0]:
            return load_mentions_file(path, kb)
        if "text" in rows[0] and "labels" in rows[0]:
            return load_elevant(path, kb)
    raise DataFormatError(
        f"{path}: not a supported entity-linking file (LC-QuAD JSON, QALD/Complex-EL4QA mentions JSON, ELEVANT JSONL)"
    )


def load_elevant(path, kb=None) -> list[ELExample]:
    raise DataFormatError(f"{path}: ELEVANT documents are not supported by this command yet")


def weak_examples(kb, n_articles: int = 6000, max_examples: int = 6000, seed: int = 0) -> list[ELExample]:
    """Weak supervision from Wikipedia text: sentences of article descriptions where another article's
    title occurs capitalised as written (the title names the entity)."""
    rng = random.Random(seed)
    rows = rng.sample(range(len(kb)), min(n_articles, len(kb)))
    out = []
    for r in rows:
        text = kb.entries[r].description
        sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
        for sentence in sentences[1:4]:  # the first sentence only defines the article's own title
            words = sentence.split()
            if not 6 <= len(words) <= 35:
                continue
            mentions = []
            for match in kb.matcher.find(sentence):
                if match.start == 0 or not match.text[:1].isupper():
                    continue
                exact = [c for c in match.entities[:5] if kb.entries[c].title == match.text]
                if not exact:
                    continue
                mentions.append(GoldMention(match.start, match.end, kb.entries[exact[0]].title, exact[0]))
            if mentions:
                out.append(ELExample(sentence, mentions, "wiki-weak", kb.entries[r].id, True, weight=0.5))
            if len(out) >= max_examples:
                return out
    return out


def id_number(qid: str) -> int:
    """A question id as a number (non-numeric ids: the sum of their characters), for deterministic splits."""
    try:
        return int(qid)
    except ValueError:
        return sum(map(ord, qid))


# sentences of a paragraph, in any of the three languages: Chinese and Korean end them with full-width marks too
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
SILVER_SENTENCE_CHARS = (10, 100)  # the length of a paragraph sentence kept as a silver example's text


@dataclass
class SilverSplit:
    """Silver entity-linking examples of one SQuAD-style corpus (KorQuAD, CMRC 2018, DRCD): article titles found
    in the questions and paragraph sentences, split by whole articles so that no dev article is trained on."""

    train: list[ELExample]
    dev: list[ELExample]
    articles: int
    dev_articles: int


def silver_examples(kb, path: str | Path, dev_every: int = 5, per_article: int = 40) -> SilverSplit:
    """Silver mentions in a SQuAD-style file whose articles are entities of `kb`: wherever an article's title (or
    one of its aliases, Traditional Chinese folded to Simplified) occurs in a question or a paragraph sentence of
    any article of the file, that span links to the title's entity. Every `dev_every`-th article (by a hash of
    its title) and all text of it go to the dev split. The rest of the sentence is unlabelled (`complete` False),
    at most `per_article` examples of each article."""
    data = _read_json(path)
    source = Path(path).stem
    train: list[ELExample] = []
    dev: list[ELExample] = []
    dev_articles = 0
    for number, article in enumerate(data.get("data", [])):
        title = str(article.get("title", "")).replace("_", " ")
        held_out = _stable_hash(title) % dev_every == 0
        dev_articles += held_out
        texts = [qa.get("question", "") for p in article.get("paragraphs", []) for qa in p.get("qas", [])]
        texts += [
            s
            for p in article.get("paragraphs", [])
            for s in _SENTENCE_END.split(p.get("context", ""))
            if SILVER_SENTENCE_CHARS[0] <= len(s) <= SILVER_SENTENCE_CHARS[1]
        ]
        kept = 0
        for n, text in enumerate(texts):
            mentions = _title_mentions(kb, text)
            if not mentions:
                continue
            example = ELExample(text, mentions, f"silver-{source}", f"{source}:{number}:{n}", False, weight=0.5)
            (dev if held_out else train).append(example)
            kept += 1
            if kept >= per_article:
                break
    return SilverSplit(train, dev, len(data.get("data", [])), dev_articles)


def _title_mentions(kb, text: str) -> list[GoldMention]:
    """Spans of `text` that are exactly an entity's title (keys compared as the alias matcher makes them)."""
    from odqa.linker.aliases import alias_key

    mentions = []
    for match in kb.matcher.find(text):
        key = alias_key(match.text)
        exact = [row for row in match.entities[:5] if alias_key(kb.entries[row].title) == key]
        if exact and len(key) >= 2:
            mentions.append(GoldMention(match.start, match.end, kb.entries[exact[0]].title, exact[0]))
    return mentions


def _stable_hash(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:4], "big")
