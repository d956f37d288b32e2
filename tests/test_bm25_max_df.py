"""retrieval.bm25_max_df: BM25 leaves out of a question the terms found in more than a fraction of the passages
(the rarest kept), through the config, on bm25 and hybrid alike; engines without it and bad values refused."""

from __future__ import annotations

import json

import pytest

from odqa.core.errors import OdqaError
from tests.retrievers import built_retriever

# "river" is in 4 of 5 passages, "salmon" in 1: with max_df 0.5 a question of both ranks by "salmon" alone
ROWS = [
    ("Thames", "The river Thames flows through London river river river."),
    ("Rhine", "The river Rhine flows through Basel and Cologne to the sea."),
    ("Danube", "The river Danube flows through Vienna and Budapest."),
    ("Fraser", "The Fraser river is known for its salmon runs in autumn."),
    ("Alps", "The Alps are a mountain range in Europe."),
]


def _index(tmp_path, engine: str = "tantivy"):
    from odqa.indexing import IndexSpec, build_index

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(ROWS))
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / engine), backends=["bm25"], bm25_engine=engine))
    return tmp_path / engine


def _built(bundle, config, kind: str):
    """The `kind` retriever `config` (an OdqaConfig) builds over `bundle`, as the pipeline and `search` do."""
    from odqa.retriever.registry import build_retriever

    return build_retriever(bundle, config.retrieval, config.retriever_runtime(), kind)


def test_frequent_terms_are_left_out_and_the_rarest_kept(tmp_path):
    from odqa.indexes.folder import FolderIndex

    bundle = FolderIndex.open(_index(tmp_path))
    index = bundle.text_index()
    assert index.drop_frequent_terms(["river", "salmon"], 0.5) == ["salmon"]
    assert index.drop_frequent_terms(["river", "flow"], 0.5) == ["flow"]  # both frequent: the rarer stays
    assert index.drop_frequent_terms(["river", "salmon"], 0.0) == ["river", "salmon"]
    every = built_retriever(bundle, "bm25").search(["Which river has salmon runs, river river?"], 5)[0]
    pruned = built_retriever(bundle, "bm25", bm25_max_df=0.5).search(["Which river has salmon runs, river river?"], 5)[
        0
    ]
    assert [h.passage.title for h in every][:2] == ["Fraser", "Thames"]  # "river" pulls the Thames up with every term
    assert [h.passage.title for h in pruned] == ["Fraser"]  # only the passage with the rare terms matches
    assert built_retriever(bundle, "bm25").max_df == built_retriever(bundle, "bm25", bm25_max_df=0.0).max_df == 0.0


def test_the_config_setting_reaches_bm25_and_the_hybrid_fallback(tmp_path):
    from odqa.config import OdqaConfig
    from odqa.indexes.folder import FolderIndex

    bundle = FolderIndex.open(_index(tmp_path))
    config = OdqaConfig.load(None, {"retrieval.bm25_max_df": 0.5})
    config.validate()
    assert _built(bundle, config, "bm25").max_df == 0.5
    assert _built(bundle, config, "hybrid").max_df == 0.5  # no vectors: hybrid falls back to bm25
    assert _built(bundle, OdqaConfig(), "bm25").max_df == 0.0


@pytest.mark.parametrize("value", [-0.1, 1.0, 2.0])
def test_a_fraction_outside_zero_to_one_is_refused(value):
    from odqa.config import OdqaConfig

    with pytest.raises(OdqaError, match="bm25_max_df"):
        OdqaConfig.load(None, {"retrieval.bm25_max_df": value})


def test_an_engine_without_document_frequencies_refuses_it(tmp_path):
    from odqa.indexes.folder import FolderIndex

    bundle = FolderIndex.open(_index(tmp_path, "rank-bm25"))
    assert built_retriever(bundle, "bm25").search(["salmon"], 1)[0][0].passage.title == "Fraser"
    with pytest.raises(OdqaError, match="tantivy"):
        built_retriever(bundle, "bm25", bm25_max_df=0.5)


def test_unset_it_follows_the_corpus_size(tmp_path, monkeypatch):
    """Unset, a corpus from `PRUNE_FROM_PASSAGES` passages on prunes at `PRUNED_MAX_DF`, a smaller one keeps every
    term; a value set (0 included) wins; an engine that cannot prune keeps every term instead of refusing."""
    import odqa.indexes.bm25
    from odqa.config import OdqaConfig
    from odqa.indexes.folder import FolderIndex

    path = _index(tmp_path)
    assert _built(FolderIndex.open(path), OdqaConfig(), "bm25").max_df == 0.0  # a few passages
    monkeypatch.setattr(odqa.indexes.bm25, "PRUNE_FROM_PASSAGES", 3)
    bundle = FolderIndex.open(path)
    assert _built(bundle, OdqaConfig(), "bm25").max_df == odqa.indexes.bm25.PRUNED_MAX_DF
    assert _built(bundle, OdqaConfig.load(None, {"retrieval.bm25_max_df": 0}), "bm25").max_df == 0.0
    other = FolderIndex.open(_index(tmp_path, "rank-bm25"))
    assert _built(other, OdqaConfig(), "bm25").max_df == 0.0
