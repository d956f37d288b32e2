"""The kinds of retriever every index backend offers (`--retriever`, `retrieval.retriever`, the shell's
`:retriever`), by name. A backend (`retriever.loading.IndexBundle`, `retriever.elastic.ElasticBackend`) has
one method per kind; a new kind is one line here and one method on each backend."""

from __future__ import annotations

from odqa.core.fusion import AUTO, FUSIONS
from odqa.core.registry import Registry

SERVER_RRF = "es-rrf"  # Elasticsearch's own rrf retriever (falls back to client-side rrf where missing)
HYBRID_FUSIONS = (AUTO, *FUSIONS.names)  # auto: odqa.core.fusion.resolve_fusion
ELASTIC_FUSIONS = (*HYBRID_FUSIONS, SERVER_RRF)


def _bm25(backend, **options):
    return backend.bm25(bm25_max_df=options.get("bm25_max_df"))


DENSE_OPTIONS = ("encoder", "precision", "runtime", "device", "accept_encoder_change", "query_encoder", "settings")


def _dense(backend, **options):
    return backend.dense(**{k: v for k, v in options.items() if k in DENSE_OPTIONS})


def _hybrid(backend, **options):
    return backend.hybrid(**options)


RETRIEVERS: Registry = Registry("retriever", {"bm25": _bm25, "dense": _dense, "hybrid": _hybrid})


def make_retriever(backend, kind: str, **options):
    """The `kind` retriever of an opened index backend; options: encoder, fusion, alpha, candidates, rrf_k,
    bm25_max_df, precision, runtime, device, accept_encoder_change, query_encoder, settings (each backend takes
    what applies)."""
    return RETRIEVERS.get(kind)(backend, **options)


def configured_retriever(backend, config, kind: str | None = None, **overrides):
    """The retriever `config` (an OdqaConfig) asks of an opened index backend: the one mapping from the
    config's [retrieval] section, `precision`, `runtime` and `device` to retriever options
    (`OdqaConfig.retriever_options`), for the pipeline, `search`, `eval-retrieval` and `es-search` alike.
    `kind`: another retriever kind than `retrieval.retriever`; `overrides`: options set apart from the config."""
    return backend.retriever(kind or config.retrieval.retriever, **{**config.retriever_options(), **overrides})
