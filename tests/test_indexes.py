import numpy as np
import pytest

from odqa.core.atomic import atomic_file, atomic_folder
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.indexes.bm25 import build_text_index, load_text_index
from odqa.indexes.manifest import Manifest
from odqa.indexes.vector import VectorIndex, VectorIndexParams

TEXTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "Mount Everest is Earth's highest mountain above sea level, in the Himalayas.",
    "Paris is the capital and most populous city of France.",
    "The Amazon River in South America is the largest river by discharge.",
    "Towers and bridges of iron were built in the nineteenth century.",
]


@pytest.mark.parametrize("engine", ["tantivy", "bm25s", "rank-bm25"])
def test_bm25_engines_rank_the_matching_passage_first(tmp_path, engine):
    index = build_text_index(iter(TEXTS), tmp_path / engine, Manifest(kind="bm25"), engine=engine)
    hits = index.search(["highest mountain on Earth", "Where is the Eiffel Tower?", "the of and"], k=3)
    assert hits[0][0][0] == 1
    assert hits[1][0][0] == 0
    assert hits[2] == []  # stop words only: nothing to match, no error
    assert all(a[1] >= b[1] for a, b in zip(hits[1], hits[1][1:]))  # best first
    reloaded = load_text_index(tmp_path / engine)
    assert reloaded.search(["Amazon river discharge"], k=1)[0][0][0] == 3
    assert reloaded.manifest.count == len(TEXTS)


def test_bm25_engines_agree_on_top_passage(tmp_path):
    queries = ["capital of France", "iron towers built", "largest river South America"]
    tops = []
    for engine in ["tantivy", "bm25s", "rank-bm25"]:
        index = build_text_index(iter(TEXTS), tmp_path / engine, Manifest(kind="bm25"), engine=engine)
        tops.append([hits[0][0] for hits in index.search(queries, k=1)])
    assert tops[0] == tops[1] == tops[2] == [2, 4, 3]


def test_query_operators_are_plain_words(tmp_path):
    index = build_text_index(iter(TEXTS), tmp_path / "t", Manifest(kind="bm25"))
    hits = index.search(['Paris AND (France OR "tower"'], k=5)
    assert hits[0] and hits[0][0][0] in (0, 2)


def _vectors(n=500, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_vector_index_matches_brute_force(tmp_path, kind):
    vectors = _vectors()
    np.save(tmp_path / "emb.npy", vectors)
    params = VectorIndexParams(kind=kind, nlist=8, nprobe=8, ef_search=200)
    index = VectorIndex.build(tmp_path / "emb.npy", tmp_path / kind, Manifest(kind="faiss", encoder="e"), params)
    queries = _vectors(20, seed=1)
    scores, rows = index.search(queries, 5)
    truth = np.argsort(-(queries @ vectors.T), axis=1)[:, :5]
    recall = np.mean([len(set(r) & set(t)) / 5 for r, t in zip(rows, truth)])
    assert recall >= (1.0 if kind == "flat" else 0.9)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    again = VectorIndex.load(tmp_path / kind)
    assert again.manifest.dim == 16 and len(again) == 500


def test_flat_search_in_blocks_equals_one_block(tmp_path):
    vectors = _vectors(300)
    np.save(tmp_path / "emb.npy", vectors)
    index = VectorIndex.build(tmp_path / "emb.npy", tmp_path / "flat", Manifest(kind="faiss"))
    q = _vectors(4, seed=3)
    a = index.search(q, 7, block_rows=50)
    b = index.search(q, 7, block_rows=10_000)
    assert np.array_equal(a[1], b[1]) and np.allclose(a[0], b[0])


def test_float16_vectors_are_searched_from_memory_with_the_scores_of_the_memmap(tmp_path, monkeypatch):
    import odqa.indexes.vector

    vectors = _vectors(700).astype(np.float16)
    np.save(tmp_path / "emb.npy", vectors)
    index = VectorIndex.build(tmp_path / "emb.npy", tmp_path / "flat", Manifest(kind="faiss"))
    q = _vectors(5, seed=4)
    scores, rows = index.search(q, 9)
    assert index._resident is not None and index._resident.ntotal == 700
    truth = q @ vectors.astype(np.float32).T
    assert np.array_equal(rows, np.argsort(-truth, axis=1)[:, :9])
    assert np.allclose(scores, np.take_along_axis(truth, rows, axis=1), atol=1e-5)

    monkeypatch.setattr(odqa.indexes.vector, "RESIDENT_FP16_BYTES", vectors.nbytes - 1)  # too large: the memmap
    again = VectorIndex.load(tmp_path / "flat")
    blocked = again.search(q, 9, block_rows=100)
    assert again._resident is None
    assert np.array_equal(blocked[1], rows) and np.allclose(blocked[0], scores, atol=1e-5)


def test_manifest_checks(tmp_path):
    m = Manifest(kind="faiss", corpus_fingerprint="abc", encoder="minilm", dim=384)
    m.save(tmp_path)
    loaded = Manifest.load(tmp_path, kind="faiss")
    loaded.check_corpus("abc", "x")
    with pytest.raises(IndexMismatchError, match="another corpus"):
        loaded.check_corpus("def", "x")
    with pytest.raises(IndexMismatchError, match="768-d"):
        loaded.check_encoder("mpnet", 768, "x")
    with pytest.raises(IndexMismatchError, match="bm25"):
        Manifest.load(tmp_path, kind="bm25")
    with pytest.raises(OdqaError, match="not an odqa index"):
        Manifest.load(tmp_path / "missing")


def test_failed_build_leaves_the_old_index_intact(tmp_path):
    target = tmp_path / "idx"
    with atomic_folder(target) as tmp:
        (tmp / "good.txt").write_text("good")
    with pytest.raises(RuntimeError):
        with atomic_folder(target) as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("crash mid-build")
    assert sorted(p.name for p in target.iterdir()) == ["good.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temp folder left behind


def test_failed_file_write_leaves_the_old_file_intact(tmp_path):
    target = tmp_path / "sub" / "data.json"
    with atomic_file(target) as tmp:
        tmp.write_text("good")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("ha")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "good"
    assert [p.name for p in target.parent.iterdir()] == ["data.json"]  # no temp file left behind
