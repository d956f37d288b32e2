"""Evaluators: one interface for every evaluation, as sentence-transformers' SentenceEvaluator.

An evaluator holds its data and settings; called on a system it returns a dict of metrics, and names the one
metric that ranks systems (`primary_metric`, higher is better), which model selection and early stopping
read. The figures are those of the functions they call (`evaluate_retrieval`, `evaluate_qa`,
`evaluate_reader`, `linker.metrics.evaluate`), so the CLI's `eval-*` commands and bench/ report the same
numbers whichever they use.

    evaluator = RetrievalEvaluator(load_questions("nq-dev.jsonl"), ks=(1, 5, 20))
    metrics = evaluator(bundle.retriever("hybrid"))
    metrics[evaluator.primary_metric]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from odqa.core.protocols import Linker, Reader, Retriever
from odqa.corpus.questions import QAItem
from odqa.eval.linking import measure_speed
from odqa.eval.qa import evaluate_qa
from odqa.eval.reader_eval import evaluate_reader
from odqa.eval.retrieval import DEFAULT_KS, evaluate_retrieval
from odqa.linker.data import ELExample
from odqa.linker.metrics import evaluate as linking_metrics


class Evaluator(ABC):
    """`evaluator(system) -> {metric: value}`; `primary_metric` is the key that ranks systems."""

    name: str = "evaluator"
    primary_metric: str = ""

    @abstractmethod
    def __call__(self, system: Any) -> dict[str, Any]: ...

    def primary(self, metrics: dict[str, Any]) -> float:
        return float(metrics[self.primary_metric])


class RetrievalEvaluator(Evaluator):
    """Top-k retrieval accuracy (DPR's answer match), MRR and gold-passage recall of a `Retriever`."""

    name = "retrieval"

    def __init__(
        self,
        items: Sequence[QAItem],
        ks: Sequence[int] = DEFAULT_KS,
        batch_size: int = 32,
        per_question: str | Path | None = None,
        run_out: str | Path | None = None,
        progress: bool = True,
        primary_metric: str = "",
        trec_run: str | Path | None = None,
        dpr_json: str | Path | None = None,
        run_tag: str = "odqa",
    ):
        self.items, self.ks = list(items), sorted(set(ks))
        self.batch_size, self.per_question, self.run_out, self.progress = batch_size, per_question, run_out, progress
        self.trec_run, self.dpr_json, self.run_tag = trec_run, dpr_json, run_tag
        self.primary_metric = primary_metric or ("recall@20" if 20 in self.ks else f"recall@{self.ks[-1]}")

    def __call__(self, retriever: Retriever) -> dict[str, Any]:
        return evaluate_retrieval(
            retriever,
            self.items,
            self.ks,
            batch_size=self.batch_size,
            per_question=self.per_question,
            progress=self.progress,
            run_out=self.run_out,
            trec_run=self.trec_run,
            dpr_json=self.dpr_json,
            run_tag=self.run_tag,
        )


class QAEvaluator(Evaluator):
    """End-to-end EM/F1 of a pipeline's top answer beside the recall@k of the passages it read."""

    name = "qa"
    primary_metric = "em"

    def __init__(
        self,
        items: Sequence[QAItem],
        ks: Sequence[int] = (1, 5, 10, 20),
        k: int | None = None,
        batch_size: int = 8,
        per_question: str | Path | None = None,
        progress: bool = True,
        plot: str | Path | None = None,
    ):
        self.items, self.ks, self.k = list(items), list(ks), k
        self.batch_size, self.per_question, self.progress, self.plot = batch_size, per_question, progress, plot

    def __call__(self, pipeline) -> dict[str, Any]:
        return evaluate_qa(
            pipeline,
            self.items,
            self.ks,
            batch_size=self.batch_size,
            per_question=self.per_question,
            progress=self.progress,
            k=self.k,
            plot=self.plot,
        )


class ReaderEvaluator(Evaluator):
    """EM/F1 of a `Reader` given each question's gold paragraph (SQuAD's, KorQuAD's or CMRC 2018's metric)."""

    name = "reader"
    primary_metric = "f1"

    def __init__(
        self,
        data: str | Path,
        limit: int | None = None,
        allow_null: bool = False,
        predictions_path: str | Path | None = None,
        progress: bool = False,
        exclude_articles_of: str | Path | None = None,
        metric: str = "auto",
    ):
        self.data, self.limit, self.allow_null, self.predictions_path = data, limit, allow_null, predictions_path
        self.progress, self.exclude_articles_of, self.metric = progress, exclude_articles_of, metric

    def __call__(self, reader: Reader) -> dict[str, Any]:
        return evaluate_reader(
            reader,
            self.data,
            limit=self.limit,
            allow_null=self.allow_null,
            predictions_path=self.predictions_path,
            progress=self.progress,
            exclude_articles_of=self.exclude_articles_of,
            metric=self.metric,
        )


class LinkingEvaluator(Evaluator):
    """Entity-linking precision, recall and F1 (strong / weak / entity, overall and in-KB) of a `Linker`,
    and with `speed` its latency at batch 1 and throughput at batch 64."""

    name = "linking"
    primary_metric = "weak_f1_in_kb"

    def __init__(self, examples: Sequence[ELExample], speed: bool = False, n_single: int = 100, n_batch: int = 256):
        self.examples, self.speed, self.n_single, self.n_batch = list(examples), speed, n_single, n_batch
        self.predictions: list = []  # of the last call, for per-question reports

    def __call__(self, linker: Linker) -> dict[str, Any]:
        questions = [ex.question for ex in self.examples]
        with torch.inference_mode():
            self.predictions = linker.link(questions)
        metrics = linking_metrics(self.examples, self.predictions)
        if self.speed:
            metrics.update(measure_speed(linker, questions, n_single=self.n_single, n_batch=self.n_batch))
        return metrics
