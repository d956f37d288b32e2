"""The CLI in a child process with some modules hidden (an extra not installed), and the one error line it must
end with: tests/test_optional_extras.py and the commands' own extras (tests/test_plots.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT


def run_hiding(code: str, *hidden: str) -> subprocess.CompletedProcess:
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in hidden) + "from odqa.cli import main\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
    )


def one_error(out: subprocess.CompletedProcess) -> str:
    errors = [line for line in out.stderr.splitlines() if line.startswith("odqa: error")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    return errors[0]
