"""Matrix products; backward uses BLAS through the same products."""
from __future__ import annotations

import numpy as np

from cgrad.autograd.function import Function


def _check_float_match(a, b, what):
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype} != {b.dtype}")


class Mm(Function):
    """a @ b for 2-D a, b.  d/da = g @ b.T, d/db = a.T @ g."""
    _node_name = "MmBackward0"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        if A.ndim != 2 or B.ndim != 2:
            raise RuntimeError(f"self must be a matrix" if A.ndim != 2 else "mat2 must be a matrix")
        if A.shape[1] != B.shape[0]:
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({A.shape[0]}x{A.shape[1]} and "
                f"{B.shape[0]}x{B.shape[1]})")
        _check_float_match(A, B, "mm")
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return A @ B

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (Mm.apply(g, T.apply(b)) if na else None,
                Mm.apply(T.apply(a), g) if nb else None)


class Mv(Function):
    """a @ v for 2-D a, 1-D v.  d/da = outer(g, v), d/dv = a.T @ g."""
    _node_name = "MvBackward0"

    @staticmethod
    def forward(ctx, a, v):
        _check_float_match(a._data, v._data, "mv")
        if ctx is not None:
            ctx.save_for_backward(a, v)
        return a._data @ v._data

    @staticmethod
    def backward(ctx, g):
        a, v = ctx.saved_tensors
        na, nv = ctx.needs_input_grad
        ga = g.reshape((-1, 1)) * v.reshape((1, -1)) if na else None
        gv = Mv.apply(T.apply(a), g) if nv else None
        return ga, gv


class Dot(Function):
    """dot(a, b) for 1-D a, b.  d/da = g * b, d/db = g * a."""
    _node_name = "DotBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if a._data.shape != b._data.shape:
            raise RuntimeError(
                "inconsistent tensor size, expected tensor [%d] and src [%d] to have the same "
                "number of elements, but got %d and %d elements respectively"
                % (a._data.size, b._data.size, a._data.size, b._data.size))
        _check_float_match(a._data, b._data, "dot")
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return np.asarray(np.dot(a._data, b._data))

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return g * b if na else None, g * a if nb else None


class MatMul(Function):
    """Batched / broadcast matmul (NumPy semantics).  d/da = g @ b^T, d/db = a^T @ g,
    summed over broadcast batch dims by the engine."""
    _node_name = "MatmulBackward0"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        _check_float_match(A, B, "matmul")
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return np.matmul(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        A1, B1 = a.dim() == 1, b.dim() == 1
        aa = a.unsqueeze(0) if A1 else a
        bb = b.unsqueeze(-1) if B1 else b
        gg = g
        if A1:
            gg = gg.unsqueeze(-2)
        if B1:
            gg = gg.unsqueeze(-1)
        ga = gb = None
        if na:
            ga = MatMul.apply(gg, bb.transpose(-1, -2))
            if A1:
                ga = ga.sum(tuple(range(ga.dim() - 2))).reshape(a.shape) if ga.dim() > 2 \
                    else ga.reshape(a.shape)
        if nb:
            gb = MatMul.apply(aa.transpose(-1, -2), gg)
            if B1:
                gb = gb.sum(tuple(range(gb.dim() - 2))).reshape(b.shape) if gb.dim() > 2 \
                    else gb.reshape(b.shape)
        return ga, gb


class T(Function):
    """t(a): transpose of a 0/1/2-D tensor.  d/da = g.t()."""
    _node_name = "TBackward0"

    @staticmethod
    def forward(ctx, a):
        if a._data.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{a._data.ndim}D")
        return a._data.T

    @staticmethod
    def backward(ctx, g):
        return T.apply(g)


class Transpose(Function):
    """transpose(a, d0, d1).  d/da = g.transpose(d0, d1)."""
    _node_name = "TransposeBackward0"

    @staticmethod
    def forward(ctx, a, d0, d1):
        if ctx is not None:
            ctx._aux = (d0, d1)
        return np.swapaxes(a._data, d0, d1)

    @staticmethod
    def backward(ctx, g):
        return Transpose.apply(g, *ctx._aux), None, None


class Unsqueeze(Function):
    """unsqueeze(a, dim).  d/da = g.squeeze(dim)."""
    _node_name = "UnsqueezeBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        nd = a._data.ndim + 1
        if not -nd <= dim < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {dim})")
        if ctx is not None:
            ctx._aux = a._data.shape
        return np.expand_dims(a._data, dim % nd)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


class BatchMatMul(MatMul):
    _node_name = "UnsafeViewBackward0"


class VecMatMul(MatMul):
    _node_name = "SqueezeBackward4"


def matmul(a, b):
    """torch.matmul dispatch: dot, mv, mm or broadcast batched matmul."""
    da, db = a.dim(), b.dim()
    if da == 0 or db == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return Dot.apply(a, b)
    if da == 2 and db == 1:
        return Mv.apply(a, b)
    if da == 2 and db == 2:
        return Mm.apply(a, b)
    if da == 1 and db == 2:
        return VecMatMul.apply(a, b)
    return BatchMatMul.apply(a, b)
