"""Every backend keeps the interface of its protocol (odqa.core.protocols): the protocol's method
parameters are the first parameters of the implementation's, in order, and any extra ones have defaults."""

import inspect

import pytest

from odqa.core import protocols
from odqa.corpus.articles import StoreArticlePassages
from odqa.indexes.bm25 import Bm25sIndex, RankBm25Index, TantivyIndex
from odqa.indexes.elastic import ElasticArticlePassages, ElasticPassageIndex
from odqa.indexes.folder import FolderIndex, ShardedFolderIndex
from odqa.indexes.vector import VectorIndex
from odqa.linker.baseline import SpacyAliasLinker
from odqa.linker.linker import Linker
from odqa.reader.model import Reader
from odqa.retriever.bm25 import BM25Retriever
from odqa.retriever.dense import DenseRetriever
from odqa.retriever.hybrid import HybridRetriever
from tests.memory_backend import MemoryIndex

IMPLEMENTATIONS = [
    (protocols.TextIndex, [TantivyIndex, Bm25sIndex, RankBm25Index]),
    (protocols.VectorIndex, [VectorIndex]),
    (protocols.Retriever, [BM25Retriever, DenseRetriever, HybridRetriever]),
    (protocols.Linker, [Linker, SpacyAliasLinker]),
    (protocols.Reader, [Reader]),
    (protocols.ArticlePassages, [StoreArticlePassages, ElasticArticlePassages]),
    (protocols.SearchBackend, [FolderIndex, ShardedFolderIndex, ElasticPassageIndex, MemoryIndex]),
    (protocols.FusesItself, [ElasticPassageIndex]),
]
CASES = [(protocol, cls) for protocol, classes in IMPLEMENTATIONS for cls in classes]


def _methods(protocol):
    return [
        name
        for name, member in vars(protocol).items()
        if callable(member) and (not name.startswith("_") or name == "__len__")
    ]


@pytest.mark.parametrize("protocol,cls", CASES, ids=[f"{p.__name__}-{c.__name__}" for p, c in CASES])
def test_backend_has_the_protocol_methods_with_its_parameters(protocol, cls):
    for name in _methods(protocol):
        assert callable(getattr(cls, name, None)), f"{cls.__name__} has no {name}()"
        wanted = list(inspect.signature(getattr(protocol, name)).parameters.values())
        have = list(inspect.signature(getattr(cls, name)).parameters.values())
        assert [p.name for p in have[: len(wanted)]] == [p.name for p in wanted], f"{cls.__name__}.{name}"
        for extra in have[len(wanted) :]:
            assert extra.default is not inspect.Parameter.empty or extra.kind in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ), f"{cls.__name__}.{name}({extra.name})"


def test_vector_index_dim_is_a_property():
    assert isinstance(inspect.getattr_static(VectorIndex, "dim"), property)
