"""RAdam (rectified Adam), as torch.optim.RAdam."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _addcmul_sq_, _check_betas, _lerp_, _real
from cgrad.optim.optimizer import (Optimizer, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""Implements RAdam, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)      (decoupled_weight_decay)
        g = g + weight_decay * p             (otherwise, if weight_decay != 0)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:  p = p - m / (1 - beta1**t) * lr * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t
        else:          p = p - m / (1 - beta1**t) * lr
        with r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)).

    State per parameter: ``step`` (a 0-d float32 tensor), ``exp_avg``, ``exp_avg_sq``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay (default: 0).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_betas(lr, betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "capturable": False, "decoupled_weight_decay": False}
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
            decoupled = group["decoupled_weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, "RAdam does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                step_t, m_t, v_t = state["step"], state["exp_avg"], state["exp_avg_sq"]
                pa = p._data

                step_t._data += 1
                step = float(step_t._data)
                if wd != 0 and decoupled:
                    pa *= 1 - lr * wd
                    g, _ = _prep_grad(self, pa, g, maximize, 0.0)
                else:
                    g, _ = _prep_grad(self, pa, g, maximize, wd)
                tmp = _real(self._scratch(1, pa))
                upd = _real(self._scratch(2, pa))
                pa, g, m, v = _real(pa), _real(g), _real(m_t._data), _real(v_t._data)
                _lerp_(m, g, 1 - beta1, tmp)
                v *= beta2
                _addcmul_sq_(v, g, 1 - beta2, tmp)

                bc1 = 1 - beta1 ** step
                bc2 = 1 - beta2 ** step
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2
                np.divide(m, bc1, out=upd)
                upd *= lr
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    np.sqrt(v, out=tmp)
                    tmp += eps
                    np.divide(bc2 ** 0.5, tmp, out=tmp)
                    upd *= tmp
                    upd *= rect
                pa -= upd

                for x in (step_t, m_t, v_t, p):
                    x._bump_version()
        return loss
