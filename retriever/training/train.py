"""Train the dense retriever (DPR): NLL of each question's positive among in-batch and hard negatives.

* Data: DPR-format JSONL or JSON (`retriever.training.train_data.read_dpr_file`); bad rows are skipped and counted.
  A step takes `batch_size` questions; each brings its first positive (as DPR) and `hard_negatives` passages
  drawn from its hard negatives (shuffled per epoch; `negative_ctxs` when it has none). Candidates are the
  B positives then the hard negatives; the loss is `retriever.training.losses.dpr_nll_loss` with `scale` on the
  cosine similarities. A candidate that is the same text as question i's positive, or (optionally) that
  holds one of question i's answers, is masked out of question i's negatives.
* Encoders: shared (one model for questions and passages, the default, as MiniLM on CPU) or separate.
  Both use TextEncoder's mean pooling and L2 normalisation, so a trained model is used exactly as the
  off-the-shelf one: `run_qa.py index --encoder OUTPUT/final`, `retrieval.encoder = "OUTPUT/final"`.
  Separate encoders are saved as `final/question_encoder/` and `final/passage_encoder/`.
* Large effective batches on small memory: `chunk_size` turns on gradient caching (Gao et al. 2021): all
  vectors of the batch are first computed without a graph, the loss and its gradient w.r.t. the vectors are
  computed over the whole batch (so every in-batch negative counts), then each chunk is re-encoded with a
  graph and back-propagated with its cached vector gradients. Dropout masks are replayed by restoring the
  RNG state of each chunk, so the result equals one full-batch step.
* Forgetting: `distill_weight` > 0 adds `retriever.training.distill_loss.score_distillation_loss`, a KL term that keeps
  the in-batch score distribution close to a frozen teacher's (`distill_from`, default the `init` encoder),
  so training on a few thousand distant-supervision questions does not erase what the starting model knew.
* Validation: held-out questions (`val_files`, or `holdout` questions split off the training files and written
  to OUTPUT/heldout.jsonl), at step 0, every `eval_every` steps and at the end (OUTPUT/val_history.jsonl).
  Two views: each validation batch of `eval_batch_size` questions ranks every question's positive among the
  batch's positives and first hard negatives (mean rank, recall@1/5, loss: DPR's in-batch view), and
  retrieval over the pool of every held-out context (`pool_recall@1/5/20`, `pool_mrr@20`; a passage counts
  when it holds an answer, as the benchmarks judge), a harder test: the pool holds every held-out context,
  thousands of candidates instead of a batch's hundred, so it still separates models once the in-batch view
  has saturated (figures in models/retriever/README.md). `pool_validation=False` (`--no-pool-validation`)
  skips it.
* Early stop: `early_stop` N > 0 ends training after N validations in a row without a better `primary_metric`.
* The loop is `odqa.core.training.TrainingLoop` (shared with the reader and the linker).
* Checkpoints: OUTPUT/checkpoint-STEP/ (encoder folders, trainer_state.pt, meta.json); a rerun resumes from
  the newest one; a checkpoint of another architecture or encoder layout is refused with OdqaError.
* Deterministic for a seed. GPU: bf16 (or fp16 with loss scaling) autocast and `gpu_batch_size`.
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from odqa.core.answers import has_answer
from odqa.core.atomic import atomic_folder
from odqa.core.device import autocast_for
from odqa.core.encoder import TextEncoder, passage_text
from odqa.core.errors import OdqaError
from odqa.core.models import resolve_model
from odqa.core.training import LoopSettings, TrainingLoop, latest_checkpoint, set_seed, training_device
from odqa.retriever.training.distill_loss import score_distillation_loss
from odqa.retriever.training.losses import dpr_nll_loss, positive_ranks
from odqa.retriever.training.train_config import RetrieverTrainConfig  # apart: the CLI reads it without torch
from odqa.retriever.training.train_data import DPRExample, ReadStats, read_dpr_file, write_dpr_jsonl

log = logging.getLogger("odqa.retriever.training.train")


# ---------------------------------------------------------------------------------------------------- model


class DualEncoder(torch.nn.Module):
    """Question and passage TextEncoders; the same module twice when shared."""

    def __init__(self, question: TextEncoder, passage: TextEncoder | None = None):
        super().__init__()
        self.question = question
        self.passage = passage if passage is not None else question

    @property
    def shared(self) -> bool:
        return self.passage is self.question

    def save(self, path: str | Path) -> None:
        path = Path(path)
        if self.shared:
            self.question.save_pretrained(path)
        else:
            self.question.save_pretrained(path / "question_encoder")
            self.passage.save_pretrained(path / "passage_encoder")


def _arch(config) -> dict:
    return {
        "model_type": getattr(config, "model_type", ""),
        "hidden_size": getattr(config, "hidden_size", None),
        "num_hidden_layers": getattr(config, "num_hidden_layers", None),
        "vocab_size": getattr(config, "vocab_size", None),
    }


def _load_encoder(path: str, where: str) -> TextEncoder:
    try:
        enc = TextEncoder.from_pretrained(path, device="cpu")
    except OdqaError as exc:
        raise OdqaError(f"{where}: {exc}") from exc
    return enc


def load_dual_encoder(init: str, shared: bool, checkpoint: Path | None = None) -> DualEncoder:
    """From `init`, or from a checkpoint (which must match init's architecture and the encoder layout)."""
    if checkpoint is None:
        q = _load_encoder(init, f"--init {init}")
        return DualEncoder(q, None if shared else _load_encoder(init, f"--init {init}"))
    meta_path = checkpoint / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("shared", shared) != shared:
        raise OdqaError(
            f"{checkpoint} was trained with {'shared' if meta.get('shared') else 'separate'} encoders, but this run "
            f"asks for {'shared' if shared else 'separate'} ones; use "
            "the same --separate-encoders setting or another --output"
        )
    from transformers import AutoConfig

    try:
        init_arch = _arch(AutoConfig.from_pretrained(resolve_model(init)))
    except (OSError, ValueError) as exc:
        raise OdqaError(f"cannot read the config of --init {init!r}: {exc.__class__.__name__}") from exc
    folders = [checkpoint] if shared else [checkpoint / "question_encoder", checkpoint / "passage_encoder"]
    for folder in folders:
        try:
            ck_arch = _arch(AutoConfig.from_pretrained(str(folder)))
        except (OSError, ValueError) as exc:
            raise OdqaError(
                f"{folder} is not a retriever checkpoint ({exc.__class__.__name__}); remove it or use another --output"
            ) from exc
        if ck_arch != init_arch:
            raise OdqaError(
                f"checkpoint {folder} is another architecture ({ck_arch}) than --init {init} ({init_arch}); "
                "resume with the --init it was trained from, or use another --output"
            )
    encoders = [_load_encoder(str(f), f"checkpoint {f}") for f in folders]
    return DualEncoder(encoders[0], encoders[1] if len(encoders) > 1 else None)


# ---------------------------------------------------------------------------------------------------- batches


@dataclass
class Batch:
    questions: list[str]
    passages: list[str]  # positives (one per question, in order) then hard negatives
    mask: torch.Tensor  # (B, C) True = not a negative of that question


def make_batch(
    examples: Sequence[DPRExample], hard_negatives: int, rng: random.Random | None, mask_answers: bool = True
) -> Batch:
    """Positives first (column i = question i's), then up to `hard_negatives` negatives per question.
    With `rng` None the first hard negatives are taken (validation); else a random sample."""
    questions = [ex.question for ex in examples]
    cands: list[dict] = [ex.positives[0] for ex in examples]
    for ex in examples:
        pool = ex.hard_negatives or ex.negatives
        if hard_negatives <= 0 or not pool:
            continue
        if rng is None or len(pool) <= hard_negatives:
            chosen = pool[:hard_negatives]
        else:
            chosen = rng.sample(pool, hard_negatives)
        cands.extend(chosen)
    texts = [passage_text(c.get("title", ""), c["text"]) for c in cands]
    mask = torch.zeros((len(examples), len(cands)), dtype=torch.bool)
    for i, ex in enumerate(examples):
        own = {p["text"].strip() for p in ex.positives}
        for j, c in enumerate(cands):
            if j == i:
                continue
            body = c["text"].strip()
            if body in own or (mask_answers and ex.answers and has_answer(body, ex.answers, regex_answers=ex.regex)):
                mask[i, j] = True
    return Batch(questions, texts, mask)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    rng = random.Random(seed * 1000003 + epoch)
    order = list(range(n))
    rng.shuffle(order)
    return order


def split_holdout(examples: list[DPRExample], n: int, seed: int) -> tuple[list[DPRExample], list[DPRExample]]:
    """(train, held-out): `n` examples drawn at random (seeded), without sharing a question text with train."""
    if n <= 0:
        return examples, []
    if n >= len(examples):
        raise OdqaError(f"--holdout {n} leaves nothing to train on ({len(examples)} examples)")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    held = [examples[i] for i in sorted(order[:n])]
    held_q = {ex.question.lower() for ex in held}
    train = [examples[i] for i in sorted(order[n:]) if examples[i].question.lower() not in held_q]
    return train, held


# ---------------------------------------------------------------------------------------------------- steps


class RandContext:
    """Captures the RNG state now and replays it inside `with` (gradient caching's dropout replay)."""

    def __init__(self, device: torch.device):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.device = device

    def __enter__(self):
        self._fork = torch.random.fork_rng(devices=[self.device] if self.cuda is not None else [])
        self._fork.__enter__()
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)

    def __exit__(self, *exc):
        self._fork.__exit__(*exc)


def _tokenize(encoder: TextEncoder, texts: Sequence[str], max_length: int, device) -> dict[str, torch.Tensor]:
    batch = encoder.tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


def _slices(n: int, chunk: int) -> list[slice]:
    chunk = chunk if chunk > 0 else n
    return [slice(i, min(n, i + chunk)) for i in range(0, n, chunk)]


def _sub(inputs: dict[str, torch.Tensor], s: slice) -> dict[str, torch.Tensor]:
    return {k: v[s] for k, v in inputs.items()}


def _teacher_vectors(teacher: DualEncoder, q_in, p_in, chunk: int, autocast) -> tuple[torch.Tensor, torch.Tensor]:
    out = []
    with torch.no_grad(), autocast():
        for enc, inputs in ((teacher.question, q_in), (teacher.passage, p_in)):
            n = len(inputs["input_ids"])
            out.append(torch.cat([enc(_sub(inputs, s)).float() for s in _slices(n, chunk)]))
    return out[0], out[1]


def train_step(
    model: DualEncoder,
    batch: Batch,
    cfg: RetrieverTrainConfig,
    device: torch.device,
    autocast,
    scaler=None,
    teacher: DualEncoder | None = None,
) -> float:
    """Forward + backward of one batch (gradients accumulate into .grad); returns the loss.
    With a `teacher` (and `cfg.distill_weight`), the loss adds the score distillation term."""
    q_in = _tokenize(model.question, batch.questions, cfg.q_max_length, device)
    p_in = _tokenize(model.passage, batch.passages, cfg.p_max_length, device)
    mask = batch.mask.to(device)
    n_q, n_p = len(batch.questions), len(batch.passages)
    distill = teacher is not None and cfg.distill_weight > 0
    if distill and teacher is not None:
        # the teacher shares the student's tokenizer (it is the model training started from), so the inputs are reused
        t_q, t_p = _teacher_vectors(teacher, q_in, p_in, cfg.chunk_size, autocast)

    def batch_loss(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        loss = dpr_nll_loss(q, p, scale=cfg.scale, mask=mask)
        if distill:
            loss = loss + cfg.distill_weight * score_distillation_loss(q, p, t_q, t_p, scale=cfg.scale, mask=mask)
        return loss

    if cfg.chunk_size <= 0 or (cfg.chunk_size >= n_q and cfg.chunk_size >= n_p):
        with autocast():
            q = model.question(q_in)
            p = model.passage(p_in)
        loss = batch_loss(q, p)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        return float(loss.detach())
    # gradient caching: 1) vectors without a graph, remembering each chunk's RNG state
    parts = []
    for enc, inputs, n in ((model.question, q_in, n_q), (model.passage, p_in, n_p)):
        states, reps = [], []
        for s in _slices(n, cfg.chunk_size):
            states.append(RandContext(device))
            with torch.no_grad(), autocast():
                reps.append(enc(_sub(inputs, s)).float())
        parts.append((enc, inputs, n, states, torch.cat(reps).requires_grad_()))
    q, p = parts[0][4], parts[1][4]
    # 2) the loss over the whole batch and its gradient w.r.t. the vectors
    loss = batch_loss(q, p)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    # 3) each chunk again, with a graph, back-propagating its cached gradient
    for enc, inputs, n, states, cached in parts:
        grad = cached.grad
        assert grad is not None  # filled by the backward pass above
        for s, state in zip(_slices(n, cfg.chunk_size), states):
            with state, autocast():
                out = enc(_sub(inputs, s)).float()
            out.backward(grad[s])
    return float(loss.detach())


@torch.no_grad()
def validate(
    model: DualEncoder,
    examples: Sequence[DPRExample],
    cfg: RetrieverTrainConfig,
    device: torch.device,
    precision: str,
    hard_negatives: int = 1,
) -> dict:
    """Rank of each positive among its validation batch's candidates (positives + first hard negatives), and
    (`cfg.pool_validation`) recall over every validation context, both under the training `precision`."""
    was_training = model.training
    model.eval()
    ranks, losses, cands = [], [], []
    for lo in range(0, len(examples), cfg.eval_batch_size):
        batch = make_batch(examples[lo : lo + cfg.eval_batch_size], hard_negatives, None, cfg.mask_answer_negatives)
        with autocast_for(device, precision):
            q = model.question(_tokenize(model.question, batch.questions, cfg.q_max_length, device)).float()
            p = torch.cat(
                [
                    model.passage(_tokenize(model.passage, batch.passages[s], cfg.p_max_length, device)).float()
                    for s in _slices(len(batch.passages), 128)
                ]
            )
        mask = batch.mask.to(device)
        ranks.append(positive_ranks(q, p, mask=mask).cpu())
        losses.append(float(dpr_nll_loss(q, p, scale=cfg.scale, mask=mask)) * len(batch.questions))
        cands.append(len(batch.passages))
    pool = {}
    if cfg.pool_validation:
        metrics = retrieve_context_pool(
            model.question,
            model.passage,
            examples,
            (1, 5, 20),
            cfg.eval_batch_size,
            cfg.q_max_length,
            cfg.p_max_length,
            precision,
        )
        pool = {("pool_" + k): v for k, v in metrics.items()}
    if was_training:
        model.train()
    r = torch.cat(ranks).float()
    n = len(r)
    return {
        "questions": n,
        "mean_rank": round(float(r.mean()), 3),
        "recall@1": round(100.0 * float((r <= 1).float().mean()), 2),
        "recall@5": round(100.0 * float((r <= 5).float().mean()), 2),
        "loss": round(sum(losses) / n, 4),
        "candidates_per_batch": round(sum(cands) / len(cands), 1),
        **pool,
    }


def context_pool(examples: Sequence[DPRExample]) -> list[tuple[str, str]]:
    """(title, text) of every distinct context of `examples` (positives, hard and plain negatives), in order."""
    corpus: dict[str, tuple[str, str]] = {}
    for ex in examples:
        for c in ex.positives + ex.hard_negatives + ex.negatives:
            corpus.setdefault(c["text"].strip(), (c.get("title", ""), c["text"]))
    return list(corpus.values())


def retrieve_context_pool(
    question_encoder: TextEncoder,
    passage_encoder: TextEncoder,
    examples: Sequence[DPRExample],
    ks: Sequence[int],
    batch_size: int,
    q_max_length: int,
    p_max_length: int,
    precision: str | None = None,
) -> dict:
    """`pool_recall` of the examples' questions over their `context_pool`, plus `passages` (the pool's size).
    `precision`: autocast of the encoding (default: each encoder's own)."""
    texts = context_pool(examples)
    p = passage_encoder.encode(
        [passage_text(ti, tx) for ti, tx in texts], batch_size, max_length=p_max_length, precision=precision
    )
    q = question_encoder.encode(
        [ex.question for ex in examples], batch_size, max_length=q_max_length, precision=precision
    )
    return {**pool_recall(q, p, [tx for _, tx in texts], examples, ks), "passages": len(texts)}


def pool_recall(
    q: np.ndarray, p: np.ndarray, texts: Sequence[str], examples: Sequence[DPRExample], ks: Sequence[int]
) -> dict:
    """Recall@k and MRR of inner-product retrieval of `texts` (vectors `p`) for each example's question
    (vectors `q`): a passage is a hit when it holds one of the example's answers (DPR's match)."""
    depth = min(max(ks), len(texts))
    scores = q @ p.T
    top = np.argsort(-scores, axis=1)[:, :depth]
    first = []
    for ex, rows in zip(examples, top):
        first.append(
            next(
                (r for r, row in enumerate(rows, 1) if has_answer(texts[row], ex.answers, regex_answers=ex.regex)), None
            )
        )
    n = len(examples)
    metrics = {f"recall@{k}": round(100.0 * sum(r is not None and r <= k for r in first) / n, 2) for k in ks}
    metrics[f"mrr@{max(ks)}"] = round(sum(1.0 / r for r in first if r) / n, 4)
    return metrics


# ---------------------------------------------------------------------------------------------------- training


def load_examples(files: Sequence[str], limit: int = 0) -> tuple[list[DPRExample], ReadStats]:
    stats = ReadStats()
    examples: list[DPRExample] = []
    for f in files:
        examples += read_dpr_file(f, stats, limit=limit)
    return examples, stats


def train(cfg: RetrieverTrainConfig, on_step: Callable[[int, float], None] | None = None) -> Path:
    """Train (or resume) and return the folder of the final model."""
    from transformers import get_linear_schedule_with_warmup

    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    device, precision = training_device(cfg.device, cfg.precision, cfg.threads)
    batch_size = cfg.gpu_batch_size if device.type == "cuda" else cfg.batch_size

    examples, stats = load_examples(cfg.train_files, cfg.limit)
    log.info(
        "training files: %d rows, %d kept, %d skipped %s, %d bad contexts dropped",
        stats.rows,
        stats.kept,
        stats.skipped_total,
        dict(stats.skipped),
        stats.bad_contexts,
    )
    if cfg.val_files:
        val, vstats = load_examples(cfg.val_files)
        log.info("validation files: %d kept, %d skipped", vstats.kept, vstats.skipped_total)
        train_examples = examples
    else:
        train_examples, val = split_holdout(examples, cfg.holdout, cfg.seed)
        if val:
            write_dpr_jsonl(val, out / "heldout.jsonl")
            log.info("held out %d questions -> %s", len(val), out / "heldout.jsonl")
    if len(train_examples) < batch_size:
        raise OdqaError(
            f"{len(train_examples)} training examples, fewer than one batch of {batch_size}; "
            "pass more data or a smaller --batch-size"
        )

    set_seed(cfg.seed)
    resume = latest_checkpoint(out)
    model = load_dual_encoder(cfg.init, cfg.shared, resume)
    model.to(device)
    model.train()
    teacher = None
    if cfg.distill_weight > 0:
        teacher_name = cfg.distill_from or cfg.init
        teacher = load_dual_encoder(teacher_name, cfg.shared)
        if teacher.question.tokenizer.get_vocab() != model.question.tokenizer.get_vocab():
            raise OdqaError(
                f"--distill-from {teacher_name} has another tokenizer than the model being trained; "
                "distil from an encoder with the same vocabulary (e.g. the --init model)"
            )
        teacher.to(device).eval().requires_grad_(False)
        log.info("distilling from %s (weight %g)", teacher_name, cfg.distill_weight)

    per_epoch = len(train_examples) // batch_size
    total = cfg.max_steps if cfg.max_steps > 0 else max(1, math.ceil(cfg.epochs * per_epoch))
    params = list({id(p): p for p in model.parameters()}.values())
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)
    order_of_epoch: dict[int, list[int]] = {}  # the current epoch's question order only

    def train_one_step(step: int) -> dict:
        epoch, pos = divmod(step, per_epoch)
        if epoch not in order_of_epoch:
            order_of_epoch.clear()
            order_of_epoch[epoch] = epoch_order(len(train_examples), cfg.seed, epoch)
        idx = order_of_epoch[epoch][pos * batch_size : (pos + 1) * batch_size]
        rng = random.Random((cfg.seed * 1000003 + epoch) * 1000003 + pos)
        batch = make_batch([train_examples[i] for i in idx], cfg.hard_negatives, rng, cfg.mask_answer_negatives)
        return {"loss": train_step(model, batch, cfg, device, loop.autocast, loop.scaler, teacher)}

    def save_model(folder: Path) -> None:
        model.save(folder)
        (folder / "meta.json").write_text(
            json.dumps(
                {
                    "shared": model.shared,
                    "init": cfg.init,
                    "arch": _arch(model.question.model.config),
                    "step": loop.step,
                }
            )
        )

    def evaluate(step: int) -> dict:
        return validate(model, val, cfg, device, precision, cfg.hard_negatives or 1)

    loop = TrainingLoop(
        LoopSettings(
            out,
            total,
            per_epoch,
            name="train-retriever",
            save_every=cfg.save_every,
            keep_checkpoints=cfg.keep_checkpoints,
            log_every=cfg.log_every,
            eval_every=cfg.eval_every,
            eval_at_start=True,
            primary_metric=cfg.primary_metric or ("pool_recall@5" if cfg.pool_validation else "recall@5"),
            early_stop=cfg.early_stop,
            progress=cfg.progress,
        ),
        params=params,
        optimizer=optimizer,
        scheduler=scheduler,
        device=device,
        precision=precision,
        train_step=train_one_step,
        save_model=save_model,
        evaluate=evaluate if val else None,
        on_step=on_step,
        logger=log,
    )
    loop.resume(resume)
    (out / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    log.info(
        "training %d steps (%d per epoch of %d questions; batch %d + %d hard negatives each; %s on %s%s)",
        total,
        per_epoch,
        len(train_examples),
        batch_size,
        cfg.hard_negatives,
        precision,
        device,
        f"; gradient cache chunks of {cfg.chunk_size}" if cfg.chunk_size else "",
    )
    result = loop.run()
    final = out / "final"
    with atomic_folder(final) as tmp:
        model.save(tmp)
        (tmp / "retriever_info.json").write_text(
            json.dumps(
                {
                    "config": cfg.to_dict(),
                    "steps": result.step,
                    "train_examples": len(train_examples),
                    "val_examples": len(val),
                    "read": stats.to_dict(),
                    "device": str(device),
                    "precision": precision,
                    "last_validation": result.last_eval,
                    "stopped_by": result.stopped_by,
                    "shared": model.shared,
                    "pooling": "mean",
                    "normalize": True,
                },
                indent=2,
            )
        )
    log.info("saved %s", final)
    return final


# ---------------------------------------------------------------------------------------------------- evaluation


def heldout_corpus_eval(
    encoder: str,
    examples: Sequence[DPRExample],
    ks: Sequence[int] = (1, 5, 20),
    q_max_length: int = 32,
    p_max_length: int = 160,
    batch_size: int = 64,
    question_encoder: str | None = None,
    bf16: bool = False,
) -> dict:
    """Dense retrieval over a small corpus made of every context of `examples` (e.g. the held-out questions'
    BM25 top-k): recall@k by DPR's answer match (a regex search for regex answers) and the rank of the first
    hit, for comparing encoders on questions none of them was trained on."""
    p_enc = TextEncoder.from_pretrained(encoder, max_length=p_max_length)
    q_enc = TextEncoder.from_pretrained(question_encoder, max_length=q_max_length) if question_encoder else p_enc
    t = time.time()
    metrics = retrieve_context_pool(
        q_enc, p_enc, examples, ks, batch_size, q_max_length, p_max_length, "bf16" if bf16 else None
    )
    metrics.update({"questions": len(examples), "seconds": round(time.time() - t, 1), "encoder": encoder, "bf16": bf16})
    return metrics


def export_encoder(src: str | Path, dst: str | Path, card: str | None = None) -> Path:
    """Copy a trained encoder folder as fp16 safetensors + tokenizer (half the size). The config keeps
    `dtype: float32`, so `from_pretrained` (TextEncoder) upcasts the weights and computes in fp32 on CPU."""
    from transformers import AutoModel, AutoTokenizer

    src, out = Path(src), Path(dst)
    try:
        model = AutoModel.from_pretrained(str(src), dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(src))
    except (OSError, ValueError) as exc:
        raise OdqaError(f"cannot load encoder {src}: {exc.__class__.__name__}") from exc
    with atomic_folder(out) as tmp:
        model.half().save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        config_path = tmp / "config.json"
        config = json.loads(config_path.read_text())
        config["dtype"] = "float32"
        config_path.write_text(json.dumps(config, indent=2))
        if (src / "retriever_info.json").exists():
            shutil.copy(src / "retriever_info.json", tmp / "retriever_info.json")
        if card is not None:
            (tmp / "README.md").write_text(card)
        elif (out / "README.md").exists():
            shutil.copy(out / "README.md", tmp / "README.md")
    return out
