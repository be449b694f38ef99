"""Shape ops: reshape/view/expand/clone and a[idx] (torch's indexing rules), views where torch
gives views (reshape of a viewable input, expand, basic indexing). Also accumulate_along, the
fast "add rows at repeated indices" kernel shared with cgrad/ops/indexing.py."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from cgrad._warn import warn as _warn
from cgrad._C import TensorBase
from cgrad.autograd.function import Function


def _infer_shape(shape, numel, fname="view"):
    shape = list(shape)
    for i, s in enumerate(shape):
        if type(s) is not int:
            try:
                shape[i] = s = operator.index(s)
            except TypeError:
                from cgrad._checks import type_name
                raise TypeError(f"{fname}(): argument 'size' must be tuple of ints, but found "
                                f"element of type {type_name(s)} at pos {i}") from None
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if neg:
        rest = int(np.prod([s for s in shape if s != -1]))
        if rest == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because "
                               "the unspecified dimension size -1 can be any value and is "
                               "ambiguous")
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
        return a._data.reshape(_infer_shape(shape, a._data.size, "reshape"))

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


def _expand_shape(arr, shape):
    """torch.expand's target shape (-1 keeps a size), with torch's errors."""
    nd, n = arr.ndim, len(shape)
    if n < nd:
        from cgrad._C import _type_name
        raise RuntimeError(
            f"expand({_type_name(arr)}{{{list(arr.shape)}}}, size={list(shape)}): the number "
            f"of sizes provided ({n}) must be greater or equal to the number of dimensions in "
            f"the tensor ({nd})")
    out = []
    for i, s in enumerate(shape):
        try:
            s = operator.index(s)
        except TypeError:
            from cgrad._checks import type_name
            raise TypeError(f"expand(): argument 'size' (position 1) must be tuple of ints, not "
                            f"{type_name(s)}") from None
        j = i - (n - nd)
        if j < 0:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
        else:
            cur = arr.shape[j]
            if s == -1:
                s = cur
            elif cur != 1 and s != cur:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) must match the existing size "
                    f"({cur}) at non-singleton dimension {i}.  Target sizes: {list(shape)}.  "
                    f"Tensor sizes: {list(arr.shape)}")
            elif s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                                   f"{list(shape)}")
        out.append(s)
    return tuple(out)


class Expand(Function):
    """expand(a, shape): a broadcast view.  d/da = sum_to(g, a.shape)."""
    _node_name = "ExpandBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        out = None
        if -1 not in shape:
            try:
                out = np.broadcast_to(arr, shape)
            except (ValueError, TypeError):
                pass                 # torch's message, or a shape with -1 or odd entries
        if out is None:
            out = np.broadcast_to(arr, _expand_shape(arr, shape))
        if out.size == arr.size:
            # nothing repeated (size-1 dims added or kept): an ordinary view, writable as in
            # torch (broadcast_to is always read-only)
            out = arr.reshape(out.shape)
        return out

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


class UnsafeView(Reshape):
    """reshape that had to copy (non-contiguous input)."""
    _node_name = "UnsafeViewBackward0"


class ViewReshape(Reshape):
    """reshape of a contiguous tensor: a view."""
    _node_name = "ViewBackward0"


def reshape(a, shape):
    """torch.reshape: a view when the input is contiguous, a copy otherwise."""
    arr = a._data
    if arr.flags.c_contiguous:
        return ViewReshape.apply(a, shape)
    # a strided input: a view (torch's _reshape_alias) when the strides allow it, else a copy
    v = arr.view()
    try:
        v.shape = _infer_shape(shape, arr.size)
    except AttributeError:
        return UnsafeView.apply(a, shape)
    return Reshape.apply(a, shape)



# ----------------------------------------------------------------------------------------
# indexing: a[idx] with torch's semantics
# ----------------------------------------------------------------------------------------
# torch applies an index in two steps (torch/csrc/autograd/python_variable_indexing.cpp):
# first the basic items in order (ints select, slices slice, None unsqueezes, Python bools
# unsqueeze and become an index [0] or []), which gives a view; then the tensor items
# (integer arrays, boolean masks) on that view with NumPy's advanced-indexing rules, slices
# of the first step standing as ':' placeholders. The only difference from NumPy is where
# ints sit: NumPy treats an int next to an index array as an index array too, so
# x[1, :, [0, 1]] has shape (2, 3) in NumPy and (3, 2) in torch. Purely basic indices (no
# arrays) give NumPy views and need no translation.

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


_ROWS_MIN_SIZE, _ROWS_MIN_ROW = 1 << 16, 16


def accumulate_along(out, axis, idx, src):
    """out[(:,) * axis + (idx[j],)] += src[(:,) * axis + (j,)] for every j (repeated indices
    add up), for a C-contiguous `out` and a 1-D non-negative integer `idx`.

    np.add.at with a multi-dimensional index runs a slow per-element loop; a 1-D add.at on
    linear indices is ~5x faster, and for large rows a sparse selection-matrix product
    (scipy CSR, m x n) times src is another ~3-10x faster."""
    n = idx.shape[0]
    if n == 0 or src.size == 0:
        return out
    shape = out.shape
    m = shape[axis]
    A = int(np.prod(shape[:axis], dtype=np.int64))
    B = int(np.prod(shape[axis + 1:], dtype=np.int64))
    if (src.size >= _ROWS_MIN_SIZE and A * B >= _ROWS_MIN_ROW and src.dtype == out.dtype
            and out.dtype in (np.float32, np.float64)):
        from scipy import sparse
        sel = sparse.csr_matrix((np.ones(n, dtype=out.dtype), (idx, np.arange(n))),
                                shape=(m, n))
        s3 = src.reshape(A, n, B)
        if A == 1:
            out.reshape(m, B)[...] += sel @ s3.reshape(n, B)
        else:
            s2 = np.ascontiguousarray(s3.transpose(1, 0, 2)).reshape(n, A * B)
            out.reshape(A, m, B)[...] += (sel @ s2).reshape(m, A, B).transpose(1, 0, 2)
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


class _SelectBackward(IndexBackward):
    _node_name = "SelectBackwardBackward0"
    _cg_saves = False     # saves nothing (Note [Freed saved values])


class _SliceBackward(IndexBackward):
    _node_name = "SliceBackwardBackward0"
    _cg_saves = False     # saves nothing (Note [Freed saved values])


Index._bwd = IndexBackward


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


class MaskedFillConst(Function):
    """a with a constant where mask (an ndarray).  d/da = g with zeros where mask."""
    _node_name = "MaskedFillBackward0"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

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
