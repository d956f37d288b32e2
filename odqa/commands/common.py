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


def print_json_last(metrics: dict[str, Any]) -> None:
    """The machine-readable contract: one JSON object alone on the last output line."""
    sys.stdout.flush()
    print(json.dumps(metrics, ensure_ascii=False), flush=True)
