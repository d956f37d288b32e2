"""Text encoder: a transformer with mean pooling, as the all-MiniLM-L6-v2 model card prescribes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from odqa.core.device import autocast_for, pick_device
from odqa.core.errors import OdqaError
from odqa.core.models import resolve_model


def mean_pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    return (token_embeddings * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class TextEncoder(torch.nn.Module):
    """Encodes texts into L2-normalised vectors (inner product = cosine)."""

    def __init__(self, model, tokenizer, name: str, max_length: int = 256, normalize: bool = True,
                 precision: str = "auto"):
        super().__init__()
        self.precision = precision  # of encode() only: training sets its own autocast
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length
        self.normalize = normalize

    @classmethod
    def from_pretrained(cls, name_or_path: str, max_length: int = 256, device: str | None = None,
                        precision: str = "auto") -> "TextEncoder":
        path = resolve_model(name_or_path)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModel.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise OdqaError(
                f"cannot load encoder {name_or_path!r}: {exc.__class__.__name__}. "
                "Pass a local model folder, a model shipped under models/, or 'minilm'."
            ) from exc
        encoder = cls(model, tokenizer, name=name_or_path, max_length=max_length, precision=precision)
        encoder.to(pick_device(device))
        encoder.eval()
        return encoder

    def save_pretrained(self, path: str | Path) -> None:
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def tokenize(self, texts: Sequence[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=max_length or self.max_length, return_tensors="pt"
        )
        return {k: v.to(self.device) for k, v in batch.items()}

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.model(**batch)
        vectors = mean_pool(out.last_hidden_state, batch["attention_mask"])
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = 64, sort_by_length: bool = True,
               progress: str = "", max_length: int | None = None, precision: str | None = None) -> np.ndarray:
        """Encode in batches; sorting by length first keeps padding (and time) low. `progress`: a bar label;
        `max_length`, `precision`: truncation and autocast for this call (default: the encoder's)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts]) if sort_by_length else np.arange(len(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc=progress, unit="batch")
        for i in starts:
            idx = order[i : i + batch_size]
            with autocast_for(self.device, precision or self.precision):
                vectors = self.forward(self.tokenize([texts[j] for j in idx], max_length))
            out[idx] = torch.nn.functional.normalize(vectors.float(), dim=-1).cpu().numpy() if self.normalize \
                else vectors.float().cpu().numpy()
        return out


def passage_text(title: str, text: str) -> str:
    """How a passage is shown to an encoder: its title, a separator, then its text (as DPR does)."""
    return f"{title} | {text}" if title else text


def iter_batches(items: Iterable, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
