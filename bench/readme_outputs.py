"""The README's example outputs, made by running the README's own examples.

Every fenced block of README.md followed by the marker line below and a ```text block is an example whose output
that text block shows: this script runs the example as written, from the repository root (a ```python block with
`python -c`, a ```bash block line by line), and writes what it prints on standard output into the text block
(odqa's notes on standard error are left out, as a reader running the example sees them apart). Run it whenever a
model ships, so the README says what the code prints now:

    python bench/readme_outputs.py            # rewrite README.md's example outputs
    python bench/readme_outputs.py --check    # exit 1 naming each output that differs (stage timings aside)

The marker, on its own line between an example and its output block:
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKER = "<!-- the output of the example above: bench/readme_outputs.py -->"
__doc__ = f"{__doc__}\n    {MARKER}\n"
# fence, the example, fence, marker, ```text, its output, fence
_BLOCK = r"(?:(?!```).)*?"  # a fenced block's text: anything but a fence
_EXAMPLE = re.compile(
    rf"^```(?P<lang>python|bash)\n(?P<code>{_BLOCK})^```\n{re.escape(MARKER)}\n```text\n(?P<out>{_BLOCK})^```\n",
    re.MULTILINE | re.DOTALL,
)
# stage timings differ at every run: compared without their numbers
_TIMINGS = re.compile(r"^(\s*time: ).*$", re.MULTILINE)


def run_example(lang: str, code: str, timeout: int = 900) -> str:
    """What the example prints on standard output, run from the repository root; a failure is an error."""
    if lang == "python":
        commands = [[sys.executable, "-c", code]]
    else:
        lines = [line.split("  #", 1)[0].strip() for line in code.replace("\\\n", " ").splitlines()]
        commands = [["bash", "-c", line] for line in lines if line and not line.startswith("#")]
    printed = []
    for command in commands:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise SystemExit(f"the README example failed ({proc.returncode}):\n{code}\n{proc.stderr[-3000:]}")
        printed.append(proc.stdout)
    return "".join(printed)


def without_timings(text: str) -> str:
    return _TIMINGS.sub(r"\1...", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only say which outputs differ (exit 1), write nothing")
    ap.add_argument("--readme", type=Path, default=README)
    args = ap.parse_args(argv)

    text = args.readme.read_text(encoding="utf-8")
    examples = list(_EXAMPLE.finditer(text))
    if not examples:
        raise SystemExit(f"{args.readme}: no example followed by {MARKER!r}")
    rewritten, at, differ = [], 0, []
    for match in examples:
        printed = run_example(match["lang"], match["code"])
        if without_timings(printed) != without_timings(match["out"]):
            first = match["code"].strip().splitlines()[0]
            differ.append(f"line {text.count(chr(10), 0, match.start()) + 1} ({first[:60]})")
        rewritten += [text[at : match.start("out")], printed]
        at = match.end("out")
    rewritten.append(text[at:])
    for where in differ:
        print(f"{args.readme.name}: the output of the example at {where} differs from what it prints now")
    if args.check:
        return 1 if differ else 0
    args.readme.write_text("".join(rewritten), encoding="utf-8")
    print(f"{args.readme.name}: {len(examples)} example outputs written ({len(differ)} changed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
