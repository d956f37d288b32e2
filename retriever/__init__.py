"""Retrievers: dense dual encoder, BM25 and hybrid fusion behind one `search(questions, k)` interface."""

from retriever.loading import IndexBundle, load_retriever

__all__ = ["IndexBundle", "load_retriever"]
