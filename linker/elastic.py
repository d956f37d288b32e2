"""A linker knowledge base loaded into Elasticsearch as an entity index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from odqa.indexes.elastic import ElasticIndex, unit_rows
from odqa.indexes.elastic_bulk import BulkOptions, BulkReport, Doc, bulk_load
from odqa.linker.kb import KnowledgeBase


def load_entities(
    index: ElasticIndex,
    kb_path: str | Path,
    *,
    recreate: bool = False,
    similarity: str = "dot_product",
    options: BulkOptions | None = None,
) -> BulkReport:
    """A linker knowledge base (linker/kb.py) as an entity index: `title` holds the title and its aliases
    (joined with " | "), `text` the description, `vector` the entity vector; `row` = the entity's KB row."""
    kb = KnowledgeBase.load(kb_path)
    vectors = kb.index.verified_embeddings() if kb.index is not None else None
    dim = int(vectors.shape[1]) if vectors is not None else 0
    meta: dict[str, Any] = {
        "corpus_fingerprint": kb.manifest.corpus_fingerprint,
        "encoder": kb.encoder,
        "count": len(kb),
        "kind": "kb",
    }
    if recreate:
        index.delete()
    if index.exists():
        index.check(fingerprint=meta["corpus_fingerprint"], dim=dim)
    else:
        index.create(meta, dim, similarity=similarity)

    def docs(start: int) -> Iterator[Doc]:
        for row in range(start, len(kb)):
            entry = kb.entries[row]
            source = {
                "row": row,
                "title": " | ".join([entry.title, *entry.aliases]),
                "text": entry.description,
                "doc_id": entry.doc_id,
                "start": 0,
                "end": 0,
            }
            if vectors is not None:
                source["vector"] = unit_rows(np.asarray(vectors[row : row + 1], dtype=np.float32))[0].tolist()
            yield row, entry.id, source

    return bulk_load(index, docs, len(kb), options)
