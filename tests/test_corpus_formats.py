"""Corpora in the ecosystem's table formats (datasets folders, Parquet, Arrow, CSV/TSV), BEIR and Pyserini
JSONL, with column mappings; each read through the real libraries from files made here."""

import json

import datasets
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from odqa.core.errors import DataFormatError
from odqa.corpus import iter_documents, iter_passages
from odqa.corpus.readers import CorpusFields, corpus_sources
from tests.retrievers import built_retriever

ROWS = [
    {"id": "d1", "title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in 1928."},
    {"id": "d2", "title": "Everest", "text": "Mount Everest is the highest mountain on Earth."},
    {"id": "d3", "title": "Amazon", "text": "The Amazon carries more water than any other river."},
]
EXPECTED = [(r["id"], r["title"], r["text"]) for r in ROWS]


def _docs(path, fields=CorpusFields()):  # noqa: B008 -- a frozen dataclass
    return [(d.id, d.title, d.text) for d in iter_documents(path, fields)]


def test_datasets_save_to_disk_folder_and_dict(tmp_path):
    ds = datasets.Dataset.from_list(ROWS)
    ds.save_to_disk(str(tmp_path / "ds"))
    assert _docs(tmp_path / "ds") == EXPECTED
    # a DatasetDict: its only split, or BEIR's "corpus" split; several others must be named
    datasets.DatasetDict({"corpus": ds, "queries": ds.select([0])}).save_to_disk(str(tmp_path / "beir"))
    assert _docs(tmp_path / "beir") == EXPECTED
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "splits"))
    with pytest.raises(DataFormatError, match=r"splits train, test; pass one split's folder"):
        _docs(tmp_path / "splits")
    assert _docs(tmp_path / "splits" / "test") == EXPECTED
    # a folder holding a datasets folder and a JSONL file reads the datasets folder as one source
    (tmp_path / "mixed").mkdir()
    ds.select([0]).save_to_disk(str(tmp_path / "mixed" / "a"))
    (tmp_path / "mixed" / "b.jsonl").write_text(json.dumps(ROWS[1]) + "\n")
    assert corpus_sources(tmp_path / "mixed") == [tmp_path / "mixed" / "a", tmp_path / "mixed" / "b.jsonl"]
    assert _docs(tmp_path / "mixed") == EXPECTED[:2]


def test_parquet_and_arrow_stream_in_batches(tmp_path):
    many = [{"docid": i, "body": f"Document number {i} says something.", "title": f"T{i}"} for i in range(2500)]
    table = pa.Table.from_pylist(many)
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=700)
    feather.write_feather(table, tmp_path / "c.feather")
    with pa.OSFile(str(tmp_path / "c.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=600)  # the IPC stream format datasets writes
    for name in ("c.parquet", "c.feather", "c.arrow"):
        docs = _docs(tmp_path / name)  # docid and body: found among the usual names
        assert len(docs) == 2500 and docs[1234] == ("1234", "T1234", "Document number 1234 says something.")
    with pytest.raises(DataFormatError, match="no title column 'heading'"):
        _docs(tmp_path / "c.parquet", CorpusFields(title="heading"))


def test_csv_and_tsv_with_a_column_mapping(tmp_path):
    (tmp_path / "c.csv").write_text(
        'key,headline,abstract\n7,Penicillin,"Discovered, as it happens, by\nFleming."\n8,Everest,Highest.\n'
    )
    fields = CorpusFields(id="key", title="headline", text="abstract")
    assert _docs(tmp_path / "c.csv", fields) == [
        ("7", "Penicillin", "Discovered, as it happens, by\nFleming."),
        ("8", "Everest", "Highest."),
    ]
    with pytest.raises(
        DataFormatError,
        match=r"c.csv: no id column \(id or _id or docid or doc_id\); its columns "
        r"are key, headline, abstract; name the one to use with --id-field",
    ):
        _docs(tmp_path / "c.csv")
    # a TSV whose header names a text column is a table (documents chunked), not DPR's passage TSV
    (tmp_path / "t.tsv").write_text(
        "_id\ttitle\ttext\n" + "".join(f"{r['id']}\t{r['title']}\t{r['text']}\n" for r in ROWS)
    )
    assert _docs(tmp_path / "t.tsv") == EXPECTED
    passages = list(iter_passages(tmp_path / "t.tsv", words=5))
    assert len(passages) > 3 and passages[0].id == "d1_0" and passages[0].doc_id == "d1"
    (tmp_path / "bad.csv").write_text("id,text\n1,fine\n2,too,many\n")
    with pytest.raises(DataFormatError, match=r"bad.csv: cannot be read as a table"):
        _docs(tmp_path / "bad.csv")


def test_beir_and_pyserini_jsonl(tmp_path):
    beir = tmp_path / "corpus.jsonl"
    beir.write_text(
        "".join(
            json.dumps({"_id": r["id"], "title": r["title"], "text": r["text"], "metadata": {}}) + "\n" for r in ROWS
        )
    )
    assert _docs(beir) == EXPECTED
    pyserini = tmp_path / "pyserini.jsonl"
    pyserini.write_text("".join(json.dumps({"id": r["id"], "contents": r["text"]}) + "\n" for r in ROWS))
    assert _docs(pyserini) == [(i, "", text) for i, _, text in EXPECTED]
    # an explicit mapping applies to JSON Lines too
    custom = tmp_path / "custom.jsonl"
    custom.write_text(json.dumps({"pid": "p", "name": "N", "body": "B text", "text": "not this"}) + "\n")
    assert _docs(custom, CorpusFields(id="pid", title="name", text="body")) == [("p", "N", "B text")]


def _beir_folder(folder):
    """A BEIR data set's folder as its zip unpacks: corpus.jsonl, queries.jsonl (each query worded as its
    document is) and qrels/test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": r["id"], "title": r["title"], "text": r["text"], "metadata": {}}) + "\n" for r in ROWS
        )
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": r["text"], "metadata": {}}) + "\n" for i, r in enumerate(ROWS))
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{r['id']}\t1\n" for i, r in enumerate(ROWS))
    )
    return folder


def test_a_beir_folder_is_read_as_its_corpus_alone(tmp_path):
    from odqa.indexes.folder import FolderIndex
    from odqa.indexing import IndexSpec, build_index

    beir = _beir_folder(tmp_path / "scifact")
    assert corpus_sources(beir) == [beir / "corpus.jsonl"]  # not queries.jsonl, not qrels/test.tsv
    assert _docs(beir) == EXPECTED
    # a folder of BEIR folders: each one's corpus, beside the folder's other corpus files
    (tmp_path / "many").mkdir()
    _beir_folder(tmp_path / "many" / "a")
    (tmp_path / "many" / "b.jsonl").write_text(json.dumps({"id": "b1", "text": "Another document."}) + "\n")
    assert corpus_sources(tmp_path / "many") == [
        tmp_path / "many" / "a" / "corpus.jsonl",
        tmp_path / "many" / "b.jsonl",
    ]
    build_index(IndexSpec(corpus=str(beir), out=str(tmp_path / "idx"), backends=["bm25"]))
    bundle = FolderIndex.open(tmp_path / "idx")
    assert sorted({p.doc_id for p in bundle.store.get_rows(list(range(len(bundle.store))))}) == ["d1", "d2", "d3"]
    hits = built_retriever(bundle, "bm25").search([ROWS[0]["text"]], 3)[0]  # a query finds its document, not itself
    assert hits[0].passage.doc_id == "d1" and hits[0].passage.text == ROWS[0]["text"]


def test_a_beir_folder_without_its_corpus_is_refused_naming_the_file(tmp_path):
    beir = _beir_folder(tmp_path / "scifact")
    with pytest.raises(
        DataFormatError,
        match=r"^corpus folder \S+qrels holds BEIR relevance judgements, not "
        r"documents; pass the corpus file itself with --corpus "
        rf"{beir / 'corpus.jsonl'}$",
    ):
        _docs(beir / "qrels")
    (beir / "corpus.jsonl").unlink()
    with pytest.raises(
        DataFormatError,
        match=r"queries.jsonl holds BEIR questions, not documents, and no "
        r"corpus.jsonl is beside it; pass the corpus file itself",
    ):
        _docs(beir)


def test_missing_values_name_the_row(tmp_path):
    pq.write_table(pa.Table.from_pylist([{"id": "a", "text": "ok"}, {"id": "b", "text": None}]), tmp_path / "n.parquet")
    with pytest.raises(DataFormatError, match=r"n.parquet:2: the document has no text"):
        _docs(tmp_path / "n.parquet")


def test_index_a_parquet_corpus_with_a_config_mapping(tmp_path):
    from tests.retrieval_cli import run

    pq.write_table(
        pa.Table.from_pylist([{"key": r["id"], "name": r["title"], "body": r["text"]} for r in ROWS]),
        tmp_path / "corpus.parquet",
    )
    (tmp_path / "odqa.toml").write_text('[corpus]\nid_field = "key"\ntitle_field = "name"\n')
    run(
        "index",
        "--corpus",
        tmp_path / "corpus.parquet",
        "--out",
        tmp_path / "idx",
        "--backends",
        "bm25",
        "--config",
        tmp_path / "odqa.toml",
        "--text-field",
        "body",
    )
    hit = json.loads(
        run(
            "search",
            "--index",
            tmp_path / "idx",
            "--retriever",
            "bm25",
            "--json",
            "--k",
            "1",
            "who discovered penicillin",
        ).stdout.splitlines()[-1]
    )["hits"][0]
    assert (hit["doc_id"], hit["title"]) == ("d1", "Penicillin")
    proc = run(
        "index",
        "--corpus",
        tmp_path / "corpus.parquet",
        "--out",
        tmp_path / "idx2",
        "--backends",
        "bm25",
        "--config",
        tmp_path / "odqa.toml",
        "--text-field",
        "abstract",
        check_ok=False,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
        f"odqa: error: {tmp_path / 'corpus.parquet'}: no text column "
        "'abstract' (--text-field); its columns are key, name, body"
    )


def test_a_documents_url_is_kept_with_its_passages_from_every_reader_that_has_one(tmp_path):
    """The Wikipedia subset's JSON Lines, WikiExtractor's <doc url=...> and tables with a url column give each
    passage its article's address (issue 77); a source without one gives ""."""
    url = "http://en.wikipedia.org/wiki?curid=12"
    text = "Anarchism is a political philosophy. " * 40
    (tmp_path / "wiki.jsonl").write_text(json.dumps({"id": "12", "url": url, "title": "Anarchism", "text": text}))
    folder = tmp_path / "extracted" / "AA"
    folder.mkdir(parents=True)
    (folder / "wiki_00").write_text(f'<doc id="12" url="{url}&amp;x=1" title="Anarchism">\nAnarchism\n{text}\n</doc>\n')
    pq.write_table(
        pa.table({"id": ["12"], "title": ["Anarchism"], "text": [text], "url": [url]}), tmp_path / "t.parquet"
    )
    (tmp_path / "plain.jsonl").write_text(json.dumps({"id": "1", "title": "T", "text": "Some words here."}))
    for source, expected in (
        ("wiki.jsonl", url),
        ("extracted", url + "&x=1"),
        ("t.parquet", url),
        ("plain.jsonl", ""),
    ):
        passages = list(iter_passages(tmp_path / source, words=20))
        assert passages and {p.url for p in passages} == {expected}, source
        assert [d.url for d in iter_documents(tmp_path / source)] == [expected]


def test_an_index_keeps_the_url_and_a_store_written_before_it_reads_none(tmp_path):
    from odqa.core.types import Passage
    from odqa.corpus import PassageStore
    from odqa.indexing import IndexSpec, build_index

    url = "https://en.wikipedia.org/wiki/Penicillin"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "p", "url": url, "title": "Penicillin", "text": "Penicillin was found."}))
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"]))
    from odqa.indexes.folder import FolderIndex

    hits = built_retriever(FolderIndex.open(tmp_path / "idx"), "bm25").search(["penicillin"], 1)[0]
    assert hits[0].passage.url == url and hits[0].passage.to_dict()["url"] == url
    # a store of before the column: its passages read with no url
    columns = {"id": ["a"], "title": ["A"], "text": ["alpha"], "doc_id": ["a"], "start": [0], "end": [5]}
    schema = pa.schema([pa.field(n, pa.int32() if n in ("start", "end") else pa.string()) for n in columns])
    old = pa.table(columns, schema=schema)  # the columns a store had before url
    (tmp_path / "old").mkdir()
    with pa.OSFile(str(tmp_path / "old" / "passages.arrow"), "wb") as sink, pa.ipc.new_stream(sink, old.schema) as w:
        w.write_table(old)
    store = PassageStore.open(tmp_path / "old")
    assert store.get(0) == Passage("a", "A", "alpha", "a", 0, 5, "")
    assert PassageStore.concat([store, PassageStore.open(tmp_path / "idx" / "passages")]).get(0).url == ""
