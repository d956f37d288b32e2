"""Averages of models in weight space: WiSE-FT (a fine-tuned model and the one it started from) and model soups
(several fine-tunings of one starting point, Wortsman et al. 2022). Models fine-tuned from one point stay in one
basin, so their average is a model of its own, often better than each, at no inference cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from odqa.core.errors import OdqaError


def average_weights(
    states: Iterable[Mapping[str, torch.Tensor]], shares: Sequence[float], names: Sequence[str]
) -> dict[str, torch.Tensor]:
    """sum(share_i * state_i) over the floating-point tensors, in fp32 whatever the stored dtype; other tensors
    (integer buffers such as position ids) from the last state. `names` name the models in errors. `states` may
    be a generator that loads one model at a time: only the running sum and the state at hand are held."""
    if len(shares) < 2 or len(shares) != len(names):
        raise OdqaError("averaging needs two or more models, one share each")
    if any(s < 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-6:
        raise OdqaError(f"the shares of an average must be >= 0 and sum to 1, got {list(shares)}")
    total: dict[str, torch.Tensor] = {}
    shapes: dict[str, torch.Size] = {}
    count = 0
    for state, share, name in zip(states, shares, names):
        if count == 0:
            shapes = {k: v.shape for k, v in state.items()}
        elif state.keys() != shapes.keys() or any(state[k].shape != shapes[k] for k in shapes):
            raise OdqaError(
                f"{names[0]} and {name} are not the same architecture (their weights differ in names or "
                "shapes); average only models fine-tuned from one starting point"
            )
        for key, tensor in state.items():
            if not tensor.is_floating_point():
                total[key] = tensor
            elif key in total:
                total[key] += share * tensor.float()
            else:
                total[key] = share * tensor.float()
        count += 1
    if count != len(shares):
        raise OdqaError(f"{count} models for {len(shares)} shares: give one share per model")
    return total
