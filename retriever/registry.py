"""Index backends by name: where the passages of `index` (config) / `--index` (CLI) are searched.

* `folder`: an index folder built by `odqa index` (retriever/loading.py), any location without a scheme;
* `es`: an Elasticsearch index loaded by `odqa es-index` (retriever/elastic.py), named `es://host:9200/name`
  (`es+https://` for TLS; `es://` alone: the `[elastic]` section's hosts and index name).

Each backend opens as an object with one method per retriever kind (`retriever.kinds.RETRIEVERS`), `len()`
(passages) and `describe()`. The factories import their backend on first use, so the config and the CLI read
the names here without loading FAISS, Arrow or the Elasticsearch client. A new backend: its module, one line
in `INDEX_BACKENDS` (and its scheme in `backend_of`).
"""

from __future__ import annotations

from odqa.indexes.elastic import LOCATION_SCHEMES
from odqa.core.registry import Registry


def backend_of(location: str) -> str:
    """The backend a location names: `es` for es://..., else `folder`."""
    scheme, sep, _ = str(location).partition("://")
    return "es" if sep and scheme.lower() in LOCATION_SCHEMES else "folder"


def _open_folder(location: str, config):
    from odqa.retriever.loading import IndexBundle

    return IndexBundle.open(location)


def _open_elastic(location: str, config):
    from odqa.core.optional import require

    require("elasticsearch", f"the Elasticsearch index {location}")
    from odqa.retriever.elastic import ElasticBackend

    return ElasticBackend.open(location, config)


INDEX_BACKENDS: Registry = Registry("index backend", {"folder": _open_folder, "es": _open_elastic})


def open_index(location, config):
    """The index backend at `location`, opened with `config` (an OdqaConfig: [elastic] and [retrieval])."""
    return INDEX_BACKENDS.get(backend_of(str(location)))(str(location), config)

