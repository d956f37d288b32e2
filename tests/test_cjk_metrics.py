"""KorQuAD 1.0 and CMRC 2018 reader metrics against values worked out by hand from their official scripts."""

from __future__ import annotations

import pytest

from odqa.corpus.questions import QAItem
from odqa.eval.cjk_metrics import (
    cmrc_exact_match,
    cmrc_f1,
    korquad_exact_match,
    korquad_f1,
    korquad_normalize,
    mixed_segmentation,
)
from odqa.eval.reader_eval import metric_for, score_prediction

pytest.importorskip("nltk", reason="CMRC 2018's metric tokenises non-Chinese text with NLTK: pip install -e '.[cjk]'")


def test_korquad_normalisation_spaces_brackets_and_quotes_then_drops_punctuation():
    assert korquad_normalize("《전쟁과 평화》") == "전쟁과 평화"
    assert korquad_normalize("(주)삼성전자") == "주 삼성전자"
    assert korquad_normalize("‘A.B.C’  Ltd!") == "abc ltd"


def test_korquad_f1_counts_shared_characters():
    assert korquad_f1("1989년 2월 15일", "1989년 2월 15일") == 1.0
    # 임,종,석 shared; precision 3/4, recall 3/3
    assert korquad_f1("임종석이", "임종석") == pytest.approx(2 * 0.75 * 1.0 / 1.75)
    # whitespace is not a character: "2월15일" vs "2월 15일" share all 5 characters
    assert korquad_f1("2월15일", "2월 15일") == 1.0
    assert korquad_exact_match("2월15일", "2월 15일") == 0.0
    assert korquad_exact_match("《전쟁과 평화》", "전쟁과 평화") == 1.0
    assert korquad_f1("서울", "부산") == 0.0


def test_cmrc_mixed_segmentation_splits_chinese_by_character_and_the_rest_by_words():
    assert mixed_segmentation("光荣和ω-force", remove_punctuation=True) == ["光", "荣", "和", "ωforce"]
    assert mixed_segmentation("由Nexon公司开发") == ["由", "nexon", "公", "司", "开", "发"]
    assert mixed_segmentation("1989年2月") == ["1989", "年", "2", "月"]


def test_cmrc_f1_is_the_longest_common_substring_of_segments():
    assert cmrc_f1("光荣和ω-force", "光荣和ω-force") == 1.0
    # prediction 2 segments, gold 4, common run 2: precision 1, recall 1/2
    assert cmrc_f1("光荣", "光荣和ω-force") == pytest.approx(2 / 3)
    # the same characters out of order: longest common run 2 of 3 (a bag of characters would give 1.0)
    assert cmrc_f1("和光荣", "光荣和") == pytest.approx(2 / 3)
    assert korquad_f1("和光荣", "光荣和") == 1.0
    assert cmrc_exact_match("《战国无双3》", "战国无双3") == 1.0
    assert cmrc_exact_match("战国无双", "战国无双3") == 0.0


def test_score_prediction_takes_the_best_gold_answer_under_each_metric():
    assert score_prediction("임종석이", ["임종석", "임종석이"], "korquad") == (1.0, 1.0)
    em, f1 = score_prediction("光荣", ["光荣和ω-force", "光荣公司"], "cmrc2018")
    assert em == 0.0 and f1 == pytest.approx(max(2 / 3, 2 / 3))


def test_the_metric_follows_the_language_of_the_data():
    korean = [
        QAItem(
            id="k", question="임진왜란은 몇 년에 일어났나?", answers=["1592년"], context="임진왜란은 1592년에 일어났다."
        )
    ]
    chinese = [QAItem(id="z", question="长城有多长？", answers=["两万公里"], context="长城长两万公里。")]
    english = [
        QAItem(id="e", question="How long is the wall?", answers=["20,000 km"], context="The wall is 20,000 km long.")
    ]
    assert (metric_for(korean), metric_for(chinese), metric_for(english)) == ("korquad", "cmrc2018", "squad")
    assert metric_for(korean, "squad") == "squad"
