"""Entity-linking evaluation helpers: the question sets and the speed measurement of `eval-linker`."""

from __future__ import annotations

import statistics
import time

from odqa.core.errors import OdqaError
from odqa.linker.data import id_number, load_el_file


def load_eval_examples(paths, kb, split: str = "all", limit: int | None = None):
    """Entity-linking questions of the given files; `split="dev"`: only LC-QuAD's held-out tenth (as training holds
    it out)."""
    examples = []
    for path in paths:
        items = load_el_file(path, kb)
        if split == "dev":
            items = [ex for ex in items if ex.source == "lcquad" and id_number(ex.id) % 10 == 0]
        examples += items
    if limit:
        examples = examples[:limit]
    if not examples:
        raise OdqaError("no questions to evaluate in " + ", ".join(map(str, paths)))
    return examples


def measure_speed(linker, questions, n_single: int = 100, n_batch: int = 256) -> dict:
    """Linking speed one question at a time (mean and median ms) and in batches of 64 (questions per second)."""
    questions = [q for q in questions if q.strip()] or ["Who wrote Hamlet?"]
    linker.link(questions[:2])  # warm up
    single = []
    for q in (questions * (n_single // len(questions) + 1))[:n_single]:
        t = time.perf_counter()
        linker.link([q])
        single.append((time.perf_counter() - t) * 1000)
    batch_qs = (questions * (n_batch // len(questions) + 1))[:n_batch]
    t = time.perf_counter()
    linker.link(batch_qs, batch_size=64)
    elapsed = time.perf_counter() - t
    return {
        "ms_per_question_batch1": round(statistics.mean(single), 2),
        "ms_per_question_batch1_median": round(statistics.median(single), 2),
        "questions_per_second_batch64": round(len(batch_qs) / elapsed, 1),
    }
