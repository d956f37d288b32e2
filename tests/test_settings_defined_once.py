"""Each setting's default is defined once, in its settings class (reader.settings.ReaderSettings,
linker.settings.LinkerSettings, retriever.settings.RetrievalConfig): a library function that takes a setting by
its name takes it without a literal number or flag as its default (None or "", "the settings' value", is
allowed), so no path reads with another value than the config says."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from odqa.linker.settings import LinkerSettings
from odqa.reader.settings import RECORDED_SETTINGS, ReaderSettings
from odqa.retriever.settings import RetrievalConfig

PACKAGE = Path(__file__).resolve().parents[1] / "odqa"
# names that mean another thing at each call site: a batch of questions, of windows or of rows; a flag saying
# whether a command takes retriever options
OTHER_MEANINGS = {"batch_size", "retriever"}
SETTINGS = (
    {f.name for owner in (ReaderSettings, LinkerSettings, RetrievalConfig) for f in dataclasses.fields(owner)}
    - set(RECORDED_SETTINGS)
    - OTHER_MEANINGS
)


def literal_defaults(source: str) -> list[tuple[int, str, str, object]]:
    """(line, function, parameter, default) of each parameter named like a setting with a literal default."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            # a number or a flag; a text default ("") says "unset", as None does
            if arg.arg in SETTINGS and isinstance(default, ast.Constant) and isinstance(default.value, (int, float)):
                found.append((node.lineno, node.name, arg.arg, default.value))
    return found


def test_the_check_finds_a_literal_default_and_lets_none_pass():
    source = "def read(q, top_n=5, *, retrieval_weight=0.0, focus_words=None, batch_size=8, fusion=''): ...\n"
    assert [(name, value) for _, _, name, value in literal_defaults(source)] == [
        ("top_n", 5),
        ("retrieval_weight", 0.0),
    ]


def test_no_library_function_gives_a_setting_a_default_of_its_own():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {function}({name}={value!r})"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, function, name, value in literal_defaults(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "defaults defined twice (take the settings object instead):\n" + "\n".join(offenders)
