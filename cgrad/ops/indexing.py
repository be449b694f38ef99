"""Indexing: ``a[idx]`` with torch's rules (basic indexing gives views, advanced indexing
copies; its backward and the fast "add rows at repeated indices" kernel accumulate_along),
and masked_fill, masked_select, take, select, nonzero / argwhere; plus the index checks shared
with cgrad/ops/gather_scatter.py (where lives in cgrad/ops/comparison.py, assignment
``a[idx] = v`` in cgrad/ops/inplace.py).

Index arguments may be cgrad integer tensors, NumPy arrays or (more lenient than torch) lists.
Gradients that scatter into zeros add up repeated indices (torch's index_put with
accumulation) through linear indices and a 1-D np.add.at or a sparse selection matrix
(accumulate_along), never NumPy's slow multi-dimensional add.at. Every backward is written
with cgrad ops, so double backward works.
"""
from __future__ import annotations

import math
import os
import operator

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops._util import _norm_dims
import builtins
from cgrad._warn import warn as _warn

_FULL = slice(None)
_C10_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
             "uint8": "unsigned char", "bool": "bool"}


# ----------------------------------------------------------------------------------------
# argument helpers
# ----------------------------------------------------------------------------------------
from cgrad.ops.promotion import torch_type_name as _tname  # noqa: E402


def _dim(d, ndim):
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(d).__name__}") from None
    return _norm_dims(d, ndim)[0]


def _index_arg(index, fn, pos=3):
    """The ndarray of an index argument: a Tensor, an ndarray, a list/tuple or an int."""
    if isinstance(index, TensorBase):
        return index._data
    if isinstance(index, np.ndarray):
        return index
    if isinstance(index, (list, tuple)):
        arr = np.asarray(index)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        return arr
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        return np.asarray(index, dtype=np.int64)
    raise TypeError(f"{fn}(): argument 'index' (position {pos}) must be Tensor, not "
                    f"{type(index).__name__}")


def _check_int_index(idx, msg):
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(msg.format(_tname(idx.dtype)))


def _tensor_arg(x, fn, name, pos):
    if isinstance(x, TensorBase):
        return x
    if isinstance(x, np.ndarray):
        return _wrap(x)
    raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                    f"{type(x).__name__}")


def _linear_index(shape, dim, idx):
    """Flat positions in a C-contiguous array of `shape` of the elements
    out[i_0, ..., idx[i_0, ..., i_n], ..., i_n] (gather/scatter's addressing); idx is
    non-negative with idx.shape[k] <= shape[k] for k != dim."""
    nd = len(shape)
    strides = [1] * nd
    for k in range(nd - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    lin = idx.astype(np.intp, copy=False) * strides[dim] if strides[dim] != 1 \
        else idx.astype(np.intp, copy=True)
    for k in range(nd):
        if k != dim and idx.shape[k] > 1 and strides[k]:
            r = np.arange(idx.shape[k], dtype=np.intp) * strides[k]
            lin = lin + r.reshape((-1,) + (1,) * (nd - k - 1))
    return lin


def _block(arr, shape):
    """arr[:shape[0], :shape[1], ...] (the part an index of `shape` addresses)."""
    if arr.shape == tuple(shape):
        return arr
    return arr[tuple(slice(0, s) for s in shape)]


def _check_bounds(idx, n, dim, exc=RuntimeError):
    if idx.size:
        lo, hi = idx.min(), idx.max()
        if lo < 0 or hi >= n:
            bad = idx[(idx < 0) | (idx >= n)].flat[0]      # the first one, as torch
            raise exc(f"index {int(bad)} is out of bounds for dimension {dim} with size {n}")


def _broadcast_shape(s1, s2):
    """torch's broadcasting with its error message."""
    try:
        return np.broadcast_shapes(s1, s2)
    except ValueError:
        n = max(len(s1), len(s2))
        a = (1,) * (n - len(s1)) + tuple(s1)
        b = (1,) * (n - len(s2)) + tuple(s2)
        for k in range(n - 1, -1, -1):
            if a[k] != b[k] and a[k] != 1 and b[k] != 1:
                raise RuntimeError(f"The size of tensor a ({a[k]}) must match the size of "
                                   f"tensor b ({b[k]}) at non-singleton dimension {k}") from None
        raise


def _pad_to(t, shape):
    """t placed at the start of zeros(shape) (differentiable; t's shape fits in shape)."""
    if tuple(t.shape) == tuple(shape):
        return t
    return IndexBackward.apply(t, tuple(shape), tuple(slice(0, s) for s in t.shape),
                               SliceIndex)


# ----------------------------------------------------------------------------------------
# gather / scatter / scatter_add
# ----------------------------------------------------------------------------------------
def _as_1d(arr):
    return arr.reshape(1) if arr.ndim == 0 else arr


# ----------------------------------------------------------------------------------------
# masked_fill / masked_select
# ----------------------------------------------------------------------------------------
def _check_mask(mask, msg):
    m = mask._data if isinstance(mask, TensorBase) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise RuntimeError(msg.format(_C10_TYPE.get(str(m.dtype), str(m.dtype))))
    return m


class MaskedFill(Function):
    """masked_fill(a, mask, value) for a number value: a (broadcast with mask) with value
    where mask.  d/da = g with zeros where mask (summed to a's shape by the engine)."""
    _node_name = "MaskedFillBackward0"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, mask, value):
        arr = a._data
        shape = _broadcast_shape(mask.shape, arr.shape)
        if ctx is not None:
            ctx._aux = mask
        out = np.array(np.broadcast_to(arr, shape), copy=True, order="C")   # as torch
        np.copyto(out, value, casting="unsafe", where=mask)
        return out

    @staticmethod
    def backward(ctx, g):
        return MaskedFill.apply(g, ctx._aux, 0), None, None


class MaskedFillTensor(Function):
    """masked_fill(a, mask, value) for a 0-d tensor value.  d/da = g with zeros where mask,
    d/dvalue = sum of g where mask."""
    _node_name = "MaskedFillBackward1"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, mask, value):
        arr = a._data
        shape = _broadcast_shape(mask.shape, arr.shape)
        if ctx is not None:
            ctx._aux = mask
        out = np.array(np.broadcast_to(arr, shape), copy=True, order="C")   # as torch
        np.copyto(out, value._data, casting="unsafe", where=mask)
        return out

    @staticmethod
    def backward(ctx, g):
        mask = ctx._aux
        ga, _, gv = ctx.needs_input_grad
        return (MaskedFill.apply(g, mask, 0) if ga else None, None,
                MaskedFill.apply(g, ~mask, 0).sum() if gv else None)


def masked_fill(input, mask, value):
    """A copy of input with value (a number or a 0-d tensor) where the boolean mask (which
    broadcasts with input) is True."""
    m = _check_mask(mask, "masked_fill_ only supports boolean masks, but got mask with dtype "
                          "{}")
    if isinstance(value, TensorBase):
        if value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value._data.ndim} dimension(s).")
        return MaskedFillTensor.apply(input, m, value)
    if isinstance(value, np.ndarray):
        value = value.item()
    if not isinstance(value, (int, float, complex, np.number, np.bool_)):
        from cgrad._checks import type_name
        raise TypeError(f"masked_fill(): argument 'value' (position 2) must be Number or "
                        f"Tensor, not {type_name(value)}")
    return MaskedFill.apply(input, m, value)


class MaskedSelect(Function):
    """masked_select(a, mask): the elements of a (broadcast with mask) where mask, as 1-D.
    d/da = zeros with g put where mask (summed to a's shape by the engine)."""
    _node_name = "MaskedSelectBackward0"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, mask):
        arr = a._data
        shape = _broadcast_shape(mask.shape, arr.shape)
        m = np.broadcast_to(mask, shape)
        if ctx is not None:
            ctx._aux = m
            ctx.save_for_backward(a)    # only for the version check, as torch saves self
        return np.broadcast_to(arr, shape)[m]

    @staticmethod
    def backward(ctx, g):
        ctx.saved_tensors
        return _MaskedScatterZeros.apply(g, ctx._aux), None


class _MaskedScatterZeros(Function):
    """zeros(mask.shape) with g's elements put where mask.  d/dg = masked_select(gg, mask)."""
    _node_name = "MaskedScatterBackward0"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, mask):
        if ctx is not None:
            ctx._aux = mask
        out = np.zeros(mask.shape, dtype=g._data.dtype)
        out[mask] = g._data
        return out

    @staticmethod
    def backward(ctx, gg):
        return MaskedSelect.apply(gg, ctx._aux), None


def masked_select(input, mask):
    """The elements of input where the boolean mask is True, as a 1-D tensor (input and mask
    broadcast)."""
    m = _check_mask(mask, "masked_select: expected BoolTensor for mask")
    return MaskedSelect.apply(input, m)


# ----------------------------------------------------------------------------------------
# take / select / nonzero
# ----------------------------------------------------------------------------------------
class Take(Function):
    """take(a, idx): a.flatten()[idx], shaped as idx.  d/da = put of g (accumulating)."""
    _node_name = "TakeBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, idx):
        arr = a._data
        if ctx is not None:
            ctx._aux = (arr.shape, idx)
            ctx.save_for_backward(a)    # only for the version check, as torch saves self
        return np.take(arr, idx)

    @staticmethod
    def backward(ctx, g):
        shape, idx = ctx._aux
        ctx.saved_tensors
        return _PutZeros.apply(g, shape, idx), None


class _PutZeros(Function):
    """zeros(shape) with g added at the flat positions idx.  d/dg = take(gg, idx)."""
    _node_name = "PutBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, shape, idx):
        if ctx is not None:
            ctx._aux = idx
        out = np.zeros(shape, dtype=g._data.dtype)
        flat = idx.reshape(-1)
        if flat.size and flat.min() < 0:
            flat = np.where(flat < 0, flat + out.size, flat)
        np.add.at(out.reshape(-1), flat, np.broadcast_to(g._data, idx.shape).reshape(-1))
        return out

    @staticmethod
    def backward(ctx, gg):
        return Take.apply(gg, ctx._aux), None, None


def take(input, index):
    """input treated as 1-D, at index (negative indices count from the end); index's shape."""
    idx = _index_arg(index, "take", 2)
    if idx.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{_tname(idx.dtype)}")
    n = input._data.size
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                             f"elements.")
    return Take.apply(input, idx)


def select(input, dim, index):
    """input[(:,) * dim + (index,)]: a view without dim (SelectBackward0)."""
    arr = input._data
    if arr.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _dim(dim, arr.ndim)
    i = int(index.item()) if isinstance(index, TensorBase) else operator.index(index)
    if not -2 ** 63 <= i < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    n = arr.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{list(arr.shape)} at dimension {d}")
    return SelectIndex.apply(input, (_FULL,) * d + (i,))


def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an int64 (n, ndim) tensor, or a tuple of ndim 1-D
    tensors with as_tuple=True (a 0-d input counts as 1-D there)."""
    arr = input._data if isinstance(input, TensorBase) else np.asarray(input)
    if as_tuple:
        return tuple(_wrap(i.astype(np.int64, copy=False))
                     for i in np.nonzero(np.atleast_1d(arr)))
    if arr.ndim == 0:
        return _wrap(np.zeros((1 if arr else 0, 0), dtype=np.int64))
    return _wrap(np.argwhere(arr).astype(np.int64, copy=False))


def argwhere(input):
    """nonzero(input) as an (n, ndim) int64 tensor."""
    return nonzero(input)


def _torch_index_error(e):
    """NumPy's IndexError rephrased as torch's."""
    msg = str(e)
    if msg.startswith("too many indices"):
        nd = msg.split("array is ")[1].split("-dimensional")[0] if "array is " in msg else "?"
        return IndexError(f"too many indices for tensor of dimension {nd}")
    return IndexError(msg.replace(" for axis ", " for dimension "))


def _getitem(arr, idx):
    try:
        out = arr[idx]
    except IndexError as e:
        if arr.ndim == 0 and type(idx) is int:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a "
                             "number") from None
        if arr.ndim == 0 and type(idx) is slice:
            raise IndexError("slice() cannot be applied to a 0-dim tensor.") from None
        raise _torch_index_error(e) from None
    if type(out) is not np.ndarray and isinstance(out, np.generic):
        # an integer in every dimension: NumPy returns a scalar (a copy); torch a 0-d view
        out = arr[(idx if type(idx) is tuple else (idx,)) + (Ellipsis,)]
    return out


class _TorchIndex:
    """An advanced index in torch's order: `pre` (ints, slices, None: a basic index, or None
    for the identity) is applied first, then `post` (':' placeholders and index arrays,
    NumPy's rules) to the result, of shape `vshape`. `row` = (axis, int array) when `post` is
    a single integer array after placeholders (the embedding/gather pattern, which has a fast
    backward); `accumulate` when `post` holds an integer array (repeats add up backward)."""
    __slots__ = ("pre", "post", "accumulate", "row", "vshape")

    def __init__(self, pre, post, accumulate, row):
        self.pre, self.post, self.accumulate, self.row = pre, post, accumulate, row
        self.vshape = None

    def take(self, arr):
        v = _getitem(arr, self.pre) if self.pre is not None else arr
        self.vshape = v.shape
        return _getitem(v, self.post)

    def put(self, g, shape):
        """zeros(shape) with g added at the indexed positions (the backward of take)."""
        vshape = self.vshape
        tmp = np.zeros(vshape, dtype=g.dtype)
        if self.row is not None:
            p, idx = self.row
            n = vshape[p]
            flat = idx.reshape(-1)
            if flat.size and flat.min() < 0:
                flat = np.where(flat < 0, flat + n, flat)
            accumulate_along(tmp, p, flat, g.reshape(vshape[:p] + (flat.size,) + vshape[p + 1:]))
        elif self.accumulate:
            np.add.at(tmp, self.post, g)
        else:
            tmp[self.post] = g
        if self.pre is None:
            return tmp
        out = np.zeros(shape, dtype=g.dtype)
        out[self.pre] = tmp
        return out


_ROWS_MIN_SIZE, _ROWS_MIN_ROW = 1 << 14, 16


def _selection_matrix(idx, m, dtype):
    """The (m, n) CSR matrix with a 1 at (idx[j], j): its rows list the positions j of every
    index in increasing order (a stable argsort of idx), built from indptr directly (a COO
    constructor would sort again)."""
    from scipy import sparse
    n = idx.shape[0]
    indptr = np.zeros(m + 1, dtype=np.intp)
    np.cumsum(np.bincount(idx, minlength=m), out=indptr[1:])
    order = np.argsort(idx, kind="stable")
    return sparse.csr_array((np.ones(n, dtype=dtype), order, indptr), shape=(m, n))


try:
    from cgrad import _sparse as _sparse_ext
except ImportError:  # pragma: no cover - only when the module was not built
    _sparse_ext = None
# the compiled path of _select_rows (CGRAD_NO_SPARSE_EXT=1 selects scipy, as cgrad.sparse)
_SELECT_EXT = _sparse_ext is not None and os.environ.get("CGRAD_NO_SPARSE_EXT", "") in ("", "0")


def _select_rows(idx, m, src2d):
    """_selection_matrix(idx, m) @ src2d: by the compiled counting-sort CSR and SpMM of
    cgrad._sparse when in use (the same CSR, bit for bit scipy's product, without scipy's
    constructor checks: 3x faster at embedding sizes), else by scipy."""
    n = idx.shape[0]
    if _SELECT_EXT and n < 2 ** 31 and m < 2 ** 31:
        perm, ind, indptr, _ = _sparse_ext.csr_build(np.asarray(idx, dtype=np.int64),
                                                     np.arange(n, dtype=np.int64), m, n)
        return _sparse_ext.spmm_csr(indptr, ind, perm, np.ones(n, dtype=src2d.dtype), src2d, n)
    return _selection_matrix(idx, m, src2d.dtype) @ src2d


def accumulate_along(out, axis, idx, src):
    """out[(:,) * axis + (idx[j],)] += src[(:,) * axis + (j,)] for every j (repeated indices
    add up), for a C-contiguous `out` and a 1-D non-negative integer `idx` (< out.shape[axis]).

    np.add.at with a multi-dimensional index runs a slow per-element loop; a 1-D add.at on
    linear indices is ~5x faster, and from ~16K elements of src with rows of 16 or more a
    sparse selection-matrix product (scipy CSR, m x n) times src is another ~2-10x faster.

    Note [Scatter-add order]: every path sums the rows of one index in increasing j, starting
    from +0.0, one addition at a time (np.add.at adds element by element in index order; the
    CSR product accumulates y[i] += 1.0 * src[j] over the row's columns, which the stable
    argsort keeps increasing; 1.0 * x is exact). So the paths agree bitwise with each other
    and with torch's index_add_ / embedding_dense_backward on one thread (sequential in j);
    tests/test_ops_indexing.py pins it (test_scatter_add_paths_are_bitwise_equal)."""
    n = idx.shape[0]
    if n == 0 or src.size == 0:
        return out
    shape = out.shape
    m = shape[axis]
    A = math.prod(shape[:axis])
    B = math.prod(shape[axis + 1:])
    if (src.size >= _ROWS_MIN_SIZE and A * B >= _ROWS_MIN_ROW and src.dtype == out.dtype
            and out.dtype in (np.float32, np.float64)):
        s3 = src.reshape(A, n, B)
        if A == 1:
            out.reshape(m, B)[...] += _select_rows(idx, m, s3.reshape(n, B))
        else:
            s2 = np.ascontiguousarray(s3.transpose(1, 0, 2)).reshape(n, A * B)
            out.reshape(A, m, B)[...] += _select_rows(idx, m, s2).reshape(m, A, B).transpose(
                1, 0, 2)
        return out
    if A == 1 and B == 1:
        lin = idx
    else:
        lin = ((np.arange(A, dtype=np.intp)[:, None, None] * m + idx[None, :, None]) * B
               + np.arange(B, dtype=np.intp)[None, None, :])
    np.add.at(out.reshape(-1), lin.reshape(-1), src.reshape(-1))
    return out


_IDX_TYPES_MSG = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                  "Variables are valid indices (got {})")


def _index_array(it):
    """An ndarray used as an index: int arrays (0-d ones are ints), bool masks; uint8 is a
    mask (torch's deprecated byte mask); anything else is torch's IndexError."""
    k = it.dtype.kind
    if k == "b":
        return it
    if it.dtype == np.uint8:
        _warn("indexing with dtype cgrad.uint8 is now deprecated, please use a dtype "
                      "cgrad.bool instead.", UserWarning)
        return it.astype(np.bool_)
    if k in "iu":
        return int(it) if it.ndim == 0 else it
    if it.size == 0 and k == "f" and it.ndim == 1:
        return it.astype(np.int64)        # x[[]]: an empty list
    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")


def _float_index(arr, from_list):
    """A float list or NumPy array used as an index: torch converts it to int64 (truncating
    toward zero), as an index tensor built from the data; a float *tensor* is refused."""
    if arr.dtype.kind == "c":
        raise TypeError("'complex' object cannot be interpreted as an integer")
    if from_list and arr.dtype != np.float64:       # np.float32 scalars in a list
        raise TypeError(f"'numpy.{arr.dtype.name}' object cannot be interpreted as an "
                        "integer")
    with np.errstate(invalid="ignore"):
        if not (np.isfinite(arr).all() and (np.abs(arr) < 2.0 ** 63).all()):
            raise RuntimeError("value cannot be converted to type int64 without overflow")
    return arr.astype(np.int64)


def float_index_data(idx):
    """idx unchanged, or an int64 array for a list or ndarray of floats (torch's rule:
    x[[0.0, 1.0]] is x[[0, 1]]); for Tensor.__setitem__."""
    if isinstance(idx, np.ndarray):
        if idx.dtype.kind in "fc" and idx.size:
            return _float_index(idx, False)
        return idx
    if type(idx) is list:
        try:
            arr = np.asarray(idx)
        except (ValueError, TypeError):
            return idx
        if arr.dtype.kind in "fc" and arr.size:
            return _float_index(arr, True)
    return idx


def _index_dims(it):
    """Dimensions an index item consumes, as torch counts them (count_specified_dimensions):
    0 for None, Ellipsis and Python bools, a bool or uint8 tensor its ndim, others 1."""
    if it is None or it is Ellipsis or type(it) is bool or type(it) is np.bool_:
        return 0
    arr = it._data if isinstance(it, TensorBase) else it
    if type(arr) is np.ndarray and (arr.dtype == np.bool_ or arr.dtype == np.uint8):
        return arr.ndim
    return 1


def fold_ellipses(items, nd):
    """torch's reading of an index with several Ellipses: each one stands for the nd - k
    dimensions that the other items do not consume (k), so after the first one every later
    Ellipsis points past the last dimension: harmless when nothing but Ellipses follows it
    (or when k == nd), an IndexError otherwise. Returns the items with one Ellipsis."""
    pos = [i for i, it in enumerate(items) if it is Ellipsis]
    if len(pos) <= 1:
        return items
    k = nd - builtins.sum(_index_dims(it) for it in items)
    if k > 0:
        d, r = 0, nd                    # torch's dim pointer and the result's ndim
        for i, it in enumerate(items):
            if it is Ellipsis:
                d += k
                continue
            if i > pos[1]:
                if _index_dims(it) == 0 and it is not Ellipsis:       # None, True, False
                    raise IndexError(f"Dimension out of range (expected to be in range of "
                                     f"[{-(r + 1)}, {r}], but got {d})")
                if isinstance(it, (int, np.integer, slice)):
                    raise IndexError(f"Dimension out of range (expected to be in range of "
                                     f"[{-r}, {r - 1}], but got {d})")
                raise IndexError(f"too many indices for tensor of dimension {r} (got {d + 1})")
            n = _index_dims(it)
            if n == 0:
                r += 1
                d += 1
            elif isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
                r -= 1
            else:
                d += n
    keep = pos[0]
    return type(items)(it for i, it in enumerate(items) if it is not Ellipsis or i == keep)


def _norm_item(it):
    tp = type(it)
    if tp is int or tp is slice or it is None or it is Ellipsis:
        return it
    if tp is bool or tp is np.bool_:
        return np.asarray(it, dtype=np.bool_)
    if isinstance(it, TensorBase):
        return _index_array(it._data)
    if isinstance(it, np.ndarray):
        if it.dtype.kind in "fc" and it.size:
            return _index_array(_float_index(it, False))
        return _index_array(it)
    if isinstance(it, np.integer) or isinstance(it, int):
        return int(it)
    if tp is list or tp is tuple or tp is range:
        try:
            arr = np.asarray(it)
        except (ValueError, TypeError):
            arr = None
        if arr is None or arr.dtype == object:
            raise IndexError(_IDX_TYPES_MSG.format(tp.__name__))
        if arr.dtype.kind in "fc" and arr.size:
            arr = _float_index(arr, True)
        return _index_array(arr)
    if hasattr(tp, "__index__") and not isinstance(it, (float, np.floating)):
        return operator.index(it)
    raise IndexError(_IDX_TYPES_MSG.format(tp.__name__))


def _sequence_as_tuple(seq):
    """torch's treatSequenceAsTuple (NumPy's old heuristic): a list index holding a sequence,
    slice, Ellipsis, None or Tensor is a tuple of indices."""
    if len(seq) >= 32:
        return False
    for it in seq:
        if it is None or it is Ellipsis:
            return True
        if isinstance(it, (TensorBase, list, tuple, slice, np.ndarray)):
            _warn(
                "Using a non-tuple sequence for multidimensional indexing is deprecated and "
                "will be changed in cgrad (as in pytorch 2.9); use x[tuple(seq)] instead of "
                "x[seq].",
                UserWarning)
            return True
    return False


def _consumed(items):
    n = n_ell = 0
    for it in items:
        if it is None:
            continue
        if it is Ellipsis:
            n_ell += 1
        elif type(it) is np.ndarray and it.dtype == np.bool_:
            n += it.ndim
        else:
            n += 1
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    return n


def _too_many(nd):
    return IndexError(f"too many indices for tensor of dimension {nd}")


def _basic_kind(items, shape):
    """The torch node of a basic index: torch applies the items in order and names the node
    after the last one that does something (a full slice does nothing inside a tuple)."""
    nd = len(shape)
    used = _consumed(items)
    if used > nd:
        raise _too_many(nd)
    kind = AliasIndex
    d = 0
    for it in items:
        if it is None:
            kind = UnsqueezeIndex
        elif it is Ellipsis:
            d += nd - used
        elif type(it) is slice:
            if it.indices(shape[d]) != (0, shape[d], 1):
                kind = SliceIndex
            d += 1
        else:
            kind = SelectIndex
            d += 1
    return kind


def _advanced(items, shape):
    """Split an index with arrays into torch's two steps (see _TorchIndex)."""
    nd = len(shape)
    used = _consumed(items)
    if used > nd:
        raise _too_many(nd)
    full = slice(None)
    pre, post = [], []
    has_pre = accumulate = False
    n_arrays = 0
    row = None
    d = 0
    for it in items:
        if it is Ellipsis:
            k = nd - used
            pre += [full] * k
            post += [full] * k
            d += k
        elif it is None:
            pre.append(None)
            post.append(full)
            has_pre = True
        elif type(it) is int:
            pre.append(it)
            has_pre = True
            d += 1
        elif type(it) is slice:
            pre.append(it)
            post.append(full)
            has_pre = has_pre or it != full
            d += 1
        elif it.dtype == np.bool_ and it.ndim == 0:     # x[True]: unsqueeze, index [0] / []
            pre.append(None)
            has_pre = True
            n_arrays += 1
            post.append(np.zeros(1 if it else 0, dtype=np.intp))
        elif it.dtype == np.bool_:
            k = it.ndim
            for j in range(k):
                if it.shape[j] != shape[d + j]:
                    raise IndexError(
                        f"The shape of the mask {list(it.shape)} at index {j} does not match "
                        f"the shape of the indexed tensor {list(shape)} at index {d + j}")
            pre += [full] * k
            post.append(it)
            n_arrays += 1
            d += k
        else:
            pre.append(full)
            if n_arrays == 0:
                row = (len(post), it)
            post.append(it)
            n_arrays += 1
            accumulate = True
            d += 1
    while post and type(post[-1]) is slice:
        post.pop()
    if n_arrays != 1 or (row is not None and row[0] != len(post) - 1):
        row = None
    return _TorchIndex(tuple(pre) if has_pre else None, tuple(post), accumulate, row)


class Index(Function):
    """a[idx] with torch's semantics (see _TorchIndex; a plain NumPy index also works).
    d/da = zeros with g added at idx (repeated indices add up)."""
    _node_name = "IndexBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, idx):
        arr = a._data
        if ctx is not None:
            ctx._aux = (arr.shape, idx)
        if type(idx) is _TorchIndex:
            out = idx.take(arr)
            # torch's result of a contiguous input is contiguous (NumPy's a[:, [0, 1]] is
            # not, and view() would raise on it where torch's works)
            if arr.flags.c_contiguous and not out.flags.c_contiguous:
                out = out.copy(order="C")
            return out
        return _getitem(arr, idx)

    @staticmethod
    def backward(ctx, g):
        shape, idx = ctx._aux
        fwd = ctx._forward_cls
        return fwd._bwd.apply(g, shape, idx, fwd), None


class IndexBackward(Function):
    """Scatter-add g into zeros(shape) at idx (torch's index_put with accumulate=True).
    d/dg = grad[idx]."""
    _node_name = "IndexPutImplBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, shape, idx, fwd=None):
        if ctx is not None:
            ctx._aux = (idx, fwd or Index)
        garr = g._data
        if type(idx) is _TorchIndex:
            return idx.put(garr, shape)
        out = np.zeros(shape, dtype=garr.dtype)
        if _is_basic(idx):
            out[idx] = garr
        else:
            np.add.at(out, idx, garr)
        return out

    @staticmethod
    def backward(ctx, gg):
        idx, fwd = ctx._aux
        return fwd.apply(gg, idx), None, None, None


Index._bwd = IndexBackward


class _SelectBackward(IndexBackward):
    _node_name = "SelectBackwardBackward0"
    _cg_saves = False     # saves nothing (Note [Freed saved values])


class _SliceBackward(IndexBackward):
    _node_name = "SliceBackwardBackward0"
    _cg_saves = False     # saves nothing (Note [Freed saved values])


class SelectIndex(Index):
    _node_name = "SelectBackward0"
    _cg_saves = False     # basic indexing saves nothing (Note [Freed saved values])
    _bwd = _SelectBackward


class SliceIndex(Index):
    _node_name = "SliceBackward0"
    _cg_saves = False     # basic indexing saves nothing (Note [Freed saved values])
    _bwd = _SliceBackward


class UnsqueezeIndex(Index):
    _node_name = "UnsqueezeBackward0"
    _cg_saves = False     # basic indexing saves nothing (Note [Freed saved values])


class AliasIndex(Index):
    _node_name = "AliasBackward0"
    _cg_saves = False     # basic indexing saves nothing (Note [Freed saved values])


def _is_basic(idx):
    items = idx if isinstance(idx, tuple) else (idx,)
    return all(i is None or i is Ellipsis or (isinstance(i, (int, slice, np.integer))
                                              and not isinstance(i, (bool, np.bool_)))
               for i in items)


def index(a, idx):
    """a[idx] with torch's semantics: ints, slices (negative steps allowed, unlike torch),
    None, Ellipsis, bools, boolean masks and integer arrays / lists / tensors. Basic indices
    give views; the node is named as torch's."""
    tp = type(idx)
    if tp is int:
        return SelectIndex.apply(a, idx)
    if tp is slice:
        return SliceIndex.apply(a, idx)
    if tp is not tuple:
        if idx is None:
            return UnsqueezeIndex.apply(a, idx)
        if idx is Ellipsis:
            return AliasIndex.apply(a, idx)
        if tp is list and _sequence_as_tuple(idx):
            idx = tuple(idx)
        else:
            idx = (idx,)
    items = fold_ellipses([_norm_item(it) for it in idx], a._data.ndim)
    shape = a._data.shape
    for it in items:
        if type(it) is np.ndarray:
            return Index.apply(a, _advanced(items, shape))
    items = tuple(items)
    return _basic_kind(items, shape).apply(a, items)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "masked_fill": masked_fill, "masked_select": masked_select, "take": take, "select": select,
    "nonzero": nonzero, "argwhere": argwhere,
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "masked_fill": masked_fill, "masked_select": masked_select, "take": take, "select": select,
    "nonzero": nonzero, "argwhere": argwhere,
}
