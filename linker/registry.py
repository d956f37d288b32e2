"""How a linker is built, in one place: `build_linker(settings, kb)` gives the linker the [linker] settings name
over a knowledge base, with the config's device, precision and runtime. The pipeline and `odqa link` /
`eval-linker` build theirs here, so a question is linked alike everywhere.

* A new linker family: a factory `(settings, kb, device, inference) -> Linker` (odqa.core.protocols.Linker)
  and one line, `LINKERS.register(name, factory)`; `linker.model = name` then serves the pipeline. Every other
  name is a saved ELQ linker (linker.linker.Linker.from_pretrained).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from odqa.core.registry import Registry
from odqa.core.runtime import INFERENCE, InferenceSettings
from odqa.linker.settings import LinkerSettings

if TYPE_CHECKING:
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

LinkerFactory = Callable[[LinkerSettings, Any, "str | None", InferenceSettings], Any]

LINKERS: Registry[LinkerFactory] = Registry("linker", hint="linker.model")


def build_linker(
    settings: LinkerSettings,
    kb: KnowledgeBase | None,
    *,
    model: str | None = None,
    device: str | None = None,
    inference: InferenceSettings | None = None,
) -> Linker:
    """The linker `settings` name (`model`: another one, e.g. the multilingual linker a Korean question is routed
    to) over `kb`, its thresholds the settings' (unset: the ones the model was tuned with)."""
    name = model or settings.model
    inference = inference or INFERENCE
    if name in LINKERS:
        return LINKERS.get(name)(settings, kb, device, inference)
    from odqa.linker.linker import Linker

    return Linker.from_pretrained(
        name,
        kb=kb,
        device=device,
        mention_threshold=settings.mention_threshold,
        entity_threshold=settings.entity_threshold,
        precision=inference.precision,
        runtime=inference.runtime,
    )
