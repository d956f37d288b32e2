"""The linker's knowledge base built with every index (issue 74 items 3 and 8).

`odqa index` writes the KB beside the index (`OUT-kb`; `--no-kb`: none), encoded by the linker's entity encoder, from
English, Korean and Chinese corpora (a SQuAD-style corpus: one entity per article title); a rerun keeps a KB of the
same corpus and rebuilds a stale one, an interrupted KB build keeps the old KB and the rerun finishes it, and a
sharded index gets one KB beside its top folder. Without a KB, `ask`, the server and its page run as "no linker": one
notice that says how to build it, no linker in /info, no entity section. A KB encoded by another entity encoder, in a
language the linker was not trained on, with alias keys made otherwise, or damaged is told or refused in one line.
Tiny corpora written here, BM25 only: only the entities are encoded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from odqa.cli import main
from odqa.config import OdqaConfig
from odqa.indexes.manifest import Manifest
from odqa.linker.kb import KnowledgeBase
from odqa.linker.settings import LinkerSettings
from tests.conftest import REPO_ROOT
from tests.reliability.cli_checks import assert_clean, run_cli

ENGLISH = [
    ("en1", "Albert Einstein", "Albert Einstein was a German-born theoretical physicist, born in Ulm in 1879."),
    ("en2", "Marie Curie", "Marie Curie was a Polish and French physicist and chemist who studied radioactivity."),
    ("en3", "Ulm", "Ulm is a city on the river Danube in the German state of Baden-Wurttemberg."),
]
KOREAN = {  # KorQuAD-style: each article's paragraphs under its title
    "서울특별시": ["서울특별시는 대한민국의 수도이다.", "서울에는 한강이 흐른다. 인구는 약 천만 명이다."],
    "세종대왕": ["세종대왕은 조선의 제4대 왕이다.", "세종대왕은 훈민정음을 창제하였다."],
    "한강": ["한강은 한반도 중부를 흐르는 강이다."],
}
CHINESE = {  # CMRC 2018-style
    "长城": ["长城是中国古代的军事防御工程。", "长城东起山海关，西至嘉峪关。"],
    "北京": ["北京是中华人民共和国的首都。"],
}
QUESTION = "Where was Albert Einstein born?"


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in rows))
    return path


def _squad(path: Path, articles: dict[str, list[str]]) -> Path:
    data = [
        {"title": title, "paragraphs": [{"context": text, "qas": []} for text in paragraphs]}
        for title, paragraphs in articles.items()
    ]
    path.write_text(json.dumps({"version": "1", "data": data}, ensure_ascii=False), encoding="utf-8")
    return path


def _titles(kb: Path) -> list[str]:
    return [entry.title for entry in KnowledgeBase.load(kb).entries]


def _index(corpus: Path, out: Path, capsys, *flags) -> str:
    code, text = run_cli(["index", "--corpus", corpus, "--out", out, "--backends", "bm25", *flags], capsys)
    assert code == 0, text[-800:]
    return text


@pytest.fixture(scope="module")
def english(tmp_path_factory) -> tuple[Path, Path]:
    """An English corpus and its BM25 index, built with its KB (the default)."""
    root = tmp_path_factory.mktemp("english")
    corpus = _jsonl(root / "articles.jsonl", ENGLISH)
    assert main(["index", "--corpus", str(corpus), "--out", str(root / "idx"), "--backends", "bm25"]) == 0
    return corpus, root / "idx"


@pytest.fixture(scope="module")
def without_kb(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("nokb")
    corpus = _jsonl(root / "articles.jsonl", ENGLISH)
    assert main(["index", "--corpus", str(corpus), "--out", str(root / "idx"), "--backends", "bm25", "--no-kb"]) == 0
    return corpus, root / "idx"


def test_index_builds_the_linkers_kb_beside_it_by_default(english):
    corpus, index = english
    kb = KnowledgeBase.load(index.parent / "idx-kb")
    assert [e.title for e in kb.entries] == [title for _, title, _ in ENGLISH]
    assert kb.encoder == LinkerSettings().entity_encoder()  # the default linker's, from its linker_config.json
    assert kb.language == "en" and kb.languages == ["en"]


def test_no_kb_builds_none(without_kb):
    _, index = without_kb
    assert index.is_dir() and not (index.parent / "idx-kb").exists()


@pytest.mark.parametrize(("language", "articles"), [("ko", KOREAN), ("zh", CHINESE)], ids=["korquad", "cmrc"])
def test_korean_and_chinese_indexes_get_kbs_of_their_article_titles(tmp_path, capsys, language, articles):
    corpus = _squad(tmp_path / f"{language}.json", articles)
    _index(corpus, tmp_path / "idx", capsys, "--language", language)
    kb = KnowledgeBase.load(tmp_path / "idx-kb")
    assert [e.title for e in kb.entries] == list(articles)  # one entity per article, not per paragraph
    assert kb.language == language and kb.languages == [language]


def test_a_rerun_keeps_the_kb_of_the_same_corpus_and_rebuilds_a_stale_one(tmp_path, capsys):
    corpus = _jsonl(tmp_path / "articles.jsonl", ENGLISH)
    _index(corpus, tmp_path / "idx", capsys)
    built = Manifest.load(tmp_path / "idx-kb").digest
    text = _index(corpus, tmp_path / "idx", capsys)
    assert "kept" in text and Manifest.load(tmp_path / "idx-kb").digest == built
    _jsonl(corpus, [*ENGLISH, ("en4", "Danube", "The Danube is the second-longest river in Europe.")])
    _index(corpus, tmp_path / "idx", capsys)
    assert _titles(tmp_path / "idx-kb")[-1] == "Danube"
    # --no-kb leaves the KB there as it is, and says so where it is of another corpus
    _jsonl(corpus, ENGLISH)
    text = _index(corpus, tmp_path / "idx", capsys, "--no-kb")
    assert _titles(tmp_path / "idx-kb")[-1] == "Danube" and "another corpus" in text


@pytest.mark.subprocess
def test_an_interrupted_kb_build_keeps_the_old_kb_and_the_rerun_finishes_it(tmp_path, capsys):
    corpus = _jsonl(tmp_path / "articles.jsonl", ENGLISH)
    _index(corpus, tmp_path / "idx", capsys)
    before = (tmp_path / "idx-kb" / "entities.jsonl").read_bytes()
    other = _jsonl(tmp_path / "other.jsonl", [("o1", "Danube", "The Danube flows through Ulm."), *ENGLISH[:1]])
    code = (
        "from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(other)!r}, out={str(tmp_path / 'idx')!r}, backends=['bm25']), "
        "crash_after='kb')"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 137, run.stderr[-800:]
    KnowledgeBase.load(tmp_path / "idx-kb")  # whole, and the old one
    assert (tmp_path / "idx-kb" / "entities.jsonl").read_bytes() == before
    text = _index(other, tmp_path / "idx", capsys)
    assert "resumed" in text and _titles(tmp_path / "idx-kb") == ["Danube", "Albert Einstein"]
    leftovers = (".building-", ".old-", ".entities-")  # nothing of the killed build stays beside the KB and index
    assert not [p.name for p in tmp_path.iterdir() if any(s in p.name for s in leftovers) or p.suffix == ".work"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_kb_build_without_room_keeps_the_old_kb_says_so_in_one_line_and_the_rerun_builds_it(tmp_path, capsys):
    from tests.reliability.cli_checks import run_with_file_limit

    corpus = _jsonl(tmp_path / "articles.jsonl", ENGLISH)
    _index(corpus, tmp_path / "idx", capsys)
    before = (tmp_path / "idx-kb" / "entities.jsonl").read_bytes()
    other = _jsonl(tmp_path / "other.jsonl", [("o1", "Danube", "The Danube flows through Ulm."), *ENGLISH[:2]])
    # room for every file of the index, not for the KB's alias table (SQLite writes pages of 4 KB)
    run = run_with_file_limit(["index", "--corpus", other, "--out", tmp_path / "idx", "--backends", "bm25"], 7000)
    text = run.stdout + run.stderr
    error = [line for line in text.splitlines() if "error:" in line]
    assert run.returncode == 2 and "Traceback" not in text and len(error) == 1, text[-1500:]
    assert f"the index {tmp_path / 'idx'} is ready" in error[0] and "rerun" in error[0], error
    assert (tmp_path / "idx-kb" / "entities.jsonl").read_bytes() == before
    text = _index(other, tmp_path / "idx", capsys)
    assert "resumed" in text and _titles(tmp_path / "idx-kb") == ["Danube", "Albert Einstein", "Marie Curie"]


def test_a_sharded_index_gets_one_kb_beside_its_top_folder(tmp_path, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    _jsonl(folder / "a.jsonl", ENGLISH[:2])
    _jsonl(folder / "b.jsonl", ENGLISH[2:])
    _index(folder, tmp_path / "idx", capsys, "--shards", "2")
    assert _titles(tmp_path / "idx-kb") == [title for _, title, _ in ENGLISH]
    assert not list((tmp_path / "idx" / "shards").glob("*-kb"))


# ---- an index without a knowledge base: no linker, said once ----------------------------------------------------
def test_ask_without_a_kb_says_once_how_to_build_it(without_kb, capsys):
    corpus, index = without_kb
    code, text = run_cli(["ask", "--index", index, "--retriever", "bm25", QUESTION, "Who was Marie Curie?"], capsys)
    assert code == 0, text[-800:]
    fix = f"build-kb --corpus {corpus} --out {index.parent / 'idx-kb'}"
    assert text.count(fix) == 1 and "entities:" not in text, text[-1500:]


def test_a_server_without_a_kb_names_no_linker(without_kb):
    from fastapi.testclient import TestClient

    from odqa.pipeline import Pipeline
    from odqa.serve.app import create_app

    _, index = without_kb
    pipeline = Pipeline(OdqaConfig.load(None, {"index": str(index), "retrieval.retriever": "bm25"}))
    with TestClient(create_app(pipeline)) as client:
        assert client.get("/info").json()["models"]["linker"] == ""
        linked = client.post("/link", json={"question": QUESTION}).json()
        assert not linked["linker_enabled"] and not linked["mentions"]
        assert [n for n in linked["notices"] if "build-kb --corpus" in n]
        assert not [n for n in client.post("/ask", json={"question": QUESTION}).json()["notices"] if "build-kb" in n]


PAGE = r"""
const fs = require("fs"), vm = require("vm");
class Element {
  constructor(tag) { Object.assign(this, { tag, children: [], textContent: "", hidden: false, className: "", lang: "",
    dataset: {}, classList: { toggle() {} } }); }
  replaceChildren(...nodes) { this.children = nodes; }
  append(...nodes) { this.children.push(...nodes); }
}
const byId = {};
const document = { getElementById: (id) => byId[id] || (byId[id] = new Element("#" + id)),
  createElement: (tag) => new Element(tag), createTextNode: (text) => ({ textContent: text }), addEventListener() {} };
const page = vm.createContext({ document, sessionStorage: { getItem: () => null, setItem() {} } });
vm.runInContext(fs.readFileSync(process.argv[1], "utf8"), page);
const result = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(JSON.stringify([false, true].map((linking) => {
  page.showLinking(linking);
  page.render(result);
  return { hidden: byId["entities-section"].hidden, entities: byId.entities.children.map((n) => n.textContent) };
})));
"""


def test_the_page_shows_no_entity_section_without_a_linker():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node not found: the page's script is run by Node here")
    result = {
        "question": QUESTION,
        "language": "en",
        "confident": False,
        "outcome": "no_answer",
        "answer": None,
        "answers": [],
        "passages": [],
        "mentions": [],
        "timings_ms": {"total": 1.0},
        "notices": [],
    }
    page = REPO_ROOT / "odqa" / "serve" / "static" / "page.js"
    run = subprocess.run(
        [node, "-e", PAGE, str(page)], input=json.dumps(result), capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    off, on = json.loads(run.stdout)
    assert off["hidden"] and not on["hidden"] and on["entities"] == ["none linked"]


# ---- knowledge bases the linker cannot use as they are (item 8) ---------------------------------------------------
def _linker_copy(tmp_path: Path, **config) -> Path:
    """The default linker's files under another folder (links), its linker_config.json changed by `config`."""
    from odqa.core.models import resolve_model

    source, copy = Path(resolve_model(LinkerSettings().model)), tmp_path / "linker"
    copy.mkdir()
    for file in source.iterdir():
        if file.name != "linker_config.json":
            (copy / file.name).symlink_to(file.resolve())
    saved = json.loads((source / "linker_config.json").read_text())
    (copy / "linker_config.json").write_text(json.dumps({**saved, **config}))
    return copy


def test_a_kb_of_another_entity_encoder_is_refused_naming_both(english, tmp_path, capsys):
    _, index = english
    kb = KnowledgeBase.load(index.parent / "idx-kb")
    linker = _linker_copy(tmp_path, entity_encoder="encoder-multilingual")
    config = tmp_path / "odqa.toml"
    config.write_text(f'[linker]\nmodel = "{linker}"\n')
    for argv in (
        ["link", "--kb", kb.path, "--model", linker, QUESTION],
        ["ask", "--index", index, "--retriever", "bm25", "--config", config, QUESTION],
    ):
        code, text = run_cli(argv, capsys)
        assert_clean(code, text)
        error = [line for line in text.splitlines() if "error:" in line]
        assert code == 2 and len(error) == 1, text[-800:]
        assert f"{kb.encoder!r}" in error[0] and "'encoder-multilingual'" in error[0], error
        assert "build-kb" in error[0] and "--encoder encoder-multilingual" in error[0], error


def test_a_korean_kb_with_a_linker_trained_on_english_gets_a_notice(tmp_path, capsys):
    from odqa.pipeline import Pipeline

    corpus = _squad(tmp_path / "ko.json", KOREAN)
    _index(corpus, tmp_path / "idx", capsys, "--no-kb", "--language", "ko")
    # a Korean KB encoded for the English linker (the index's own is encoded for linker-multilingual where installed)
    assert main(["build-kb", "--corpus", str(corpus), "--out", str(tmp_path / "kb"), "--encoder", "minilm"]) == 0
    linker = _linker_copy(tmp_path, languages=["en"])
    code, text = run_cli(["link", "--kb", tmp_path / "kb", "--model", linker, "세종대왕은 누구인가?"], capsys)
    assert code == 0 and "trained on English questions only" in text and "Korean" in text, text[-800:]
    pipeline = Pipeline(
        OdqaConfig.load(
            None,
            {
                "index": str(tmp_path / "idx"),
                "retrieval.retriever": "bm25",
                "linker.model": str(linker),
                "linker.kb": str(tmp_path / "kb"),
            },
        )
    )
    result = pipeline.ask("xylophone quokka")  # nothing retrieved: no reader is loaded
    assert [n for n in result.notices if "trained on English questions only" in n and "Korean" in n]


def test_a_kb_with_alias_keys_made_otherwise_gets_a_notice(tmp_path, capsys, monkeypatch):
    import odqa.linker.kb

    corpus = _jsonl(tmp_path / "articles.jsonl", ENGLISH)
    with monkeypatch.context() as patched:  # a KB written by a build whose alias keys were made otherwise
        patched.setattr(odqa.linker.kb, "alias_scheme", lambda: "an-older-scheme")
        assert main(["build-kb", "--corpus", str(corpus), "--out", str(tmp_path / "kb")]) == 0
    capsys.readouterr()
    code, text = run_cli(["link", "--kb", tmp_path / "kb", QUESTION], capsys)
    assert code == 0 and f"knowledge base {tmp_path / 'kb'}" in text and "rebuild it" in text, text[-800:]


def _truncate_entities(kb: Path) -> None:
    path = kb / "entities.jsonl"
    path.write_bytes(path.read_bytes()[:-30])


def _flip_a_byte_of_an_entity(kb: Path) -> None:
    path = kb / "entities.jsonl"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _garble_manifest(kb: Path) -> None:
    (kb / "manifest.json").write_text('{"kind": "kb", ')


DAMAGE = {
    "entities truncated": (_truncate_entities, "entities.jsonl"),
    "a byte of an entity flipped": (_flip_a_byte_of_an_entity, "entities.jsonl"),
    "vectors removed": (lambda kb: shutil.rmtree(kb / "vectors"), "vectors"),
    "manifest removed": (lambda kb: (kb / "manifest.json").unlink(), "manifest.json"),
    "entities removed": (lambda kb: (kb / "entities.jsonl").unlink(), "entities.jsonl"),
    "manifest garbled": (_garble_manifest, "manifest.json"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_half_built_kb_is_refused_in_one_line(english, tmp_path, capsys, damage):
    _, index = english
    copy = tmp_path / "idx-kb"
    shutil.copytree(index.parent / "idx-kb", copy)
    change, named = DAMAGE[damage]
    change(copy)
    code, text = run_cli(["link", "--kb", copy, QUESTION], capsys)
    assert_clean(code, text)
    error = [line for line in text.splitlines() if "error:" in line]
    assert code == 2 and len(error) == 1, text[-800:]
    assert named in error[0] and f"build-kb --corpus CORPUS --out {copy}" in error[0], error


def test_ask_refuses_a_damaged_kb_beside_the_index(english, tmp_path, capsys):
    corpus, index = english
    copy = tmp_path / "idx"
    shutil.copytree(index, copy)
    shutil.copytree(index.parent / "idx-kb", tmp_path / "idx-kb")
    _truncate_entities(tmp_path / "idx-kb")
    code, text = run_cli(["ask", "--index", copy, "--retriever", "bm25", QUESTION], capsys)
    assert_clean(code, text)
    assert code == 2 and text.count("error:") == 1 and "entities.jsonl" in text, text[-800:]
