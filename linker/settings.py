"""How the entity linker links: the [linker] section of the config (odqa.config.OdqaConfig.linker)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.settings import check_numbers
from odqa.core.settings import field_help as _help


@dataclass
class LinkerSettings:
    """[linker]: which linker links a question's entities, over which knowledge base, with which thresholds
    (linker.registry.build_linker builds it)."""

    enabled: bool = field(default=True, metadata=_help("link the question's entities (--no-linker: skip it)"))
    model: str = field(default="linker", metadata=_help("linker model: 'linker' (shipped), or a folder"))
    kb: str = field(default="", metadata=_help("knowledge-base folder (empty: the one beside the index)"))
    # unset: the thresholds the linker was tuned with on its dev split (saved with the model)
    mention_threshold: float | None = field(
        default=None,
        metadata=_help(
            "threshold on the mention score (unset: the one the linker was tuned with)", minimum=0, maximum=1
        ),
    )
    entity_threshold: float | None = field(
        default=None,
        metadata=_help(
            "threshold on the joint (mention x entity) score (unset: the one the linker was tuned with)",
            minimum=0,
            maximum=1,
        ),
    )

    def validate(self) -> None:
        check_numbers(self, "linker.")

    def entity_encoder(self) -> str:
        """The entity encoder of this linker model (its saved linker_config.json): every knowledge base it links
        against is encoded with it, so `index` and `build-kb` encode theirs with the configured linker's."""
        from odqa.linker.heads import saved_config

        return saved_config(self.model).entity_encoder
