"""The query path reads in short functions: no function of the library a question passes through (the pipeline,
the shell, the server, the reader, the retriever, the linker, the indexes; their `training/` apart) runs over
LIMIT lines, so each seam stays small enough to read and replace."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "odqa"
QUERY_PATH = ["pipeline.py", "shell.py", "serve", "reader", "retriever", "linker", "indexes"]
LIMIT = 100


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function longer than `limit` lines."""
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def _query_path_files() -> list[Path]:
    files = []
    for part in QUERY_PATH:
        path = PACKAGE / part
        found = [path] if path.is_file() else sorted(path.resolve().rglob("*.py"))
        files += [f for f in found if "training" not in f.parts]
    return files


def test_the_check_measures_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions(f"def long():\n{body}\n", LIMIT) == [("long", 1, LIMIT + 1)]
    assert long_functions("def short():\n    return 1\n", LIMIT) == []


def test_no_query_path_function_is_over_the_limit():
    files = _query_path_files()
    assert len(files) > 30  # the folders were found (the components are links to the top-level folders)
    found = [
        f"{path.name}:{line} {name} ({length} lines)"
        for path in files
        for name, line, length in long_functions(path.read_text(encoding="utf-8"), LIMIT)
    ]
    assert not found, "split these:\n" + "\n".join(found)
