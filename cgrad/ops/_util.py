"""Small helpers shared by the op modules."""
from __future__ import annotations

import numpy as np

from cgrad._checks import _dim_int, _norm_dims  # noqa: F401  (re-exported)
from cgrad._C import TensorBase


def raw(x):
    """The ndarray behind a Tensor, or x itself (a Python/NumPy scalar)."""
    return x._data if isinstance(x, TensorBase) else x


def float_result(arr, a, b):
    """torch promotion for an int tensor combined with a Python float: the result takes the
    default float dtype (NumPy would give float64)."""
    from cgrad._dtype import get_default_dtype
    if isinstance(arr, np.ndarray) and arr.dtype == np.float64:
        for x, y in ((a, b), (b, a)):
            if (isinstance(x, TensorBase) and x._data.dtype.kind in "iub"
                    and isinstance(y, float)):
                return arr.astype(get_default_dtype())
    return arr


def contiguous_result(out, arr):
    """The result of an op that torch allocates C-contiguous whatever its input's layout
    (reductions over dims, softmax, cumsum/cumprod, roll, masked_fill): NumPy keeps a
    non-contiguous input's memory order instead, and then view() would raise on the result
    where torch's works. A contiguous input costs one flag test."""
    if arr.flags.c_contiguous or not isinstance(out, np.ndarray) or out.flags.c_contiguous:
        return out
    return out.copy(order="C")      # (np.ascontiguousarray would make a 0-d result 1-d)


