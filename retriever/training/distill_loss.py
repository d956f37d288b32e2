"""Score distillation from a frozen teacher: keeps what the starting encoder knew while the DPR loss trains.

Fine-tuning MiniLM on a few thousand distantly supervised questions teaches it the training sources (NQ-style
questions gain on nq-pool) and makes it forget part of the general matching it came with (squad-open recall
falls; both measured in models/retriever/README.md), which is why the shipped encoder is a 50/50 weight
average with its base. This loss
asks instead, at every step, that the student's distribution over the batch's candidates stay close to the
teacher's (the frozen starting encoder), "learning without forgetting" (Li & Hoiem, 2017) on retrieval
scores, as margin/KL distillation does for dense retrievers (Hofstaetter et al. 2020):

    loss = KL( softmax(scale * Qt @ Pt.T) || softmax(scale * Qs @ Ps.T) )   averaged over questions

Candidates masked out of a question's negatives (`mask`, True = ignore) are left out of both distributions,
except the question's own positive (`targets`), so both losses see the same candidate set.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from odqa.retriever.training.losses import mask_out


def score_distillation_loss(
    student_q: torch.Tensor,
    student_p: torch.Tensor,
    teacher_q: torch.Tensor,
    teacher_p: torch.Tensor,
    scale: float = 1.0,
    mask: torch.Tensor | None = None,
    targets: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over questions of KL(teacher || student) on the (B x C) candidate distributions."""
    if student_q.shape != teacher_q.shape or student_p.shape != teacher_p.shape:
        raise ValueError(
            f"student and teacher vectors differ in shape: {tuple(student_q.shape)}/{tuple(student_p.shape)} vs "
            f"{tuple(teacher_q.shape)}/{tuple(teacher_p.shape)}; distil from an encoder of the same dimension"
        )
    student = mask_out(scale * (student_q.float() @ student_p.float().T), mask, targets)
    teacher = mask_out(scale * (teacher_q.float() @ teacher_p.float().T), mask, targets)
    log_s = F.log_softmax(student, dim=1)
    log_t = F.log_softmax(teacher, dim=1)
    p_t = log_t.exp()
    # masked candidates have p_t = 0 and log terms -inf: their 0 * -inf terms are dropped, not NaN
    terms = torch.where(p_t > 0, p_t * (log_t - log_s), torch.zeros_like(p_t))
    return terms.sum(1).mean()
