"""Normalization functions of cgrad.nn.functional: ``layer_norm``
(``NativeLayerNormBackward0``) and ``batch_norm``."""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _check_float, _grad_enabled, _shape_list, _tname


class _LayerNorm(Function):
    """(x - mean) / sqrt(var + eps) * w + b over the trailing normalized dims.
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w;
    d/dw = sum(g * xhat), d/db = sum(g) over the leading dims."""
    _node_name = "NativeLayerNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, k, eps):
        x = input._data
        axes = tuple(range(x.ndim - k, x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = np.mean(np.square(xc), axis=axes, keepdims=True)
        rstd = 1.0 / np.sqrt(var + eps)
        rstd = rstd.astype(x.dtype, copy=False)
        xc *= rstd
        if weight is not None:
            xc *= weight._data
        if bias is not None:
            xc += bias._data
        if ctx is not None:
            ctx.save_for_backward(input, weight, bias)
            ctx._aux = (axes, eps, mu, rstd)
        return xc

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        axes, eps, mu, rstd = ctx._aux
        nx, nw, nb = ctx.needs_input_grad[:3]
        lead = tuple(range(x.dim() - len(axes)))
        if _grad_enabled():       # create_graph: mean and rstd as functions of x
            mu_t = x.mean(axes, keepdim=True)
            xc = x - mu_t
            rstd_t = ((xc * xc).mean(axes, keepdim=True) + eps) ** -0.5
        else:
            xc = x - _wrap(mu)
            rstd_t = _wrap(rstd)
        xhat = xc * rstd_t
        gx = gw = gb = None
        if nx:
            gh = g * w if w is not None else g
            gx = rstd_t * (gh - gh.mean(axes, keepdim=True)
                           - xhat * (gh * xhat).mean(axes, keepdim=True))
        if nw:
            gw = (g * xhat).sum(lead) if lead else g * xhat
        if nb:
            gb = g.sum(lead) if lead else g
        return gx, gw, gb, None, None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims (biased variance).
    One node, ``NativeLayerNormBackward0``."""
    _checks.check_tensor(input, "layer_norm")
    if isinstance(normalized_shape, numbers.Integral) or not isinstance(
            normalized_shape, (tuple, list)):
        raise TypeError("layer_norm(): argument 'normalized_shape' (position 2) must be tuple "
                        f"of ints, not {type(normalized_shape).__name__}")
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    shape = tuple(input.shape)
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != ns:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {_shape_list(p.shape)} and "
                               f"normalized_shape = {_shape_list(ns)}")
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if len(shape) < k or shape[len(shape) - k:] != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size"
                           f"{_shape_list(shape)}")
    _check_float(input._data, "LayerNormKernelImpl")
    for p in (weight, bias):
        if p is not None and p.dtype != input.dtype:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               f"{_tname(input.dtype)}")
    return _LayerNorm.apply(input, weight, bias, k, float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm (implemented next to nn.BatchNorm1d)."""
    from cgrad.nn.modules.normalization import batch_norm as _bn
    return _bn(input, running_mean, running_var, weight, bias, training, momentum, eps)
