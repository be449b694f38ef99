"""Adam (and, with decoupled_weight_decay=True, AdamW), as torch.optim.Adam."""
from __future__ import annotations

import numpy as np

from cgrad.optim.optimizer import (Optimizer, _check_hyper, _grad_array, _step_tensor,
                                   _use_grad_for_differentiable, _zeros_like, _Tensor)
from cgrad.optim.sgd import _prep_grad

__all__ = ["Adam"]


def _real(a):
    """torch.view_as_real for complex arrays (the update runs on the real pairs)."""
    return a.view(a.real.dtype) if a.dtype.kind == "c" else a


def _lerp_(start, end, weight, tmp):
    """start.lerp_(end, weight) with torch's two formulas; tmp is scratch of start's shape."""
    d = np.subtract(end, start, out=tmp)
    if abs(weight) < 0.5:
        d *= weight
        start += d
    else:
        one = start.dtype.type
        d *= one(1) - one(weight)
        np.subtract(end, d, out=start)


def _addcmul_sq_(acc, g, value, tmp):
    """acc.addcmul_(g, g, value=value): acc + (value * g) * g."""
    t = np.multiply(g, value, out=tmp)
    t *= g
    acc += t
    return t


# Note [Blocked updates]: an update is ~13 elementwise passes over the parameter, its gradient
# and its state; for a tensor larger than the last-level cache share each pass streams from
# memory. Large tensors are therefore updated block by block (_BLOCK_BYTES per array, so the
# block's ~6 arrays stay in cache across the passes; 1 MiB measured best among 128 KiB..1 MiB
# on a 784-1024-1024-10 MLP): the same ufuncs on the same elements, so the result is bitwise
# the whole-array update's (tests/test_optim_more.py, test_blocked_adam_*). 10-25% faster
# there (float32 and float64, bench/optim.py).
_BLOCK_BYTES = 1 << 20


def _blocks(arrays):
    """(flat views of arrays, [slices]) splitting real, C-contiguous, same-shape arrays of
    at least two blocks into blocks of _BLOCK_BYTES; None to update them whole."""
    pa = arrays[0]
    if pa.dtype.kind != "f" or pa.nbytes < 2 * _BLOCK_BYTES:
        return None
    flats = []
    for a in arrays:
        if a is None:
            flats.append(None)
            continue
        if not a.flags.c_contiguous or a.dtype != pa.dtype or a.shape != pa.shape:
            return None
        flats.append(a.reshape(-1))
    n = pa.size
    step = _BLOCK_BYTES // pa.itemsize
    return flats, [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _check_betas(lr, betas, eps, weight_decay):
    _check_hyper("lr", lr)
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
            or (isinstance(betas[0], _Tensor) and isinstance(betas[1], _Tensor))):
        raise ValueError("betas must be either both floats or both Tensors")
    for i in (0, 1):
        if isinstance(betas[i], _Tensor) and betas[i]._data.size != 1:
            raise ValueError(f"Tensor betas[{i}] must be 1-element")


class Adam(Optimizer):
    r"""Implements Adam, with torch's update rule (single-tensor path)::

        g = -grad if maximize else grad
        p = p * (1 - lr * weight_decay)          (decoupled_weight_decay, i.e. AdamW)
        g = g + weight_decay * p                 (otherwise, if weight_decay != 0)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                    (amsgrad; v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State per parameter: ``step`` (a 0-d float32 tensor), ``exp_avg``, ``exp_avg_sq`` and,
    with amsgrad, ``max_exp_avg_sq``.

    Args:
        params: tensors, ``(name, tensor)`` pairs or parameter-group dicts.
        lr (float): learning rate (default: 1e-3).
        betas (tuple[float, float]): running-average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        amsgrad (bool): use the AMSGrad variant (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        foreach, capturable, differentiable, fused: accepted for compatibility with torch
            (``differentiable=True`` is not supported).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_betas(lr, betas, eps, weight_decay)
        betas = tuple(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable,
                    "fused": fused, "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    _group_defaults = {"amsgrad": False, "maximize": False, "foreach": None,
                       "capturable": False, "differentiable": False,
                       "decoupled_weight_decay": False, "fused": None}
    _step_is_tensor = True

    _sparse_msg = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def _adam_update(self, pa, g, m, v, vmax, lr, beta1, beta2, eps, weight_decay, maximize,
                     decoupled, step_size, bias_correction2_sqrt):
        """One parameter's update in place on arrays of one shape (or one block of them)."""
        if weight_decay != 0 and decoupled:
            pa *= 1 - lr * weight_decay
            g, _ = _prep_grad(self, pa, g, maximize, 0.0)
        else:
            g, _ = _prep_grad(self, pa, g, maximize, weight_decay)
        tmp = _real(self._scratch(1, pa))
        denom = _real(self._scratch(2, pa))
        pa, g, m, v = _real(pa), _real(g), _real(m), _real(v)

        # v is updated before m (independent) so that its scratch serves the lerp
        v *= beta2
        _addcmul_sq_(v, g, 1 - beta2, tmp)
        _lerp_(m, g, 1 - beta1, tmp)

        if vmax is not None:
            vmax = _real(vmax)
            np.maximum(vmax, v, out=vmax)
            np.sqrt(vmax, out=denom)
        else:
            np.sqrt(v, out=denom)
        denom /= bias_correction2_sqrt
        denom += eps
        t = np.multiply(m, -step_size, out=tmp)
        t /= denom
        pa += t

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step; returns the closure's loss (if any)."""
        loss = self._run_closure(closure)
        all_state = self.state
        msg = self._sparse_msg
        for group in self.param_groups:
            beta1, beta2 = (float(b) for b in group["betas"])
            lr = float(group["lr"])
            eps = float(group["eps"])
            weight_decay = float(group["weight_decay"])
            amsgrad = group["amsgrad"]
            maximize = group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, msg)
                if g is None:
                    continue
                state = all_state[p]
                if len(state) == 0:
                    state["step"] = _step_tensor()
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = _zeros_like(p)
                step_t = state["step"]
                m_t = state["exp_avg"]
                v_t = state["exp_avg_sq"]
                pa = p._data

                step_t._data += 1
                step = float(step_t._data)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                vmax_t = state["max_exp_avg_sq"] if amsgrad else None
                arrays = (pa, g, m_t._data, v_t._data,
                          None if vmax_t is None else vmax_t._data)
                hyper = (lr, beta1, beta2, eps, weight_decay, maximize, decoupled,
                         step_size, bias_correction2_sqrt)
                blocks = _blocks(arrays)
                if blocks is None:
                    self._adam_update(*arrays, *hyper)
                else:
                    flats, slices = blocks
                    for b in slices:
                        self._adam_update(*(None if a is None else a[b] for a in flats), *hyper)
                if vmax_t is not None:
                    vmax_t._bump_version()
                step_t._bump_version()
                m_t._bump_version()
                v_t._bump_version()
                p._bump_version()
        return loss
