"""Indexing ops with index tensors: index_select, gather / take_along_dim, scatter (src or
value, optional reduce), scatter_add, index_add, masked_fill, masked_select, take, select,
nonzero / argwhere. (a[idx] itself lives in cgrad/ops/shape.py; where in binary.py.)

Index arguments may be cgrad integer tensors, NumPy arrays or (more lenient than torch) lists.
Gradients that scatter into zeros add up repeated indices (torch's index_put / scatter_add /
index_add with accumulation), through linear indices and a 1-D np.add.at or a sparse
selection matrix (shape.accumulate_along), never NumPy's slow multi-dimensional add.at.

Every backward is written with cgrad ops, so double backward works; the helper nodes that
backward creates are named as torch's (GatherBackward0's gradient is a ScatterAddBackward0
node, IndexSelectBackward0's an IndexAddBackward0 node, ...).
"""
from __future__ import annotations

import operator

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops.reduce import _norm_dims
from cgrad.ops.shape import (IndexBackward, SelectIndex, SliceIndex, accumulate_along)

_FULL = slice(None)
_C10_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
             "uint8": "unsigned char", "bool": "bool"}


# ----------------------------------------------------------------------------------------
# argument helpers
# ----------------------------------------------------------------------------------------
from cgrad.ops.binary import torch_type_name as _tname  # noqa: E402


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
# index_select / index_add
# ----------------------------------------------------------------------------------------
class IndexSelect(Function):
    """index_select(a, dim, idx) for a 1-D non-negative idx (0-d a is viewed as 1-D).
    d/da = index_add of g into zeros."""
    _node_name = "IndexSelectBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, dim, idx, out_shape=None):
        arr = a._data
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
        if arr.ndim == 0:
            return arr.reshape(1)[idx].reshape(out_shape)
        return np.take(arr, idx, axis=dim)

    @staticmethod
    def backward(ctx, g):
        shape, dim, idx = ctx._aux
        return _IndexAddZeros.apply(g, shape, dim, idx), None, None, None


class _IndexAddZeros(Function):
    """zeros(shape) with g's slices along dim added at idx.  d/dg = index_select(gg)."""
    _node_name = "IndexAddBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, shape, dim, idx):
        garr = g._data
        if ctx is not None:
            ctx._aux = (dim, idx, garr.shape)
        out = np.zeros(shape if shape else (1,), dtype=garr.dtype)
        accumulate_along(out, dim, idx, garr.reshape(out.shape[:dim] + (idx.size,)
                                                     + out.shape[dim + 1:]))
        return out.reshape(shape)

    @staticmethod
    def backward(ctx, gg):
        dim, idx, gshape = ctx._aux
        return IndexSelect.apply(gg, dim, idx, gshape), None, None, None


def index_select(input, dim, index):
    """The slices input[(:,) * dim + (i,)] for i in index (a 1-D or 0-d int tensor)."""
    arr = input._data
    idx = _index_arg(index, "index_select")
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _dim(dim, arr.ndim)
    n = arr.shape[d] if arr.ndim else 1
    flat = idx.reshape(-1)
    if arr.ndim == 0 and flat.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                         f"{flat.size} value(s)")
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        raise IndexError("index out of range in self")
    return IndexSelect.apply(input, d, flat, ())


class IndexAdd(Function):
    """index_add(a, dim, idx, src, alpha): a copy of a with alpha * src's slices added at idx.
    d/da = g, d/dsrc = alpha * index_select(g, dim, idx)."""
    _node_name = "IndexAddBackward0"

    @staticmethod
    def forward(ctx, a, dim, idx, src, alpha):
        arr, s = a._data, src._data
        if ctx is not None:
            ctx._aux = (dim, s.shape, alpha)
            if ctx.needs_input_grad[3]:     # as torch: index and source for source's gradient
                ctx.save_for_backward(_wrap(idx), src)
        out = np.array(arr, copy=True, order="C").reshape(arr.shape if arr.ndim else (1,))
        if alpha != 1:
            s = s * alpha
        accumulate_along(out, dim, idx, np.asarray(s, dtype=out.dtype).reshape(
            out.shape[:dim] + (idx.size,) + out.shape[dim + 1:]))
        return out.reshape(arr.shape)

    @staticmethod
    def backward(ctx, g):
        dim, sshape, alpha = ctx._aux
        ga, _, _, gs, _ = ctx.needs_input_grad
        gsrc = None
        if gs:
            idx = ctx.saved_tensors[0]._data
            gsrc = IndexSelect.apply(g, dim, idx, sshape)
            if tuple(gsrc.shape) != tuple(sshape):
                gsrc = gsrc.reshape(sshape)
            if alpha != 1:
                gsrc = gsrc * alpha
        return (g if ga else None), None, None, gsrc, None


def index_add(input, dim, index, source, *, alpha=1):
    """A copy of input with alpha * source[(:,) * dim + (j,)] added at slice index[j] along
    dim (repeated indices add up)."""
    arr = input._data
    source = _tensor_arg(source, "index_add", "source", 4)
    src = source._data
    idx = _index_arg(index, "index_add")
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_tname(idx.dtype)}")
    if idx.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{idx.ndim} with type: {_tname(idx.dtype)} and size: "
                         f"{list(idx.shape)}")
    d = _dim(dim, arr.ndim)
    if src.dtype != arr.dtype:
        raise RuntimeError(f"index_add_(): self ({_tname(arr.dtype)}) and source "
                           f"({_tname(src.dtype)}) must have the same scalar type")
    flat = idx.reshape(-1)
    ss = src.shape if src.ndim else (1,)
    if arr.ndim and src.ndim:
        if src.ndim != arr.ndim or any(ss[k] != arr.shape[k] for k in range(arr.ndim)
                                       if k != d):
            raise RuntimeError(
                f"source tensor shape must match self tensor shape, excluding the specified "
                f"dimension. Got self.shape = {list(arr.shape)} source.shape = "
                f"{list(src.shape)}")
    elif arr.ndim == 0 and src.ndim:
        raise RuntimeError(
            f"source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(arr.shape)} source.shape = {list(src.shape)}")
    if flat.size != ss[d if src.ndim else 0]:
        raise RuntimeError(f"index_add_(): Number of indices ({flat.size}) should be equal to "
                           f"source.size(dim): ({ss[d if src.ndim else 0]}), for dim: {d}")
    _check_bounds(flat, arr.shape[d] if arr.ndim else 1, d)
    return IndexAdd.apply(input, d, flat, source, alpha)


# ----------------------------------------------------------------------------------------
# gather / scatter / scatter_add
# ----------------------------------------------------------------------------------------
def _as_1d(arr):
    return arr.reshape(1) if arr.ndim == 0 else arr


class Gather(Function):
    """gather(a, dim, idx): out[i][j] = a[i][idx[i][j]] (dim 1).  d/da = scatter_add of g."""
    _node_name = "GatherBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, dim, idx):
        arr = a._data
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
            ctx.save_for_backward(a)    # only for the version check, as torch saves self
        if arr.ndim == 0 or idx.ndim == 0:
            return _as_1d(arr)[idx]
        src = _block(arr, tuple(
            s if k == dim else idx.shape[k] for k, s in enumerate(arr.shape)))
        return np.take_along_axis(src, idx, axis=dim)

    @staticmethod
    def backward(ctx, g):
        shape, dim, idx = ctx._aux
        ctx.saved_tensors
        return _ScatterAddZeros.apply(g, shape, dim, idx), None, None


class _ScatterAddZeros(Function):
    """zeros(shape) with g scatter-added at idx along dim (gather's gradient).
    d/dg = gather(gg, dim, idx)."""
    _node_name = "ScatterAddBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, shape, dim, idx):
        garr = g._data
        if ctx is not None:
            ctx._aux = (dim, idx)
        out = np.zeros(shape, dtype=garr.dtype)
        if not shape:
            np.add.at(out.reshape(1), idx.reshape(-1), garr.reshape(-1))
            return out
        np.add.at(out.reshape(-1), _linear_index(shape, dim, idx).reshape(-1),
                  np.broadcast_to(garr, idx.shape).reshape(-1))
        return out

    @staticmethod
    def backward(ctx, gg):
        dim, idx = ctx._aux
        return Gather.apply(gg, dim, idx), None, None, None


def _gather_index(fn, arr, dim, index, what="self", src=None):
    idx = _index_arg(index, fn)
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index")
    d = _dim(dim, arr.ndim)
    if arr.ndim == 0 or idx.ndim == 0:
        if arr.ndim > 1 or idx.ndim > 1:
            raise RuntimeError(f"Index tensor must have the same number of dimensions as "
                               f"{what} tensor")
        _check_bounds(idx, arr.shape[0] if arr.ndim else 1, d)
        return d, idx
    if idx.ndim != arr.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} "
                           f"tensor")
    for k in range(arr.ndim):
        if fn == "gather":
            if k != d and idx.shape[k] > arr.shape[k]:
                raise RuntimeError(
                    f"Size does not match at dimension {k} expected index {list(idx.shape)} to "
                    f"be no larger than self {list(arr.shape)} apart from dimension {d}")
        else:
            bad = (k != d and idx.shape[k] > arr.shape[k]) or (
                src is not None and src.ndim == idx.ndim and idx.shape[k] > src.shape[k])
            if bad:
                msg = (f"Expected index {list(idx.shape)} to be no larger than self "
                       f"{list(arr.shape)} apart from dimension {d}")
                if src is not None:
                    msg += f" and to be no larger size than src {list(src.shape)}"
                raise RuntimeError(msg)
    _check_bounds(idx, arr.shape[d], d)
    return d, idx


def gather(input, dim, index, *, sparse_grad=False):
    """out[i][j][k] = input[index[i][j][k]][j][k] (dim 0), ... along dim; index has input's
    number of dims and is no larger than input outside dim."""
    d, idx = _gather_index("gather", input._data, dim, index, what="input")
    return Gather.apply(input, d, idx)


def take_along_dim(input, indices, dim=None):
    """gather with broadcasting of input and indices outside dim (flattened when dim is
    None)."""
    idx = _index_arg(indices, "take_along_dim", 2)
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError("cgrad.take_along_dim(): dtype of indices should be int but got "
                           f"{idx.dtype}")
    if dim is None:
        return gather(input.reshape(-1), 0, idx.reshape(-1))
    arr = input._data
    d = _dim(dim, arr.ndim)
    if idx.ndim != arr.ndim:
        raise RuntimeError("cgrad.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {arr.ndim} dimensions for input, "
                           f"and {idx.ndim} dimensions for indices")
    a_shape = list(arr.shape)
    i_shape = list(idx.shape)
    a_shape[d] = i_shape[d] = 1
    b = list(_broadcast_shape(tuple(a_shape), tuple(i_shape)))
    ta, ti = list(b), list(b)
    ta[d], ti[d] = arr.shape[d], idx.shape[d]
    if tuple(ta) != arr.shape:
        input = input._expand_to(tuple(ta))
    if tuple(ti) != idx.shape:
        idx = np.broadcast_to(idx, tuple(ti))
    return gather(input, d, idx)


class Scatter(Function):
    """scatter(a, dim, idx, src): a copy of a with src written at idx.
    d/da = g with zeros at idx; d/dsrc = gather(g, dim, idx) (zero-padded to src's shape)."""
    _node_name = "ScatterBackward0"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, dim, idx, src):
        arr, s = a._data, src._data
        if ctx is not None:
            ctx._aux = (dim, idx, s.shape)
        out = np.array(arr, copy=True, order="C")
        flat = out.reshape(-1)
        if arr.ndim == 0:
            flat[idx.reshape(-1)] = s.reshape(-1)[:idx.size]
        else:
            flat[_linear_index(arr.shape, dim, idx).reshape(-1)] = \
                _block(s, idx.shape).reshape(-1)
        return out

    @staticmethod
    def backward(ctx, g):
        dim, idx, sshape = ctx._aux
        _, _, _, gs = ctx.needs_input_grad
        ga = ScatterValue.apply(g, dim, idx, 0)
        gsrc = _pad_to(Gather.apply(g, dim, idx), sshape) if gs else None
        return ga, None, None, gsrc


class ScatterValue(Function):
    """scatter(a, dim, idx, value): a copy of a with a number written at idx.
    d/da = g with zeros at idx."""
    _node_name = "ScatterBackward1"
    _cg_saves = True      # torch saves the index (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, dim, idx, value):
        arr = a._data
        if ctx is not None:
            ctx._aux = (dim, idx)
        out = np.array(arr, copy=True, order="C")
        flat = out.reshape(-1)
        lin = idx.reshape(-1) if arr.ndim == 0 else _linear_index(arr.shape, dim, idx)
        flat[lin.reshape(-1)] = value
        return out

    @staticmethod
    def backward(ctx, g):
        dim, idx = ctx._aux
        return ScatterValue.apply(g, dim, idx, 0), None, None, None


class ScatterReduce(Function):
    """scatter(a, dim, idx, src_or_value, reduce='add'|'multiply'). torch has no derivative
    for it: the backward raises torch's error."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, a, dim, idx, src, reduce):
        arr = a._data
        out = np.array(arr, copy=True, order="C")
        flat = out.reshape(-1)
        lin = (idx.reshape(-1) if arr.ndim == 0
               else _linear_index(arr.shape, dim, idx).reshape(-1))
        if isinstance(src, TensorBase):
            vals = _block(src._data, idx.shape).reshape(-1) if arr.ndim else \
                src._data.reshape(-1)[:idx.size]
        else:
            vals = np.full(lin.shape, src, dtype=arr.dtype)
        (np.add if reduce == "add" else np.multiply).at(flat, lin, vals.astype(arr.dtype))
        return out

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::scatter is not implemented")


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with src (a tensor, or a number) written at index along dim:
    out[i][index[i][j]] = src[i][j] (dim 1). reduce='add'/'multiply' combines instead (not
    differentiable, as torch)."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    arr = input._data
    s = src._data if isinstance(src, TensorBase) else None
    if isinstance(src, np.ndarray):
        src, s = _wrap(src), src
    d, idx = _gather_index("scatter", arr, dim, index, src=s)
    if s is not None and s.dtype != arr.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        return ScatterReduce.apply(input, d, idx, src, reduce)
    if s is None:
        if not isinstance(src, (int, float, np.number, np.bool_)):
            raise TypeError(f"scatter(): argument 'src' must be Tensor or Number, not "
                            f"{type(src).__name__}")
        return ScatterValue.apply(input, d, idx, src)
    return Scatter.apply(input, d, idx, src)


class ScatterAdd(Function):
    """scatter_add(a, dim, idx, src): a copy of a with src added at idx (repeats add up).
    d/da = g, d/dsrc = gather(g, dim, idx) (zero-padded to src's shape)."""
    _node_name = "ScatterAddBackward0"

    @staticmethod
    def forward(ctx, a, dim, idx, src):
        arr, s = a._data, src._data
        if ctx is not None:
            ctx._aux = (dim, s.shape)
            if ctx.needs_input_grad[3]:     # as torch: the index only for src's gradient
                ctx.save_for_backward(_wrap(idx))
        out = np.array(arr, copy=True, order="C")
        if arr.ndim == 0:
            np.add.at(out.reshape(1), idx.reshape(-1), s.reshape(-1)[:idx.size])
        else:
            np.add.at(out.reshape(-1), _linear_index(arr.shape, dim, idx).reshape(-1),
                      _block(s, idx.shape).reshape(-1))
        return out

    @staticmethod
    def backward(ctx, g):
        dim, sshape = ctx._aux
        ga, _, _, gs = ctx.needs_input_grad
        gsrc = None
        if gs:
            idx = ctx.saved_tensors[0]._data
            gsrc = _pad_to(Gather.apply(g, dim, idx), sshape)
        return (g if ga else None), None, None, gsrc


def scatter_add(input, dim, index, src):
    """A copy of input with src added at index along dim: out[i][index[i][j]] += src[i][j]
    (dim 1); repeated indices add up."""
    src = _tensor_arg(src, "scatter_add", "src", 4)
    arr = input._data
    d, idx = _gather_index("scatter", arr, dim, index, src=src._data)
    if src._data.dtype != arr.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    return ScatterAdd.apply(input, d, idx, src)


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


_OPS = {
    "index_select": index_select, "index_add": index_add, "gather": gather,
    "take_along_dim": take_along_dim, "scatter": scatter, "scatter_add": scatter_add,
    "masked_fill": masked_fill, "masked_select": masked_select, "take": take,
    "select": select, "nonzero": nonzero, "argwhere": argwhere,
}

# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = dict(_OPS)
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = dict(_OPS)
