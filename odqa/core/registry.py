"""Backends by name: one `Registry` (name -> factory) per kind of backend, so a new backend is its module plus
one line in its registry, and every list of choices (config validation, CLI `choices=`, the shell's commands,
error messages) is read from the registry instead of being written out again.

The registries: `indexes.bm25.TEXT_ENGINES` (BM25 engines), `indexes.vector.VECTOR_INDEXES` (FAISS index
kinds), `retriever.registry.INDEX_BACKENDS` (stores of passages by location: an index folder, Elasticsearch) and
its `RETRIEVERS` (retriever kinds), and `odqa.core.fusion.FUSIONS` (ways of fusing ranked lists).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from odqa.core.errors import OdqaError

T = TypeVar("T")


class Registry(Generic[T]):
    """An ordered, read-mostly map of names to factories; `what` names the kind of backend in error messages
    ("BM25 engine"), `hint` says where the name came from ("--bm25-engine")."""

    def __init__(self, what: str, entries: Mapping[str, T] | None = None, hint: str = ""):
        self.what = what
        self.hint = hint
        self._entries: dict[str, T] = dict(entries or {})

    def register(self, name: str, factory: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = factory
        return factory

    def unregister(self, name: str) -> T:
        """Take a backend out again (one a test or a plugin registered for a while)."""
        factory = self.get(name)
        del self._entries[name]
        return factory

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            where = f" ({self.hint})" if self.hint else ""
            raise OdqaError(f"unknown {self.what} {name!r}{where}; choose one of {', '.join(self.names)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names)})"
