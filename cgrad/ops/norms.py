"""Norms: ``torch.norm``, ``linalg.vector_norm``, ``linalg.matrix_norm`` (ord 'fro', 'nuc',
+-1, +-2, +-inf) and ``linalg.norm``, composed exactly as torch composes them, so node names
and errors agree (see cgrad/ops/__init__.py for the conventions).

One node per vector norm (``LinalgVectorNormBackward0``; the backward is torch's
norm_backward, with a zero gradient where the norm is 0); matrix norms are built from vector
norms, amax/amin of absolute sums, or singular values (cgrad/ops/decompositions.py).
"""
from __future__ import annotations

import numpy as np
from cgrad.ops.promotion import torch_type_name as _tname
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result
from cgrad.ops.linalg import _check_float, _check_matrix
from cgrad.ops.decompositions import svdvals
from cgrad.ops.linalg import _tn
from cgrad.ops.promotion import _errstate
from cgrad.ops.reductions import (_INF, _axis, _cast_input, _const, _dims, _mask_fill,
                                  _require_float, _restore, _restore_arr)
from cgrad.ops.shape import Permute
from cgrad.ops.shape import _wrap_dim

# ----------------------------------------------------------------------------------------
# norm
# ----------------------------------------------------------------------------------------
class VectorNorm(Function):
    """linalg.vector_norm(a, ord, dim, keepdim); backward as torch's norm_backward, with a
    zero gradient where the norm is 0."""
    _node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, a, p, dims, keepdim):
        arr = a._data
        _require_float(arr, "linalg.vector_norm: Expected a floating point or complex tensor "
                            "as input. Got {}")
        ax = _axis(dims, arr.ndim)
        with _errstate():
            if p == 2:
                out = np.sqrt(np.sum(np.square(arr), axis=ax, keepdims=keepdim))
            elif p == _INF:
                out = np.amax(np.abs(arr), axis=ax, keepdims=keepdim)
            elif p == -_INF:
                out = np.amin(np.abs(arr), axis=ax, keepdims=keepdim)
            elif p == 0:
                out = np.sum(arr != 0, axis=ax, keepdims=keepdim).astype(arr.dtype)
            elif p == 1:
                out = np.sum(np.abs(arr), axis=ax, keepdims=keepdim)
            else:
                out = np.sum(np.abs(arr) ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)
        out = contiguous_result(np.asarray(out, dtype=arr.dtype), arr)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, out)
            ctx._aux = (p, dims, keepdim)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        p, dims, keepdim = ctx._aux
        arr = x._data
        if p == 0:
            return None, None, None, None
        g = _restore(g, arr.shape, dims, keepdim)
        # as torch, x.sgn() is a step of the graph (of zero gradient) for ord 1 and +-inf: a
        # double backward reaches x through it, and so do the hooks upstream of x
        if p == 1:
            return x.sgn() * g, None, None, None
        if abs(p) == _INF:
            a = np.abs(arr)
            res = _restore_arr(out._data, arr.shape, dims)
            mask = (a == res) | np.isnan(a)
            count = np.sum(mask, axis=_axis(dims, arr.ndim), keepdims=True).astype(arr.dtype)
            return x.sgn() * ((g / _const(count)) * _const(mask.astype(arr.dtype))), \
                None, None, None
        # torch's norm_backward, step for step: the same ops in the same order, so a double
        # backward puts NaN and inf where torch's does (its masked_fill after a division by a
        # zero norm passes a zero gradient into that division, and 0 * inf is NaN there)
        res = _restore(out, arr.shape, dims, keepdim)
        rzero = res._data == 0
        with _errstate():
            if p == 2:
                return g * _mask_fill(x / res, rzero, 0.0), None, None, None
            if p < 1:
                scaled = x.sgn() * _mask_fill(x.abs() ** (p - 1), arr == 0, 0.0)
                return scaled * g * res ** (1 - p), None, None, None
            if p < 2:
                scaled = x.sgn() * x.abs() ** (p - 1)
            else:
                scaled = x * x.abs() ** (p - 2)
            return scaled * _mask_fill(g / res ** (p - 1), rzero, 0.0), None, None, None


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: vector p-norm over dim(s) (all when None); p in {'fro', inf, -inf, 0, 1,
    2, any float}. The gradient at a zero norm is 0. As torch, a string p other than 'fro'
    (and 'fro' over more than two dims) is linalg.matrix_norm over dim (all dims when None):
    'nuc' is the nuclear norm."""
    if isinstance(p, str) and (p != "fro" or not (
            dim is None or isinstance(dim, int) or len(dim) <= 2)):
        dims = (list(range(input._data.ndim)) if dim is None else
                [dim] if isinstance(dim, int) else list(dim))
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    p = 2.0 if p is None or p == "fro" else float(p)
    if dtype is not None:
        dtype = np.dtype(dtype)
        if input._data.dtype.kind == "f" and not np.can_cast(input._data.dtype, dtype, "safe"):
            raise RuntimeError(
                f"linalg.vector_norm: the dtype of the input ({_tname(input._data.dtype)}) "
                f"should be convertible without narrowing to the specified dtype "
                f"({_tname(dtype)})")
    x = _cast_input(input, dtype)
    return VectorNorm.apply(x, p, _dims(dim, x._data.ndim), keepdim)


# ----------------------------------------------------------------------------------------
# norms
# ----------------------------------------------------------------------------------------
def _fmt_num(x):
    """A number as torch prints a Scalar in messages (C++ ostream: 2, -1.5, inf)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return str(int(x))
    return f"{float(x):g}"


def _check_norm_dtype(dtype, arr, fn):
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got "
                           f"{_tn(dtype)}")
    if not np.can_cast(arr.dtype, dtype, "safe"):
        raise RuntimeError(f"{fn}: the dtype of the input ({_tn(arr.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({_tn(dtype)})")
    return dtype


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """linalg.vector_norm: the ord-norm of x over dim (all dims when None or ())."""
    from cgrad.ops.reductions import _dims
    if isinstance(ord, (str, type(None), bool)) or not isinstance(ord, (int, float, np.number)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not "
                        f"{type(ord).__name__}")
    arr = x._data
    _check_float(arr, "linalg.vector_norm")
    dt = _check_norm_dtype(dtype, arr, "linalg.vector_norm")
    p = float(ord)
    dims = _dims(dim, arr.ndim)
    if arr.size == 0 and (p < 0 or p == _INF):
        if dims is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {_fmt_num(ord)} norm on "
                               "an empty tensor because the operation does not have an "
                               "identity")
        for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
            if arr.shape[d] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {_fmt_num(ord)} norm on the "
                    f"dimension {d}because this dimension is empty and the operation does "
                    "not have an identity")
    if dt is not None and dt != arr.dtype:
        x = x.to(dt)
    return VectorNorm.apply(x, p, dims, bool(keepdim))


def _matrix_norm_checks(A, dim, dtype, low_precision):
    arr = A._data
    _check_matrix(arr, "linalg.matrix_norm")
    _check_float(arr, "linalg.matrix_norm")
    if not low_precision and arr.dtype == np.float16:
        raise RuntimeError("linalg.matrix_norm: Low precision dtypes not supported. Got Half")
    dim = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    if len(dim) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                           + " ".join(str(d) for d in dim))
    d0, d1 = (_wrap_dim(d, arr.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    return d0, d1, _check_norm_dtype(dtype, arr, "linalg.matrix_norm")


def _backshift(d0, d1, nd):
    """torch's create_dim_backshift_permutation: (other dims..., d0, d1)."""
    return tuple(i for i in range(nd) if i not in (d0, d1)) + (d0, d1)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """linalg.matrix_norm: 'fro', 'nuc', 2/-2 (largest/smallest singular value), 1/-1 (max/min
    column abs-sum), inf/-inf (max/min row abs-sum) over the two dims `dim`."""
    from cgrad.ops.reductions import amax, amin
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
        d0, d1, dt = _matrix_norm_checks(A, dim, dtype, ord != "nuc")
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim, dtype=dtype)
        A_ = A if dt is None or dt == A._data.dtype else A.to(dt)
        perm = _backshift(d0, d1, A._data.ndim)
        res = svdvals(Permute.apply(A_, perm)).sum(-1, keepdim=bool(keepdim))
        if keepdim:
            res = Permute.apply(res.unsqueeze(-1), _inverse(perm))
        return res
    p = float(ord)
    if abs(p) not in (1.0, 2.0, _INF):
        raise RuntimeError(f"linalg.matrix_norm: Order {_fmt_num(ord)} not supported.")
    d0, d1, dt = _matrix_norm_checks(A, dim, dtype, abs(p) != 2.0)

    def max_min(x, d):
        return amax(x, d, bool(keepdim)) if p > 0 else amin(x, d, bool(keepdim))

    if abs(p) == 2.0:
        A_ = A if dt is None or dt == A._data.dtype else A.to(dt)
        perm = _backshift(d0, d1, A._data.ndim)
        res = max_min(svdvals(Permute.apply(A_, perm)), -1)
        if keepdim:
            res = Permute.apply(res.unsqueeze(-1), _inverse(perm))
        return res
    if abs(p) == _INF:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    return max_min(vector_norm(A, 1.0, d0, keepdim, dtype=dtype), d1)


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """linalg.norm: a vector norm (dim an int or 1-tuple, or ord None) or a matrix norm
    (dim a 2-tuple, or ord given for a 2-D input)."""
    if dim is not None:
        dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got [{', '.join(str(d) for d in dims)}]")
    else:
        dims = None
        nd = A._data.ndim
        if ord is not None and nd not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {nd}D.")
    if isinstance(ord, str):
        return matrix_norm(A, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    if ord is not None and ((dims is not None and len(dims) == 2)
                            or (dims is None and A._data.ndim == 2)):
        return matrix_norm(A, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)


linalg_norm.__name__ = linalg_norm.__qualname__ = "norm"


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {"norm": norm}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {"norm": norm}
