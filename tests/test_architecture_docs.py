"""docs/architecture.md's copy of the import contracts is pyproject.toml's (what `lint-imports` checks): a contract
changed in one place and not the other fails here, both parsed as TOML."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
HEADING = "## The contracts (`pyproject.toml`)"


def documented_contracts() -> dict:
    """The `[tool.importlinter]` table of the TOML block under the contracts heading of docs/architecture.md."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert HEADING in text, f"docs/architecture.md has no section {HEADING!r}"
    after = text.split(HEADING, 1)[1]
    block = after.split("```toml\n", 1)[1].split("\n```", 1)[0]
    return tomllib.loads(block)["tool"]["importlinter"]


def test_the_documented_contracts_are_pyprojects():
    with (REPO / "pyproject.toml").open("rb") as f:
        configured = tomllib.load(f)["tool"]["importlinter"]
    assert documented_contracts() == configured


def test_every_package_of_the_layers_table_is_in_a_layer():
    """The layers table above the copy names the same packages as the `layers` contract."""
    contracts = {c["id"]: c for c in documented_contracts()["contracts"]}
    layered = {name.strip() for layer in contracts["layers"]["layers"] for name in layer.replace("|", ":").split(":")}
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("| layer | packages |", 1)[1].split("\n\n", 1)[0]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`(odqa[\w.]*)`", row.split("|")[2])}
    assert named == layered
