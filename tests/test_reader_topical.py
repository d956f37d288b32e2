import pytest

from odqa.reader.training.topical import topical_negatives


def _squad():
    return {
        "data": [
            {
                "title": "A",
                "paragraphs": [
                    {
                        "context": "Paris is the capital of France.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "What is the capital of France?",
                                "answers": [{"text": "Paris", "answer_start": 0}],
                            }
                        ],
                    },
                    {
                        "context": "The Seine flows through the city.",
                        "qas": [
                            {
                                "id": "q2",
                                "question": "What river flows through it?",
                                "answers": [{"text": "Seine", "answer_start": 4}],
                            }
                        ],
                    },
                    {"context": "Paris hosted the Olympics; the Seine was used.", "qas": []},
                ],
            },
            {
                "title": "B",
                "paragraphs": [
                    {
                        "context": "Only one paragraph.",
                        "qas": [{"id": "q3", "question": "Anything?", "answers": [{"text": "one", "answer_start": 5}]}],
                    }
                ],
            },
        ]
    }


def test_negative_never_holds_an_answer_and_stays_in_its_article():
    data = topical_negatives(_squad(), ratio=1.0, seed=0)
    assert [a["title"] for a in data["data"]] == ["A"]  # a one-paragraph article gives no negative
    pairs = {(qa["question"], p["context"]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]}
    assert ("What is the capital of France?", "The Seine flows through the city.") in pairs
    assert ("What river flows through it?", "Paris is the capital of France.") in pairs
    assert all("Paris" not in c for q, c in pairs if "capital" in q)
    assert all(
        qa["is_impossible"] and qa["answers"] == [] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]
    )


def test_ratio_zero_gives_nothing_and_seed_is_deterministic():
    assert topical_negatives(_squad(), ratio=0.0)["data"] == []
    assert topical_negatives(_squad(), 0.5, seed=3) == topical_negatives(_squad(), 0.5, seed=3)


@pytest.mark.subprocess
def test_build_topical_negatives_command(tmp_path):
    import json
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    src, out = tmp_path / "train.json", tmp_path / "neg.json"
    src.write_text(json.dumps(_squad()))
    run = [sys.executable, "run_qa.py", "build-topical-negatives", "--squad", str(src), "--output", str(out)]
    proc = subprocess.run(run + ["--ratio", "1.0", "--seed", "0"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["negatives"] == 2 and json.loads(out.read_text()) == topical_negatives(_squad(), 1.0, seed=0)
    proc = subprocess.run(run + ["--ratio", "2"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "ratio" in proc.stderr and "Traceback" not in proc.stderr
    missing = [*run[:4], str(tmp_path / "none.json"), *run[5:]]
    proc = subprocess.run(missing, cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "none.json" in proc.stderr and "Traceback" not in proc.stderr
