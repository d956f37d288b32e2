"""Entity-linking metrics, micro-averaged over all mentions of a set.

* strong: a prediction counts when its span is exactly a gold span and its entity is that span's entity.
* weak: the spans overlap and the entities are the same.
* in-KB (ELQ's and GERBIL's definition, the headline): gold mentions whose entity is outside the knowledge
  base are left out; every prediction still counts, so one on an out-of-KB mention is a false positive.
* in-KB lenient (`*_in_kb_lenient`, ours): predictions overlapping an out-of-KB gold mention are left out too
  (the linker cannot be right there, and is not charged for trying).
* Gold entities without a span (implicit in the question, or not found in it) count only for the
  bag-of-entities scores; a prediction of such an entity is not charged as a false positive.
* bag of entities (`entity_*`): per question, the set of predicted entities against the set of gold ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from odqa.core.types import Mention
from odqa.linker.data import ELExample


def prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def _overlap(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def _match(preds: list[Mention], golds: list, strong: bool) -> int:
    used = [False] * len(golds)
    tp = 0
    for p in preds:
        title = p.entity.title if p.entity is not None else None
        for k, g in enumerate(golds):
            if used[k] or g.title != title:
                continue
            if (p.start == g.start and p.end == g.end) if strong else _overlap(p.start, p.end, g.start, g.end):
                used[k] = True
                tp += 1
                break
    return tp


def evaluate(examples: Sequence[ELExample], predictions: Sequence[Sequence[Mention]]) -> dict[str, float]:
    if len(examples) != len(predictions):
        raise ValueError(f"{len(examples)} examples but {len(predictions)} predictions")
    counts = {
        key: [0, 0, 0]
        for key in (
            "strong",
            "weak",
            "strong_in_kb",
            "weak_in_kb",
            "strong_in_kb_lenient",
            "weak_in_kb_lenient",
            "entity",
            "entity_in_kb",
            "entity_in_kb_lenient",
        )
    }
    n_gold = n_gold_in_kb = n_implicit = 0
    for ex, preds in zip(examples, predictions):
        labelled = [g for g in ex.mentions if g.title is not None]
        golds = [g for g in labelled if g.has_span]
        implicit = {g.title for g in labelled if not g.has_span}
        raw = [(p, p.entity) for p in preds if p.entity is not None]
        preds = [p for p, entity in raw if entity.title not in implicit]
        golds_in = [g for g in golds if g.in_kb]
        out_spans = [(g.start, g.end) for g in golds if not g.in_kb]
        preds_in = [p for p in preds if not any(_overlap(p.start, p.end, s, e) for s, e in out_spans)]
        n_gold += len(golds)
        n_gold_in_kb += len(golds_in)
        n_implicit += len(implicit)
        for key, ps, gs in (
            ("strong", preds, golds),
            ("weak", preds, golds),
            ("strong_in_kb", preds, golds_in),
            ("weak_in_kb", preds, golds_in),
            ("strong_in_kb_lenient", preds_in, golds_in),
            ("weak_in_kb_lenient", preds_in, golds_in),
        ):
            c = counts[key]
            c[0] += _match(ps, gs, strong=key.startswith("strong"))
            c[1] += len(ps)
            c[2] += len(gs)
        bag = {entity.title for _, entity in raw}
        bag_in = {entity.title for p, entity in raw if not any(_overlap(p.start, p.end, s, e) for s, e in out_spans)}
        gold_set = {g.title for g in labelled}
        gold_set_in = {g.title for g in labelled if g.in_kb}
        for key, found, gold in (
            ("entity", bag, gold_set),
            ("entity_in_kb", bag, gold_set_in),
            ("entity_in_kb_lenient", bag_in, gold_set_in),
        ):
            c = counts[key]
            c[0] += len(found & gold)
            c[1] += len(found)
            c[2] += len(gold)
    out: dict[str, float] = {}
    for key, (tp, n_pred, n_g) in counts.items():
        p, r, f = prf(tp, n_pred, n_g)
        kind, _, scope = key.partition("_")
        suffix = f"_{scope}" if scope else ""
        out[f"{kind}_precision{suffix}"] = round(p, 4)
        out[f"{kind}_recall{suffix}"] = round(r, 4)
        out[f"{kind}_f1{suffix}"] = round(f, 4)
    out.update(
        questions=len(examples), gold_mentions=n_gold, gold_mentions_in_kb=n_gold_in_kb, gold_without_span=n_implicit
    )
    return out
