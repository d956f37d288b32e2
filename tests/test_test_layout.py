"""A test module imports no other test module: what tests share lives in helper modules (tests/retrieval_cli.py,
tests/reliability/cli_checks.py, ...), so that collecting one test file never runs another's module code, a
helper's users are found by name, and a test file can be renamed or deleted without breaking others."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(source: str) -> list[str]:
    """The dotted names of the modules `source` imports, at any depth (imports inside functions count)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.append(base)
            # `from tests import test_x` and `from . import test_x` name the test module as the imported name
            names += [f"{base}.{alias.name}" for alias in node.names if not node.module or node.module == "tests"]
    return names


def imported_test_modules(source: str) -> list[str]:
    """Those of `imported_modules` that are test modules of this suite (a last part named test_*)."""
    return [
        name
        for name in imported_modules(source)
        if name.startswith(("tests.", ".")) and name.rsplit(".", 1)[-1].startswith("test_")
    ]


def test_the_check_finds_each_way_of_importing_a_test_module():
    sources = [
        "from tests.test_packaging import project",
        "import tests.reliability.test_faults",
        "def f():\n    from tests.reliability.test_faults import run_cli\n",
        "from tests import test_packaging",
        "from .test_faults import run_cli",
    ]
    for source in sources:
        assert imported_test_modules(source), source
    assert not imported_test_modules("from tests.reliability.cli_checks import run_cli\nimport pytest\n")


def test_no_test_module_imports_another():
    offenders = {
        path.relative_to(TESTS).as_posix(): found
        for path in sorted(TESTS.rglob("test_*.py"))
        if (found := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert not offenders, f"move what they share into a helper module (not named test_*): {offenders}"
