"""Adamax (Adam with the infinity norm), as torch.optim.Adamax."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _check_betas, _lerp_, _real
from cgrad.optim.optimizer import (Optimizer, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Implements Adamax, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                   (if weight_decay != 0)
        m = lerp(m, g, 1 - beta1)
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    State per parameter: ``step`` (a 0-d float32 tensor), ``exp_avg``, ``exp_inf``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 2e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the infinity norm (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_betas(lr, betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "capturable": False}
    _step_is_tensor = True

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = (float(b) for b in group["betas"])
            lr = float(group["lr"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            maximize = group["maximize"]
            for p in group["params"]:
                g = _grad_array(p, "Adamax does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_inf"] = _zeros_like(p)
                step_t, m_t, u_t = state["step"], state["exp_avg"], state["exp_inf"]
                pa = p._data

                step_t._data += 1
                g, _ = _prep_grad(self, pa, g, maximize, wd)
                tmp = _real(self._scratch(1, pa))
                pa, g, m, u = _real(pa), _real(g), _real(m_t._data), _real(u_t._data)
                _lerp_(m, g, 1 - beta1, tmp)
                u *= beta2
                np.abs(g, out=tmp)
                tmp += eps
                np.maximum(u, tmp, out=u)
                clr = lr / (1 - beta1 ** float(step_t._data))
                np.divide(m, u, out=tmp)
                tmp *= -clr
                pa += tmp

                for x in (step_t, m_t, u_t, p):
                    x._bump_version()
        return loss
