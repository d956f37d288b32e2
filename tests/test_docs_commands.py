"""Every `run_qa.py` / `odqa` command in the README, docs/ and the model cards names a command and flags that
exist, with the arguments each requires (argparse, not run): a renamed flag cannot leave a dead command behind."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from odqa.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "models").glob("*/README.md"))]
COMMAND = re.compile(r"(?:^|\s)(?:python\s+run_qa\.py|odqa)\s+(\S.*)$")


def shell_blocks(text: str):
    inside, lang, lines = False, "", []
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if inside and lang in ("bash", "sh", ""):
                yield "\n".join(lines)
            inside, lang, lines = not inside, line.strip()[3:].strip(), []
        elif inside:
            lines.append(line)


def documented_commands():
    for doc in DOCUMENTS:
        for block in shell_blocks(doc.read_text(encoding="utf-8")):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                found = COMMAND.search(line.strip())
                if not found or line.strip().startswith("#"):
                    continue
                command = re.sub(r"\$\([^)]*\)", "", found.group(1))  # a shell substitution adds optional flags
                command = re.split(r"\s+#\s|\s*(?:\||&&|;|>)\s*", command)[0]  # comments, pipes, redirections
                yield pytest.param(shlex.split(command), id=f"{doc.relative_to(REPO)}: {command[:60]}")


COMMANDS = list(documented_commands())


def test_the_documents_hold_commands():
    assert len(COMMANDS) >= 50


@pytest.mark.parametrize("argv", COMMANDS)
def test_a_documented_command_parses(argv, capsys):
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err[-600:]


def test_the_readmes_example_outputs_are_the_ones_bench_readme_outputs_writes():
    """README outputs come from running its examples (issue 77: a comment said 0.34 where the code printed 0.45):
    every example with an output block is found by bench/readme_outputs.py, which fills each one; no output is
    written by hand beside an example without the marker."""
    import importlib.util

    from tests.conftest import REPO_ROOT

    spec = importlib.util.spec_from_file_location("readme_outputs", REPO_ROOT / "bench" / "readme_outputs.py")
    assert spec is not None and spec.loader is not None
    readme_outputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_outputs)
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    examples = list(readme_outputs._EXAMPLE.finditer(text))
    assert len(examples) == text.count(readme_outputs.MARKER) >= 3
    assert all(example["out"].strip() for example in examples)  # filled by the script, not left empty
    assert not re.search(r"print\(.*\)\s+#\s*[A-Z][a-z]+ [A-Z][a-z]+ \d\.\d\d", text)  # no hand-written output
    assert readme_outputs.without_timings("  time: link 1 ms\n") == readme_outputs.without_timings("  time: x\n")
