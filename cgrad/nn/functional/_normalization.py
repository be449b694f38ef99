"""Normalization functions of cgrad.nn.functional: ``layer_norm``
(``NativeLayerNormBackward0``) and ``batch_norm`` (``NativeBatchNormBackward0`` on the batch
statistics in training mode, which also updates the running statistics in place; the running
statistics otherwise). nn.LayerNorm and nn.BatchNorm1d/2d call them."""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.ops._sums import _fast_sum, _sum_axes
from cgrad.nn.functional._utils import _check_float, _grad_enabled, _shape_list, _tname

from cgrad._fused_switch import FUSED as _fused_ext, ON as _FUSED_ON

# Note [Layer norm in one pass]: in float32 the layer norm is cgrad._fused.layer_norm_f32 /
# layer_norm_bwd_f32 (csrc/cg_fused.c), one C pass over the rows each way, instead of ~10
# NumPy calls forward and ~15 backward on (rows, C) arrays (2.4x torch's time at nanoGPT's
# (512, 64)). Row statistics and the weight/bias gradients' column sums are summed in double
# (in a fixed order: the same bits at every vector width), the rest in float32 in the NumPy
# path's formulas; float32 results differ from that path by rounding (tests run both).
# CGRAD_NO_FUSED_EXT=1 at import selects the NumPy path, as for the other fused kernels.
_LN_EXT = _FUSED_ON
_F32 = np.dtype(np.float32)


def _ln_ext_ok(x, w, b):
    """The float32 kernel takes x (and w, b: None or float32 of the normalized shape)."""
    return (_LN_EXT and x.dtype == _F32 and x.ndim >= 1 and x.shape[-1] > 0
            and (w is None or w.dtype == _F32) and (b is None or b.dtype == _F32))


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class _LayerNorm(Function):
    """(x - mean) / sqrt(var + eps) * w + b over the trailing normalized dims.
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w;
    d/dw = sum(g * xhat), d/db = sum(g) over the leading dims."""
    _node_name = "NativeLayerNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, k, eps):
        x = input._data
        axes = tuple(range(x.ndim - k, x.ndim))
        W = weight._data if weight is not None else None
        B = bias._data if bias is not None else None
        if _ln_ext_ok(x, W, B) and x.size:         # Note [Layer norm in one pass]
            lead = x.shape[:x.ndim - k]
            y, mu, rstd = _fused_ext.layer_norm_f32(x.reshape(lead + (-1,)), W, B, eps)
            if ctx is not None:
                ctx.save_for_backward(input, weight, bias)
                ctx._aux = (axes, eps, mu.reshape(lead + (1,) * k), rstd.reshape(lead + (1,) * k))
            return y.reshape(x.shape)
        if x.dtype.char in "fd" and x.size:
            # the statistics by gemv (Note [Sums by BLAS]): rows of a few dozen features
            n = x.dtype.type(_prod(x.shape[x.ndim - k:]))
            mu = _fast_sum(x, axes, True)
            mu /= n
            xc = x - mu
            var = _fast_sum(np.square(xc), axes, True)
            var /= n
        else:
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
        if not _grad_enabled():
            # first order: the same formula in NumPy on the saved statistics, the same
            # operations in the same order as the Tensor path below (bitwise equal), without
            # a Tensor and a node per step
            X, G = x._data, g._data
            W = w._data if w is not None else None
            if (_ln_ext_ok(X, W, None) and G.dtype == _F32 and G.shape == X.shape and X.size
                    and (not nw or W.shape == X.shape[X.ndim - len(axes):])
                    and (not nb or b._data.shape == X.shape[X.ndim - len(axes):])):
                lead = X.shape[:X.ndim - len(axes)]
                gxa, gwa, gba = _fused_ext.layer_norm_bwd_f32(
                    X.reshape(lead + (-1,)), mu, rstd, W, G.reshape(lead + (-1,)), nx, nw, nb)
                nshape = X.shape[X.ndim - len(axes):]
                return (_wrap(gxa.reshape(X.shape)) if nx else None,
                        _wrap(gwa.reshape(nshape)) if nw else None,
                        _wrap(gba.reshape(nshape)) if nb else None, None, None)
            xhat = X - mu
            xhat *= rstd
            gx = gw = gb = None
            if nx:
                gh = G * w._data if w is not None else G
                if gh.dtype.char in "fd" and gh.size:      # Note [Sums by BLAS]
                    n = gh.dtype.type(_prod(gh.shape[gh.ndim - len(axes):]))
                    m1 = _fast_sum(gh, axes, True)
                    m1 /= n
                    m2 = _fast_sum(gh * xhat, axes, True)
                    m2 /= n
                else:
                    m1 = gh.mean(axis=axes, keepdims=True)
                    m2 = (gh * xhat).mean(axis=axes, keepdims=True)
                gxa = gh - m1
                gxa -= xhat * m2
                gxa *= rstd
                gx = _wrap(gxa)
            if nw:
                gw = _wrap(_fast_sum(G * xhat, lead) if lead else G * xhat)
            if nb:
                gb = _wrap(_fast_sum(G, lead)) if lead else g
            return gx, gw, gb, None, None
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


class _Stats:
    """Receives the batch mean and biased variance from _BatchNormTrain.forward (for the
    running-statistics update, without recomputing them)."""
    __slots__ = ("mean", "var")


class _BatchNormTrain(Function):
    """Normalise with the batch statistics over every dim but 1 (biased variance).
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w, means over the
    reduced dims; d/dw = sum(g * xhat), d/db = sum(g)."""
    _node_name = "NativeBatchNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, eps, stats):
        x = input._data
        axes = (0,) + tuple(range(2, x.ndim))
        pshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        n = x.size // x.shape[1] if x.size else 0
        with np.errstate(invalid="ignore", divide="ignore"):
            # sums batch axis first (Note [Batch axis first]), divided as np.mean divides
            mu = np.true_divide(_sum_axes(x, axes, True), n, dtype=x.dtype)
            xc = x - mu
            var = np.true_divide(_sum_axes(np.square(xc), axes, True), n, dtype=x.dtype)
        rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
        stats.mean = mu.reshape(-1)
        stats.var = var.reshape(-1)
        xc *= rstd
        if ctx is not None:
            ctx.save_for_backward(input, weight, bias)
            ctx._aux = (axes, pshape, eps, mu, rstd, xc.copy() if weight is not None
                        or bias is not None else None)
        if weight is not None:
            xc *= weight._data.reshape(pshape)
        if bias is not None:
            xc += bias._data.reshape(pshape)
        return xc

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        axes, pshape, eps, mu, rstd, xhat_np = ctx._aux
        nx, nw, nb = ctx.needs_input_grad[:3]
        if not _C.is_grad_enabled():
            # first order: NumPy on the saved statistics
            ga = g._data
            n = ga.size // ga.shape[1]
            xhat = xhat_np if xhat_np is not None else (x._data - mu) * rstd
            gb_ = _sum_axes(ga, axes, True)
            gxh_ = _sum_axes(ga * xhat, axes, True)
            gx = gw = gbias = None
            if nx:
                scale = rstd / n
                if w is not None:
                    scale = scale * w._data.reshape(pshape)
                gx = ga * n
                gx -= gb_
                gx -= xhat * gxh_
                gx *= scale
                gx = _wrap(gx.astype(x._data.dtype, copy=False))
            if nw:
                gw = _wrap(gxh_.reshape(-1))
            if nb:
                gbias = _wrap(gb_.reshape(-1))
            return gx, gw, gbias, None, None
        # create_graph: mean and rstd as functions of x, so double backward is exact
        mu_t = x.mean(axes, keepdim=True)
        xc = x - mu_t
        rstd_t = ((xc * xc).mean(axes, keepdim=True) + eps) ** -0.5
        xhat = xc * rstd_t
        gx = gw = gbias = None
        if nx:
            gh = g * w.reshape(pshape) if w is not None else g
            gx = rstd_t * (gh - gh.mean(axes, keepdim=True)
                           - xhat * (gh * xhat).mean(axes, keepdim=True))
        if nw:
            gw = (g * xhat).sum(axes)
        if nb:
            gbias = g.sum(axes)
        return gx, gw, gbias, None, None


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: normalise over every dim but 1 (channels).

    ``training=True``: batch statistics (one ``NativeBatchNormBackward0`` node); if running
    stats are given they are updated in place: ``r = (1 - momentum) * r + momentum * s`` with
    the unbiased batch variance. ``training=False``: the running statistics are used."""
    if momentum is not None and not isinstance(momentum, (int, float, np.number)):
        from cgrad._checks import type_name
        raise TypeError(f"batch_norm(): argument 'momentum' (position 7) must be float, not "
                        f"{type_name(momentum)}")
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ValueError(f"Expected 2D or higher input (got {len(shape)}D input)")
    C = shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"{name} should contain {C} elements not {t.numel()}")
    if training:
        size = int(np.prod(shape)) // C
        if size == 1:
            from cgrad.tensor import Size
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             f"size {Size(shape)!r}")
        stats = _Stats()
        out = _BatchNormTrain.apply(input, weight, bias, float(eps), stats)
        if running_mean is not None or running_var is not None:
            mean, var = stats.mean, stats.var
            n = size
            m = momentum
            if running_mean is not None:
                rm = running_mean._data
                rm *= (1 - m)
                rm += m * mean
                running_mean._bump_version()
            if running_var is not None:
                rv = running_var._data
                rv *= (1 - m)
                rv += (m * n / (n - 1)) * var
                running_var._bump_version()
        return out
    if running_mean is None or running_var is None:
        raise RuntimeError(f"{'running_mean' if running_mean is None else 'running_var'} must "
                           "be defined in evaluation mode")
    pshape = (1, C) + (1,) * (len(shape) - 2)
    rstd = (1.0 / np.sqrt(running_var._data + eps)).astype(input.dtype, copy=False)
    xc = input - _wrap(running_mean._data.reshape(pshape))
    if weight is None:
        y = xc * _wrap(rstd.reshape(pshape))
    else:
        y = xc * (weight * _wrap(rstd)).reshape(pshape)
    if bias is not None:
        y = y + bias.reshape(pshape)
    return y
