"""A passage student's vector error, weighed by the directions questions look in.

A passage vector is only ever read through inner products with question vectors, so what a student's error
costs at search time is how much it moves those products: for a passage whose student vector is off by
d = s - t, the mean squared score error over a set of probe questions Q (unit rows, n of them) is

    mean_q (q . d)^2 = d^T C d,   C = Q^T Q / n   (the questions' second-moment matrix, trace 1)

The plain cosine loss, 1 - s . t = |d|^2 / 2 for unit vectors, weighs every direction alike; questions
concentrate in few of the 384 (all of them share a large common component). `probe_weighted_loss` mixes the two,
scaled so that both equal 1 - cos when C is isotropic (C = I / dim): the weight moves the loss between them without
changing its size, and the cosine share keeps directions no probe question covered from drifting freely.
"""

from __future__ import annotations

import torch


def question_second_moment(question_vectors: torch.Tensor) -> torch.Tensor:
    """C = Q^T Q / n of unit-normalised question vectors (fp32, dim x dim, trace 1)."""
    if question_vectors.ndim != 2 or len(question_vectors) == 0:
        raise ValueError(
            f"question vectors must be a non-empty (n, dim) matrix, got shape {tuple(question_vectors.shape)}"
        )
    q = torch.nn.functional.normalize(question_vectors.float(), dim=-1)
    return q.T @ q / len(q)


def probe_weighted_loss(
    student: torch.Tensor, teacher: torch.Tensor, second_moment: torch.Tensor | None, weight: float
) -> torch.Tensor:
    """(1 - weight) * (1 - cos) + weight * dim/2 * d^T C d, averaged over the batch; `student` and `teacher` are
    unit vectors. weight 0 or no C: the plain cosine loss."""
    student, teacher = student.float(), teacher.float()
    cosine_loss = 1.0 - (student * teacher).sum(-1)
    if second_moment is None or weight == 0:
        return cosine_loss.mean()
    error = student - teacher
    score_error = ((error @ second_moment) * error).sum(-1) * (student.shape[-1] / 2.0)
    return ((1.0 - weight) * cosine_loss + weight * score_error).mean()
