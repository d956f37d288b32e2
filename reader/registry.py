"""How a reader is chosen and built, in one place: `build_reader(settings)` alone makes `reader.model = auto`
concrete, overlays a checkpoint's own record on the settings and builds the reader. The pipeline, `eval-reader`,
`fit-calibration`, the server and `bench/` all build their readers here, so each reads as `ask` does.

* A new reader family: a factory `(settings, device, explicit) -> Reader` (odqa.core.protocols.Reader) and one
  line, `READERS.register(name, factory)`; `reader.model = name` (or `--reader name`) then serves the pipeline,
  `eval-reader` and `/ask`. Every other name is an extractive-QA checkpoint (reader.model.Reader.load).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from odqa.core.protocols import Reader
from odqa.core.registry import Registry
from odqa.core.runtime import InferenceSettings
from odqa.reader.settings import ReaderSettings, resolve_reader

ReaderFactory = Callable[[ReaderSettings, "str | None", Sequence[str]], Reader]

# reader families by the name `reader.model` gives; any name not here is an extractive-QA checkpoint
READERS: Registry[ReaderFactory] = Registry("reader", hint="reader.model, --reader")


def build_reader(
    settings: ReaderSettings,
    *,
    device: str | None = None,
    inference: InferenceSettings | None = None,
    language: str | Callable[[], str] | None = None,
    explicit: Sequence[str] = (),
) -> Reader:
    """The reader `settings` describe. `inference`: the config's precision and runtime for every model (None:
    the settings' own); `language`: of the text to read, for `auto`; `explicit`: settings a library caller set,
    which win over what a checkpoint records about itself."""
    name, _ = resolve_reader(settings.model, language)
    settings = replace(settings, model=name)
    if inference is not None:
        settings = replace(settings, precision=inference.precision, runtime=inference.runtime)
    if name in READERS:
        return READERS.get(name)(settings, device, explicit)
    from odqa.reader.model import Reader as CheckpointReader

    return CheckpointReader.load(settings, device=device, explicit=explicit)
