"""SparseAdam (Adam updating only the entries present in sparse gradients), as
torch.optim.SparseAdam."""
from __future__ import annotations

import math

import numpy as np

from cgrad.optim.optimizer import (Optimizer, _check_hyper, _use_grad_for_differentiable,
                                   _zeros_like)

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    r"""Implements the lazy Adam variant for sparse gradients, with torch's update rule: for
    the entries i present in the (coalesced) gradient g only::

        g = -g if maximize
        m_i += (g_i - m_i) * (1 - beta1);  v_i += (g_i**2 - v_i) * (1 - beta2)
        p_i -= lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m_i / (sqrt(v_i) + eps)

    Dense gradients are refused (as torch does). State per parameter: ``step`` (an int),
    ``exp_avg``, ``exp_avg_sq``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        maximize (bool): maximize the objective instead of minimizing (default: False).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check_hyper("lr", lr)
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)
        sparse, cplx = [], []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([gi, pi])
                if p._data.dtype.kind == "c":
                    cplx.append([gi, pi])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")
        if cplx:
            raise ValueError(f"Complex params at indices {cplx}: SparseAdam does not support "
                             "complex parameters")

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = (float(b) for b in group["betas"])
            lr = float(group["lr"])
            eps = float(group["eps"])
            maximize = group.get("maximize", False)
            for p in group["params"]:
                gt = p.grad
                if gt is None:
                    continue
                if not gt.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                state["step"] += 1
                step = state["step"]

                gt = gt.coalesce()
                vals = gt._values()._data
                if vals.size == 0:
                    continue
                idx = tuple(gt._indices()._data)
                if maximize:
                    vals = np.negative(vals)
                m_t, v_t = state["exp_avg"], state["exp_avg_sq"]
                m, v, pa = m_t._data, v_t._data, p._data

                old_m = m[idx]
                dm = np.subtract(vals, old_m)
                dm *= 1 - beta1
                m[idx] = old_m + dm
                old_v = v[idx]
                dv = np.square(vals)
                dv -= old_v
                dv *= 1 - beta2
                v[idx] = old_v + dv
                dm += old_m                      # the new m_i
                dv += old_v                      # the new v_i
                np.sqrt(dv, out=dv)
                dv += eps
                step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
                dm /= dv
                dm *= -step_size
                pa[idx] = pa[idx] + dm

                m_t._bump_version()
                v_t._bump_version()
                p._bump_version()
        return loss
