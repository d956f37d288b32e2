"""Retrieval judged by relevance labels (qrels), as BEIR and TREC sets are: nDCG@10, MRR@10 (ir-measures'
RR@10) and recall@k (R@k), computed by ir-measures (pytrec_eval underneath), so the figures are trec_eval's.

Qrels name documents; odqa ranks passages, so a question's passages are collapsed to their documents (a
document ranks where its best passage does, scored by it: "MaxP"). More passages than documents are asked
for, since several passages of a document may rank high; a corpus indexed with documents as passages (BEIR
abstracts with a large `index --words`) needs no collapsing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from odqa.core.atomic import atomic_file
from odqa.core.errors import OdqaError
from odqa.core.logs import get_logger
from odqa.core.types import SearchHit
from odqa.corpus.questions import QAItem
from odqa.eval.retrieval import aligned_table
from odqa.eval.run_formats import TrecRunWriter

log = get_logger(__name__)
NDCG_AT = 10
MRR_AT = 10
PASSAGES_PER_DOCUMENT = 3  # passages asked for per document wanted, before collapsing to documents


def measures(ks: Sequence[int]) -> list:
    import ir_measures

    return [ir_measures.nDCG @ NDCG_AT, ir_measures.RR @ MRR_AT, *(ir_measures.R @ k for k in ks)]


def ranks_documents(items: Sequence[QAItem]) -> bool:
    """Whether a run of these questions (`search --trec-run`) names documents, as eval-retrieval --qrels writes
    its run: questions without answers to match (BEIR queries, typed ones) can only be judged by qrels, which name
    a corpus's own ids, never odqa's `DOC_N` of a chunk. Questions with answers are judged by matching them in
    passages (eval-retrieval's answer-match runs, read back by merge-runs and DPR's evaluation): passage ids."""
    return not any(item.answers for item in items)


def passages_asked(depth: int, corpus_size: int) -> int:
    """Passages to search for `depth` documents: several passages of one document may rank high."""
    return min(depth * PASSAGES_PER_DOCUMENT, corpus_size)


def document_ranking(hits: Sequence[SearchHit], depth: int) -> list[tuple[str, float]]:
    """(document id, score of its best passage) in rank order, the first `depth` documents."""
    ranking: dict[str, float] = {}
    for hit in hits:
        doc = hit.passage.doc_id if hit.passage is not None and hit.passage.doc_id else hit.passage_id
        if doc not in ranking:
            ranking[doc] = float(hit.score)
            if len(ranking) == depth:
                break
    return list(ranking.items())


def score_run(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]], ks: Sequence[int]) -> dict:
    """ir-measures' aggregates of `run` ({query id: [(doc id, score), ...]}) over the queries it ranks that
    have judgments."""
    import ir_measures

    judged = {qid: docs for qid, docs in run.items() if qid in qrels}
    if not judged:
        raise OdqaError(
            "no ranked question has relevance judgments: the question ids and the qrels' query ids "
            "differ (pass the queries and qrels of one set)"
        )
    # ir-measures orders by score (ties by document id, as trec_eval); the ranks here are the run's own
    scores = ir_measures.calc_aggregate(
        measures(ks), {q: qrels[q] for q in judged}, {q: dict(docs) for q, docs in judged.items()}
    )
    metrics = {str(measure): round(float(value), 4) for measure, value in scores.items()}
    # in the order of the table, under its names (ir-measures' RR@10 is MRR@10, the mean over the questions)
    metrics = {
        name.replace("RR@", "MRR@") if name.startswith("RR@") else name: metrics[name]
        for name in map(str, measures(ks))
    }
    metrics["questions"] = len(judged)
    return metrics


def evaluate_qrels(
    retriever,
    items: Sequence[QAItem],
    qrels: dict[str, dict[str, int]],
    ks: Sequence[int],
    corpus_size: int,
    batch_size: int = 32,
    trec_run: str | Path | None = None,
    run_tag: str = "odqa",
    progress: bool = True,
) -> dict:
    """Rank documents for the questions that have judgments and score them; `trec_run`: write the document
    rankings as a TREC run."""
    kept = [item for item in items if item.id in qrels]
    if len(kept) < len(items):
        log.warning(
            "%d of %d questions have no relevance judgments in the qrels and are left out (as BEIR does)",
            len(items) - len(kept),
            len(items),
        )
    if not kept:
        raise OdqaError(
            "no question has relevance judgments: the question ids and the qrels' query ids differ "
            "(pass the queries and qrels of one set)"
        )
    depth = max(max(ks), NDCG_AT, MRR_AT)
    asked = passages_asked(depth, corpus_size)
    run: dict[str, list[tuple[str, float]]] = {}
    start = time.perf_counter()
    with contextlib.ExitStack() as files:
        trec = None
        if trec_run:
            tmp = files.enter_context(atomic_file(trec_run))
            trec = TrecRunWriter(files.enter_context(tmp.open("w", encoding="utf-8")), run_tag)
        bar = files.enter_context(
            tqdm(
                total=len(kept),
                desc=f"eval {getattr(retriever, 'name', '')}",
                unit=" q",
                disable=not progress,
                mininterval=2,
            )
        )
        for i in range(0, len(kept), batch_size):
            batch = kept[i : i + batch_size]
            for item, hits in zip(batch, retriever.search([q.question for q in batch], asked)):
                run[item.id] = document_ranking(hits, depth)
                if trec is not None:
                    trec.write(item.id, run[item.id])
            bar.update(len(batch))
    seconds = time.perf_counter() - start
    metrics = score_run(run, qrels, ks)
    metrics["seconds"] = round(seconds, 2)
    metrics["questions_per_second"] = round(len(kept) / seconds, 2) if seconds > 0 else 0.0
    return metrics


def format_table(metrics: dict, ks: Sequence[int]) -> str:
    """The metrics under their JSON names, as fractions (trec_eval's)."""
    names = [f"nDCG@{NDCG_AT}", f"MRR@{MRR_AT}", *(f"R@{k}" for k in ks)]
    return aligned_table([*names, "questions"], [[*(f"{metrics[n]:.4f}" for n in names), str(metrics["questions"])]])
