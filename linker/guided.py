"""Entity-guided retrieval: passages of the linked entities' articles, fused into a retriever's hits.

An `ArticlePassages` (odqa.core.protocols) gives an article's passages by article id (a passage's `doc_id`,
which is the entity's `doc_id` in the KB): a local passage store's (`EntityPassages(store)`) or an
Elasticsearch index's, from each index backend's `article_passages()`. `entity_hits` ranks each linked
entity's passages by how many of the question's other content words they contain (the lead passage wins ties) and
keeps a few. `fuse_entity_hits` adds `bonus * mention score * passage weight` to the min-max normalised retriever scores
(odqa.core.fusion's entity bonus), so a passage of a linked entity rises, and one the retriever missed can enter the
list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from odqa.core.fusion import entity_bonus_fuse
from odqa.core.protocols import ArticlePassages
from odqa.core.types import Mention, SearchHit
from odqa.corpus.articles import StoreArticlePassages

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom whose when where "
    "why how does do did give me list all that this these those it its as name many much s".split()
)


def content_words(text: str) -> set[str]:
    return {w for w in (m.group().lower() for m in _WORD.finditer(text)) if w not in _STOP and len(w) > 1}


# the entity bonus over a local passage store (the name the linker has always used); an index backend gives its
# own with `article_passages()` (an Elasticsearch index: indexes.elastic.ElasticArticlePassages)
EntityPassages = StoreArticlePassages


def entity_hits(
    question: str,
    mentions: Sequence[Mention],
    passages: ArticlePassages,
    per_entity: int = 3,
    max_scan: int = 200,
) -> list[SearchHit]:
    """Candidate passages of the linked entities, best first; `score` = mention score x passage weight."""
    out: dict[int, SearchHit] = {}
    for m in mentions:
        if m.entity is None:
            continue
        found = passages.article(m.entity.doc_id or m.entity.id, max_scan)
        if not found:
            continue
        rows, texts = [row for row, _ in found], [passage for _, passage in found]
        words = content_words(question) - content_words(m.text)
        ranked = sorted(range(len(rows)), key=lambda i: (-len(words & content_words(texts[i].text)), i))[:per_entity]
        for rank, i in enumerate(ranked):
            score = m.score * (0.8**rank)
            row = rows[i]
            if row not in out or out[row].score < score:
                out[row] = SearchHit(row=row, score=score, passage=texts[i], source="entity")
    return sorted(out.values(), key=lambda h: (-h.score, h.row))


def fuse_entity_hits(hits: Sequence[SearchHit], extra: Sequence[SearchHit], bonus: float, k: int) -> list[SearchHit]:
    """Retriever hits (scores min-max normalised) plus `bonus` x entity-passage score; top k."""
    return entity_bonus_fuse(hits, extra, bonus, k)
