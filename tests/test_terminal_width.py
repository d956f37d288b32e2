"""The terminal in the user's script (issue 75 item 5): tables aligned and passages wrapped by display width, a wide
(Korean, Chinese, Japanese) character counting two columns, so that Korean and Chinese lines are as long as
English ones and table columns stand under their headers."""

from __future__ import annotations

import io
import re

import pytest

from odqa.core.terminal import display_width, fill, shorten, wrap
from odqa.eval.retrieval import aligned_table

KOREAN = (
    "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다. 이순신 장군이 한산도 대첩에서 승리하였다. "
    "경상남도 통영군 장목면 거제도의 남쪽 바다에서 벌어진 해전은 조선 수군의 승리로 끝났다."
)
CHINESE = (
    "长城是中国古代的军事防御工程，秦始皇统一六国后修筑了万里长城。他参加了「战史演武」&「争霸演武」两项赛事，"
    "并在iPhone上发布了Version 2.0版本。"
)
TRADITIONAL = "長城是中國古代的軍事防禦工程，秦始皇統一六國後修築了萬里長城。"
ENGLISH = "Penicillin was discovered by Alexander Fleming in 1928 in London, at St Mary's Hospital."
MIXED = f"{ENGLISH} {KOREAN} {CHINESE} {TRADITIONAL}"


def test_wide_characters_count_two_columns():
    assert display_width("가나다") == 6 and display_width("长城") == 4 and display_width("abc") == 3
    assert display_width("「」。") == 6 and display_width("e\u0301") == 1  # a combining mark takes none


@pytest.mark.parametrize("text", [KOREAN, CHINESE, TRADITIONAL, ENGLISH, MIXED])
@pytest.mark.parametrize("width", [8, 11, 20, 37, 60, 96])
def test_wrapped_lines_never_exceed_the_width_in_columns_and_lose_no_text(text, width):
    lines = wrap(text, width)
    assert lines and all(display_width(line) <= width for line in lines), lines
    assert "".join("".join(lines).split()) == "".join(text.split())  # every character kept, in order


def test_korean_words_stay_whole_and_chinese_lines_use_the_width():
    words = set(KOREAN.split())
    for line in wrap(KOREAN, 20):
        assert all(word in words for word in line.split()), line  # broken at spaces only
    lines = wrap(CHINESE, 30)
    assert all(display_width(line) >= 30 - 4 for line in lines[:-1]), lines  # filled: not 30 characters of 2 columns
    for line in lines[1:]:  # a closing mark never starts a line, an opening one never ends it
        assert line[0] not in "，。、」』）》" and line
    assert all(line[-1] not in "「『（《" for line in lines)


def test_fill_indents_and_shorten_fits_the_columns():
    assert all(
        line.startswith("   ") and display_width(line) <= 3 + 24 for line in fill(CHINESE, 24, "   ").split("\n")
    )
    for text in (KOREAN, CHINESE, ENGLISH):
        short = shorten(text, 40)
        assert display_width(short) <= 40 and short.endswith(" […]")
    assert shorten("짧은 글", 40) == "짧은 글"


def test_a_table_with_korean_and_chinese_cells_lines_up():
    table = aligned_table(
        ["질문", "答案", "em %", "questions"],
        [["세종대왕", "长城", "55.10", "5"], ["a", "「战史演武」", "100.00", "1,000"], ["한", "x", "1.00", "12"]],
    )
    lines = table.splitlines()
    assert len({display_width(line) for line in lines}) == 1, table  # every row as wide as the header
    bars = [[display_width(line[:i]) for i, ch in enumerate(line) if ch == "|"] for line in lines]
    assert all(b == bars[0] for b in bars), table  # each column's bars in the same terminal column


def _shell_output(show) -> list[str]:
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell

    out = io.StringIO()
    shell = Shell(Pipeline(OdqaConfig.load(None, {"index": "nowhere"})), out=out, color=False)
    show(shell)
    return out.getvalue().splitlines()


def _result():
    from odqa.core.types import Answer, Passage, SearchHit
    from odqa.pipeline import Result

    passages = [
        Passage(f"p{i}", title, text) for i, (title, text) in enumerate([("임진왜란", KOREAN), ("长城", CHINESE)])
    ]
    start = KOREAN.index("한산도")
    answer = Answer("한산도", 3.0, 0.9, "p0", "임진왜란", start, start + 3, KOREAN)
    return Result("어디서 승리했나?", [answer], [SearchHit(i, 1.0, p, "bm25") for i, p in enumerate(passages)])


def test_the_shell_wraps_passages_and_cuts_snippets_by_columns():
    from odqa.shell import PASSAGE_COLUMNS, SNIPPET_COLUMNS

    result = _result()
    passages = _shell_output(lambda shell: shell.show_passages(result))
    body = [line for line in passages if line.startswith("      ")]
    assert body and all(display_width(line) <= 6 + PASSAGE_COLUMNS for line in body), passages
    shown = _shell_output(lambda shell: shell.show(result))
    snippet = next(line for line in shown if "**한산도**" in line)
    assert display_width(snippet.strip()) <= SNIPPET_COLUMNS + len("**…**…") + 2, snippet
    no_answer = _result()
    no_answer.answers = []
    no_answer.passages = no_answer.passages[1:]
    best = next(line for line in _shell_output(lambda shell: shell.show(no_answer)) if "best passage" in line)
    assert re.search("长城是中国", best) and display_width(best) <= len("  best passage: 长城: ") + 2 + SNIPPET_COLUMNS
