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


# Display width: a terminal gives East Asian wide characters (Hangul, Han, kana, full-width forms) two columns and
# combining marks none, so text is measured in columns (wcwidth), not characters, wherever it is aligned or wrapped

# characters between which a line may break although no space stands there: Han and kana (Chinese and Japanese
# write words without spaces); Korean spaces its words, so a Hangul word stays whole, as on the page
_IDEOGRAPHIC = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
# ... except before a closing mark or after an opening one, which stay with the character they close or open
_OPENING = set("([{「『“‘（《〈【〔［｛〖")
_CLOSING = set(")]}」』”’）》〉】〕］｝〗、。，．：；！？…‥・,.;:!?%")
_WHITESPACE = re.compile(r"\s+")


def char_width(ch: str) -> int:
    """Columns one character takes: 2 for East Asian wide ones, 0 for combining marks, else 1 (a control
    character, which `printable` escapes before printing, counts 0)."""
    from wcwidth import wcwidth

    return max(0, wcwidth(ch))


def display_width(text: str) -> int:
    """Columns `text` takes in a terminal (char_width summed)."""
    return sum(char_width(ch) for ch in text)


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded with spaces to `width` columns, on the left (`right`-aligned) or on the right."""
    fill = " " * max(0, width - display_width(text))
    return fill + text if right else text + fill


def _pieces(word: str) -> list[str]:
    """A word (no whitespace) cut where a line may break inside it: around Han and kana characters."""
    pieces = [word[:1]]
    for prev, ch in zip(word, word[1:]):
        breaks = (_IDEOGRAPHIC.match(prev) or _IDEOGRAPHIC.match(ch)) and ch not in _CLOSING and prev not in _OPENING
        if breaks:
            pieces.append(ch)
        else:
            pieces[-1] += ch
    return pieces


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns (display_width), whitespace collapsed as textwrap.fill does:
    broken at spaces and between Han or kana characters (never before a closing mark nor after an opening one);
    a piece wider than a line is broken where it reaches the width."""
    width = max(width, 2)  # a wide character needs two columns
    lines: list[str] = []
    line, used, space = "", 0, False
    for i, word in enumerate(_WHITESPACE.split(text.strip())):
        space = i > 0  # words were separated by whitespace: one space between them, or a line break
        for piece in _pieces(word):
            piece_width = display_width(piece)
            gap = 1 if space and line else 0
            if used + gap + piece_width > width and line:
                lines.append(line)
                line, used, gap = "", 0, 0
            while piece_width > width:  # longer than a line: hard breaks
                cut, cut_width = 0, 0
                while cut < len(piece) and cut_width + char_width(piece[cut]) <= width:
                    cut_width += char_width(piece[cut])
                    cut += 1
                lines.append(piece[:cut])
                piece, piece_width = piece[cut:], piece_width - cut_width
            line += " " * gap + piece
            used += gap + piece_width
            space = False
    if line:
        lines.append(line)
    return lines


def fill(text: str, width: int, indent: str = "") -> str:
    """wrap's lines joined, each after `indent` (which does not count towards `width`)."""
    return "\n".join(indent + line for line in wrap(text, width))


def shorten(text: str, width: int, placeholder: str = " […]") -> str:
    """`text`, whitespace collapsed, within `width` columns: whole if it fits, else its first wrapped line within
    the room the placeholder leaves, then the placeholder (textwrap.shorten by display width)."""
    collapsed = " ".join(text.split())
    if display_width(collapsed) <= width:
        return collapsed
    first = wrap(collapsed, width - display_width(placeholder))
    return (first[0] if first else "") + placeholder
