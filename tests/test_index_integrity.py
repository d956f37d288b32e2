"""Issue 26: an index folder stays whole and trustworthy (parts checked against each other, crash-safe swap,
one writer, encoder weights, read-only use, duplicate ids, reproducible BM25 ties)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from odqa.core.errors import DataFormatError, IndexMismatchError, OdqaError
from odqa.corpus import iter_passages
from odqa.indexes.folder import FolderIndex
from odqa.indexes.integrity import build_lock, recover_swap
from odqa.indexing import IndexSpec, build_index
from tests.retrievers import built_retriever

DOCS = [
    {"id": str(i), "title": f"Doc {i}", "text": f"Document number {i} talks about topic {i} and nothing else."}
    for i in range(7)
]
OTHER = [
    {"id": f"o{i}", "title": f"Other {i}", "text": f"Another text {i} about rivers and mountains."} for i in range(7)
]


def write_corpus(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


@pytest.fixture()
def corpus(tmp_path):
    return write_corpus(tmp_path / "c.jsonl", DOCS)


def bm25_index(corpus, out):
    build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["bm25"]))
    return out


# ---- 1: parts checked against each other -------------------------------------------------------------
def test_a_passage_store_from_another_index_is_refused(corpus, tmp_path):
    a = bm25_index(corpus, tmp_path / "a")
    b = bm25_index(write_corpus(tmp_path / "o.jsonl", OTHER), tmp_path / "b")
    shutil.copy(b / "passages" / "passages.arrow", a / "passages" / "passages.arrow")
    with pytest.raises(IndexMismatchError, match="passages"):
        built_retriever(FolderIndex.open(a), "bm25").search(["topic 3"], 3)
    with pytest.raises(IndexMismatchError):
        FolderIndex.open(a).verify()


def test_embeddings_from_another_index_or_with_fewer_rows_are_refused(corpus, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    build_index(IndexSpec(corpus=str(corpus), out=str(a), backends=["dense"], encoder="minilm"))
    build_index(
        IndexSpec(
            corpus=str(write_corpus(tmp_path / "o.jsonl", OTHER)), out=str(b), backends=["dense"], encoder="minilm"
        )
    )
    good = np.load(a / "dense" / "embeddings.npy")
    shutil.copy(b / "dense" / "embeddings.npy", a / "dense" / "embeddings.npy")  # same shape, other vectors
    with pytest.raises(IndexMismatchError, match="dense"):
        built_retriever(FolderIndex.open(a), "dense")
    np.save(a / "dense" / "embeddings.npy", good[:5])  # fewer rows than passages
    with pytest.raises(IndexMismatchError, match="dense"):
        built_retriever(FolderIndex.open(a), "dense")
    np.save(a / "dense" / "embeddings.npy", good)
    assert FolderIndex.open(a).verify()[-1].startswith("dense: 7 x 384")


def test_verify_index_command(corpus, tmp_path, capsys):
    from odqa.cli import main

    a = bm25_index(corpus, tmp_path / "a")
    assert main(["verify-index", str(a)]) == 0
    assert "ok" in capsys.readouterr().out
    with (a / "passages" / "passages.arrow").open("r+b") as f:  # one flipped byte deep inside: full check only
        f.seek(600)
        byte = f.read(1)
        f.seek(600)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert main(["verify-index", str(a)]) == 2
    assert "odqa: error: index part a/passages" in capsys.readouterr().err


# ---- 2 and 12: the swap ------------------------------------------------------------------------------
def _crash_build(corpus, out, stage):
    code = (
        "import sys; from odqa.indexing import IndexSpec, build_index; "
        f"build_index(IndexSpec(corpus={str(corpus)!r}, out={str(out)!r}, backends=['bm25']), crash_after={stage!r})"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode


@pytest.mark.subprocess
@pytest.mark.parametrize("stage", ["fsync", "rename-away"])
def test_a_crash_inside_the_swap_is_recovered_on_the_next_open(corpus, tmp_path, stage):
    out = bm25_index(write_corpus(tmp_path / "o.jsonl", OTHER), tmp_path / "idx")
    assert _crash_build(corpus, out, stage) == 137
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".idx.") and "lock" not in p.name]
    assert leftovers  # the crash left half a swap behind
    bundle = FolderIndex.open(out)
    titles = {h.passage.title for h in built_retriever(bundle, "bm25").search(["document topic"], 3)[0]}
    assert titles <= {d["title"] for d in DOCS} if stage == "rename-away" else titles <= {d["title"] for d in OTHER}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".idx.") and "lock" not in p.name]


def test_recover_swap_puts_back_the_old_index_when_the_new_one_is_unfinished(tmp_path):
    old = tmp_path / ".idx.old-999999999"
    (old).mkdir()
    (old / "manifest.json").write_text("{}")
    (tmp_path / ".idx.building-999999998").mkdir()  # no manifest: unfinished
    assert "previous index" in recover_swap(tmp_path / "idx")
    assert (tmp_path / "idx" / "manifest.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_a_symlinked_out_keeps_its_link_and_updates_its_target(corpus, tmp_path):
    real = tmp_path / "real"
    (tmp_path / "link").symlink_to(real)
    bm25_index(corpus, tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and (real / "manifest.json").exists()
    bm25_index(write_corpus(tmp_path / "o.jsonl", OTHER), tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert FolderIndex.open(tmp_path / "link").store.get(0).title == "Other 0"


# ---- 5: one writer -----------------------------------------------------------------------------------
def test_a_second_writer_is_refused(corpus, tmp_path):
    out = tmp_path / "idx"
    with build_lock(out):
        with pytest.raises(OdqaError, match="another build is writing"):
            build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["bm25"]))
    assert build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["bm25"])).finished


# ---- 4: encoder weights ------------------------------------------------------------------------------
def test_an_encoder_retrained_in_place_is_refused_unless_accepted(corpus, tmp_path):
    from safetensors.numpy import load_file, save_file

    from odqa.core.models import resolve_model

    encoder = tmp_path / "enc"
    shutil.copytree(resolve_model("minilm"), encoder)
    out = tmp_path / "idx"
    build_index(IndexSpec(corpus=str(corpus), out=str(out), backends=["dense"], encoder=str(encoder)))
    built_retriever(FolderIndex.open(out), "dense")  # same weights: fine
    weights = load_file(encoder / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] * 1.01  # "retrained" under the same name
    save_file(weights, encoder / "model.safetensors")
    with pytest.raises(IndexMismatchError, match="other weights"):
        built_retriever(FolderIndex.open(out), "dense")
    assert built_retriever(FolderIndex.open(out), "dense", accept_encoder_change=True) is not None


# ---- 6: read-only ------------------------------------------------------------------------------------
def _search_script(index) -> str:
    """Python that prints the title of the best BM25 hit for 'topic 3' in `index` (run from the checkout)."""
    return (
        "from odqa.indexes.folder import FolderIndex; from tests.retrievers import built_retriever; "
        f"print(built_retriever(FolderIndex.open('{index}'), 'bm25').search(['topic 3'], 1)[0][0].passage.title)"
    )


@pytest.mark.subprocess
def test_bm25_searches_a_read_only_index(corpus, tmp_path):
    out = bm25_index(corpus, tmp_path / "idx")
    for p in (out / "bm25").glob(".tantivy-*.lock"):
        p.unlink()  # as on a read-only copy that never had them
    view = tmp_path / "ro"
    view.mkdir()
    script = (
        f"mount --bind {out} {view} && mount -o remount,ro,bind {view} && touch {view}/x 2>/dev/null; "
        f'test ! -e {view}/x && {sys.executable} -c "{_search_script(view)}"'
    )
    if os.geteuid() == 0:
        run = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True)
        if "Operation not permitted" in run.stderr or "unshare:" in run.stderr:
            pytest.skip("cannot mount a read-only view here")
    else:
        os.chmod(out / "bm25", 0o555)
        run = subprocess.run([sys.executable, "-c", _search_script(out)], capture_output=True, text=True)
        os.chmod(out / "bm25", 0o755)
    assert run.returncode == 0, run.stderr[-500:]
    assert run.stdout.strip() == "Doc 3"


# ---- 7: document ids ---------------------------------------------------------------------------------
def test_duplicate_and_empty_document_ids_are_refused_with_their_lines(tmp_path):
    dup = write_corpus(tmp_path / "d.jsonl", [DOCS[0], DOCS[1], {**DOCS[2], "id": "0"}])
    with pytest.raises(DataFormatError, match=r"d.jsonl:3: document id '0' was already used at .*d.jsonl:1"):
        list(iter_passages(dup))
    empty = write_corpus(tmp_path / "e.jsonl", [DOCS[0], {**DOCS[1], "id": " "}])
    with pytest.raises(DataFormatError, match=r"e.jsonl:2: the document has an empty id"):
        list(iter_passages(empty))


# ---- 14: BM25 ties -----------------------------------------------------------------------------------
def test_bm25_ties_are_ordered_by_row(tmp_path):
    docs = [{"id": f"t{i}", "title": "Same", "text": "the very same words in every document"} for i in range(40)]
    out = bm25_index(write_corpus(tmp_path / "t.jsonl", docs), tmp_path / "idx")
    hits = built_retriever(FolderIndex.open(out), "bm25").search(["same words"], 10)[0]
    assert [h.row for h in hits] == list(range(10))
    assert len({h.score for h in hits}) == 1
