"""Command line: `odqa COMMAND ...` (in a source checkout also `python run_qa.py`). Each command lives in
odqa/commands/."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from odqa.commands.common import ArgumentParser, HelpFormatter, check_outputs, outputs_held
from odqa.core.errors import OdqaError, is_disk_full, no_room_reason, os_error_line
from odqa.core.secrets import scrubbed_output

# Each module defines register(subparsers); order is the order of `--help`.
COMMAND_MODULES = (
    "odqa.commands.retrieval",  # index, search, eval-retrieval
    "odqa.commands.qa",  # ask, shell, eval-qa, demo
    "odqa.commands.reader",  # train-reader, eval-reader
    "odqa.commands.linker",  # build-kb, link, train-linker, eval-linker
    "odqa.commands.train_retriever",  # build-dpr-data, train-retriever
    "odqa.commands.elastic",  # es-index
    "odqa.commands.serve",  # serve
    "odqa.commands.cache",  # cache
)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="odqa",
        description="odqa: open-domain question answering over your own corpus.",
        formatter_class=HelpFormatter,
        epilog='Example:\n  odqa ask "Who wrote Hamlet?"',
    )
    from odqa import __version__

    parser.add_argument("--version", action="version", version=f"odqa {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # command group not part of this build
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # whatever is printed, by odqa or a library (a client quoting a credential in its error, a traceback),
    # passes odqa.core.secrets.scrub on its way out
    with scrubbed_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers' per-weight loading bars drown the commands' own progress; a library user keeps them
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from odqa.core.logs import configure_cli_logging, progress_bars_hidden

    configure_cli_logging(-1 if args.quiet else 1 if args.verbose else 0)
    try:
        check_outputs(args)  # every output path, before any work
        with outputs_held(args), progress_bars_hidden(args.quiet):  # one writer per output folder
            return int(args.func(args) or 0)
    except OdqaError as exc:
        from odqa.core.terminal import printable

        print(f"odqa: error: {printable(str(exc))}", file=sys.stderr)  # messages quote corpus text
        return 2
    except RecursionError:  # the JSON readers name the file; this is the net under any other nested input
        print(
            "odqa: error: an input is nested too deeply to read (RecursionError); check the files this command reads",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("odqa: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if not is_disk_full(exc):
            from odqa.core.terminal import printable

            line = os_error_line(exc)  # a path, a permission, another process: the user's to fix, in one line
            if line is not None:
                print(f"odqa: error: {printable(line)}", file=sys.stderr)
                return 2
            # a bug: its traceback, scrubbed like all output (Python's own printing would come after the scrub)
            traceback.print_exc()
            print("odqa: internal error (the traceback above); please report it", file=sys.stderr)
            return 1
        filename = getattr(exc, "filename", None)
        where = f" to write {filename}" if filename else ""
        print(
            f"odqa: error: no room left on the device{where} "
            f"({no_room_reason(exc)}): free some space or write elsewhere, then rerun",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
