"""The ELQ model (Li et al., 2020): one pass of a BERT-style question encoder gives token vectors; linear
heads give start, end and inside scores per token; every span of up to `max_mention_tokens` tokens gets a
mention score sigmoid(start_i + end_j + mean inside_i..j); a span's vector (mean of its token vectors,
projected to the entity space) scores entities by inner product with the frozen entity embeddings.

Additions to ELQ, both small: a NIL logit (a linear function of the span vector) so out-of-KB mentions can
say "no entity", and two learned weights on per-candidate features (the span's text is one of the
candidate's aliases; the candidate's log popularity), which help a 6-layer encoder tell namesakes apart.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
from torch import nn


@dataclass
class ELQConfig:
    encoder: str = "minilm"  # question encoder it was initialised from (informational)
    entity_encoder: str = "minilm"  # the frozen encoder the KB vectors must come from
    entity_dim: int = 384
    hidden_size: int = 384
    max_mention_tokens: int = 10
    max_length: int = 64  # question tokens; longer questions are truncated with a warning
    candidates: int = 16  # dense top-K entities per span
    alias_candidates: int = 8  # entities whose alias equals the span's text, most popular first
    mention_threshold: float = 0.5  # recommended thresholds (tuned on the dev split)
    entity_threshold: float = 0.3

    @classmethod
    def from_dict(cls, data: dict) -> "ELQConfig":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_dict(self) -> dict:
        return asdict(self)


class ELQModel(nn.Module):
    def __init__(self, encoder: nn.Module, config: ELQConfig):
        super().__init__()
        self.config = config
        self.encoder = encoder
        h, d = config.hidden_size, config.entity_dim
        self.mention_heads = nn.Linear(h, 3)  # start, end, inside
        self.project = nn.Linear(h, d)
        if h == d:  # start as the identity: mean-pooled MiniLM tokens already live near the entity space
            with torch.no_grad():
                self.project.weight.copy_(torch.eye(d))
                self.project.bias.zero_()
        self.nil = nn.Linear(d, 1)
        with torch.no_grad():
            self.nil.weight.zero_()
            self.nil.bias.fill_(8.0)  # on the scale of logit_scale * cosine
        self.logit_scale = nn.Parameter(torch.tensor(math.log(20.0)))
        self.feature_weights = nn.Parameter(torch.tensor([2.0, 0.0]))  # alias match, log popularity / 10

    def encode(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        hidden = self.encoder(**kwargs).last_hidden_state  # [B, L, h]
        scores = self.mention_heads(hidden)  # [B, L, 3]
        return hidden, scores

    @staticmethod
    def mention_logits(scores: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
        """scores [B, L, 3]; spans [N, 3] of (batch row, first token, last token) -> logits [N]."""
        b, i, j = spans[:, 0], spans[:, 1], spans[:, 2]
        inside = scores[..., 2]
        csum = torch.nn.functional.pad(inside.cumsum(-1), (1, 0))  # csum[:, t] = sum of inside[:, :t]
        mean_inside = (csum[b, j + 1] - csum[b, i]) / (j - i + 1).to(inside.dtype)
        return scores[b, i, 0] + scores[b, j, 1] + mean_inside

    def span_vectors(self, hidden: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
        """Mean of the span's token vectors, projected and L2-normalised -> [N, d]."""
        b, i, j = spans[:, 0], spans[:, 1], spans[:, 2]
        csum = torch.nn.functional.pad(hidden.cumsum(1), (0, 0, 1, 0))
        mean = (csum[b, j + 1] - csum[b, i]) / (j - i + 1).to(hidden.dtype).unsqueeze(-1)
        return torch.nn.functional.normalize(self.project(mean), dim=-1)

    def entity_logits(self, span_vecs: torch.Tensor, cand_vecs: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """span_vecs [N, d]; cand_vecs [N, C, d]; features [N, C, 2] -> logits [N, C + 1] (last = NIL)."""
        scale = self.logit_scale.exp().clamp(max=100.0)
        sims = torch.einsum("nd,ncd->nc", span_vecs, cand_vecs) * scale + features @ self.feature_weights
        nil = self.nil(span_vecs)
        return torch.cat([sims, nil], dim=-1)


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


def word_masks(word_ids: list[list[int | None]]) -> tuple[np.ndarray, np.ndarray]:
    """First/last sub-token of each word, from the fast tokenizer's word_ids()."""
    n = max((len(w) for w in word_ids), default=0)
    start = np.zeros((len(word_ids), n), dtype=bool)
    end = np.zeros((len(word_ids), n), dtype=bool)
    for row, ids in enumerate(word_ids):
        for t, w in enumerate(ids):
            if w is None:
                continue
            if t == 0 or ids[t - 1] != w:
                start[row, t] = True
            if t + 1 >= len(ids) or ids[t + 1] != w:
                end[row, t] = True
    return start, end
