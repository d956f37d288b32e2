"""Averages of models in weight space: WiSE-FT (a fine-tuned model and the one it started from) and model soups
(several fine-tunings of one starting point, Wortsman et al. 2022). Models fine-tuned from one point stay in one
basin, so their average is a model of its own, often better than each, at no inference cost."""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from odqa.core.errors import OdqaError


def average_weights(states: Sequence[Mapping[str, torch.Tensor]], shares: Sequence[float], names: Sequence[str]
                    ) -> dict[str, torch.Tensor]:
    """sum(share_i * state_i) over the floating-point tensors, in fp32 whatever the stored dtype; other tensors
    (integer buffers such as position ids) from the last state. `names` name the models in errors."""
    if len(states) < 2 or len(states) != len(shares) or len(states) != len(names):
        raise OdqaError("averaging needs two or more models, one share each")
    if any(s < 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-6:
        raise OdqaError(f"the shares of an average must be >= 0 and sum to 1, got {list(shares)}")
    first = states[0]
    for state, name in zip(states[1:], names[1:]):
        if state.keys() != first.keys() or any(state[k].shape != first[k].shape for k in first):
            raise OdqaError(f"{names[0]} and {name} are not the same architecture (their weights differ in names or "
                            "shapes); average only models fine-tuned from one starting point")
    out: dict[str, torch.Tensor] = {}
    for key, last in states[-1].items():
        if not last.is_floating_point():
            out[key] = last
            continue
        total = torch.zeros_like(last, dtype=torch.float32)
        for state, share in zip(states, shares):
            total += share * state[key].float()
        out[key] = total
    return out
