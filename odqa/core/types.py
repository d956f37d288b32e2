"""Shared record types. Every package may import this module; it imports nothing of the project."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Document:
    """One article (or one SQuAD paragraph) before it is split into passages."""

    id: str
    title: str
    text: str
    url: str = ""  # the source article's address, where the corpus gives one ("": none)


@dataclass(frozen=True)
class Passage:
    """A ~100-word chunk of one document; `start`/`end` are character offsets into the document text."""

    id: str
    title: str
    text: str
    doc_id: str = ""
    start: int = 0
    end: int = 0
    url: str = ""  # its document's source address, where the corpus gives one ("": none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHit:
    """One ranked result: a row of an index (`row`) with its score, and the passage once resolved."""

    row: int
    score: float
    passage: Passage | None = None
    source: str = ""  # which retriever produced it: bm25, dense, hybrid, entity
    # what made `score` where it is no retriever's own: the fusion of a hybrid's lists (rrf: a sum of
    # 1 / (rrf_k + rank), about 0.03 at the top; minmax: weighted scores scaled to [0, 1]; es-rrf: the server's
    # rrf), or "minmax+entity" (the entity bonus over scaled scores); "": the retriever's own score (BM25, cosine)
    fusion: str = ""

    @property
    def passage_id(self) -> str:
        return self.passage.id if self.passage is not None else str(self.row)


@dataclass(frozen=True)
class Entity:
    """A knowledge-base entry: one Wikipedia article."""

    id: str
    title: str
    description: str = ""
    aliases: tuple[str, ...] = ()
    doc_id: str = ""  # the article whose passages describe it ("": the entity id is the article id)


@dataclass
class Mention:
    """A linked span of the question: character offsets [start, end) and the chosen entity."""

    start: int
    end: int
    text: str
    entity: Entity | None
    mention_score: float = 0.0  # p(span is a mention)
    entity_score: float = 0.0  # p(entity | mention)
    score: float = 0.0  # joint

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Answer:
    """An extracted answer span; `start`/`end` are character offsets into the passage text.

    `probability` is calibrated (P(correct), comparable across questions); `margin` (span score over its
    passage's no-answer score) and `share` (softmax over the question's own candidates) are what it is
    computed from. `evidence` lists every span merged into this answer: passage id, title, offsets, text."""

    text: str
    score: float
    probability: float = 0.0
    passage_id: str = ""
    title: str = ""
    start: int = 0
    end: int = 0
    context: str = ""  # the passage text the offsets refer to
    margin: float = 0.0
    share: float = 0.0
    confident: bool = True  # probability at or above the reader's threshold for "no confident answer"
    # False: the reader has no fitted calibration (calibration.json), so `probability` is sigmoid(margin), a score
    # rather than P(correct), and no answer is confident
    calibrated: bool = True
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EncoderRecord:
    """The encoder a store's vectors were made with, as the store records it: the question encoder is chosen by
    it and checked against it (retriever.registry), whichever store holds the vectors."""

    name: str  # the passage encoder ("": none recorded)
    dim: int = 0
    query_encoder: str = ""  # a question encoder apart from `name` (DPR's pair; "": `name` itself)
    settings: dict[str, Any] = field(default_factory=dict)  # pooling, similarity, query_prefix of the vectors
    max_length: int | None = None  # question tokens (None: the model's own)
    weights: str = ""  # fingerprint of the encoder's weights when the vectors were made ("": not recorded)

    @property
    def question_encoder(self) -> str:
        return self.query_encoder or self.name


@dataclass(frozen=True)
class BackendInfo:
    """What a store of passages says of itself (`SearchBackend.info()`), so that the retriever builder, the
    pipeline and the server's /info read one record instead of guessing at each store's attributes."""

    location: str  # printable, without credentials
    language: str = "en"  # of the indexed text
    text: bool = True  # offers text (BM25) search
    vectors: bool = False  # offers vector search
    encoder: EncoderRecord | None = None  # where it holds vectors and records their encoder
    tuned_fusion: dict[str, Any] | None = None  # the hybrid setting `tune-hybrid --record` chose for it
    kb: Path | None = None  # the knowledge base beside it (None: none)
    bm25_max_df: float = 0.0  # BM25 term pruning where `retrieval.bm25_max_df` is unset
    max_df_refusal: str = ""  # why it cannot prune a question's terms ("": it can): the one-line error
    summary: dict[str, Any] = field(default_factory=dict)  # what /info shows of it besides location and size
