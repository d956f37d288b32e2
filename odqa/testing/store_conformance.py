"""What every store of passages must do (odqa.core.protocols.SearchBackend), checked against a reference store
holding the same passages (an index folder built from them: `FolderIndex.open(folder)`): call
`check_store(store, reference, questions, vectors)` from a test of your store, where `vectors` are the questions
encoded by the reference's question encoder. Each check raises AssertionError naming what broke; none asserts a
model's choice beyond "finds what the reference finds".

    from odqa.indexes.folder import FolderIndex
    from odqa.testing.store_conformance import check_store

    def test_my_store_conforms(my_store, folder_of_the_same_passages, questions, vectors):
        check_store(my_store, FolderIndex.open(folder_of_the_same_passages), questions, vectors)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from odqa.core.errors import OdqaError
from odqa.core.protocols import CAPABILITIES, SearchBackend
from odqa.core.types import BackendInfo
from odqa.retriever.hybrid import HybridRetriever
from odqa.retriever.registry import RETRIEVERS, RetrieverRuntime, build_retriever, check_retriever_available
from odqa.retriever.settings import RetrievalConfig

LISTED = 5  # hits asked of each search: enough to compare orders, few enough for any small store


def check_describes_itself(store: SearchBackend, reference: SearchBackend) -> None:
    assert isinstance(store, SearchBackend), "a store has the SearchBackend methods"
    info = store.info()
    assert isinstance(info, BackendInfo) and info.location, "info() gives a BackendInfo naming its location"
    assert info.summary["language"] == info.language == reference.info().language
    assert len(store) == len(reference), f"{len(store)} passages, the reference holds {len(reference)}"
    held = store.capabilities()
    assert held and held <= set(CAPABILITIES), f"capabilities() must name some of {sorted(CAPABILITIES)}: {held}"
    for capability in held:
        store.check_available(capability)
    for kind in RETRIEVERS.names:
        check_retriever_available(store, kind)  # the kind, or its fallback, runs; else one line says why


def check_passages_by_row(store: SearchBackend, reference: SearchBackend) -> None:
    rows = sorted({0, len(reference) - 1, len(reference) // 2, min(5, len(reference) - 1)})
    rows.append(rows[0])  # a row asked twice comes twice
    assert [p.id for p in store.passages(rows)] == [p.id for p in reference.passages(rows)]
    assert store.passages([]) == []


def check_text_search_ranks_best_first(store: SearchBackend, questions: Sequence[str]) -> None:
    k = LISTED
    results = store.text_search(list(questions), k, 0.0)
    assert len(results) == len(questions), "one list per question"
    for hits in results:
        assert 0 < len(hits) <= k and {h.source for h in hits} == {"bm25"}
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True), "best first"
        assert len({h.row for h in hits}) == len(hits) and all(0 <= h.row < len(store) for h in hits)
        read = store.passages([h.row for h in hits])
        assert all(h.passage is None or h.passage.id == p.id for h, p in zip(hits, read))


def check_term_pruning_is_done_or_refused_in_one_line(store: SearchBackend, questions: Sequence[str]) -> None:
    refusal = store.info().max_df_refusal
    if not refusal:
        assert store.text_search(list(questions[:1]), 3, 0.5)[0]
        return
    try:
        store.text_search(list(questions[:1]), 3, 0.5)
    except OdqaError as exc:
        assert str(exc) == refusal and "\n" not in refusal
    else:
        raise AssertionError("max_df is refused by info() but text_search ran it")


def check_vector_search_finds_what_the_reference_finds(
    store: SearchBackend, reference: SearchBackend, vectors: np.ndarray
) -> None:
    k = 2 * LISTED
    got, want = store.vector_search(vectors, k), reference.vector_search(vectors, k + 1)
    for hits, expected in zip(got, want):
        assert len(hits) == k and {h.source for h in hits} == {"dense"}
        if {h.row for h in hits} != {h.row for h in expected[:k]}:  # only a near-tie at the cut may differ
            assert abs(expected[k - 1].score - expected[k].score) < 2e-3, "not the reference's top k"
        np.testing.assert_allclose([h.score for h in hits[:3]], [h.score for h in expected[:3]], atol=5e-3)


def check_article_passages_are_the_reference_s(store: SearchBackend, reference: SearchBackend) -> None:
    step = max(1, len(reference) // 10)
    doc_ids = sorted({p.doc_id for p in reference.passages(range(0, len(reference), step))})
    mine, theirs = store.article_passages(), reference.article_passages()
    for doc_id in doc_ids:
        assert [(row, p.id) for row, p in mine.article(doc_id, 50)] == [
            (row, p.id) for row, p in theirs.article(doc_id, 50)
        ], doc_id
    assert mine.article("no-such-article", 5) == []


def check_every_retriever_kind_serves_the_store(store: SearchBackend, questions: Sequence[str]) -> None:
    k = LISTED
    for kind in RETRIEVERS.names:
        retriever = build_retriever(store, RetrievalConfig(), RetrieverRuntime(), kind)
        results = retriever.search(list(questions[:3]), k)
        assert all(len(hits) == k and {h.source for h in hits} == {kind} for hits in results), kind
        assert all(h.passage is not None and h.passage.id for hits in results for h in hits), kind


def check_an_out_of_range_k_is_the_whole_store(store: SearchBackend, question: str) -> None:
    dense = build_retriever(store, RetrievalConfig(), RetrieverRuntime(), "dense")
    assert len(dense.search([question], len(store) + 5)[0]) == len(store)
    try:
        dense.search([question], 0)
    except OdqaError as exc:
        assert str(exc) == "k must be a positive number, got 0"
    else:
        raise AssertionError("k = 0 was not refused")


def check_hybrid_fuses_the_store_s_own_lists(store: SearchBackend, questions: Sequence[str]) -> None:
    hybrid = build_retriever(store, RetrievalConfig(candidates=30), RetrieverRuntime(), "hybrid")
    assert isinstance(hybrid, HybridRetriever), "a store holding text and vectors gets the hybrid it asked for"
    dense = hybrid.dense.search(list(questions), 30, passages=False)
    sparse = hybrid.sparse.search(list(questions), 30, passages=False)
    for fused, d, s in zip(hybrid.search(list(questions), 10), dense, sparse):
        assert [(h.row, h.score) for h in fused] == [(h.row, h.score) for h in hybrid.fusion([d, s], 10)]


def check_store(store: SearchBackend, reference: SearchBackend, questions: Sequence[str], vectors: np.ndarray) -> None:
    """Every check above, in order; the first that fails raises AssertionError naming the problem."""
    check_describes_itself(store, reference)
    check_passages_by_row(store, reference)
    check_text_search_ranks_best_first(store, questions)
    check_term_pruning_is_done_or_refused_in_one_line(store, questions)
    check_vector_search_finds_what_the_reference_finds(store, reference, vectors)
    check_article_passages_are_the_reference_s(store, reference)
    check_every_retriever_kind_serves_the_store(store, questions)
    check_an_out_of_range_k_is_the_whole_store(store, questions[0])
    check_hybrid_fuses_the_store_s_own_lists(store, questions)
