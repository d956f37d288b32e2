"""The frozen entity encoder: a sentence-transformers style model (mean pooling, L2-normalised) over
`title [SEP] description`. ELQ trains its entity encoder separately; here it is off-the-shelf MiniLM."""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from odqa.errors import OdqaError
from odqa.models import resolve_model

log = logging.getLogger(__name__)


def entity_text(title: str, description: str) -> str:
    return f"{title} [SEP] {description}" if description else title


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


class EntityEncoder:
    def __init__(self, name: str, max_length: int = 64, device: str | None = None):
        path = resolve_model(name)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise OdqaError(f"cannot load entity encoder {name!r}: {exc.__class__.__name__}; use 'minilm' or a local model folder") from exc
        self.name = name
        self.max_length = max_length
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device).eval()

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 128, progress: bool = False) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        starts = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="encoding entities", unit="batch")
        for i in starts:
            idx = order[i : i + batch_size]
            batch = self.tokenizer(
                [texts[j] for j in idx], padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            hidden = self.model(**batch).last_hidden_state
            vectors = torch.nn.functional.normalize(mean_pool(hidden, batch["attention_mask"]), dim=-1)
            out[idx] = vectors.float().cpu().numpy()
        return out
