"""The vector index kind `index` builds when `--vector-index` is not given: exact flat search for a corpus up to
`FLAT_MAX_VECTORS` passages, IVF-PQ above, whose candidates are rescored exactly from the stored vectors."""

import numpy as np
import pytest

import odqa.indexes.vector as vector
from odqa.indexes.manifest import Manifest
from odqa.indexes.vector import FLAT_MAX_VECTORS, VectorIndex, VectorIndexParams, auto_kind


def _vectors(n, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    v = centres[rng.integers(0, 20, n)] + 0.5 * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


def test_auto_is_flat_up_to_the_limit_and_ivfpq_above():
    assert VectorIndexParams().kind == "auto"
    assert auto_kind(1) == auto_kind(FLAT_MAX_VECTORS) == "flat"
    assert auto_kind(FLAT_MAX_VECTORS + 1) == auto_kind(21_000_000) == "ivfpq"


def test_a_larger_corpus_searches_more_lists_and_rescores_more_candidates(tmp_path):
    from odqa.indexes.vector import DEEP_SEARCH_MIN_VECTORS, search_depth

    assert search_depth(1_000_000) == search_depth(DEEP_SEARCH_MIN_VECTORS) == (64, 100)
    nprobe, rerank = search_depth(21_000_000)
    assert nprobe > 64 and rerank > 100
    np.save(tmp_path / "emb.npy", _vectors(3000))
    index = VectorIndex.build(
        tmp_path / "emb.npy", tmp_path / "idx", Manifest(kind="faiss"), VectorIndexParams(kind="ivfpq", nlist=16)
    )
    assert (index.manifest.params["nprobe"], index.manifest.params["rerank"]) == (64, 100)  # recorded, resolved
    np.save(tmp_path / "emb2.npy", _vectors(3000))
    asked = VectorIndex.build(
        tmp_path / "emb2.npy",
        tmp_path / "idx2",
        Manifest(kind="faiss"),
        VectorIndexParams(kind="ivfpq", nlist=16, nprobe=8, rerank=0),
    )
    assert (asked.manifest.params["nprobe"], asked.manifest.params["rerank"]) == (8, 0)  # asked for: kept


def test_a_small_corpus_gets_the_exact_flat_index(tmp_path):
    np.save(tmp_path / "emb.npy", _vectors(300))
    index = VectorIndex.build(tmp_path / "emb.npy", tmp_path / "idx", Manifest(kind="faiss"))
    assert index.manifest.params["kind"] == "flat" and index.faiss_index is None
    assert VectorIndex.load(tmp_path / "idx").manifest.params["kind"] == "flat"


def test_above_the_limit_auto_builds_ivfpq_whose_scores_are_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(vector, "FLAT_MAX_VECTORS", 1000)
    vectors = _vectors(3000)
    np.save(tmp_path / "emb.npy", vectors)
    index = VectorIndex.build(
        tmp_path / "emb.npy", tmp_path / "idx", Manifest(kind="faiss"), VectorIndexParams(nprobe=64)
    )
    assert index.manifest.params["kind"] == "ivfpq" and index.manifest.params["pq_m"] == vectors.shape[1] // 4
    queries = _vectors(30, seed=1).astype(np.float32)
    scores, rows = VectorIndex.load(tmp_path / "idx").search(queries, 10)
    exact = queries @ vectors.astype(np.float32).T
    truth = np.argsort(-exact, axis=1)[:, :10]
    assert np.mean([len(set(r) & set(t)) / 10 for r, t in zip(rows, truth)]) >= 0.9
    # rescored: each score is the exact inner product with the stored vector, best first
    assert np.allclose(scores, np.take_along_axis(exact, rows, 1), atol=1e-5)
    assert np.all(np.diff(scores, axis=1) <= 0)


def test_rerank_off_keeps_the_codes_scores(tmp_path, monkeypatch):
    vectors = _vectors(3000)
    np.save(tmp_path / "emb.npy", vectors)
    index = VectorIndex.build(
        tmp_path / "emb.npy",
        tmp_path / "idx",
        Manifest(kind="faiss"),
        VectorIndexParams(kind="ivfpq", rerank=0, nlist=16, nprobe=16),
    )
    queries = _vectors(5, seed=1).astype(np.float32)
    scores, rows = index.search(queries, 10)
    exact = np.take_along_axis(queries @ vectors.astype(np.float32).T, rows, 1)
    assert not np.allclose(scores, exact, atol=1e-5)  # product-quantised approximations


def test_the_index_command_offers_auto_and_ivfpq():
    from odqa.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["index"]
    action = next(a for a in sub._actions if "--vector-index" in a.option_strings)
    assert action.default == "auto" and {"auto", "flat", "ivfpq"} <= set(action.choices)
    with pytest.raises(SystemExit):
        sub.parse_args(["--corpus", "c", "--out", "o", "--vector-index", "pq"])


def test_many_lists_are_found_through_a_graph_of_the_centroids_with_the_lists_flat_search_finds(tmp_path, monkeypatch):
    """From HNSW_QUANTIZER_MIN_LISTS lists on, ivfpq assigns and probes through an HNSW graph of its centroids
    (saved with the index, searched wide enough for nprobe); it finds the lists comparing with every centroid
    finds, so the top rows hardly change."""
    import faiss

    monkeypatch.setattr(vector, "HNSW_QUANTIZER_MIN_LISTS", 64)
    vectors = _vectors(6000)
    queries = _vectors(40, seed=1).astype(np.float32)
    found = {}
    for name, quantizer in (("graph", "auto"), ("flat", "flat")):
        np.save(tmp_path / f"emb-{name}.npy", vectors)
        VectorIndex.build(
            tmp_path / f"emb-{name}.npy",
            tmp_path / name,
            Manifest(kind="faiss"),
            VectorIndexParams(kind="ivfpq", nlist=64, nprobe=16, quantizer=quantizer),
        )
        index = VectorIndex.load(tmp_path / name)
        quantizer = faiss.downcast_index(index.faiss_index.quantizer)
        assert isinstance(quantizer, faiss.IndexHNSWFlat) == (name == "graph")
        if name == "graph":
            assert quantizer.ntotal == 64 and quantizer.hnsw.efSearch >= 8 * 16
        found[name] = index.search(queries, 10)[1]
    same = np.mean([len(set(g) & set(f)) / 10 for g, f in zip(found["graph"], found["flat"])])
    assert same >= 0.95
