"""Triangles and diagonals of matrices (see cgrad/ops/__init__.py for the conventions): tril,
triu (batched, with torch's `diagonal` argument, and their in-place forms), tril_indices,
triu_indices, diagonal (a view, as torch's), diag (1-D -> matrix, 2-D -> vector), diag_embed
and trace.

Node names are torch's: TrilBackward0, DiagonalBackward0, DiagEmbedBackward0 (also diag of a
vector, which torch computes with diag_embed), DiagonalBackward0_copy (diag of a matrix: a
copy of the diagonal), TraceBackward0. The backward of diagonal is a Function of its own
(torch's diagonal_backward: zeros with the gradient on the diagonal, named
DiagonalBackwardBackward0 under create_graph=True) whose backward is diagonal again, so every
order of derivative works.
"""
from __future__ import annotations

import numpy as np

from cgrad import _checks
from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops.pointwise import _inplace_method
from cgrad.ops.promotion import torch_type_name
from cgrad.ops.shape import _wrap_dim


def _check_tensor(x, fn, name="input", pos=1):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{_checks.type_name(x)}")


def _int_arg(v, fn, name, pos):
    if isinstance(v, (bool, np.bool_)) or isinstance(v, TensorBase):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be int, not "
                        f"{_checks.type_name(v)}")
    return _checks.check_int(v, fn, name, pos)


# ----------------------------------------------------------------------------------------
# tril / triu
# ----------------------------------------------------------------------------------------
class Tril(Function):
    """tril(a, k): the elements on and below the k-th diagonal of the last two dims.
    d/da = tril(g, k)."""
    _node_name = "TrilBackward0"
    _np = staticmethod(np.tril)
    _name = "tril"

    @classmethod
    def _forward(cls, ctx, a, k):
        x = a._data
        if x.ndim < 2:
            raise RuntimeError(f"{cls._name}: input tensor must have at least 2 dimensions")
        if ctx is not None:
            ctx._aux = k
        return cls._np(x, k)

    @staticmethod
    def forward(ctx, a, k):
        return Tril._forward(ctx, a, k)

    @staticmethod
    def backward(ctx, g):
        return Tril.apply(g, ctx._aux), None


class Triu(Tril):
    """triu(a, k): the elements on and above the k-th diagonal.  d/da = triu(g, k)."""
    _node_name = "TriuBackward0"
    _np = staticmethod(np.triu)
    _name = "triu"

    @staticmethod
    def forward(ctx, a, k):
        return Triu._forward(ctx, a, k)

    @staticmethod
    def backward(ctx, g):
        return Triu.apply(g, ctx._aux), None


def tril(input, diagonal=0):
    """Returns the lower triangular part of the matrix (or batch of matrices) input: the
    elements on and below the given diagonal (0: the main diagonal, > 0 above it, < 0 below
    it); the others are 0."""
    _check_tensor(input, "tril")
    return Tril.apply(input, _int_arg(diagonal, "tril", "diagonal", 2))


def triu(input, diagonal=0):
    """Returns the upper triangular part of the matrix (or batch of matrices) input: the
    elements on and above the given diagonal; the others are 0."""
    _check_tensor(input, "triu")
    return Triu.apply(input, _int_arg(diagonal, "triu", "diagonal", 2))


def _indices(fn, upper, row, col, offset, dtype, layout, device, pin_memory, requires_grad):
    row = _int_arg(row, fn, "row", 1)
    col = _int_arg(col, fn, "col", 2)
    offset = _int_arg(offset, fn, "offset", 3)
    dt = np.dtype(np.int64) if dtype is None else _checks.dtype_of(dtype, fn)
    _checks.check_device(device, fn)
    if layout is not None and not str(layout).endswith("strided"):
        raise NotImplementedError(f"Could not run 'aten::{fn}' with arguments from the "
                                  f"'{layout}' backend: only the strided layout is supported")
    if pin_memory:
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                           "pinned memory allocator is available on this system.")
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    if dt not in (np.dtype(np.int64), np.dtype(np.int32)):
        raise NotImplementedError(f"\"{fn}\" not implemented for '{torch_type_name(dt)}'")
    if requires_grad:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    r, c = np.nonzero((np.triu if upper else np.tril)(np.ones((row, col), dtype=bool), offset))
    return _wrap(np.stack([r, c]).astype(dt))


def tril_indices(row, col, offset=0, *, dtype=None, layout=None, device=None,
                 pin_memory=False, requires_grad=False):
    """Returns the indices of the lower triangular part of a row-by-col matrix (on and below
    the offset diagonal) as a 2-by-N tensor: row indices, then column indices, ordered by
    row then column."""
    return _indices("tril_indices", False, row, col, offset, dtype, layout, device,
                    pin_memory, requires_grad)


def triu_indices(row, col, offset=0, *, dtype=None, layout=None, device=None,
                 pin_memory=False, requires_grad=False):
    """Returns the indices of the upper triangular part of a row-by-col matrix (on and above
    the offset diagonal) as a 2-by-N tensor: row indices, then column indices, ordered by
    row then column."""
    return _indices("triu_indices", True, row, col, offset, dtype, layout, device,
                    pin_memory, requires_grad)


# ----------------------------------------------------------------------------------------
# diagonal, its backward, diag_embed, diag, trace
# ----------------------------------------------------------------------------------------
def _diag_dims(nd, dim1, dim2):
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diagonal_view(x, offset, d1, d2):
    """np.diagonal (torch's layout: the diagonal last), a writable view as torch's unless its
    elements overlap (the diagonal of an expanded tensor is writable when its elements are
    distinct, as in torch: np.broadcast_to's read-only flag is lifted for it)."""
    out = np.diagonal(x, offset, d1, d2)
    if any(st == 0 and n > 1 for n, st in zip(out.shape, out.strides)):
        return out
    try:
        out.flags.writeable = True
    except ValueError:          # memory that is read-only itself (a read-only buffer)
        pass
    return out


class Diagonal(Function):
    """diagonal(a, offset, dim1, dim2): a view.  d/da = diagonal_backward(g) (zeros with g on
    that diagonal)."""
    _node_name = "DiagonalBackward0"

    @staticmethod
    def forward(ctx, a, offset, dim1, dim2):
        x = a._data
        d1, d2 = _diag_dims(x.ndim, dim1, dim2)
        if ctx is not None:
            ctx._aux = (x.shape, offset, d1, d2)
        return _diagonal_view(x, offset, d1, d2)

    @staticmethod
    def backward(ctx, g):
        shape, offset, d1, d2 = ctx._aux
        return DiagonalBackward.apply(g, shape, offset, d1, d2), None, None, None


class DiagonalCopy(Diagonal):
    """diag(a) of a matrix: a copy of the diagonal."""
    _node_name = "DiagonalBackward0_copy"

    @staticmethod
    def forward(ctx, a, offset, dim1, dim2):
        return Diagonal.forward(ctx, a, offset, dim1, dim2).copy()


class DiagonalBackward(Function):
    """torch's diagonal_backward(g, shape, offset, dim1, dim2): zeros of `shape` with g on the
    diagonal.  d/dg = diagonal(gg, offset, dim1, dim2)."""
    _node_name = "DiagonalBackwardBackward0"

    @staticmethod
    def forward(ctx, g, shape, offset, d1, d2):
        if ctx is not None:
            ctx._aux = (offset, d1, d2)
        out = np.zeros(shape, dtype=g._data.dtype)
        view = np.diagonal(out, offset, d1, d2)
        view.flags.writeable = True
        view[...] = g._data
        return out

    @staticmethod
    def backward(ctx, gg):
        offset, d1, d2 = ctx._aux
        return Diagonal.apply(gg, offset, d1, d2), None, None, None, None


class DiagEmbed(Function):
    """diag_embed(a, offset, dim1, dim2): the last dim of a on the diagonal of two new dims.
    d/da = diagonal(g, offset, dim1, dim2)."""
    _node_name = "DiagEmbedBackward0"

    @staticmethod
    def forward(ctx, a, offset, dim1, dim2):
        x = a._data
        nd = x.ndim + 1
        d1, d2 = _diag_dims(nd, dim1, dim2)
        if ctx is not None:
            ctx._aux = (offset, d1, d2)
        n = (x.shape[-1] if x.ndim else 1) + abs(offset)
        rest = list(x.shape[:-1])
        shape = []
        for d in range(nd):
            shape.append(n if d in (d1, d2) else rest.pop(0))
        out = np.zeros(shape, dtype=x.dtype)
        view = np.diagonal(out, offset, d1, d2)
        view.flags.writeable = True
        view[...] = x
        return out

    @staticmethod
    def backward(ctx, g):
        offset, d1, d2 = ctx._aux
        return Diagonal.apply(g, offset, d1, d2), None, None, None


class Trace(Function):
    """trace(a): the sum of the main diagonal of a matrix (integers sum to int64).
    d/da = g on the diagonal, 0 elsewhere."""
    _node_name = "TraceBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        if x.ndim != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
        if x.dtype.kind == "b":
            raise NotImplementedError("\"trace\" not implemented for 'Bool'")
        if ctx is not None:
            ctx._aux = x.shape
        dt = np.int64 if x.dtype.kind in "iu" else x.dtype
        return np.asarray(np.trace(x, dtype=dt))

    @staticmethod
    def backward(ctx, g):
        shape = ctx._aux
        k = min(shape)
        return DiagonalBackward.apply(g.expand(k), shape, 0, 0, 1)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """Returns a view of input with the diagonal elements with respect to dim1 and dim2
    appended as a last dimension (offset: 0 the main diagonal, > 0 above it, < 0 below)."""
    _check_tensor(input, "diagonal")
    return Diagonal.apply(input, _int_arg(offset, "diagonal", "offset", 2),
                          _int_arg(dim1, "diagonal", "dim1", 3),
                          _int_arg(dim2, "diagonal", "dim2", 4))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Creates a tensor whose diagonals (with respect to dim1 and dim2, at offset) are filled
    by the last dimension of input; the other elements are 0."""
    _check_tensor(input, "diag_embed")
    return DiagEmbed.apply(input, _int_arg(offset, "diag_embed", "offset", 2),
                           _int_arg(dim1, "diag_embed", "dim1", 3),
                           _int_arg(dim2, "diag_embed", "dim2", 4))


def diag(input, diagonal=0):
    """For a 1-D input, the square matrix with input on the given diagonal; for a 2-D input,
    the 1-D tensor of its elements on the given diagonal (a copy)."""
    _check_tensor(input, "diag")
    k = _int_arg(diagonal, "diag", "diagonal", 2)
    nd = input._data.ndim
    if nd == 1:
        return DiagEmbed.apply(input, k, 0, 1)
    if nd == 2:
        return DiagonalCopy.apply(input, k, 0, 1)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")


def trace(input):
    """Returns the sum of the elements of the main diagonal of the 2-D input."""
    _check_tensor(input, "trace")
    return Trace.apply(input)


def _tri_(fn, name):
    def inplace(input, diagonal=0):
        if input._data.ndim < 2:      # before the overlap checks, as torch
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return fn(input, diagonal)
    inplace.__name__ = name
    return _inplace_method(inplace, saves_self=False)


FUNCTIONS: dict = {
    "tril": tril, "triu": triu, "tril_indices": tril_indices, "triu_indices": triu_indices,
    "diagonal": diagonal, "diag": diag, "diag_embed": diag_embed, "trace": trace,
}

TENSOR_METHODS: dict = {
    "tril": tril, "triu": triu, "diagonal": diagonal, "diag": diag, "diag_embed": diag_embed,
    "trace": trace, "tril_": _tri_(tril, "tril"), "triu_": _tri_(triu, "triu"),
}
