"""Baseline linker: spaCy NER finds mentions; the alias table gives each the most popular entity with that
alias (popularity = article length). The same `link(questions)` interface as `Linker`."""

from __future__ import annotations

from collections.abc import Sequence

from odqa.core.nlp import load_spacy
from odqa.core.types import Mention

SKIP_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})


class SpacyAliasLinker:
    def __init__(self, kb, nlp=None):
        self.kb = kb
        self.nlp = nlp or load_spacy()

    def link(self, questions: Sequence[str], batch_size: int = 64) -> list[list[Mention]]:
        out = []
        for question, doc in zip(questions, self.nlp.pipe([q or "" for q in questions], batch_size=batch_size)):
            mentions = []
            for ent in doc.ents:
                if ent.label_ in SKIP_LABELS:
                    continue
                start, end = ent.start_char, ent.end_char
                text = question[start:end]
                if text.lower().startswith("the "):  # spaCy often includes the article
                    rows = self.kb.matcher.candidates(text) or self.kb.matcher.candidates(text[4:])
                    if not self.kb.matcher.candidates(text):
                        start += 4
                else:
                    rows = self.kb.matcher.candidates(text)
                if not rows:
                    continue
                mentions.append(Mention(start, end, question[start:end], self.kb.entity(rows[0]), 1.0, 1.0, 1.0))
            out.append(mentions)
        return out
