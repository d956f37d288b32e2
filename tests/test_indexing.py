"""Building an index: sharded, resumable dense encoding that merges into one index."""

import json

import numpy as np
import pytest

from odqa.core.errors import OdqaError
from odqa.indexes.folder import FolderIndex
from odqa.indexing import IndexSpec, build_index, parse_shard
from tests.retrievers import built_retriever

DOCS = [
    {"id": str(i), "title": f"Doc {i}", "text": f"Document number {i} talks about topic {i} and nothing else."}
    for i in range(7)
]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def test_shards_merge_into_the_same_index_as_one_run(corpus, tmp_path):
    whole = build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "whole"), backends=["dense"], chunk_size=2))
    assert whole.finished
    first = build_index(
        IndexSpec(corpus=str(corpus), out=str(tmp_path / "sharded"), backends=["dense"], chunk_size=2, shard=(0, 2))
    )
    assert not first.finished and "2 of 4 chunks" in first.message
    assert not (tmp_path / "sharded").exists()  # nothing published before every chunk exists
    work = tmp_path / "sharded.work" / "dense-chunks"
    assert sorted(p.name for p in work.glob("chunk-*.npy")) == ["chunk-00000.npy", "chunk-00002.npy"]
    second = build_index(
        IndexSpec(corpus=str(corpus), out=str(tmp_path / "sharded"), backends=["dense"], chunk_size=2, shard=(1, 2))
    )
    assert second.finished
    a = np.load(tmp_path / "whole" / "dense" / "embeddings.npy")
    b = np.load(tmp_path / "sharded" / "dense" / "embeddings.npy")
    assert a.shape == (7, 384) and np.allclose(a, b, atol=1e-3)
    assert not (tmp_path / "sharded.work").exists()


def test_resume_skips_finished_chunks(corpus, tmp_path):
    out = tmp_path / "idx"
    build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["dense"], chunk_size=3, shard=(0, 3)))
    chunk = tmp_path / "idx.work" / "dense-chunks" / "chunk-00000.npy"
    marker = np.full((3, 384), 7.0, dtype=np.float16)  # a finished chunk must be reused, not recomputed
    np.save(chunk, marker)
    build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["bm25", "dense"], chunk_size=3))
    merged = np.load(out / "dense" / "embeddings.npy")
    assert np.all(merged[:3] == 7.0)
    bundle = FolderIndex.open(out)
    assert bundle.backends == ["bm25", "dense"] and len(bundle.store) == 7


def test_parse_shard():
    assert parse_shard("1/4") == (1, 4)
    assert parse_shard(None) is None
    for bad in ("4/4", "x", "1/0", "-1/2"):
        with pytest.raises(OdqaError):
            parse_shard(bad)


def test_index_without_dense_says_how_to_add_it(corpus, tmp_path):
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "b"), backends=["bm25"]))
    with pytest.raises(OdqaError, match="no dense index"):
        built_retriever(FolderIndex.open(tmp_path / "b"), "dense")


def test_hybrid_on_a_bm25_only_index_falls_back_to_bm25(corpus, tmp_path, caplog):
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "b"), backends=["bm25"]))
    retriever = built_retriever(FolderIndex.open(tmp_path / "b"), "hybrid")
    assert retriever.name == "bm25"
    assert "falls back to bm25" in caplog.text


def test_hybrid_reads_the_passages_of_its_fused_top_k_only(corpus, tmp_path):
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "b"), backends=["bm25", "dense"]))
    retriever = built_retriever(FolderIndex.open(tmp_path / "b"), "hybrid", candidates=7)
    store = retriever.backend.store
    asked: list[list[int]] = []
    get_rows = store.get_rows
    store.get_rows = lambda rows: asked.append(list(rows)) or get_rows(rows)
    questions = ["topic 3", "document number 5"]
    hits = retriever.search(questions, 2)
    assert asked == [sorted({h.row for q in hits for h in q})] and len(asked[0]) <= 4
    assert all(h.passage is not None and h.passage.text == DOCS[h.row]["text"] for q in hits for h in q)
    store.get_rows = get_rows
    dense, sparse = retriever.dense.search(questions, 7), retriever.sparse.search(questions, 7)
    assert [[h.row for h in q] for q in hits] == [
        [h.row for h in retriever.fuse(d, s, 2)] for d, s in zip(dense, sparse)
    ]


def test_a_build_leaves_no_writer_lock_and_a_failed_one_no_empty_work_folder(tmp_path):
    """After `index` the BM25 part holds no tantivy writer lock; a build that fails before any stage finished
    leaves no OUT.work behind (issue 77; one whose passages finished keeps them to resume)."""
    from odqa.core.errors import DataFormatError

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "title": "T", "text": f"Words {i} here."}) + "\n" for i in range(5))
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], kb=False))
    assert not list((tmp_path / "idx" / "bm25").glob(".tantivy-writer.lock"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("idx")) == ["idx"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "title": "no text"}) + "\n")
    with pytest.raises(DataFormatError):
        build_index(IndexSpec(corpus=str(bad), out=str(tmp_path / "bad"), backends=["bm25"]))
    assert not (tmp_path / "bad.work").exists() and not (tmp_path / "bad").exists()
