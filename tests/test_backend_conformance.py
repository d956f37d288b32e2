"""One suite for every store of passages (odqa.core.protocols.SearchBackend), the way Haystack tests every document
store: the index folder, Elasticsearch (noida-db, tests/es_server.py) and a toy store held in memory that is
registered with its own location scheme (tests/memory_backend.py: a new store is its module and one registry
line). Each keeps the contract and finds what the folder finds; every retriever kind, a fusion method and a retriever
kind each registered in one place (helpers below: the function or class and its one registry line), and the pipeline
run on each."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.fusion import FUSIONS, minmax_scale, top_hits
from odqa.core.protocols import TEXT, VECTORS, FusesItself, SearchBackend
from odqa.core.types import SearchHit
from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path
from odqa.indexes.folder import FolderIndex
from odqa.retriever.base import fit_k
from odqa.retriever.registry import (
    RETRIEVERS,
    RetrieverKind,
    RetrieverRuntime,
    backend_of,
    build_retriever,
    check_retriever_available,
    hybrid_fusion,
    open_index,
)
from odqa.retriever.settings import RetrievalConfig
from odqa.testing import store_conformance as conformance
from tests.memory_backend import MemoryIndex, registered

STORES = ["folder", pytest.param("es", marks=pytest.mark.elastic), "memory"]
EINSTEIN = "In which city was Albert Einstein born?"


@pytest.fixture(scope="module")
def folder() -> FolderIndex:
    return FolderIndex.open(demo_index_path(quiet=True))


@pytest.fixture(scope="module")
def questions() -> list[str]:
    from odqa.corpus.questions import load_questions

    return [item.question for item in load_questions(str(DEMO_QUESTIONS), limit=12)]


@pytest.fixture(scope="module")
def es_location(tmp_path_factory, folder):
    from odqa.config import ElasticConfig
    from odqa.indexes.elastic import ElasticIndex
    from odqa.indexes.elastic_bulk import BulkOptions, load_passages
    from tests.es_server import NoidaServer, start_or_skip

    server = start_or_skip(NoidaServer(tmp_path_factory.mktemp("noida") / "data"))
    index = ElasticIndex.open(ElasticConfig(hosts=server.url, index_name="odqa-conformance"))
    load_passages(index, folder.path, recreate=True, replicas=0, options=BulkOptions(chunk_size=100, progress=False))
    yield f"es://127.0.0.1:{server.port}/odqa-conformance"
    server.stop()


@pytest.fixture(scope="module")
def memory_location(folder):
    with registered(MemoryIndex.copy_of("demo", folder)):
        yield "mem://demo"


@pytest.fixture(scope="module", params=STORES)
def store(request, folder) -> tuple[str, str, SearchBackend]:
    """(backend name, location, the opened store)."""
    name = request.param
    location = {
        "folder": lambda: str(folder.path),
        "es": lambda: request.getfixturevalue("es_location"),
        "memory": lambda: request.getfixturevalue("memory_location"),
    }[name]()
    return name, location, open_index(location, OdqaConfig.load(None, {"index": location}))


@pytest.fixture(scope="module")
def vectors(folder, questions) -> np.ndarray:
    return build_retriever(folder, RetrievalConfig(), RetrieverRuntime(), "dense").encode(questions)


def test_the_store_says_what_it_is(store, folder):
    name, location, backend = store
    assert backend_of(location) == name
    conformance.check_describes_itself(backend, folder)
    info = backend.info()
    assert len(backend) == 308 and info.text and info.vectors and info.language == "en"
    assert (info.encoder.question_encoder, info.encoder.dim) == (folder.info().encoder.question_encoder, 384)
    assert backend.capabilities() == {TEXT, VECTORS}
    for kind in RETRIEVERS.names:
        assert check_retriever_available(backend, kind) == kind


def test_passages_by_row_are_the_folder_store_rows(store, folder):
    conformance.check_passages_by_row(store[2], folder)


def test_text_search_ranks_best_first(store, questions):
    backend = store[2]
    conformance.check_text_search_ranks_best_first(backend, [EINSTEIN, *questions])
    assert backend.passages([backend.text_search([EINSTEIN], 1, 0.0)[0][0].row])[0].title == "Albert Einstein"


def test_term_pruning_is_done_or_refused_in_one_line(store, questions):
    conformance.check_term_pruning_is_done_or_refused_in_one_line(store[2], questions)


def test_vector_search_finds_what_the_folder_finds(store, folder, vectors):
    conformance.check_vector_search_finds_what_the_reference_finds(store[2], folder, vectors)


def test_article_passages_are_the_folder_store_s(store, folder):
    conformance.check_article_passages_are_the_reference_s(store[2], folder)


def test_every_retriever_kind_serves_the_store(store, questions):
    conformance.check_every_retriever_kind_serves_the_store(store[2], questions)


def test_an_out_of_range_k_is_the_whole_store_and_k_below_one_one_line(store):
    conformance.check_an_out_of_range_k_is_the_whole_store(store[2], EINSTEIN)


def test_hybrid_fuses_the_store_s_own_lists(store, questions):
    conformance.check_hybrid_fuses_the_store_s_own_lists(store[2], questions)


def test_the_whole_suite_in_one_call(store, folder, questions, vectors):
    conformance.check_store(store[2], folder, questions, vectors)


def test_the_suite_fails_a_store_that_loses_a_passage(folder, questions, vectors):
    short = MemoryIndex.copy_of("short", folder)
    short.held = short.held[:-1]
    with pytest.raises(AssertionError):
        conformance.check_store(short, folder, questions, vectors)


def test_the_pipeline_runs_on_the_store(store):
    from odqa.pipeline import Pipeline

    name, location, _ = store
    pipeline = Pipeline(OdqaConfig.load(None, {"index": location, "linker.enabled": False, "retrieval.k": 5}))
    hits = pipeline.retrieve([EINSTEIN], [[]])[0]
    assert len(hits) == 5 and hits[0].passage.title == "Albert Einstein" and {h.source for h in hits} == {"hybrid"}
    assert pipeline.corpus_size == 308
    # the store's language and encoder, from info(): a Korean question over its multilingual vectors goes dense
    route = pipeline.route("아인슈타인은 어디서 태어났나?")
    assert route.cross_language and (route.asked, route.held, route.retriever) == ("ko", "en", "dense")


def test_a_fusion_the_store_does_not_run_is_refused(store):
    name, location, backend = store
    if isinstance(backend, FusesItself):
        assert hybrid_fusion(backend, RetrievalConfig(fusion="es-rrf")).server == "es-rrf"
        return
    with pytest.raises(OdqaError, match="'es-rrf' needs an Elasticsearch index"):
        OdqaConfig.load(None, {"index": location, "retrieval.fusion": "es-rrf"})
    with pytest.raises(OdqaError, match="'es-rrf' needs an Elasticsearch index"):
        hybrid_fusion(backend, RetrievalConfig(fusion="es-rrf"))


def _best_scaled(lists, k, weights, rrf_k):
    """The toy fusion: each passage's best weighted min-max scaled score over the lists."""
    best, passages = {}, {}
    for hits, weight in zip(lists, weights):
        for hit, scaled in zip(hits, minmax_scale([h.score for h in hits])):
            best[hit.row] = max(best.get(hit.row, 0.0), weight * scaled)
            passages.setdefault(hit.row, hit.passage)
    return top_hits(best, passages, k)


@pytest.fixture
def best_scaled_fusion():
    FUSIONS.register("best-scaled", _best_scaled)  # a new fusion method: its function and this one line
    yield "best-scaled"
    FUSIONS.unregister("best-scaled")


def test_a_fusion_method_registered_in_one_place_serves_every_store(store, best_scaled_fusion, questions):
    from odqa.pipeline import Pipeline

    name, location, _ = store
    config = OdqaConfig.load(
        None,
        {
            "index": location,
            "linker.enabled": False,
            "retrieval.fusion": best_scaled_fusion,
            "retrieval.alpha": 0.7,
            "retrieval.candidates": 20,
        },
    )
    hybrid = Pipeline(config).retriever("hybrid")
    assert (hybrid.fusion.method, hybrid.fusion.weights) == (best_scaled_fusion, [0.7, pytest.approx(0.3)])
    dense = hybrid.dense.search(questions, 20, passages=False)
    sparse = hybrid.sparse.search(questions, 20, passages=False)
    for fused, d, s in zip(hybrid.search(questions, 5), dense, sparse):
        assert [h.row for h in fused] == [h.row for h in _best_scaled([d, s], 5, hybrid.fusion.weights, 60)]


WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


class OverlapRetriever:
    """The toy retriever kind: each question's BM25 candidates (`retrieval.candidates`) re-ranked by the share of the
    question's words the passage holds (BM25's order among ties), over any store through its `SearchBackend`
    methods alone."""

    name = "overlap"

    def __init__(self, backend: SearchBackend, candidates: int):
        self.backend, self.candidates = backend, candidates

    @classmethod
    def build(cls, backend: SearchBackend, settings, runtime: RetrieverRuntime) -> OverlapRetriever:
        """The registry's factory: (backend, settings, runtime) -> the retriever."""
        return cls(backend, settings.candidates)

    def search(self, questions: Sequence[str], k: int) -> list[list[SearchHit]]:
        k = fit_k(k, len(self.backend))
        depth = max(k, min(self.candidates, len(self.backend)))
        results = []
        for question, hits in zip(questions, self.backend.text_search(list(questions), depth, 0.0)):
            passages = self.backend.passages([hit.row for hit in hits])
            asked = _words(question)
            share = [len(asked & _words(f"{p.title} {p.text}")) / max(len(asked), 1) for p in passages]
            order = sorted(range(len(hits)), key=lambda i: -share[i])  # stable: BM25's order among ties
            results.append(
                [SearchHit(row=hits[i].row, score=share[i], passage=passages[i], source=self.name) for i in order[:k]]
            )
        return results


@pytest.fixture
def overlap_kind():
    # a new retriever kind: its class and this one line, which says what it needs of a store
    RETRIEVERS.register("overlap", RetrieverKind(OverlapRetriever.build, frozenset({TEXT})))
    yield "overlap"
    RETRIEVERS.unregister("overlap")


def test_a_retriever_kind_registered_in_one_place_serves_every_store_and_the_pipeline(store, overlap_kind, questions):
    from odqa.cli import build_parser
    from odqa.pipeline import Pipeline

    name, location, backend = store
    retriever = build_retriever(backend, RetrievalConfig(candidates=20), RetrieverRuntime(), overlap_kind)
    assert isinstance(retriever, OverlapRetriever)
    candidates = backend.text_search(questions, 20, 0.0)
    for hits, pool in zip(retriever.search(questions, 5), candidates):
        assert 0 < len(hits) <= 5 and {h.source for h in hits} == {overlap_kind}
        assert {h.row for h in hits} <= {h.row for h in pool}  # a re-ranking of the store's own BM25 list
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert all(h.passage is not None and h.passage.id for h in hits)

    # the config, the command line and the pipeline take the kind by name, as they take bm25, dense and hybrid
    settings = {"index": location, "linker.enabled": False, "retrieval.k": 5, "retrieval.candidates": 20}
    config = OdqaConfig.load(None, {**settings, "retrieval.retriever": overlap_kind})
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["ask"]
    assert overlap_kind in next(a for a in sub._actions if "--retriever" in a.option_strings).choices
    pipeline = Pipeline(config)
    pipeline.check_available()
    hits = pipeline.retrieve([EINSTEIN], [[]])[0]
    assert isinstance(pipeline.retriever(), OverlapRetriever) and {h.source for h in hits} == {overlap_kind}
    assert [(h.row, h.score) for h in hits] == [(h.row, h.score) for h in retriever.search([EINSTEIN], 5)[0]]


class VectorsOnly(MemoryIndex):
    """A store that holds passage vectors and no searchable text: what a kind needing text meets there."""

    def capabilities(self) -> frozenset[str]:
        return frozenset({VECTORS})

    def check_available(self, capability: str) -> None:
        if capability == TEXT:
            raise OdqaError(f"{self.info().location} holds no text index; use --retriever dense")
        super().check_available(capability)


def test_a_kind_is_built_by_what_the_store_holds_not_by_its_name(folder, overlap_kind, questions):
    held = folder.passages(range(len(folder)))
    text_only = MemoryIndex("text-only", held, encoder=folder.info().encoder)
    assert text_only.capabilities() == {TEXT}
    for kind in ("bm25", overlap_kind):  # a kind that needs text alone serves it, the store unchanged
        assert check_retriever_available(text_only, kind) == kind
        assert build_retriever(text_only, RetrievalConfig(), RetrieverRuntime(), kind).search(questions[:1], 3)[0]
    assert check_retriever_available(text_only, "hybrid") == "bm25"  # its fallback, whose needs the store holds
    assert build_retriever(text_only, RetrievalConfig(), RetrieverRuntime(), "hybrid").name == "bm25"
    with pytest.raises(OdqaError, match=r"^memory index 'text-only' holds no vectors; use --retriever bm25$"):
        build_retriever(text_only, RetrievalConfig(), RetrieverRuntime(), "dense")

    vectors_only = VectorsOnly("vectors-only", held, folder.vector_index().verified_embeddings(), folder.info().encoder)
    assert build_retriever(vectors_only, RetrievalConfig(), RetrieverRuntime(), "dense").search(questions[:1], 3)[0]
    for kind in ("bm25", "hybrid", overlap_kind):  # no fallback holds what the store lacks: the store says why
        with pytest.raises(OdqaError, match=r"^memory index 'vectors-only' holds no text index; use --retriever dense"):
            build_retriever(vectors_only, RetrievalConfig(), RetrieverRuntime(), kind)


def test_a_retriever_kind_needs_known_capabilities():
    unknown = r"^a retriever kind needs one or more of text, vectors of a store; got \['graph'\]$"
    with pytest.raises(OdqaError, match=unknown):
        RetrieverKind(OverlapRetriever.build, frozenset({"graph"}))
    with pytest.raises(OdqaError, match="needs one or more of text, vectors"):
        RetrieverKind(OverlapRetriever.build, frozenset())


def test_a_retriever_kind_not_registered_is_refused_in_one_line():
    with pytest.raises(OdqaError, match="^config: retrieval.retriever must be one of bm25, dense, hybrid; got 'x'$"):
        OdqaConfig.load(None, {"retrieval.retriever": "x"})
    with pytest.raises(OdqaError, match="^unknown retriever 'x'; choose one of bm25, dense, hybrid$"):
        build_retriever(MemoryIndex("empty", []), RetrievalConfig(), RetrieverRuntime(), "x")


def test_vectors_that_record_no_encoder_are_searched_only_with_the_one_named(folder, questions):
    from odqa.core.errors import IndexMismatchError

    record = folder.info().encoder
    held = folder.passages(range(len(folder)))
    store = MemoryIndex("unrecorded", held, folder.vector_index().verified_embeddings(), encoder=None)
    for kind in ("dense", "hybrid"):
        with pytest.raises(IndexMismatchError, match=r"records no encoder that made them; name it in the config") as e:
            build_retriever(store, RetrievalConfig(), RetrieverRuntime(), kind)
        assert "\n" not in str(e.value) and "memory index 'unrecorded'" in str(e.value)
    named = build_retriever(store, RetrievalConfig(encoder=record.name), RetrieverRuntime(), "dense")
    expected = build_retriever(folder, RetrievalConfig(), RetrieverRuntime(), "dense").search(questions[:3], 5)
    assert [[h.passage.id for h in hits] for hits in named.search(questions[:3], 5)] == [
        [h.passage.id for h in hits] for hits in expected
    ]
