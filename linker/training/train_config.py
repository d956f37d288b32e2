"""The linker's training settings (`linker.training.train.train_linker`), apart from the training code so the
command line can read their defaults and help without loading torch (odqa.commands.options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odqa.core.models import REPO_ROOT
from odqa.core.settings import RunOptions
from odqa.core.settings import field_help as _help


@dataclass
class TrainConfig(RunOptions):
    kb: str = field(default="work_indexes/kb", metadata=_help("knowledge-base folder the linker learns to link to"))
    # the project's data beside the checkout (../shared/data), wherever the command runs from
    data_dir: str = field(
        default=str(REPO_ROOT.parent / "shared" / "data"),
        metadata=_help("folder holding el/ (LC-QuAD, Complex-EL4QA, QALD) and webquestions/"),
    )
    output: str = field(default="models/linker", metadata=_help("folder for the trained linker", output="folder"))
    encoder: str = field(default="minilm", metadata=_help("question encoder to start from"))
    steps: int = field(default=2500, metadata=_help("training steps"))
    # resumed runs included; the learning rate decays towards it too
    max_minutes: float = field(default=30.0, metadata=_help("stop training after this wall time (0: none)"))
    batch_size: int = field(default=32, metadata=_help("questions per step"))
    lr: float = field(default=5e-5, metadata=_help("learning rate of the encoder"))
    head_lr: float = field(default=1e-3, metadata=_help("learning rate of the mention and entity heads"))
    warmup: int = 100
    hard_negatives: int = field(default=24, metadata=_help("hard negative entities per mention"))
    weak: int = field(
        default=6000, metadata=_help("weak-supervision sentences from the KB's articles (0: none)", minimum=0)
    )
    silver: list[str] = field(
        default_factory=list,
        metadata=_help(
            "SQuAD-style files in other languages (KorQuAD, CMRC 2018, DRCD; names relative to --data-dir) whose "
            "article titles, found in their questions and sentences, are silver mentions; every 5th article is dev"
        ),
    )
    train_layers: int = field(
        default=0,
        metadata=_help(
            "train only the top N transformer layers of the encoder, the others stay frozen (0: all); a multilingual "
            "encoder's lower layers keep its languages in one space",
            minimum=0,
        ),
    )
    share_frozen: bool = field(
        default=False,
        metadata=_help(
            "leave the encoder's frozen weights out of the saved linker: it reads them from --encoder (a multilingual "
            "vocabulary alone is half the model)"
        ),
    )
    dev_every: int = 10  # every 10th LC-QuAD question (by id) is held out as dev
    threads: int = field(default=2, kw_only=True, metadata=_help("torch CPU threads (0: torch's default)", minimum=0))
    seed: int = field(default=13, metadata=_help("seed of the data order and the heads' initialisation", minimum=0))
    init: str = field(default="", metadata=_help("continue training this trained linker (folder) instead"))
    save_every: int = field(
        default=500,
        metadata=_help(
            "checkpoint every N steps into OUTPUT/checkpoint-STEP; a rerun with the same --output resumes from the "
            "newest (they are removed once the final model is saved)"
        ),
    )
    log_every: int = field(default=50, kw_only=True, metadata=_help("log the loss every N steps"))
