"""Retrievers: dense dual encoder, BM25 and hybrid fusion behind one `search(questions, k)` interface.

`IndexBundle` and `load_retriever` load on first use, so that the light modules (`retriever.kinds`,
`retriever.registry`: the names the config and the CLI offer) import without FAISS and Arrow.
"""

__all__ = ["IndexBundle", "load_retriever"]


def __getattr__(name: str):
    if name in __all__:
        from odqa.retriever import loading

        return getattr(loading, name)
    raise AttributeError(f"module 'retriever' has no attribute {name!r}")
