"""Small helpers shared by the op modules."""
from __future__ import annotations

import numpy as np

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
