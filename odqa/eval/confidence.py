"""How much a confidence means: AUROC for "the top answer is correct", expected calibration error, and EM when
only the most confident share of questions is answered; and the judged top answers these are computed from,
read from SQuAD-format dev data (gold paragraph, optionally with other paragraphs of the same article)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from odqa.core.types import Passage
from odqa.corpus.questions import QAItem
from odqa.eval.qa import score_answer
from odqa.eval.reader_eval import metric_for


@dataclass
class JudgedAnswer:
    """One question's top answer: its confidence inputs, its calibrated probability and whether it is right."""

    id: str
    prediction: str
    margin: float
    share: float
    probability: float
    em: float
    f1: float


def auroc(confidence: Sequence[float], correct: Sequence[float]) -> float | None:
    """Area under the ROC curve of `confidence` separating right (1) from wrong (0) answers: the chance that a
    random right answer is more confident than a random wrong one (ties count half). None if one class is absent."""
    from scipy.stats import mannwhitneyu

    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=bool)
    if y.all() or not y.any():
        return None
    u = mannwhitneyu(c[y], c[~y], alternative="two-sided").statistic
    return float(u / (y.sum() * (~y).sum()))


def expected_calibration_error(probability: Sequence[float], correct: Sequence[float], bins: int = 10) -> float:
    """Mean |accuracy - confidence| over `bins` equal-width probability bins, weighted by the bins' sizes."""
    p = np.asarray(probability, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if len(p) == 0:
        return 0.0
    which = np.minimum((p * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        in_bin = which == b
        if in_bin.any():
            error += in_bin.sum() * abs(y[in_bin].mean() - p[in_bin].mean())
    return float(error / len(p))


def em_at_coverage(probability: Sequence[float], em: Sequence[float], coverage: float = 0.5) -> float:
    """Mean EM over the `coverage` share of questions with the highest confidence (ties broken by order)."""
    p = np.asarray(probability, dtype=np.float64)
    y = np.asarray(em, dtype=np.float64)
    n = max(1, int(round(coverage * len(p))))
    order = np.argsort(-p, kind="stable")[:n]
    return float(y[order].mean()) if len(p) else 0.0


def confidence_metrics(judged: Sequence[JudgedAnswer], threshold: float | None = None) -> dict:
    """Figures of merit of the calibrated probabilities of `judged` (EM decides right or wrong)."""
    p = [j.probability for j in judged]
    em = [j.em for j in judged]
    area = auroc(p, em)
    out = {
        "questions": len(judged),
        "em": round(100 * float(np.mean(em)), 2) if judged else 0.0,
        "f1": round(100 * float(np.mean([j.f1 for j in judged])), 2) if judged else 0.0,
        "auroc": round(area, 4) if area is not None else None,
        "ece": round(expected_calibration_error(p, em), 4),
        "em_at_50_coverage": round(100 * em_at_coverage(p, em, 0.5), 2),
        "mean_probability": round(float(np.mean(p)), 4) if judged else 0.0,
    }
    if threshold is not None:
        sure = [j for j in judged if j.probability >= threshold]
        out["threshold"] = threshold
        out["confident_share"] = round(100 * len(sure) / len(judged), 2) if judged else 0.0
        out["em_when_confident"] = round(100 * float(np.mean([j.em for j in sure])), 2) if sure else None
    return out


def judge(item: QAItem, prediction: str, metric: str = "squad") -> tuple[float, float]:
    """(EM, F1) in [0, 1] under `metric`; an unanswerable question has no right answer, so any answer to it is
    wrong."""
    if item.impossible or not item.answers:
        return 0.0, 0.0
    return score_answer(prediction, item, metric)


def article_split(items: Sequence[QAItem], part: str) -> list[QAItem]:
    """Half of a SQuAD file's questions, split by article so no paragraph is in both halves: `fit` holds
    the articles at even positions in order of first appearance, `check` the odd ones, `all` everything.
    Calibration is fitted on one half and measured on the other."""
    if part == "all":
        return list(items)
    if part not in ("fit", "check"):
        raise ValueError(f"part must be fit, check or all, not {part!r}")
    order: dict[str, int] = {}
    for item in items:
        order.setdefault(item.title, len(order))
    want = 0 if part == "fit" else 1
    return [item for item in items if order[item.title] % 2 == want]


def sample_questions(items: Sequence[QAItem], limit: int | None, seed: int = 0) -> list[QAItem]:
    """A seeded random sample of `limit` questions in their original order (all when limit is 0 or None), so a
    small dev sample spreads over every article instead of the first few."""
    if not limit or limit >= len(items):
        return list(items)
    keep = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in keep]


def passages_with_distractors(items: Sequence[QAItem], distractors: int, seed: int = 0) -> list[list[Passage]]:
    """Per question: its gold paragraph, then up to `distractors` other paragraphs of the same article, in a
    seeded random order. Topical distractors are what an open-domain reader meets among its top passages."""
    paragraphs: dict[str, list[str]] = {}
    for item in items:
        seen = paragraphs.setdefault(item.title, [])
        if item.context not in seen:
            seen.append(item.context)
    rng = random.Random(seed)
    out = []
    for item in items:
        pool = paragraphs[item.title]
        others = [i for i, c in enumerate(pool) if c != item.context]
        chosen = rng.sample(others, min(distractors, len(others)))
        gold = pool.index(item.context)
        read = [gold] + chosen
        rng.shuffle(read)
        out.append([Passage(id=f"{item.title}#{i}", title=item.title, text=pool[i]) for i in read])
    return out


def judge_reader(
    reader, items: Sequence[QAItem], distractors: int = 0, seed: int = 0, progress: bool = False
) -> list[JudgedAnswer]:
    """Each question's top answer from its gold paragraph (and `distractors` other paragraphs of its article),
    judged against its reference answers. Questions whose passages yield no span at all are left out."""
    from tqdm.auto import tqdm

    passages = passages_with_distractors(items, distractors, seed)
    metric = metric_for(items) if items else "squad"
    judged = []
    for item, read in tqdm(list(zip(items, passages)), desc="judge", unit="q", disable=not progress, mininterval=5):
        answers = reader.read(item.question, read, top_n=1)
        if not answers:
            continue
        top = answers[0]
        em, f1 = judge(item, top.text, metric)
        judged.append(JudgedAnswer(item.id, top.text, top.margin, top.share, top.probability, em, f1))
    return judged


def judge_pipeline(
    pipeline, items: Sequence[QAItem], batch_size: int = 8, progress: bool = False
) -> list[JudgedAnswer]:
    """Each open-domain question's top answer from the pipeline (its retriever, k and reader), judged by the
    end-to-end metric of the questions' language (SQuAD normalisation for English, KorQuAD's and CMRC 2018's
    for Korean and Chinese; regex for CuratedTREC)."""
    from tqdm.auto import tqdm

    metric = metric_for(items) if items else "squad"
    judged = []
    for lo in tqdm(range(0, len(items), batch_size), desc="judge", unit=" batch", disable=not progress, mininterval=5):
        batch = items[lo : lo + batch_size]
        for item, result in zip(batch, pipeline.ask_batch([q.question for q in batch])):
            if not result.answers:
                continue
            top = result.answers[0]
            em, f1 = score_answer(top.text, item, metric)
            judged.append(JudgedAnswer(item.id, top.text, top.margin, top.share, top.probability, em, f1))
    return judged
