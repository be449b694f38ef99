"""Searching and deduplication: searchsorted, bucketize, unique, unique_consecutive (see
cgrad/ops/__init__.py for the conventions). None has a derivative:

* searchsorted and bucketize return indices (int64, or int32 with out_int32=True). The
  search is torch's CPU binary search, run for all values at once: lower bound
  ``!(b[mid] >= v)``, upper bound ``!(b[mid] > v)``, in the two operands' promoted dtype
  and through `sorter` when given, so that NaNs (in values or boundaries) land where
  torch's do.
* unique and unique_consecutive return the values (and the inverse indices and counts on
  request). unique's values are sorted (torch's CPU kernel sorts whether or not `sorted`
  is asked for); NaNs are never equal, so each is its own value (and slices with NaNs are
  ordered as torch's sort leaves them: Note [Tie order]). When the input requires
  grad, the values record torch's node (Unique2Backward0, UniqueDimBackward0,
  UniqueConsecutiveBackward0), whose backward raises NotImplementedError as torch's.
"""
from __future__ import annotations

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops import _tie_order
from cgrad.ops.promotion import result_type
from cgrad.ops.promotion import torch_type_name as _tname
from cgrad.ops.reductions import _one_dim


# ----------------------------------------------------------------------------------------
# searchsorted / bucketize
# ----------------------------------------------------------------------------------------
def _type_name(v):
    from cgrad._checks import type_name
    return type_name(v)


def _search(bd, vals, right, sorter):
    """torch's cus_lower_bound / cus_upper_bound on each row of bd (m, n) for the values of
    the matching row of vals (m, k), all at once."""
    m, n = bd.shape
    k = vals.shape[1]
    start = np.zeros((m, k), np.int64)
    end = np.full((m, k), n, np.int64)
    rows = np.arange(m)[:, None]
    with np.errstate(invalid="ignore"):
        while True:
            active = start < end
            if not active.any():
                return start
            mid = start + ((end - start) >> 1)
            at = np.minimum(mid, n - 1)
            if sorter is not None:
                at = sorter[rows, at]
            mv = bd[rows, at]
            go_right = ~(mv > vals) if right else ~(mv >= vals)
            start = np.where(active & go_right, mid + 1, start)
            end = np.where(active & ~go_right, mid, end)


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """The indices at which the values of input would be inserted into sorted_sequence (its
    innermost dimension) to keep it sorted: the first such index, or the last with
    right=True / side='right'."""
    if not isinstance(sorted_sequence, TensorBase) or not isinstance(
            input, (TensorBase, int, float, bool, np.number)):
        raise TypeError("searchsorted() received an invalid combination of arguments - got "
                        f"({_type_name(sorted_sequence)}, {_type_name(input)}), but expected "
                        "(Tensor sorted_sequence, Tensor input) or (Tensor sorted_sequence, "
                        "Number self)")
    bd = sorted_sequence._data
    scalar = not isinstance(input, TensorBase)
    vals = np.asarray(input) if scalar else input._data
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError("cgrad.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side != "right":
            raise RuntimeError("cgrad.searchsorted(): side and right can't be set to "
                               f"opposites, got side of {side} while right was True")
        right = side == "right"
    if bd.ndim == 0:
        raise RuntimeError("cgrad.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if bd.ndim != 1 and vals.ndim == 0:
        raise RuntimeError(
            "cgrad.searchsorted(): input value can be a scalar only when boundaries tensor "
            f"dimension is 1, but we got boundaries tensor dim({bd.ndim}) and input value's "
            f"dim(0) numel(1)")
    if bd.ndim != 1 and (bd.ndim != vals.ndim or bd.shape[:-1] != vals.shape[:-1]):
        raise RuntimeError(
            "cgrad.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {_shape_str(bd.shape)} and input value tensor "
            f"{_shape_str(vals.shape)}")
    srt = None
    if sorter is not None:
        srt = sorter._data
        if srt.dtype != np.int64:
            raise RuntimeError("cgrad.searchsorted(): sorter must be a tensor of long dtype but "
                               f"got dtype {_tname(srt.dtype)}")
        if srt.shape != bd.shape:
            raise RuntimeError("cgrad.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {_shape_str(bd.shape)}and got "
                               f"sorter tensor {_shape_str(srt.shape)}")
        if srt.size and (srt.min() < 0 or srt.max() >= bd.shape[-1]):
            raise RuntimeError("cgrad.searchsorted(): sorter index out of range")
    dt = result_type(sorted_sequence, input)
    if dt == np.bool_:
        raise NotImplementedError('"searchsorted_out_cpu" not implemented for \'Bool\'')
    bd, v = bd.astype(dt, copy=False), vals.astype(dt, copy=False)
    out_dtype = np.int32 if out_int32 else np.int64
    if bd.shape[-1] == 0:
        return _wrap(np.zeros(v.shape, out_dtype))
    if bd.ndim == 1:
        rows_b, rows_v = bd.reshape(1, -1), v.reshape(1, -1)
        rows_s = None if srt is None else srt.reshape(1, -1)
    else:
        rows_b = bd.reshape(-1, bd.shape[-1])
        rows_v = v.reshape(rows_b.shape[0], -1)
        rows_s = None if srt is None else srt.reshape(rows_b.shape)
    pos = _search(rows_b, rows_v, right, rows_s)
    return _wrap(pos.reshape(v.shape).astype(out_dtype))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket of each value of input, given 1-D sorted boundaries:
    searchsorted(boundaries, input, right=right)."""
    if not isinstance(boundaries, TensorBase) or not isinstance(
            input, (TensorBase, int, float, bool, np.number)):
        raise TypeError("bucketize() received an invalid combination of arguments - got "
                        f"({_type_name(input)}, {_type_name(boundaries)}), but expected "
                        "(Tensor input, Tensor boundaries) or (Number self, Tensor boundaries)")
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got "
                           f"dim({boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ----------------------------------------------------------------------------------------
# unique / unique_consecutive
# ----------------------------------------------------------------------------------------
class _Unique(Function):
    """Outputs (values, inverse, counts); the values require grad when the input does, and
    backward raises torch's NotImplementedError."""
    _node_name = "Unique2Backward0"
    _aten = "_unique2"

    @staticmethod
    def forward(ctx, a, fn):
        return fn()

    @classmethod
    def _raise(cls):
        raise NotImplementedError(f"the derivative for '{cls._aten}' is not implemented.")

    @staticmethod
    def backward(ctx, *grads):
        _Unique._raise()


class _UniqueDim(_Unique):
    _node_name = "UniqueDimBackward0"
    _aten = "unique_dim"

    @staticmethod
    def backward(ctx, *grads):
        _UniqueDim._raise()


class _UniqueConsecutive(_Unique):
    _node_name = "UniqueConsecutiveBackward0"
    _aten = "unique_consecutive"

    @staticmethod
    def backward(ctx, *grads):
        _UniqueConsecutive._raise()


def _groups(keys_equal, n):
    """From the equality of each sorted row with the next (n - 1 flags): the start of each
    group, the group of each row, and the counts."""
    new = np.concatenate([[True], ~keys_equal]) if n else np.zeros(0, bool)
    group = np.cumsum(new) - 1
    starts = np.nonzero(new)[0]
    counts = np.diff(np.concatenate([starts, [n]])).astype(np.int64)
    return starts, group.astype(np.int64), counts


def _rows_equal(rows):
    """rows[i] == rows[i + 1] in every column (NaN never equal)."""
    if rows.shape[0] < 2:
        return np.zeros(0, bool)
    return (rows[1:] == rows[:-1]).all(axis=1)


def _dim_rows(arr, d):
    """The slices of arr along d as rows of a 2-D array, and a function back."""
    moved = np.moveaxis(arr, d, 0)
    rows = moved.reshape(moved.shape[0], -1)

    def back(r):
        return np.moveaxis(r.reshape((r.shape[0],) + moved.shape[1:]), 0, d)

    return rows, back


def _dim_order(rows):
    """The order of the rows in torch's unique(dim=...): lexicographic; with NaNs, torch's
    std::sort on them (Note [Tie order]) while within the budget."""
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])
    if rows.dtype.kind == "f" and rows.size <= _tie_order.BUDGET and np.isnan(rows).any():
        try:
            order = np.array(_tie_order.unique_dim_order(rows.tolist()), np.int64)
        except (_tie_order.Unguarded, IndexError):
            pass
    return order


def _check_zero_dims(arr, d):
    """torch's checks of unique_dim on tensors with zero-sized dimensions."""
    zeros = sum(1 for s in arr.shape if s == 0)
    if arr.shape[d] == 0:
        if zeros != 1:
            raise RuntimeError("Number of zero sized dimensions is more than one, so unique "
                               "cannot be applied ")
        return True
    if zeros:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    return False


def _unique_dim_arg(arr, dim, fn):
    if isinstance(dim, TensorBase) and dim._data.ndim == 0 and dim._data.dtype.kind in "iu":
        dim = int(dim._data)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"{fn}(): argument 'dim' (position 2) must be int, not "
                        f"{_type_name(dim)}")
    if arr.ndim == 0:
        raise IndexError(f"Dimension specified as {int(dim)} but tensor has no dimensions")
    return _one_dim(int(dim), arr.ndim)


def _outputs(cls, input, compute, return_inverse, return_counts):
    values, inverse, counts = cls.apply(input, compute)
    out = (values,) + ((inverse,) if return_inverse else ()) + (
        (counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The unique elements of input (flattened, or the unique slices along dim), sorted;
    optionally the index of each element of input in them, and their counts."""
    arr = input._data
    if dim is None:
        def compute():
            flat = arr.reshape(-1)
            order = np.argsort(flat, kind="stable")
            s = flat[order]
            starts, group, counts = _groups(s[1:] == s[:-1], s.size)
            inverse = np.empty(flat.size, np.int64)
            inverse[order] = group
            return s[starts], inverse.reshape(arr.shape), counts

        return _outputs(_Unique, input, compute, return_inverse, return_counts)
    d = _unique_dim_arg(arr, dim, "unique_dim")

    def compute_dim():
        if _check_zero_dims(arr, d):
            return arr.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows, back = _dim_rows(arr, d)
        order = _dim_order(rows)
        s = rows[order]
        starts, group, counts = _groups(_rows_equal(s), s.shape[0])
        inverse = np.empty(rows.shape[0], np.int64)
        inverse[order] = group
        return np.ascontiguousarray(back(s[starts])), inverse, counts

    return _outputs(_UniqueDim, input, compute_dim, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """input without the consecutive repeats of an element (flattened, or of a slice along
    dim); optionally the index of each element in the output, and the run lengths."""
    arr = input._data
    if dim is None:
        def compute():
            flat = arr.reshape(-1)
            starts, group, counts = _groups(flat[1:] == flat[:-1], flat.size)
            return flat[starts], group.reshape(arr.shape), counts

        return _outputs(_UniqueConsecutive, input, compute, return_inverse, return_counts)
    d = _unique_dim_arg(arr, dim, "unique_consecutive")

    def compute_dim():
        if _check_zero_dims(arr, d):
            return arr.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows, back = _dim_rows(arr, d)
        starts, group, counts = _groups(_rows_equal(rows), rows.shape[0])
        return np.ascontiguousarray(back(rows[starts])), group, counts

    return _outputs(_UniqueConsecutive, input, compute_dim, return_inverse, return_counts)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
_FNS = (searchsorted, bucketize, unique, unique_consecutive)
_METHODS = (unique, unique_consecutive)

TENSOR_METHODS: dict = {f.__name__: f for f in _METHODS}
FUNCTIONS: dict = {f.__name__: f for f in _FNS}
