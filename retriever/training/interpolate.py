"""Weight-space interpolation of two encoders of one architecture (WiSE-FT, Wortsman et al. 2022):
theta = (1 - weight) * base + weight * tuned. Fine-tuning a general sentence encoder on one kind of
question (NQ-style) costs it recall on others (SQuAD-style); a point between the two models often keeps most
of the gain and little of the loss, at no inference cost."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from odqa.core.atomic import atomic_folder
from odqa.core.errors import OdqaError
from odqa.core.models import resolve_model
from odqa.core.weight_averaging import average_weights


def _load(name_or_path: str):
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model(name_or_path)
    try:
        return AutoModel.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise OdqaError(f"cannot load encoder {name_or_path}: {exc.__class__.__name__}: {exc}") from exc


def interpolate_encoders(base: str, tuned: str, output: str | Path, weight: float = 0.5) -> Path:
    """Write (1 - weight) * base + weight * tuned to `output` (fp32, the tuned model's tokenizer and info)."""
    if not 0.0 <= weight <= 1.0:
        raise OdqaError(f"--weight must be in [0, 1] (0 = the base model, 1 = the tuned one), got {weight}")
    base_model, _ = _load(base)
    tuned_model, tokenizer = _load(tuned)
    mixed = average_weights([base_model.state_dict(), tuned_model.state_dict()], [1.0 - weight, weight], [base, tuned])
    tuned_model.load_state_dict(mixed)
    info_path = Path(resolve_model(tuned)) / "retriever_info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    info["interpolation"] = {"base": base, "tuned": tuned, "weight": weight}
    with atomic_folder(output) as tmp:
        tuned_model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "retriever_info.json").write_text(json.dumps(info, indent=2))
    return Path(output)
