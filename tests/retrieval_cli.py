"""`run_qa.py` in a child process, and the small corpus and questions the retrieval commands' tests run it on."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

ARTICLES = [
    {
        "id": "1",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower is an iron tower in Paris. It was completed in 1889 by Gustave Eiffel's company.",
    },
    {
        "id": "2",
        "title": "Mount Everest",
        "text": "Mount Everest is the highest mountain on Earth. "
        "It stands in the Himalayas on the border of Nepal and China.",
    },
    {
        "id": "3",
        "title": "Amazon River",
        "text": "The Amazon River flows through South America. It carries more water than any other river.",
    },
    {"id": "4", "title": "Penicillin", "text": "Penicillin was discovered by Alexander Fleming in 1928 in London."},
]


QUESTIONS = (
    "who discovered penicillin\t['Alexander Fleming']\n"
    "when was the eiffel tower completed\t['1889']\n"
    "which river carries the most water\t['Amazon']\n"
)


def run(*args, check_ok=True):
    proc = subprocess.run(
        [sys.executable, "run_qa.py", *map(str, args)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    if check_ok:
        assert proc.returncode == 0, proc.stderr
    return proc
