"""Shape ops: views where NumPy gives views (reshape, expand, basic indexing)."""
from __future__ import annotations

import numpy as np

from cgrad._C import TensorBase
from cgrad.autograd.function import Function


def _infer_shape(shape, numel):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if neg:
        rest = int(np.prod([s for s in shape if s != -1]))
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // rest
    if int(np.prod(shape)) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


class Reshape(Function):
    """reshape(a, shape).  d/da = g.reshape(a.shape)."""
    _node_name = "ReshapeAliasBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        if ctx is not None:
            ctx._aux = a._data.shape
        return a._data.reshape(_infer_shape(shape, a._data.size))

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


class View(Function):
    """view(a, shape): like reshape but never copies.  d/da = g.reshape(a.shape)."""
    _node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        new = _infer_shape(shape, arr.size)
        out = arr.view()
        try:
            out.shape = new          # raises instead of copying
        except AttributeError:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) "
                "instead.") from None
        return out

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


class Expand(Function):
    """expand(a, shape): a broadcast view.  d/da = sum_to(g, a.shape)."""
    _node_name = "ExpandBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        shape = tuple(arr.shape[i - (len(shape) - arr.ndim)] if s == -1 else s
                      for i, s in enumerate(shape))
        if ctx is not None:
            ctx._aux = arr.shape
        return np.broadcast_to(arr, shape)

    @staticmethod
    def backward(ctx, g):
        from cgrad.ops.reduce import sum_to
        return sum_to(g, ctx._aux), None


class Clone(Function):
    """clone(a).  d/da = g."""
    _node_name = "CloneBackward0"

    @staticmethod
    def forward(ctx, a):
        return a._data.copy()

    @staticmethod
    def backward(ctx, g):
        return g


def _norm_index(idx):
    """Turn Tensors inside an index into ndarrays (NumPy indexing semantics)."""
    if isinstance(idx, TensorBase):
        return idx._data
    if isinstance(idx, tuple):
        return tuple(i._data if isinstance(i, TensorBase) else i for i in idx)
    if isinstance(idx, list):
        return np.asarray(idx)
    return idx


def _is_basic(idx):
    items = idx if isinstance(idx, tuple) else (idx,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice, np.integer))
               for i in items)


class UnsafeView(Reshape):
    """reshape that had to copy (non-contiguous input)."""
    _node_name = "UnsafeViewBackward0"


class ViewReshape(Reshape):
    """reshape of a contiguous tensor: a view."""
    _node_name = "ViewBackward0"


def reshape(a, shape):
    """torch.reshape: a view when the input is contiguous, a copy otherwise."""
    if a._data.flags.c_contiguous:
        return ViewReshape.apply(a, shape)
    return UnsafeView.apply(a, shape)


class Index(Function):
    """a[idx] (basic or advanced).  d/da = zeros with g scattered (added) at idx."""
    _node_name = "IndexBackward0"

    @staticmethod
    def forward(ctx, a, idx):
        arr = a._data
        if ctx is not None:
            ctx._aux = (arr.shape, idx)
        return arr[idx]

    @staticmethod
    def backward(ctx, g):
        shape, idx = ctx._aux
        return IndexBackward.apply(g, shape, idx), None


class IndexBackward(Function):
    """Scatter-add g into zeros(shape) at idx.  d/dg = grad[idx]."""
    _node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, g, shape, idx):
        if ctx is not None:
            ctx._aux = idx
        out = np.zeros(shape, dtype=g._data.dtype)
        if _is_basic(idx):
            out[idx] = g._data
        else:
            np.add.at(out, idx, g._data)
        return out

    @staticmethod
    def backward(ctx, gg):
        return Index.apply(gg, ctx._aux), None, None


class SelectIndex(Index):
    _node_name = "SelectBackward0"


class SliceIndex(Index):
    _node_name = "SliceBackward0"


class UnsqueezeIndex(Index):
    _node_name = "UnsqueezeBackward0"


class AliasIndex(Index):
    _node_name = "AliasBackward0"


def _basic_kind(idx):
    """The torch node of the last step of a basic index (torch applies them in order)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    for it in reversed(items):
        if it is Ellipsis or (isinstance(it, slice) and it == slice(None)):
            continue
        if it is None:
            return UnsqueezeIndex
        if isinstance(it, slice):
            return SliceIndex
        return SelectIndex
    return AliasIndex


def index(a, idx):
    """a[idx] with NumPy semantics; the node is named as torch's last indexing step."""
    idx = _norm_index(idx)
    cls = _basic_kind(idx) if _is_basic(idx) else Index
    return cls.apply(a, idx)


class MaskedFillConst(Function):
    """a with a constant where mask (an ndarray).  d/da = g with zeros where mask."""
    _node_name = "MaskedFillBackward0"

    @staticmethod
    def forward(ctx, a, mask, value):
        if ctx is not None:
            ctx._aux = mask
        out = a._data.copy()
        out[mask] = value
        return out

    @staticmethod
    def backward(ctx, g):
        return MaskedFillConst.apply(g, ctx._aux, 0.0), None, None
