"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        # None is "not given" (a config override, an optional path) and "" is "empty" (the help says what either
        # means): "(default: None)" and "(default: )" would say nothing
        if action.default is None or (isinstance(action.default, str) and not action.default):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """odqa's parsers (the top one; its commands' are made of its class): a mistyped flag or command is answered
    with the usage of the command it was given to and the nearest known name ("did you mean --retriever?"),
    exit 2. argparse's own parser would pass a command's unknown flags up to the top one, whose usage and
    "unrecognized arguments" name neither the command nor the flag meant."""

    _given: list[str] = []  # the arguments of the parse in progress, for error()

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        self._check_command(self._given)
        namespace, extras = super().parse_known_args(self._given, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def error(self, message: str):
        # an unknown flag explains the error it causes (a required option "missing" because it was misspelt)
        unknown = [] if self._subparsers else self._unknown_options(self._given)
        if unknown and not message.startswith("unrecognized arguments"):
            message = self._unrecognized(unknown)
        super().error(message)

    def _check_command(self, args: list[str]) -> None:
        commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = next((a for a in args if not a.startswith("-")), None)  # before it only flags without values
        if commands and name is not None and name not in commands:
            self.error(f"unknown command {name!r}{_suggestion(name, commands)} ({self.prog} --help lists the commands)")

    def _unknown_options(self, args: list[str]) -> list[str]:
        known = self._option_string_actions
        unknown = []
        for arg in args:
            if arg == "--":
                break
            flag = arg.split("=", 1)[0]
            if not arg.startswith("-") or arg == "-" or self._negative_number_matcher.match(arg) or flag in known:
                continue
            if flag.startswith("--") and any(option.startswith(flag) for option in known):
                continue  # an abbreviation argparse takes (or calls ambiguous itself)
            if not flag.startswith("--") and flag[:2] in known:
                continue  # short flags run together (-qv) or with their value (-k5)
            unknown.append(flag)
        return unknown

    def _unrecognized(self, extras: list[str]) -> str:
        unknown = self._unknown_options(extras)
        options = [o for o in self._option_string_actions if o.startswith("--")]
        hint = _suggestion(unknown[0], options) if unknown else ""
        return (
            f"unrecognized arguments: {' '.join(extras)}{hint} ({self.prog} --help lists its "
            f"{'options' if unknown else 'arguments'})"
        )


def _suggestion(name: str, names) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(names), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def add_command(subparsers, name: str, help: str, example: str, func) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        name, help=help, description=help, epilog=f"Example:\n  {example}", formatter_class=HelpFormatter
    )
    parser.set_defaults(func=func)
    chatter = parser.add_mutually_exclusive_group()
    chatter.add_argument(
        "-q", "--quiet", action="store_true", help="odqa's notes on standard error: warnings and errors only"
    )
    chatter.add_argument("-v", "--verbose", action="store_true", help="debug messages too, on standard error")
    return parser


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML, YAML or JSON config file; flags given here override it")


OUTPUTS = "outputs_to_check"  # parser default: (dest, flag, is_folder) of every output argument


def add_output(parser: argparse.ArgumentParser, *flags: str, folder: bool = False, **kwargs) -> argparse.Action:
    """An argument naming a file (`folder=True`: a folder) the command writes. The CLI checks every declared
    output with `check_output` before the command starts, so a bad path costs no work and loses no result."""
    action = parser.add_argument(*flags, **kwargs)
    declared = parser.get_default(OUTPUTS) or ()
    parser.set_defaults(**{OUTPUTS: (*declared, (action.dest, action.option_strings[0], folder))})
    return action


def check_outputs(args: argparse.Namespace) -> None:
    """Every declared output checked (`check_output`), and no two of them the same place or one inside the other
    (`--trec-run F --dpr-json F` would keep one of them)."""
    given = []
    for dest, flag, folder in getattr(args, OUTPUTS, None) or ():
        path = getattr(args, dest, None)
        check_output(path, flag, folder=folder)
        if path and not _is_stream(path):  # two outputs to /dev/null are both discarded, not one lost
            given.append((flag, path, _where(path)))
    for i, (flag, path, where) in enumerate(given):
        for other_flag, other_path, other_where in given[i + 1 :]:
            if where == other_where or where in other_where.parents or other_where in where.parents:
                relation = "name the same place" if where == other_where else "overlap (one lies inside the other)"
                raise _output_error(
                    f"{flag} {path} and {other_flag} {other_path} {relation}, so one would replace the other; "
                    "give each output its own place"
                )


def _where(path) -> Path:
    """Where an output lands: absolute, symbolic links followed (a stream such as /dev/stdout is itself)."""
    import os

    absolute = Path(os.path.abspath(path))
    try:
        return absolute.resolve()
    except (RuntimeError, OSError):
        return absolute


def _is_stream(path) -> bool:
    """Whether `path` is a device, a pipe or a socket (its link followed): written in place, never replaced."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _output_error(message: str):
    from odqa.core.errors import OdqaError

    return OdqaError(message)


@contextlib.contextmanager
def outputs_held(args: argparse.Namespace) -> Iterator[None]:
    """Every output folder the command declares, held with its one-writer lock while the command runs (the lock
    `index` takes; odqa.core.atomic.writer_lock): a second command writing the same folder is refused in one
    line naming it and the process writing it, before either's work is replaced by the other's. The library
    writers the command runs enter the lock it holds."""
    from odqa.core.atomic import writer_lock

    with contextlib.ExitStack() as stack:
        for dest, flag, folder in getattr(args, OUTPUTS, None) or ():
            path = getattr(args, dest, None)
            if folder and path:
                stack.enter_context(writer_lock(path, flag=flag, nested=True))
        yield


def check_output(path, flag: str, folder: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work starts and without creating anything:
    a folder where a file is expected (or a file where a folder is), a file on the way to it, a place that
    is read-only. Missing folders on the way are fine: the writers create them."""
    from odqa.core.errors import OdqaError

    if not path:
        return
    path = Path(path)
    try:
        _check_output(path, flag, folder)
    except (OSError, RuntimeError) as exc:  # a path the system refuses to look at: one line, with the flag
        from odqa.core.errors import os_error_line

        line = os_error_line(exc)
        if line is None:
            raise
        raise OdqaError(f"{flag} {line}") from None


def _check_output(path: Path, flag: str, folder: bool) -> None:
    import os
    import stat

    from odqa.core.errors import OdqaError

    _check_name_lengths(path, flag)
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError):  # a symbolic link loop (RuntimeError before Python 3.13)
        raise OdqaError(
            f"{flag} {path}: a symbolic link on the way leads back to itself (a loop); name a real place"
        ) from None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        found = None
    if not folder and found is not None and not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode):
        # a device, a pipe, a socket, /dev/stdout: written in place (odqa.core.atomic.output_place), never replaced
        if not os.access(path, os.W_OK):
            raise OdqaError(f"{flag} {path}: cannot write to it (not yours); choose a writable place")
        return
    if resolved.parent == resolved:
        raise OdqaError(
            f"{flag} {path} is the root of the filesystem; name a {'folder' if folder else 'file'} under it"
        )
    code = _inside_odqa_code(resolved)
    if code:
        raise OdqaError(
            f"{flag} {path} lies inside odqa's own code ({code}), where what it writes would mix with "
            f"the modules; write it elsewhere, e.g. work_indexes/{path.name}"
        )
    kernel = _kernel_filesystem(resolved)
    if kernel:
        raise OdqaError(
            f"{flag} {path} lies on {kernel}, a view of the kernel's state, where no files can be "
            "written; choose a place on a disk"
        )
    inside = _odqa_folder_around(resolved)
    if inside:
        raise OdqaError(
            f"{flag} {path} lies inside {inside}, which a rebuild or an update replaces whole (and whose parts "
            f"are checked against its manifest); write it outside, e.g. {inside.parent / path.name}"
        )
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
            raise OdqaError(
                f"{flag} {path}: cannot write {'into ' if place.is_dir() else ''}{place} "
                "(read-only or not yours); choose a writable place"
            )


NAME_MAX, PATH_MAX = 255, 4096  # bytes, Linux's (os.pathconf of a place that does not exist yet cannot say)


def _check_name_lengths(path: Path, flag: str) -> None:
    """A name over the filesystem's limit is refused before any work (ENAMETOOLONG once the result is written)."""
    import os

    from odqa.core.errors import OdqaError

    raw = os.fsencode(os.path.abspath(path))
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX or len(raw) >= PATH_MAX:
        what = f"a name of {len(longest)} bytes" if len(longest) > NAME_MAX else f"a path of {len(raw):,} bytes"
        shown = str(path) if len(str(path)) <= 120 else f"{str(path)[:60]}...{str(path)[-40:]}"
        raise OdqaError(
            f"{flag} {shown}: {what}, over the filesystem's limit ({NAME_MAX} bytes a name, {PATH_MAX:,} a "
            "path); choose a shorter path"
        )


def _odqa_folder_around(resolved: Path) -> Path | None:
    """The odqa index, index part, shard or knowledge base (a folder holding odqa's manifest.json) that
    `resolved` lies inside, else None. The output's own folder is not counted: rebuilding an index in place is
    how it is updated."""
    import json

    for folder in resolved.parents:
        manifest = folder / "manifest.json"
        try:
            if not manifest.is_file():
                continue
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "kind" in data:
            return folder
    return None


def _inside_odqa_code(resolved):
    """The folder of odqa's code (the package, or a component folder it links to) that `resolved` lies in, else
    None. The shipped models' folder is not code: calibration files and exported models are written there."""
    from pathlib import Path

    import odqa

    package = Path(odqa.__file__).resolve().parent
    # in a checkout the component packages (odqa/reader, ...) are links to the top-level folders the design names
    for root in {package, *(child.resolve() for child in package.iterdir() if child.is_symlink())}:
        if resolved == root or root in resolved.parents:
            return root
    return None


# filesystems that show the kernel's state as files: nothing can be created there, whoever asks
KERNEL_FILESYSTEMS = {
    "proc",
    "sysfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "mqueue",
    "binfmt_misc",
    "efivarfs",
    "selinuxfs",
}


def _kernel_filesystem(path) -> str | None:
    """`fstype (mount point)` of the kernel filesystem `path` lies on (Linux's /proc/self/mounts), else None."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) > 2]
    except OSError:
        return None
    best = ("", "")
    for point, fstype in mounts:
        point = point.replace("\\040", " ")
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, fstype)
    return f"{best[1]} ({best[0]})" if best[1] in KERNEL_FILESYSTEMS else None


def print_json_last(metrics: dict[str, Any]) -> None:
    """The machine-readable contract: one JSON object alone on the last output line."""
    from odqa.core import strict_json
    from odqa.core.terminal import printable

    sys.stdout.flush()
    print(printable(strict_json.dumps(metrics, ensure_ascii=False)), flush=True)
