"""An index built as shards (`index --shards N`) answers as one index over the same corpus: the same top k with
the same scores, for BM25 (statistics over all shards) and dense search (merged by score)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from odqa.core.errors import OdqaError
from odqa.indexes.folder import FolderIndex, ShardedFolderIndex
from odqa.indexing import IndexSpec, build_index, build_sharded_index
from tests.retrievers import built_retriever

DEMO = Path(__file__).resolve().parent.parent / "odqa" / "demo"
ARTICLES = 45  # of the demo corpus, in 3 files: the shards differ in size and vocabulary


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    corpus = root / "corpus"
    corpus.mkdir()
    lines = (DEMO / "articles.jsonl").read_text().splitlines()[:ARTICLES]
    for name, part in zip("abc", (lines[:10], lines[10:30], lines[30:])):
        (corpus / f"part-{name}.jsonl").write_text("\n".join(part) + "\n")
    # fp32: int8 passage vectors depend on their batch's other passages (dynamic quantisation of activations)
    whole = build_index(IndexSpec(corpus=str(corpus), out=str(root / "whole"), precision="fp32"))
    sharded = build_sharded_index(IndexSpec(corpus=str(corpus), out=str(root / "sharded"), precision="fp32"), 3)
    assert whole.finished and sharded.finished and whole.passages == sharded.passages
    return corpus, FolderIndex.open(root / "whole"), FolderIndex.open(root / "sharded")


def questions():
    rows = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text().splitlines()]
    return [row["question"] for row in rows[:12]] + ["the", "Curie Einstein Newton physics"]


def ranking(hits):
    return [(hit.passage.id, hit.score) for hit in hits]


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_sharded_index_ranks_as_one_index(indexes, kind):
    _, whole, sharded = indexes
    assert isinstance(sharded, ShardedFolderIndex) and len(sharded.shards) == 3 and len(sharded) == len(whole)
    one, parts = built_retriever(whole, kind), built_retriever(sharded, kind)
    for question in questions():
        expected, got = ranking(one.search([question], 10)[0]), ranking(parts.search([question], 10)[0])
        assert [pid for pid, _ in got] == [pid for pid, _ in expected], question
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-5, abs=1e-6), question


def test_shard_statistics_are_the_whole_corpus(indexes):
    """Each shard alone scores with its own document frequencies; the sharded index does not."""
    _, whole, sharded = indexes
    question = questions()[0]
    alone = built_retriever(sharded.shards[0], "bm25").search([question], 1)[0][0]
    joined = {h.passage.id: h.score for h in built_retriever(sharded, "bm25").search([question], len(sharded))[0]}
    assert alone.score != pytest.approx(joined[alone.passage.id])
    whole_scores = {h.passage.id: h.score for h in built_retriever(whole, "bm25").search([question], len(whole))[0]}
    assert joined[alone.passage.id] == pytest.approx(whole_scores[alone.passage.id])


def test_a_rerun_keeps_the_finished_shards_and_verify_checks_them(indexes, capfd):
    corpus, _, sharded = indexes
    report = build_sharded_index(IndexSpec(corpus=str(corpus), out=str(sharded.path), precision="fp32"), 3)
    assert report.finished and report.seconds.keys() == {"bm25_union_s"}  # nothing rebuilt but the join
    assert "3/3 kept" in capfd.readouterr().err
    lines = FolderIndex.open(sharded.path).verify()
    assert sum("fingerprint" in line for line in lines) == 3 and "as one index" in lines[-1]


def test_more_shards_than_files_is_refused_before_any_work(indexes, tmp_path):
    corpus, _, _ = indexes
    result = subprocess.run(
        [sys.executable, "run_qa.py", "index", "--corpus", str(corpus), "--out", str(tmp_path / "x"), "--shards", "4"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert result.returncode == 2 and "needs a corpus of at least 4 files" in result.stderr
    assert not (tmp_path / "x").exists()
    with pytest.raises(OdqaError, match="tantivy"):
        build_sharded_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "y"), bm25_engine="bm25s"), 2)


def test_shards_with_block_digests_beside_their_files_join_and_verify(indexes, tmp_path, monkeypatch):
    """Files of more than INLINE_BLOCKS blocks keep their digests in sidecars: the join records its own (never
    writing through a shard's hard-linked file) and the sharded index answers and verifies."""
    import odqa.indexes.integrity as integrity

    monkeypatch.setattr(integrity, "MIN_BLOCK", 4096)
    monkeypatch.setattr(integrity, "INLINE_BLOCKS", 1)
    corpus, whole, _ = indexes
    report = build_sharded_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "s"), backends=["bm25"]), 3)
    assert report.finished
    union = tmp_path / "s" / "bm25"
    sidecars = list(union.glob(f"*{integrity.SIDECAR}"))
    assert sidecars and all(p.stat().st_nlink == 1 for p in sidecars)
    bundle = FolderIndex.open(tmp_path / "s")
    question = questions()[0]
    got = ranking(built_retriever(bundle, "bm25").search([question], 5)[0])
    expected = ranking(built_retriever(whole, "bm25").search([question], 5)[0])
    assert [pid for pid, _ in got] == [pid for pid, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-5)
    assert "as one index" in bundle.verify()[-1]
