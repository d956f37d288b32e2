"""The built-in demo corpus (odqa/demo/): articles written for the project, its questions, its index and KB.

Index and knowledge base are built on first use into the user's cache (`$ODQA_HOME`, default
`~/.cache/odqa`), keyed by a hash of the articles file and the encoder (its weights too), so an edited corpus, another
encoder or a retrained one under the same name gets fresh ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from odqa.core.atomic import writer_lock
from odqa.core.cache import DEMO_PREFIX
from odqa.core.errors import OdqaError
from odqa.core.logs import get_logger
from odqa.core.models import model_fingerprint
from odqa.core.paths import odqa_home  # noqa: F401 (re-exported: odqa.commands.qa and tests use it here)
from odqa.indexes.manifest import FORMAT_VERSION

log = get_logger(__name__)
DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_ARTICLES = DEMO_DIR / "articles.jsonl"
DEMO_QUESTIONS = DEMO_DIR / "questions.jsonl"
# the same articles asked about in Korean and in Chinese (English answers): the cross-language development set
DEMO_QUESTIONS_BY_LANGUAGE = {
    "en": DEMO_QUESTIONS,
    "ko": DEMO_DIR / "questions-ko.jsonl",
    "zh": DEMO_DIR / "questions-zh.jsonl",
}
# the demo's passage vectors: a multilingual encoder, so that Korean and Chinese questions find its English passages
DEMO_ENCODER = "encoder-multilingual"
# how long a first use waits for another process building the same demo index or KB (minutes on a slow machine)
DEMO_BUILD_WAIT_S = 1800.0


def _cached_build(kind: str, encoder: str, quiet: bool, build: Callable[[Path], object], version: str = "") -> Path:
    if not DEMO_ARTICLES.is_file():
        raise OdqaError(f"the demo corpus is missing ({DEMO_ARTICLES}); reinstall odqa or pass --index")
    # the manifest format is part of the key: an index or KB written before its integrity records is built again
    digest = hashlib.sha1(
        DEMO_ARTICLES.read_bytes()
        + model_fingerprint(encoder).encode()
        + str(FORMAT_VERSION).encode()
        + version.encode()
    ).hexdigest()[:12]
    path = odqa_home() / f"{DEMO_PREFIX}{kind}-{digest}"
    if (path / "manifest.json").exists():
        return path

    def waiting(holder: str) -> None:
        log.info("waiting for another odqa process (%s), which is building the demo %s in %s...", holder, kind, path)

    # the one-writer lock of the folder: a second first use (two `ask` at once in a fresh $ODQA_HOME) waits for
    # the first's build and then uses it, rather than being refused or building it again
    with writer_lock(
        path,
        flag=None,
        wait_s=DEMO_BUILD_WAIT_S,
        nested=True,
        on_wait=None if quiet else waiting,
        fix="rerun when it has finished, or set ODQA_HOME to another folder",
    ):
        if not (path / "manifest.json").exists():
            if not quiet:
                log.info("building the demo %s in %s (first use only)...", kind, path)
            build(path)
    return path


def demo_index_path(encoder: str = DEMO_ENCODER, quiet: bool = False) -> Path:
    def build(path: Path) -> None:
        from odqa.indexing import IndexSpec, build_index

        # its knowledge base is demo_kb_path's, kept apart: the index is keyed by the passage encoder, the KB by the
        # linker's entity encoder
        build_index(IndexSpec(corpus=str(DEMO_ARTICLES), out=str(path), encoder=encoder, chunk_size=5000, kb=False))

    return _cached_build("index", encoder, quiet, build)


def demo_kb_path(encoder: str = "", quiet: bool = False) -> Path:
    """The demo knowledge base: one entity per demo article, encoded by `encoder` (empty: the default linker's
    entity encoder)."""
    from odqa.linker.aliases import alias_scheme
    from odqa.linker.settings import LinkerSettings

    encoder = encoder or LinkerSettings().entity_encoder()

    def build(path: Path) -> None:
        from odqa.corpus.readers import iter_documents
        from odqa.linker.kb import KnowledgeBase

        KnowledgeBase.build(iter_documents(DEMO_ARTICLES), path, encoder=encoder, progress=False)

    # the alias keys' scheme too: a KB whose keys were made otherwise (before Korean and Chinese names were matched
    # character by character, or without OpenCC's folding) is built again
    return _cached_build("kb", encoder, quiet, build, alias_scheme())
