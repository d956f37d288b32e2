"""Corpus ingestion: read documents in public formats, split them into passages, store them as Arrow."""

from typing import TYPE_CHECKING, Any

from odqa.corpus.chunking import chunk_document
from odqa.corpus.readers import CorpusFields, iter_documents, iter_passages

if TYPE_CHECKING:
    from odqa.corpus.store import PassageStore

__all__ = ["CorpusFields", "chunk_document", "iter_documents", "iter_passages", "PassageStore"]


def __getattr__(name: str) -> Any:
    # the store loads `datasets` (seconds): the readers (and the CLI's parser, which reads their dataclasses) do not
    if name == "PassageStore":
        from odqa.corpus.store import PassageStore

        return PassageStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
