"""Reductions, and sum_to: the one place where broadcast gradients are reduced."""
from __future__ import annotations

import numpy as np

from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result


def _dim_int(d):
    """A dim given as an int-like (NumPy int, 0-d integer tensor); torch's TypeError else."""
    import operator
    try:
        return operator.index(d)
    except TypeError:
        from cgrad._checks import type_name
        raise TypeError(f"argument 'dim' must be int or tuple of ints, not {type_name(d)}") \
            from None


def _norm_dims(dim, ndim, unique=False):
    """dim (an int or ints) as non-negative dims; torch's errors for a bad type, a dim out of
    range and (unique) a dim given twice."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    elif not isinstance(dim, (tuple, list)):
        dim = (_dim_int(dim),)
    out = []
    for d in dim:
        if type(d) is not int:
            d = _dim_int(d)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                f"{max(ndim, 1) - 1}], but got {d})")
        out.append(d % ndim if ndim else 0)
    if unique and len(out) > 1 and len(set(out)) < len(out):
        dup = next(d for i, d in enumerate(out) if d in out[:i])
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return tuple(out)


def _keep_shape(shape, dims):
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


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
        arr = np.sum(arr, axis=axes, keepdims=True)
    if lead:
        arr = arr.reshape(shape)
    return arr


def sum_to(g, shape):
    """Reduce gradient tensor g to `shape` (the inverse of broadcasting); differentiable."""
    shape = tuple(shape)
    if g._data.shape == shape:
        return g
    return SumTo.apply(g, shape)
