"""Reductions, scans and softmax (see cgrad/ops/__init__.py for the conventions).

sum, mean and sum_to (the one place where broadcast gradients are reduced), prod, max/min
(all, and along a dim with indices), amax/amin, argmax/argmin, var/std, logsumexp, softmax,
log_softmax, cumsum, cumprod, all/any, count_nonzero, nansum, nanmean. Norms live in
cgrad/ops/norms.py.

Gradient conventions (all as torch):
* max()/min() without dim and amax/amin split the gradient evenly among ties; max/min with a
  dim send it to the returned index (the first occurrence, as torch on CPU and NumPy).
* prod and cumprod are exact when the input holds zeros, including double backward
  (prod uses the exclusive products prod_{j<i} * prod_{j>i}, computed with cumprod; cumprod's
  backward treats the first zero of each slice separately, as torch's cumprod_backward).
* std's gradient where std == 0 is 0.

Every backward is written with cgrad ops, so create_graph=True / double backward works.
Non-tensor constants used by a backward (masks, tie weights, indices) are NumPy arrays: they
are locally constant, so their derivative is zero.
"""
from __future__ import annotations

import builtins
import collections
import sys
import types
import warnings

import numpy as np

from cgrad._C import TensorBase, _wrap, is_grad_enabled
from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result
from cgrad.ops.comparison import MaskedFillConst
from cgrad.ops._util import _norm_dims
from cgrad.ops._sums import _fast_sum, _sum_axes  # noqa: F401 (_sum_axes: tests)

_INF = float("inf")


# ----------------------------------------------------------------------------------------
# sum, mean and sum_to (the one place where broadcast gradients are reduced)
# ----------------------------------------------------------------------------------------


class Sum(Function):
    """sum(a, dim, keepdim).  d/da = g broadcast back to a's shape (a view)."""
    _node_name = "SumBackward0"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, dtype=None):
        arr = a._data
        dims = _norm_dims(dim, arr.ndim, True)
        if ctx is not None:
            ctx._aux = (arr.shape, dims, keepdim)
        if arr.ndim == 0:
            dims = None
        if dtype is None and arr.dtype.kind in "bui":
            dtype = np.int64
        if dtype is None:
            return contiguous_result(_sum_axes(arr, dims, keepdim), arr)
        return contiguous_result(np.sum(arr, axis=dims, keepdims=keepdim, dtype=dtype), arr)

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx._aux
        if not keepdim and shape != g._data.shape:
            g = g.reshape(_keep_shape(shape, dims))
        return g._expand_to(shape), None, None, None


class Mean(Function):
    """mean(a, dim, keepdim).  d/da = g / n broadcast back."""
    _node_name = "MeanBackward0"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, dtype=None):
        arr = a._data
        if arr.dtype.kind not in "fc" and dtype is None:
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {_dtype_name(arr.dtype)}")
        dims = _norm_dims(dim, arr.ndim, True)
        if ctx is not None:
            n = arr.size if dims is None else int(np.prod([arr.shape[d] for d in dims]))
            ctx._aux = (arr.shape, dims, keepdim, n)
        if arr.size == 0:
            # the mean of nothing is nan, silently as torch (NumPy warns "Mean of empty slice")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return contiguous_result(np.mean(arr, axis=dims if arr.ndim else None,
                                                 keepdims=keepdim, dtype=dtype), arr)
        return contiguous_result(
            np.mean(arr, axis=dims if arr.ndim else None, keepdims=keepdim, dtype=dtype), arr)

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim, n = ctx._aux
        if not keepdim and shape != g._data.shape:
            g = g.reshape(_keep_shape(shape, dims))
        return (g / n)._expand_to(shape), None, None, None


class SumDim(Sum):
    """sum over given dims (torch's sum.dim_IntList)."""
    _node_name = "SumBackward1"


class MeanDim(Mean):
    """mean over given dims (torch's mean.dim)."""
    _node_name = "MeanBackward1"


def _dtype_name(dt):
    return {"int64": "Long", "int32": "Int", "bool": "Bool", "int16": "Short",
            "int8": "Char", "uint8": "Byte"}.get(str(dt), str(dt))


class SumTo(Function):
    """Sum a broadcast gradient back to `shape`.  d/da = g expanded to a's shape."""
    _node_name = "SumToBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        return _sum_to_array(arr, shape)

    @staticmethod
    def backward(ctx, g):
        return g._expand_to(ctx._aux), None


def _sum_to_array(arr, shape):
    lead = arr.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and arr.shape[i + lead] != 1)
    if axes:
        arr = _fast_sum(arr, axes, True)
    if lead:
        arr = arr.reshape(shape)
    return arr


def sum_to(g, shape):
    """Reduce gradient tensor g to `shape` (the inverse of broadcasting); differentiable."""
    shape = tuple(shape)
    if g._data.shape == shape:
        return g
    return SumTo.apply(g, shape)


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
from cgrad.ops.promotion import torch_type_name as _tname  # noqa: E402


def _dims(dim, ndim, empty_is_all=True):
    """Normalise dim (None, int or sequence of ints) to a sorted tuple of non-negative dims,
    or None for "all dims". Raises torch's IndexError/RuntimeError."""
    if dim is None:
        return None
    if isinstance(dim, TensorBase):
        dim = dim.tolist()
    if not isinstance(dim, (int, np.integer)):
        dim = tuple(dim)
        if not dim and empty_is_all:
            return None
    dims = _norm_dims(dim, ndim)
    seen = set()
    for d in dims:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(sorted(dims))


def _one_dim(dim, ndim):
    """A single dim (an int), normalised; torch's IndexError when out of range."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, (bool, np.bool_)):
        from cgrad._checks import type_name
        raise TypeError(f"argument 'dim' must be int, not {type_name(dim)}")
    return _norm_dims(int(dim), ndim)[0]


def _axis(dims, ndim):
    """NumPy axis argument for normalised dims (0-d arrays reduce with axis=None)."""
    return None if dims is None or ndim == 0 else dims


def _keep_shape(shape, dims):
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _restore(g, shape, dims, keepdim):
    """A reduced gradient (or result) reshaped so it broadcasts against the input."""
    ks = _keep_shape(shape, dims)
    if tuple(g._data.shape) != ks:
        g = g.reshape(ks)
    return g


def _restore_arr(a, shape, dims):
    return a.reshape(_keep_shape(shape, dims))


def _mask_fill(t, mask, value):
    """t with `value` where the ndarray mask is True (mask broadcast to t); no-op if none."""
    mask = np.broadcast_to(mask, t._data.shape)
    if not mask.any():
        return t
    return MaskedFillConst.apply(t, mask, value)


def _const(arr):
    return _wrap(np.ascontiguousarray(arr))


def _require_float(arr, what):
    if arr.dtype.kind not in "fc":
        raise RuntimeError(what.format(_tname(arr.dtype)))


def _cast_input(x, dtype):
    """torch's `dtype=` argument of reductions: the input is cast first."""
    if dtype is None:
        return x
    dtype = np.dtype(dtype)
    return x if x._data.dtype == dtype else x.to(dtype)


from cgrad.ops.promotion import _errstate  # noqa: E402
from cgrad._warn import warn as _warn  # noqa: E402


# ----------------------------------------------------------------------------------------
# return types (namedtuples named as torch.return_types.*)
# ----------------------------------------------------------------------------------------
return_types = types.ModuleType("cgrad.return_types",
                                "Named tuples returned by ops with several outputs.")


def _return_type(name, fields=("values", "indices")):
    cls = collections.namedtuple(name, fields, module="cgrad.return_types")

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"cgrad.return_types.{name}(\n{body})"

    cls.__repr__ = __repr__
    cls.__str__ = __repr__
    setattr(return_types, name, cls)
    return cls


max_type = _return_type("max")
min_type = _return_type("min")
sys.modules.setdefault("cgrad.return_types", return_types)


# ----------------------------------------------------------------------------------------
# internal differentiable building blocks (used inside backward formulas)
# ----------------------------------------------------------------------------------------
class _Flip(Function):
    """flip along one axis (a view).  d/da = flip(g)."""
    _node_name = "FlipBackward0"

    @staticmethod
    def forward(ctx, a, axis):
        if ctx is not None:
            ctx._aux = axis
        return np.flip(a._data, axis)

    @staticmethod
    def backward(ctx, g):
        return _Flip.apply(g, ctx._aux), None


class _Shift(Function):
    """Shift by one along axis: step=+1 gives out[0] = fill, out[i] = a[i-1]; step=-1 gives
    out[i] = a[i+1], out[-1] = fill.  d/da = the opposite shift of g, filled with 0."""
    _node_name = "CatBackward0"

    @staticmethod
    def forward(ctx, a, axis, step, fill):
        arr = a._data
        if ctx is not None:
            ctx._aux = (axis, step)
        out = np.empty_like(arr)
        n = arr.shape[axis]

        def sl(s):
            idx = [slice(None)] * arr.ndim
            idx[axis] = s
            return tuple(idx)

        if step > 0:
            out[sl(slice(1, n))] = arr[sl(slice(0, n - 1))]
            out[sl(slice(0, 1))] = fill
        else:
            out[sl(slice(0, n - 1))] = arr[sl(slice(1, n))]
            out[sl(slice(n - 1, n))] = fill
        return out

    @staticmethod
    def backward(ctx, g):
        axis, step = ctx._aux
        return _Shift.apply(g, axis, -step, 0.0), None, None, None


class _ScatterAlong(Function):
    """zeros(shape) with g put at idx along axis (one index per slice).
    d/dg = take_along_axis(gg, idx)."""
    _node_name = "ScatterBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, idx, axis, shape):
        if ctx is not None:
            ctx._aux = (idx, axis)
        out = np.zeros(shape, dtype=g._data.dtype)
        np.put_along_axis(out, idx, g._data, axis)
        return out

    @staticmethod
    def backward(ctx, gg):
        idx, axis = ctx._aux
        return _GatherAlong.apply(gg, idx, axis), None, None, None


class _GatherAlong(Function):
    """take_along_axis(a, idx, axis).  d/da = scatter of g into zeros at idx."""
    _node_name = "GatherBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, idx, axis):
        if ctx is not None:
            ctx._aux = (idx, axis, a._data.shape)
        return np.take_along_axis(a._data, idx, axis)

    @staticmethod
    def backward(ctx, g):
        idx, axis, shape = ctx._aux
        return _ScatterAlong.apply(g, idx, axis, shape), None, None


def _flip(t, axis):
    return _Flip.apply(t, axis)


def _rev_cumsum(t, axis):
    """sum_{j >= i} t_j along axis (differentiable)."""
    return _flip(Cumsum.apply(_flip(t, axis), axis), axis)


def _exclusive_prod(x, axis):
    """prod_{j != i} x_j along axis, exact with zeros: prod_{j<i} * prod_{j>i} (torch's
    prod_safe_zeros_backward). Differentiable through cumprod."""
    left = Cumprod.apply(_Shift.apply(x, axis, 1, 1.0), axis)
    right = _flip(Cumprod.apply(_Shift.apply(_flip(x, axis), axis, 1, 1.0), axis), axis)
    return left * right


# ----------------------------------------------------------------------------------------
# prod
# ----------------------------------------------------------------------------------------
class Prod(Function):
    """prod(a) over all elements.  d/da_i = g * prod_{j != i} a_j (exact with zeros)."""
    _node_name = "ProdBackward0"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        arr = a._data
        dt = np.int64 if arr.dtype.kind in "bui" else None
        out = np.prod(arr, axis=_axis(dims, arr.ndim), keepdims=keepdim, dtype=dt)
        out = contiguous_result(np.asarray(out), arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = (dims, keepdim)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx._aux
        shape = x._data.shape
        g = _restore(g, shape, dims, keepdim)
        if x._data.ndim == 0:
            return g, None, None
        if not (x._data == 0).any():
            return g * _restore(out, shape, dims, keepdim) / x, None, None
        if dims is None:
            others = _exclusive_prod(x.reshape(-1), 0).reshape(shape)
        else:
            others = _exclusive_prod(x, dims[0])
        return g * others, None, None


class ProdDim(Prod):
    """prod(a, dim, keepdim) (torch's prod.dim_int)."""
    _node_name = "ProdBackward1"


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of the elements (over one dim if given)."""
    x = _cast_input(input, dtype)
    if dim is None:
        if keepdim:
            raise TypeError("prod(): keepdim requires dim")
        return Prod.apply(x, None, False)
    return ProdDim.apply(x, (_one_dim(dim, x._data.ndim),), keepdim)


# ----------------------------------------------------------------------------------------
# max / min / amax / amin
# ----------------------------------------------------------------------------------------
class _EvenReduce(Function):
    """Base of amax/amin and full max/min: the gradient is split evenly among the elements
    equal to the result.  d/da = g * (a == out) / count(a == out)."""
    _np = None            # np.amax / np.amin
    _name = ""
    _nan_ties = False     # max()/min(): a NaN result spreads over the NaNs (torch)

    @classmethod
    def _fwd(cls, ctx, a, dims, keepdim):
        arr = a._data
        if arr.size == 0 and (dims is None or builtins.any(arr.shape[d] == 0 for d in dims)):
            if dims is None:
                raise RuntimeError(
                    f"{cls._name}(): Expected reduction dim to be specified for "
                    "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
            raise IndexError(f"{cls._name}(): Expected reduction dim "
                             f"{next(d for d in dims if arr.shape[d] == 0)} to have non-zero "
                             "size.")
        out = contiguous_result(np.asarray(cls._np(arr, axis=_axis(dims, arr.ndim),
                                                  keepdims=keepdim)), arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = (dims, keepdim)
        return out

    @classmethod
    def _bwd(cls, ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx._aux
        arr = x._data
        res = _restore_arr(out._data, arr.shape, dims)
        mask = arr == res
        if cls._nan_ties:
            mask = np.where(np.isnan(res), np.isnan(arr), mask)
        count = np.sum(mask, axis=_axis(dims, arr.ndim), keepdims=True)
        with _errstate():
            w = mask.astype(arr.dtype) / count.astype(arr.dtype)
        return _restore(g, arr.shape, dims, keepdim) * _const(w)


class Amax(_EvenReduce):
    _node_name = "AmaxBackward0"
    _np = staticmethod(np.amax)
    _name = "amax"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        return Amax._fwd(ctx, a, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        return Amax._bwd(ctx, g), None, None


class Amin(_EvenReduce):
    _node_name = "AminBackward0"
    _np = staticmethod(np.amin)
    _name = "amin"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        return Amin._fwd(ctx, a, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        return Amin._bwd(ctx, g), None, None


class MaxAll(_EvenReduce):
    """max() of all elements (torch's MaxBackward1: ties share the gradient evenly)."""
    _node_name = "MaxBackward1"
    _np = staticmethod(np.amax)
    _name = "max"
    _nan_ties = True

    @staticmethod
    def forward(ctx, a):
        return MaxAll._fwd(ctx, a, None, False)

    @staticmethod
    def backward(ctx, g):
        return MaxAll._bwd(ctx, g)


class MinAll(_EvenReduce):
    _node_name = "MinBackward1"
    _np = staticmethod(np.amin)
    _name = "min"
    _nan_ties = True

    @staticmethod
    def forward(ctx, a):
        return MinAll._fwd(ctx, a, None, False)

    @staticmethod
    def backward(ctx, g):
        return MinAll._bwd(ctx, g)


class _SelectDim(Function):
    """max/min along one dim: (values, indices); the gradient goes to the selected index."""
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])
    _arg = None
    _name = ""

    @classmethod
    def _fwd(cls, ctx, a, dim, keepdim):
        arr = a._data
        if arr.ndim == 0:
            if ctx is not None:
                ctx._aux = None
            return arr.copy(), np.zeros((), np.int64)
        if arr.shape[dim] == 0:
            raise IndexError(f"{cls._name}(): Expected reduction dim {dim} to have non-zero "
                             "size.")
        idx = cls._arg(arr, axis=dim, keepdims=True)
        vals = np.take_along_axis(arr, idx, dim)
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
        if not keepdim:
            vals = np.squeeze(vals, dim)
            idx = np.squeeze(idx, dim)
        return vals, idx.astype(np.int64)       # a copy: the saved idx stays private

    @staticmethod
    def _bwd(ctx, gv):
        if ctx._aux is None:
            return gv, None, None
        shape, dim, idx = ctx._aux
        if gv._data.ndim != len(shape):
            gv = gv.unsqueeze(dim)
        return _ScatterAlong.apply(gv, idx, dim, shape), None, None


class MaxDim(_SelectDim):
    _node_name = "MaxBackward0"
    _arg = staticmethod(np.argmax)
    _name = "max"

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        return MaxDim._fwd(ctx, a, dim, keepdim)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return MaxDim._bwd(ctx, gv)


class MinDim(_SelectDim):
    _node_name = "MinBackward0"
    _arg = staticmethod(np.argmin)
    _name = "min"

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        return MinDim._fwd(ctx, a, dim, keepdim)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return MinDim._bwd(ctx, gv)


def _max_min(input, dim, keepdim, other, all_cls, dim_cls, rtype, binary):
    if isinstance(dim, TensorBase) and other is None:
        dim, other = None, dim
    if other is not None:
        from cgrad.ops import comparison
        return getattr(comparison, binary)(input, other)
    if dim is None:
        if keepdim:
            raise TypeError(f"{all_cls._name}(): keepdim requires dim")
        return all_cls.apply(input)
    d = _one_dim(dim, input._data.ndim)
    return rtype(*dim_cls.apply(input, d, keepdim))


def max(input, dim=None, keepdim=False, *, other=None):
    """max(input) -> values; max(input, dim, keepdim=False) -> (values, indices);
    max(input, other_tensor) -> maximum."""
    return _max_min(input, dim, keepdim, other, MaxAll, MaxDim, max_type, "maximum")


def min(input, dim=None, keepdim=False, *, other=None):
    """min(input) -> values; min(input, dim, keepdim=False) -> (values, indices);
    min(input, other_tensor) -> minimum."""
    return _max_min(input, dim, keepdim, other, MinAll, MinDim, min_type, "minimum")


def amax(input, dim=(), keepdim=False):
    """Maximum over dim(s) (all when dim=()); ties share the gradient evenly."""
    return Amax.apply(input, _dims(dim, input._data.ndim), keepdim)


def amin(input, dim=(), keepdim=False):
    """Minimum over dim(s) (all when dim=()); ties share the gradient evenly."""
    return Amin.apply(input, _dims(dim, input._data.ndim), keepdim)


def _arg(input, dim, keepdim, fn, name):
    arr = input._data
    if dim is None:
        if arr.size == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                             "input.numel() == 0.")
        out = np.asarray(fn(arr), dtype=np.int64)
        if keepdim:
            out = out.reshape((1,) * arr.ndim)
        return _wrap(out)
    d = _one_dim(dim, arr.ndim)
    if arr.ndim == 0:
        return _wrap(np.zeros((), np.int64))
    if arr.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    return _wrap(np.asarray(fn(arr, axis=d, keepdims=keepdim), dtype=np.int64))


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (flattened when dim is None); int64, no gradient."""
    return _arg(input, dim, keepdim, np.argmax, "argmax")


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (flattened when dim is None); int64, no gradient."""
    return _arg(input, dim, keepdim, np.argmin, "argmin")


# ----------------------------------------------------------------------------------------
# var / std
# ----------------------------------------------------------------------------------------
def _dof(arr, dims, correction):
    if dims is None or arr.ndim == 0:       # a 0-d tensor counts as size 1 along dim 0
        n = arr.size
    else:
        n = int(np.prod([arr.shape[d] for d in dims]))
    return builtins.max(0, n - correction)


def _check_dof(name, arr, dof):
    # torch's reduction factor is numel / output numel: 0 for an empty input
    if dof <= 0 or arr.size == 0:
        _warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
              "than the reduction factor (input numel divided by output numel).")


def _moments(arr, ax, ddof, keepdims, sqrt=False, mean=False):
    """np.var (np.std when sqrt) of arr over the axes ax, after subtracting the first element
    of each reduced slice (Note [Shifted moments]); with mean, also the mean (as pivot + the
    shifted mean). Callers silence NumPy's warnings and floating-point errors."""
    pivot = None
    dtype = arr.dtype
    if dtype.kind == "f" and dtype.itemsize < 4:     # shift in float32, as np.var sums float16
        arr = arr.astype(np.float32)
    if arr.ndim and arr.size:
        axes = range(arr.ndim) if ax is None else (ax if isinstance(ax, tuple) else (ax,))
        axes = {a % arr.ndim for a in axes}
        pivot = arr[tuple(slice(0, 1) if d in axes else slice(None) for d in range(arr.ndim))]
        shifted = arr - pivot
    else:
        shifted = arr
    stat = (np.std if sqrt else np.var)(shifted, axis=ax, ddof=ddof, keepdims=keepdims)
    stat = np.asarray(stat).astype(dtype, copy=False)
    if not mean:
        return stat
    m = np.mean(shifted, axis=ax, keepdims=keepdims)
    if pivot is not None:
        m = m + (pivot if keepdims else pivot.reshape(np.shape(m)))
    return stat, np.asarray(m).astype(dtype, copy=False)


# Note [Shifted moments]
# ~~~~~~~~~~~~~~~~~~~~~~
# torch's var/std kernel is Welford's: a slice of equal values has a variance of exactly 0.
# np.var centres by sum / n, which for equal values can be off by an ulp (three copies of
# arctan(arctan(0.365)) give a std of 5.6e-17), and std's gradient g (x - mean) / (N std)
# is then of order g where torch's is 0 (its std_backward masks std == 0). Subtracting one
# element of each slice first makes equal values exactly 0, so the variance is 0 as
# torch's, and it is the better-conditioned two-pass form in general (the result is the
# same to rounding). Found by the long fuzz run: t59 = t33.maximum(t24) (all t33);
# arctan(arctan(t59)).std(0).


def _centered(x, dims):
    if dims is None:
        return x - x.mean()
    return x - x.mean(dim=dims, keepdim=True)


class Var(Function):
    """var(a, dim, correction).  d/da = g * 2 (a - mean(a)) / (N - correction)."""
    _node_name = "VarBackward0"

    @staticmethod
    def forward(ctx, a, dims, correction, keepdim):
        arr = a._data
        _require_float(arr, "std and var only support floating point and complex dtypes")
        dof = _dof(arr, dims, correction)
        _check_dof("var", arr, dof)
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = (dims, keepdim, dof)
        with _errstate(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return contiguous_result(_moments(arr, _axis(dims, arr.ndim), correction,
                                              keepdim), arr)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dims, keepdim, dof = ctx._aux
        g = _restore(g, x._data.shape, dims, keepdim)
        scale = 2.0 / dof if dof > 0 else _INF
        return _centered(x, dims) * (g * scale), None, None, None


class Std(Function):
    """std = sqrt(var).  d/da = g (a - mean(a)) / ((N - correction) std); 0 where std == 0."""
    _node_name = "StdBackward0"

    @staticmethod
    def forward(ctx, a, dims, correction, keepdim):
        arr = a._data
        _require_float(arr, "std and var only support floating point and complex dtypes")
        dof = _dof(arr, dims, correction)
        _check_dof("std", arr, dof)
        with _errstate(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = contiguous_result(_moments(arr, _axis(dims, arr.ndim), correction,
                                             keepdim, sqrt=True), arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = (dims, keepdim, dof)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim, dof = ctx._aux
        shape = x._data.shape
        g = _restore(g, shape, dims, keepdim)
        res = _restore(out, shape, dims, keepdim)
        # torch's std_backward: the division by a zero std is masked afterwards, not avoided,
        # so a double backward puts NaN where torch's does (a zero gradient into g / 0)
        with _errstate():
            gv = _mask_fill(g / (res * 2.0), res._data == 0, 0.0)
        scale = 2.0 / dof if dof > 0 else _INF
        return _centered(x, dims) * (gv * scale), None, None, None


def _var_args(dim, unbiased, keepdim, correction, ndim):
    if isinstance(dim, (bool, np.bool_)):          # var(unbiased) overload
        if unbiased is not None:
            raise TypeError("var(): unbiased given twice")
        dim, unbiased = None, builtins.bool(dim)
    if unbiased is not None and correction is not None:
        raise TypeError("var() received an invalid combination of arguments - got both "
                        "unbiased and correction")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return _dims(dim, ndim), correction, keepdim


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim(s) with `correction` (default 1, Bessel); `unbiased` as torch."""
    dims, c, k = _var_args(dim, unbiased, keepdim, correction, input._data.ndim)
    return Var.apply(input, dims, c, k)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over dim(s) with `correction` (default 1); `unbiased` as torch."""
    dims, c, k = _var_args(dim, unbiased, keepdim, correction, input._data.ndim)
    return Std.apply(input, dims, c, k)


# ----------------------------------------------------------------------------------------
# logsumexp / softmax / log_softmax
# ----------------------------------------------------------------------------------------
def _lse_keep(arr, ax):
    """log(sum(exp(arr))) over ax with keepdims, stable (max subtracted)."""
    if arr.size == 0:
        m = np.zeros(np.sum(arr, axis=ax, keepdims=True).shape, arr.dtype)
    else:
        m = np.amax(arr, axis=ax, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(arr.dtype)
    with _errstate():
        return np.log(np.sum(np.exp(arr - m), axis=ax, keepdims=True)) + m


class Logsumexp(Function):
    """logsumexp(a, dim, keepdim).  d/da = g * exp(a - out)."""
    _node_name = "LogsumexpBackward0"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        arr = a._data
        ax = _axis(dims, arr.ndim)
        out = _lse_keep(arr, ax)
        if not keepdim:
            out = np.squeeze(out, axis=ax) if arr.ndim else out.reshape(())
        out = contiguous_result(out, arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = (dims, keepdim)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx._aux
        shape = x._data.shape
        return (_restore(g, shape, dims, keepdim)
                * (x - _restore(out, shape, dims, keepdim)).exp()), None, None


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input), dim)) computed stably; integer inputs give the default float."""
    if input._data.dtype.kind in "biu":
        from cgrad._dtype import get_default_dtype
        input = input.to(get_default_dtype())
    return Logsumexp.apply(input, _dims(dim, input._data.ndim), keepdim)


def _check_softmax_input(arr, name):
    if arr.dtype.kind not in "f":
        raise NotImplementedError(
            f'"{name}_lastdim_kernel_impl" not implemented for \'{_tname(arr.dtype)}\'')


class Softmax(Function):
    """softmax(a, dim).  d/da = out * (g - sum(g * out, dim))."""
    _node_name = "SoftmaxBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        _check_softmax_input(arr, "softmax")
        ax = None if arr.ndim == 0 else dim
        if arr.size == 0:
            out = arr.copy()
        else:
            with _errstate():
                if arr.ndim:
                    out = np.subtract(arr, np.amax(arr, axis=ax, keepdims=True))
                    np.exp(out, out=out)
                    out /= _fast_sum(out, ax, True)
                else:
                    out = np.exp(arr - arr)
            out = contiguous_result(out, arr)
        if ctx is not None:
            out = _wrap(np.asarray(out))
            ctx.save_for_backward(out)
            ctx._aux = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        dim = ctx._aux
        if not is_grad_enabled() and out._data.ndim:
            # first order in NumPy, the sum by gemv (Note [Sums by BLAS])
            O = out._data
            gx = g._data * O
            gx = np.subtract(g._data, _fast_sum(gx, dim, True), out=gx)
            gx *= O
            return _wrap(gx), None
        return out * (g - (g * out).sum(dim, keepdim=True)), None


class LogSoftmax(Function):
    """log_softmax(a, dim).  d/da = g - exp(out) * sum(g, dim)."""
    _node_name = "LogSoftmaxBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        _check_softmax_input(arr, "log_softmax")
        ax = None if arr.ndim == 0 else dim
        if arr.size == 0:
            out = arr.copy()
        else:
            with _errstate():
                out = arr - np.amax(arr, axis=ax, keepdims=True)
                out -= np.log(_fast_sum(np.exp(out), ax, True))
            out = contiguous_result(out, arr)
        if ctx is not None:
            out = _wrap(np.asarray(out))
            ctx.save_for_backward(out)
            ctx._aux = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        dim = ctx._aux
        if not is_grad_enabled() and out._data.ndim:
            G = g._data                 # first order in NumPy (Note [Sums by BLAS])
            e = np.exp(out._data)
            e *= _fast_sum(G, dim, True)
            return _wrap(np.subtract(G, e, out=e)), None
        return g - out.exp() * g.sum(dim, keepdim=True), None


def softmax(input, dim, dtype=None):
    """exp(x) / sum(exp(x), dim), computed stably (one SoftmaxBackward0 node)."""
    x = _cast_input(input, dtype)
    return Softmax.apply(x, _one_dim(dim, x._data.ndim))


def log_softmax(input, dim, dtype=None):
    """x - logsumexp(x, dim), computed stably (one LogSoftmaxBackward0 node)."""
    x = _cast_input(input, dtype)
    return LogSoftmax.apply(x, _one_dim(dim, x._data.ndim))


# ----------------------------------------------------------------------------------------
# cumsum / cumprod
# ----------------------------------------------------------------------------------------
def _scan(fn, arr, axis):
    dt = np.int64 if arr.dtype.kind in "bui" else None
    if arr.ndim == 0:
        return np.asarray(arr, dtype=dt).copy()
    return fn(arr, axis=axis, dtype=dt)


class Cumsum(Function):
    """cumsum(a, dim).  d/da = reversed cumsum of g."""
    _node_name = "CumsumBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        if ctx is not None:
            ctx._aux = None if arr.ndim == 0 else dim
        return contiguous_result(_scan(np.cumsum, arr, dim), arr)

    @staticmethod
    def backward(ctx, g):
        axis = ctx._aux
        if axis is None:
            return g, None
        return _rev_cumsum(g, axis), None


class Cumprod(Function):
    """cumprod(a, dim).  d/da_i = sum_{j >= i} g_j prod_{l <= j, l != i} a_l.

    Without zeros: reversed_cumsum(g * out) / a. With zeros, two exact formulas:
    * first backward (grad mode off), O(n) per slice: with k the first zero of the slice,
      positions before k use the formula above, position k gets
      prod_{l<k} a_l * sum_{j>=k} g_j prod_{k<l<=j} a_l, positions after k get 0;
    * create_graph=True (grad mode on): the positions after k are 0 but their derivatives
      are not, so the gradient is built from the full table C[i, j] = prod_{l<=j, l!=i} a_l
      (a cumprod of n copies of a with a_i replaced by 1; O(n^2) per slice, as torch's
      differentiable path), which is differentiable to any order."""
    _node_name = "CumprodBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        out = contiguous_result(_scan(np.cumprod, arr, dim), arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = None if arr.ndim == 0 else dim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axis = ctx._aux
        if axis is None:
            return g, None
        arr = x._data
        zero = arr == 0
        if not zero.any():
            return _rev_cumsum(g * out, axis) / x, None
        if is_grad_enabled():
            return _cumprod_grad_table(x, g, axis), None
        return _cumprod_grad_first_zero(x, out, g, axis), None


def _cumprod_grad_first_zero(x, out, g, axis):
    """Cumprod's gradient with zeros in O(n) (exact values; not for double backward)."""
    arr = x._data
    zero = arr == 0
    n = arr.shape[axis]
    has = zero.any(axis=axis, keepdims=True)
    k = np.where(has, np.argmax(zero, axis=axis, keepdims=True), n)
    pos = np.arange(n).reshape([n if i == axis else 1 for i in range(arr.ndim)])
    before, at = pos < k, pos == k
    # positions before the first zero (or whole slices without zeros)
    a_part = _rev_cumsum(g * out, axis) / _mask_fill(x, ~before, 1.0)
    a_part = _mask_fill(a_part, ~before, 0.0)
    # the first zero itself
    q = Cumprod.apply(_mask_fill(x, pos <= k, 1.0), axis)
    s = _mask_fill(g * q, pos < k, 0.0).sum(axis, keepdim=True)
    prev = Prod.apply(_mask_fill(x, pos >= k, 1.0), (axis,), True)
    b_part = _mask_fill((prev * s)._expand_to(arr.shape), ~at, 0.0)
    return a_part + b_part


def _cumprod_grad_table(x, g, axis):
    """sum_{j >= i} g_j C[i, j] with C[i, j] = prod_{l <= j, l != i} x_l (differentiable)."""
    arr = x._data
    n = arr.shape[axis]
    shape = arr.shape[:axis] + (n,) + arr.shape[axis:]       # new axis `axis` is i
    ii = np.arange(n).reshape([n if d == axis else 1 for d in range(len(shape))])
    jj = np.arange(n).reshape([n if d == axis + 1 else 1 for d in range(len(shape))])
    xt = _mask_fill(x.unsqueeze(axis)._expand_to(shape), ii == jj, 1.0)
    table = Cumprod.apply(xt, axis + 1)
    terms = _mask_fill(g.unsqueeze(axis) * table, jj < ii, 0.0)
    return terms.sum(axis + 1)


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along dim (integer inputs give int64, as torch)."""
    x = _cast_input(input, dtype)
    return Cumsum.apply(x, _one_dim(dim, x._data.ndim))


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along dim; backward exact with zeros (also double backward)."""
    x = _cast_input(input, dtype)
    return Cumprod.apply(x, _one_dim(dim, x._data.ndim))


# ----------------------------------------------------------------------------------------
# nansum / nanmean
# ----------------------------------------------------------------------------------------
class Nansum(Function):
    """nansum(a, dim, keepdim).  d/da = g where a is not NaN, else 0."""
    _node_name = "NansumBackward0"

    @staticmethod
    def forward(ctx, a, dims, keepdim):
        arr = a._data
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = (dims, keepdim)
        dt = np.int64 if arr.dtype.kind in "bui" else None
        return contiguous_result(np.asarray(np.nansum(
            arr, axis=_axis(dims, arr.ndim), keepdims=keepdim, dtype=dt)), arr)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dims, keepdim = ctx._aux
        arr = x._data
        g = _restore(g, arr.shape, dims, keepdim)._expand_to(arr.shape)
        return _mask_fill(g, np.isnan(arr), 0.0), None, None


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero."""
    x = _cast_input(input, dtype)
    return Nansum.apply(x, _dims(dim, x._data.ndim), keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements: nansum / count (a DivBackward0 node, as torch)."""
    x = _cast_input(input, dtype)
    arr = x._data
    if arr.dtype.kind not in "fc":
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {_tname(arr.dtype)}")
    dims = _dims(dim, arr.ndim)
    count = np.sum(~np.isnan(arr), axis=_axis(dims, arr.ndim), keepdims=keepdim,
                   dtype=np.int64)
    return Nansum.apply(x, dims, keepdim) / _wrap(np.asarray(count))


# ----------------------------------------------------------------------------------------
# all / any / count_nonzero (no gradient)
# ----------------------------------------------------------------------------------------
def _logical(input, dim, keepdim, fn):
    arr = input._data
    dims = _dims(dim, arr.ndim)
    out = np.asarray(fn(arr, axis=_axis(dims, arr.ndim), keepdims=keepdim))
    if arr.dtype == np.uint8:
        out = out.astype(np.uint8)
    return _wrap(out)


def all(input, dim=None, keepdim=False):
    """True if every element (over dim(s)) is nonzero; bool (uint8 for uint8 input)."""
    return _logical(input, dim, keepdim, np.all)


def any(input, dim=None, keepdim=False):
    """True if any element (over dim(s)) is nonzero; bool (uint8 for uint8 input)."""
    return _logical(input, dim, keepdim, np.any)


def count_nonzero(input, dim=None):
    """Number of nonzero elements over dim(s) (all when None); int64."""
    arr = input._data
    dims = _dims(dim, arr.ndim)
    return _wrap(np.asarray(np.count_nonzero(arr, axis=_axis(dims, arr.ndim)),
                            dtype=np.int64))


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
_OPS = (prod, max, min, amax, amin, argmax, argmin, var, std, logsumexp, softmax,
        log_softmax, cumsum, cumprod, nansum, nanmean, all, any, count_nonzero)

# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {f.__name__: f for f in _OPS}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {f.__name__: f for f in _OPS}
FUNCTIONS["return_types"] = return_types
