"""Dense hard negatives (ANCE / RocketQA style) for DPR training data.

BM25 negatives share words with the question; a dense retriever's own mistakes are a different kind of hard.
`mine_dense_negatives` encodes every distinct context of a DPR file (positives and negatives of all its
questions: passages of the same articles and topics, so the mistakes are plausible ones), ranks them for each
question with an encoder, and appends the top-ranked passages that are *not* positives to that question's
`hard_negative_ctxs`, after its BM25 ones (so the first hard negative, the one validation uses, stays the same).

A candidate is refused as a negative when it holds one of the question's answers (DPR's match, regex for
CuratedTREC), when it is, or lies inside, one of the question's positives (a SQuAD gold paragraph is split into
passages elsewhere in the pool), or when it is already among its negatives. `skip_top` also drops the first
few accepted candidates: the dense top is where paraphrased answers, false negatives, gather (RocketQA).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odqa.core.answers import has_answer
from odqa.core.errors import OdqaError
from odqa.retriever.training.train_data import DPRExample, ReadStats, read_dpr_file, write_dpr_jsonl

log = logging.getLogger("odqa.retriever.training.mine_negatives")


@dataclass
class MineStats:
    questions: int = 0
    pool: int = 0  # distinct contexts ranked
    mined: int = 0  # negatives appended in all
    refused_answer: int = 0  # candidates holding an answer
    refused_positive: int = 0  # candidates that are (part of) a positive
    without_new: int = 0  # questions that got no new negative

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _key(text: str) -> str:
    return " ".join(text.split())


def accept_negative(
    example: DPRExample, text: str, seen: set[str], positive_keys: Sequence[str], stats: MineStats | None = None
) -> bool:
    """Whether a ranked candidate may be one of `example`'s negatives (see the module docstring).
    `seen`: whitespace-normalised texts already among its negatives; `positive_keys`: its positives', likewise."""
    key = _key(text)
    if key in seen:
        return False
    if any(key in pos or pos in key for pos in positive_keys):
        if stats is not None:
            stats.refused_positive += 1
        return False
    if has_answer(text, example.answers, regex_answers=example.regex):
        if stats is not None:
            stats.refused_answer += 1
        return False
    return True


def pick_negatives(
    example: DPRExample,
    ranked: Sequence[tuple[str, str]],
    per_question: int,
    skip_top: int,
    stats: MineStats | None = None,
) -> list[dict]:
    """The first `per_question` acceptable (title, text) candidates of `ranked` after skipping `skip_top`."""
    seen = {_key(c["text"]) for c in example.hard_negatives + example.negatives}
    positive_keys = [_key(c["text"]) for c in example.positives]
    out: list[dict] = []
    skipped = 0
    for title, text in ranked:
        if not accept_negative(example, text, seen, positive_keys, stats):
            continue
        seen.add(_key(text))
        if skipped < skip_top:
            skipped += 1
            continue
        out.append({"title": title, "text": text, "passage_id": "", "mined": "dense"})
        if len(out) == per_question:
            break
    return out


def mine_dense_negatives(
    train_file: str | Path,
    output: str | Path,
    encoder: str = "retriever",
    per_question: int = 3,
    depth: int = 50,
    skip_top: int = 0,
    exclude: str | Path | None = None,
    batch_size: int = 64,
    q_max_length: int = 32,
    p_max_length: int = 160,
    precision: str | None = None,
    progress: bool = True,
) -> MineStats:
    """Write `output`: `train_file`'s examples with dense negatives appended (module docstring).
    `exclude`: a DPR file whose questions (by id or text) are left out, e.g. a validation split, so its
    contexts do not enter the pool either."""
    from odqa.core.encoder import TextEncoder, passage_text
    from odqa.retriever.training.train import context_pool

    if per_question < 1 or depth < per_question + skip_top:
        raise OdqaError(
            f"need per_question >= 1 and depth >= per_question + skip_top (got {per_question}, {depth}, {skip_top})"
        )
    examples = read_dpr_file(train_file, ReadStats())
    if exclude:
        held = read_dpr_file(exclude, ReadStats())
        ids = {e.id for e in held if e.id}
        questions = {e.question for e in held}
        examples = [e for e in examples if e.id not in ids and e.question not in questions]
    if not examples:
        raise OdqaError(f"{train_file}: no usable examples to mine negatives for")
    stats = MineStats(questions=len(examples))
    pool = context_pool(examples)
    stats.pool = len(pool)
    model = TextEncoder.from_pretrained(encoder)
    p = model.encode(
        [passage_text(ti, tx) for ti, tx in pool],
        batch_size,
        max_length=p_max_length,
        precision=precision,
        progress="passages" if progress else "",
    )
    q = model.encode(
        [e.question for e in examples],
        batch_size,
        max_length=q_max_length,
        precision=precision,
        progress="questions" if progress else "",
    )
    from odqa.indexes.vector import load_faiss

    index = load_faiss().IndexFlatIP(p.shape[1])
    index.add(p)
    depth = min(depth, len(pool))
    for lo in range(0, len(examples), 1024):
        _, top = index.search(q[lo : lo + 1024], depth)
        for example, rows in zip(examples[lo : lo + 1024], top):
            mined = pick_negatives(example, [pool[r] for r in rows if r >= 0], per_question, skip_top, stats)
            if not mined:
                stats.without_new += 1
            stats.mined += len(mined)
            example.hard_negatives = example.hard_negatives + mined
    write_dpr_jsonl(examples, output)
    log.info("mined %d dense negatives for %d questions over %d contexts", stats.mined, stats.questions, stats.pool)
    return stats
