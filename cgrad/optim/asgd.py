"""Averaged stochastic gradient descent, as torch.optim.ASGD."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _real
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _get_scalar_dtype, _grad_array,
                                   _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["ASGD"]


class ASGD(Optimizer):
    r"""Implements averaged SGD, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                         (if weight_decay != 0)
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + (p - ax) * mu    (ax = p while mu == 1)
        eta = lr / (1 + lambd * lr * t) ** alpha;  mu = 1 / max(1, t - t0)

    State per parameter: ``step``, ``eta`` and ``mu`` (0-d float32 tensors) and ``ax``, the
    running average of the parameter.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-2).
        lambd (float): decay term (default: 1e-4).
        alpha (float): power for the eta update (default: 0.75).
        t0 (float): step at which averaging starts (default: 1e6).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "capturable": False}
    _step_is_tensor = True

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                for key in ("eta", "mu"):
                    if st and key in st and not hasattr(st[key], "_data"):
                        st[key] = _step_tensor(float(st[key]))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            lambd = float(group["lambd"])
            alpha = float(group["alpha"])
            t0 = float(group["t0"])
            wd = float(group["weight_decay"])
            maximize = group["maximize"]
            dt = _get_scalar_dtype()
            for p in group["params"]:
                g = _grad_array(p, "ASGD does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["eta"] = _step_tensor(lr)
                    state["mu"] = _step_tensor(1.0)
                    state["ax"] = _zeros_like(p)
                step_t, eta_t, mu_t, ax_t = (state["step"], state["eta"], state["mu"],
                                             state["ax"])
                pa = p._data

                step_t._data += 1
                g, _ = _prep_grad(self, pa, g, maximize, wd)
                tmp = _real(self._scratch(1, pa))
                pa, g, ax = _real(pa), _real(g), _real(ax_t._data)
                eta = float(eta_t._data)
                pa *= 1 - lambd * eta
                t = np.multiply(g, -eta, out=tmp)
                pa += t
                mu = float(mu_t._data)
                if mu != 1:
                    t = np.subtract(pa, ax, out=tmp)
                    t *= mu
                    ax += t
                else:
                    ax[...] = pa
                step = float(step_t._data)
                # the new values pass through a default-dtype scalar, as torch.as_tensor
                eta_t._data[...] = dt(lr / ((1 + lambd * lr * step) ** alpha))
                mu_t._data[...] = dt(1 / max(1, step - t0))

                for x in (step_t, eta_t, mu_t, ax_t, p):
                    x._bump_version()
        return loss
