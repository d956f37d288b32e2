"""Pictures of an evaluation (the `plot` extra, matplotlib): recall@k curves, one per retriever, as DPR's figures
draw them (`eval-retrieval --plot`), and the reliability diagram of the calibrated probability with the reader's
confident threshold (`eval-qa --plot`). The format is the file's suffix (png, svg, pdf); each file is written whole
or not at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from odqa.core.atomic import atomic_file
from odqa.core.errors import OdqaError
from odqa.core.optional import require

PLOT_FORMATS = ("png", "svg", "pdf")
RELIABILITY_BINS = 10


def check_plot_target(path: str | Path | None) -> None:
    """Before any work: matplotlib is installed (the `plot` extra) and the file's suffix names a format."""
    if not path:
        return
    require("matplotlib", "--plot")
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise OdqaError(f"--plot {path}: name a .png, .svg or .pdf file (the suffix sets the format)")


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.8), layout="constrained")
    FigureCanvasAgg(figure)  # no pyplot: no window, no state shared across calls
    return figure


def _save(figure, path: str | Path) -> Path:
    path = Path(path)
    with atomic_file(path) as tmp:
        figure.savefig(tmp, format=path.suffix.lower().lstrip("."), dpi=150)
    return path


def recall_curves(
    curves: Mapping[str, Mapping[str, float]], ks: Sequence[int], path: str | Path, title: str = ""
) -> Path:
    """recall@k (percent) against k, one line per retriever, written to `path`: `curves` maps a retriever's name
    to eval-retrieval's metrics (its `recall@{k}` values)."""
    return _save(recall_figure(curves, ks, title), path)


def recall_figure(curves: Mapping[str, Mapping[str, float]], ks: Sequence[int], title: str = ""):
    """The figure of `recall_curves`."""
    figure = _figure()
    axes = figure.add_subplot()
    for name, metrics in curves.items():
        axes.plot(ks, [metrics[f"recall@{k}"] for k in ks], marker="o", label=name)
    if len(ks) > 1 and max(ks) / min(ks) >= 20:
        axes.set_xscale("log")
    axes.set_xticks(list(ks), [str(k) for k in ks])
    axes.set_xlabel("k (passages retrieved)")
    axes.set_ylabel("top-k accuracy: questions with an answer in the top k (%)")
    axes.set_ylim(0, 100)
    axes.grid(True, alpha=0.3)
    axes.legend(title="retriever")
    axes.set_title(title or "Retrieval recall@k")
    return figure


def reliability_bins(probabilities: Sequence[float], correct: Sequence[float], bins: int = RELIABILITY_BINS):
    """(bin centre, mean probability, share correct, count) of each non-empty equal-width probability bin, and the
    expected calibration error (the count-weighted mean gap between probability and share correct)."""
    import numpy as np

    p = np.clip(np.asarray(probabilities, dtype=float), 0.0, 1.0)
    y = np.asarray(correct, dtype=float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        mine = index == b
        if mine.any():
            rows.append(((b + 0.5) / bins, float(p[mine].mean()), float(y[mine].mean()), int(mine.sum())))
            ece += mine.sum() / len(p) * abs(p[mine].mean() - y[mine].mean())
    return rows, float(ece)


def reliability_diagram(
    probabilities: Sequence[float], correct: Sequence[float], threshold: float | None, path: str | Path, title: str = ""
) -> Path:
    """Share of answers right (EM) against their calibrated probability, in equal-width bins, beside the diagonal
    of a perfect calibration; the bars below count the answers per bin; a vertical line marks the reader's
    confident threshold (None: an uncalibrated reader, none drawn). Written to `path`."""
    return _save(reliability_figure(probabilities, correct, threshold, title), path)


def reliability_figure(probabilities: Sequence[float], correct: Sequence[float], threshold: float | None, title=""):
    """The figure of `reliability_diagram`."""
    if not probabilities:
        raise OdqaError("--plot: no answered question to draw")
    rows, ece = reliability_bins(probabilities, correct)
    figure = _figure()
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    top.plot([r[1] for r in rows], [r[2] for r in rows], marker="o", label="answers (EM)")
    if threshold is not None:
        for axes in (top, bottom):
            axes.axvline(threshold, color="tab:red", linewidth=1)
        top.text(threshold, 0.02, f" confident from p = {threshold:.2f}", color="tab:red", fontsize=8)
    top.set_ylabel("share right")
    top.set_ylim(0, 1)
    top.grid(True, alpha=0.3)
    top.legend(loc="upper left")
    top.set_title(title or f"Reliability of the calibrated probability (ECE {ece:.3f}, {len(probabilities)} answers)")
    width = 1 / RELIABILITY_BINS
    bottom.bar([r[0] for r in rows], [r[3] for r in rows], width=width * 0.9, color="tab:blue", alpha=0.6)
    bottom.set_xlim(0, 1)
    bottom.set_xlabel("calibrated probability of the top answer")
    bottom.set_ylabel("answers")
    return figure
