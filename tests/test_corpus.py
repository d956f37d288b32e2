import bz2
import gzip
import json
import lzma

import pytest

from odqa.core.errors import DataFormatError, OdqaError
from odqa.core.types import Document
from odqa.corpus import PassageStore, chunk_document, iter_documents, iter_passages

ARTICLES = [
    {
        "id": "10",
        "title": "Alpha",
        "text": "Alpha is a town. It lies on a river.\nHistory.\nAlpha was founded in 1850 by Jean Martin.",
    },
    {"id": "11", "title": "Beta", "text": "Beta is a city in Germany."},
]


def _jsonl(path, rows, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


@pytest.mark.parametrize("suffix,opener", [("", open), (".gz", gzip.open), (".xz", lzma.open), (".bz2", bz2.open)])
def test_jsonl_plain_and_compressed(tmp_path, suffix, opener):
    path = _jsonl(tmp_path / f"wiki.jsonl{suffix}", ARTICLES, opener)
    docs = list(iter_documents(path))
    assert [(d.id, d.title) for d in docs] == [("10", "Alpha"), ("11", "Beta")]
    assert docs[0].text.startswith("Alpha is a town.")


def test_pyserini_contents_jsonl(tmp_path):
    path = _jsonl(tmp_path / "c.jsonl", [{"id": "d1", "contents": "Some text here."}])
    assert list(iter_documents(path)) == [Document("d1", "", "Some text here.")]


def test_wikiextractor_folder(tmp_path):
    folder = tmp_path / "text" / "AA"
    folder.mkdir(parents=True)
    (folder / "wiki_00").write_text(
        '<doc id="12" url="http://x?curid=12" title="Anarchism">\nAnarchism\n\nAnarchism is a political philosophy.\n'
        "It has many strands.\n</doc>\n"
        '<doc id="25" url="u" title="Autism &amp; Society">\nAutism &amp; Society\nA text about it.\n</doc>\n'
    )
    with bz2.open(folder / "wiki_01.bz2", "wt") as f:
        f.write('<doc id="39" url="u" title="Albedo">\nAlbedo\nAlbedo is reflectivity.\n</doc>\n')
    docs = list(iter_documents(tmp_path / "text"))
    assert [d.title for d in docs] == ["Anarchism", "Autism & Society", "Albedo"]
    assert docs[0].text == "Anarchism is a political philosophy.\nIt has many strands."


def test_wikiextractor_cut_short(tmp_path):
    (tmp_path / "wiki_00").write_text('<doc id="1" url="u" title="T">\nT\nbody\n')
    with pytest.raises(DataFormatError, match="no closing"):
        list(iter_documents(tmp_path / "wiki_00"))


def test_dpr_tsv_passages_kept_as_they_are(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet, ""high priest"""\tAaron\n2\tSecond passage.\tBeta\n')
    passages = list(iter_passages(path))
    assert [(p.id, p.title) for p in passages] == [("1", "Aaron"), ("2", "Beta")]
    assert passages[0].text == 'Aaron is a prophet, "high priest"'


def test_squad_paragraphs_are_documents(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [
                    {
                        "title": "Super_Bowl_50",
                        "paragraphs": [{"context": "Para one.", "qas": []}, {"context": "Para two.", "qas": []}],
                    }
                ],
            }
        )
    )
    docs = list(iter_documents(path))
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("Super_Bowl_50#0", "Super Bowl 50", "Para one."),
        ("Super_Bowl_50#1", "Super Bowl 50", "Para two."),
    ]


def test_squad_untitled_and_repeated_titles_get_unique_ids(tmp_path):
    # CMRC 2018 dev has two untitled articles: indexing it must not stop on a repeated document id
    path = tmp_path / "cmrc.json"
    path.write_text(
        json.dumps(
            {
                "data": [
                    {"id": "DEV_0", "title": "", "paragraphs": [{"context": "一。", "qas": []}]},
                    {"id": "DEV_1", "title": "", "paragraphs": [{"context": "二。", "qas": []}]},
                    {"title": "长城", "paragraphs": [{"context": "三。", "qas": []}]},
                    {"title": "长城", "paragraphs": [{"context": "四。", "qas": []}]},
                ]
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    passages = list(iter_passages(path))
    assert [p.doc_id for p in passages] == ["@DEV_0#0", "@DEV_1#0", "长城#0", "长城@3#0"]
    assert [p.title for p in passages] == ["", "", "长城", "长城"]


def test_unknown_and_missing_and_malformed(tmp_path):
    with pytest.raises(DataFormatError, match="not found"):
        list(iter_documents(tmp_path / "nope.jsonl"))
    bad = tmp_path / "x.txt"
    bad.write_text("just words\n")
    with pytest.raises(DataFormatError, match="unknown corpus format"):
        list(iter_documents(bad))
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"id": "1", "title": "A", "text": "ok"}\n{"id": 2, "title": \n')
    with pytest.raises(DataFormatError, match=r"b.jsonl:2"):
        list(iter_documents(broken))
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(DataFormatError, match="empty"):
        list(iter_documents(empty))


def test_chunking_offsets_and_sentence_boundaries():
    sentences = [f"Sentence number {i} has exactly seven words." for i in range(40)]  # 7 words each
    text = " ".join(sentences[:20]) + "\n" + " ".join(sentences[20:])
    doc = Document("d", "T", text)
    passages = chunk_document(doc, words=30)
    for p in passages:
        assert doc.text[p.start : p.end] == p.text
        assert len(p.text.split()) <= 30
        assert p.text.startswith("Sentence") and p.text.endswith("words.")  # whole sentences only
        assert "\n" not in p.text  # never across a paragraph break
    assert [p.id for p in passages] == [f"d_{i}" for i in range(len(passages))]
    covered = sum(len(p.text.split()) for p in passages)
    assert covered == 280


def test_chunking_splits_a_sentence_longer_than_the_budget():
    doc = Document("d", "T", " ".join(f"w{i}" for i in range(250)) + ".")
    passages = chunk_document(doc, words=100)
    assert [len(p.text.split()) for p in passages] == [100, 100, 50]
    assert all(doc.text[p.start : p.end] == p.text for p in passages)


def test_short_tail_joins_previous_passage():
    doc = Document("d", "T", "One two three four five six seven eight. Nine ten.")
    passages = chunk_document(doc, words=8, min_words=4)
    assert len(passages) == 1 and passages[0].text == doc.text


def test_passage_store_roundtrip_and_fingerprint(tmp_path):
    path = _jsonl(tmp_path / "w.jsonl", ARTICLES)
    store, fp = PassageStore.write(iter_passages(path, words=6), tmp_path / "passages")
    again, fp2 = PassageStore.write(iter_passages(path, words=6), tmp_path / "passages2")
    assert fp == fp2 and len(store) == len(again) >= 3
    reopened = PassageStore.open(tmp_path / "passages")
    assert reopened.get(0).title == "Alpha"
    assert [p.id for p in reopened.get_rows([2, 0])] == [reopened.get(2).id, reopened.get(0).id]
    with pytest.raises(OdqaError, match="no passages"):
        PassageStore.write(iter([]), tmp_path / "none")
    assert not (tmp_path / "none").exists()
    with pytest.raises(OdqaError, match="no passages"):  # a failed rebuild keeps the good store it would replace
        PassageStore.write(iter([]), tmp_path / "passages")
    assert len(PassageStore.open(tmp_path / "passages")) == len(store)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["passages", "passages2", "w.jsonl"]


def test_closing_quotes_and_brackets_stay_with_their_sentence():
    from odqa.core.types import Document
    from odqa.corpus.chunking import chunk_document

    text = 'He said "It is done." Then he left (for good.) ' * 30 + "The end."
    passages = chunk_document(Document(id="d", title="T", text=text), words=20)
    assert len(passages) > 1
    for before, after in zip(passages, passages[1:]):
        gap = text[before.end : after.start]
        assert gap.strip() == "", f"characters lost between passages: {gap!r}"
        assert before.text.endswith(('"', ")")), before.text[-10:]


def test_chinese_is_measured_in_characters_and_cut_at_its_sentence_ends():
    from odqa.corpus.chunking import CJK_CHARS_PER_WORD

    sentences = [f"长城是中国古代的军事防御工程第{i}段。" for i in range(30)]  # 19 characters, no spaces
    sentences[7] = sentences[7].replace("。", "！")
    sentences[12] = sentences[12].replace("。", "？”")  # a closing quote stays with its sentence
    doc = Document("d", "长城", "".join(sentences))
    passages = chunk_document(doc, words=50)
    budget = 50 * CJK_CHARS_PER_WORD  # 80 characters
    assert len(passages) >= 6  # counted as whitespace words the paragraph was one passage
    for p in passages:
        assert doc.text[p.start : p.end] == p.text
        assert len(p.text) <= budget
        assert p.text.endswith(("。", "！", "？”")) and p.text.startswith("长城")  # whole sentences only
    assert "".join(p.text for p in passages) == doc.text


def test_a_chinese_sentence_longer_than_the_budget_is_cut_between_characters():
    doc = Document("d", "T", "万里长城" * 100 + "。")  # 401 characters, one sentence
    passages = chunk_document(doc, words=100)
    assert [len(p.text) for p in passages] == [160, 160, 81]
    assert "".join(p.text for p in passages) == doc.text


def test_korean_is_cut_at_its_sentence_ends_and_english_with_a_chinese_name_is_unchanged():
    korean = " ".join(f"임진왜란은 {1592 + i}년에 일어난 전쟁이다." for i in range(20))  # 4 words a sentence
    passages = chunk_document(Document("k", "임진왜란", korean), words=10)
    assert len(passages) == 10 and all(p.text.endswith("전쟁이다.") for p in passages)
    english = " ".join(f"Chiew Lee Yih (趙裡昱) wrote post {i} in a newsgroup." for i in range(30))  # 10 words
    passages = chunk_document(Document("e", "T", english), words=30)
    assert [len(p.text.split()) for p in passages] == [30] * 10
