"""Entity marks: what a reader trained with them (reader_config.json `entity_marks`) is told about each passage's
entity, the LUKE idea in the reader's own tokens.

A passage of the Wikipedia corpus describes one entity, its article. The question's linked entities (the linker's
mentions) say which entity it asks about. Such a reader reads, for each passage, the question followed by one mark
and the passage's article title:

    [CLS] question MARK title [SEP] passage-slice [SEP]

MARK is SUBJECT_MARK where the passage's article is one of the question's linked entities, OTHER_MARK where the
question links entities but not this passage's article, UNLINKED_MARK where it links none (or no linker ran). The
marks are three of the vocabulary's unused word pieces, made single tokens (`add_mark_tokens`), so the reader
learns an embedding for each and its attention relates the title to the question's words: the signal the reader
missed when it answered Einstein's birthplace from Marie Curie's passage. Training and reading compose the question
with `marked_question` alone, so the two see the same input.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from odqa.core.types import Mention
from odqa.corpus.questions import article_key

SUBJECT_MARK = "[unused1]"
OTHER_MARK = "[unused2]"
UNLINKED_MARK = "[unused3]"
MARK_TOKENS = (SUBJECT_MARK, OTHER_MARK, UNLINKED_MARK)
# a title is the article's name: a few words; a longer one is cut so the passage keeps its room in the window
MAX_TITLE_CHARS = 80

Subjects = frozenset[str] | None  # the article keys of a question's linked entities; None: not linked


def subjects_of(mentions: Iterable[Mention] | None) -> Subjects:
    """The article keys of the entities linked in a question (None when none is linked)."""
    return subjects_from_titles([m.entity.title for m in mentions or () if m.entity is not None])


def subjects_from_titles(titles: Collection[str] | None) -> Subjects:
    """`subjects_of` for linked entities given by their titles (as training data records them)."""
    keys = frozenset(article_key(t) for t in titles or () if t and t.strip())
    return keys or None


def is_subject(title: str | None, subjects: Subjects) -> bool:
    """Whether a passage of article `title` is about one of the question's linked entities."""
    return bool(subjects and title and article_key(title) in subjects)


def mark_for(title: str, subjects: Subjects) -> str:
    if not subjects:
        return UNLINKED_MARK
    return SUBJECT_MARK if is_subject(title, subjects) else OTHER_MARK


def marked_question(question: str, title: str, subjects: Subjects) -> str:
    """The question as a reader with entity marks reads it beside a passage of article `title`."""
    title = " ".join((title or "").replace("_", " ").split())[:MAX_TITLE_CHARS]
    return f"{question.strip()} {mark_for(title, subjects)} {title}".rstrip()


def add_mark_tokens(tokenizer) -> None:
    """Make the marks single tokens of `tokenizer` (word pieces it already has: no new embedding rows). Saved with
    the tokenizer, so a checkpoint trained with them reads them alike."""
    vocab = tokenizer.get_vocab()
    missing = [m for m in MARK_TOKENS if m not in vocab]
    if missing:
        from odqa.core.errors import OdqaError

        raise OdqaError(
            f"entity marks need the word pieces {', '.join(missing)} in the reader's vocabulary, which "
            f"{type(tokenizer).__name__} lacks; train from a BERT-vocabulary reader (e.g. models/reader)"
        )
    tokenizer.add_special_tokens({"additional_special_tokens": list(MARK_TOKENS)}, replace_extra_special_tokens=False)
