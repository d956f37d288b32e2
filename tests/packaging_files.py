"""What the packaging tests (tests/test_packaging.py, tests/test_wheel.py, tests/test_model_resolution.py) read of
the checkout: the package's files that are not Python, and pyproject.toml's [project] table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PACKAGE = REPO_ROOT / "odqa"


def package_files() -> list[str]:
    """The files of the package (paths under odqa/, through the links to the component folders) that are not
    Python: the tracked ones where git can tell (what a build from a clean checkout sees), else those on disk."""
    links = {child.name: child.resolve() for child in PACKAGE.iterdir() if child.is_symlink()}
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", "odqa", *(str(t.relative_to(REPO_ROOT)) for t in links.values())],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
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
        names = [
            (Path(folder) / file).relative_to(PACKAGE).as_posix()
            for folder, dirs, files in os.walk(PACKAGE, followlinks=True)
            for file in files
        ]
    return sorted(n for n in names if not n.endswith((".py", ".pyc")) and "__pycache__" not in n.split("/"))


def project() -> dict:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]
