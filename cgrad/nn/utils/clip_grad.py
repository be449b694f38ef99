"""Gradient clipping (torch.nn.utils.clip_grad_norm_, clip_grad_value_, get_total_norm)."""
from __future__ import annotations

import math

import numpy as np

from cgrad import _C
from cgrad.ops.inplace import has_internal_overlap

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(tensors):
    if isinstance(tensors, _C.TensorBase):
        return [tensors]
    return list(tensors)


def _vector_norm(a, p):
    """The p-norm of an ndarray, accumulated in float64."""
    if a.size == 0:
        return 0.0
    if p == math.inf:
        return float(np.max(np.abs(a)))
    if p == -math.inf:
        return float(np.min(np.abs(a)))
    if p == 0:
        return float(np.count_nonzero(a))
    a = a.astype(np.float64, copy=False).ravel()
    if p == 2:
        return math.sqrt(float(np.dot(a, a)))
    if p == 1:
        return float(np.abs(a).sum())
    return float(np.sum(np.abs(a) ** p) ** (1.0 / p))


def _writable(a):
    """Can a gradient array be modified in place? Not a read-only one, nor one whose
    elements share memory (an expanded view: Note [Expanded memory] in ops/inplace.py)."""
    return a.flags.writeable and not has_internal_overlap(a)


def _scale_(t, coef):
    """t *= coef in place (keeps the gradient tensor's identity; a read-only gradient array,
    or an expanded one, is replaced)."""
    a = t._data
    if _writable(a):
        np.multiply(a, coef, out=a, casting="unsafe")
    else:
        t._data = (a * coef).astype(a.dtype, copy=False)
    t._bump_version()


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of ``tensors`` (as if concatenated into one vector), as a 0-d
    Tensor of their dtype."""
    tensors = [t for t in _as_list(tensors) if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        from cgrad._creation import tensor
        return tensor(0.0)
    norms = np.array([_vector_norm(t._data, norm_type) for t in tensors])
    total = _vector_norm(norms, norm_type)
    dtype = np.result_type(*[t._data.dtype for t in tensors])
    if dtype.kind != "f":
        from cgrad import _dtype
        dtype = _dtype.get_default_dtype()
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return _C._wrap(np.asarray(total, dtype=dtype))


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` by min(1, max_norm / (total_norm + 1e-6))."""
    params = _as_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    tn = total_norm._data if isinstance(total_norm, _C.TensorBase) else np.asarray(total_norm)
    coef = tn.dtype.type(float(max_norm)) / (tn + tn.dtype.type(1e-6))
    coef = np.minimum(coef, 1.0)        # NaN stays NaN, as torch.clamp(max=1.0)
    for g in grads:
        _scale_(g, coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale the gradients of ``parameters`` (an iterable or one Tensor) in place so that
    their total ``norm_type``-norm is at most ``max_norm``; returns the total norm before
    clipping (a 0-d Tensor). ``error_if_nonfinite`` raises on a NaN/inf total norm."""
    max_norm = float(max_norm)          # torch converts it first (ValueError for 'a')
    params = _as_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of ``parameters`` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        g = p.grad
        if g is None:
            continue
        a = g._data
        if _writable(a):
            np.clip(a, -clip_value, clip_value, out=a, casting="unsafe")
        else:
            g._data = np.clip(a, -clip_value, clip_value).astype(a.dtype, copy=False)
        g._bump_version()
