"""DPR's loss: negative log-likelihood of each question's positive passage among all passages of the batch.

For B questions the batch holds C >= B candidate passages: candidate i (i < B) is question i's positive, the
rest are the questions' hard negatives (DPR: one BM25 passage per question without an answer). Every other
question's positive and every hard negative is a negative for question i ("in-batch negatives"):

    scores = scale * Q @ P.T                      (B x C)
    loss   = mean_i  -log softmax(scores[i])[target_i]

`scale` multiplies the similarities before the softmax. DPR uses raw inner products (scale 1); with
L2-normalised vectors (this project's TextEncoder: inner product = cosine, in [-1, 1]) the softmax would be
almost flat, so a scale of about 20 is used (as sentence-transformers' MultipleNegativesRankingLoss does).

`mask` (B x C, True = ignore) removes candidates that must not count as negatives, e.g. a passage that is
also a positive of question i because two questions share it; masked logits are set to -inf.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def mask_out(scores: torch.Tensor, mask: torch.Tensor | None, targets: torch.Tensor | None = None) -> torch.Tensor:
    """`scores` (B x C) with the masked candidates at -inf, except each question's own positive
    (`targets[i]`, default column i), which is never masked."""
    if mask is None:
        return scores
    if targets is None:
        targets = torch.arange(scores.shape[0], device=scores.device)
    keep_target = torch.zeros_like(mask)
    keep_target[torch.arange(len(targets)), targets] = True
    return scores.masked_fill(mask & ~keep_target, float("-inf"))


def dpr_nll_loss(
    q_vectors: torch.Tensor,
    p_vectors: torch.Tensor,
    targets: torch.Tensor | None = None,
    scale: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean NLL of the positive passages. `targets[i]` is the column of question i's positive (default i)."""
    if q_vectors.dim() != 2 or p_vectors.dim() != 2 or q_vectors.shape[1] != p_vectors.shape[1]:
        raise ValueError(
            f"expected (B, d) and (C, d) vectors, got {tuple(q_vectors.shape)} and {tuple(p_vectors.shape)}"
        )
    if targets is None:
        targets = torch.arange(q_vectors.shape[0], device=q_vectors.device)
    scores = mask_out(scale * (q_vectors.float() @ p_vectors.float().T), mask, targets)
    return F.cross_entropy(scores, targets)


def positive_ranks(
    q_vectors: torch.Tensor,
    p_vectors: torch.Tensor,
    targets: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """1-based rank of each question's positive among the candidates (ties count against it)."""
    if targets is None:
        targets = torch.arange(q_vectors.shape[0], device=q_vectors.device)
    scores = mask_out(q_vectors.float() @ p_vectors.float().T, mask, targets)
    target_scores = scores.gather(1, targets.view(-1, 1))
    return (scores > target_scores).sum(1) + (scores == target_scores).sum(1)
