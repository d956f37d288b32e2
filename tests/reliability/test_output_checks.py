"""Every output path of every command is checked before any work (issue 26, defect 11): a folder where a file
is expected or a file where a folder is, a file on the way to it, a read-only place. Each ends in one line,
exit 2, naming the flag, with nothing created; the command's inputs (missing here on purpose) are never read."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

from odqa.cli import build_parser, main
from odqa.commands.common import OUTPUTS, check_outputs

# option names that write something, wherever they appear (mine-negatives' --per-question is a count)
OUTPUT_NAMES = {"out", "output", "per_question", "run_out", "predictions", "dev_dir"}


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _declared() -> list[tuple[str, str, bool]]:
    return [
        (name, flag, folder)
        for name, parser in _commands().items()
        for _, flag, folder in parser.get_default(OUTPUTS) or ()
    ]


DECLARED = _declared()


def test_every_output_option_is_declared():
    undeclared = []
    for name, parser in _commands().items():
        declared = {dest for dest, _, _ in parser.get_default(OUTPUTS) or ()}
        for action in parser._actions:
            if action.dest in OUTPUT_NAMES and action.type is None and action.dest not in declared:
                undeclared.append(f"{name} {action.option_strings[0]}")
    assert not undeclared, f"write these through add_output: {undeclared}"
    assert (
        len(DECLARED) >= 19
        and ("index", "--out", True) in DECLARED
        and ("eval-qa", "--per-question", False) in DECLARED
    )


def _argv(command: str, flag: str, value: Path, tmp: Path) -> list[str]:
    """`command` with every other required argument filled: inputs that do not exist (a command that read
    them first would fail on them, not on `flag`), other outputs at good places."""
    parser = _commands()[command]
    outputs = {f for _, f, _ in parser.get_default(OUTPUTS) or ()}
    argv = [command, flag, str(value)]
    for action in parser._actions:
        if action.required and action.option_strings and action.option_strings[0] != flag:
            good = action.option_strings[0] in outputs
            argv += [action.option_strings[0], str(tmp / ("other-output" if good else "missing-input"))]
        elif not action.option_strings and action.nargs in (None, "+"):  # a positional, e.g. search's question
            argv.append("placeholder")
    return argv


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory):
    """A folder nobody may write into: chmod for a normal user; root ignores modes, so there a read-only
    tmpfs (skipped where mounting is not allowed)."""
    folder = tmp_path_factory.mktemp("read-only")
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("running as root without permission to mount a read-only folder")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


CASES = ["file on the way", "file/folder mismatch", "read-only place"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command,flag,folder", DECLARED, ids=[f"{c} {f}" for c, f, _ in DECLARED])
def test_bad_output_is_refused_before_any_work(command, flag, folder, case, tmp_path, read_only_dir, capsys):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00" * 10)
    (tmp_path / "a-folder").mkdir()
    bad = {
        "file on the way": blob / "out",
        "file/folder mismatch": blob if folder else tmp_path / "a-folder",
        "read-only place": read_only_dir / "out",
    }[case]
    before = _tree(tmp_path), _tree(read_only_dir)
    code = main(_argv(command, flag, bad, tmp_path))
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith(f"odqa: error: {flag} {bad}"), err
    assert "Traceback" not in out + err
    assert (_tree(tmp_path), _tree(read_only_dir)) == before  # nothing created, nothing left behind


@pytest.mark.parametrize("command,flag,folder", DECLARED, ids=[f"{c} {f}" for c, f, _ in DECLARED])
def test_good_outputs_pass_the_check_and_create_nothing(command, flag, folder, tmp_path):
    existing = tmp_path / "exists"
    existing.mkdir() if folder else existing.write_text("old")
    for good in (tmp_path / "new" / "deeper" / "out", existing):
        args = build_parser().parse_args(_argv(command, flag, good, tmp_path))
        before = _tree(tmp_path)
        check_outputs(args)
        assert _tree(tmp_path) == before
