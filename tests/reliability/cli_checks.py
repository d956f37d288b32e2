"""What the fault tests share (tests/reliability): a small corpus, the CLI run in-process or in a child process
whose file writes are limited (a full disk), and the checks that a command ended in one clean line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from odqa.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    {"id": f"d{i}", "title": f"Title {i}", "text": f"Passage {i} is about subject{i} and shared words."}
    for i in range(12)
]
NEW_DOCS = [
    {"id": f"n{i}", "title": f"New {i}", "text": f"Fresh text {i} on subject{i} with shared words."} for i in range(9)
]


def jsonl(path: Path, docs) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def run_cli(argv, capsys) -> tuple[int, str]:
    """The CLI in-process: any exception escaping main() is a traceback for the user."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse refusing a flag: exit 2 with usage
        code = exc.code
    out, err = capsys.readouterr()
    return code, out + err


def assert_clean(code, text):
    assert code in (0, 2), text[-800:]
    assert "Traceback" not in text, text[-800:]
    if code == 2:
        assert "error:" in text


# A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) makes every write past it fail with EFBIG, as a full
# disk fails with ENOSPC, in a child process and without privileges; every writer (Python, Arrow, tantivy)
# meets it.
LIMITED = """import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from odqa.cli import main
sys.exit(main({argv!r}))
"""


def run_with_file_limit(argv, limit: int) -> subprocess.CompletedProcess:
    code = LIMITED.format(limit=limit, argv=[str(a) for a in argv])
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def assert_one_line_no_room(run: subprocess.CompletedProcess) -> None:
    text = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in text, text[-1500:]
    assert text.count("odqa: error:") == 1 and run.stderr.strip().splitlines()[-1].startswith("odqa: error: no room"), (
        text[-800:]
    )
