"""Sorting and selection by order (see cgrad/ops/__init__.py for the conventions).

sort, argsort, msort, topk, kthvalue, median and nanmedian (all, or along a dim with
indices), mode, quantile and nanquantile.

Gradients (all as torch):
* the ops that return indices (sort, topk, kthvalue, median/nanmedian/mode along a dim) send
  the gradient to the returned index (torch's value_selecting_reduction_backward: a scatter
  into zeros, whose own gradient is a gather, so double backward works);
* median() and nanmedian() without dim split it evenly among the elements equal to the
  result (the NaNs when the result is NaN), as max();
* quantile and nanquantile are composites, as torch's: a sort, gathers of the values below
  and above each rank and a lerp between them (the gradient also reaches a q tensor that
  requires grad, through the weights); their last node is torch's SqueezeBackward4.

NaN is the greatest value for every order here (torch's and NumPy's convention); median()
and median(dim) return NaN when a slice holds one (at the first NaN's index), nanmedian
ignores NaNs.

Which of several equal elements is returned is torch's (Note [Tie order] in
cgrad/ops/_tie_order.py): sort(stable=True), median and nanmedian keep the order of equal
elements; sort(stable=False), topk, kthvalue and mode follow torch's CPU algorithms.
"""
from __future__ import annotations

import builtins

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops import _tie_order
from cgrad.ops.gather_scatter import Gather
from cgrad.ops.promotion import _errstate
from cgrad.ops.reductions import (_EvenReduce, _ScatterAlong, _const, _mask_fill, _one_dim,
                                  _return_type)
from cgrad.ops.shape import Squeeze

sort_type = _return_type("sort")
topk_type = _return_type("topk")
kthvalue_type = _return_type("kthvalue")
median_type = _return_type("median")
nanmedian_type = _return_type("nanmedian")
mode_type = _return_type("mode")


# ----------------------------------------------------------------------------------------
# helpers: slices along a dim as rows
# ----------------------------------------------------------------------------------------
def _rows(arr, dim):
    """arr with `dim` moved last, as a C-contiguous (m, n) array, and the moved shape."""
    moved = np.moveaxis(arr, dim, -1)
    m = int(np.prod(moved.shape[:-1], dtype=np.int64))
    return np.ascontiguousarray(moved).reshape(m, moved.shape[-1]), moved.shape


def _unrows(x, moved_shape, dim):
    """The inverse of _rows for an (m, n') array: n' along `dim`."""
    return np.moveaxis(x.reshape(moved_shape[:-1] + (x.shape[-1],)), -1, dim)


def _isnan(a):
    return np.isnan(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)


def _equivalent(a, b):
    """a == b elementwise, NaN equivalent to NaN (the orders' equivalence)."""
    eq = a == b
    if a.dtype.kind in "fc":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


def _stable_order(rows, descending):
    """The stable order of each row, NaN greatest (ascending: NaN last)."""
    if not descending:
        return np.argsort(rows, axis=1, kind="stable")
    n = rows.shape[1]
    return n - 1 - np.argsort(rows[:, ::-1], axis=1, kind="stable")[:, ::-1]


def _port_rows(rows, which, fn):
    """Apply a port of Note [Tie order] to the rows `which` (indices); False when over the
    budget or when the port leaves its slice (the caller keeps the stable order)."""
    if len(which) * rows.shape[1] > _tie_order.BUDGET:
        return False
    out = {}
    try:
        for r in which:
            out[int(r)] = fn(rows[r].tolist())
    except _tie_order.Unguarded:
        return False
    return out


def _sort_order(rows, descending, stable):
    order = _stable_order(rows, descending)
    n = rows.shape[1]
    if not stable and n > 16 and rows.shape[0]:
        s = np.take_along_axis(rows, order, 1)
        tied = np.nonzero(_equivalent(s[:, 1:], s[:, :-1]).any(axis=1))[0]
        fixed = _port_rows(rows, tied, lambda v: _tie_order.sort_order(v, descending))
        for r, o in (fixed or {}).items():
            order[r] = o
    return order


def _check_sortable(arr, name):
    if arr.dtype.kind == "c":
        raise RuntimeError(f"{name}(): input tensor must be real (complex tensors are not "
                           "supported)")


def _sort_indices(arr, dim, descending, stable):
    """int64 indices that sort arr along dim (arr.ndim >= 1)."""
    rows, moved = _rows(arr, dim)
    return _unrows(_sort_order(rows, descending, stable).astype(np.int64), moved, dim)


# ----------------------------------------------------------------------------------------
# sort / argsort / msort
# ----------------------------------------------------------------------------------------
class Sort(Function):
    """sort(a, dim, descending) -> (values, indices).  d/da = scatter of g at the indices."""
    _node_name = "SortBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, dim, descending, stable):
        arr = a._data
        if arr.ndim == 0:
            if ctx is not None:
                ctx._aux = None
            return arr.copy(), np.zeros((), np.int64)
        idx = _sort_indices(arr, dim, descending, stable)
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
        return np.take_along_axis(arr, idx, dim), idx.copy()

    @staticmethod
    def backward(ctx, gv, gi=None):
        if ctx._aux is None:
            return gv, None, None, None
        shape, dim, idx = ctx._aux
        return _ScatterAlong.apply(gv, idx, dim, shape), None, None, None


class SortStable(Sort):
    """sort with the `stable` argument given (torch's sort.stable)."""
    _node_name = "SortBackward1"


def sort(input, dim=-1, descending=False, *, stable=None):
    """Sorts the elements of input along dim by value (NaN greatest); stable=True keeps the
    order of equal elements. Returns (values, indices)."""
    arr = input._data
    _check_sortable(arr, "sort")
    d = _one_dim(dim, arr.ndim)
    cls = Sort if stable is None else SortStable
    return sort_type(*cls.apply(input, d, builtins.bool(descending), builtins.bool(stable)))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim (sort(...).indices); int64, no gradient."""
    arr = input._data
    _check_sortable(arr, "sort")
    d = _one_dim(dim, arr.ndim)
    if arr.ndim == 0:
        return _wrap(np.zeros((), np.int64))
    return _wrap(_sort_indices(arr, d, builtins.bool(descending), builtins.bool(stable)))


def msort(input):
    """Sorts input along its first dimension (sort(input, dim=0).values)."""
    _check_sortable(input._data, "sort")
    return Sort.apply(input, 0, False, False)[0]


# ----------------------------------------------------------------------------------------
# topk
# ----------------------------------------------------------------------------------------
def _topk_order(rows, k, largest, sorted):
    m, n = rows.shape
    order = _stable_order(rows, largest)
    if k == 0 or m == 0:
        return order[:, :k]
    top = order[:, :k].copy()
    if not sorted and k > 1 and k * 64 > n:
        need = np.arange(m)                     # nth_element's own order
    else:
        s = np.take_along_axis(rows, order[:, :builtins.min(k + 1, n)], 1)
        need = np.nonzero(_equivalent(s[:, 1:], s[:, :-1]).any(axis=1))[0]
    fixed = _port_rows(rows, need, lambda v: _tie_order.topk_order(v, k, largest, sorted))
    for r, o in (fixed or {}).items():
        top[r] = o
    return top


class Topk(Function):
    """topk(a, k, dim, largest, sorted) -> (values, indices).  d/da = scatter of g."""
    _node_name = "TopkBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, k, dim, largest, sorted):
        arr = a._data
        if arr.ndim == 0:
            if ctx is not None:
                ctx._aux = None
            return arr.copy(), np.zeros((), np.int64)
        rows, moved = _rows(arr, dim)
        idx = _unrows(_topk_order(rows, k, largest, sorted).astype(np.int64), moved, dim)
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
        return np.take_along_axis(arr, idx, dim), idx.copy()

    @staticmethod
    def backward(ctx, gv, gi=None):
        if ctx._aux is None:
            return gv, None, None, None, None
        shape, dim, idx = ctx._aux
        return _ScatterAlong.apply(gv, idx, dim, shape), None, None, None, None


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (largest=False: smallest) elements of input along dim, and their
    indices; NaN counts as the greatest value."""
    arr = input._data
    if arr.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    _check_sortable(arr, "topk")
    d = _one_dim(dim, arr.ndim)
    k = _int_arg(k, "topk", "k", 2)
    n = arr.shape[d] if arr.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    return topk_type(*Topk.apply(input, k, d, builtins.bool(largest), builtins.bool(sorted)))


def _int_arg(v, fn, name, pos):
    if isinstance(v, TensorBase) and v._data.ndim == 0 and v._data.dtype.kind in "iu":
        v = int(v._data)
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
        from cgrad._checks import type_name
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be int, not "
                        f"{type_name(v)}")
    return int(v)


# ----------------------------------------------------------------------------------------
# one element per slice with its index: kthvalue, median/nanmedian(dim), mode
# ----------------------------------------------------------------------------------------
class _Selection(Function):
    """(values, indices) of one element picked in each slice along dim by `_pick(rows, *args)`
    (an index per row).  d/da = scatter of g at the indices (into zeros)."""
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])
    _name = ""

    @classmethod
    def _select(cls, ctx, a, dim, keepdim, *args):
        arr = a._data
        if arr.ndim == 0:
            if ctx is not None:
                ctx._aux = None
            return arr.copy(), np.zeros((), np.int64)
        rows, moved = _rows(arr, dim)
        idx = _unrows(cls._pick(rows, *args).astype(np.int64).reshape(-1, 1), moved, dim)
        if ctx is not None:
            ctx._aux = (arr.shape, dim, idx)
        vals = np.take_along_axis(arr, idx, dim)
        if not keepdim:
            vals, idx = np.squeeze(vals, dim), np.squeeze(idx, dim)
        return vals, idx.copy()

    @staticmethod
    def _bwd(ctx, gv):
        if ctx._aux is None:
            return gv
        shape, dim, idx = ctx._aux
        if gv._data.ndim != len(shape):
            gv = gv.unsqueeze(dim)
        return _ScatterAlong.apply(gv, idx, dim, shape)


def _check_nonempty_dim(name, arr, d):
    if arr.ndim and arr.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


class Kthvalue(_Selection):
    _node_name = "KthvalueBackward0"

    @staticmethod
    def _pick(rows, k):
        order = _stable_order(rows, False)
        idx = order[:, k - 1].copy()
        if rows.shape[0]:
            kth = np.take_along_axis(rows, idx[:, None], 1)
            tied = np.nonzero(_equivalent(rows, kth).sum(axis=1) > 1)[0]
            fixed = _port_rows(rows, tied, lambda v: _tie_order.kth_index(v, k))
            for r, i in (fixed or {}).items():
                idx[r] = i
        return idx

    @staticmethod
    def forward(ctx, a, k, dim, keepdim):
        return Kthvalue._select(ctx, a, dim, keepdim, k)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return Kthvalue._bwd(ctx, gv), None, None, None


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element of each slice of input along dim, and its index."""
    arr = input._data
    _check_sortable(arr, "kthvalue")
    _check_dtype(arr, "kthvalue_cpu")
    d = _one_dim(dim, arr.ndim)
    k = _int_arg(k, "kthvalue", "k", 2)
    _check_nonempty_dim("kthvalue", arr, d)
    n = arr.shape[d] if arr.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return kthvalue_type(*Kthvalue.apply(input, k, d, keepdim))


def _check_dtype(arr, kernel):
    if arr.dtype == np.bool_:
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def _median_pos(rows, ignore_nan):
    """The position in the stable ascending order of each row's (nan)median."""
    n = rows.shape[1]
    valid = n - _isnan(rows).sum(axis=1)
    if ignore_nan:
        return np.maximum((valid - 1) // 2, 0)
    return np.where(valid < n, valid, (n - 1) // 2)      # a NaN: the first one


class MedianDim(_Selection):
    _node_name = "MedianBackward1"
    _nan = False

    @classmethod
    def _pick(cls, rows):
        order = _stable_order(rows, False)
        pos = _median_pos(rows, cls._nan)
        return np.take_along_axis(order, pos[:, None], 1)[:, 0]

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        return MedianDim._select(ctx, a, dim, keepdim)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return MedianDim._bwd(ctx, gv), None, None


class NanmedianDim(MedianDim):
    _node_name = "NanmedianBackward1"
    _nan = True

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        return NanmedianDim._select(ctx, a, dim, keepdim)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return NanmedianDim._bwd(ctx, gv), None, None


class MedianAll(_EvenReduce):
    """median() of all elements (the lower of the two middle values); ties share the
    gradient evenly (torch's evenly_distribute_backward)."""
    _node_name = "MedianBackward0"
    _nan_ties = True
    _ignore_nan = False

    @classmethod
    def _value(cls, arr):
        flat = arr.reshape(1, -1)
        if flat.size == 0:
            if arr.dtype.kind in "fc":
                return np.full((), np.nan, arr.dtype)
            return np.full((), np.iinfo(arr.dtype).min if arr.dtype.kind == "i" else 0,
                           arr.dtype)
        order = _stable_order(flat, False)
        pos = _median_pos(flat, cls._ignore_nan)[0]
        return flat[0, order[0, pos]].copy().reshape(())

    @staticmethod
    def forward(ctx, a):
        out = MedianAll._value(a._data)
        return _save_even(ctx, a, out)

    @staticmethod
    def backward(ctx, g):
        return MedianAll._bwd(ctx, g)


class NanmedianAll(MedianAll):
    _node_name = "NanmedianBackward0"
    _ignore_nan = True

    @staticmethod
    def forward(ctx, a):
        out = NanmedianAll._value(a._data)
        return _save_even(ctx, a, out)

    @staticmethod
    def backward(ctx, g):
        return NanmedianAll._bwd(ctx, g)


def _save_even(ctx, a, out):
    out = np.asarray(out)
    if ctx is not None:
        out = _wrap(out)
        ctx.save_for_backward(a, out)
        ctx._aux = (None, False)
    return out


def _median(input, dim, keepdim, name, all_cls, dim_cls, rtype):
    arr = input._data
    _check_sortable(arr, name)
    _check_dtype(arr, "median_cpu" if dim is None else "median_out")
    if dim is None:
        return all_cls.apply(input)
    d = _one_dim(dim, arr.ndim)
    _check_nonempty_dim("median", arr, d)        # (torch's message for nanmedian too)
    return rtype(*dim_cls.apply(input, d, keepdim))


def median(input, dim=None, keepdim=False):
    """The lower median of all elements of input (NaN if there is one), or with dim the
    median of each slice along dim and its index: (values, indices)."""
    return _median(input, dim, keepdim, "median", MedianAll, MedianDim, median_type)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaNs (NaN only for a slice of NaNs); with dim: (values, indices)."""
    return _median(input, dim, keepdim, "nanmedian", NanmedianAll, NanmedianDim,
                   nanmedian_type)


# ----------------------------------------------------------------------------------------
# mode
# ----------------------------------------------------------------------------------------
class Mode(_Selection):
    """mode(a, dim, keepdim): the most frequent value of each slice (the smallest of the
    most frequent ones) and an index of it (torch's: Note [Tie order])."""
    _node_name = "ModeBackward0"

    @staticmethod
    def _pick(rows):
        m, n = rows.shape
        order = _stable_order(rows, False)
        s = np.take_along_axis(rows, order, 1)
        step = s[:, 1:] != s[:, :-1]                       # NaN != NaN: a run each
        pos = np.arange(n)
        start = np.maximum.accumulate(
            np.where(np.concatenate([np.ones((m, 1), bool), step], 1), pos, 0), axis=1)
        end = np.minimum.accumulate(
            np.where(np.concatenate([step, np.ones((m, 1), bool)], 1), pos, n)[:, ::-1],
            axis=1)[:, ::-1]
        length = end - start + 1
        best = np.argmax(length, axis=1)                   # the first (smallest) longest run
        last = np.take_along_axis(end, best[:, None], 1)[:, 0]
        idx = np.take_along_axis(order, last[:, None], 1)[:, 0]
        run = np.take_along_axis(length, best[:, None], 1)[:, 0]
        nan = _isnan(rows).any(axis=1)
        need = np.nonzero(nan | ((run > 1) & (n > 16)))[0]
        fixed = _port_rows(rows, need, lambda v: _tie_order.mode_of(v)[1])
        for r, i in (fixed or {}).items():
            idx[r] = i
        return idx

    @staticmethod
    def forward(ctx, a, dim, keepdim):
        return Mode._select(ctx, a, dim, keepdim)

    @staticmethod
    def backward(ctx, gv, gi=None):
        return Mode._bwd(ctx, gv), None, None


def mode(input, dim=-1, keepdim=False):
    """The most frequent value of each slice of input along dim (the smallest of them on
    a tie in frequency) and the index of one occurrence."""
    arr = input._data
    _check_sortable(arr, "mode")
    d = _one_dim(dim, arr.ndim)
    _check_nonempty_dim("mode", arr, d)
    return mode_type(*Mode.apply(input, d, keepdim))


# ----------------------------------------------------------------------------------------
# quantile / nanquantile (composites, as torch's)
# ----------------------------------------------------------------------------------------
class _Lerp(Function):
    """a + w (b - a), computed as torch's lerp (from b when w >= 0.5).
    d/da = g (1 - w), d/db = g w, d/dw = g (b - a)."""
    _node_name = "LerpBackward1"

    @staticmethod
    def forward(ctx, a, b, w):
        A, B, W = a._data, b._data, w._data
        if ctx is not None:
            ctx.save_for_backward(a, b, w)
        with _errstate():
            d = B - A
            return np.where(W < 0.5, A + W * d, B - d * (1 - W)).astype(A.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, b, w = ctx.saved_tensors
        na, nb, nw = ctx.needs_input_grad
        return (g * (1 - w) if na else None, g * w if nb else None,
                g * (b - a) if nw else None)


class _SqueezeLast(Squeeze):
    """The last squeeze of quantile (torch's in-place squeeze_ of its result)."""
    _node_name = "SqueezeBackward4"


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_q(input, q):
    """q as an array of the input's dtype, and the tensor (or None for a number)."""
    arr = input._data
    if isinstance(q, TensorBase):
        return q._data, q
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, (int, float, np.number)):
        from cgrad._checks import type_name
        raise TypeError(f"quantile() received an invalid combination of arguments - got "
                        f"q of type {type_name(q)}")
    if not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {float(q):g}")
    return np.asarray(q, dtype=arr.dtype if arr.dtype.kind == "f" else np.float64), None


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    arr = input._data
    qarr, qt = _quantile_q(input, q)
    if arr.size == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if qarr.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if arr.dtype not in (np.float32, np.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if qarr.dtype != arr.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
    d = None if dim is None else _one_dim(dim, arr.ndim)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if not ((qarr >= 0) & (qarr <= 1)).all():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    # the reduced shape (torch's quantile_output_shape, without q's dim)
    if d is None:
        rest = (1,) * arr.ndim if keepdim else ()
        xs = input.reshape(-1)
    elif arr.ndim == 0:
        rest, xs = (), input.reshape(-1)
    else:
        rest = tuple(1 if i == d else s for i, s in enumerate(arr.shape) if keepdim or i != d)
        xs = input.movedim(d, -1) if d != arr.ndim - 1 else input
    n = xs._data.shape[-1]
    srt = Sort.apply(xs, xs._data.ndim - 1, False, False)[0].reshape(rest + (n,))
    s = srt._data
    qv = qarr.reshape(-1)
    nan = _isnan(s)
    if ignore_nan:
        base = (n - nan.sum(axis=-1, keepdims=True) - 1).astype(s.dtype)
        ranks = qv * base
        fill, fill_value = ranks < 0, 0
    else:
        base = n - 1
        ranks = np.broadcast_to(qv * s.dtype.type(base), rest + (qv.size,))
        fill, fill_value = np.broadcast_to(nan.any(axis=-1, keepdims=True), ranks.shape), base
    ranks = np.where(fill, fill_value, ranks).astype(s.dtype)
    if interpolation == "lower":
        ranks = np.floor(ranks)
    elif interpolation == "higher":
        ranks = np.ceil(ranks)
    elif interpolation == "nearest":
        ranks = np.round(ranks)
    below = ranks.astype(np.int64)
    axis = srt._data.ndim - 1
    res = Gather.apply(srt, axis, below)
    if interpolation in ("linear", "midpoint"):
        above = np.ceil(ranks).astype(np.int64)
        if interpolation == "midpoint":
            w = _const(np.full(ranks.shape, 0.5, s.dtype))
        elif qt is not None and qt.requires_grad:
            rt = qt.reshape(-1) * _const(base if ignore_nan else np.asarray(base, s.dtype))
            w = _mask_fill(rt._expand_to(ranks.shape), fill, fill_value) - _const(
                below.astype(s.dtype))
        else:
            w = _const((ranks - below).astype(s.dtype))
        res = _Lerp.apply(res, Gather.apply(srt, axis, above), w)
    if qarr.ndim == 0:
        return _SqueezeLast.apply(res, (axis,))
    res = res.unsqueeze(0).transpose(0, -1)
    return _SqueezeLast.apply(res, (res._data.ndim - 1,))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of input (flattened, or along dim): q a number or a 1-D tensor in
    [0, 1] (a 1-D q adds a leading dim); interpolation between the two nearest values is
    'linear', 'lower', 'higher', 'midpoint' or 'nearest'. NaN in a slice gives NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs (NaN only for a slice of NaNs)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
_OPS = (sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, quantile, nanquantile)

TENSOR_METHODS: dict = {f.__name__: f for f in _OPS}
FUNCTIONS: dict = {f.__name__: f for f in _OPS}
