"""The reader's training settings (`reader.training.train.train`), apart from the training code so the command line can
read their defaults and help without loading torch (odqa.commands.options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.settings import RunOptions
from odqa.core.settings import field_help as _help
from odqa.reader.features import DEFAULT_MAX_LENGTH, DEFAULT_MAX_QUERY_TOKENS


@dataclass
class TrainConfig(RunOptions):
    train_files: list[str]
    output_dir: str
    init: str = field(default="minilm", metadata=_help("model to start from: an encoder or a QA checkpoint"))
    max_length: int = field(default=DEFAULT_MAX_LENGTH, metadata=_help("tokens per window"))
    stride: int = field(default=64, metadata=_help("tokens shared by consecutive windows"))
    max_query_tokens: int = DEFAULT_MAX_QUERY_TOKENS
    batch_size: int = field(default=32, metadata=_help("CPU batch size"))
    gpu_batch_size: int = field(default=64, metadata=_help("batch size on a GPU"))
    lr: float = field(default=1e-4, metadata=_help("peak learning rate"))
    warmup: float = field(default=0.1, metadata=_help("fraction of steps spent warming up"))
    weight_decay: float = 0.01
    epochs: float = field(default=2.0, metadata=_help("passes over the training examples"))
    max_steps: int = field(default=0, metadata=_help("stop after this many steps (overrides --epochs)"))
    max_minutes: float = field(
        default=0.0,
        metadata=_help(
            "stop after this much training time, resumed runs included, and save the model reached (0: no budget)"
        ),
    )
    seed: int = field(default=42, metadata=_help("seed of the batch order and dropout", minimum=0))
    save_every: int = field(default=500, metadata=_help("checkpoint every N steps"))
    keep_checkpoints: int = field(default=3, kw_only=True)
    negative_ratio: float = field(
        default=1.0,
        metadata=_help(
            "fraction of unanswerable questions kept (with --shared-norm: of questions none of whose passages answers)"
        ),
    )
    shared_norm: float = field(
        default=0.0,
        metadata=_help(
            "weight of a loss that scores all windows of one question (every passage of it in one training file) in "
            "one softmax, as reading compares their spans; batches then hold whole questions (0: each window alone)",
            minimum=0,
        ),
    )
    selection_loss: float = field(
        default=0.0,
        metadata=_help(
            "with --shared-norm, weight of a passage-selection loss: "
            "minus each window's null score ([CLS] start + end) "
            "in one softmax over a question's windows, the answer-holding ones the target, so the null score ranks "
            "passages (read with the reader setting selection_weight)",
            minimum=0,
        ),
    )
    teacher: str = field(
        default="",
        metadata=_help(
            "a larger QA model to distil from (any tokenizer): its start/end scores on each training window (and, with "
            "--shared-norm, over all windows of a question) become soft targets beside the labels (default: none)"
        ),
    )
    distill_weight: float = field(
        default=1.0,
        metadata=_help("weight of the distillation loss added to the label loss (with --teacher)", minimum=0),
    )
    distill_temperature: float = field(
        default=2.0,
        metadata=_help(
            "softmax temperature of the teacher's and the student's scores in the distillation loss", minimum=0.05
        ),
    )
    # SQuAD dev files have up to 5 annotators, who often disagree on the span's boundaries
    all_answers: bool = field(
        default=False,
        metadata=_help("one example per distinct reference answer (--no-all-answers: the first answer only)"),
    )
    limit: int = field(default=0, metadata=_help("first N questions of each file (smoke tests)"))
    to_simplified: bool = field(
        default=False,
        metadata=_help(
            "fold Traditional Chinese (e.g. DRCD) to Simplified with OpenCC, answer offsets kept (needs .[cjk])"
        ),
    )
    keep_layers: str = field(
        default="",
        metadata=_help("a layer-reduced student: the encoder layers of --init kept, e.g. 0,2,4,6,8,10 (default: all)"),
    )
    entity_marks: bool = field(
        default=False,
        metadata=_help(
            "read each passage with the question's entity mark and the passage's article title (reader.entity_marks): "
            "the training files must carry the questions' linked entities (run_qa.py link-reader-data)"
        ),
    )
    freeze_embeddings: bool = field(
        default=False,
        metadata=_help(
            "keep the word embeddings as --init has them: no gradient or "
            "optimiser state for the vocabulary (large for multilingual encoders)"
        ),
    )
