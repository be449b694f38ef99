"""Sparse products and reductions: SpMM, SDDMM, sparse @ dense, sum, softmax, segments.

Cost model (nnz stored entries, F dense columns): forward ``A @ B`` is one scipy CSR
product, with the CSR structure built once per index structure (``Pattern``) so that each
call only gathers the values (O(nnz)); backward gives ``B`` the gradient ``A.T @ G`` (the
CSC reading of the same arrays, no transpose copy) and the values the SDDMM
``grad_values[k] = dot(G[row[k]], B[col[k]])`` in O(nnz * F) time and O(nnz) memory (the
compiled kernel in csrc/cg_sparse.c, or chunked NumPy). No N x N dense matrix is built.
Every backward is written with these Functions, so double backward works too.
"""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad.autograd.function import Function
from cgrad.sparse import _kernels
from cgrad.sparse._pattern import Pattern, segment_sum_np
from cgrad.sparse._tensor import (SparseTensor, _make, _pattern_for, _scalar_name,
                                  _SparseCoo, _unsupported, values_of, values_on)

_wrap = _C._wrap
_TensorBase = _C.TensorBase


def _check_dtypes(a_dtype, b_dtype):
    if a_dtype != b_dtype:
        raise RuntimeError(
            f"expected scalar type {_scalar_name(a_dtype)} but found {_scalar_name(b_dtype)}")


def _check_mm_shapes(shape, B):
    n, m = shape
    if B.ndim not in (1, 2):
        raise RuntimeError(f"mat2 must be a matrix or a vector, got a {B.ndim}-D tensor")
    if B.shape[0] != m:
        q = "x" + str(B.shape[1]) if B.ndim == 2 else ""
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({n}x{m} and {B.shape[0]}{q})")


def _check_heads_shapes(shape, H, B):
    n, m = shape
    if B.ndim != 3 or B.shape[0] != m or B.shape[1] != H:
        raise RuntimeError(
            f"spmm: with values of {H} heads, b must have shape [{m}, {H}, F], got "
            f"{list(B.shape)}")


def _product(pattern, vals, B):
    return pattern.product(vals, B)


def _as2d(t):
    return t if t.dim() == 2 else t.unsqueeze(1)


# --------------------------------------------------------------------------------------
# SpMM: (pattern, values) @ b, and SDDMM, its values gradient

class SpMM(Function):
    """spmm(pattern, values, b) = A @ b with A the sparse matrix (pattern, values).

    d/dvalues = sddmm(pattern, g, b); d/db = A.T @ g.
    """
    _node_name = "SpmmBackward0"

    @staticmethod
    def forward(ctx, pattern, values, b):
        V, B = values._data, b._data
        if pattern.ndim != 2:
            raise RuntimeError("spmm: the sparse operand must be 2-D")
        if V.ndim == 2 and V.shape[0] == pattern.nnz:
            _check_heads_shapes(pattern.shape, V.shape[1], B)
        elif V.ndim != 1 or V.shape[0] != pattern.nnz:
            raise RuntimeError(
                f"spmm: values must have shape [{pattern.nnz}] (one per index) or "
                f"[{pattern.nnz}, H] (H heads), got {list(V.shape)}")
        else:
            _check_mm_shapes(pattern.shape, B)
        _check_dtypes(V.dtype, B.dtype)
        if ctx is not None:
            ctx._aux = pattern
            ctx.save_for_backward(values, b)
        return _product(pattern, V, B)

    @staticmethod
    def backward(ctx, g):
        pattern = ctx._aux
        values, b = ctx.saved_tensors
        _, nv, nb = ctx.needs_input_grad
        gv = gb = None
        if nv:
            gv = Sddmm.apply(pattern, g, b) if g.dim() == 3 else \
                Sddmm.apply(pattern, _as2d(g), _as2d(b))
        if nb:
            gb = SpMM.apply(pattern.T(), values, g)
        return None, gv, gb


class Sddmm(Function):
    """sddmm(pattern, G, B)[k] = dot(G[row[k]], B[col[k]]) (sampled dense-dense product);
    per head for 3-D G (n, H, F) and B (m, H, F): (nnz, H).

    d/dG = A(gv) @ B; d/dB = A(gv).T @ G, with A(gv) the sparse matrix (pattern, gv).
    """
    _node_name = "SddmmBackward0"

    @staticmethod
    def forward(ctx, pattern, G, B):
        Ga, Ba = G._data, B._data
        if not (Ga.ndim == Ba.ndim and Ga.ndim in (2, 3)):
            raise RuntimeError("sddmm: G and B must both be 2-D (or 3-D: heads)")
        n, m = pattern.shape
        if Ga.shape[0] != n or Ba.shape[0] != m or Ga.shape[1:] != Ba.shape[1:]:
            want = "xF" if Ga.ndim == 2 else "xHxF"
            raise RuntimeError(
                f"sddmm: for a {n}x{m} pattern G must be {n}{want} and B {m}{want}, got "
                f"{list(Ga.shape)} and {list(Ba.shape)}")
        _check_dtypes(Ga.dtype, Ba.dtype)
        if ctx is not None:
            ctx._aux = pattern
            ctx.save_for_backward(G, B)
        row, col = pattern.rows_cols()
        return _kernels.sddmm(row, col, Ga, Ba)

    @staticmethod
    def backward(ctx, gv):
        pattern = ctx._aux
        G, B = ctx.saved_tensors
        _, ng, nb = ctx.needs_input_grad
        dG = SpMM.apply(pattern, gv, B) if ng else None
        dB = SpMM.apply(pattern.T(), gv, G) if nb else None
        return None, dG, dB


def _to_tensor(x):
    if isinstance(x, _TensorBase):
        return x
    from cgrad._creation import tensor
    return tensor(x)


def spmm(*args):
    """``spmm(indices, values, shape, b)``: the sparse matrix (indices, values, shape) times
    the dense ``b``, differentiable in ``values`` and ``b`` (pyGAT's SpecialSpmm, efficient).

    ``indices``: int (2, nnz) tensor or array (duplicates allowed, any order; never
    coalesced); the CSR structure is built once per indices tensor and cached (weakly), and
    reused only while the tensor's indices are unchanged, however they were changed (a
    NumPy write to a ``from_numpy`` array included: Note [Index cache]). ``indices`` may
    also be a ``cgrad.sparse.Pattern`` (its structure used as is: no lookup, copy or check
    per call; ``shape`` must equal its shape). ``values``: (nnz,) float32/float64;
    ``b``: (M, F) or (M,) of the same dtype (a mismatch raises RuntimeError, as torch). The gradient of
    ``values`` comes back in the caller's entry order.

    Heads: ``values`` of shape (nnz, H) and ``b`` of shape (M, H, F) give (N, H, F), whose
    head h is ``spmm(indices, values[:, h], shape, b[:, h])``: H matrices sharing one
    structure (the heads of graph attention), computed together over the one CSR structure
    of ``indices``. The result, and both gradients, are bit for bit those of the
    block-diagonal (N*H) x (M*H) matrix with entry (i*H + h, j*H + h) = values[k, h] for
    each index (i, j) = indices[:, k], times ``b.reshape(M*H, F)``, without building its
    nnz*H indices.

    ``spmm(sparse, dense)`` (two arguments) is torch.spmm: ``sparse @ dense``.
    """
    if len(args) == 2:
        return mm(*args)
    if len(args) != 4:
        raise TypeError("spmm expects (indices, values, shape, b) or (sparse, dense)")
    indices, values, shape, b = args
    pattern = _pattern_for(indices, shape)
    if pattern.ndim != 2:
        raise RuntimeError("spmm: shape must have 2 dimensions")
    if isinstance(indices, Pattern) and tuple(shape) != pattern.shape:
        raise RuntimeError(f"spmm: shape {list(shape)} does not match the pattern's "
                           f"{list(pattern.shape)}")
    return SpMM.apply(pattern, _to_tensor(values), _to_tensor(b))


def sddmm(indices, G, B, shape=None):
    """``out[k] = dot(G[indices[0, k]], B[indices[1, k]])``, differentiable in G and B.

    ``shape`` defaults to ``(G.shape[0], B.shape[0])``. Heads: G (N, H, F) and B (M, H, F)
    give (nnz, H), ``out[k, h] = dot(G[indices[0, k], h], B[indices[1, k], h])``.
    """
    G, B = _to_tensor(G), _to_tensor(B)
    if shape is None:
        shape = (G.shape[0], B.shape[0])
    return Sddmm.apply(_pattern_for(indices, shape), G, B)


# --------------------------------------------------------------------------------------
# sparse @ dense

class SparseMatMul(Function):
    """a @ b for a 2-D sparse a and a dense 1-D/2-D b (torch.mm / matmul).

    d/db = a.t() @ g.  d/da: for a sparse leaf, the dense ``g @ b.T`` (torch's matmul/mm
    .grad); otherwise (a built from values that need the gradient) the sparse gradient on
    a's coalesced pattern by SDDMM, in O(nnz * F).
    """
    _node_name = "MmBackward0"

    @staticmethod
    def forward(ctx, a, b, sparse_grad):
        if type(a) is not SparseTensor:
            raise TypeError("SparseMatMul: the first operand must be sparse")
        if type(b) is SparseTensor:
            raise _unsupported("mm (sparse @ sparse)")
        p = a._pattern
        if p.ndim != 2:
            raise RuntimeError(f"self must be a matrix, got a {p.ndim}-D sparse tensor")
        B = b._data
        _check_mm_shapes(p.shape, B)
        _check_dtypes(a._vals.dtype, B.dtype)
        if ctx is not None:
            ctx._aux = sparse_grad
            ctx.save_for_backward(a, b)
        return _product(p, a._vals, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad[:2]
        sparse_grad = ctx._aux
        ga = gb = None
        if na:
            g2, b2 = _as2d(g), _as2d(b)
            if not sparse_grad and a.is_leaf:
                ga = g2.matmul(b2.t())
            else:
                cp = a._pattern.coalesced()[0]
                ga = _SparseCoo.apply(cp, Sddmm.apply(cp, g2, b2), True)
        if nb:
            gb = SparseMatMul.apply(a.t(), g, sparse_grad)
        return ga, gb, None


class SparseAddmm(SparseMatMul):
    """torch.sparse.mm(sparse, dense): a sparse gradient on the sparse operand's pattern."""
    _node_name = "SparseAddmmBackward0"


class DenseSparseMatMul(Function):
    """a @ s for a dense 1-D/2-D a and a 2-D sparse s (computed as (s.T @ a.T).T).

    d/da = g @ s.t() (a sparse product); d/ds: dense ``a.T @ g`` for a sparse leaf (torch),
    otherwise the SDDMM on s's coalesced pattern.
    """
    _node_name = "MmBackward0"

    @staticmethod
    def forward(ctx, a, s):
        A = a._data
        p = s._pattern
        if p.ndim != 2:
            raise RuntimeError(f"mat2 must be a matrix, got a {p.ndim}-D sparse tensor")
        if A.ndim not in (1, 2):
            raise RuntimeError(f"self must be a matrix, got a {A.ndim}-D tensor")
        n, m = p.shape
        if A.shape[-1] != n:
            rows = f"{A.shape[0]}x" if A.ndim == 2 else ""
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({rows}{A.shape[-1]} and {n}x{m})")
        _check_dtypes(A.dtype, s._vals.dtype)
        if ctx is not None:
            ctx.save_for_backward(a, s)
        out = _product(p.T(), s._vals, A.T)
        return np.ascontiguousarray(out.T)

    @staticmethod
    def backward(ctx, g):
        a, s = ctx.saved_tensors
        na, ns = ctx.needs_input_grad
        ga = gs = None
        a2 = a if a.dim() == 2 else a.unsqueeze(0)
        g2 = g if g.dim() == 2 else g.unsqueeze(0)
        if na:
            ga = DenseSparseMatMul.apply(g, s.t())
        if ns:
            if s.is_leaf:
                gs = a2.t().matmul(g2)
            else:
                cp = s._pattern.coalesced()[0]
                gs = _SparseCoo.apply(cp, Sddmm.apply(cp, a2.t(), g2.t()), True)
        return ga, gs


def matmul(a, b):
    """matmul / mm / @ when an operand is sparse: sparse @ dense, dense @ sparse."""
    a_sp, b_sp = type(a) is SparseTensor, type(b) is SparseTensor
    if not (a_sp or b_sp):                  # torch.spmm / sparse.mm of two dense tensors
        from cgrad.ops.linalg import mm as dense_mm
        return dense_mm(a, b)
    if a_sp and b_sp:
        raise _unsupported("mm (sparse @ sparse)")
    if a_sp:
        return SparseMatMul.apply(a, b, False)
    return DenseSparseMatMul.apply(a, b)


def mm(mat1, mat2):
    """torch.mm with a sparse operand (dense .grad for a sparse leaf, as torch)."""
    if type(mat2) is not SparseTensor and mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(mat1, mat2)


def sparse_mm(mat1, mat2):
    """torch.sparse.mm: sparse @ dense whose sparse operand gets a *sparse* gradient on its
    (coalesced) pattern, computed by SDDMM in O(nnz * F). dense @ sparse is also accepted."""
    if type(mat1) is SparseTensor and type(mat2) is not SparseTensor:
        if not isinstance(mat2, _TensorBase):
            from cgrad._checks import type_name
            raise TypeError(f"sparse.mm(): argument 'dense' (position 2) must be Tensor, not "
                            f"{type_name(mat2)}")
        if mat2.dim() < 2:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(mat2.dim(), 1)}, {max(mat2.dim(), 1) - 1}], but got 1)")
        return SparseAddmm.apply(mat1, mat2, True)
    return matmul(mat1, mat2)


def _sparse_aware_mm(dense_mm):
    """Wrap cgrad.mm so that a sparse operand dispatches here."""
    def mm_(input, mat2):
        if type(input) is SparseTensor or type(mat2) is SparseTensor:
            return mm(input, mat2)
        return dense_mm(input, mat2)
    mm_.__name__ = "mm"
    mm_.__qualname__ = "mm"
    mm_.__doc__ = getattr(dense_mm, "__doc__", None)
    return mm_


# --------------------------------------------------------------------------------------
# Reductions

class _SumAll(Function):
    """sparse.sum(s): a dense 0-d sum of the values.  d/ds = g on s's coalesced pattern."""
    _node_name = "SumBackward0"

    @staticmethod
    def forward(ctx, s, dense_grad):
        if ctx is not None:
            ctx._aux = (s._pattern, dense_grad)
        return np.asarray(s._vals.sum(dtype=s._vals.dtype if s._vals.dtype.kind in "fc" else None))

    @staticmethod
    def backward(ctx, g):
        pattern, dense_grad = ctx._aux
        if dense_grad:          # Tensor.sum() of a sparse tensor: a dense gradient (torch)
            return g._expand_to(pattern.shape), None
        cp = pattern.coalesced()[0]
        return _SparseCoo.apply(cp, g._expand_to((cp.nnz,)), True), None


class _SumAllDims(_SumAll):
    _node_name = "SparseSumBackward0"


class _SumDim(Function):
    """sparse.sum(s, dim) for a 2-D s: a 1-D sparse tensor of the sums along dim."""
    _node_name = "SparseSumBackward0"

    @staticmethod
    def forward(ctx, s, dim):
        p = s._pattern
        keep = 1 - dim
        key = p.idx[keep]
        uniq, inverse = np.unique(key, return_inverse=True)
        vals = segment_sum_np(s._vals, inverse.reshape(-1), uniq.shape[0])
        if ctx is not None:
            ctx._aux = (p, keep)
        out = Pattern(uniq.reshape(1, -1).astype(np.int64), (p.shape[keep],), canonical=True,
                      check=False)
        return _make(out, vals, True)

    @staticmethod
    def backward(ctx, g):
        p, keep = ctx._aux
        cp = p.coalesced()[0]
        gd = g.to_dense() if type(g) is SparseTensor else g
        return _SparseCoo.apply(cp, gd[cp.idx[keep]], True), None


def sum(input, dim=None, dtype=None):
    """torch.sparse.sum: the sum of all values (dense 0-d), or along ``dim`` (a sparse
    tensor over the remaining dimension; dense 0-d when every dimension is reduced)."""
    if type(input) is not SparseTensor:
        return input.sum() if dim is None else input.sum(dim)
    s = input if dtype is None else input.to(dtype)
    nd = s._pattern.ndim
    if dim is None:
        return _SumAll.apply(s, False)
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    from cgrad.ops._util import _norm_dims
    norm = set(_norm_dims(tuple(dims), nd, True))
    if len(norm) == nd:
        return _SumAllDims.apply(s, False)
    return _SumDim.apply(s, norm.pop())


_sparse_sum = sum      # for callers in this module: a bare `sum` here is this function


def _tensor_sum(s, dim=None, dtype=None):
    """Tensor.sum on a sparse tensor: as torch.sparse.sum, but a full sum (dim=None) gives
    the sparse input a dense gradient, as torch's Tensor.sum does."""
    if dim is None:
        return _SumAll.apply(s if dtype is None else s.to(dtype), True)
    return _sparse_sum(s, dim, dtype)


def _segments(p, dim):
    """(segment id per entry, number of segments) for softmax along dim of pattern p."""
    if p.ndim == 1:
        return np.zeros(p.nnz, dtype=np.int64), 1
    return (p.idx[0], p.shape[0]) if dim == 1 else (p.idx[1], p.shape[1])


def _softmax_np(v, seg, n, log):
    m = segment_max_np(v, seg, n)
    z = v - m[seg]
    e = np.exp(z)
    den = segment_sum_np(e, seg, n)
    if log:
        return z - np.log(den)[seg]
    return e / den[seg]


def _softmax_t(v, seg, n, log):
    """The same as _softmax_np with cgrad ops (for create_graph)."""
    m = _wrap(segment_max_np(v._data, seg, n)[seg])
    z = v - m
    e = z.exp()
    den = SegmentGather.apply(SegmentSum.apply(e, seg, n), seg)
    return z - den.log() if log else e / den


class _Softmax(Function):
    """sparse.softmax(s, dim) of a coalesced s: over the stored entries of each row (dim=1)
    or column (dim=0); unstored entries count as -inf.  Output on s's pattern."""
    _node_name = "SparseSoftmaxBackward0"

    @staticmethod
    def forward(ctx, s, dim, log):
        p = s._pattern
        seg, n = _segments(p, dim)
        y = _softmax_np(s._vals, seg, n, log).astype(s._vals.dtype, copy=False)
        if ctx is not None:
            ctx._aux = (p, seg, n, y, log)
            ctx.save_for_backward(s)
        return _make(p, y, True)

    @staticmethod
    def backward(ctx, g):
        p, seg, n, y, log = ctx._aux
        gv = values_on(p, g)
        if _C.is_grad_enabled():
            s, = ctx.saved_tensors
            yt = _softmax_t(values_of(s), seg, n, log)
        else:
            yt = _wrap(y)
        if log:
            gx = gv - yt.exp() * SegmentGather.apply(SegmentSum.apply(gv, seg, n), seg)
        else:
            t = yt * gv
            gx = t - yt * SegmentGather.apply(SegmentSum.apply(t, seg, n), seg)
        return _SparseCoo.apply(p, gx, True), None, None


class _LogSoftmax(_Softmax):
    _node_name = "SparseLogSoftmaxBackward0"


def _softmax_dispatch(cls, input, dim, dtype, log):
    if type(input) is not SparseTensor:
        raise TypeError("cgrad.sparse.softmax expects a sparse tensor")
    nd = input._pattern.ndim
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {dim})")
    s = input if dtype is None else input.to(dtype)
    if s._vals.dtype.kind != "f":
        raise RuntimeError(f"softmax: expected a floating point tensor, got {s._vals.dtype}")
    return cls.apply(s.coalesce(), dim % nd, log)


def softmax(input, dim, *, dtype=None):
    """torch.sparse.softmax: softmax over the *stored* entries along ``dim`` (unstored
    entries are treated as -inf, so a row's entries sum to 1). The result is coalesced and
    has the input's (coalesced) pattern; dim=1 normalises each row (attention weights)."""
    return _softmax_dispatch(_Softmax, input, dim, dtype, False)


def log_softmax(input, dim, *, dtype=None):
    """torch.sparse.log_softmax (see softmax)."""
    return _softmax_dispatch(_LogSoftmax, input, dim, dtype, True)


# --------------------------------------------------------------------------------------
# Segment reductions (edge -> node), for attention layers

def segment_max_np(v, ids, n):
    """out[s] = max of v[k] over ids[k] == s; -inf (or the dtype's minimum) when empty."""
    if v.dtype.kind == "f":
        fill = -np.inf
    elif v.dtype.kind in "iu":
        fill = np.iinfo(v.dtype).min
    else:
        fill = False
    out = np.full((n,) + v.shape[1:], fill, dtype=v.dtype)
    if ids.shape[0]:
        if ids.shape[0] > 1 and bool(np.all(ids[1:] >= ids[:-1])):
            # sorted ids (row-major edges): one reduceat over the starts of the non-empty
            # segments, O(E), ~5x faster than np.maximum.at
            starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            out[ids[starts]] = np.maximum.reduceat(v, starts, axis=0)
        else:
            np.maximum.at(out, ids, v)
    return out


def _ids(segment_ids, n_values):
    ids = segment_ids._data if isinstance(segment_ids, _TensorBase) else np.asarray(segment_ids)
    if ids.dtype.kind not in "iu":
        raise RuntimeError(f"segment_ids must be an integer tensor, got {ids.dtype}")
    if ids.ndim != 1 or ids.shape[0] != n_values:
        raise RuntimeError(
            f"segment_ids must be 1-D with one id per value row ({n_values}), got shape "
            f"{list(ids.shape)}")
    return ids.astype(np.int64, copy=False)


def _check_ids(ids, n):
    if ids.shape[0] and (ids.min() < 0 or ids.max() >= n):
        raise IndexError(
            f"segment_ids out of range: ids must lie in [0, {n}), got "
            f"[{int(ids.min())}, {int(ids.max())}]")


class SegmentSum(Function):
    """out[s] = sum of values[k] over segment_ids[k] == s (bincount).  d/dvalues = g[ids]."""
    _node_name = "SegmentReduceBackward0"

    @staticmethod
    def forward(ctx, values, ids, n):
        if ctx is not None:
            ctx._aux = (ids, n)
        return segment_sum_np(values._data, ids, n)

    @staticmethod
    def backward(ctx, g):
        ids, n = ctx._aux
        return SegmentGather.apply(g, ids), None, None


class SegmentGather(Function):
    """out[k] = x[ids[k]] (row gather).  d/dx = segment_sum(g, ids, len(x))."""
    _node_name = "IndexSelectBackward0"

    @staticmethod
    def forward(ctx, x, ids):
        X = x._data
        if ctx is not None:
            ctx._aux = (ids, X.shape[0])
        return X.take(ids, axis=0)

    @staticmethod
    def backward(ctx, g):
        ids, n = ctx._aux
        return SegmentSum.apply(g, ids, n), None


def segment_sum(values, segment_ids, num_segments):
    """``out[s] = sum(values[k] for k with segment_ids[k] == s)`` for 1-D or 2-D values
    (rows are summed), ``num_segments`` rows out. Differentiable (backward: a row gather).
    The GAT attention normaliser: ``segment_sum(exp_scores, row, N)``."""
    values = _to_tensor(values)
    ids = _ids(segment_ids, values.shape[0] if values.dim() else -1)
    n = int(num_segments)
    _check_ids(ids, n)
    return SegmentSum.apply(values, ids, n)


def segment_gather(x, segment_ids):
    """``x[segment_ids]`` along the first dimension, with a bincount (segment_sum) backward."""
    x = _to_tensor(x)
    ids = segment_ids._data if isinstance(segment_ids, _TensorBase) else np.asarray(segment_ids)
    ids = ids.astype(np.int64, copy=False)
    _check_ids(ids, x.shape[0])
    return SegmentGather.apply(x, ids)


def segment_max(values, segment_ids, num_segments):
    """``out[s] = max(values[k] for k with segment_ids[k] == s)``; -inf for an empty segment
    (torch.segment_reduce's value). Forward only: the result never requires grad (use it as
    a constant shift, e.g. for a numerically stable softmax, where it cancels)."""
    v = values._data if isinstance(values, _TensorBase) else np.asarray(values)
    ids = _ids(segment_ids, v.shape[0] if v.ndim else -1)
    n = int(num_segments)
    _check_ids(ids, n)
    return _wrap(segment_max_np(v, ids, n))
