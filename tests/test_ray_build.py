"""`index --ray`: the shards built as Ray tasks on a local cluster of two worker processes (started here, bound to
127.0.0.1, stopped after) make the index a one-process build makes of the same corpus: the same corpus fingerprint
and rows, verify-index clean, the same search results. A worker killed inside its task is replaced and the task
retried; a build whose task failed for good keeps its finished shards for the rerun."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from odqa.cli import main
from odqa.core.cluster import RaySettings, ray_cluster
from odqa.core.errors import OdqaError
from odqa.core.optional import installed
from odqa.indexes.folder import FolderIndex
from odqa.indexing import IndexSpec, ShardCrash, build_sharded_index
from tests.retrievers import built_retriever

DEMO = Path(__file__).resolve().parent.parent / "odqa" / "demo"


@pytest.fixture(scope="module")
def cluster():
    if not installed("ray"):
        if os.environ.get("CI"):
            pytest.fail("ray is not installed and CI is set: pip install -e '.[test]'")
        pytest.skip("ray is not installed (pip install 'odqa[ray]')")
    with ray_cluster(RaySettings("local", 2)) as running:  # its session files in a temporary folder, removed after
        yield running


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """45 demo articles in 3 files: two shards of unequal size and vocabulary."""
    folder = tmp_path_factory.mktemp("corpus")
    lines = (DEMO / "articles.jsonl").read_text().splitlines()[:45]
    for name, part in zip("abc", (lines[:10], lines[10:30], lines[30:])):
        (folder / f"part-{name}.jsonl").write_text("\n".join(part) + "\n")
    return folder


def _spec(corpus: Path, out: Path, **settings) -> IndexSpec:
    # fp32: int8 passage vectors depend on their batch's other passages (dynamic quantisation of activations)
    return IndexSpec(corpus=str(corpus), out=str(out), precision="fp32", kb=False, **settings)  # KB: its own test


def _questions() -> list[str]:
    rows = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text().splitlines()]
    return [row["question"] for row in rows[:6]] + ["Curie Einstein Newton physics"]


@pytest.mark.long  # a Ray start, two workers loading the encoder: about a minute on 2 cores
def test_a_ray_build_is_the_one_process_build(cluster, corpus, tmp_path):
    assert cluster.cpus == 2
    ray_report = build_sharded_index(_spec(corpus, tmp_path / "ray"), 2, cluster)
    one_report = build_sharded_index(_spec(corpus, tmp_path / "one"), 2)
    assert ray_report.finished and ray_report.passages == one_report.passages

    ray, one = FolderIndex.open(tmp_path / "ray"), FolderIndex.open(tmp_path / "one")
    assert ray.manifest.corpus_fingerprint == one.manifest.corpus_fingerprint
    assert len(ray) == len(one) and [len(s) for s in ray.shards] == [len(s) for s in one.shards]
    assert ray.manifest.params["language"] == one.manifest.params["language"]
    for name in ("000", "001"):  # the same record of what each shard is built from: a rerun of either build keeps
        ray_record, one_record = (
            json.loads((tmp_path / build / "shards" / f"{name}.source.json").read_text()) for build in ("ray", "one")
        )
        assert {**ray_record, "manifest": ""} == {**one_record, "manifest": ""}
    assert "as one index" in ray.verify()[-1]
    for kind in ("bm25", "dense", "hybrid"):
        by_ray, by_one = built_retriever(ray, kind), built_retriever(one, kind)
        for question in _questions():
            got, expected = by_ray.search([question], 10)[0], by_one.search([question], 10)[0]
            assert [h.passage.id for h in got] == [h.passage.id for h in expected], (kind, question)
            assert [h.score for h in got] == pytest.approx([h.score for h in expected], rel=1e-4, abs=1e-5)


@pytest.mark.long
def test_a_task_whose_worker_is_killed_is_retried(cluster, corpus, tmp_path):
    once = tmp_path / "killed-once"
    # the second shard's task kills its worker once BM25 is written, before the shard is published
    crash = ShardCrash(shard=1, stage="bm25", once=str(once))
    report = build_sharded_index(_spec(corpus, tmp_path / "idx", backends=["bm25"]), 2, cluster, crash=crash)
    assert once.exists(), "the task's first attempt was not killed"
    assert report.finished and report.passages == 90
    assert "as one index" in FolderIndex.open(tmp_path / "idx").verify()[-1]


@pytest.mark.long
def test_a_failed_task_keeps_the_finished_shards_for_the_rerun(cluster, corpus, tmp_path, monkeypatch, capfd):
    spec = _spec(corpus, tmp_path / "idx", backends=["bm25"])
    once = tmp_path / "killed-once"
    monkeypatch.setattr(cluster, "retries", 0)  # the killed task is not retried: the build fails
    with pytest.raises(OdqaError, match="shard 2/2: its worker was lost 1 time"):
        build_sharded_index(spec, 2, cluster, crash=ShardCrash(shard=1, stage="bm25", once=str(once)))
    assert (tmp_path / "idx" / "shards" / "000.source.json").exists()
    assert not (tmp_path / "idx" / "manifest.json").exists()
    capfd.readouterr()
    report = build_sharded_index(spec, 2, cluster)
    err = capfd.readouterr().err
    assert report.finished and "shard 1/2 kept" in err and "1 of 2 shards to build" in err
    assert "as one index" in FolderIndex.open(tmp_path / "idx").verify()[-1]
    capfd.readouterr()
    build_sharded_index(spec, 2, cluster)
    assert "shards to build" not in capfd.readouterr().err  # every shard kept: no task


@pytest.mark.long
def test_build_kb_on_ray_writes_the_one_process_knowledge_base(cluster, corpus, tmp_path):
    import numpy as np

    from odqa.linker.kb import KnowledgeBase, iter_documents

    # batches of 8: the entities go out as several tasks, one per block of whole batches
    one = KnowledgeBase.build(iter_documents(corpus), tmp_path / "one", encoder="minilm", batch_size=8, progress=False)
    ray = KnowledgeBase.build(iter_documents(corpus), tmp_path / "ray", encoder="minilm", batch_size=8, cluster=cluster)
    assert ray.manifest.corpus_fingerprint == one.manifest.corpus_fingerprint and len(ray) == len(one) > 8
    assert [ray.entity(i).title for i in range(len(ray))] == [one.entity(i).title for i in range(len(one))]
    np.testing.assert_allclose(np.asarray(ray.vectors), np.asarray(one.vectors), atol=1e-5)


@pytest.mark.long
def test_build_reader_data_on_ray_searches_as_one_process(cluster, corpus, tmp_path):
    from odqa.commands.reader import search_batch
    from odqa.config import OdqaConfig
    from odqa.corpus.questions import load_questions
    from odqa.indexing import build_index
    from odqa.reader.training.distant import distant_examples

    build_index(_spec(corpus, tmp_path / "idx", backends=["bm25"]))
    config = OdqaConfig.load(None, {"retrieval.retriever": "bm25"})
    items = load_questions(DEMO / "questions.jsonl")[:20]
    retriever = built_retriever(FolderIndex.open(tmp_path / "idx"), "bm25")

    def on_ray(batches, k):
        return cluster.map_ordered(search_batch, batches, "retrieval", args=(str(tmp_path / "idx"), config, k))

    one_stats: dict = {}
    ray_stats: dict = {}
    one = distant_examples(items, retriever.search, 5, batch_size=4, stats=one_stats)
    ray = distant_examples(items, None, 5, batch_size=4, stats=ray_stats, search_many=on_ray)
    assert ray == one and ray_stats == one_stats and one_stats["positives"] > 0


def _run_cli(argv, capsys) -> tuple[int, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize(
    "flags, refusal",
    [
        (["--ray", "cluster-1"], "--ray must be local, auto, ray://HOST:PORT or HOST:PORT"),
        (["--ray", "auto", "--ray-workers", "2"], "--ray-workers sizes a Ray started here"),
        (["--ray", "local", "--shard", "0/2"], "drop --shard"),
        (["--ray", "local", "--shards", "4"], "needs a corpus of at least 4 files"),
    ],
)
def test_ray_flags_are_refused_in_one_line_before_ray_starts(corpus, tmp_path, capsys, flags, refusal):
    code, text = _run_cli(["index", "--corpus", corpus, "--out", tmp_path / "x", *flags], capsys)
    assert code == 2 and refusal in text and "Traceback" not in text, text[-800:]
    assert not (tmp_path / "x").exists()
