"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        # None is "not given" (a config override, an optional path) and "" is "empty" (the help says what either
        # means): "(default: None)" and "(default: )" would say nothing
        if action.default is None or (isinstance(action.default, str) and not action.default):
            return action.help
        return super()._get_help_string(action)


def add_command(subparsers, name: str, help: str, example: str, func) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        name, help=help, description=help, epilog=f"Example:\n  {example}", formatter_class=HelpFormatter
    )
    parser.set_defaults(func=func)
    chatter = parser.add_mutually_exclusive_group()
    chatter.add_argument("-q", "--quiet", action="store_true",
                         help="odqa's notes on standard error: warnings and errors only")
    chatter.add_argument("-v", "--verbose", action="store_true", help="debug messages too, on standard error")
    return parser


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML/YAML config file; flags given here override it")


OUTPUTS = "outputs_to_check"  # parser default: (dest, flag, is_folder) of every output argument


def add_output(parser: argparse.ArgumentParser, *flags: str, folder: bool = False, **kwargs) -> argparse.Action:
    """An argument naming a file (`folder=True`: a folder) the command writes. The CLI checks every declared
    output with `check_output` before the command starts, so a bad path costs no work and loses no result."""
    action = parser.add_argument(*flags, **kwargs)
    declared = parser.get_default(OUTPUTS) or ()
    parser.set_defaults(**{OUTPUTS: (*declared, (action.dest, action.option_strings[0], folder))})
    return action


def check_outputs(args: argparse.Namespace) -> None:
    for dest, flag, folder in getattr(args, OUTPUTS, None) or ():
        check_output(getattr(args, dest, None), flag, folder=folder)


def check_output(path, flag: str, folder: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work starts and without creating anything:
    a folder where a file is expected (or a file where a folder is), a file on the way to it, a place that
    is read-only. Missing folders on the way are fine: the writers create them."""
    import os
    from pathlib import Path

    from odqa.core.errors import OdqaError

    if not path:
        return
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise OdqaError(f"{flag} {path} is a file; name a folder to write into")
    if not folder and path.is_dir():
        raise OdqaError(f"{flag} {path} is a folder; name a file to write")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OdqaError(f"{flag} {path}: {parent} is a file, not a folder; choose another path")
    for place in (parent, path) if path.exists() else (parent,):
        if not os.access(place, os.W_OK | (os.X_OK if place.is_dir() else 0)):
            raise OdqaError(f"{flag} {path}: cannot write {'into ' if place.is_dir() else ''}{place} "
                            "(read-only or not yours); choose a writable place")


def print_json_last(metrics: dict[str, Any]) -> None:
    """The machine-readable contract: one JSON object alone on the last output line."""
    sys.stdout.flush()
    print(json.dumps(metrics, ensure_ascii=False), flush=True)
