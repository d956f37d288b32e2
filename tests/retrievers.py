"""Retrievers over an opened store, built as the pipeline builds them (odqa.retriever.registry.build_retriever)."""

from __future__ import annotations

from odqa.retriever.registry import RetrieverRuntime, build_retriever
from odqa.retriever.settings import RetrievalConfig


def built_retriever(backend, kind: str, device: str | None = None, accept_encoder_change: bool = False, **settings):
    """The `kind` retriever over `backend` with these `retrieval` settings (the others: RetrievalConfig's)."""
    runtime = RetrieverRuntime(device=device, accept_encoder_change=accept_encoder_change)
    return build_retriever(backend, RetrievalConfig(**settings), runtime, kind)
