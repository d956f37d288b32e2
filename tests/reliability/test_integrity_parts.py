"""An index made of parts is served only as the parts it was built with (issue 65), and a manifest is held to
what its format promises.

1. A sharded index (`index --shards N`) records each shard by its manifest's digest and its rows: two shards
   swapped, or one replaced by the same-numbered shard of another build (or the BM25 join of its shards replaced
   by another build's), are refused by `search` and by `verify-index` in one line naming the part and the fix;
   the rebuild it names really repairs the index, never keeping a shard that is not the one it built there.
2. A manifest edited to look older (its digest, its parts' records or their block digests deleted, or its format
   number lowered) is refused in one line naming what is missing and the fix, instead of being served with its
   checks off. A knowledge base's manifest likewise.
BM25-only indexes of a few documents: cheap to build.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from odqa.cli import main
from tests.reliability.cli_checks import assert_clean, jsonl, run_cli
from tests.reliability.manifest_edits import as_format_1, edit_manifest
from tests.retrievers import built_retriever

QUERY = "subject3 shared"


def _docs(prefix: str, words: str, first: int, n: int) -> list[dict]:
    return [
        {
            "id": f"{prefix}{i}",
            "title": f"{prefix} title {i}",
            "text": f"Passage {i} of {words} is about subject{i} and shared words.",
        }
        for i in range(first, first + n)
    ]


def _corpus(folder: Path, prefix: str) -> Path:
    """Two files: the shards differ in size, so a swap moves every row after the first shard."""
    folder.mkdir(parents=True)
    jsonl(folder / "a.jsonl", _docs(prefix, "the first file", 0, 4))
    jsonl(folder / "b.jsonl", _docs(prefix, "the second file", 4, 7))
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A sharded BM25 index of corpus `a`, another of corpus `b` (same layout, other passages), and a BM25 index
    built in one piece."""
    root = tmp_path_factory.mktemp("parts")
    corpus_a, corpus_b = _corpus(root / "corpus-a", "a"), _corpus(root / "corpus-b", "b")
    for corpus, out in ((corpus_a, root / "sharded-a"), (corpus_b, root / "sharded-b")):
        assert main(["index", "--corpus", str(corpus), "--out", str(out), "--shards", "2", "--backends", "bm25"]) == 0
    assert main(["index", "--corpus", str(corpus_a), "--out", str(root / "whole"), "--backends", "bm25"]) == 0
    return root


def _copy(built: Path, name: str, tmp_path: Path) -> Path:
    copy = tmp_path / name
    shutil.copytree(built / name, copy)
    return copy


@pytest.fixture()
def sharded(built, tmp_path) -> Path:
    return _copy(built, "sharded-a", tmp_path)


@pytest.fixture()
def whole(built, tmp_path) -> Path:
    return _copy(built, "whole", tmp_path)


def _hits(index: Path) -> list[tuple[str, str]]:
    """(id, text) of the top hits: a passage's id names its text, so a hit of a swapped shard shows."""
    from odqa.indexes.folder import FolderIndex

    return [
        (h.passage.id, h.passage.text) for h in built_retriever(FolderIndex.open(index), "bm25").search([QUERY], 5)[0]
    ]


def _names_its_text(pid: str, text: str) -> bool:
    """Passage `a3_0` is the first of document a3, whose text begins "Passage 3 "."""
    return text.startswith(f"Passage {pid.rsplit('_', 1)[0][1:]} ")


def _refused(index: Path, capsys, named: str) -> None:
    for argv in (["search", "--index", index, "--retriever", "bm25", "--k", "3", QUERY], ["verify-index", index]):
        code, text = run_cli(argv, capsys)
        assert_clean(code, text)
        assert code == 2, (argv[0], text[-800:])
        assert text.count("odqa: error:") == 1 and len(text.strip().splitlines()) == 1, text[-800:]
        assert named in text and "rebuild" in text, (argv[0], text[-800:])


# ---- 1: the parts of a sharded index are the ones it was built with ------------------------------------
def test_an_untouched_sharded_index_answers_and_verifies(sharded, capsys):
    hits = _hits(sharded)
    assert hits[0][0].startswith("a3_") and all(_names_its_text(pid, text) for pid, text in hits), hits
    code, text = run_cli(["verify-index", sharded], capsys)
    assert code == 0 and text.strip().endswith("ok"), text[-800:]


def _swap_shards(index: Path, built: Path) -> None:
    shards = index / "shards"
    (shards / "000").rename(shards / "tmp")
    (shards / "001").rename(shards / "000")
    (shards / "tmp").rename(shards / "001")


def _shard_of_another_build(index: Path, built: Path) -> None:
    """shards/001 of the build of corpus `b`: the same files' layout, other passages."""
    shutil.rmtree(index / "shards" / "001")
    shutil.copytree(built / "sharded-b" / "shards" / "001", index / "shards" / "001")


def _join_of_another_build(index: Path, built: Path) -> None:
    """bm25/ (the shards' segments joined) of the build of corpus `b`."""
    shutil.rmtree(index / "bm25")
    shutil.copytree(built / "sharded-b" / "bm25", index / "bm25")


SHARD_DAMAGE = {  # (the damage, what the refusal names)
    "two shards swapped": (_swap_shards, "shards/000"),
    "a shard of another build": (_shard_of_another_build, "shards/001"),
    "the BM25 join of another build": (_join_of_another_build, "bm25"),
}


@pytest.mark.parametrize("damage", list(SHARD_DAMAGE))
def test_a_part_that_is_not_the_one_recorded_is_refused(sharded, built, capsys, damage):
    change, named = SHARD_DAMAGE[damage]
    change(sharded, built)
    _refused(sharded, capsys, named)


def _rebuild(sharded: Path, built: Path, capsys) -> str:
    """The rebuild the refusals name; what it printed. Then the index answers with passage `a3` first, every hit
    of corpus `a` and naming its own text, and verifies."""
    code, text = run_cli(
        ["index", "--corpus", built / "corpus-a", "--out", sharded, "--shards", "2", "--backends", "bm25"], capsys
    )
    assert code == 0, text[-800:]
    hits = _hits(sharded)
    assert hits[0][0].startswith("a3_") and all(
        pid.startswith("a") and _names_its_text(pid, text) for pid, text in hits
    ), hits
    code, verified = run_cli(["verify-index", sharded], capsys)
    assert code == 0, verified[-800:]
    return text


REBUILT = {  # (the damage, the shards a rerun keeps)
    "two shards swapped": (_swap_shards, 0),
    "a shard of another build": (_shard_of_another_build, 1),
    "the BM25 join of another build": (_join_of_another_build, 2),
    "its manifest's digest deleted": (lambda index, built: edit_manifest(index / "manifest.json", _drop_digest), 2),
}


@pytest.mark.parametrize("damage", list(REBUILT))
def test_the_rebuild_the_refusal_names_repairs_the_index(sharded, built, capsys, damage):
    """A rerun keeps a shard only where it is the very one it built there (its manifest's digest, recorded
    beside it), so a shard swapped in or copied from another build is built again, not blessed."""
    change, kept = REBUILT[damage]
    change(sharded, built)
    text = _rebuild(sharded, built, capsys)
    assert text.count("kept") == kept, text[-800:]


@pytest.mark.parametrize("swapped", [False, True], ids=["as built", "then swapped"])
def test_an_index_built_before_shard_records_gets_them_from_a_rerun(sharded, built, capsys, swapped):
    """A sharded index of before the shard records (and of source keys without its shards' digests) is refused
    until a rerun records them: one that keeps the shards each of which says it is that part of the corpus."""
    edit_manifest(sharded / "manifest.json", _drop_shard_records)
    for key in (sharded / "shards").glob("*.source.json"):
        record = json.loads(key.read_text())
        record.pop("manifest", None)
        key.write_text(json.dumps(record))
    if swapped:
        _swap_shards(sharded, built)
    _refused(sharded, capsys, "record of its shards")
    text = _rebuild(sharded, built, capsys)
    assert text.count("kept") == (0 if swapped else 2), text[-800:]


# ---- 2: a manifest says what it promises; missing promises are damage ----------------------------------


def _drop_digest(m):
    m.pop("digest")


def _drop_parts(m):
    m["params"].pop("parts")


def _drop_blocks(m):
    for part in m["params"]["parts"].values():
        for info in part["files"].values():
            info.pop("blocks")
            break


def _look_older(m):
    """As a format-1 index (before parts, block digests and the manifest's own digest) would read."""
    m["format_version"] = 1
    m.pop("digest")
    m["params"].pop("parts")


def _drop_shard_records(m):
    m["params"].pop("shard_records", None)  # (an index of before the records has none)


BUNDLE_FIELDS = {  # (the edit, what the refusal names)
    "its own digest": (_drop_digest, "digest"),
    "the record of its parts": (_drop_parts, "parts"),
    "a file's block digests": (_drop_blocks, "block digests"),
    "the format number lowered": (_look_older, "format"),
}


@pytest.mark.parametrize("field", list(BUNDLE_FIELDS))
def test_a_bundle_manifest_missing_a_promised_field_is_refused(whole, capsys, field):
    change, named = BUNDLE_FIELDS[field]
    edit_manifest(whole / "manifest.json", change)
    _refused(whole, capsys, named)


SHARDED_FIELDS = {
    **BUNDLE_FIELDS,
    "the record of its shards": (_drop_shard_records, "shards"),
    "a shard's own digest": (None, "digest"),
}


@pytest.mark.parametrize("field", list(SHARDED_FIELDS))
def test_a_sharded_manifest_missing_a_promised_field_is_refused(sharded, capsys, field):
    change, named = SHARDED_FIELDS[field]
    if change is None:
        edit_manifest(sharded / "shards" / "001" / "manifest.json", _drop_digest)
    else:
        edit_manifest(sharded / "manifest.json", change)
    _refused(sharded, capsys, named)


def test_an_older_format_without_those_fields_is_still_served(whole, capsys):
    """A genuine format-1 index (every manifest format 1, no digests of its own, no block digests) is served, its
    files checked whole against their SHA-256, as docs/indexing.md says; verify-index records its block digests."""
    as_format_1(whole)
    code, text = run_cli(["search", "--index", whole, "--retriever", "bm25", "--k", "3", QUERY], capsys)
    assert code == 0 and "a3" in text and "SHA-256" in text, text[-800:]
    code, text = run_cli(["verify-index", whole], capsys)
    assert code == 0 and "recorded the block digests" in text, text[-800:]


# ---- the knowledge base: its manifest is held to its format too -----------------------------------------
def _write_kb(out: Path, seed: int) -> Path:
    """A KB of 6 entities with random 8-d vectors (`seed`): no encoder needed."""
    from odqa.linker.kb import KBEntry, KnowledgeBase

    entries = [
        KBEntry(
            id=f"e{i}",
            title=f"Entity {i}",
            description=f"Entity {i} is a thing.",
            aliases=(f"E{i}",),
            doc_id=f"d{i}",
            length=10 * i,
        )
        for i in range(6)
    ]
    vectors = np.random.default_rng(seed).standard_normal((6, 8)).astype(np.float32)
    KnowledgeBase.write(entries, vectors, out, encoder="minilm", dim=8)
    return out


@pytest.fixture()
def kb(tmp_path) -> Path:
    return _write_kb(tmp_path / "kb", seed=0)


def _drop_kb_blocks(m):
    for info in m["params"]["files"].values():
        info.pop("blocks")


def _other_vectors(kb: Path) -> None:
    """The vectors part of another KB of the same entities: its manifest and vectors are recorded otherwise."""
    other = _write_kb(kb.parent / "other-kb", seed=1)
    shutil.rmtree(kb / "vectors")
    shutil.copytree(other / "vectors", kb / "vectors")


KB_DAMAGE = {
    "its own digest": (lambda kb: edit_manifest(kb / "manifest.json", _drop_digest), "digest"),
    "its files' block digests": (lambda kb: edit_manifest(kb / "manifest.json", _drop_kb_blocks), "block digests"),
    "the vectors of another KB": (_other_vectors, "vectors/"),
}


@pytest.mark.parametrize("damage", list(KB_DAMAGE))
def test_a_kb_manifest_missing_a_promised_field_or_part_is_refused(kb, damage):
    from odqa.core.errors import IndexMismatchError
    from odqa.linker.kb import KnowledgeBase

    KnowledgeBase.load(kb)  # whole before the damage
    change, named = KB_DAMAGE[damage]
    change(kb)
    with pytest.raises(IndexMismatchError) as refused:
        KnowledgeBase.load(kb)
    message = str(refused.value)
    assert named in message and "build-kb" in message and "\n" not in message, message
