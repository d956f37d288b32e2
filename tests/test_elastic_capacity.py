"""The settings `es-index` picks from the corpus size (indexes/elastic_capacity.py): shards by index size, the
kNN index type by the vectors' page cache; and the pick reaching the server's mapping."""

from __future__ import annotations

import pytest

import odqa.indexes.elastic_capacity as capacity
from odqa.config import ElasticConfig
from odqa.indexes.elastic import ElasticIndex, mapping
from odqa.indexes.elastic_bulk import BulkOptions, load_passages
from odqa.indexes.elastic_capacity import SHARD_TARGET_GB, node_memory_gb, plan_elastic
from tests.es_server import NoidaServer, start_or_skip


def test_a_small_corpus_gets_one_shard_and_float_hnsw():
    plan = plan_elastic(20_000, 384)
    assert (plan.shards, plan.knn_type) == (1, "hnsw") and plan.disk_gb < 1
    assert plan.vector_ram_gb == pytest.approx(20_000 * (384 * 4 + 16 * 2 * 4) / 1e9, abs=0.005)  # GB, 2 decimals


def test_full_wikipedia_gets_int8_vectors_and_shards_of_at_most_the_target_size():
    plan = plan_elastic(21_000_000, 384)
    assert plan.knn_type == "int8_hnsw" and plan.shards >= 2
    assert plan.disk_gb / plan.shards <= SHARD_TARGET_GB < plan.disk_gb / (plan.shards - 1)
    # int8 keeps a quarter of the float vectors' page cache (plus the graph)
    float_plan = plan_elastic(21_000_000, 384, knn_type="hnsw")
    assert plan.vector_ram_gb < float_plan.vector_ram_gb / 3
    assert node_memory_gb(plan, nodes=2, replicas=1) == pytest.approx(node_memory_gb(plan), rel=1e-6)


def test_given_choices_are_kept_and_bm25_only_needs_no_vector_cache():
    assert plan_elastic(21_000_000, 384, shards=7, knn_type="hnsw").shards == 7
    bm25 = plan_elastic(21_000_000, 0)
    assert bm25.vector_ram_gb == 0 and bm25.disk_gb < plan_elastic(21_000_000, 384).disk_gb


def test_the_mapping_carries_the_knn_type():
    assert mapping(384, knn_type="int8_hnsw")["properties"]["vector"]["index_options"]["type"] == "int8_hnsw"
    assert mapping(384)["properties"]["vector"]["index_options"]["type"] == "hnsw"


@pytest.mark.elastic
def test_es_index_creates_the_planned_index(tmp_path, monkeypatch):
    from odqa.demo_corpus import demo_index_path

    server = start_or_skip(NoidaServer(tmp_path / "data"))
    try:
        monkeypatch.setattr(capacity, "INT8_FROM_PASSAGES", 100)  # the demo's 308 passages count as large
        index = ElasticIndex.open(ElasticConfig(hosts=server.url, index_name="odqa-plan"))
        report = load_passages(
            index,
            demo_index_path(quiet=True),
            recreate=True,
            replicas=0,
            shards=None,
            knn_type=None,
            options=BulkOptions(chunk_size=200, progress=False),
        )
        assert report.failed == 0 and report.count == report.total
        found = index.client.indices.get_mapping(index="odqa-plan")["odqa-plan"]["mappings"]
        assert found["properties"]["vector"]["index_options"]["type"] == "int8_hnsw"
        settings = index.client.indices.get_settings(index="odqa-plan")["odqa-plan"]["settings"]["index"]
        assert int(settings["number_of_shards"]) == 1
    finally:
        server.stop()
