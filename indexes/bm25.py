"""Embedded BM25 text indexes.

Engines (same interface: `build(texts, out, manifest)`, `load(path)`, `search(queries, k)`):
* `tantivy` (default): Tantivy, a Rust Lucene-like engine. Streams documents to disk segments while
  indexing (RAM bounded by the writer heap), memory-maps them to search, and answers a query in about a
  millisecond or two. Analyser: lowercase, English stop words, English (Snowball) stemmer, as Lucene's
  EnglishAnalyzer used by Pyserini; BM25 with Lucene's k1=0.9/b=0.4 is not settable in tantivy-py, so it
  scores with Tantivy's k1=1.2, b=0.75. Korean and Chinese (`analyzer=` one of indexes/analysis.py's) are
  analysed in Python into terms that Tantivy indexes as whitespace tokens; queries are analysed the same way.
* `bm25s`: sparse-matrix BM25 (bm25s + PyStemmer), k1/b configurable; needs the token ids in memory while
  indexing.
* `rank-bm25`: the reference Python implementation, for comparisons only (slow, in memory).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.optional import require
from odqa.core.registry import Registry
from odqa.indexes.analysis import TEXT_NORMALIZATION, get_analyzer, normalize_text, query_normalizer
from odqa.indexes.manifest import Manifest

_QUERY_JUNK = re.compile(r"[^\w\s]+", flags=re.UNICODE)
Hits = list[tuple[int, float]]


def build_text_index(texts: Iterable[str], out: str | Path, manifest: Manifest, engine: str = "tantivy", **params):
    """Index `texts` (row i = i-th text) into folder `out`, atomically, each through the one text normalisation
    (indexes.analysis.normalize_text), which the manifest records so that questions are searched alike."""
    cls = _engine(engine, params.get("analyzer", "en"))
    with atomic_folder(out) as tmp:
        count = cls.build_into((normalize_text(text) for text in texts), tmp, **params)
        if count == 0:
            raise OdqaError("no text to index: the corpus is empty")
        manifest.kind = "bm25"
        manifest.count = count
        manifest.params = {**manifest.params, "engine": engine, **params, "normalization": TEXT_NORMALIZATION}
        manifest.save(tmp)
    return load_text_index(out)


def load_text_index(path: str | Path):
    manifest = Manifest.load(path, kind="bm25")
    cls = _engine(manifest.params.get("engine", "tantivy"))
    try:
        return cls.load(Path(path), manifest)
    except (OSError, ValueError, EOFError, KeyError, pickle.UnpicklingError) as exc:
        raise OdqaError(
            f"the BM25 index in {path} cannot be read ({exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); rebuild it with `run_qa.py index`"
        ) from exc


# BM25's time grows with the posting lists of the question's terms, most of them the frequent terms' (scale.md):
# from this size on, questions leave out their terms found in more than PRUNED_MAX_DF of the passages by default
PRUNE_FROM_PASSAGES = 5_000_000
PRUNED_MAX_DF = 0.1


def default_max_df(passages: int) -> float:
    """`[retrieval] bm25_max_df` when unset: pruning where a corpus is large enough for it to matter
    (bench/results/bm25-prune.md, scale.md)."""
    return PRUNED_MAX_DF if passages >= PRUNE_FROM_PASSAGES else 0.0


# each fetch scores the whole posting lists whatever n is (a top 801 costs a top 101's time), so the first asks
# for this many times k, and a tie across the cut that exceeds it for as many times more: a tie seldom costs a
# second search, and a passage repeated in hundreds of places (a list stub, a template) few
TIE_FETCH_GROWTH = 8


def rank_with_ties(fetch, k: int) -> Hits:
    """Top `k` of `fetch(n) -> hits sorted by score`, equal scores ordered by row (the passage order of the
    store), so two builds of one corpus rank alike whatever their segment layout. A tie at the cut is
    fetched whole before cutting."""
    n = TIE_FETCH_GROWTH * k + 1  # past the cut: a tie across it ends inside, or reaches the last hit
    while True:
        hits = fetch(n)
        if len(hits) < n or hits[-1][1] != hits[k - 1][1]:
            break
        n *= TIE_FETCH_GROWTH
    hits.sort(key=lambda h: (-h[1], h[0]))
    return hits[:k]


def _engine(name: str, analyzer: str = "en"):
    if analyzer != "en" and name != "tantivy":
        raise OdqaError(f"the {analyzer} analyzer needs the tantivy engine (--bm25-engine tantivy)")
    engine = TEXT_ENGINES.get(name)
    require_engine(name)
    return engine


# the packages of the engines beside Tantivy (the extra odqa[bm25-engines])
ENGINE_MODULES = {"bm25s": "bm25s", "rank-bm25": "rank_bm25"}


def require_engine(name: str) -> None:
    """One line naming the extra where the BM25 engine `name` is not installed (before a build or a search)."""
    if name in ENGINE_MODULES:
        require(ENGINE_MODULES[name], f"the {name} BM25 engine")


def clean_query(query: str) -> str:
    # lower case first: the query parser reads upper-case AND/OR/NOT as operators
    return _QUERY_JUNK.sub(" ", query.lower()).strip()


class TantivyIndex:
    ANALYZER = "en_odqa"
    TERMS = "odqa_terms"  # text analysed in Python (indexes/analysis.py): whitespace-separated terms

    def __init__(self, index, manifest: Manifest):
        self.index = index
        self.manifest = manifest
        self.searcher = index.searcher()
        self.analyzer = self._analyzer()
        self.normalize = query_normalizer(manifest.params)  # questions as its passages were indexed
        name = manifest.params.get("analyzer", "en")
        self.analyze = None if name == "en" else get_analyzer(name)
        # a sharded index's shards (indexes/shards.py) number rows from 0: each segment's offset, by ordinal
        self.segment_rows = manifest.params.get("segment_row_offsets")
        if self.segment_rows is not None and len(self.segment_rows) != self.searcher.num_segments:
            raise OdqaError(
                f"the sharded BM25 index lists {len(self.segment_rows)} segments but holds "
                f"{self.searcher.num_segments}; rebuild it with `run_qa.py index --shards N`"
            )

    @staticmethod
    def _schema(tokenizer_name: str = ANALYZER):
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("row", stored=True, fast=True, indexed=False)
        builder.add_text_field("text", stored=False, tokenizer_name=tokenizer_name)
        return builder.build()

    @staticmethod
    def _terms_analyzer():
        import tantivy

        return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()

    @staticmethod
    def _analyzer():
        import tantivy

        return (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stopword("english"))
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )

    @classmethod
    def build_into(
        cls,
        texts: Iterable[str],
        folder: Path,
        heap_mb: int = 512,
        threads: int = 2,
        analyzer: str = "en",
        language: str = "en",
    ) -> int:
        import tantivy

        python_analyzer = None if analyzer == "en" else get_analyzer(analyzer)
        index = tantivy.Index(cls._schema(cls.ANALYZER if python_analyzer is None else cls.TERMS), path=str(folder))
        cls._register(index)
        writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
        count = 0
        try:
            for row, text in enumerate(texts):
                if python_analyzer is not None:
                    text = " ".join(python_analyzer(text))
                writer.add_document(tantivy.Document(row=row, text=text))
                count += 1
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            # dropping the writer ends its worker threads, which otherwise keep writing segment files into
            # the folder the caller is about to remove (a full disk fails the commit with them still running)
            del writer, index
            raise
        del writer, index  # releases tantivy's locks, whose files it leaves behind: the built index needs none
        for lock in folder.glob(".tantivy-*.lock"):
            lock.unlink(missing_ok=True)
        return count

    @classmethod
    def load(cls, path: Path, manifest: Manifest) -> TantivyIndex:
        import tantivy

        try:
            index = tantivy.Index.open(str(path))
        except ValueError as exc:
            if "Lockfile" not in str(exc):
                raise
            index = tantivy.Index.open(str(_writable_view(path)))  # a read-only folder
        cls._register(index)
        return cls(index, manifest)

    @classmethod
    def _register(cls, index) -> None:
        index.register_tokenizer(cls.ANALYZER, cls._analyzer())
        index.register_tokenizer(cls.TERMS, cls._terms_analyzer())

    def num_docs(self) -> int:
        return int(self.searcher.num_docs)

    def search(self, queries: Sequence[str], k: int, max_df: float = 0.0) -> list[Hits]:
        """`max_df`: each question's terms found in more than this fraction of the passages left out
        (`drop_frequent_terms`; 0: every term)."""
        queries = [self.normalize(query) for query in queries]
        if self.analyze is not None:
            return [self._search_terms(self.drop_frequent_terms(self.analyze(query), max_df), k) for query in queries]
        out: list[Hits] = []
        for query in queries:
            text = clean_query(query)
            # a query of stop words only would parse to match-everything
            if not text or not self.analyzer.analyze(text):
                out.append([])
                continue
            if max_df:
                out.append(self._search_terms(self.drop_frequent_terms(self.analyzer.analyze(text), max_df), k))
                continue
            parsed, _errors = self.index.parse_query_lenient(text, ["text"])

            def fetch(n: int, parsed=parsed) -> Hits:
                return self._rows(self._top(parsed, n))

            out.append(rank_with_ties(fetch, k))
        return out

    def drop_frequent_terms(self, terms: list[str], max_df: float) -> list[str]:
        """`terms` without those found in more than `max_df` of the passages (0: all kept); the rarest stays when
        every term is that frequent. Frequent terms hold most of the postings BM25 scores for little of the
        score (bench/results/bm25-prune.md)."""
        if not max_df or not terms:
            return terms
        limit = max_df * self.num_docs()
        df = {t: self.searcher.doc_freq("text", t) for t in set(terms)}
        return [t for t in terms if df[t] <= limit] or [min(terms, key=lambda t: (df[t], t))]

    def terms_query(self, terms: list[str]):
        """OR of analysed terms (each occurrence a clause, as the query parser does with repeated words)."""
        import tantivy

        schema = self.index.schema
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", term)) for term in terms]
        )

    def _search_terms(self, terms: list[str], k: int) -> Hits:
        if not terms:
            return []
        query = self.terms_query(terms)
        return rank_with_ties(lambda n: self._rows(self._top(query, n)), k)

    def _top(self, query, n: int):
        # count=False: odqa never reads the number of matching documents, so none are counted (it does not make
        # Tantivy skip postings: the binding collects through a MultiCollector either way, bench/results/scale.md)
        return self.searcher.search(query, n, count=False)

    def _rows(self, result) -> Hits:
        addresses = [addr for _, addr in result.hits]
        # the row's fast field, read as a column: decompressing a stored document per hit cost most of a top
        # 100's time over a million passages (bench/results/scale.md)
        if hasattr(self.searcher, "fast_field_values"):  # older tantivy-py: the stored document
            rows = self.searcher.fast_field_values("row", addresses) if addresses else []
        else:
            rows = [self.searcher.doc(addr)["row"][0] for addr in addresses]
        if self.segment_rows is not None:
            rows = [row + self.segment_rows[addr.segment_ord] for row, addr in zip(rows, addresses)]
        return [(int(row), float(score)) for row, (score, _) in zip(rows, result.hits)]


class Bm25sIndex:
    def __init__(self, retriever, tokenizer, manifest: Manifest):
        self.retriever = retriever
        self.tokenizer = tokenizer
        self.manifest = manifest
        self.normalize = query_normalizer(manifest.params)  # questions as its passages were indexed

    @staticmethod
    def _tokenizer():
        import bm25s
        import Stemmer

        return bm25s.tokenization.Tokenizer(stemmer=Stemmer.Stemmer("english"), stopwords="en")

    @classmethod
    def build_into(cls, texts: Iterable[str], folder: Path, k1: float = 0.9, b: float = 0.4) -> int:
        import bm25s

        tokenizer = cls._tokenizer()
        ids = list(tokenizer.streaming_tokenize(texts))
        if not ids:
            return 0
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict()), show_progress=False)
        retriever.save(str(folder))
        tokenizer.save_vocab(str(folder))
        tokenizer.save_stopwords(str(folder))
        return len(ids)

    @classmethod
    def load(cls, path: Path, manifest: Manifest) -> Bm25sIndex:
        import bm25s

        retriever = bm25s.BM25.load(str(path), mmap=True)
        tokenizer = cls._tokenizer()
        tokenizer.load_vocab(str(path))
        tokenizer.load_stopwords(str(path))
        return cls(retriever, tokenizer, manifest)

    def num_docs(self) -> int:
        return int(self.retriever.scores["num_docs"])

    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        out: list[Hits] = []
        for query in map(self.normalize, queries):
            ids = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
            if not ids or not ids[0]:
                out.append([])
                continue

            def fetch(n: int, ids=ids) -> Hits:
                n = min(n, self.num_docs())
                rows, scores = self.retriever.retrieve(ids, k=n, show_progress=False, n_threads=1)
                return [(int(r), float(s)) for r, s in zip(rows[0], scores[0]) if s > 0]

            out.append(rank_with_ties(fetch, min(k, self.num_docs())))
        return out


class RankBm25Index:
    """rank-bm25's BM25Okapi over the bm25s analyser (regex words, English stop words, Snowball stems);
    pickled and loaded whole into memory."""

    FILE = "rank_bm25.pkl"

    def __init__(self, model, manifest: Manifest):
        self.model = model
        self.manifest = manifest
        self.analyze = english_analyzer()
        self.normalize = query_normalizer(manifest.params)  # questions as its passages were indexed

    @classmethod
    def build_into(cls, texts: Iterable[str], folder: Path, k1: float = 0.9, b: float = 0.4) -> int:
        from rank_bm25 import BM25Okapi

        analyze = english_analyzer()
        docs = [analyze(text) for text in texts]
        if not docs:
            return 0
        with (folder / cls.FILE).open("wb") as f:
            pickle.dump(BM25Okapi(docs, k1=k1, b=b), f)
        return len(docs)

    @classmethod
    def load(cls, path: Path, manifest: Manifest) -> RankBm25Index:
        with (path / cls.FILE).open("rb") as f:
            return cls(pickle.load(f), manifest)

    def num_docs(self) -> int:
        return int(self.model.corpus_size)

    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        out: list[Hits] = []
        for query in map(self.normalize, queries):
            tokens = self.analyze(query)
            if not tokens:
                out.append([])
                continue
            scores = self.model.get_scores(tokens)
            k_eff = min(k, len(scores))
            top = np.argpartition(-scores, k_eff - 1)[:k_eff]
            top = top[np.argsort(-scores[top], kind="stable")]
            out.append([(int(r), float(scores[r])) for r in top if scores[r] > 0])
        return out


def _writable_view(path: Path) -> Path:
    """A temporary folder of links to a read-only Tantivy index, where Tantivy can put its lock files."""
    import atexit
    import shutil
    import tempfile

    view = Path(tempfile.mkdtemp(prefix="odqa-bm25-"))
    atexit.register(shutil.rmtree, view, ignore_errors=True)
    for file in path.iterdir():
        if file.is_file() and not file.name.startswith(".tantivy-"):
            (view / file.name).symlink_to(file.resolve())
    return view


# Lucene's English stop words, as bm25s lists them (its STOPWORDS_EN): held here so that the reader's focus, which
# every answer uses, needs no bm25s (an extra: odqa[bm25-engines]); tests/test_packaging.py checks they agree
ENGLISH_STOP_WORDS = (
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "but",
    "by",
    "for",
    "if",
    "in",
    "into",
    "is",
    "it",
    "no",
    "not",
    "of",
    "on",
    "or",
    "such",
    "that",
    "the",
    "their",
    "then",
    "there",
    "these",
    "they",
    "this",
    "to",
    "was",
    "will",
    "with",
)


def english_analyzer():
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    stop = set(ENGLISH_STOP_WORDS)
    word = re.compile(r"(?u)\b\w\w+\b")

    def analyze(text: str) -> list[str]:
        return stemmer.stemWords([w for w in word.findall(text.lower()) if w not in stop])

    return analyze


# The BM25 engines by name (`--bm25-engine`, the manifest's `engine`): a class with `build_into(texts, folder,
# **params) -> count`, `load(path, manifest)`, `search(queries, k)` and `num_docs()`. A new engine: its module,
# plus one line here.
TEXT_ENGINES: Registry[type] = Registry(
    "BM25 engine",
    {
        "tantivy": TantivyIndex,
        "bm25s": Bm25sIndex,
        "rank-bm25": RankBm25Index,
    },
)
ENGINES = TEXT_ENGINES.names
