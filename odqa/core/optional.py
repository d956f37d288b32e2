"""The optional parts of odqa: which package each brings, and how to install it. `pip install odqa` alone answers
questions (BM25, exact dense search as a matrix product, the reader and the linker); FAISS (HNSW, IVF, GPU
search), the Korean and Chinese analysers, the Elasticsearch client, the HTTP server (FastAPI, uvicorn), the BM25
engines beside Tantivy, the plots of evaluations (matplotlib) and Ray (builds spread over workers) are extras. A command
checks the parts its settings need before it starts any work (`require`), so a missing one costs one line, not a
build."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

from odqa.core.errors import OdqaError


@dataclass(frozen=True)
class OptionalPart:
    module: str  # the import name
    package: str  # the distribution that brings it
    install: str  # the command that installs it


FAISS_INSTALL = "pip install 'odqa[cpu]' (or 'odqa[gpu]' on a CUDA machine)"
CJK_INSTALL = "pip install 'odqa[cjk]'"
SERVE_INSTALL = "pip install 'odqa[serve]'"
BM25_ENGINES_INSTALL = "pip install 'odqa[bm25-engines]'"
PLOT_INSTALL = "pip install 'odqa[plot]'"
RAY_INSTALL = "pip install 'odqa[ray]'"

PARTS = {
    part.module: part
    for part in (
        OptionalPart("faiss", "FAISS", FAISS_INSTALL),
        OptionalPart("kiwipiepy", "kiwipiepy", CJK_INSTALL),
        OptionalPart("jieba", "jieba", CJK_INSTALL),
        OptionalPart("opencc", "OpenCC", CJK_INSTALL),
        OptionalPart("elasticsearch", "the Elasticsearch client", "pip install 'odqa[elastic]'"),
        OptionalPart("fastapi", "FastAPI", SERVE_INSTALL),
        OptionalPart("uvicorn", "uvicorn", SERVE_INSTALL),
        OptionalPart("fastapi_offline", "fastapi-offline (the files of /docs and /redoc)", SERVE_INSTALL),
        OptionalPart("bm25s", "bm25s", BM25_ENGINES_INSTALL),
        OptionalPart("rank_bm25", "rank-bm25", BM25_ENGINES_INSTALL),
        OptionalPart("matplotlib", "matplotlib", PLOT_INSTALL),
        OptionalPart("ray", "Ray", RAY_INSTALL),
    )
}


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it (a module set to None in sys.modules, as tests
    do to hide one, counts as missing)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def modules_of(install: str) -> tuple[str, ...]:
    """The import names of the parts one install command brings (an extra's modules, in PARTS' order)."""
    return tuple(part.module for part in PARTS.values() if part.install == install)


def require(module: str, purpose: str) -> None:
    """Raise one line naming the missing part, what needs it and the install command."""
    if not installed(module):
        part = PARTS.get(module, OptionalPart(module, module, f"pip install {module}"))
        raise OdqaError(f"{purpose} needs {part.package}, which is not installed: {part.install}")
