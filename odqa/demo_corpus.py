"""The built-in demo corpus (odqa/demo/): articles written for the project, its questions, and its index.

The index is built on first use into the user's cache (`$ODQA_HOME`, default `~/.cache/odqa`), keyed by a
hash of the articles file and the encoder, so an edited corpus or another encoder gets a fresh index.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from odqa.errors import OdqaError

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_ARTICLES = DEMO_DIR / "articles.jsonl"
DEMO_QUESTIONS = DEMO_DIR / "questions.jsonl"


def odqa_home() -> Path:
    return Path(os.environ.get("ODQA_HOME", Path.home() / ".cache" / "odqa"))


def demo_index_path(encoder: str = "minilm", quiet: bool = False) -> Path:
    if not DEMO_ARTICLES.is_file():
        raise OdqaError(f"the demo corpus is missing ({DEMO_ARTICLES}); reinstall odqa or pass --index")
    digest = hashlib.sha1(DEMO_ARTICLES.read_bytes() + encoder.encode()).hexdigest()[:12]
    path = odqa_home() / f"demo-index-{digest}"
    if not (path / "manifest.json").exists():
        from odqa.indexing import IndexSpec, build_index

        if not quiet:
            print(f"odqa: building the demo index in {path} (first use only)...", file=sys.stderr, flush=True)
        build_index(IndexSpec(corpus=str(DEMO_ARTICLES), out=str(path), encoder=encoder, chunk_size=5000))
    return path


def demo_kb_path(encoder: str = "minilm", quiet: bool = False) -> Path:
    """The demo knowledge base (entities = demo articles), built on first use beside the demo index."""
    if not DEMO_ARTICLES.is_file():
        raise OdqaError(f"the demo corpus is missing ({DEMO_ARTICLES}); reinstall odqa")
    digest = hashlib.sha1(DEMO_ARTICLES.read_bytes() + encoder.encode()).hexdigest()[:12]
    path = odqa_home() / f"demo-kb-{digest}"
    if not (path / "manifest.json").exists():
        from linker.kb import KnowledgeBase
        from odqa.corpus.readers import iter_documents

        if not quiet:
            print(f"odqa: building the demo knowledge base in {path} (first use only)...", file=sys.stderr, flush=True)
        KnowledgeBase.build(iter_documents(DEMO_ARTICLES), path, encoder=encoder, progress=False)
    return path
