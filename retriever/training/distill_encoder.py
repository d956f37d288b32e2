"""A shallower passage encoder distilled from a dense encoder, for faster index builds (issue #23).

Building an index encodes every passage once: 759k passages of the Wikipedia subset with the 6-layer default
encoder take hours on a laptop-class CPU, and no runtime or quantisation recipe gets that encoder much faster
there (bench/results/speed-avx2.md): only fewer operations do. The student starts from some of the teacher's
layers (its embeddings and, by default, layers 0, 4 and 5 of 6: of the 3-layer choices tried, the one whose
untrained vectors were closest to the teacher's, cosine 0.69 against 0.26 for 0, 2, 4) and learns to write
the teacher's normalised passage vectors (loss: 1 - cosine, the normalised form of the MSE of
sentence-transformers' distillation recipe) over passages of the corpus itself. Questions are still encoded
by the teacher, which costs little (one short text per question), so an index built by the student is
searched in the teacher's vector space: `run_qa.py index --encoder STUDENT` records the teacher (the student's
retriever_info.json names it) as the index's question encoder.

Passage texts come from an index's passage store or straight from a corpus (any format `index --corpus` reads),
drawn at random; `exclude` removes the articles of the test sets a retrieval bench reads (SQuAD dev). No labels
are used. Probe questions (`questions`, answers unused) only shape the loss: their teacher vectors say which
directions of a passage vector search reads (retriever/training/probe_loss.py). `recall_eval` adds a retrieval check to
each evaluation, on a dev split's paragraphs among the held-out passages, the student beside the teacher.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.training import (
    LoopSettings,
    TrainingLoop,
    keep_transformer_layers,
    latest_checkpoint,
    set_seed,
    training_device,
)
from odqa.retriever.training.probe_loss import probe_weighted_loss
from odqa.retriever.training.train import epoch_order
from odqa.retriever.training.train_config import EncoderDistillConfig

log = logging.getLogger(__name__)

INFO_FILE = "retriever_info.json"


def keep_layers(encoder, layers: Sequence[int]):
    """`encoder` (a TextEncoder over a BERT-style model) with only the transformer layers `layers`, in that order."""
    keep_transformer_layers(encoder.model, list(layers), "--layers", encoder.name)
    return encoder


def sample_passages(
    index: str | Path, count: int, exclude: Sequence[str | Path] = (), seed: int = 42
) -> list[tuple[str, str]]:
    """(title, text) of `count` passages drawn at random (seeded) from the index's passage store, or from a corpus
    file or folder, none from the articles of the SQuAD-format files `exclude`."""
    from odqa.corpus.questions import article_key, squad_article_keys
    from odqa.indexes.folder import FolderIndex

    excluded = squad_article_keys(exclude)
    if not _is_index_folder(Path(index)):
        return _sample_corpus(index, count, excluded, seed)
    store = FolderIndex.open(index).store
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(store))
    chosen: list[tuple[str, str]] = []
    for start in range(0, len(order), 4 * count + 1024):
        rows = np.sort(order[start : start + 4 * count + 1024])
        table = store.table.take(rows).select(["title", "text"]).to_pydict()
        for title, text in zip(table["title"], table["text"]):
            if article_key(title) not in excluded and text.strip():
                chosen.append((title, text))
        if len(chosen) >= count:
            break
    np.random.default_rng(seed + 1).shuffle(chosen)  # `take` returned each slice in store order
    return chosen[:count]


def _is_index_folder(path: Path) -> bool:
    """An index folder, whole or damaged (its manifest or one of its parts is there): FolderIndex.open names the
    damage rather than the folder being read as a corpus."""
    from odqa.indexes.layout import PASSAGES, SEARCH_PARTS
    from odqa.indexes.manifest import MANIFEST

    return path.is_dir() and any((path / name).exists() for name in (MANIFEST, PASSAGES, *SEARCH_PARTS))


def _sample_corpus(corpus: str | Path, count: int, excluded: set[str], seed: int) -> list[tuple[str, str]]:
    """A uniform sample of a corpus's passages in one streaming pass (reservoir sampling: memory bounded by
    `count`), shuffled."""
    from odqa.corpus.questions import article_key
    from odqa.corpus.readers import iter_passages

    if not Path(corpus).exists():
        raise OdqaError(f"--index {corpus}: neither an index folder nor a corpus file or folder; give one")
    rng = np.random.default_rng(seed)
    chosen: list[tuple[str, str]] = []
    seen = 0
    for passage in iter_passages(corpus):
        if article_key(passage.title) in excluded or not passage.text.strip():
            continue
        if len(chosen) < count:
            chosen.append((passage.title, passage.text))
        else:
            slot = int(rng.integers(0, seen + 1))
            if slot < count:
                chosen[slot] = (passage.title, passage.text)
        seen += 1
    np.random.default_rng(seed + 1).shuffle(chosen)
    return chosen


def question_vectors(encoder, questions: Sequence[str], batch_size: int = 256, max_length: int = 64) -> torch.Tensor:
    """fp32 vectors of `questions` (with the encoder's query prefix) from the torch model."""
    return _torch_vectors(encoder, [encoder.query_prefix + q for q in questions], max_length, batch_size)


def probe_second_moment(teacher, files: Sequence[str | Path]) -> torch.Tensor | None:
    """The probe questions' second-moment matrix (retriever/training/probe_loss.py), from the teacher's vectors of the
    distinct questions of `files`; None without files."""
    from odqa.corpus.questions import check_not_test_set, load_questions
    from odqa.retriever.training.probe_loss import question_second_moment

    if not files:
        return None
    questions: dict[str, None] = {}
    for file in files:
        check_not_test_set(file)
        questions.update(dict.fromkeys(item.question.strip() for item in load_questions(file)))
    log.info("probe questions: %d distinct from %d file(s)", len(questions), len(files))
    return question_second_moment(question_vectors(teacher, list(questions)))


class RecallCheck:
    """Recall@k of a SQuAD-format file's gold paragraphs among its paragraphs plus distractor passages, questions
    encoded by the teacher, for the teacher's passage vectors (once) and a student's (each call)."""

    def __init__(
        self,
        teacher,
        squad_file: str | Path,
        distractors: Sequence[tuple[str, str]],
        max_length: int,
        ks: Sequence[int] = (1, 5, 20),
    ):
        from odqa.corpus.questions import check_not_test_set, load_questions

        check_not_test_set(squad_file)
        items = [item for item in load_questions(squad_file) if item.context and item.answers]
        if not items:
            raise OdqaError(
                f"--recall-eval {squad_file}: no answerable questions with a paragraph; give a SQuAD-format file"
            )
        paragraphs: dict[tuple[str, str], int] = {}
        self.gold = torch.tensor([paragraphs.setdefault((item.title, item.context), len(paragraphs)) for item in items])
        self.passages = list(paragraphs) + list(distractors)
        self.max_length, self.ks = max_length, tuple(ks)
        self.questions = question_vectors(teacher, [item.question for item in items])
        self.teacher = self._recall(passage_vectors(teacher, self.passages, max_length))

    def _recall(self, passages: torch.Tensor) -> dict:
        scores = self.questions.to(passages.device) @ passages.float().T
        gold = scores.gather(1, self.gold.to(passages.device)[:, None])
        rank = (scores > gold).sum(1)  # ties go to the gold paragraph
        return {f"recall@{k}": round(100.0 * float((rank < k).float().mean()), 2) for k in self.ks}

    def report(self, student) -> dict:
        return {
            "student": self._recall(passage_vectors(student, self.passages, self.max_length)),
            "teacher": self.teacher,
            "questions": len(self.gold),
            "passages": len(self.passages),
        }


def passage_vectors(
    encoder, passages: Sequence[tuple[str, str]], max_length: int, batch_size: int = 64
) -> torch.Tensor:
    """fp32 vectors of `passages` (with the encoder's passage prefix) from the torch model."""
    return _torch_vectors(encoder, encoder.with_passage_prefix(passages), max_length, batch_size)


@torch.no_grad()
def _torch_vectors(encoder, texts: Sequence, max_length: int, batch_size: int) -> torch.Tensor:
    """fp32 vectors of `texts`, prefixes already added, batch by batch (train mode switched off while encoding)."""
    was_training = encoder.training
    encoder.eval()
    try:
        return torch.cat(
            [
                encoder(encoder.tokenize(texts[i : i + batch_size], max_length)).float()
                for i in range(0, len(texts), batch_size)
            ]
        )
    finally:
        encoder.train(was_training)


def cosine_report(student, teacher_vectors: torch.Tensor, passages, max_length: int) -> dict:
    """Cosine between the student's and the teacher's vectors of the held-out passages."""
    vectors = passage_vectors(student, passages, max_length).to(teacher_vectors.device)
    cosine = torch.nn.functional.cosine_similarity(vectors, teacher_vectors, dim=-1)
    return {
        "cosine_mean": round(float(cosine.mean()), 5),
        "cosine_min": round(float(cosine.min()), 5),
        "passages": len(passages),
    }


def distill_passage_encoder(cfg: EncoderDistillConfig) -> Path:
    """Train (or resume) the student; return the folder of the final model (OUTPUT/final)."""
    from transformers import get_linear_schedule_with_warmup

    from odqa.core.encoder import TextEncoder

    out = Path(cfg.output_dir)
    device, precision = training_device(cfg.device, cfg.precision, cfg.threads)
    if cfg.passages < cfg.batch_size:
        raise OdqaError(f"--passages {cfg.passages} is fewer than one batch of {cfg.batch_size}")
    teacher = TextEncoder.from_pretrained(cfg.teacher, max_length=cfg.max_length)
    if not teacher.normalize:
        raise OdqaError(
            f"{cfg.teacher} scores by dot product: the cosine loss would change its vectors' lengths; "
            "distil an encoder with cosine similarity"
        )
    teacher.to(device).eval().requires_grad_(False)
    if cfg.init and not (Path(cfg.init) / INFO_FILE).is_file():
        raise OdqaError(
            f"--init {cfg.init}: not a distill-encoder student (no {INFO_FILE}); give an earlier run's final folder"
        )
    resume = latest_checkpoint(out)
    student = TextEncoder.from_pretrained(str(resume or cfg.init or cfg.teacher), max_length=cfg.max_length)
    if resume is None and not cfg.init:
        keep_layers(student, cfg.layers)  # a bad --layers is named before the passages are drawn
    passages = sample_passages(cfg.index, cfg.passages + cfg.holdout, cfg.exclude, cfg.seed)
    if len(passages) < cfg.batch_size + cfg.holdout:
        raise OdqaError(
            f"{cfg.index} gave {len(passages)} passages outside the excluded articles, fewer than "
            f"--holdout {cfg.holdout} plus one batch"
        )
    heldout, train = passages[: cfg.holdout], passages[cfg.holdout :]

    set_seed(cfg.seed)
    out.mkdir(parents=True, exist_ok=True)
    student.to(device).train()
    heldout_teacher = passage_vectors(teacher, heldout, cfg.max_length) if heldout else None
    second_moment = probe_second_moment(teacher, cfg.questions)
    recall_check = RecallCheck(teacher, cfg.recall_eval, heldout, cfg.max_length) if cfg.recall_eval else None

    per_epoch = len(train) // cfg.batch_size
    total = cfg.max_steps if cfg.max_steps > 0 else max(1, math.ceil(cfg.epochs * per_epoch))
    params = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)
    order_of_epoch: dict[int, list[int]] = {}

    def train_one_step(step: int) -> dict:
        epoch, pos = divmod(step, per_epoch)
        if epoch not in order_of_epoch:
            order_of_epoch.clear()
            order_of_epoch[epoch] = epoch_order(len(train), cfg.seed, epoch)
        texts = student.with_passage_prefix(
            [train[i] for i in order_of_epoch[epoch][pos * cfg.batch_size : (pos + 1) * cfg.batch_size]]
        )
        batch = student.tokenize(texts, cfg.max_length)
        with torch.no_grad(), loop.autocast():
            target = teacher(batch).float()
        with loop.autocast():
            vectors = student(batch).float()
        loss = probe_weighted_loss(vectors, target, second_moment, cfg.question_weight)  # both unit vectors
        loop.backward(loss)
        return {"loss": float(loss.detach()), "passages": len(texts)}

    def save_model(folder: Path) -> None:
        student.save_pretrained(folder)
        _write_info(folder, cfg, loop.step, None)

    def evaluate(step: int) -> dict:
        assert heldout_teacher is not None  # evaluated only with held-out passages
        report = {"step": step, **cosine_report(student, heldout_teacher, heldout, cfg.max_length)}
        if recall_check is not None:
            report["recall"] = recall_check.report(student)
        return report

    loop = TrainingLoop(
        LoopSettings(
            out,
            total,
            per_epoch,
            name="distill-encoder",
            save_every=cfg.save_every,
            keep_checkpoints=cfg.keep_checkpoints,
            log_every=cfg.log_every,
            eval_at_start=True,
            max_seconds=cfg.max_minutes * 60,
            count="passages",
            progress=cfg.progress,
        ),
        params=params,
        optimizer=optimizer,
        scheduler=scheduler,
        device=device,
        precision=precision,
        train_step=train_one_step,
        save_model=save_model,
        evaluate=evaluate if heldout else None,
        logger=log,
    )
    loop.resume(resume)
    (out / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    layers = student_layers(cfg)
    log.info(
        "distilling %s into %d of its layers (%s): %d steps of %d passages (%d training, %d held out; %s on %s)",
        cfg.teacher,
        len(layers),
        layers,
        total,
        cfg.batch_size,
        len(train),
        len(heldout),
        precision,
        device,
    )
    result = loop.run()
    final = out / "final"
    with atomic_folder(final) as tmp:
        student.save_pretrained(tmp)
        _write_info(
            tmp,
            cfg,
            result.step,
            {
                "seconds": result.seconds,
                "stopped_by": result.stopped_by,
                "train_passages": len(train),
                "heldout": result.last_eval,
                "device": str(device),
                "precision": precision,
            },
        )
    log.info("saved %s", final)
    return final


def student_layers(cfg: EncoderDistillConfig) -> list[int]:
    """The teacher layers the student holds: --layers, or, going on from --init, those its first run cut."""
    if cfg.init:
        return json.loads((Path(cfg.init) / INFO_FILE).read_text()).get("layers", list(cfg.layers))
    return list(cfg.layers)


def _write_info(folder: Path, cfg: EncoderDistillConfig, step: int, run: dict | None) -> None:
    """The student's record: what it was distilled from and how, and the settings the index reads
    (mean pooling, normalised)."""
    layers = student_layers(cfg)
    (Path(folder) / INFO_FILE).write_text(
        json.dumps(
            {
                "distilled_from": cfg.teacher,
                "layers": layers,
                "query_encoder": cfg.teacher,
                "steps": step,
                "config": cfg.to_dict(),
                **(run or {}),
                "pooling": "mean",
                "normalize": True,
            },
            indent=2,
        )
    )
