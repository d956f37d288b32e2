"""Re-record docs/shell.md: a real terminal session (pexpect, a pseudo-terminal) of `python run_qa.py shell` on
the demo corpus with the shipped models. Run from the repository root: `python docs/record_shell.py`."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parent.parent
STEPS = [
    "Who discovered penicillin?",
    ":entities",
    ":passages",
    ":retriever bm25",
    ":k 5",
    "In which city is the Eiffel Tower?",
    ":explain",
    "Who won the 2022 FIFA World Cup?",
    ":help",
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\r")


def read_until_quiet(child, quiet: float = 3.0, limit: float = 600.0) -> str:
    """Everything the shell prints until it has been silent for `quiet` seconds after showing its prompt."""
    out, started = "", time.time()
    while time.time() - started < limit:
        try:
            out += child.read_nonblocking(100000, timeout=quiet)
        except pexpect.TIMEOUT:
            if "odqa>" in ANSI.sub("", out):
                break
    return out


def answer_lines(raw: str, step: str) -> str:
    """The output of one command: escape sequences, the echoed input and the redrawn prompts left out."""
    lines = [ANSI.sub("", line).rstrip() for line in raw.replace("\r\n", "\n").split("\n")]
    keep = [line for line in lines if line.strip() and not line.strip().startswith("odqa>") and line.strip() != step]
    return "\n".join(keep)


def main() -> int:
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(
        sys.executable,
        ["run_qa.py", "shell"],
        cwd=str(ROOT),
        encoding="utf-8",
        timeout=600,
        env=env,
        dimensions=(50, 120),
    )
    log = ["$ python run_qa.py shell", answer_lines(read_until_quiet(child), "")]
    for step in STEPS:
        child.sendline(step)
        log.append(f"odqa> {step}")
        output = answer_lines(read_until_quiet(child), step)
        if output:
            log.append(output)
    child.sendline(":quit")
    child.expect(pexpect.EOF)
    log.append("odqa> :quit")
    text = "\n".join(log)  # each command's output already cleaned by answer_lines
    text = "\n".join(line for line in text.splitlines() if not line.startswith("odqa: ") or "runs" not in line)
    page = ROOT / "docs" / "shell.md"
    page.write_text(
        "# The QA shell: a recorded session\n\nA real terminal session (pexpect, a pseudo-terminal) of `python "
        "run_qa.py shell` on the built-in demo corpus with the shipped linker and reader, on 2 CPU cores, "
        f"{time.strftime('%Y-%m-%d')} (`python docs/record_shell.py` records it again). The first question "
        f"includes loading the models.\n\n```text\n{text}\n```\n"
    )
    print(page.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
