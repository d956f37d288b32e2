"""Metadata of the settings dataclasses (odqa.config, the training configs): a field's help text and argparse
extras (choices, metavar), read by the command line (odqa.commands.options) so each option is declared once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from odqa.core.device import DEVICE_HELP

# Training precisions of the models trained on CPU or GPU (fp16 needs a GPU; auto: fp32 on a CPU without bf16).
TRAINING_PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def field_help(text: str, **more: Any) -> dict[str, Any]:
    """`field(metadata=field_help("..."))`: the option's help, plus any argparse extras."""
    return {"help": text, **more}


@dataclass(kw_only=True)
class RunOptions:
    """The run settings the reader's and the retriever's trainers share (keyword-only, so they follow each config's
    own fields). A trainer with another default redeclares the field with `field(default=..., kw_only=True)`."""

    keep_checkpoints: int = 2
    log_every: int = field(default=20, metadata=field_help("log the loss every N steps"))
    threads: int = field(default=0, metadata=field_help("torch CPU threads (0: torch's default)"))
    precision: str = field(default="auto", metadata=field_help("training precision (auto: fp32 on CPU)",
                                                               choices=TRAINING_PRECISIONS))
    device: str = field(default="", metadata=field_help(DEVICE_HELP))
    progress: bool = field(default=True, metadata=field_help("progress bar (--no-progress: log lines only)"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
