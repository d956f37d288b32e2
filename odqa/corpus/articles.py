"""The passages of each article in a passage store: the local `ArticlePassages` (odqa.core.protocols) behind the
entity bonus (linker.guided); Elasticsearch's is indexes.elastic.ElasticArticlePassages."""

from __future__ import annotations

from odqa.core.types import Passage


class StoreArticlePassages:
    """Passage rows of each article of a store (anything with `column("doc_id")` and `get_rows`, such as
    odqa.corpus.store.PassageStore), grouped on first use."""

    def __init__(self, store):
        self.store = store
        self._rows: dict[str, list[int]] | None = None

    def rows(self, doc_id: str) -> list[int]:
        if self._rows is None:
            self._rows = {}
            for row, doc in enumerate(self.store.column("doc_id").to_pylist()):
                self._rows.setdefault(str(doc), []).append(row)
        return self._rows.get(str(doc_id), [])

    def article(self, doc_id: str, limit: int) -> list[tuple[int, Passage]]:
        rows = self.rows(doc_id)[:limit]
        return list(zip(rows, self.store.get_rows(rows))) if rows else []
