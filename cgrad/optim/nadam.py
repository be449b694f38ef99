"""NAdam (Adam with Nesterov momentum), as torch.optim.NAdam."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _addcmul_sq_, _check_betas, _lerp_, _real
from cgrad.optim.optimizer import (Optimizer, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""Implements NAdam, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)      (decoupled_weight_decay)
        g = g + weight_decay * p             (otherwise, if weight_decay != 0)
        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay));  prod = prod * mu_t
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - prod) * g / d
              - lr * mu_{t+1} / (1 - prod * mu_{t+1}) * m / d

    State per parameter: ``step`` and ``mu_product`` (0-d float32 tensors), ``exp_avg``,
    ``exp_avg_sq``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 2e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay (default: 0).
        momentum_decay (float): momentum decay psi (default: 4e-3).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_betas(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    _group_defaults = {"maximize": False, "foreach": None, "capturable": False,
                       "differentiable": False, "decoupled_weight_decay": False}
    _step_is_tensor = True

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st and "mu_product" in st and not hasattr(st["mu_product"], "_data"):
                    st["mu_product"] = _step_tensor(float(st["mu_product"]))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = (float(b) for b in group["betas"])
            lr = float(group["lr"])
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            psi = float(group["momentum_decay"])
            maximize = group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, "NAdam does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["mu_product"] = _step_tensor(1.0)
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                step_t, mp_t = state["step"], state["mu_product"]
                m_t, v_t = state["exp_avg"], state["exp_avg_sq"]
                pa = p._data

                step_t._data += 1
                step = float(step_t._data)
                bc2 = 1 - beta2 ** step
                if wd != 0 and decoupled:
                    pa *= 1 - lr * wd
                    g, _ = _prep_grad(self, pa, g, maximize, 0.0)
                else:
                    g, _ = _prep_grad(self, pa, g, maximize, wd)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
                mp_t._data *= mu
                mu_prod = float(mp_t._data)
                mu_prod_next = mu_prod * mu_next

                tmp = _real(self._scratch(1, pa))
                denom = _real(self._scratch(2, pa))
                pa, g, m, v = _real(pa), _real(g), _real(m_t._data), _real(v_t._data)
                _lerp_(m, g, 1 - beta1, tmp)
                v *= beta2
                _addcmul_sq_(v, g, 1 - beta2, tmp)
                np.divide(v, bc2, out=denom)
                np.sqrt(denom, out=denom)
                denom += eps
                t = np.divide(g, denom, out=tmp)
                t *= -lr * (1.0 - mu) / (1.0 - mu_prod)
                pa += t
                t = np.divide(m, denom, out=tmp)
                t *= (-lr * mu_next) / (1.0 - mu_prod_next)
                pa += t

                for x in (step_t, mp_t, m_t, v_t, p):
                    x._bump_version()
        return loss
