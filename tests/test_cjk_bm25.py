"""Korean and Chinese BM25: analysers, language detection, and an index that stores and reuses them."""

from __future__ import annotations

import json

import pytest

from odqa.indexes.analysis import detect_language, get_analyzer
from tests.retrievers import built_retriever


def test_detect_language_by_script():
    assert detect_language(["임진왜란은 1592년(선조 25년)에 일어났다."]) == "ko"
    assert detect_language(["長城是中國古代的軍事防禦工程", "长城有多长？"]) == "zh"
    assert detect_language(["The Great Wall of China (長城)"]) == "en"
    assert detect_language([""]) == "en"


def test_bigrams_fold_traditional_to_simplified_and_keep_latin_words():
    pytest.importorskip("opencc", reason="pip install -e '.[cjk]'")
    analyze = get_analyzer("zh-bigram")
    assert analyze("長城有多長？ABC-12") == ["长城", "城有", "有多", "多长", "abc", "12"]
    assert analyze("雲") == ["云"]


def test_korean_morphemes_drop_particles_and_endings():
    pytest.importorskip("kiwipiepy", reason="pip install -e '.[cjk]'")
    terms = get_analyzer("ko-kiwi")("임진왜란은 1592년에 일어났다.")
    assert "임진왜란" in terms and "일어나" in terms
    assert not {"은", "에", "다", "."} & set(terms)


def _write_corpus(path, rows):
    with path.open("w", encoding="utf-8") as f:
        for i, (title, text) in enumerate(rows):
            f.write(json.dumps({"id": str(i), "title": title, "text": text}, ensure_ascii=False) + "\n")
    return path


def test_korean_index_detects_its_language_and_matches_across_particles(tmp_path):
    pytest.importorskip("kiwipiepy", reason="pip install -e '.[cjk]'")
    from odqa.indexes.analysis import DEFAULT_ANALYZER
    from odqa.indexes.folder import FolderIndex
    from odqa.indexes.manifest import Manifest
    from odqa.indexing import IndexSpec, build_index

    corpus = _write_corpus(
        tmp_path / "ko.jsonl",
        [
            ("임진왜란", "임진왜란은 1592년에 일본이 조선을 침략하여 일어난 전쟁이다."),
            ("한글", "한글은 세종대왕이 1443년에 창제한 문자이다."),
            ("서울", "서울은 대한민국의 수도이며 한강이 흐른다."),
        ],
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "auto"), backends=["bm25"]))
    detected = FolderIndex.open(tmp_path / "auto").manifest.params
    assert detected["language"] == "ko" and detected["analyzer"] == DEFAULT_ANALYZER["ko"]
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], analyzer="ko-kiwi"))
    bundle = FolderIndex.open(tmp_path / "idx")
    assert Manifest.load(tmp_path / "idx" / "bm25").params["analyzer"] == "ko-kiwi"
    # "세종대왕이" / "창제했나" in the question, "세종대왕이" / "창제한" in the passage: morphemes meet
    hits = built_retriever(bundle, "bm25").search(["한글을 창제한 사람은 누구인가?"], 3)[0]
    assert hits[0].passage.title == "한글"

    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "ws"), backends=["bm25"], analyzer="whitespace"))
    # whitespace tokens: "한글을" is not "한글은", "임진왜란이" not "임진왜란은"
    spaces = built_retriever(FolderIndex.open(tmp_path / "ws"), "bm25")
    assert spaces.search(["임진왜란이 일어난 해"], 3)[0][0].passage.title == "임진왜란"
    assert spaces.search(["임진왜란이"], 3)[0] == []
    assert built_retriever(bundle, "bm25").search(["임진왜란이"], 3)[0][0].passage.title == "임진왜란"


def test_chinese_index_answers_a_traditional_question_over_simplified_text(tmp_path):
    pytest.importorskip("opencc", reason="pip install -e '.[cjk]'")
    from odqa.indexes.folder import FolderIndex
    from odqa.indexing import IndexSpec, build_index

    corpus = _write_corpus(
        tmp_path / "zh.jsonl",
        [
            ("长城", "长城是中国古代的军事防御工程，总长度超过两万公里。"),
            ("黄河", "黄河是中国第二长河，发源于青海。"),
        ],
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], language="auto"))
    bundle = FolderIndex.open(tmp_path / "idx")
    assert bundle.manifest.params["language"] == "zh"
    assert built_retriever(bundle, "bm25").search(["長城有多長？"], 2)[0][0].passage.title == "长城"


def test_a_python_analyser_needs_the_tantivy_engine(tmp_path):
    from odqa.core.errors import OdqaError
    from odqa.indexing import IndexSpec, build_index

    corpus = _write_corpus(tmp_path / "zh.jsonl", [("长城", "长城是中国古代的军事防御工程。")])
    with pytest.raises(OdqaError, match="needs the tantivy engine"):
        build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], bm25_engine="bm25s"))


@pytest.mark.slow
def test_korean_questions_through_the_pipeline_and_the_shell(shared_data, tmp_path):
    """KorQuAD's first 4 articles (2 paragraphs each) indexed with --language ko: the questions ask and the
    shell pass on are analysed with the index's stored analyser and find their article; the shell answers
    Korean lines (and a line of broken UTF-8) without a traceback. The English reader's answers are poor."""
    import subprocess
    import sys
    from pathlib import Path

    from odqa.cli import main
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline

    korquad = json.loads((shared_data / "multilingual" / "korquad-v1.0-dev.json").read_text(encoding="utf-8"))
    small = {"data": [{"title": a["title"], "paragraphs": a["paragraphs"][:2]} for a in korquad["data"][:4]]}
    corpus = tmp_path / "korquad-small.json"
    corpus.write_text(json.dumps(small, ensure_ascii=False), encoding="utf-8")
    index = tmp_path / "ko"
    assert main(["index", "--corpus", str(corpus), "--out", str(index), "--language", "ko", "--backends", "bm25"]) == 0

    pipeline = Pipeline(
        OdqaConfig.load(None, {"index": str(index), "retrieval.retriever": "bm25", "linker.enabled": False})
    )
    bm25 = pipeline.retriever()
    stored = pipeline.bundle.manifest.params["analyzer"]
    analyze = pipeline.bundle.text_index().analyze
    assert stored == "ko-bigram" and analyze("임진왜란은") == get_analyzer(stored)("임진왜란은")
    asked = [
        (qa["question"], a["title"].replace("_", " "))
        for a in small["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    ]
    hits = bm25.search([q for q, _ in asked], 1)
    assert [h[0].passage.title for h in hits] == [title for _, title in asked]  # 59 of 59

    lines = f"{asked[0][0]}\n{asked[-1][0]}\n".encode() + b"\xff\xfe \xea\xb9\n"
    run = subprocess.run(
        [
            sys.executable,
            "run_qa.py",
            "shell",
            "--index",
            str(index),
            "--retriever",
            "bm25",
            "--no-linker",
            "--precision",
            "fp32",
            "--runtime",
            "torch",
        ],
        cwd=Path(__file__).resolve().parents[1],
        input=lines,
        capture_output=True,
        timeout=600,
    )
    out = run.stdout.decode() + run.stderr.decode()
    assert run.returncode == 0 and "Traceback" not in out, out[-1500:]
    # a best guess for each Korean question (the reader may take it from another retrieved article), and
    # the broken line read as text with replacement characters
    assert run.stdout.decode().count("  1. ") == 2, out[-1500:]
