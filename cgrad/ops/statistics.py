"""Statistics and counts: var_mean, std_mean, aminmax, histc, histogram, bincount (see
cgrad/ops/__init__.py for the conventions; var, std, amax and amin live in reductions.py).

* var_mean and std_mean are one node with two outputs (VarMeanBackward0,
  StdMeanBackward0), as torch's: the gradient is var's (std's) plus mean's, each only when
  its output received one.
* aminmax is one node (AminmaxBackward0); each output's gradient is split evenly among the
  elements equal to it, as amin's and amax's.
* histc has no gradient (its output does not require grad, as torch's); histogram, and
  bincount with weights, record torch's NotImplemented node: backward raises "derivative
  for aten::<name> is not implemented".

The histograms follow torch's CPU kernel: the bin of an element is computed by division
(histc, histogram with a number of bins: then corrected against the edges by a local
search) or found by binary search in given edges, in the input's dtype; elements outside
the range and NaNs are skipped; the rightmost bin includes its right edge. Edges from a
number of bins are torch's linspace (computed from both ends).
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result
from cgrad.ops.promotion import _errstate
from cgrad.ops.promotion import torch_type_name as _tname
from cgrad.ops.reductions import (_axis, _centered, _check_dof, _const, _dof, _mask_fill,
                                  _moments, _one_dim, _require_float, _restore,
                                  _restore_arr, _return_type, _var_args)

aminmax_type = _return_type("aminmax", ("min", "max"))
histogram_type = _return_type("histogram", ("hist", "bin_edges"))


# ----------------------------------------------------------------------------------------
# var_mean / std_mean
# ----------------------------------------------------------------------------------------
def _numel(shape, dims):
    if dims is None or not shape:
        return int(np.prod(shape, dtype=np.int64))
    return int(np.prod([shape[d] for d in dims], dtype=np.int64))


class _MomentsMean(Function):
    """Base of var_mean and std_mean: (statistic, mean) from one node."""
    _name = ""
    _std = False

    @classmethod
    def _fwd(cls, ctx, a, dims, correction, keepdim):
        arr = a._data
        _require_float(arr, f"{cls._name} only support floating point and complex dtypes")
        dof = _dof(arr, dims, correction)
        _check_dof(cls._name, arr, dof)
        ax = _axis(dims, arr.ndim)
        with _errstate(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stat, mean = _moments(arr, ax, correction, keepdim, sqrt=cls._std, mean=True)
        stat = contiguous_result(stat.astype(arr.dtype, copy=False), arr)
        mean = contiguous_result(mean.astype(arr.dtype, copy=False), arr)
        if ctx is not None:
            ctx.set_materialize_grads(False)
            if cls._std:
                stat = _wrap(stat)
                ctx.save_for_backward(a, stat)
            else:
                ctx.save_for_backward(a)
            ctx._aux = (dims, keepdim, dof)
        return stat, mean

    @classmethod
    def _bwd(cls, ctx, gstat, gmean):
        saved = ctx.saved_tensors
        x = saved[0]
        dims, keepdim, dof = ctx._aux
        shape = x._data.shape
        out = None
        if gstat is not None:
            g = _restore(gstat, shape, dims, keepdim)
            if cls._std:              # std's gradient: var's of g / (2 std), 0 where std == 0
                res = _restore(saved[1], shape, dims, keepdim)
                zero = res._data == 0
                g = _mask_fill(g / (_mask_fill(res, zero, 1.0) * 2.0), zero, 0.0)
            scale = 2.0 / dof if dof > 0 else float("inf")
            out = _centered(x, dims) * (g * scale)
        if gmean is not None:
            gm = _restore(gmean, shape, dims, keepdim)._expand_to(shape) / _numel(shape, dims)
            out = gm if out is None else out + gm
        return out, None, None, None


class VarMean(_MomentsMean):
    _node_name = "VarMeanBackward0"
    _name = "var_mean"

    @staticmethod
    def forward(ctx, a, dims, correction, keepdim):
        return VarMean._fwd(ctx, a, dims, correction, keepdim)

    @staticmethod
    def backward(ctx, gvar, gmean):
        return VarMean._bwd(ctx, gvar, gmean)


class StdMean(_MomentsMean):
    _node_name = "StdMeanBackward0"
    _name = "std_mean"
    _std = True

    @staticmethod
    def forward(ctx, a, dims, correction, keepdim):
        return StdMean._fwd(ctx, a, dims, correction, keepdim)

    @staticmethod
    def backward(ctx, gstd, gmean):
        return StdMean._bwd(ctx, gstd, gmean)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance and the mean of input over dim(s) (all when None), from one node:
    (var, mean). `correction` (default 1, Bessel) and `unbiased` as for var."""
    dims, c, k = _var_args(dim, unbiased, keepdim, correction, input._data.ndim)
    return tuple(VarMean.apply(input, dims, c, k))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation and the mean of input over dim(s), from one node:
    (std, mean). `correction` (default 1, Bessel) and `unbiased` as for std."""
    dims, c, k = _var_args(dim, unbiased, keepdim, correction, input._data.ndim)
    return tuple(StdMean.apply(input, dims, c, k))


# ----------------------------------------------------------------------------------------
# aminmax
# ----------------------------------------------------------------------------------------
class Aminmax(Function):
    """aminmax(a, dim, keepdim) -> (min, max).  d/da = each output's gradient split evenly
    among the elements equal to it (NaN results give NaN gradients, as amin/amax)."""
    _node_name = "AminmaxBackward0"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        arr = a._data
        ax = _axis(dims, arr.ndim)
        lo = np.asarray(np.amin(arr, axis=ax, keepdims=keepdim))
        hi = np.asarray(np.amax(arr, axis=ax, keepdims=keepdim))
        if ctx is not None:
            ctx.set_materialize_grads(False)
            lo, hi = _wrap(lo), _wrap(hi)
            ctx.save_for_backward(a, lo, hi)
            ctx._aux = (dims, keepdim)
        return lo, hi

    @staticmethod
    def backward(ctx, glo, ghi):
        x, lo, hi = ctx.saved_tensors
        dims, keepdim = ctx._aux
        arr = x._data
        out = None
        for g, res in ((glo, lo), (ghi, hi)):
            if g is None:
                continue
            mask = arr == _restore_arr(res._data, arr.shape, dims)
            count = np.sum(mask, axis=_axis(dims, arr.ndim), keepdims=True)
            with _errstate():
                w = mask.astype(arr.dtype) / count.astype(arr.dtype)
            part = _restore(g, arr.shape, dims, keepdim) * _const(w)
            out = part if out is None else out + part
        return out, None, None


def aminmax(input, *, dim=None, keepdim=False):
    """The minimum and the maximum of input (over dim when given): (min, max)."""
    arr = input._data
    if dim is None:
        if arr.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        dims = None
        if keepdim:
            dims = tuple(range(arr.ndim))
    else:
        d = _one_dim(dim, arr.ndim)
        dims = (d,)
        if arr.ndim and arr.shape[d] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    return aminmax_type(*Aminmax.apply(input, dims, keepdim))


# ----------------------------------------------------------------------------------------
# histograms (no gradient)
# ----------------------------------------------------------------------------------------
class _NoDerivative(Function):
    """torch's NotImplemented node: outputs that require grad, a backward that raises."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, name, fn, *args):
        if ctx is not None:
            ctx._aux = name
        return fn()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{ctx._aux} is not implemented")


def _no_derivative(name, fn, *tensors):
    """fn() (arrays), recorded under a NotImplemented node when a tensor requires grad."""
    tensors = [t for t in tensors if isinstance(t, TensorBase)]
    return _NoDerivative.apply(name, fn, *tensors)


def _number(v):
    if isinstance(v, TensorBase):
        return v._data.item()
    return v


def _g(v):
    """A double as C++'s ostream prints it."""
    return f"{v:g}"


def _linspace(lo, hi, steps, dtype):
    """torch's linspace kernel (from the start up to half way, from the end after)."""
    dt = np.dtype(dtype)
    start, end = dt.type(lo), dt.type(hi)
    if steps == 1:
        return np.array([start], dt)
    with _errstate():
        step = (end - start) / dt.type(steps - 1)
        i = np.arange(steps)
        half = steps // 2
        lower = start + step * i.astype(dt)
        upper = end - step * (steps - i - 1).astype(dt)
    return np.where(i < half, lower, upper).astype(dt)


def _upper_bound(edges, vals, first=None, last=None):
    """std::upper_bound in edges[first:last] (per value), vectorized: the first index whose
    edge is greater than the value, found by the same bisection."""
    n = edges.size
    first = np.zeros(vals.shape, np.int64) if first is None else first.astype(np.int64)
    length = (np.full(vals.shape, n, np.int64) if last is None else last) - first
    while True:
        active = length > 0
        if not active.any():
            return first
        half = length >> 1
        middle = np.minimum(first + half, n - 1)
        left = vals < edges[middle]
        go = active & ~left
        first = np.where(go, middle + 1, first)
        length = np.where(active, np.where(left, half, length - half - 1), length)


def _histogram_counts(flat, edges, nbins, weight, mode):
    """torch's histogramdd kernel for one dimension: mode 'linear' (histc), 'local' (a
    number of bins) or 'search' (given edges)."""
    dt = flat.dtype
    hist = np.zeros(nbins, dt)
    if flat.size == 0:
        return hist
    left, right = edges[0], edges[-1]
    with _errstate():
        keep = (flat >= left) & (flat <= right)
    elt = flat[keep]
    if mode == "search":
        pos = _upper_bound(edges, elt) - 1
    else:
        with _errstate():
            q = (elt - left) * dt.type(nbins) / (right - left)
        pos = q.astype(np.int64)
        if mode == "local":
            lo = np.maximum(pos - 1, 0)
            hi = np.minimum(pos + 2, nbins + 1)
            pos = _upper_bound(edges, elt, lo, hi) - 1
    pos = np.where(pos == nbins, nbins - 1, pos)
    if weight is None and dt != np.float16:
        return np.bincount(pos, minlength=nbins).astype(dt)
    add = np.ones(pos.shape, dt) if weight is None else weight.reshape(-1)[keep]
    np.add.at(hist, pos, add)
    return hist


def _check_hist_input(arr, kernel):
    if arr.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tname(arr.dtype)}\'')


def histc(input, bins=100, min=0, max=0):
    """The histogram of input with `bins` equal-width bins over [min, max] (the data's range
    when min == max); elements outside are ignored. No gradient."""
    arr = input._data
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, (bool, np.bool_)):
        from cgrad._checks import type_name
        raise TypeError(f"histc(): argument 'bins' (position 2) must be int, not "
                        f"{type_name(bins)}")
    _check_hist_input(arr, "histogram_cpu")
    if bins <= 0:
        raise RuntimeError(f"cgrad.histogram(): bins must be > 0, but got {bins} for "
                           "dimension 0")
    lo, hi = float(_number(min)), float(_number(max))
    if lo == hi and arr.size:
        lo, hi = float(np.min(arr)), float(np.max(arr))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"cgrad.histc: range of [{_g(lo)}, {_g(hi)}] is not finite")
    if not lo < hi:
        raise RuntimeError("cgrad.histc: max must be larger than min")
    edges = _linspace(lo, hi, bins + 1, arr.dtype)
    return _wrap(_histogram_counts(arr.reshape(-1), edges, int(bins), None, "linear"))


def _hist_range(arr, range):
    if range is not None:
        range = tuple(range)
        if len(range) != 2:
            raise RuntimeError("cgrad.histogramdd: for a 1-dimensional histogram range should "
                               f"have 2 elements, but got {len(range)}")
        lo, hi = float(range[0]), float(range[1])
    elif arr.size:
        if arr.dtype == np.float16:         # torch's range from the data has no half kernel
            raise NotImplementedError('"histogramdd" not implemented for \'Half\'')
        lo, hi = float(np.min(arr)), float(np.max(arr))
    else:
        lo, hi = 0.0, 1.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"cgrad.histogramdd: dimension 0's range [{_g(lo)}, {_g(hi)}] is "
                           "not finite")
    if not lo <= hi:
        raise RuntimeError(f"cgrad.histogramdd: min should not exceed max, but got min "
                           f"{_g(lo)} max {_g(hi)} for dimension 0")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """The histogram of input: `bins` equal-width bins over `range` (default: the data's
    range), or the bins between given edges (a 1-D tensor); with `weight` each element
    counts its weight; `density` normalizes it. Returns (hist, bin_edges)."""
    arr = input._data
    _check_hist_input(arr, "histogramdd")
    w = None
    if weight is not None:
        w = weight._data
        if w.dtype != arr.dtype:
            raise RuntimeError("cgrad.histogramdd: if weight tensor is provided, input tensor "
                               "and weight tensor should have the same dtype, but got "
                               f"input({_tname(arr.dtype).lower()}), and "
                               f"weight({_tname(w.dtype).lower()})")
        if w.shape != arr.shape:
            raise RuntimeError(
                "cgrad.histogramdd: if weight tensor is provided it should have the same shape "
                "as the input tensor excluding its innermost dimension, but got input with "
                f"shape {list(arr.reshape(-1, 1).shape)} and weight with shape "
                f"{list(w.shape)}")
    if isinstance(bins, TensorBase):
        edges = bins._data
        if edges.ndim != 1:
            raise RuntimeError("cgrad.histogramdd: bins tensor should have one dimension, but "
                               f"got {edges.ndim} dimensions in the bins tensor for dimension 0")
        if edges.size == 0:
            raise RuntimeError("cgrad.histogramdd: bins tensor should have at least 1 element, "
                               "but got 0 elements in the bins tensor for dimension 0")
        if edges.dtype != arr.dtype:
            raise RuntimeError(
                "cgrad.histogramdd: input tensor and bins tensors should have the same dtype, "
                f"but got input with dtype {_ctype(arr.dtype)} and bins for dimension 0 with "
                f"dtype {_ctype(edges.dtype)}")
        nbins, mode = edges.size - 1, "search"
        if nbins <= 0:
            raise RuntimeError("cgrad.histogram(): bins must be > 0, but got 0 for dimension 0")
    else:
        if not isinstance(bins, (int, np.integer)) or isinstance(bins, (bool, np.bool_)):
            from cgrad._checks import type_name
            raise TypeError("histogram() received an invalid combination of arguments - got "
                            f"bins of type {type_name(bins)}")
        if bins <= 0:
            raise RuntimeError(f"cgrad.histogram(): bins must be > 0, but got {bins} for "
                               "dimension 0")
        lo, hi = _hist_range(arr, range)
        nbins, mode = int(bins), "local"
        edges = _linspace(lo, hi, nbins + 1, arr.dtype)

    def compute():
        hist = _histogram_counts(arr.reshape(-1), edges, nbins, w, mode)
        if density:
            with _errstate():
                hist = hist / hist.dtype.type(hist.sum(dtype=np.float64))
                hist = (hist / np.diff(edges)).astype(arr.dtype, copy=False)
        return hist, edges.copy()

    hist, out_edges = _no_derivative("histogram", compute, input, weight,
                                     bins if isinstance(bins, TensorBase) else None)
    return histogram_type(hist, out_edges)


def _ctype(dt):
    return {"float64": "double", "float32": "float", "float16": "c10::Half"}.get(str(dt),
                                                                               str(dt))


def bincount(input, weights=None, minlength=0):
    """The number of occurrences of each value in input (1-D, non-negative integers), or the
    sum of `weights` at each value; at least `minlength` bins."""
    arr = input._data
    if not isinstance(minlength, (int, np.integer)) or isinstance(minlength, (bool, np.bool_)):
        from cgrad._checks import type_name
        raise TypeError(f"bincount(): argument 'minlength' must be int, not "
                        f"{type_name(minlength)}")
    if arr.dtype.kind not in "iu":
        raise NotImplementedError(f'"bincount_cpu" not implemented for \'{_tname(arr.dtype)}\'')
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if arr.ndim == 1 and arr.size == 0:
        return _wrap(np.zeros(int(minlength), np.int64))
    if arr.ndim != 1 or arr.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    w = None if weights is None else weights._data
    if w is not None and (w.ndim != 1 or w.shape[0] != arr.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    n = builtins.max(int(arr.max()) + 1, int(minlength))
    idx = arr.astype(np.int64)
    if w is None:
        return _wrap(np.bincount(idx, minlength=n).astype(np.int64))

    def compute():
        wt = w.astype(np.float32 if w.dtype == np.float32 else np.float64)
        out = np.zeros(n, wt.dtype)
        np.add.at(out, idx, wt)
        return out

    return _no_derivative("bincount", compute, weights)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
_FNS = (var_mean, std_mean, aminmax, histc, histogram, bincount)
_METHODS = (aminmax, histc, histogram, bincount)

TENSOR_METHODS: dict = {f.__name__: f for f in _METHODS}
FUNCTIONS: dict = {f.__name__: f for f in _FNS}
