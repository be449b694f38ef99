"""Adadelta, as torch.optim.Adadelta."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _addcmul_sq_, _real
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Implements Adadelta, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                     (if weight_decay != 0)
        s = rho * s + (1 - rho) * g * g
        d = sqrt(u + eps) / sqrt(s + eps) * g
        u = rho * u + (1 - rho) * d * d
        p = p - lr * d

    State per parameter: ``step`` (a 0-d float32 tensor), ``square_avg``, ``acc_delta``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): coefficient scaling delta (default: 1.0).
        rho (float): running-average coefficient (default: 0.9).
        eps (float): added inside the square roots (default: 1e-6).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "capturable": False}
    _step_is_tensor = True

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            rho = float(group["rho"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            maximize = group["maximize"]
            for p in group["params"]:
                g = _grad_array(p, "Adadelta does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["square_avg"] = _zeros_like(p)
                    state["acc_delta"] = _zeros_like(p)
                step_t, s_t, u_t = state["step"], state["square_avg"], state["acc_delta"]
                pa = p._data

                step_t._data += 1
                g, _ = _prep_grad(self, pa, g, maximize, wd)
                tmp = _real(self._scratch(1, pa))
                d = _real(self._scratch(2, pa))
                pa, g, s, u = _real(pa), _real(g), _real(s_t._data), _real(u_t._data)
                s *= rho
                _addcmul_sq_(s, g, 1 - rho, tmp)
                np.add(s, eps, out=tmp)
                np.sqrt(tmp, out=tmp)                 # std
                np.add(u, eps, out=d)
                np.sqrt(d, out=d)
                d /= tmp
                d *= g                                # delta
                u *= rho
                _addcmul_sq_(u, d, 1 - rho, tmp)
                d *= -lr
                pa += d

                for x in (step_t, s_t, u_t, p):
                    x._bump_version()
        return loss
