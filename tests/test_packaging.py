"""Every file of the package that is not Python is listed in pyproject.toml's package-data, so that the wheel and
the sdist carry it (issue 64 item 1: `odqa serve` crashed from a wheel, its page odqa/serve/static/ left out).
Cheap: the globs are matched here as setuptools matches them; tests/test_wheel.py builds both and looks inside."""

from __future__ import annotations

import glob
import re
import sys
from pathlib import Path

import pytest

from tests.packaging_files import PACKAGE, package_files, project

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent


def package_data_globs() -> dict[str, list[str]]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-data"]


def matched(globs: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each glob's files, as setuptools' build_py finds them: relative to its package's folder."""
    found = {}
    for package, patterns in globs.items():
        folder = REPO_ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            found[f"{package}: {pattern}"] = {
                Path(p).relative_to(PACKAGE).as_posix()
                for p in glob.glob(str(folder / pattern), recursive=True)
                if Path(p).is_file()
            }
    return found


def test_package_data_lists_every_file_that_is_not_python():
    files = package_files()
    assert {
        "serve/static/index.html",
        "serve/static/page.js",
        "serve/static/page.css",
        "corpus/open_dev.json",
        "demo/articles.jsonl",
        "demo/questions.jsonl",
        "py.typed",
    } <= set(files), files
    globs = matched(package_data_globs())
    listed = set().union(*globs.values())
    assert not [f for f in files if f not in listed], "not in [tool.setuptools.package-data]"
    assert not [g for g, hits in globs.items() if not hits], "a package-data glob that matches no file"


def _names(requirements: list[str]) -> set[str]:
    """Distribution names of requirement strings, normalised as pip compares them."""
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


# issue 64 item 10: what serves, talks to a cluster or compares BM25 engines is an extra, never the base install
EXTRAS = {
    "serve": {"fastapi", "uvicorn", "fastapi-offline"},
    "elastic": {"elasticsearch"},
    "bm25-engines": {"bm25s", "rank-bm25"},
    "plot": {"matplotlib"},
    "ray": {"ray"},
}


def test_the_base_install_lists_neither_the_server_nor_elasticsearch_nor_other_bm25_engines():
    base = _names(project()["dependencies"])
    assert not base & set().union(*EXTRAS.values()), base & set().union(*EXTRAS.values())
    assert {"tantivy", "pystemmer", "torch", "transformers"} <= base  # the default BM25 engine and the reader


def test_each_extra_brings_its_part_and_the_test_extra_brings_them_all():
    from odqa.core.optional import PARTS

    extras = project()["optional-dependencies"]
    for extra, names in EXTRAS.items():
        assert _names(extras[extra]) == names, extra
        assert names <= _names(extras["test"]), f"the suite runs {extra}"
    # the one line a missing part prints names an extra that exists
    modules = ("fastapi", "uvicorn", "fastapi_offline", "elasticsearch", "bm25s", "rank_bm25", "matplotlib", "ray")
    for module in modules:
        extra = PARTS[module].install.split("'odqa[", 1)[1].split("]", 1)[0]
        assert extra in extras and module.replace("_", "-") in _names(extras[extra]), module


def test_serve_checks_every_module_its_extra_brings():
    """`odqa serve` checks the modules PARTS files under the serve install line: the same set the extra installs."""
    from odqa.core.optional import SERVE_INSTALL, modules_of

    serve = _names(project()["optional-dependencies"]["serve"])
    assert {m.replace("_", "-") for m in modules_of(SERVE_INSTALL)} == serve


def test_the_readers_stop_words_are_bm25s_english_ones():
    """Held in indexes/bm25.py so that answering needs no bm25s; the bm25s engine uses its own, the same."""
    bm25s_stopwords = pytest.importorskip("bm25s.stopwords")
    from odqa.indexes.bm25 import ENGLISH_STOP_WORDS

    assert ENGLISH_STOP_WORDS == tuple(bm25s_stopwords.STOPWORDS_EN)
