"""The dense retriever's training settings (`retriever.training.train.train`), apart from the training code so the
command line can read their defaults and help without loading torch (odqa.commands.options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.settings import RunOptions
from odqa.core.settings import field_help as _help


@dataclass
class RetrieverTrainConfig(RunOptions):
    train_files: list[str]
    output_dir: str
    init: str = field(default="minilm", metadata=_help("encoder to start from (name, shipped model or path)"))
    shared: bool = True  # one encoder for questions and passages (the command's --separate-encoders: False)
    val_files: list[str] = field(
        default_factory=list, metadata=_help("held-out DPR-format file(s) for validation", metavar="FILE")
    )
    holdout: int = field(default=0, metadata=_help("without --val: questions split off --train for validation"))
    limit: int = field(default=0, metadata=_help("first N examples of each training file"))
    q_max_length: int = field(default=32, metadata=_help("question tokens"))
    p_max_length: int = field(default=160, metadata=_help("passage tokens"))
    batch_size: int = field(default=16, metadata=_help("questions per step on CPU"))
    gpu_batch_size: int = field(default=128, metadata=_help("questions per step on a GPU"))
    hard_negatives: int = field(default=1, metadata=_help("hard negatives per question"))
    chunk_size: int = field(
        default=0,
        metadata=_help("gradient caching: texts encoded at once with a graph (0: whole batch); lets big batches fit"),
    )
    lr: float = field(default=2e-5, metadata=_help("peak learning rate"))
    warmup: float = field(default=0.1, metadata=_help("fraction of steps spent warming up"))
    weight_decay: float = field(default=0.0, metadata=_help("AdamW weight decay"))
    epochs: float = field(default=1.0, metadata=_help("passes over the training examples"))
    max_steps: int = field(default=0, metadata=_help("stop after this many steps (overrides --epochs)"))
    scale: float = field(default=20.0, metadata=_help("cosine similarity scale before the softmax"))
    mask_answer_negatives: bool = field(
        default=True,
        metadata=_help(
            "drop in-batch candidates that hold a question's answer from "
            "its negatives (--no-answer-mask: keep them, as DPR does)"
        ),
    )
    distill_weight: float = field(
        default=0.0,
        metadata=_help(
            "add this times a KL term that keeps the in-batch score distribution close to a frozen teacher's "
            "(learning without forgetting; 0: off)"
        ),
    )
    distill_from: str = field(
        default="",
        metadata=_help("teacher encoder for --distill-weight (empty: --init, the model training starts from)"),
    )
    pool_validation: bool = field(
        default=True,
        metadata=_help(
            "validate also by retrieval over every held-out context (--no-pool-validation: by in-batch rank only)"
        ),
    )
    seed: int = field(default=42, metadata=_help("seed of the batch order and dropout", minimum=0))
    save_every: int = field(default=200, metadata=_help("checkpoint every N steps"))
    eval_every: int = field(default=100, metadata=_help("validate every N steps"))
    eval_batch_size: int = field(default=64, metadata=_help("texts encoded per validation batch"))
    primary_metric: str = ""  # the validation figure early stopping watches ("": pool_recall@5, else recall@5)
    early_stop: int = field(
        default=0,
        metadata=_help(
            "stop after N validations in a row without a better pool recall@5 (in-batch recall@5 with "
            "--no-pool-validation); 0: never",
            metavar="N",
        ),
    )


@dataclass
class EncoderDistillConfig(RunOptions):
    """`retriever.training.distill_encoder.distill_passage_encoder`: a shallower passage encoder that writes the
    teacher's passage vectors, so an index it builds is searched with the teacher's question vectors."""

    index: str  # index folder (its passage store) or corpus file/folder whose passages are the training texts
    output_dir: str
    teacher: str = field(
        default="retriever",
        metadata=_help("the encoder whose passage vectors the student learns to write (name, shipped model or path)"),
    )
    layers: list[int] = field(
        default_factory=lambda: [0, 4, 5],
        metadata=_help(
            "teacher layers the student starts from (0-based), in order; the default kept the teacher's vectors "
            "best before training (of 6 layers)",
            metavar="N",
        ),
    )
    init: str = field(
        default="",
        metadata=_help(
            "a student to go on training (an earlier run's final folder) instead of cutting --layers from the teacher"
        ),
    )
    exclude: list[str] = field(
        default_factory=list,
        metadata=_help(
            "SQuAD-format files whose articles' passages are left out (the test sets a retrieval bench reads)",
            metavar="FILE",
        ),
    )
    passages: int = field(default=40000, metadata=_help("training passages, drawn at random from the store or corpus"))
    questions: list[str] = field(
        default_factory=list,
        metadata=_help(
            "probe question files (any question format; answers unused, test sets refused): the loss weighs the "
            "student's error by the directions the teacher's vectors of these questions look in",
            metavar="FILE",
        ),
    )
    question_weight: float = field(
        default=0.5,
        metadata=_help(
            "with --questions: share of the loss on the probe questions' score error (the rest: 1 - cosine)"
        ),
    )
    recall_eval: str = field(
        default="",
        metadata=_help(
            "a SQuAD-format file (a dev split, never a test set): each evaluation also reports recall@1/5/20 of its "
            "gold paragraphs among its paragraphs plus the held-out passages, student beside teacher"
        ),
    )
    max_length: int = field(default=256, metadata=_help("passage tokens (the index's encoder length)"))
    batch_size: int = field(default=32, metadata=_help("passages per step"))
    lr: float = field(default=1e-4, metadata=_help("peak learning rate"))
    warmup: float = field(default=0.05, metadata=_help("fraction of steps spent warming up"))
    epochs: float = field(default=1.0, metadata=_help("passes over the training passages"))
    max_steps: int = field(default=0, metadata=_help("stop after this many steps (overrides --epochs)"))
    max_minutes: float = field(
        default=0.0, metadata=_help("stop after this much training time, resumed runs included (0: no budget)")
    )
    holdout: int = field(
        default=512,
        metadata=_help(
            "passages kept out of training to measure the cosine with the teacher's vectors (0: none)", minimum=0
        ),
    )
    seed: int = field(default=42, metadata=_help("seed of the passage sample and order", minimum=0))
    save_every: int = field(default=100, metadata=_help("checkpoint every N steps"))
