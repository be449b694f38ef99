"""Resilient backpropagation, as torch.optim.Rprop."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _real
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _wrap, _zeros_like)

__all__ = ["Rprop"]


class Rprop(Optimizer):
    r"""Implements Rprop, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        f = etaplus where g * prev > 0, etaminus where < 0, 1 where == 0
        step_size = clamp(step_size * f, step_size_min, step_size_max)
        g = 0 where f == etaminus
        p = p - sign(g) * step_size;  prev = g

    State per parameter: ``step`` (a 0-d float32 tensor), ``prev`` and ``step_size`` (filled
    with the group's lr at the first step).

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): initial step size (default: 1e-2).
        etas (tuple[float, float]): (etaminus, etaplus), the step-size factors
            (default: (0.5, 1.2)).
        step_sizes (tuple[float, float]): minimal and maximal step sizes (default: (1e-6, 50)).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, capturable, differentiable: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "capturable": False}
    _step_is_tensor = True

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            ss_min, ss_max = group["step_sizes"]
            maximize = group["maximize"]
            for p in group["params"]:
                g = _grad_array(p, "Rprop does not support sparse gradients")
                if g is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["prev"] = _zeros_like(p)
                    lr = float(group["lr"])
                    if p._data.dtype.kind == "c":
                        lr = complex(lr, lr)
                    state["step_size"] = _wrap(np.full_like(p._data, lr))
                step_t, prev_t, ss_t = state["step"], state["prev"], state["step_size"]
                step_t._data += 1
                pa, g = _real(p._data), _real(g)
                prev, ss = _real(prev_t._data), _real(ss_t._data)

                gc = np.negative(g) if maximize else g.copy()
                f = np.multiply(gc, prev)
                np.sign(f, out=f)
                up, down, zero = f > 0, f < 0, f == 0
                f[up] = etaplus
                f[down] = etaminus
                f[zero] = 1
                ss *= f
                np.clip(ss, ss_min, ss_max, out=ss)
                gc[f == etaminus] = 0
                np.sign(gc, out=f)
                f *= ss
                pa -= f
                prev[...] = gc

                for x in (step_t, prev_t, ss_t, p):
                    x._bump_version()
        return loss
