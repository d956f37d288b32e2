"""End-to-end QA evaluation: EM/F1 of the top answer (SQuAD normalisation; KorQuAD 1.0's and CMRC 2018's official
metrics for Korean and Chinese questions; regex match for CuratedTREC) beside the retrieval recall@k of the same
run."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from odqa.core import strict_json
from odqa.core.answers import best_over_truths, exact_match, f1_score, regex_match
from odqa.core.atomic import atomic_file
from odqa.corpus.questions import QAItem
from odqa.eval.reader_eval import metric_for, score_prediction
from odqa.eval.retrieval import judge, summarize


def score_answer(prediction: str, item: QAItem, metric: str = "squad") -> tuple[float, float]:
    """(EM, F1) of one prediction against the item's answers under `metric` (reader_eval.METRICS); regex
    answers have EM = F1 = match."""
    if item.regex:
        match = regex_match(prediction, item.answers) if prediction else 0.0
        return match, match
    if metric != "squad":
        return score_prediction(prediction, item.answers, metric)
    return best_over_truths(exact_match, prediction, item.answers), best_over_truths(f1_score, prediction, item.answers)


def evaluate_qa(
    pipeline,
    items: Sequence[QAItem],
    ks: Sequence[int] = (1, 5, 10, 20),
    batch_size: int = 8,
    per_question: str | Path | None = None,
    progress: bool = True,
    k: int | None = None,
    plot: str | Path | None = None,
) -> dict:
    """`k`: passages retrieved and read per question (default: the largest recall cut-off); `plot`: draw the
    reliability diagram of the top answers' calibrated probability there (odqa.eval.plots)."""
    depth = k or max(ks)
    metric = metric_for(items)  # the official metric of the questions' language
    rows, judged = [], []
    em_sum = f1_sum = 0.0
    # reading accuracy apart from retrieval: EM over the questions whose answer was in a passage read
    read_hits = em_given_read = 0.0
    start = time.perf_counter()
    bar = tqdm(total=len(items), desc="eval-qa", unit=" q", disable=not progress, mininterval=2)
    for i in range(0, len(items), batch_size):
        batch = items[i : i + batch_size]
        for item, result in zip(batch, pipeline.ask_batch([q.question for q in batch], k=depth)):
            top = result.answers[0] if result.answers else None
            prediction = top.text if top else ""
            em, f1 = score_answer(prediction, item, metric)
            em_sum, f1_sum = em_sum + em, f1_sum + f1
            judged.append(judge(item, result.passages))
            if judged[-1].first_hit_rank is not None:
                read_hits += 1
                em_given_read += em
            rows.append(
                {
                    "id": item.id,
                    "question": item.question,
                    "answers": item.answers,
                    "prediction": prediction,
                    "em": em,
                    "f1": round(f1, 4),
                    "first_hit_rank": judged[-1].first_hit_rank,
                    "title": top.title if top else "",
                    "probability": round(top.probability, 4) if top else 0.0,
                    "confident": result.confident,
                    "margin": round(top.margin, 4) if top else None,
                    "share": round(top.share, 4) if top else None,
                }
            )
        bar.update(len(batch))
    bar.close()
    seconds = time.perf_counter() - start
    n = len(items)
    metrics = {"em": round(100 * em_sum / n, 2), "f1": round(100 * f1_sum / n, 2), "metric": metric}
    metrics["answer_in_read"] = round(100 * read_hits / n, 2) if n else 0.0
    metrics["em_given_answer_read"] = round(100 * em_given_read / read_hits, 2) if read_hits else 0.0
    retrieval = summarize(judged, ks)
    metrics.update({key: value for key, value in retrieval.items() if key.startswith("recall@")})
    metrics.update(
        questions=n, seconds=round(seconds, 2), questions_per_second=round(n / seconds, 2) if seconds else 0.0
    )
    if plot:
        from odqa.eval.plots import reliability_diagram

        answered = [r for r in rows if r["prediction"]]
        calibration = pipeline.reader.calibration
        reliability_diagram(
            [r["probability"] for r in answered],
            [r["em"] for r in answered],
            calibration.threshold if calibration.fitted else None,
            plot,
        )
    if per_question:
        with atomic_file(per_question) as tmp:
            tmp.write_text("".join(strict_json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return metrics
