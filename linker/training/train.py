"""Training the ELQ linker: BCE on every candidate span's mention score plus an entity NLL over the gold
entity, in-batch gold entities, hard negatives (the nearest wrong entities in the KB under the current
model), alias candidates and NIL. The entity encoder (and so the KB vectors) stays frozen."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from odqa.core.training import (
    LoopSettings,
    Stopwatch,
    TrainingLoop,
    latest_checkpoint,
    prune_checkpoints,
    training_device,
)
from odqa.core.types import Mention
from odqa.indexes.analysis import detect_language
from odqa.linker.data import (
    ELExample,
    id_number,
    load_lcquad,
    load_mentions_file,
    load_qald_questions,
    load_webquestions_entities,
    normalize_question,
    silver_examples,
    weak_examples,
)
from odqa.linker.heads import ELQConfig
from odqa.linker.kb import KnowledgeBase
from odqa.linker.linker import Linker, resolve_overlaps
from odqa.linker.metrics import evaluate
from odqa.linker.training.train_config import TrainConfig  # there so the command line reads it without torch

log = logging.getLogger(__name__)
LANGUAGE_SAMPLE = 200  # silver examples whose text tells the language of their file


def build_datasets(
    kb: KnowledgeBase,
    data_dir: str | Path,
    weak: int = 6000,
    dev_every: int = 10,
    seed: int = 13,
    silver: Sequence[str] = (),
):
    """(train, dev, silver dev by file, report) from LC-QuAD, Complex-EL4QA, WebQuestions train entities and weak
    supervision, plus silver mentions of the SQuAD-style files `silver` (relative to `data_dir`; whole articles
    held out as their dev splits). QALD is the test set: questions also found in any QALD file are dropped from
    training."""
    data_dir = Path(data_dir)
    el = data_dir / "el"
    lcquad = load_lcquad(el / "lcquad1-train.json", kb)
    dev = [ex for ex in lcquad if id_number(ex.id) % dev_every == 0]
    train = [ex for ex in lcquad if id_number(ex.id) % dev_every != 0]
    complex_el = load_mentions_file(el / "complex-el4qa.json", kb, source="complex-el4qa")
    train += complex_el
    wq = data_dir / "webquestions"
    if (wq / "trainmodel.entities.json").is_file():
        train += load_webquestions_entities(wq / "trainmodel.json", wq / "trainmodel.entities.json", kb)
    qald = load_qald_questions(el / "qald")
    for path in sorted((el / "qald").glob("qald-*.mentions.json")):
        qald |= {normalize_question(ex.question) for ex in load_mentions_file(path, kb)}
    dev_questions = {normalize_question(ex.question) for ex in dev}
    before = len(train)
    train = [ex for ex in train if normalize_question(ex.question) not in qald | dev_questions]
    dropped = before - len(train)
    if weak:
        train += weak_examples(kb, n_articles=weak, max_examples=weak, seed=seed)
    silver_dev: dict[str, list[ELExample]] = {}
    silver_languages: set[str] = set()
    silver_report = {}
    for name in silver:
        split = silver_examples(kb, data_dir / name)
        train += split.train
        silver_dev[Path(name).stem] = split.dev
        silver_languages.add(detect_language([ex.question for ex in split.train[:LANGUAGE_SAMPLE]]))
        silver_report[Path(name).stem] = {
            "articles": split.articles,
            "dev_articles": split.dev_articles,
            "train_examples": len(split.train),
            "dev_examples": len(split.dev),
            "dev_mentions": sum(len(ex.mentions) for ex in split.dev),
        }
    report = {
        "train": len(train),
        "dev": len(dev),
        "dropped_overlap_with_qald_or_dev": dropped,
        "by_source": {s: sum(ex.source == s for ex in train) for s in sorted({ex.source for ex in train})},
        "gold_mentions_train": sum(len(ex.mentions) for ex in train),
        "gold_mentions_train_located": sum(m.has_span for ex in train for m in ex.mentions),
        "gold_mentions_train_in_kb": sum(m.in_kb for ex in train for m in ex.mentions),
        "silver": silver_report,
        "silver_languages": sorted(silver_languages),
    }
    return train, dev, silver_dev, report


def token_span(offsets: np.ndarray, start: int, end: int) -> tuple[int, int] | None:
    """First and last token overlapping the character range [start, end) (special tokens excluded)."""
    hits = [t for t, (s, e) in enumerate(offsets) if e > s and s < end and start < e]
    return (hits[0], hits[-1]) if hits else None


class Trainer:
    def __init__(
        self, linker: Linker, kb: KnowledgeBase, cfg: TrainConfig, on_step: Callable[[int, float], None] | None = None
    ):
        self.linker = linker
        self.on_step = on_step
        self.kb = kb
        self.cfg = cfg
        self.model = linker.model
        self.device, self.precision = training_device(cfg.device, cfg.precision, cfg.threads)
        self.model.to(self.device)
        self.entity_vectors = torch.from_numpy(kb.vectors).to(self.device)  # frozen

    def batch_loss(self, examples: Sequence[ELExample]) -> tuple[torch.Tensor, dict]:
        questions = [ex.question for ex in examples]
        batch = self.linker.tokenize(questions)
        offsets = batch["offset_mapping"].numpy()
        inputs = {k: v.to(self.device) for k, v in batch.items() if k != "offset_mapping"}
        hidden, scores = self.model.encode(**inputs)
        spans = self.linker.span_candidates(questions, batch)
        index = {tuple(s): n for n, s in enumerate(spans.tolist())}
        extra: list[tuple[int, int, int]] = []
        gold_spans = []  # (span tuple, example, mention)
        for row, ex in enumerate(examples):
            for m in ex.mentions:
                if not m.has_span:
                    continue
                ts = token_span(offsets[row], m.start, m.end)
                if ts is None or ts[1] - ts[0] >= self.model.config.max_mention_tokens:
                    continue
                key = (row, ts[0], ts[1])
                if key not in index:
                    index[key] = len(spans) + len(extra)
                    extra.append(key)
                gold_spans.append((key, ex, m))
        if extra:
            spans = np.concatenate([spans, np.asarray(extra, dtype=np.int64).reshape(-1, 3)])
        spans_t = torch.from_numpy(spans).to(self.device)
        labels = torch.zeros(len(spans), device=self.device)
        weights = torch.tensor([examples[r].weight for r in spans[:, 0]], dtype=torch.float32, device=self.device)
        for key, _ex, _m in gold_spans:
            labels[index[key]] = 1.0
        for row, ex in enumerate(examples):  # incomplete examples: their negatives are not trusted
            if not ex.complete:
                weights[(spans_t[:, 0] == row) & (labels == 0)] = 0.0
        logits = self.model.mention_logits(scores, spans_t)
        mention_loss = (
            torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none") * weights
        ).sum() / weights.sum().clamp(min=1)

        linked = [(key, ex, m) for key, ex, m in gold_spans if m.title is not None]
        entity_loss = torch.zeros((), device=self.device)
        acc = 0.0
        if linked:
            ent_spans = torch.tensor([key for key, _, _ in linked], dtype=torch.int64, device=self.device)
            vecs = self.model.span_vectors(hidden, ent_spans)
            with torch.no_grad():
                sims = vecs @ self.entity_vectors.T
                hard = sims.topk(self.cfg.hard_negatives + 1, dim=-1).indices.cpu().numpy()
            in_batch = [m.row for _, _, m in linked if m.row >= 0]
            texts = [ex.question[m.start : m.end] for _, ex, m in linked]
            rows, targets = [], []
            for n, (_, _ex, m) in enumerate(linked):
                cands = (
                    ([m.row] if m.row >= 0 else [])
                    + in_batch
                    + hard[n].tolist()
                    + self.kb.matcher.candidates(texts[n])[: self.model.config.alias_candidates]
                )
                cands = list(dict.fromkeys(cands))
                rows.append(cands)
                targets.append(0 if m.row >= 0 else -1)
            width = max(len(r) for r in rows)
            cand_rows = np.full((len(rows), width), -1, dtype=np.int64)
            for n, r in enumerate(rows):
                cand_rows[n, : len(r)] = r
            target_t = torch.tensor([t if t >= 0 else width for t in targets], device=self.device)
            cand_vecs = self.entity_vectors[torch.from_numpy(np.maximum(cand_rows, 0)).to(self.device)]
            feats = torch.from_numpy(self.kb.features(texts, cand_rows)).to(self.device)
            ent_logits = self.model.entity_logits(vecs, cand_vecs, feats)
            pad = torch.from_numpy(np.concatenate([cand_rows < 0, np.zeros((len(rows), 1), bool)], 1)).to(self.device)
            ent_logits = ent_logits.masked_fill(pad, -1e4)
            w = torch.tensor([ex.weight for _, ex, _ in linked], device=self.device)
            entity_loss = (
                torch.nn.functional.cross_entropy(ent_logits, target_t, reduction="none") * w
            ).sum() / w.sum()
            acc = float((ent_logits.argmax(-1) == target_t).float().mean())
        loss = mention_loss + entity_loss
        return loss, {
            "mention_loss": float(mention_loss.detach()),
            "entity_loss": float(entity_loss.detach()),
            "entity_acc": acc,
        }

    def train(self, train: list[ELExample], resume: Path | None = None) -> dict:
        """Train (continuing from `resume`, a checkpoint whose weights the linker was loaded from); returns
        the steps, seconds, what stopped it and the figures of every log line."""
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        embeddings = getattr(self.model.encoder, "embeddings", None)
        if embeddings is not None:  # 12 M of MiniLM's 22 M weights: frozen, the optimiser step halves
            for p in embeddings.parameters():
                p.requires_grad_(False)
        layers = getattr(getattr(self.model.encoder, "encoder", None), "layer", None)
        if cfg.train_layers and layers is not None:
            for layer in list(layers)[: max(0, len(layers) - cfg.train_layers)]:
                for p in layer.parameters():
                    p.requires_grad_(False)
        encoder_params = [p for p in self.model.encoder.parameters() if p.requires_grad]
        head_params = [p for n, p in self.model.named_parameters() if not n.startswith("encoder.")]
        opt = torch.optim.AdamW(
            [{"params": encoder_params, "lr": cfg.lr}, {"params": head_params, "lr": cfg.head_lr}], weight_decay=0.01
        )
        budget = cfg.max_minutes * 60
        stopwatch = Stopwatch()

        def lr_factor(done: int) -> float:
            # warm up, then decay linearly towards whichever ends first: the steps or the time budget
            step = done + 1
            progress = max(step / cfg.steps, stopwatch.seconds() / budget if budget else 0.0)
            return min(1.0, step / max(1, cfg.warmup)) * max(0.02, 1.0 - progress)

        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
        lengths = [len(ex.question) for ex in train]
        per_epoch = len(length_buckets(lengths, cfg.batch_size, random.Random(0)))
        batches_of_epoch: dict[int, list[list[int]]] = {}  # the current epoch's batch order only

        def train_step(step: int) -> dict:
            epoch, pos = divmod(step, per_epoch)
            if epoch not in batches_of_epoch:
                batches_of_epoch.clear()
                batches_of_epoch[epoch] = length_buckets(
                    lengths, cfg.batch_size, random.Random(cfg.seed * 1000003 + epoch)
                )
            with loop.autocast():
                loss, stats = self.batch_loss([train[i] for i in batches_of_epoch[epoch][pos]])
            loop.backward(loss)
            return {"loss": float(loss.detach()), **stats}

        def save_model(folder: Path) -> None:
            self.linker.save_pretrained(folder, half=False)  # fp32: a resumed run continues from exact weights

        loop = TrainingLoop(
            LoopSettings(
                Path(cfg.output),
                cfg.steps,
                per_epoch,
                name="train-linker",
                save_every=cfg.save_every,
                keep_checkpoints=cfg.keep_checkpoints,
                log_every=cfg.log_every,
                max_seconds=budget,
                progress=cfg.progress,
            ),
            params=self.model.parameters(),
            optimizer=opt,
            scheduler=scheduler,
            device=self.device,
            precision=self.precision,
            train_step=train_step,
            save_model=save_model,
            on_step=self.on_step,
            logger=log,
            stopwatch=stopwatch,
        )
        loop.resume(resume)
        self.model.train()
        result = loop.run()
        self.model.eval()
        self.model.to("cpu")  # the linker answers (and its thresholds are tuned) on the CPU
        return {
            "steps": result.step,
            "seconds": round(result.seconds),
            "stopped_by": result.stopped_by,
            "history": result.logged,
        }


def length_buckets(lengths: Sequence[int], batch_size: int, rng: random.Random, pool: int = 50) -> list[list[int]]:
    """Shuffled batches of similar length (less padding): shuffle, sort within pools of `pool` batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = sorted(order[start : start + batch_size * pool], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def raw_predictions(linker: Linker, questions: Sequence[str], floor_mention: float = 0.1, floor_joint: float = 0.05):
    """Mentions scored above low floors, before overlap resolution (for threshold tuning)."""
    keep = linker.mention_threshold, linker.entity_threshold
    linker.mention_threshold, linker.entity_threshold = floor_mention, floor_joint
    try:
        with torch.inference_mode():
            out = []
            for b in range(0, len(questions), 64):
                out.extend(linker._link_batch(list(questions[b : b + 64]), resolve=False))
        return out
    finally:
        linker.mention_threshold, linker.entity_threshold = keep


def apply_thresholds(
    raw: list[list[Mention]], mention_threshold: float, entity_threshold: float
) -> list[list[Mention]]:
    return [
        resolve_overlaps([m for m in ms if m.mention_score >= mention_threshold and m.score >= entity_threshold])
        for ms in raw
    ]


def tune_thresholds(linker: Linker, dev: list[ELExample], metric: str = "weak_f1_in_kb") -> dict:
    raw = raw_predictions(linker, [ex.question for ex in dev])
    best = None
    for mt in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        for et in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5):
            if et > mt:
                continue
            m = evaluate(dev, apply_thresholds(raw, mt, et))
            key = (m[metric], m["strong_f1"])
            if best is None or key > best[0]:
                best = (key, mt, et, m)
    assert best is not None  # the grid has a pair
    return {"mention_threshold": best[1], "entity_threshold": best[2], "dev": best[3]}


def open_for_training(cfg: TrainConfig, kb: KnowledgeBase) -> tuple[Linker, Path | None]:
    """The linker to train and the checkpoint it continues: the newest OUTPUT/checkpoint-STEP, else --init (a
    trained linker), else fresh heads on --encoder."""
    resume = latest_checkpoint(Path(cfg.output))
    if resume is not None:
        return Linker.from_pretrained(resume, kb=kb), resume
    if cfg.init:
        return Linker.from_pretrained(cfg.init, kb=kb), None
    linker = Linker.from_encoder(
        cfg.encoder, kb=kb, config=ELQConfig(encoder=cfg.encoder, entity_encoder=kb.encoder, entity_dim=kb.dim)
    )
    linker.config.base_model = cfg.encoder if cfg.share_frozen else ""
    return linker, None


def train_linker(cfg: TrainConfig, on_step: Callable[[int, float], None] | None = None) -> dict:
    """Train (or resume from the newest OUTPUT/checkpoint-STEP), tune the thresholds on dev, save to OUTPUT."""
    kb = KnowledgeBase.load(cfg.kb)
    train, dev, silver_dev, data_report = build_datasets(
        kb, cfg.data_dir, weak=cfg.weak, dev_every=cfg.dev_every, seed=cfg.seed, silver=cfg.silver
    )
    log.info("data: %s", data_report)
    linker, resume = open_for_training(cfg, kb)
    # English, and the language of each silver file's text
    linker.config.languages = sorted({"en", *data_report["silver_languages"]})
    trainer = Trainer(linker, kb, cfg, on_step=on_step)
    run = trainer.train(train, resume)
    tuned = tune_thresholds(linker, dev)
    linker.config.mention_threshold = tuned["mention_threshold"]
    linker.config.entity_threshold = tuned["entity_threshold"]
    linker.mention_threshold, linker.entity_threshold = tuned["mention_threshold"], tuned["entity_threshold"]
    tuned["silver_dev"] = {
        name: evaluate(examples, linker.link([ex.question for ex in examples])) for name, examples in silver_dev.items()
    }
    report = {"config": asdict(cfg), "data": data_report, "training": run, "tuned": tuned}
    linker.save_pretrained(
        cfg.output, extra_config={"kb_fingerprint": kb.manifest.corpus_fingerprint, "kb_count": len(kb)}
    )
    (Path(cfg.output) / "training_report.json").write_text(json.dumps(report, indent=2))
    prune_checkpoints(Path(cfg.output), 0)  # OUTPUT is the model folder itself: it ships without them
    return report
