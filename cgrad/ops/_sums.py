"""Sums that cgrad takes internally, faster than np.sum where NumPy's reduction loop is slow:
the batch axis first (Note [Batch axis first]) and leading or trailing blocks of axes by
gemv (Note [Sums by BLAS])."""
from __future__ import annotations

import numpy as np


# Note [Batch axis first]: NumPy reduces several non-adjacent axes of a C-contiguous array
# (a batch norm's or a convolution bias's (0, 2, 3) over (N, C, H, W)) through its generic
# iterator, whose inner loop runs over the last reduced run only: for small feature maps that
# is 4-7x slower than reducing axis 0 first (N - 1 vector additions of whole contiguous
# samples) and then the remaining axes, which are then adjacent or trailing. _sum_axes does
# that for float32/float64 C-contiguous arrays whose reduced axes include 0 and not all axes;
# the terms are the same and the order is another, so results agree with np.sum to rounding
# (float16 and integer sums keep NumPy's path: float16 would accumulate in float16).
def _sum_axes(arr, dims, keepdims=False):
    """np.sum(arr, axis=dims, keepdims=keepdims), batch axis first (Note [Batch axis first])."""
    if dims is not None and not isinstance(dims, int):
        dims = tuple(sorted(dims))
    if (dims is None or isinstance(dims, int) or len(dims) < 2 or dims[0] != 0
            or len(dims) == arr.ndim
            or arr.dtype.char not in "fd" or arr.shape[0] < 2
            or not arr.flags.c_contiguous):
        return np.sum(arr, axis=dims, keepdims=keepdims)
    out = np.add.reduce(arr, axis=0)
    out = np.sum(out, axis=tuple(d - 1 for d in dims[1:]), keepdims=keepdims)
    return out[None] if keepdims else out


# Note [Sums by BLAS]: np.sum over the short trailing rows of a C-contiguous array (a layer
# norm's 64 features, a softmax's 32 keys, a classifier's 65 logits) runs its inner loop once
# per row and costs 5-20x a matrix-vector product with a vector of ones; over the leading
# axes (a bias gradient) np.sum adds whole rows one after another at 2-3x gemv's cost.
# _fast_sum reduces a leading or a trailing block of axes of a C-contiguous float32/float64
# array as ones @ A or A @ ones (OpenBLAS gemv: deterministic for a given thread count, each
# output one dot product). The terms are the same and the order is BLAS's, so results agree
# with np.sum to rounding; a sum of only -0.0 gives +0.0 (gemv starts from +0.0). Used where
# cgrad reduces internally (broadcast gradients, bias gradients, normalisation statistics,
# softmax denominators); Tensor.sum keeps np.sum. Anything else falls back to _sum_axes.
_ONES = {}


def _ones(n, dtype):
    key = (n, dtype.char)
    v = _ONES.get(key)
    if v is None:
        if len(_ONES) > 256:
            _ONES.clear()
        v = np.ones(n, dtype=dtype)
        v.flags.writeable = False
        _ONES[key] = v
    return v


def _fast_sum(arr, dims, keepdims=False):
    """np.sum(arr, axis=dims, keepdims=keepdims) by gemv when dims are a leading or trailing
    block of axes (Note [Sums by BLAS])."""
    nd = arr.ndim
    if type(dims) is int:
        dims = (dims + nd if dims < 0 else dims,)
    if (dims is None or not dims or len(dims) >= nd or arr.dtype.char not in "fd"
            or arr.size < 64 or not arr.flags.c_contiguous):
        return _sum_axes(arr, dims, keepdims)
    dims = tuple(sorted(d + nd if d < 0 else d for d in dims))
    k = len(dims)
    shape = arr.shape
    if dims == tuple(range(k)):                       # leading block: ones @ A
        rows = 1
        for d in shape[:k]:
            rows *= d
        out = _ones(rows, arr.dtype) @ arr.reshape(rows, -1)
        return out.reshape(((1,) * k if keepdims else ()) + shape[k:])
    if dims == tuple(range(nd - k, nd)):              # trailing block: A @ ones
        cols = 1
        for d in shape[nd - k:]:
            cols *= d
        out = arr.reshape(-1, cols) @ _ones(cols, arr.dtype)
        return out.reshape(shape[:nd - k] + ((1,) * k if keepdims else ()))
    return _sum_axes(arr, dims, keepdims)
