"""Calibrated answer probabilities: P(the answer is correct), comparable across questions.

The reader's share (a softmax over one question's own candidate spans) says how an answer compares with its
rivals, not whether any of them is right: a question about something absent from the corpus still gets a
confident-looking winner. Calibration maps two scores of an answer to a probability with a logistic (Platt)
fit on a dev split whose answers were judged right or wrong:

* margin: the best span's score minus its passage's no-answer (null) score, on the same logit scale for
  every question;
* log share: the answer's share among the question's candidates and no-answer (evidence aggregation).

The parameters live in `calibration.json` beside the model (`run_qa.py fit-calibration` writes it), with the
probability threshold below which the application says "no confident answer".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from odqa.core.atomic import atomic_file
from odqa.core.errors import DataFormatError, OdqaError
from odqa.core.model_files import checked_values, read_model_json

CALIBRATION_FILE = "calibration.json"
FEATURES = ("margin", "log_share")
_MIN_SHARE = 1e-6


def confidence_features(margin: float, share: float) -> list[float]:
    return [float(margin), math.log(min(1.0, max(float(share), _MIN_SHARE)))]


# A probability is sigmoid(weights . features + bias); the features are logits and log shares (tens at most), so
# a weight or bias beyond this makes every answer certain or impossible, and 1e308 overflows to inf
CALIBRATION_BOUND = 100.0


@dataclass
class Calibration:
    """p = sigmoid(weights . [margin, log share] + bias). The default (not fitted) is sigmoid(margin): a
    span that beats its passage's null score gets p > 0.5."""

    weights: list[float] = field(
        default_factory=lambda: [1.0, 0.0], metadata={"minimum": -CALIBRATION_BOUND, "maximum": CALIBRATION_BOUND}
    )
    bias: float = field(default=0.0, metadata={"minimum": -CALIBRATION_BOUND, "maximum": CALIBRATION_BOUND})
    threshold: float = field(default=0.5, metadata={"minimum": 0, "maximum": 1})  # below it: "no confident answer"
    fitted: bool = False
    features: list[str] = field(default_factory=lambda: list(FEATURES))
    source: dict = field(default_factory=dict)  # what it was fitted on, with its dev metrics
    # a second fit for questions asked in another language than the passages' (its own weights, bias, threshold
    # and source); {}: none, and such answers are never called confident
    cross_language: dict = field(default_factory=dict)

    def probability(self, margin: float, share: float) -> float:
        x = float(np.dot(self.weights, confidence_features(margin, share)) + self.bias)
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))

    def confident(self, probability: float) -> bool:
        """Only a fitted calibration calls an answer confident: the unfitted sigmoid(margin) is no probability of
        being right (a reader with random weights scores p > 0.5 as often as not)."""
        return self.fitted and probability >= self.threshold

    def save(self, path: str | Path) -> None:
        with atomic_file(Path(path)) as tmp:
            tmp.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """A calibration.json, each value held to its field's rule (a threshold within 0-1, finite weights and
        bias within +-CALIBRATION_BOUND, `fitted` true or false): refused in one line naming the file, the key,
        the value and the range."""
        path = Path(path)
        if not path.exists() and not path.is_symlink():
            raise OdqaError(f"calibration file not found: {path} (write one with `run_qa.py fit-calibration`)")
        fix = "refit it with `run_qa.py fit-calibration`"
        data = read_model_json(path, fix)
        if data.get("features", list(FEATURES)) != list(FEATURES) or not isinstance(data.get("weights", []), list):
            raise DataFormatError(
                f"{path}: not an odqa calibration file (expected weights over {list(FEATURES)}); {fix}"
            )
        known = checked_values(path, data, cls, fix)
        if len(known.get("weights", [])) != len(FEATURES):
            raise DataFormatError(f"{path}: weights must hold {len(FEATURES)} numbers, one per {list(FEATURES)}; {fix}")
        return cls(**known)

    def for_cross_language(self) -> Calibration | None:
        """The calibration of answers to questions in another language than their passages', None where none was
        fitted on such pairs."""
        if not self.cross_language:
            return None
        fields = self.__dataclass_fields__
        known = {k: v for k, v in self.cross_language.items() if k in fields and k != "cross_language"}
        return Calibration(**known)

    @classmethod
    def for_model(cls, model_dir: str | Path) -> Calibration:
        """The model folder's calibration.json, or the unfitted default."""
        path = Path(model_dir) / CALIBRATION_FILE
        return cls.load(path) if path.is_file() else cls()


def fit_platt(x: np.ndarray, correct: np.ndarray, l2: float = 1e-3) -> tuple[list[float], float]:
    """Logistic regression of `correct` (0/1) on the feature rows `x`, by L-BFGS on the mean log loss with
    a small L2 penalty on the weights (keeps the fit finite when the dev answers are separable)."""
    import torch

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
        raise OdqaError("calibration needs one feature row per judged answer")
    if y.min() == y.max():
        raise OdqaError(
            f"calibration needs right and wrong answers on dev; all {len(y)} were "
            f"{'right' if y[0] else 'wrong'} (use more questions)"
        )
    xt, yt = torch.tensor(x), torch.tensor(y)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(xt @ w + b, yt) + l2 * (w @ w)
        loss.backward()
        return loss

    opt.step(closure)
    return [float(v) for v in w.detach()], float(b.detach())


def choose_threshold(probabilities: Sequence[float], correct: Sequence[float]) -> float:
    """The probability threshold that best separates right from wrong answers on dev (most answers right
    above it plus wrong below it); the lowest such threshold on ties, so as few answers as possible are
    withheld."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(correct, dtype=bool)
    best_t, best_acc = 0.5, -1.0
    for t in np.unique(np.concatenate([p, [0.5, 1.0]])):
        acc = float(np.mean(np.where(p >= t, y, ~y)))
        if acc > best_acc + 1e-12:
            best_t, best_acc = float(t), acc
    return best_t


def threshold_for_precision(
    probabilities: Sequence[float], correct: Sequence[float], precision: float, min_answers: int = 20
) -> float:
    """The lowest probability threshold at which the answers at or above it are right at least `precision` of
    the time on dev (at least `min_answers` of them, so a handful of lucky answers cannot set it); 1.0 when no
    threshold reaches it. The lowest such threshold withholds the fewest answers."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    order = np.argsort(-p, kind="stable")
    right = np.cumsum(y[order])
    count = np.arange(1, len(p) + 1)
    best = 1.0
    for i in range(len(p)):
        last_of_tie = i == len(p) - 1 or p[order[i + 1]] < p[order[i]]
        if last_of_tie and count[i] >= min_answers and right[i] / count[i] >= precision:
            best = float(p[order[i]])
    return best


def fit_calibration(
    margins: Sequence[float],
    shares: Sequence[float],
    correct: Sequence[float],
    source: dict | None = None,
    target_precision: float | None = None,
) -> Calibration:
    """Fit weights and threshold on judged dev answers (one top answer per question). The threshold: with
    `target_precision`, the lowest at which the answers called confident are right that often on dev; else the
    one that best separates right from wrong."""
    x = np.array([confidence_features(m, s) for m, s in zip(margins, shares)])
    weights, bias = fit_platt(x, np.asarray(correct))
    cal = Calibration(weights=weights, bias=bias, fitted=True, source=dict(source or {}))
    probabilities = [cal.probability(m, s) for m, s in zip(margins, shares)]
    if target_precision is None:
        cal.threshold = round(choose_threshold(probabilities, correct), 4)
    else:
        cal.threshold = round(threshold_for_precision(probabilities, correct, target_precision), 4)
        cal.source["target_precision"] = target_precision
    return cal
