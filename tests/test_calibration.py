"""Calibrated answer probabilities and the figures that judge them, on hand-made numbers (no model)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from odqa.core.errors import OdqaError
from odqa.corpus.questions import QAItem
from odqa.eval.confidence import (
    article_split,
    auroc,
    em_at_coverage,
    expected_calibration_error,
    judge,
    passages_with_distractors,
)
from odqa.reader.calibration import (
    Calibration,
    choose_threshold,
    confidence_features,
    fit_calibration,
    fit_platt,
    threshold_for_precision,
)


def test_unfitted_calibration_is_the_sigmoid_of_the_margin():
    cal = Calibration()
    assert cal.probability(0.0, 0.3) == pytest.approx(0.5)
    assert cal.probability(2.0, 0.9) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert cal.probability(-800.0, 0.0) == pytest.approx(0.0) and cal.probability(800.0, 1.0) == pytest.approx(1.0)
    assert confidence_features(1.5, 0.0) == [1.5, math.log(1e-6)]  # a zero share stays finite


def test_fitted_probability_is_the_logistic_of_its_features():
    cal = Calibration(weights=[0.5, 2.0], bias=-1.0)
    x = 0.5 * 3.0 + 2.0 * math.log(0.25) - 1.0
    assert cal.probability(3.0, 0.25) == pytest.approx(1 / (1 + math.exp(-x)))


def test_platt_fit_recovers_the_generating_weights():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(0, 3, 20000), np.log(rng.uniform(0.01, 1, 20000))])
    p = 1 / (1 + np.exp(-(0.8 * x[:, 0] + 1.5 * x[:, 1] - 0.5)))
    y = (rng.uniform(size=len(p)) < p).astype(float)
    w, b = fit_platt(x, y, l2=0.0)
    assert w == pytest.approx([0.8, 1.5], abs=0.08) and b == pytest.approx(-0.5, abs=0.1)


def test_platt_fit_needs_right_and_wrong_answers():
    with pytest.raises(OdqaError, match="right and wrong"):
        fit_platt(np.zeros((3, 2)), np.ones(3))


def test_fit_makes_confidence_comparable_across_questions():
    # the same share means different things: a margin of +4 is right 9 times in 10, a margin of -4 once in 10
    margins = [4.0] * 10 + [-4.0] * 10
    shares = [0.8] * 20
    correct = [1] * 9 + [0] + [1] + [0] * 9
    cal = fit_calibration(margins, shares, correct, source={"data": "hand"})
    assert cal.fitted and cal.source == {"data": "hand"}
    assert cal.probability(4.0, 0.8) == pytest.approx(0.9, abs=0.02)
    assert cal.probability(-4.0, 0.8) == pytest.approx(0.1, abs=0.02)
    assert cal.probability(-4.0, 0.8) < cal.threshold <= cal.probability(4.0, 0.8)


def test_threshold_separates_right_from_wrong_answers():
    # at 0.6 and above all right, below all wrong: the candidates 0.5 and 0.6 are perfect, the lower is kept
    assert choose_threshold([0.9, 0.6, 0.4, 0.1], [1, 1, 0, 0]) == 0.5
    assert choose_threshold([0.9, 0.7, 0.4, 0.1], [1, 1, 1, 0]) == 0.4
    # nothing is ever right: withholding everything is best
    assert choose_threshold([0.9, 0.2], [0, 0]) == 1.0


def test_threshold_for_a_stated_precision_is_the_lowest_that_reaches_it():
    # 40 answers: p = 1.0, 0.975, ...; the top 20 all right, then right and wrong alternate
    p = [1 - i / 40 for i in range(40)]
    y = [1] * 20 + [i % 2 for i in range(20)]
    t = threshold_for_precision(p, y, 0.8)
    above = [c for q, c in zip(p, y) if q >= t]
    assert sum(above) / len(above) >= 0.8 and len(above) >= 20
    lower = max(q for q in p if q < t)  # one answer more would bring precision under 0.8
    below_too = [c for q, c in zip(p, y) if q >= lower]
    assert sum(below_too) / len(below_too) < 0.8
    # too few answers reach it, or none: withhold everything
    assert threshold_for_precision(p[:10], y[:10], 0.8) == 1.0
    assert threshold_for_precision(p, [0] * 40, 0.5) == 1.0


def test_fit_with_a_target_precision_records_it():
    margins = [4.0 - i / 5 for i in range(40)]
    correct = [1] * 20 + [i % 2 for i in range(20)]
    cal = fit_calibration(margins, [0.5] * 40, correct, target_precision=0.8)
    confident = [c for m, c in zip(margins, correct) if cal.confident(cal.probability(m, 0.5))]
    assert cal.source["target_precision"] == 0.8 and len(confident) >= 20
    assert sum(confident) / len(confident) >= 0.8


def test_calibration_file_round_trip_and_bad_files(tmp_path):
    cal = Calibration(weights=[0.7, 1.9], bias=-2.0, threshold=0.41, fitted=True, source={"questions": 10})
    cal.save(tmp_path / "calibration.json")
    assert Calibration.for_model(tmp_path) == cal
    assert Calibration.for_model(tmp_path / "elsewhere") == Calibration()  # no file: the unfitted default
    (tmp_path / "bad.json").write_text(json.dumps({"weights": [1.0]}))
    with pytest.raises(OdqaError, match="fit-calibration"):
        Calibration.load(tmp_path / "bad.json")
    with pytest.raises(OdqaError, match="not found"):
        Calibration.load(tmp_path / "none.json")


def test_auroc_by_hand():
    # right answers at 0.9, 0.4; wrong at 0.5, 0.1: pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1) -> 3/4
    assert auroc([0.9, 0.5, 0.4, 0.1], [1, 0, 1, 0]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [1, 0]) == pytest.approx(0.5)  # a tie counts half
    assert auroc([0.3, 0.2], [1, 1]) is None


def test_expected_calibration_error_by_hand():
    # bin [0.9,1): confidence 0.95, accuracy 1/2 -> 0.45; bin [0.2,0.3): 0.2 vs 0 -> 0.2; weights 2/3 and 1/3
    assert expected_calibration_error([0.95, 0.95, 0.2], [1, 0, 0]) == pytest.approx(2 / 3 * 0.45 + 1 / 3 * 0.2)
    assert expected_calibration_error([1.0, 0.0], [1, 0]) == pytest.approx(0.0)  # p = 1 falls in the top bin


def test_em_at_half_coverage_answers_the_most_confident_half():
    assert em_at_coverage([0.9, 0.2, 0.8, 0.1], [1, 1, 0, 0], 0.5) == pytest.approx(0.5)
    assert em_at_coverage([0.9, 0.2, 0.8, 0.1], [1, 0, 1, 0], 0.5) == pytest.approx(1.0)


def test_unanswerable_questions_have_no_right_answer():
    assert judge(QAItem("1", "q", ["Denver Broncos"]), "the Denver Broncos") == (1.0, 1.0)
    assert judge(QAItem("2", "q", [], impossible=True), "anything") == (0.0, 0.0)


def _items():
    return [
        QAItem(f"{t}{i}", "q", ["a"], context=f"{t} paragraph {i % 3}", title=t)
        for t in ("A", "B", "C")
        for i in range(4)
    ]


def test_dev_halves_split_by_article():
    fit, check = article_split(_items(), "fit"), article_split(_items(), "check")
    assert {q.title for q in fit} == {"A", "C"} and {q.title for q in check} == {"B"}
    assert len(article_split(_items(), "all")) == 12


def test_distractors_are_other_paragraphs_of_the_same_article():
    items = _items()
    for item, passages in zip(items, passages_with_distractors(items, distractors=5, seed=1)):
        texts = [p.text for p in passages]
        assert item.context in texts and len(texts) == len(set(texts)) == 3  # the article has 3 paragraphs
        assert all(p.title == item.title for p in passages)
    assert [[p.text for p in ps] for ps in passages_with_distractors(items, 0)] == [[q.context] for q in items]


@pytest.mark.slow
def test_fit_calibration_reads_several_open_domain_question_files(tmp_path, capsys):
    """Each --questions file is a source of its own (sampled by --limit, recorded in the calibration's source)."""
    from odqa.cli import main
    from odqa.demo_corpus import DEMO_QUESTIONS, demo_index_path

    rows = [json.loads(line) for line in DEMO_QUESTIONS.read_text(encoding="utf-8").splitlines()[:16]]
    for row in rows[12:]:
        row["answer"] = ["an answer no passage holds"]  # some wrong answers: a fit needs both kinds
    files = []
    for name, part in (("first.jsonl", rows[:8]), ("second.jsonl", rows[8:])):
        files.append(tmp_path / name)
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    out = tmp_path / "calibration.json"
    code = main(
        [
            "fit-calibration",
            "--model",
            "reader",
            "--index",
            str(demo_index_path(quiet=True)),
            "--questions",
            *map(str, files),
            "--target-precision",
            "0.7",
            "--output",
            str(out),
            "--json",
        ]
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    cal = Calibration.load(out)
    assert [s["questions_file"] for s in cal.source["sources"]] == [str(f) for f in files]
    assert [s["questions"] for s in cal.source["sources"]] == [8, 8]
    assert cal.source["target_precision"] == 0.7 and summary["questions"] == 16
    assert cal.fitted and 0.0 < cal.threshold <= 1.0
