"""Metadata of the settings dataclasses (odqa.config, the training configs): a field's help text and argparse
extras (choices, metavar), read by the command line (odqa.commands.options) so each option is declared once."""

from __future__ import annotations

from typing import Any

# Training precisions of the models trained on CPU or GPU (fp16 needs a GPU; auto: fp32 on a CPU without bf16).
TRAINING_PRECISIONS = ("auto", "fp32", "fp16", "bf16")


def field_help(text: str, **more: Any) -> dict[str, Any]:
    """`field(metadata=field_help("..."))`: the option's help, plus any argparse extras."""
    return {"help": text, **more}
