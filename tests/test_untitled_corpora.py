"""A corpus whose optional columns (the title) are absent, null or empty builds an index that reads, in every
corpus format (issue 64 item 2): every passage's title column then holds only empty strings, whose empty Arrow
buffer pyarrow may place outside the file's memory map, at another address at every open; the store's layout
digest once counted that address, so every search refused the index as "laid out otherwise than when it was
built"."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from odqa.indexes.folder import FolderIndex
from odqa.indexing import IndexSpec, build_index
from tests.retrievers import built_retriever

TEXTS = {
    "d1": "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital in London.",
    "d2": "Mount Everest is the highest mountain on Earth, on the border of Nepal and China.",
    "d3": "The Amazon carries more water to the sea than any other river in the world.",
}


def _jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def _csv(header, rows, sep=","):
    quote = (lambda v: f'"{v}"') if sep == "," else (lambda v: v)
    return sep.join(header) + "\n" + "".join(sep.join(quote(r.get(h, "")) for h in header) + "\n" for r in rows)


def _write(kind: str, folder):
    """The corpus of `kind` in `folder`: its path and the ids its documents' passages have (None: as written)."""
    rows = [{"id": i, "text": t} for i, t in TEXTS.items()]
    if kind == "jsonl-no-title":
        (path := folder / "c.jsonl").write_text(_jsonl(rows))
    elif kind == "jsonl-null-title":
        (path := folder / "c.jsonl").write_text(_jsonl({**r, "title": None} for r in rows))
    elif kind == "jsonl-empty-title":
        (path := folder / "c.jsonl").write_text(_jsonl({**r, "title": ""} for r in rows))
    elif kind == "pyserini":
        (path := folder / "c.jsonl").write_text(_jsonl({"id": r["id"], "contents": r["text"]} for r in rows))
    elif kind == "beir":  # many BEIR sets' titles are empty
        (path := folder / "corpus.jsonl").write_text(
            _jsonl({"_id": r["id"], "title": "", "text": r["text"], "metadata": {}} for r in rows)
        )
    elif kind == "csv-no-title":
        (path := folder / "c.csv").write_text(_csv(["id", "text"], rows))
    elif kind == "csv-empty-title":
        (path := folder / "c.csv").write_text(_csv(["id", "title", "text"], rows))
    elif kind == "tsv-no-title":
        (path := folder / "c.tsv").write_text(_csv(["id", "text"], rows, sep="\t"))
    elif kind == "parquet-no-title":
        pq.write_table(pa.Table.from_pylist(rows), path := folder / "c.parquet")
    elif kind == "parquet-null-title":
        pq.write_table(
            pa.Table.from_pylist(
                [{**r, "title": None} for r in rows],
                schema=pa.schema([("id", pa.string()), ("text", pa.string()), ("title", pa.string())]),
            ),
            path := folder / "c.parquet",
        )
    elif kind == "feather-no-title":
        feather.write_feather(pa.Table.from_pylist(rows), path := folder / "c.feather")
    elif kind == "datasets-no-title":
        datasets.Dataset.from_list(rows).save_to_disk(str(path := folder / "ds"))
    elif kind == "dpr-tsv-empty-title":
        (path := folder / "psgs.tsv").write_text(
            "id\ttext\ttitle\n" + "".join(f"{i}\t{t}\t\n" for i, t in TEXTS.items())
        )
    elif kind == "squad-no-title":
        (path := folder / "c.json").write_text(
            json.dumps(
                {"version": "1.1", "data": [{"paragraphs": [{"context": t, "qas": []}]} for t in TEXTS.values()]}
            )
        )
    elif kind == "wikiextractor-no-title":
        (path := folder / "wiki_00").write_text(
            "".join(f'<doc id="{i}" url="u">\n{t}\n</doc>\n' for i, t in TEXTS.items())
        )
    else:
        raise AssertionError(kind)
    return path


FORMATS = [
    "jsonl-no-title",
    "jsonl-null-title",
    "jsonl-empty-title",
    "pyserini",
    "beir",
    "csv-no-title",
    "csv-empty-title",
    "tsv-no-title",
    "parquet-no-title",
    "parquet-null-title",
    "feather-no-title",
    "datasets-no-title",
    "dpr-tsv-empty-title",
    "squad-no-title",
    "wikiextractor-no-title",
]


@pytest.mark.parametrize("kind", FORMATS)
def test_a_corpus_without_titles_builds_an_index_that_reads(kind, tmp_path):
    corpus = _write(kind, tmp_path)
    out = tmp_path / "idx"
    build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["bm25"]))
    for _ in range(2):  # opened afresh: the store is mapped at another address each time
        bundle = FolderIndex.open(out)
        hits = built_retriever(bundle, "bm25").search(["who discovered penicillin"], 3)[0]
        assert hits and hits[0].passage.text == TEXTS["d1"] and hits[0].passage.title == ""
        assert sorted(p.text for p in bundle.store.get_rows(list(range(len(bundle.store))))) == sorted(TEXTS.values())
    assert bundle.verify()  # the full digests agree too
