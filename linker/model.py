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
from typing import Any

import torch
from torch import nn

from odqa.linker.heads import ELQConfig, enumerate_spans, word_masks  # noqa: F401 (re-exported: imported from here)


class ELQModel(nn.Module):
    def __init__(self, encoder: nn.Module, config: ELQConfig):
        super().__init__()
        self.config = config
        self.encoder: Any = encoder  # a transformers model (its config is saved beside the linker's weights)
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

    # linker.heads.LinkHeads runs the three scoring methods below in numpy for inference (no torch at query
    # time); these stay for training (autograd); tests hold the two to the same numbers
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
