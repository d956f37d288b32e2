"""Input paths, one rule for every command: what a path names decides how it is read, or why it is refused.

* `-` and /dev/stdin (/dev/fd/0, /proc/self/fd/0) read standard input, where a reader takes a stream;
* a named pipe (FIFO, `<(...)`) is read as it streams, where a reader takes a stream;
* a regular file is read as a file;
* anything else is refused in one line naming what it is: a folder, a device (/dev/zero never ends, /dev/null
  holds nothing), a socket, a path that does not exist. A reader that reads its input more than once (or seeks
  in it) refuses a pipe and standard input alike, saying to write it to a file first.

`check_input` says which of the three a path is (or raises); `read_input` returns the bytes of any of them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from odqa.core.errors import DataFormatError, OdqaError, os_error_line

STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
FILE, PIPE, STDIN = "file", "pipe", "stdin"


def reads_stdin(path: str | Path) -> bool:
    return str(path) in STDIN_NAMES


def input_label(path: str | Path) -> str:
    """How messages name the input: its path, or `standard input`."""
    return "standard input" if reads_stdin(path) else str(path)


def check_input(
    path: str | Path,
    what: str,
    hint: str = "check the path",
    streams: bool = False,
    error: type[OdqaError] = DataFormatError,
) -> str:
    """FILE, PIPE or STDIN for an input `path` a command reads as its `what` ("question file"); any other path is
    refused in one line with `error`. `streams`: the reader takes a stream (it reads the input once, front to
    back); otherwise a pipe and standard input are refused. `hint`: the fix for a path that does not exist."""
    if reads_stdin(path):
        if not streams:
            raise error(
                f"{what} {path}: this command reads its {what} more than once, which standard input "
                "cannot be; write it to a file and pass that"
            )
        _check_stdin(what, error)
        return STDIN
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{what} not found: {path} ({hint})") from None
    except NotADirectoryError:
        raise error(f"{what} not found: {path} (a file stands where the path needs a folder; {hint})") from None
    except PermissionError:
        raise error(f"{what} {path} cannot be read (permission denied); make it readable or pass a copy") from None
    except OSError as exc:  # a link loop, a name too long: the cause and its fix (odqa.core.errors.os_error_line)
        raise error(f"{what} {os_error_line(exc) or f'{path} cannot be opened ({exc.strerror}); {hint}'}") from None
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        raise error(f"{path} is a folder, not a {what}; pass the file itself")
    if stat.S_ISFIFO(mode):
        if not streams:
            raise error(
                f"{what} {path} is a pipe, which this command cannot read (it reads its {what} more than "
                "once); write it to a file and pass that"
            )
        return PIPE
    stdin = ", or - to read standard input" if streams else ""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a character device" if stat.S_ISCHR(mode) else "a block device (a disk)"
        raise error(
            f"{what} {path} is {kind}, not a file: it may never end "
            f"(/dev/zero) or hold nothing; pass a regular file{stdin}"
        )
    raise error(f"{what} {path} is a socket or other special file, not a regular file; pass a file{stdin}")


def _check_stdin(what: str, error: type[OdqaError]) -> None:
    """Standard input that is a device other than a terminal or /dev/null (`< /dev/zero`) would never end."""
    try:
        mode, rdev = os.fstat(0).st_mode, os.fstat(0).st_rdev
    except OSError:
        raise error(f"{what} -: standard input is closed; pipe the {what} in, or pass its path") from None
    if stat.S_ISCHR(mode) and not os.isatty(0):
        try:
            null = os.stat(os.devnull).st_rdev
        except OSError:
            null = None
        if rdev != null:
            raise error(
                f"{what} -: standard input is a character device, not a file or pipe: it may never end "
                "(/dev/zero); pipe the questions in or pass a file"
            )


def read_input(
    path: str | Path,
    what: str,
    hint: str = "check the path",
    streams: bool = True,
    error: type[OdqaError] = DataFormatError,
) -> bytes:
    """The bytes of the input `path` (checked by `check_input`): a file, a pipe or standard input, read once."""
    kind = check_input(path, what, hint, streams=streams, error=error)
    if kind == STDIN:
        stream = getattr(sys.stdin, "buffer", None)  # a library caller's sys.stdin may be text only
        return stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    with open(path, "rb") as f:
        return f.read()
