"""The linker's parts that need no torch: its config, candidate spans, and `LinkHeads`, the scoring after the
encoder (mention scores of spans, span vectors, entity logits) in numpy, so that a linker answering from a
cached ONNX graph never imports torch (odqa.core.runtime). ELQModel (linker.model) keeps the torch form of the
same scoring for training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from odqa.core.errors import OdqaError
from odqa.core.model_files import load_model_settings

LINKER_CONFIG = "linker_config.json"  # a saved linker's ELQConfig
DEFAULT_LINKER = "linker"  # English questions
# Korean and Chinese questions, and any question over a KB encoded by its entity encoder (models/linker-multilingual)
MULTILINGUAL_LINKER = "linker-multilingual"


@dataclass
class ELQConfig:
    encoder: str = "minilm"  # question encoder it was initialised from (informational)
    entity_encoder: str = "minilm"  # the frozen encoder the KB vectors must come from
    entity_dim: int = 384
    hidden_size: int = 384
    max_mention_tokens: int = 10
    max_length: int = 64  # question tokens; longer questions are truncated with a warning
    candidates: int = 16  # dense top-K entities per span
    # entities whose alias equals the span's text, most popular first (0: none)
    alias_candidates: int = field(default=8, metadata={"minimum": 0})
    # recommended thresholds (tuned on the dev split), on probabilities
    mention_threshold: float = field(default=0.5, metadata={"minimum": 0, "maximum": 1})
    entity_threshold: float = field(default=0.3, metadata={"minimum": 0, "maximum": 1})
    # the languages of the questions it was trained on (a KB or question in another one gets a notice)
    languages: list[str] = field(default_factory=lambda: ["en"])
    # a linker that kept part of its encoder frozen may leave those weights out of its files and read them from the
    # model it started from (`base_model`, whose weights' fingerprint must be `base_weights`): the multilingual
    # vocabulary alone is half the size of the model
    base_model: str = ""
    base_weights: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def load_linker_config(path: str | Path) -> ELQConfig:
    """A saved linker's linker_config.json, each value held to its field's rule (thresholds within 0-1, sizes
    whole and positive): NaN or 1.5 as a threshold, which would link nothing without a word, is refused in one line
    naming the file, the key, the value and the range."""
    return ELQConfig(**load_model_settings(path, ELQConfig, "reinstall or retrain the linker, or correct the file"))


def saved_config(name_or_path: str | Path) -> ELQConfig:
    """The ELQConfig of a saved linker (a shipped name or a folder), read without loading its model: its
    `entity_encoder` is the encoder every knowledge base it links against must be encoded with."""
    from odqa.core.models import resolve_model

    path = Path(resolve_model(str(name_or_path))) / LINKER_CONFIG
    if not path.is_file():
        raise OdqaError(
            f"{name_or_path}: not a trained linker (no {LINKER_CONFIG}); train one with `odqa train-linker` or use "
            "the shipped model 'linker'"
        )
    return load_linker_config(path)


@dataclass
class LinkHeads:
    """ELQModel's scoring heads as float32 arrays (`nn.Linear` layout: weight [out, in])."""

    project_weight: np.ndarray
    project_bias: np.ndarray
    nil_weight: np.ndarray
    nil_bias: np.ndarray
    logit_scale: float
    feature_weights: np.ndarray

    @classmethod
    def from_tensors(cls, get: Callable[[str], np.ndarray]) -> LinkHeads:
        """From a getter of ELQModel state-dict entries (its module names) as arrays."""
        project_weight, project_bias, nil_weight, nil_bias = (
            np.asarray(get(key), dtype=np.float32)
            for key in ("project.weight", "project.bias", "nil.weight", "nil.bias")
        )
        return cls(
            project_weight,
            project_bias,
            nil_weight,
            nil_bias,
            float(get("logit_scale")),
            np.asarray(get("feature_weights"), dtype=np.float32),
        )

    @classmethod
    def from_file(cls, path: Path) -> LinkHeads:
        """From a saved linker's weights (linker.safetensors), reading only the heads' tensors."""
        from safetensors import safe_open

        with safe_open(str(path), framework="np") as f:
            return cls.from_tensors(f.get_tensor)

    @classmethod
    def from_model(cls, model) -> LinkHeads:
        """From a live ELQModel (its current weights: the linker may be training)."""
        state = model.state_dict()
        return cls.from_tensors(lambda key: state[key].detach().float().cpu().numpy())

    @staticmethod
    def mention_logits(scores: np.ndarray, spans: np.ndarray) -> np.ndarray:
        """scores [B, L, 3] (start, end, inside); spans [N, 3] of (batch row, first token, last token) -> [N]."""
        b, i, j = spans[:, 0], spans[:, 1], spans[:, 2]
        inside = scores[..., 2]
        csum = np.pad(np.cumsum(inside, axis=-1), ((0, 0), (1, 0)))  # csum[:, t] = sum of inside[:, :t]
        mean_inside = (csum[b, j + 1] - csum[b, i]) / (j - i + 1).astype(inside.dtype)
        return scores[b, i, 0] + scores[b, j, 1] + mean_inside

    def span_vectors(self, hidden: np.ndarray, spans: np.ndarray) -> np.ndarray:
        """Mean of the span's token vectors, projected and L2-normalised -> [N, d]."""
        b, i, j = spans[:, 0], spans[:, 1], spans[:, 2]
        csum = np.pad(np.cumsum(hidden, axis=1), ((0, 0), (1, 0), (0, 0)))
        mean = (csum[b, j + 1] - csum[b, i]) / (j - i + 1).astype(hidden.dtype)[:, None]
        projected = mean @ self.project_weight.T + self.project_bias
        return projected / np.maximum(np.linalg.norm(projected, axis=-1, keepdims=True), 1e-12)

    def entity_logits(self, span_vecs: np.ndarray, cand_vecs: np.ndarray, features: np.ndarray) -> np.ndarray:
        """span_vecs [N, d]; cand_vecs [N, C, d]; features [N, C, 2] -> logits [N, C + 1] (last = NIL)."""
        scale = np.float32(min(np.exp(self.logit_scale), 100.0))
        sims = (
            np.einsum("nd,ncd->nc", span_vecs, cand_vecs) * scale + features.astype(np.float32) @ self.feature_weights
        )
        nil = span_vecs @ self.nil_weight.T + self.nil_bias
        return np.concatenate([sims, nil], axis=-1)


def enumerate_spans(word_start: np.ndarray, word_end: np.ndarray, max_tokens: int) -> np.ndarray:
    """All (row, i, j) with i a word's first token, j a word's last token, 0 <= j - i < max_tokens.

    word_start/word_end: bool [B, L] masks (special and padding tokens are False in both).
    """
    out = []
    for row in range(word_start.shape[0]):
        starts = np.flatnonzero(word_start[row])
        ends = np.flatnonzero(word_end[row])
        for i in starts:
            for j in ends[(ends >= i) & (ends < i + max_tokens)]:
                out.append((row, i, j))
    return np.asarray(out, dtype=np.int64).reshape(-1, 3)


def word_masks(
    word_ids: list[list[int | None]], letter_by_letter: list[list[bool]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """First/last sub-token of each word, from the fast tokenizer's word_ids(). `letter_by_letter[row][t]`: token t
    holds Hangul, Han or kana, where a mention may begin or end at any token (Chinese leaves no space between
    words, Korean glues particles to them: 아인슈타인|은)."""
    n = max((len(w) for w in word_ids), default=0)
    start = np.zeros((len(word_ids), n), dtype=bool)
    end = np.zeros((len(word_ids), n), dtype=bool)
    for row, ids in enumerate(word_ids):
        cjk = letter_by_letter[row] if letter_by_letter is not None else [False] * len(ids)
        for t, w in enumerate(ids):
            if w is None:
                continue
            if t == 0 or ids[t - 1] != w or cjk[t] or cjk[t - 1]:
                start[row, t] = True
            if t + 1 >= len(ids) or ids[t + 1] != w or cjk[t] or cjk[t + 1]:
                end[row, t] = True
    return start, end
