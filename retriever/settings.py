"""The retrieval settings (`[retrieval]`, `--retriever`, `--k`, `--fusion`, ...): the one place their defaults are
written. `odqa.config.OdqaConfig.retrieval` is one of these; the retriever builder (retriever.registry) takes it
whole, so no library signature repeats a default of its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.errors import OdqaError
from odqa.core.runtime import InferenceSettings
from odqa.core.settings import check_numbers
from odqa.core.settings import field_help as _help
from odqa.core.text_encoding import POOLINGS, SIMILARITIES, EncoderSettings
from odqa.core.types import EncoderRecord
from odqa.retriever.registry import RETRIEVERS, fusion_choices, fusion_runner


@dataclass
class RetrievalConfig:
    retriever: str = field(default="hybrid", metadata=_help("which retriever ranks the passages", choices=RETRIEVERS))
    k: int = field(default=10, metadata=_help("passages passed to the reader"))
    candidates: int = field(default=100, metadata=_help("hybrid: passages asked of each retriever before fusion"))
    # odqa.core.fusion's methods, and those a store runs itself (an Elasticsearch index: es-rrf)
    fusion: str = field(
        default="auto",
        metadata=_help(
            "hybrid fusion method (auto: the index's tuned setting, else its language's default; es-rrf: an "
            "Elasticsearch index's own RRF)",
            choices=fusion_choices,
        ),
    )
    alpha: float = field(default=0.5, metadata=_help("minmax fusion: weight of the dense score", maximum=1))
    rrf_k: int = field(default=60, metadata=_help("rrf fusion: the rank constant", minimum=0))
    encoder: str = field(
        default="", metadata=_help("the index's encoder (checked; empty: the one the index was built with)")
    )
    # a question encoder apart from the passage encoder (DPR's pair)
    query_encoder: str = field(
        default="",
        metadata=_help(
            "a question encoder apart from the passage encoder, e.g. "
            "a DPR question encoder (empty: the one the index records)"
        ),
    )
    passage_encoder: str = ""  # `index`: the passage encoder (else `encoder`)
    pooling: str = field(
        default="",
        metadata=_help("plain transformers model: token pooling (empty: the model's own, else mean)", choices=POOLINGS),
    )
    similarity: str = field(
        default="",
        metadata=_help(
            "cosine: L2-normalised vectors; dot: raw (DPR); empty: the model's own, else cosine", choices=SIMILARITIES
        ),
    )
    query_prefix: str | None = field(
        default=None, metadata=_help("text put before each question (unset: the model's prompt, e5: 'query: ')")
    )
    passage_prefix: str | None = field(
        default=None, metadata=_help("text put before each passage (unset: the model's prompt, e5: 'passage: ')")
    )
    entity_bonus: float = field(default=0.0, metadata=_help("fusion weight of linked entities' passages (0: off)"))
    bm25_max_df: float | None = field(
        default=None,
        metadata=_help(
            "BM25: leave out of each question the terms found in more than this fraction of the passages (the rarest "
            "kept); faster on large corpora, slightly different ranking (0: every term; unset: by the corpus size, "
            "0.1 from 5 M passages, else 0)",
            minimum=0,
            maximum=1,
        ),
    )

    def question_encoder_settings(
        self, name: str, record: EncoderRecord, inference: InferenceSettings, device: str | None
    ) -> EncoderSettings:
        """How encoder `name` encodes questions searched in the vectors `record` describes: at the recorded passage
        length, with the recorded pooling, similarity and question prefix unless these settings name others (a
        model other than the recorded question encoder: its own pooling unless one is named)."""
        recorded = record.settings
        # another model than the recorded one: its own pooling unless one is named
        own_pooling = None if name != record.question_encoder else recorded.get("pooling")
        return EncoderSettings(
            name,
            max_length=record.max_length,
            pooling=self.pooling or own_pooling,
            similarity=self.similarity or recorded.get("similarity"),
            query_prefix=self.query_prefix or recorded.get("query_prefix"),
            precision=inference.precision,
            runtime=inference.runtime,
            device=device,
        )

    def validate(self, index: str = "") -> None:
        """`index`: the config's index location (a store that fuses itself allows its own fusion methods)."""
        _choice("retrieval.retriever", self.retriever, RETRIEVERS.names)
        if self.pooling:
            _choice("retrieval.pooling", self.pooling, POOLINGS)
        if self.similarity:
            _choice("retrieval.similarity", self.similarity, SIMILARITIES)
        allowed = fusion_choices(index)
        runner = fusion_runner(self.fusion)
        if self.fusion not in allowed and runner is not None:
            raise OdqaError(
                f"config: retrieval.fusion {self.fusion!r} needs an {runner.title} (index = "
                f'"{runner.example}"); use one of {", ".join(allowed)}'
            )
        _choice("retrieval.fusion", self.fusion, allowed)
        check_numbers(self, "retrieval.")
        if self.bm25_max_df is not None and not 0.0 <= self.bm25_max_df < 1.0:
            raise OdqaError(
                f"config: retrieval.bm25_max_df must lie in [0, 1) (0: every term; 0.1: terms in at most "
                f"10 % of the passages), got {self.bm25_max_df}"
            )


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OdqaError(f"config: {name} must be one of {', '.join(allowed)}; got {value!r}")
