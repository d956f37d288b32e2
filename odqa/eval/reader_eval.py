"""Reader evaluation: official EM and F1 (0-100) given each question's gold paragraph.

The metrics are those of the official SQuAD v1.1 script (odqa.core.answers), or for Korean and Chinese data
KorQuAD 1.0's and CMRC 2018's (odqa.eval.cjk_metrics), picked from the data's language: per question the
maximum over the gold answers, then the mean. With `allow_null` (SQuAD v2.0) unanswerable questions are included;
their gold answer is the empty string, as in the v2.0 script, and an empty prediction scores 1.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from odqa.core import strict_json
from odqa.core.answers import exact_match, f1_score, normalize_answer
from odqa.core.atomic import atomic_file
from odqa.core.errors import OdqaError
from odqa.corpus.questions import QAItem, drop_articles, load_questions
from odqa.eval import cjk_metrics

# metric name: (exact match, F1) of one prediction against one gold answer
METRICS = {
    "squad": (exact_match, f1_score),
    "korquad": (cjk_metrics.korquad_exact_match, cjk_metrics.korquad_f1),
    "cmrc2018": (cjk_metrics.cmrc_exact_match, cjk_metrics.cmrc_f1),
}
METRIC_OF_LANGUAGE = {"en": "squad", "ko": "korquad", "zh": "cmrc2018"}


def items_language(items: Sequence[QAItem]) -> str:
    """The language of SQuAD-format questions and their paragraphs (en, ko or zh), from the first ones."""
    from odqa.indexes.analysis import detect_language

    return detect_language([f"{q.context or ''} {q.question}" for q in items[:50]])


def metric_for(items: Sequence[QAItem], metric: str = "auto") -> str:
    """`metric`, or with `auto` the official metric of the data's language (detected from its first paragraphs
    and questions)."""
    if metric != "auto":
        if metric not in METRICS:
            raise OdqaError(f"unknown reader metric {metric!r}; choose auto or one of {', '.join(METRICS)}")
        return metric

    return METRIC_OF_LANGUAGE[items_language(items)]


def score_prediction(prediction: str, truths: Sequence[str], metric: str = "squad") -> tuple[float, float]:
    """(EM, F1) in [0, 1] of one prediction against its gold answers (empty list: unanswerable)."""
    exact, overlap = METRICS[metric]
    truths = [t for t in truths if normalize_answer(t)] or list(truths) or [""]
    em = max(exact(prediction, t) for t in truths)
    if truths == [""]:
        return em, em  # v2.0: F1 of an unanswerable question is 1 iff the prediction is empty
    f1 = max(overlap(prediction, t) for t in truths)
    return em, f1


def squad_metrics(
    predictions: dict[str, str], gold: Mapping[str, Sequence[str]], metric: str = "squad"
) -> dict[str, float]:
    """Mean EM/F1 in percent over the questions of `gold`; a missing prediction counts as empty."""
    if not gold:
        return {"em": 0.0, "f1": 0.0, "questions": 0}
    em = f1 = 0.0
    for qid, truths in gold.items():
        e, f = score_prediction(predictions.get(qid, ""), truths, metric)
        em += e
        f1 += f
    return {"em": 100.0 * em / len(gold), "f1": 100.0 * f1 / len(gold), "questions": len(gold)}


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def predict_answers(
    reader, items, threshold: float | None = None, chunk: int = 64, progress: bool = False
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(predictions, gold answers) by question id: each question's best span in its gold paragraph, read in
    batches of `chunk`; "" where the reader answers nothing (only with a `threshold`)."""
    preds: dict[str, str] = {}
    gold: dict[str, list[str]] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc="eval-reader", unit="q", mininterval=5)
    for part in _chunks(list(items), chunk):
        answers = reader.read_batch(
            [q.question for q in part],
            [q.context for q in part],
            no_answer_threshold=threshold,
            titles=[q.title for q in part],
        )
        for q, a in zip(part, answers):
            key = q.id or str(len(gold))
            preds[key] = a.text if a is not None else ""
            gold[key] = [] if q.impossible else list(q.answers)
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    return preds, gold


def rounded(metrics: dict, seconds: float) -> dict:
    return {
        "em": round(metrics["em"], 2),
        "f1": round(metrics["f1"], 2),
        "questions": metrics["questions"],
        "seconds": round(seconds, 1),
    }


def evaluate_reader(
    reader,
    data: str | Path,
    limit: int | None = None,
    allow_null: bool = False,
    predictions_path: str | Path | None = None,
    progress: bool = False,
    chunk: int = 64,
    exclude_articles_of: str | Path | None = None,
    metric: str = "auto",
) -> dict[str, float]:
    """Read each question's gold paragraph and score the best span. Returns em, f1 (0-100), questions, seconds.
    `exclude_articles_of`: a SQuAD file whose articles are skipped (those a model was trained on); `limit`
    then counts the questions left. `metric`: squad, korquad, cmrc2018 or auto (from the data's language)."""
    items = drop_articles(load_questions(data, include_impossible=allow_null), exclude_articles_of)[: limit or None]
    threshold = reader.settings.no_answer_threshold if allow_null else None
    if allow_null and threshold is None:
        threshold = 0.0
    t0 = time.time()
    metric = metric_for(items, metric)
    preds, gold = predict_answers(reader, items, threshold, chunk, progress)
    metrics = {**rounded(squad_metrics(preds, gold, metric), time.time() - t0), "metric": metric}
    if predictions_path:
        with atomic_file(predictions_path) as tmp:
            tmp.write_text(strict_json.dumps(preds, ensure_ascii=False, indent=1), encoding="utf-8")
    return metrics
