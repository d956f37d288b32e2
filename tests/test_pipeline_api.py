"""The Python API past `ask` (issue 77): a search that needs no mentions, the source address of a passage in the
shell, one "no confident answer" a best guess, and a hint that names what is installed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.types import Answer, Passage, SearchHit
from odqa.pipeline import Pipeline, Result

DOCS = [
    {"id": "p", "title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in 1928 in London."},
    {"id": "e", "title": "Everest", "text": "Mount Everest is the highest mountain above sea level on Earth."},
]


def test_retrieve_needs_no_mentions(bm25_index_of):
    """`Pipeline.retrieve([q])` searches (a TypeError before: `mentions` was required); the questions are linked
    only where the entity bonus needs them, and a lone string is refused in one line."""
    pipeline = Pipeline(OdqaConfig.load(None, {"index": str(bm25_index_of(DOCS, "api")), "linker.enabled": False}))
    hits = pipeline.retrieve(["Who discovered penicillin?"], k=1)
    assert [[h.passage.title for h in found] for found in hits] == [["Penicillin"]]
    assert pipeline.retrieve(["Who discovered penicillin?"], [[]], k=1)[0][0].row == hits[0][0].row
    with pytest.raises(OdqaError, match=r"retrieve takes a list of questions"):
        pipeline.retrieve("Who discovered penicillin?")  # type: ignore[arg-type]
    with pytest.raises(OdqaError, match="2 mention lists for 1 questions"):
        pipeline.retrieve(["Who discovered penicillin?"], [[], []])


def _shell_lines(result: Result) -> list[str]:
    from odqa.shell import Shell

    lines: list[str] = []
    shell = Shell.__new__(Shell)
    shell.say, shell.color = lines.append, False
    shell.show(result)
    return lines


def test_the_shell_says_no_confident_answer_once_and_shows_the_source_address():
    url = "https://en.wikipedia.org/wiki/Penicillin"
    passage = Passage("p_0", "Penicillin", DOCS[0]["text"], "p", 0, 66, url)
    answer = Answer("Alexander Fleming", 18.6, 0.47, "p_0", "Penicillin", 29, 46, passage.text, confident=False)
    notice = "no confident answer: the best guess has p=0.47, below the threshold 0.54 chosen on dev"
    lines = _shell_lines(Result("q", [answer], [SearchHit(0, 1.0, passage, "bm25")], notices=[notice]))
    assert sum("no confident answer" in line for line in lines) == 1, lines
    assert f"     source: {url}" in lines
    lines = _shell_lines(Result("q", [answer], [SearchHit(0, 1.0, Passage("p_0", "P", passage.text), "bm25")]))
    assert "  no confident answer; best guess:" in lines and not [line for line in lines if "source:" in line]


def test_the_multilingual_hint_says_it_is_installed_where_it_is(monkeypatch):
    """The reader-multilingual hint said "install" with it installed; now it names the setting to change."""
    import odqa.core.models
    from odqa.reader.settings import MULTILINGUAL_READER

    pipeline = Pipeline.__new__(Pipeline)
    pipeline._bundle = SimpleNamespace(info=lambda: SimpleNamespace(language="ko"))
    pipeline._readers = {"reader": SimpleNamespace(languages=["en"])}
    pipeline._reader_name = "reader"
    installed = odqa.core.models.shipped_model(MULTILINGUAL_READER)
    assert installed is not None  # the checkout's models/reader-multilingual
    notice = pipeline.unread_language()
    assert notice and f"{MULTILINGUAL_READER} is installed: set reader.model to auto" in notice
    assert "install reader-multilingual (" not in notice
    monkeypatch.setattr(odqa.core.models, "shipped_model", lambda name: None)
    assert f"install {MULTILINGUAL_READER} (" in (pipeline.unread_language() or "")
