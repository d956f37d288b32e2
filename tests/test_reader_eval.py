"""SQuAD EM/F1 against hand-computed values, and eval-reader on a tiny model."""

from __future__ import annotations

import json

import pytest

from odqa.eval.reader_eval import score_prediction, squad_metrics
from tests.squad_files import tiny_squad


def test_exact_match_ignores_case_punctuation_and_articles():
    assert score_prediction("The Eiffel Tower!", ["eiffel tower"]) == (1.0, 1.0)


def test_f1_by_hand():
    # "the cat sat" -> [cat, sat]; "a cat sat on the mat" -> [cat, sat, on, mat]
    # overlap 2: precision 2/2, recall 2/4, F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    em, f1 = score_prediction("the cat sat", ["a cat sat on the mat"])
    assert em == 0.0 and f1 == pytest.approx(2 / 3)


def test_best_over_several_gold_answers():
    em, f1 = score_prediction("Denver Broncos", ["Broncos", "Denver Broncos", "the Denver Broncos team"])
    assert (em, f1) == (1.0, 1.0)
    em, f1 = score_prediction("Broncos team", ["Denver Broncos", "Broncos"])
    # vs "Denver Broncos": overlap 1, p=1/2, r=1/2 -> 0.5; vs "Broncos": p=1/2, r=1 -> 2/3
    assert em == 0.0 and f1 == pytest.approx(2 / 3)


def test_unanswerable_questions_score_only_an_empty_prediction():
    assert score_prediction("", []) == (1.0, 1.0)
    assert score_prediction("Paris", []) == (0.0, 0.0)


def test_mean_over_questions_in_percent():
    m = squad_metrics(
        {"a": "Paris", "b": "the cat sat", "c": "wrong"},
        {"a": ["Paris"], "b": ["a cat sat on the mat"], "c": ["right"], "d": ["missing"]},
    )
    assert m["questions"] == 4
    assert m["em"] == pytest.approx(100 * 1 / 4)
    assert m["f1"] == pytest.approx(100 * (1 + 2 / 3) / 4)


def test_evaluate_reader_and_cli_json_last_line(tmp_path, capsys):
    from odqa.cli import main
    from tests.reader_fixtures import save_tiny_qa

    model = save_tiny_qa(tmp_path / "tiny")
    data = tiny_squad(tmp_path / "tiny.json")
    rc = main(
        [
            "eval-reader",
            "--data",
            str(data),
            "--model",
            str(model),
            "--json",
            "--threads",
            "1",
            "--predictions",
            str(tmp_path / "pred.json"),
        ]
    )
    assert rc == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    metrics = json.loads(last)
    assert set(metrics) == {"em", "f1", "questions", "seconds", "metric", "inference"} and metrics["metric"] == "squad"
    assert metrics["inference"]["reader"]["runtime"] in ("torch", "onnx")  # as ask's and eval-qa's
    assert metrics["questions"] == 2  # v1 mode: the unanswerable question is left out
    assert 0 <= metrics["em"] <= metrics["f1"] <= 100
    preds = json.loads((tmp_path / "pred.json").read_text())
    assert set(preds) == {"q1", "q2"} and all(preds.values())
    rc = main(["eval-reader", "--data", str(data), "--model", str(model), "--json", "--allow-null", "--threads", "1"])
    assert rc == 0 and json.loads(capsys.readouterr().out.strip().splitlines()[-1])["questions"] == 3


def test_eval_reader_with_a_non_qa_model_exits_2(tmp_path, capsys):
    from odqa.cli import main
    from tests.reader_fixtures import save_tiny_qa

    model = save_tiny_qa(tmp_path / "enc", qa=False)
    data = tiny_squad(tmp_path / "tiny.json")
    assert main(["eval-reader", "--data", str(data), "--model", str(model), "--json"]) == 2
    assert "not an extractive question-answering checkpoint" in capsys.readouterr().err


def test_articles_of_the_training_file_are_left_out(tmp_path, capsys):
    from odqa.cli import main
    from odqa.corpus.questions import drop_articles, keep_articles, load_questions
    from tests.reader_fixtures import save_tiny_qa

    data = tiny_squad(tmp_path / "tiny.json")
    both = json.loads(data.read_text())
    spain = {
        "title": "Spain",
        "paragraphs": [
            {
                "context": "Madrid is the capital of Spain.",
                "qas": [
                    {
                        "id": "s1",
                        "question": "What is the capital of Spain?",
                        "answers": [{"text": "Madrid", "answer_start": 0}],
                    }
                ],
            }
        ],
    }
    both["data"].append(spain)
    (tmp_path / "both.json").write_text(json.dumps(both))
    items = load_questions(tmp_path / "both.json")
    assert [q.id for q in drop_articles(items, data)] == ["s1"]  # the France article was "trained on"
    assert drop_articles(items, None) == items
    assert "s1" not in [q.id for q in keep_articles(items, data)]  # only the France article's questions
    assert len(keep_articles(items, data)) + 1 == len(items) and keep_articles(items, None) == items

    model = save_tiny_qa(tmp_path / "tiny")
    rc = main(
        [
            "eval-reader",
            "--data",
            str(tmp_path / "both.json"),
            "--model",
            str(model),
            "--json",
            "--threads",
            "1",
            "--exclude-articles-of",
            str(data),
        ]
    )
    assert rc == 0 and json.loads(capsys.readouterr().out.strip().splitlines()[-1])["questions"] == 1
    assert (
        main(
            [
                "eval-reader",
                "--data",
                str(data),
                "--model",
                str(model),
                "--exclude-articles-of",
                str(tmp_path / "missing.json"),
            ]
        )
        == 2
    )
    assert "missing.json" in capsys.readouterr().err
