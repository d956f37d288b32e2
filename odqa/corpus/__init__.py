"""Corpus ingestion: read documents in public formats, split them into passages, store them as Arrow."""

from odqa.corpus.chunking import chunk_document
from odqa.corpus.readers import CorpusFields, iter_documents, iter_passages
from odqa.corpus.store import PassageStore

__all__ = ["CorpusFields", "chunk_document", "iter_documents", "iter_passages", "PassageStore"]
