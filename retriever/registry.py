"""How a retriever is chosen and built, in one place: the stores by location (`INDEX_BACKENDS`), the retriever kinds
(`RETRIEVERS`), and `build_retriever(backend, settings, runtime)`, which alone resolves the question encoder,
`fusion = "auto"` and the hybrid-to-BM25 fallback. The pipeline, `search`, `es-search`, `eval-retrieval` and the
training-data builders all build their retrievers here.

* A new store (odqa.core.protocols.SearchBackend): its module, and one line in `INDEX_BACKENDS` (its opener, the
  location schemes that name it, any fusion it runs itself).
* A new retriever kind: its module (a class with `search(questions, k)`), and one line in `RETRIEVERS` (a
  `RetrieverKind`: its factory `(backend, settings, runtime) -> Retriever` and what it needs of a store, of
  odqa.core.protocols.CAPABILITIES); the stores declare what they hold, so none changes for it.
* A new fusion method: odqa.core.fusion (its function and one line in `FUSIONS`).

Nothing heavy is imported here: the folder's parts (FAISS, Arrow) load when a folder is opened, the Elasticsearch
client when an es:// index is, so the config and the CLI read the names without them.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.fusion import AUTO, FUSIONS, Fusion, resolve_fusion
from odqa.core.logs import get_logger
from odqa.core.protocols import CAPABILITIES, TEXT, VECTORS, FusesItself, Retriever, SearchBackend
from odqa.core.registry import Registry
from odqa.core.runtime import INFERENCE, InferenceSettings
from odqa.core.text_encoding import EncodesTexts, check_vectors_encoder, same_encoder
from odqa.core.types import BackendInfo, EncoderRecord
from odqa.indexes.elastic import SERVER_RRF, ElasticPassageIndex
from odqa.indexes.elastic_connection import LOCATION_SCHEMES, settings_for
from odqa.indexes.layout import IndexLayout
from odqa.retriever.bm25 import BM25Retriever
from odqa.retriever.dense import DenseRetriever
from odqa.retriever.hybrid import HybridRetriever

log = get_logger(__name__)
ACCEPT_ENCODER_CHANGE_ENV = "ODQA_ACCEPT_ENCODER_CHANGE"


# ---------------------------------------------------------------- stores by location


@dataclass(frozen=True)
class Backend:
    """A kind of store: `open(location, config)` (config: an OdqaConfig) gives an opened `SearchBackend`;
    `schemes` name it in a location (`es://...`; none: a path, the store every other location names);
    `server_fusions` are the fusion methods it runs itself, each with the client-side method it falls back to;
    `kb` gives the knowledge base beside a location (None: none beside it); `title` and `example` name it in
    messages."""

    open: Callable[[str, Any], SearchBackend]
    schemes: tuple[str, ...] = ()
    server_fusions: Mapping[str, str] = field(default_factory=dict)
    title: str = "index"
    example: str = "PATH"
    check: Callable[[str, Any], None] | None = None  # (location, config): refuse it before anything is opened
    kb: Callable[[str], Path] | None = None


def _open_folder(location: str, config) -> SearchBackend:
    from odqa.indexes.folder import FolderIndex

    return FolderIndex.open(location)


def _open_elastic(location: str, config) -> SearchBackend:
    from odqa.core.optional import require

    require("elasticsearch", f"the Elasticsearch index {location}")
    return ElasticPassageIndex.open(location, config.elastic)


def _folder_kb(location: str) -> Path:
    return IndexLayout(location).kb


def _check_elastic(location: str, config) -> None:
    settings_for(location, config.elastic).validate()


INDEX_BACKENDS: Registry[Backend] = Registry(
    "index backend",
    {
        "folder": Backend(_open_folder, title="index folder", example="PATH", kb=_folder_kb),
        "es": Backend(
            _open_elastic,
            schemes=tuple(LOCATION_SCHEMES),
            server_fusions={SERVER_RRF: "rrf"},
            title="Elasticsearch index",
            example="es://HOST:9200/NAME",
            check=_check_elastic,
        ),
    },
)


def backend_of(location: str) -> str:
    """The store a location names: the one whose scheme it starts with (`es://...`), else the one of paths."""
    scheme, sep, _ = str(location).partition("://")
    names = list(INDEX_BACKENDS)
    for name in names:
        if sep and scheme.lower() in INDEX_BACKENDS.get(name).schemes:
            return name
    return next(name for name in names if not INDEX_BACKENDS.get(name).schemes)


def open_index(location, config) -> SearchBackend:
    """The store at `location`, opened with `config` (an OdqaConfig: its [elastic] section for es://)."""
    return INDEX_BACKENDS.get(backend_of(str(location))).open(str(location), config)


def check_location(location: str, config) -> None:
    """Refuse in one line, before anything is opened, a location its store cannot take with `config` (an es://
    location's hosts and index name with the [elastic] section's)."""
    entry = INDEX_BACKENDS.get(backend_of(location))
    if entry.check is not None:
        entry.check(location, config)


def kb_beside(location: str) -> Path | None:
    """The knowledge base beside the store at `location`, found without opening it; None where a store of its
    kind has none beside it."""
    entry = INDEX_BACKENDS.get(backend_of(location))
    return entry.kb(location) if entry.kb is not None else None


def fusion_runner(method: str) -> Backend | None:
    """The kind of store that runs fusion `method` itself, None for a method odqa runs (odqa.core.fusion)."""
    return next(
        (INDEX_BACKENDS.get(name) for name in INDEX_BACKENDS if method in INDEX_BACKENDS.get(name).server_fusions), None
    )


def fusion_choices(location: str | None = None) -> tuple[str, ...]:
    """`retrieval.fusion`'s choices: auto, odqa's fusion methods, and those the store at `location` runs itself
    (None: those of every store)."""
    names = list(INDEX_BACKENDS) if location is None else [backend_of(location)]
    return (AUTO, *FUSIONS.names, *(m for name in names for m in INDEX_BACKENDS.get(name).server_fusions))


# ---------------------------------------------------------------- building a retriever


@dataclass(frozen=True)
class RetrieverRuntime:
    """How a retriever's question encoder runs (the config's precision and runtime, its device) and whether vectors
    whose encoder's weights changed since they were made are searched anyway (--accept-encoder-change)."""

    inference: InferenceSettings = INFERENCE
    device: str | None = None
    accept_encoder_change: bool = False


def build_retriever(backend: SearchBackend, settings, runtime: RetrieverRuntime, kind: str | None = None) -> Retriever:
    """The retriever `settings` (a RetrievalConfig, retriever.settings) asks of an opened store: `kind`, else
    `settings.retriever`. A kind whose needs the store does not hold is its fallback where it has one (said once):
    a hybrid over a store without vectors is BM25, as the default must answer over an index built with
    `--backends bm25`. The store opens and checks what the retriever reads first."""
    kind = check_retriever_available(backend, kind or settings.retriever, say=True)
    return RETRIEVERS.get(kind).build(backend, settings, runtime)


def check_retriever_available(backend: SearchBackend, kind: str, say: bool = False) -> str:
    """The kind that serves `kind` over `backend` (itself, or its fallback where the store lacks some of its needs;
    `say`: log the fallback), after the store checked each capability that kind needs: one line (OdqaError) names
    what is missing (a part, an optional package, the vectors)."""
    entry = RETRIEVERS.get(kind)
    # the store's description first: a store that finds itself swapped by a rebuild reopens whole there, so the
    # parts opened below are never dropped again before the first search reads them
    backend.info()
    held = backend.capabilities()
    missing = entry.needs - held
    if missing and entry.fallback and RETRIEVERS.get(entry.fallback).needs <= held:
        if say:
            log.warning(
                "%s holds no %s, so %s retrieval falls back to %s",
                backend.info().location,
                " or ".join(sorted(missing)),
                kind,
                entry.fallback,
            )
        kind, entry = entry.fallback, RETRIEVERS.get(entry.fallback)
    for capability in sorted(entry.needs):
        backend.check_available(capability)
    return kind


def _bm25(backend: SearchBackend, settings, runtime: RetrieverRuntime) -> BM25Retriever:
    info = backend.info()
    max_df = info.bm25_max_df if settings.bm25_max_df is None else settings.bm25_max_df
    if max_df and info.max_df_refusal:
        raise OdqaError(info.max_df_refusal)
    return BM25Retriever(backend, max_df)


def _dense(backend: SearchBackend, settings, runtime: RetrieverRuntime) -> DenseRetriever:
    return DenseRetriever(backend, question_encoder(backend, settings, runtime))


def _hybrid(backend: SearchBackend, settings, runtime: RetrieverRuntime) -> HybridRetriever:
    return HybridRetriever(
        _dense(backend, settings, runtime),
        _bm25(backend, settings, runtime),
        hybrid_fusion(backend, settings),
        settings.candidates,
    )


@dataclass(frozen=True)
class RetrieverKind:
    """A kind of retriever: `build(backend, settings, runtime)` gives it over an opened store; `needs` are what it
    searches the store through (of odqa.core.protocols.CAPABILITIES), checked with the store before it is built;
    `fallback`: the kind built instead over a store that holds the fallback's needs but not all of these."""

    build: Callable[..., Retriever]
    needs: frozenset[str]
    fallback: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(self.needs - set(CAPABILITIES))
        if unknown or not self.needs:
            raise OdqaError(
                f"a retriever kind needs one or more of {', '.join(CAPABILITIES)} of a store; got {sorted(self.needs)}"
            )


# The kinds of retriever (`--retriever`, `retrieval.retriever`, the shell's `:retriever`), each served by every
# store that holds what it needs.
RETRIEVERS: Registry[RetrieverKind] = Registry(
    "retriever",
    {
        "bm25": RetrieverKind(_bm25, frozenset({TEXT})),
        "dense": RetrieverKind(_dense, frozenset({VECTORS})),
        "hybrid": RetrieverKind(_hybrid, frozenset({TEXT, VECTORS}), fallback="bm25"),
    },
)


def hybrid_fusion(backend: SearchBackend, settings) -> Fusion:
    """The fusion of a hybrid over `backend`: `retrieval.fusion` with its alpha and rrf_k; `auto`, the store's
    tuned record, else its language's default (odqa.core.fusion.resolve_fusion); a method the store runs itself
    (es-rrf), asked first, with its client-side fallback."""
    info = backend.info()
    method, server = settings.fusion, ""
    runner = fusion_runner(method)
    if runner is not None:
        if not isinstance(backend, FusesItself):
            raise OdqaError(
                f"retrieval.fusion {method!r} needs an {runner.title}, which {info.location} is not; "
                f"use one of {', '.join((AUTO, *FUSIONS.names))}"
            )
        method, server = runner.server_fusions[method], method
    method, alpha, rrf_k = resolve_fusion(
        method, settings.alpha, settings.rrf_k, tuned=info.tuned_fusion, language=info.language
    )
    return Fusion.hybrid(method, alpha, rrf_k, server)


# the question encoders loaded for each open store, by what was asked of them (dense and hybrid share one)
_ENCODERS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def question_encoder(backend: SearchBackend, settings, runtime: RetrieverRuntime) -> EncodesTexts:
    """The encoder of the questions searched in `backend`'s vectors: `settings.query_encoder` (any of the vectors'
    dimension: DPR's pair), else `settings.encoder` (which must be the vectors' own), else the one the store
    records; with the recorded pooling, similarity and question prefix unless the settings name others."""
    from odqa.core.encoder_loading import load_text_encoder

    info = backend.info()
    record = info.encoder or EncoderRecord(name="")
    recorded = record.question_encoder
    name = settings.query_encoder or settings.encoder or recorded
    if not name:
        # vectors made outside odqa: any guess would search them with another model's questions, without a word
        dim = f" ({record.dim}-d)" if record.dim else ""
        raise IndexMismatchError(
            f"{info.location} holds vectors{dim} but records no encoder that made them; name it in the config "
            '([retrieval] encoder = "MODEL", and query_encoder for a question encoder apart, as DPR\'s) or rebuild '
            "the index with `odqa index`"
        )
    _check_weights(record, settings.encoder or record.name, info, runtime.accept_encoder_change)
    wanted = settings.question_encoder_settings(name, record, runtime.inference, runtime.device)
    try:
        cache = _ENCODERS.setdefault(backend, {})
    except TypeError:  # a store that cannot be weakly referenced or hashed: nothing kept
        cache = {}
    if wanted not in cache:
        cache[wanted] = load_text_encoder(wanted)
    encoder = cache[wanted]
    check_vectors_encoder(
        info.location,
        (record.name, record.dim),
        (encoder.name, encoder.dim),
        f"query with the index's encoder or rebuild the index with `--encoder {encoder.name}`",
        compare_names=bool(settings.encoder) and not settings.query_encoder,
    )
    return encoder


def _check_weights(record: EncoderRecord, name: str, info: BackendInfo, accept: bool) -> None:
    """The vectors come from one set of weights: a model retrained in place under the same name would silently
    pair them with other question vectors."""
    from odqa.core.models import model_fingerprint

    if not record.weights or not same_encoder(name, record.name) or model_fingerprint(name) == record.weights:
        return
    message = (
        f"{info.location} was encoded with other weights of {name!r} than the ones installed now (the model "
        f"was retrained or replaced); rebuild the index with `run_qa.py index --encoder {name}`, or pass "
        f"--accept-encoder-change ({ACCEPT_ENCODER_CHANGE_ENV}=1) to search it anyway"
    )
    if accept or os.environ.get(ACCEPT_ENCODER_CHANGE_ENV) == "1":
        log.warning("warning: %s", message)
        return
    raise IndexMismatchError(message)
