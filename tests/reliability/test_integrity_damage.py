"""Damage inside an index's files is never served (issue 47, items 2 and 5): a byte changed in the middle of
passages.arrow, embeddings.npy or a BM25 file, an edited part manifest (pooling, similarity, query encoder)
and a bundle manifest naming no backends are refused by `search`, `eval-retrieval` and `ask` with one line
(exit 2), and by `verify-index`. The opening checks read only each file's first and last bytes
(`odqa.indexes.integrity.SAMPLE_BYTES`); here they are made tiny (and the demo index's record of its files made
with them), so that the middle of these small files lies where a large index's middle lies: outside them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import odqa.indexes.integrity
from tests.reliability.cli_checks import assert_clean, jsonl, run_cli
from tests.retrievers import built_retriever

QUERY = "Who wrote Hamlet?"
ANSWERED = b"Prince of Denmark, is a tragedy by William Shakespeare"  # the passage found first


@pytest.fixture(autouse=True)
def _small_samples(monkeypatch):
    monkeypatch.setattr(odqa.indexes.integrity, "SAMPLE_BYTES", 64)


@pytest.fixture(scope="module")
def demo_index() -> Path:
    from odqa.demo_corpus import demo_index_path

    return demo_index_path(quiet=True)


def _recorded_copy(demo_index: Path, tmp_path: Path) -> Path:
    """A copy of the demo index whose record of its files is made again, with the integrity settings of now."""
    from odqa.indexes.integrity import describe_part
    from odqa.indexes.manifest import Manifest

    copy = tmp_path / "idx"
    shutil.copytree(demo_index, copy)
    manifest = Manifest.load(copy)
    for part, record in manifest.params["parts"].items():
        manifest.params["parts"][part] = describe_part(copy / part, record["count"])
    manifest.save(copy)
    return copy


@pytest.fixture()
def index(demo_index, tmp_path) -> Path:
    """A copy of the demo index whose record of its files is made with the tiny samples (as a large index's
    covers only its files' ends)."""
    return _recorded_copy(demo_index, tmp_path)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    assert 64 < offset < len(data) - 64, "the damage must lie outside the sampled first and last bytes"
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


def _in_answered_passage(index: Path) -> None:
    """A letter of the text of the passage the query finds first, in the middle of the store."""
    path = index / "passages" / "passages.arrow"
    _flip(path, path.read_bytes().index(ANSWERED) + 12)


def _middle_of_vectors(index: Path) -> None:
    path = index / "dense" / "embeddings.npy"
    _flip(path, path.stat().st_size // 2)


def _middle_of_bm25(index: Path) -> None:
    files = [p for p in (index / "bm25").iterdir() if p.is_file() and p.suffix in (".term", ".idx", ".pos")]
    path = max(files, key=lambda p: p.stat().st_size)
    _flip(path, path.stat().st_size // 2)


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def _dense_setting(key: str, value: str):
    def change(index: Path) -> None:
        def edit(m):
            if key == "query_encoder":
                m["params"]["query_encoder"] = value
            else:
                m["params"].setdefault("encoder_settings", {})[key] = value

        _edit_json(index / "dense" / "manifest.json", edit)

    return change


DAMAGE = {  # (the damage, the retriever that reads it, what the refusal names)
    "a letter of an answered passage": (_in_answered_passage, "bm25", "passages.arrow"),
    "a byte in the middle of the vectors": (_middle_of_vectors, "dense", "embeddings.npy"),
    "a byte in the middle of a BM25 file": (_middle_of_bm25, "bm25", "bm25"),
    "dense manifest: pooling": (_dense_setting("pooling", "cls"), "dense", "manifest.json"),
    "dense manifest: similarity": (_dense_setting("similarity", "dot"), "dense", "manifest.json"),
    "dense manifest: query encoder": (
        _dense_setting("query_encoder", "fast-passage-encoder"),
        "dense",
        "manifest.json",
    ),
    "bundle manifest: backends []": (
        lambda idx: _edit_json(idx / "manifest.json", lambda m: m["params"].update(backends=[])),
        "bm25",
        "manifest.json",
    ),
    "bundle manifest: a part's record removed": (
        lambda idx: _edit_json(idx / "manifest.json", lambda m: m["params"]["parts"].pop("dense")),
        "dense",
        "manifest.json",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_inside_files_is_refused_by_every_command(index, tmp_path, capsys, damage):
    change, retriever, named = DAMAGE[damage]
    change(index)
    questions = jsonl(tmp_path / "q.jsonl", [{"question": QUERY, "answer": ["Shakespeare"]}])
    for argv in (
        ["search", "--index", index, "--retriever", retriever, "--k", "3", QUERY],
        ["eval-retrieval", "--index", index, "--questions", questions, "--retriever", retriever, "--k", "3"],
        ["verify-index", index],
    ):
        code, text = run_cli(argv, capsys)
        assert_clean(code, text)
        assert code == 2, (argv[0], text[-800:])
        assert named in text and "rebuild" in text and text.count("odqa: error:") == 1, text[-800:]


@pytest.mark.slow
def test_ask_refuses_a_damaged_passage(index, capsys):
    _in_answered_passage(index)
    code, text = run_cli(["ask", "--index", index, "--retriever", "bm25", "--no-linker", QUERY], capsys)
    assert_clean(code, text)
    assert code == 2 and "passages.arrow" in text, text[-800:]


def test_undamaged_index_answers_and_reads_only_the_blocks_it_needs(index, capsys):
    from odqa.indexes.folder import FolderIndex

    bundle = FolderIndex.open(index)
    hits = built_retriever(bundle, "bm25").search([QUERY], 3)[0]
    assert hits[0].passage.id == "demo-123_0"
    check = bundle.store._check
    assert check is not None and 0 < check._checked.sum() <= check._checked.size
    code, text = run_cli(["verify-index", index], capsys)
    assert code == 0 and "ok" in text, text


def _drop_block_digests(index: Path) -> None:
    """As an index built before block digests (and before manifests carried their own digest) records it: every
    manifest of format 1 (one that claims format 2 without them is refused: tests/reliability/
    test_integrity_parts.py)."""
    from tests.reliability.manifest_edits import as_format_1

    as_format_1(index)


def test_index_built_before_block_digests_is_checked_whole(index, capsys):
    _drop_block_digests(index)
    _in_answered_passage(index)
    code, text = run_cli(["search", "--index", index, "--retriever", "bm25", QUERY], capsys)
    assert_clean(code, text)
    assert code == 2 and "SHA-256" in text and "verify-index" in text, text[-800:]


def test_verify_index_records_the_block_digests_of_an_older_index(index, capsys):
    _drop_block_digests(index)
    code, text = run_cli(["verify-index", index], capsys)
    assert code == 0 and "recorded the block digests" in text, text[-800:]
    parts = json.loads((index / "manifest.json").read_text())["params"]["parts"]
    assert all("blocks" in info for part in parts.values() for info in part["files"].values())
    code, text = run_cli(["search", "--index", index, "--retriever", "bm25", QUERY], capsys)
    assert code == 0 and "demo-123_0" in text and "note:" not in text, text[-800:]
    _in_answered_passage(index)
    code, text = run_cli(["search", "--index", index, "--retriever", "bm25", QUERY], capsys)
    assert code == 2 and "passages.arrow" in text, text[-800:]


@pytest.fixture()
def sidecar_index(demo_index, tmp_path, monkeypatch) -> Path:
    """The demo index recorded as a large index is: 4 KiB blocks, at most 4 digests in the manifest, so that the
    store's and the vectors' block digests lie in sidecar files beside them."""
    monkeypatch.setattr(odqa.indexes.integrity, "MIN_BLOCK", 4096)
    monkeypatch.setattr(odqa.indexes.integrity, "INLINE_BLOCKS", 4)
    return _recorded_copy(demo_index, tmp_path)


def _sidecar(index: Path, part: str, name: str) -> Path:
    return index / part / (name + odqa.indexes.integrity.SIDECAR)


def test_a_large_file_keeps_its_block_digests_beside_it_and_reads_check_only_their_blocks(sidecar_index, capsys):
    from odqa.indexes.integrity import FileCheck, file_reader
    from odqa.indexes.manifest import Manifest

    parts = Manifest.load(sidecar_index).params["parts"]
    record = parts["passages"]["files"]["passages.arrow"]
    assert "xxh3" not in record["blocks"] and _sidecar(sidecar_index, "passages", "passages.arrow").is_file()
    assert not any(
        p.name.endswith(odqa.indexes.integrity.SIDECAR) for p in [Path(f) for f in parts["passages"]["files"]]
    )
    path = sidecar_index / "passages" / "passages.arrow"
    with path.open("rb") as f:
        check = FileCheck(record, file_reader(f), "passages.arrow", "rebuild it", folder=path.parent)
        check.range(5000, 5100)  # inside the second 4 KiB block
        assert check._checked.tolist() == [i == 1 for i in range(len(check._checked))]
    for retriever in ("bm25", "dense"):
        code, text = run_cli(["search", "--index", sidecar_index, "--retriever", retriever, "--k", "3", QUERY], capsys)
        assert code == 0 and "William Shakespeare" in text, text[-800:]


def _damage_sidecar(index: Path) -> None:
    _flip(_sidecar(index, "passages", "passages.arrow"), 70)


def _remove_sidecar(index: Path) -> None:
    _sidecar(index, "dense", "embeddings.npy").unlink()


@pytest.mark.parametrize("damage", ["an answered passage", "a changed sidecar", "a removed sidecar"])
def test_damage_to_a_large_file_or_its_block_digests_is_refused(sidecar_index, tmp_path, capsys, damage):
    change, retriever, named = {
        "an answered passage": (_in_answered_passage, "bm25", "passages.arrow"),
        "a changed sidecar": (_damage_sidecar, "bm25", "passages.arrow"),
        "a removed sidecar": (_remove_sidecar, "dense", "embeddings.npy"),
    }[damage]
    change(sidecar_index)
    argvs = [
        ["search", "--index", sidecar_index, "--retriever", retriever, "--k", "3", QUERY],
        ["verify-index", sidecar_index],
    ]
    for argv in argvs:
        code, text = run_cli(argv, capsys)
        assert_clean(code, text)
        assert code == 2, (argv[0], text[-800:])
        assert named in text and "rebuild" in text and text.count("odqa: error:") == 1, text[-800:]
