"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def add_command(subparsers, name: str, help: str, example: str, func) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        name, help=help, description=help, epilog=f"Example:\n  {example}", formatter_class=HelpFormatter
    )
    parser.set_defaults(func=func)
    return parser


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML/YAML config file; flags given here override it")


def check_output(path, flag: str) -> None:
    """Refuse an output path that cannot be written before any work starts, so no result is lost at the end."""
    import os
    from pathlib import Path

    from odqa.core.errors import OdqaError

    if not path:
        return
    path = Path(path)
    if path.is_dir():
        raise OdqaError(f"{flag} {path} is a folder; name a file to write")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OdqaError(f"{flag} {path}: {folder} is a file, not a folder; choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OdqaError(f"{flag} {path}: cannot write into {folder}; choose a writable place")


def print_json_last(metrics: dict[str, Any]) -> None:
    """The machine-readable contract: one JSON object alone on the last output line."""
    sys.stdout.flush()
    print(json.dumps(metrics, ensure_ascii=False), flush=True)
