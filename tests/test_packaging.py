"""Every file of the package that is not Python is listed in pyproject.toml's package-data, so that the wheel and
the sdist carry it (issue 64 item 1: `odqa serve` crashed from a wheel, its page odqa/serve/static/ left out).
Cheap: the globs are matched here as setuptools matches them; tests/test_wheel.py builds both and looks inside."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = REPO_ROOT / "odqa"


def package_data_globs() -> dict[str, list[str]]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-data"]


def package_files() -> list[str]:
    """The files of the package (paths under odqa/, through the links to the component folders) that are not
    Python: the tracked ones where git can tell (what a build from a clean checkout sees), else those on disk."""
    links = {child.name: child.resolve() for child in PACKAGE.iterdir() if child.is_symlink()}
    tracked = subprocess.run(["git", "ls-files", "-z", "--", "odqa", *(str(t.relative_to(REPO_ROOT)) for t in
                                                                       links.values())],
                             cwd=REPO_ROOT, capture_output=True, text=True)
    if tracked.returncode == 0:
        names = []
        for name in filter(None, tracked.stdout.split("\0")):
            path = REPO_ROOT / name
            if path.is_symlink() or not path.is_file():
                continue
            for link, target in links.items():  # reader/x.json is odqa/reader/x.json in the package
                if target == path.resolve().parent or target in path.resolve().parents:
                    path = PACKAGE / link / path.resolve().relative_to(target)
            names.append(path.relative_to(PACKAGE).as_posix())
    else:
        names = [(Path(folder) / file).relative_to(PACKAGE).as_posix()
                 for folder, dirs, files in os.walk(PACKAGE, followlinks=True) for file in files]
    return sorted(n for n in names if not n.endswith((".py", ".pyc")) and "__pycache__" not in n.split("/"))


def matched(globs: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each glob's files, as setuptools' build_py finds them: relative to its package's folder."""
    found = {}
    for package, patterns in globs.items():
        folder = REPO_ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            found[f"{package}: {pattern}"] = {
                Path(p).relative_to(PACKAGE).as_posix() for p in glob.glob(str(folder / pattern), recursive=True)
                if Path(p).is_file()}
    return found


def test_package_data_lists_every_file_that_is_not_python():
    files = package_files()
    assert {"serve/static/index.html", "serve/static/page.js", "serve/static/page.css", "corpus/open_dev.json",
            "demo/articles.jsonl", "demo/questions.jsonl", "py.typed"} <= set(files), files
    globs = matched(package_data_globs())
    listed = set().union(*globs.values())
    assert not [f for f in files if f not in listed], "not in [tool.setuptools.package-data]"
    assert not [g for g, hits in globs.items() if not hits], "a package-data glob that matches no file"
