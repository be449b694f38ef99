"""Adagrad, as torch.optim.Adagrad."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _real
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _step_tensor,
                                   _use_grad_for_differentiable, _wrap)
from cgrad.optim.sgd import _prep_grad

__all__ = ["Adagrad"]


def _init_state(state, p, value):
    state["step"] = _step_tensor()
    if p._data.dtype.kind == "c":
        value = complex(value, value)
    state["sum"] = _wrap(np.full_like(p._data, value))


class Adagrad(Optimizer):
    r"""Implements Adagrad, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                          (if weight_decay != 0)
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    The state (``step``, a 0-d float32 tensor, and ``sum``, filled with
    ``initial_accumulator_value``) is created for every parameter at construction, as torch
    does.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-2).
        lr_decay (float): learning rate decay (default: 0).
        weight_decay (float): L2 penalty (default: 0).
        initial_accumulator_value (float): initial value of the sums (default: 0).
        eps (float): added to the denominator (default: 1e-10).
        maximize (bool): maximize the objective instead of minimizing (default: False).
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                _init_state(self.state[p], p, initial_accumulator_value)

    _group_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                       "fused": None}
    _step_is_tensor = True

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        all_state = self.state
        for group in self.param_groups:
            lr = float(group["lr"])
            lr_decay = float(group["lr_decay"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            maximize = group["maximize"]
            for p in group["params"]:
                gt = p.grad
                if gt is None:
                    continue
                if gt.is_sparse:
                    if weight_decay != 0:
                        raise RuntimeError(
                            "weight_decay option is not compatible with sparse gradients")
                    # the dense update equals torch's sparse one: entries without gradient
                    # get s += 0 and p += 0 / (sqrt(s) + eps) = 0
                    g = gt.to_dense()._data
                else:
                    g = gt._data
                state = all_state[p]
                if len(state) == 0:
                    _init_state(state, p, self.defaults["initial_accumulator_value"])
                step_t = state["step"]
                s_t = state["sum"]
                pa = p._data

                step_t._data += 1
                step = float(step_t._data)
                g, _ = _prep_grad(self, pa, g, maximize, weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                tmp = _real(self._scratch(1, pa))
                std = _real(self._scratch(2, pa))
                pa, g, s = _real(pa), _real(g), _real(s_t._data)

                s += np.multiply(g, g, out=tmp)    # s.addcmul_(g, g, value=1)
                np.sqrt(s, out=std)
                std += eps
                t = np.multiply(g, -clr, out=tmp)
                t /= std
                pa += t

                step_t._bump_version()
                s_t._bump_version()
                p._bump_version()
        return loss
