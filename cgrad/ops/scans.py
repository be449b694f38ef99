"""Scans with an index or in log space: cummax, cummin, logcumsumexp (see
cgrad/ops/__init__.py for the conventions; cumsum and cumprod live in reductions.py).

* cummax/cummin return (values, indices): at each position the running maximum (minimum)
  and the index where it was taken. As torch's CPU kernel, an element equal to the running
  value takes its place (the index is the last of equal elements), a NaN always does and
  then stays (the index moves to each later NaN). The gradient of values goes to those
  indices, added up where several positions share one (torch's cummaxmin_backward: a
  scatter_add into zeros, whose gradient is a gather).
* logcumsumexp(x)_i = log(sum_{j<=i} exp(x_j)), computed stably; its gradient is torch's
  logcumsumexp_backward, computed in one node whose backward is written with cgrad ops
  so that double backward works: the positive and negative parts of the incoming gradient
  are accumulated separately in log space. That gradient is linear in the incoming one, and
  its own backward says so (exact where that gradient is 0, where torch's is NaN).
"""
from __future__ import annotations

import numpy as np

from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.ops.gather_scatter import _ScatterAddZeros
from cgrad.ops.promotion import _errstate
from cgrad.ops.promotion import torch_type_name as _tname
from cgrad.ops.reductions import _one_dim, _return_type

cummax_type = _return_type("cummax")
cummin_type = _return_type("cummin")


# ----------------------------------------------------------------------------------------
# cummax / cummin
# ----------------------------------------------------------------------------------------
def _running(arr, axis, largest):
    """(values, indices) of the running extremum along axis, with torch's ties and NaNs."""
    if arr.size == 0:
        return arr.copy(), np.zeros(arr.shape, np.int64)
    acc = np.maximum if largest else np.minimum
    vals = acc.accumulate(arr, axis=axis)          # NaN propagates, as torch's values
    n = arr.shape[axis]
    prev = np.take(vals, np.arange(n - 1), axis=axis)
    cur = np.take(arr, np.arange(1, n), axis=axis)
    with _errstate():
        better = cur >= prev if largest else cur <= prev
    if arr.dtype.kind == "f":
        better = np.isnan(cur) | (~np.isnan(prev) & better)
    first = np.ones(np.take(arr, [0], axis=axis).shape, bool)
    update = np.concatenate([first, better], axis=axis)
    shape = [1] * arr.ndim
    shape[axis] = n
    pos = np.where(update, np.arange(n).reshape(shape), 0)
    return vals, np.maximum.accumulate(pos, axis=axis).astype(np.int64)


class _CumExtremum(Function):
    """Base of cummax and cummin: d/da = scatter_add of g at the indices."""
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])
    _largest = True

    @classmethod
    def _fwd(cls, ctx, a, dim):
        arr = a._data
        if arr.ndim == 0:
            if ctx is not None:
                ctx._aux = None
            return arr.copy(), np.zeros((), np.int64)
        vals, idx = _running(arr, dim, cls._largest)
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
            ctx.save_for_backward(a)    # only for the version check, as torch saves self
        return vals, idx.copy()

    @staticmethod
    def _bwd(ctx, g):
        if ctx._aux is None:
            return g, None
        shape, dim, idx = ctx._aux
        ctx.saved_tensors       # noqa: B018 (the version check of self)
        if g._data.size == 0:
            return g, None
        return _ScatterAddZeros.apply(g, shape, dim, idx), None


class Cummax(_CumExtremum):
    _node_name = "CummaxBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        return Cummax._fwd(ctx, a, dim)

    @staticmethod
    def backward(ctx, g, gi=None):
        return Cummax._bwd(ctx, g)


class Cummin(_CumExtremum):
    _node_name = "CumminBackward0"
    _largest = False

    @staticmethod
    def forward(ctx, a, dim):
        return Cummin._fwd(ctx, a, dim)

    @staticmethod
    def backward(ctx, g, gi=None):
        return Cummin._bwd(ctx, g)


def _check_real(arr, name):
    if arr.dtype.kind == "c":
        raise RuntimeError(f"{name}(): complex tensors are not supported")


def cummax(input, dim):
    """The cumulative maximum of input along dim and the index of each (the last of equal
    elements; NaN propagates): (values, indices)."""
    arr = input._data
    _check_real(arr, "cummax")
    return cummax_type(*Cummax.apply(input, _one_dim(dim, arr.ndim)))


def cummin(input, dim):
    """The cumulative minimum of input along dim and the index of each (the last of equal
    elements; NaN propagates): (values, indices)."""
    arr = input._data
    _check_real(arr, "cummin")
    return cummin_type(*Cummin.apply(input, _one_dim(dim, arr.ndim)))


# ----------------------------------------------------------------------------------------
# logcumsumexp
# ----------------------------------------------------------------------------------------
def _logcumsumexp(arr, axis):
    # accumulated in torch's CPU accumulation type (double for float, float for half)
    work = arr.astype(np.float32 if arr.dtype == np.float16 else np.float64)
    with _errstate():
        return np.logaddexp.accumulate(work, axis=axis).astype(arr.dtype, copy=False)


class Logcumsumexp(Function):
    """logcumsumexp(a, dim).  d/da_j = sum_{i>=j} g_i exp(a_j - out_i) (_LcseVJP)."""
    _node_name = "LogcumsumexpBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        out = arr.copy() if arr.ndim == 0 else _logcumsumexp(arr, dim)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = None if arr.ndim == 0 else dim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axis = ctx._aux
        if axis is None or g._data.size == 0:
            return g, None
        return _LcseVJP.apply(g, x, out, axis), None


def _signed_log_parts(v):
    """log|v| where v > 0 (resp. v < 0), the dtype's lowest number elsewhere (torch's)."""
    lowest = np.finfo(v.dtype).min
    with _errstate():
        la = np.log(np.abs(v))
    return np.where(v > 0, la, lowest), np.where(v < 0, la, lowest)


def _rev_lcse(t, axis):
    return np.flip(_logcumsumexp(np.flip(t, axis), axis), axis)


class _LcseVJP(Function):
    """A(v)_j = sum_{i>=j} v_i exp(x_j - out_i): logcumsumexp's gradient, computed as torch's
    logcumsumexp_backward (the positive and negative parts of v in log space). It is linear in
    v; its backward (for double backward) is exact everywhere, v = 0 included (torch's,
    through log|v|, is NaN there): d/dv = B(w), d/dx = w * A(v), d/dout = -v * B(w)."""
    _node_name = "SubBackward0"             # torch's gradient is output_pos - output_neg
    _transpose = False

    @classmethod
    def _value(cls, v, x, out, axis):
        p, n = _signed_log_parts(v)
        with _errstate():
            if cls._transpose:              # B(w)_i = sum_{j<=i} w_j exp(x_j - out_i)
                return (np.exp(_logcumsumexp(p + x, axis) - out)
                        - np.exp(_logcumsumexp(n + x, axis) - out))
            return np.exp(_rev_lcse(p - out, axis) + x) - np.exp(_rev_lcse(n - out, axis) + x)

    @classmethod
    def _fwd(cls, ctx, v, x, out, axis):
        res = cls._value(v._data, x._data, out._data, axis)
        if ctx is not None:
            res = _wrap(res)
            ctx.save_for_backward(v, x, out, res)
            ctx._aux = axis
        return res

    @classmethod
    def _bwd(cls, ctx, u):
        v, x, out, res = ctx.saved_tensors
        axis = ctx._aux
        nv, nx, nout, _ = ctx.needs_input_grad
        if cls._transpose:      # B: d/dv = A(u), d/dx = v A(u), d/dout = -u B(v)
            tu = _LcseVJP.apply(u, x, out, axis) if (nv or nx) else None
            return (tu if nv else None, v * tu if nx else None,
                    -(u * res) if nout else None, None)
        # A: d/dv = B(u), d/dx = u A(v), d/dout = -v B(u)
        tu = _LcseVJPT.apply(u, x, out, axis) if (nv or nout) else None
        return (tu if nv else None, u * res if nx else None,
                -(v * tu) if nout else None, None)

    @staticmethod
    def forward(ctx, v, x, out, axis):
        return _LcseVJP._fwd(ctx, v, x, out, axis)

    @staticmethod
    def backward(ctx, w):
        return _LcseVJP._bwd(ctx, w)


class _LcseVJPT(_LcseVJP):
    """B(w)_i = sum_{j<=i} w_j exp(x_j - out_i), the transpose of _LcseVJP's A."""
    _node_name = "SubBackward0"
    _transpose = True

    @staticmethod
    def forward(ctx, v, x, out, axis):
        return _LcseVJPT._fwd(ctx, v, x, out, axis)

    @staticmethod
    def backward(ctx, w):
        return _LcseVJPT._bwd(ctx, w)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input), dim)), computed stably (no overflow)."""
    arr = input._data
    if arr.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"logcumsumexp_out_cpu" not implemented for \'{_tname(arr.dtype)}\'')
    return Logcumsumexp.apply(input, _one_dim(dim, arr.ndim))


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
_OPS = (cummax, cummin, logcumsumexp)

TENSOR_METHODS: dict = {f.__name__: f for f in _OPS}
FUNCTIONS: dict = {f.__name__: f for f in _OPS}
