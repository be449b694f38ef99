"""RMSprop, as torch.optim.RMSprop."""
from __future__ import annotations

import numpy as np

from cgrad.optim.adam import _addcmul_sq_, _lerp_, _real
from cgrad.optim.optimizer import (Optimizer, _check_hyper, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like)
from cgrad.optim.sgd import _prep_grad

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""Implements RMSprop, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        g = g + weight_decay * p                          (if weight_decay != 0)
        v = alpha * v + (1 - alpha) * g * g
        a = lerp(a, g, 1 - alpha);  avg = sqrt(v - a * a) (centered)  else  avg = sqrt(v)
        avg = avg + eps
        b = momentum * b + g / avg;  p = p - lr * b       (momentum > 0)
        p = p - lr * g / avg                              (otherwise)

    State per parameter: ``step`` (a 0-d float32 tensor), ``square_avg``, and
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered).

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-2).
        alpha (float): smoothing constant (default: 0.99).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        momentum (float): momentum factor (default: 0).
        centered (bool): normalise by the estimated variance of the gradient.
        maximize (bool): maximize the objective instead of minimizing (default: False).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    _group_defaults = {"momentum": 0, "centered": False, "foreach": None, "maximize": False,
                       "differentiable": False, "capturable": False}
    _step_is_tensor = True

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        all_state = self.state
        for group in self.param_groups:
            lr = float(group["lr"])
            alpha = float(group["alpha"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            momentum = float(group["momentum"])
            centered = group["centered"]
            maximize = group["maximize"]
            for p in group["params"]:
                g = _grad_array(p, "RMSprop does not support sparse gradients")
                if g is None:
                    continue
                state = all_state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["square_avg"] = _zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = _zeros_like(p)
                    if centered:
                        state["grad_avg"] = _zeros_like(p)
                step_t = state["step"]
                v_t = state["square_avg"]
                pa = p._data

                step_t._data += 1
                g, _ = _prep_grad(self, pa, g, maximize, weight_decay)
                tmp = _real(self._scratch(1, pa))
                avg = _real(self._scratch(2, pa))
                pa, g, v = _real(pa), _real(g), _real(v_t._data)

                v *= alpha
                _addcmul_sq_(v, g, 1 - alpha, tmp)
                if centered:
                    ga_t = state["grad_avg"]
                    ga = _real(ga_t._data)
                    _lerp_(ga, g, 1 - alpha, tmp)
                    np.negative(ga, out=avg)       # v.addcmul(ga, ga, value=-1)
                    avg *= ga
                    np.add(v, avg, out=avg)
                    np.sqrt(avg, out=avg)
                    ga_t._bump_version()
                else:
                    np.sqrt(v, out=avg)
                avg += eps

                if momentum > 0:
                    buf_t = state["momentum_buffer"]
                    buf = _real(buf_t._data)
                    buf *= momentum
                    buf += np.divide(g, avg, out=tmp)
                    pa += np.multiply(buf, -lr, out=tmp)
                    buf_t._bump_version()
                else:
                    t = np.multiply(g, -lr, out=tmp)
                    t /= avg
                    pa += t

                step_t._bump_version()
                v_t._bump_version()
                p._bump_version()
        return loss
