"""Pictures of evaluations (issue 77): `eval-retrieval --plot` draws recall@k, one curve per retriever (several
with --retrievers); `eval-qa --plot` the reliability diagram of the calibrated probability with the reader's
confident threshold; without the `plot` extra each is one line naming it, before any work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.extras_checks import one_error, run_hiding
from tests.retrieval_cli import run

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def test_recall_figure_has_one_curve_per_retriever_at_the_ks():
    from odqa.eval.plots import recall_figure

    curves = {"bm25": {"recall@1": 40.0, "recall@20": 80.0}, "dense": {"recall@1": 50.0, "recall@20": 90.0}}
    axes = recall_figure(curves, [1, 20]).axes[0]
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in axes.get_lines()}
    assert lines == {"bm25": ([1, 20], [40.0, 80.0]), "dense": ([1, 20], [50.0, 90.0])}


def test_reliability_figure_bins_the_probabilities_and_marks_the_threshold():
    from odqa.eval.plots import reliability_bins, reliability_figure

    probabilities = [0.05, 0.15, 0.95, 0.9, 0.92]
    right = [0.0, 0.0, 1.0, 1.0, 0.0]
    rows, ece = reliability_bins(probabilities, right)
    assert [(round(centre, 2), count) for centre, _, _, count in rows] == [(0.05, 1), (0.15, 1), (0.95, 3)]
    assert rows[-1][2] == pytest.approx(2 / 3) and ece == pytest.approx(
        (0.05 + 0.15 + 3 * abs(0.9233 - 2 / 3)) / 5, 1e-3
    )
    top, bottom = reliability_figure(probabilities, right, 0.54).axes
    assert [list(line.get_xdata()) for line in top.get_lines() if line.get_color() == "tab:red"] == [[0.54, 0.54]]
    assert [bar.get_height() for bar in bottom.patches] == [1, 1, 3]
    uncalibrated = reliability_figure(probabilities, right, None).axes[0]
    assert not [line for line in uncalibrated.get_lines() if line.get_color() == "tab:red"]


def test_eval_retrieval_plots_several_retrievers_in_one_run(tmp_path):
    from tests.retrieval_cli import ARTICLES, QUESTIONS

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(a) + "\n" for a in ARTICLES))
    (tmp_path / "q.qa.tsv").write_text(QUESTIONS)
    run("index", "--corpus", corpus, "--out", tmp_path / "idx")
    proc = run(
        "eval-retrieval",
        "--index",
        tmp_path / "idx",
        "--questions",
        tmp_path / "q.qa.tsv",
        "--retrievers",
        "bm25",
        "dense",
        "--k",
        "1",
        "2",
        "--plot",
        tmp_path / "recall.png",
        "--json",
    )
    report = json.loads(proc.stdout.splitlines()[-1])
    assert set(report["retrievers"]) == {"bm25", "dense"}
    assert all(m["retriever"] == name and "recall@2" in m for name, m in report["retrievers"].items())
    assert "retriever bm25:" in proc.stderr and "retriever dense:" in proc.stderr
    assert (tmp_path / "recall.png").read_bytes().startswith(PNG)
    refused = run(
        "eval-retrieval", "--index", tmp_path / "idx", "--questions", tmp_path / "q.qa.tsv", "--plot", "r.txt",
        check_ok=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "name a .png, .svg or .pdf file" in refused.stderr


@pytest.mark.subprocess
def test_eval_qa_draws_the_reliability_diagram(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "run_qa.py",
            "eval-qa",
            "--questions",
            "odqa/demo/questions.jsonl",
            "--limit",
            "6",
            "--retriever",
            "bm25",
            "--no-linker",
            "--plot",
            str(tmp_path / "reliability.svg"),
            "--json",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1])["questions"] == 6
    assert (tmp_path / "reliability.svg").read_text().lstrip().startswith("<?xml")
    # the progress counts questions, not batches of them
    assert "eval-qa: 100%" in proc.stderr and "6/6 [" in proc.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("command", ["eval-qa", "eval-retrieval"])
def test_plot_without_the_plot_extra_is_one_line_before_any_work(tmp_path, command):
    argv = [command, "--questions", "odqa/demo/questions.jsonl", "--plot", str(tmp_path / "p.png")]
    error = one_error(run_hiding(f"sys.exit(main({argv!r}))\n", "matplotlib"))
    assert "--plot needs matplotlib" in error and "pip install 'odqa[plot]'" in error, error
    assert not (tmp_path / "p.png").exists()
