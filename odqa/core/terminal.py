"""Text from corpora, question files and users, made safe to print: a corpus must not be able to clear the
screen, retitle the terminal, hide or reorder what odqa prints."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls (0x9b starts an escape sequence on some terminals), and the
# bidirectional embeddings, overrides and isolates, which reorder the text around them
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with each control character written as its escape (`\\u001b`), which is valid inside JSON strings
    too; tabs and newlines are kept."""
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
