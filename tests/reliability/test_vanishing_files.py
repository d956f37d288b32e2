"""A failed index build tidies a folder in which a library's worker threads still delete their own temporary files
(tantivy after a full disk stopped its commit): a file that vanishes while the folder is tidied is no error of the
user's, so the build reports the full disk, never "<temporary file>: not found"."""

from __future__ import annotations

import os

import pytest

from odqa.core.atomic import remove_tree, tree_bytes
from odqa.indexes.layout import IndexLayout
from odqa.indexing import _drop_unfinished

_real_unlink = os.unlink


def _vanishing(name: str):
    """os.unlink as if another thread removed `name` just before this one did."""

    def unlink(path, *args, **kwargs):
        if os.fsdecode(path).endswith(name):
            _real_unlink(path, *args, **kwargs)
        return _real_unlink(path, *args, **kwargs)

    return unlink


def _tree(root):
    (root / "seg").mkdir(parents=True)
    (root / ".tmpab12cd").write_bytes(b"x" * 10)
    (root / "seg" / "a.idx").write_bytes(b"y" * 20)
    return root


def test_a_file_that_vanishes_while_the_folder_is_removed_is_no_error(tmp_path, monkeypatch):
    root = _tree(tmp_path / "building")
    monkeypatch.setattr(os, "unlink", _vanishing(".tmpab12cd"))
    remove_tree(root)
    assert not root.exists()


def test_any_other_error_while_removing_is_raised(tmp_path, monkeypatch):
    root = _tree(tmp_path / "building")

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", os.fsdecode(path))

    monkeypatch.setattr(os, "unlink", refused)
    with pytest.raises(PermissionError):
        remove_tree(root)
    monkeypatch.undo()
    assert (root / "seg" / "a.idx").exists()


def test_removing_a_missing_folder_does_nothing(tmp_path):
    remove_tree(tmp_path / "never-made")
    assert list(tmp_path.iterdir()) == []


def test_tree_bytes_counts_files_only(tmp_path):
    assert tree_bytes(_tree(tmp_path / "t")) == 30


def test_a_failed_build_keeps_its_finished_passages_though_a_temporary_file_vanishes(tmp_path, monkeypatch):
    work = IndexLayout(tmp_path / "idx").work
    work.passages.mkdir(parents=True)
    (work.passages / "data.arrow").write_bytes(b"p" * 100)
    work.source_key.write_text("{}")
    _tree(work.root / ".bm25.building-123")  # the BM25 build that failed, its writer's threads still tidying
    monkeypatch.setattr(os, "unlink", _vanishing(".tmpab12cd"))
    kept = _drop_unfinished(work)
    assert sorted(p.name for p in work.root.iterdir()) == ["passages", "passages.source.json"]
    assert kept == 102
