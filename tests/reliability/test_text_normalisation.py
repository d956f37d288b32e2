"""Issue 78, class 5: one text normalisation for BM25 (indexes.analysis.normalize_text: NFKC without format
characters), of passages when they are indexed and of questions when they are searched, on every engine and
analyser. A word stored decomposed (NFD), with a zero-width space or in full-width Latin was never found by its
usual spelling. An index built before records no normalisation and is searched as it was built; a corpus mixing
languages gets a notice at index time (BM25 analyses an index in one language)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from odqa.indexes.bm25 import build_text_index, load_text_index
from odqa.indexes.manifest import Manifest

# (how the passage writes the word, how a question writes it)
SPELLINGS = {
    "decomposed accent": ("Beyonce\u0301 Knowles sang it", "Beyoncé"),
    "zero-width space": ("penicil\u200blin was found by chance", "penicillin"),
    "soft hyphen": ("the streptomy\u00adcin trial", "streptomycin"),
    "full-width Latin": ("\uff21\uff2d\uff2f\uff38\uff29\uff23\uff29\uff2c\uff2c\uff29\uff2e dosage", "amoxicillin"),
    "question in full-width": (
        "tetracycline was tested",
        "\uff54\uff45\uff54\uff52\uff41\uff43\uff59\uff43\uff4c\uff49\uff4e\uff45",
    ),
    "question with a zero-width joiner": ("vancomycin resistance", "vanco\u200dmycin"),
    "ligature": ("a \ufb01shmonger story", "fishmonger"),
}
FILLER = ["the weather was mild that year", "a river runs past the old mill", "music of the baroque period"]

ENGINES = [
    pytest.param("tantivy", {}, id="tantivy-en"),
    pytest.param("tantivy", {"analyzer": "whitespace"}, id="tantivy-whitespace"),
    pytest.param(
        "tantivy",
        {"analyzer": "ko-bigram"},
        id="tantivy-ko-bigram",
    ),
    pytest.param(
        "bm25s",
        {},
        id="bm25s",
        marks=pytest.mark.skipif(not importlib.util.find_spec("bm25s"), reason="bm25s not installed"),
    ),
    pytest.param(
        "rank-bm25",
        {},
        id="rank-bm25",
        marks=pytest.mark.skipif(not importlib.util.find_spec("rank_bm25"), reason="rank-bm25 not installed"),
    ),
]


@pytest.mark.parametrize("engine,params", ENGINES)
def test_a_word_is_found_by_its_usual_spelling_however_it_is_stored(engine, params, tmp_path):
    texts = [*FILLER, *(stored for stored, _ in SPELLINGS.values())]
    index = build_text_index(texts, tmp_path / "bm25", Manifest(kind="bm25"), engine=engine, **params)
    missed = []
    for row, (case, (_, asked)) in enumerate(SPELLINGS.items(), len(FILLER)):
        hits = index.search([asked], 3)[0]
        if not hits or hits[0][0] != row:
            missed.append(case)
    assert not missed, f"{engine} {params}: not found by the usual spelling: {missed}"


def test_an_index_built_before_is_searched_as_it_was_built(tmp_path, monkeypatch):
    """An older index (no `normalization` in its manifest) holds its passages as written: its questions are not
    normalised either, so a word written as the passage writes it is found as before."""
    import odqa.indexes.bm25 as bm25

    monkeypatch.setattr(bm25, "normalize_text", lambda text: text)  # an older odqa: passages as written
    stored = "\uff30\uff25\uff2e\uff29\uff23\uff29\uff2c\uff2c\uff29\uff2e was found"
    folder = tmp_path / "bm25"
    build_text_index([*FILLER, stored], folder, Manifest(kind="bm25"))
    manifest = Manifest.load(folder)
    manifest.params.pop("normalization", None)  # what an older odqa wrote
    manifest.save(folder)
    monkeypatch.undo()
    index = load_text_index(folder)
    assert index.search(["\uff50\uff45\uff4e\uff49\uff43\uff49\uff4c\uff4c\uff49\uff4e"], 1)[0][0][0] == len(FILLER)


def test_a_new_index_records_its_normalisation(tmp_path):
    from odqa.indexes.analysis import TEXT_NORMALIZATION

    build_text_index(FILLER, tmp_path / "bm25", Manifest(kind="bm25"))
    manifest = json.loads((tmp_path / "bm25" / "manifest.json").read_text())
    assert manifest["params"]["normalization"] == TEXT_NORMALIZATION


def test_a_corpus_mixing_languages_gets_a_notice_at_index_time(tmp_path, capsys):
    from odqa.cli import main

    docs = [{"id": f"en{i}", "title": f"Topic {i}", "text": f"{FILLER[i % 3]} and item {i}"} for i in range(14)]
    docs += [{"id": f"ko{i}", "title": "한국", "text": f"서울은 대한민국의 수도이다 {i}번째 문장"} for i in range(4)]
    docs += [{"id": f"zh{i}", "title": "中国", "text": f"北京是中华人民共和国的首都 第{i}句"} for i in range(3)]
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    code = main(["index", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--backends", "bm25"])
    err = capsys.readouterr().err
    assert code == 0, err
    notes = [line for line in err.splitlines() if "mixes languages" in line]
    assert len(notes) == 1 and "Korean" in notes[0] and "Chinese" in notes[0] and "English" in notes[0], err


def test_a_corpus_of_one_language_gets_no_notice(tmp_path, capsys):
    from odqa.cli import main

    docs = [{"id": f"en{i}", "title": f"Topic {i}", "text": f"{FILLER[i % 3]} and item {i}"} for i in range(10)]
    corpus = tmp_path / "en.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert main(["index", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--backends", "bm25"]) == 0
    assert "mixes languages" not in capsys.readouterr().err
