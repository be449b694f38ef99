"""AdamW: Adam with decoupled weight decay, as torch.optim.AdamW."""
from __future__ import annotations

from cgrad.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    r"""Implements AdamW: Adam whose weight decay multiplies the weights by
    ``1 - lr * weight_decay`` each step instead of entering the moments (see :class:`Adam`
    for the update rule and the state).

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay coefficient (default: 1e-2).
        amsgrad (bool): use the AMSGrad variant (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
