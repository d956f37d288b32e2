"""What several benchmark scripts share, so that none imports another for it (bench/qa.py runs
bench/retrieval.py's squad-open suite, so retrieval.py must not import qa.py): the questions' sampling seed, the
open-dev sample, a compared pipeline and the squad-open index folder."""

from __future__ import annotations

import random
import re
from pathlib import Path

SEED = 13


def open_dev_sample(data: Path, n: int | None) -> dict[str, list]:
    """The open-dev questions of each source, or `n` of each drawn with the suite's seed."""
    from odqa.corpus.open_dev import open_dev_questions

    sources = open_dev_questions(data)
    if n:
        sources = {
            name: random.Random(SEED).sample(items, n) if n < len(items) else items for name, items in sources.items()
        }
    return sources


def variant_pipeline(index: str, kind: str, k: int, linker: bool, reader: str, variant: dict):
    """The pipeline of one compared (retriever, reader, settings variant) and its row label. An empty `index`
    is the demo corpus's."""
    from odqa.config import OdqaConfig
    from odqa.demo_corpus import demo_index_path, demo_kb_path
    from odqa.pipeline import Pipeline

    overrides = {
        "index": index,
        "retrieval.retriever": kind,
        "retrieval.k": k,
        "linker.enabled": linker,
        "reader.model": reader,
        **variant,
    }
    pipeline = Pipeline(OdqaConfig.load(None, overrides), default_index=demo_index_path, default_kb=demo_kb_path)
    return pipeline, reader + (f" ({', '.join(f'{key} {v}' for key, v in variant.items())})" if variant else "")


def slug(name: str) -> str:
    """A folder-name form of an encoder name or path."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[-60:]


def squad_open_index_dir(cache: str | Path, encoder: str | None) -> Path:
    """Where the squad-open index of an encoder (None: BM25 alone) is cached. The off-the-shelf encoder keeps
    the folder name of earlier runs, so their cached index is reused."""
    name = "index-bm25" if encoder is None else ("index" if encoder == "minilm" else "index-" + slug(encoder))
    return Path(cache) / "squad-open" / name
