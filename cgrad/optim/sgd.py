"""Stochastic gradient descent (optionally with momentum), as torch.optim.SGD."""
from __future__ import annotations

import numpy as np

from cgrad.optim.optimizer import (Optimizer, _blocks, _check_hyper, _grad_array,
                                   _use_grad_for_differentiable, _wrap)

__all__ = ["SGD"]


def _prep_grad(opt, p, g, maximize, weight_decay):
    """``-g if maximize`` then ``+ weight_decay * p`` (torch's order); returns the gradient
    and whether it is scratch (slot 0) that this update may overwrite."""
    if weight_decay != 0:
        t = np.multiply(p, weight_decay, out=opt._scratch(0, p))
        if maximize:
            np.subtract(t, g, out=t)     # -g + wd*p, exactly
        else:
            np.add(g, t, out=t)
        return t, True
    if maximize:
        return np.negative(g, out=opt._scratch(0, p)), True
    return g, False


class SGD(Optimizer):
    r"""Implements stochastic gradient descent (optionally with momentum), with torch's
    update rule::

        g = -grad if maximize else grad
        g = g + weight_decay * p                               (if weight_decay != 0)
        b = g  (first step), else  b = momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b                (if momentum != 0)
        p = p - lr * g

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        momentum (float): momentum factor (default: 0).
        dampening (float): dampening for momentum (default: 0).
        weight_decay (float): L2 penalty (default: 0).
        nesterov (bool): Nesterov momentum (needs momentum > 0 and zero dampening).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, differentiable, fused: accepted for compatibility with torch (cgrad has one
            implementation; ``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_hyper("lr", lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    _group_defaults = {"nesterov": False, "maximize": False, "foreach": None,
                       "differentiable": False, "fused": False}

    def _sgd_update(self, pa, g, buf, lr, momentum, dampening, weight_decay, nesterov,
                    maximize):
        """One step after the first with a momentum buffer, in place on arrays of one shape
        (or one block of them: Note [Blocked updates])."""
        g, owned = _prep_grad(self, pa, g, maximize, weight_decay)
        buf *= momentum
        if dampening == 0:
            buf += g
        else:
            buf += np.multiply(g, 1 - dampening, out=self._scratch(1, pa))
        if nesterov:
            t = np.multiply(buf, momentum, out=self._scratch(1, pa))
            np.add(g, t, out=t)
            g, owned = t, True
        else:
            g, owned = buf, False
        if owned:
            np.multiply(g, -lr, out=g)
            pa += g
        else:
            pa += np.multiply(g, -lr, out=self._scratch(1, pa))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        all_state = self.state
        for group in self.param_groups:
            lr = float(group["lr"])
            momentum = float(group["momentum"])
            dampening = float(group["dampening"])
            weight_decay = float(group["weight_decay"])
            nesterov = group["nesterov"]
            maximize = group["maximize"]
            hyper = (lr, momentum, dampening, weight_decay, nesterov, maximize)
            for p in group["params"]:
                g = _grad_array(p, None)
                if g is None:
                    continue
                pa = p._data
                if momentum != 0:
                    state = all_state[p]
                    buf_t = state.get("momentum_buffer")
                    if buf_t is not None:
                        arrays = (pa, g, buf_t._data)
                        blocks = _blocks(arrays)
                        if blocks is None:
                            self._sgd_update(*arrays, *hyper)
                        else:
                            flats, slices = blocks
                            for b in slices:
                                self._sgd_update(*(a[b] for a in flats), *hyper)
                        buf_t._bump_version()
                        p._bump_version()
                        continue
                g, owned = _prep_grad(self, pa, g, maximize, weight_decay)
                if momentum != 0:
                    buf = g.copy()                  # grad.detach().clone()
                    state["momentum_buffer"] = _wrap(buf)
                    if nesterov:
                        t = np.multiply(buf, momentum, out=self._scratch(1, pa))
                        np.add(g, t, out=t)
                        g, owned = t, True
                    else:
                        g, owned = buf, False
                if owned:
                    np.multiply(g, -lr, out=g)
                    pa += g
                else:
                    pa += np.multiply(g, -lr, out=self._scratch(1, pa))
                p._bump_version()
        return loss
