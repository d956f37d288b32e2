"""Backends by name (odqa.core.registry and its registries), index locations (folder or es://), the index
folder layout and the one place of the knowledge base beside an index."""

import io
from pathlib import Path

import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.fusion import FUSIONS
from odqa.core.registry import Registry
from odqa.indexes.bm25 import TEXT_ENGINES
from odqa.indexes.elastic_connection import parse_location
from odqa.indexes.layout import IndexLayout
from odqa.indexes.vector import VECTOR_INDEXES
from odqa.retriever.registry import INDEX_BACKENDS, RETRIEVERS, backend_of, fusion_choices


def test_unknown_name_is_one_line_with_the_choices():
    registry = Registry("BM25 engine", {"a": 1, "b": 2})
    assert registry.get("b") == 2 and "a" in registry and registry.names == ("a", "b")
    with pytest.raises(OdqaError, match=r"^unknown BM25 engine 'c'; choose one of a, b$"):
        registry.get("c")
    with pytest.raises(ValueError, match="twice"):
        registry.register("a", 3)


def test_the_registries_hold_the_backends():
    assert TEXT_ENGINES.names == ("tantivy", "bm25s", "rank-bm25")
    assert VECTOR_INDEXES.names == ("flat", "hnsw", "ivf", "ivfpq")
    assert RETRIEVERS.names == ("bm25", "dense", "hybrid")
    assert FUSIONS.names == ("rrf", "minmax") and fusion_choices() == ("auto", "rrf", "minmax", "es-rrf")
    assert fusion_choices("indexes/wiki") == ("auto", "rrf", "minmax")
    assert INDEX_BACKENDS.names == ("folder", "es")


def _choices(parser, command: str, flag: str):
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return tuple(next(a for a in sub._actions if flag in a.option_strings).choices)


def test_cli_choices_come_from_the_registries():
    from odqa.cli import build_parser

    parser = build_parser()
    for command in ("ask", "shell", "eval-qa", "search", "eval-retrieval", "es-search", "build-reader-data"):
        assert _choices(parser, command, "--retriever") == RETRIEVERS.names, command
    assert _choices(parser, "index", "--bm25-engine") == TEXT_ENGINES.names
    assert _choices(parser, "index", "--vector-index") == ("auto", *VECTOR_INDEXES.names)
    assert _choices(parser, "search", "--fusion") == fusion_choices()


def test_the_shell_names_the_registered_retrievers():
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell

    out = io.StringIO()
    shell = Shell(Pipeline(OdqaConfig.load(None, {"index": "nowhere"})), out=out)
    shell.run_lines([":retriever magic", ":retriever bm25"])
    assert "! :retriever takes bm25, dense, hybrid" in out.getvalue() and shell.retriever == "bm25"


@pytest.mark.parametrize(
    "location,backend",
    [
        ("indexes/wiki", "folder"),
        ("/abs/es/wiki", "folder"),
        ("es://127.0.0.1:9200/wiki", "es"),
        ("ES+HTTPS://es.example:443/wiki", "es"),
        ("es://", "es"),
        ("http://127.0.0.1:9200/wiki", "folder"),
    ],
)
def test_backend_of_a_location(location, backend):
    assert backend_of(location) == backend


def test_elastic_locations():
    assert parse_location("es://127.0.0.1:9200/wiki") == ("http://127.0.0.1:9200", "wiki")
    assert parse_location("es+https://a:9200,b:9200/wiki/") == ("https://a:9200,https://b:9200", "wiki")
    assert parse_location("es://") == ("", "")
    assert parse_location("es:///wiki") == ("", "wiki")
    with pytest.raises(OdqaError, match="holds '/'"):
        parse_location("es://127.0.0.1:9200/a/b")


def test_config_takes_an_elastic_index_and_its_fusions():
    config = OdqaConfig.load(None, {"index": "es://127.0.0.1:9200/wiki", "retrieval.fusion": "es-rrf"})
    assert config.retrieval.fusion == "es-rrf"
    with pytest.raises(OdqaError, match="'es-rrf' needs an Elasticsearch index"):
        OdqaConfig.load(None, {"index": "indexes/wiki", "retrieval.fusion": "es-rrf"})
    with pytest.raises(OdqaError, match="elastic.index_name must be a non-empty lower-case name, got 'Wiki'"):
        OdqaConfig.load(None, {"index": "es://127.0.0.1:9200/Wiki"})


def test_index_layout():
    layout = IndexLayout("indexes/wiki")
    assert layout.manifest == Path("indexes/wiki/manifest.json")
    assert (layout.passages, layout.bm25, layout.dense) == tuple(
        Path("indexes/wiki", p) for p in ("passages", "bm25", "dense")
    )
    assert layout.embeddings == Path("indexes/wiki/dense/embeddings.npy")
    assert layout.work.root == Path("indexes/wiki.work") and layout.work.bm25 == Path("indexes/wiki.work/bm25")
    assert layout.kb == Path("indexes/wiki-kb")


def test_the_knowledge_base_beside_an_index_is_found_in_one_place(tmp_path):
    from odqa.commands.linker import default_kb_path
    from odqa.pipeline import Pipeline

    index = tmp_path / "wiki"
    (tmp_path / "wiki-kb").mkdir()
    (tmp_path / "wiki-kb" / "entities.jsonl").write_text("")
    (index / "kb").mkdir(parents=True)  # the place `link` used to look in as well
    (index / "kb" / "entities.jsonl").write_text("")
    config = OdqaConfig.load(None, {"index": str(index)})
    assert Pipeline(config).kb_path == default_kb_path(config) == tmp_path / "wiki-kb"
    elastic = Pipeline(OdqaConfig.load(None, {"index": "es://127.0.0.1:9200/wiki"}))
    with pytest.raises(OdqaError, match="Elasticsearch index has no knowledge base beside it; set linker.kb"):
        elastic.kb_path  # noqa: B018 -- a property: computing it is what fails
