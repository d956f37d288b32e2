"""odqa: open-domain question answering (entity linking, BM25 + dense retrieval, extractive reading)."""

__version__ = "0.1.0"
