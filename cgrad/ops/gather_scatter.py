"""Ops driven by an index tensor along a dim: index_select, index_add, gather /
take_along_dim, scatter (src or value, optional reduce) and scatter_add (see
cgrad/ops/__init__.py for the conventions; the shared index checks live in
cgrad/ops/indexing.py).

Gradients that scatter into zeros add up repeated indices (torch's scatter_add / index_add
with accumulation) through linear indices and a 1-D np.add.at or a sparse selection matrix
(indexing.accumulate_along). Every backward is written with cgrad ops, so double backward
works; the helper nodes a backward creates are named as torch's (GatherBackward0's gradient
is a ScatterAddBackward0 node, IndexSelectBackward0's an IndexAddBackward0 node, ...).
"""
from __future__ import annotations
import numpy as np
from cgrad.ops.promotion import torch_type_name as _tname
from cgrad.ops.indexing import _dim, _tensor_arg
from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops.indexing import (_as_1d, _block, _broadcast_shape, _check_bounds, _index_arg,
                                _linear_index, _pad_to, accumulate_along)


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
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "index_select": index_select, "index_add": index_add, "gather": gather,
    "take_along_dim": take_along_dim, "scatter": scatter, "scatter_add": scatter_add,
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "index_select": index_select, "index_add": index_add, "gather": gather,
    "take_along_dim": take_along_dim, "scatter": scatter, "scatter_add": scatter_add,
}
