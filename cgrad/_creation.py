"""Tensor factories with torch's names and dtype defaults."""
from __future__ import annotations

import builtins

import numpy as np

from cgrad import _C
from cgrad import _dtype

_gen = [np.random.default_rng()]


def _rng():
    return _gen[0]


def manual_seed(seed):
    """Seed cgrad's global random generator (rand, randn, dropout, init)."""
    _gen[0] = np.random.default_rng(builtins.int(seed))
    return _gen[0]


def _finish(arr, requires_grad):
    t = _C._wrap(arr)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _infer(arr, dtype):
    if dtype is not None:
        return arr.astype(np.dtype(dtype), copy=False)
    k = arr.dtype.kind
    if k == "f" and arr.dtype == np.float64:
        return arr.astype(_dtype.get_default_dtype(), copy=False)
    if k in "iu" and arr.dtype != np.int64 and arr.dtype != np.uint8:
        return arr.astype(np.int64, copy=False)
    return arr


_TORCH_NP_TYPES = ("float64, float32, float16, complex64, complex128, int64, int32, int16, "
                   "int8, uint64, uint32, uint16, uint8, and bool")


def _leaves(data):
    """The non-list items of nested lists/tuples, in order (no recursion)."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            yield x


def _has_f64_leaf(data):
    """Does nested list data hold a float64 NumPy array/scalar or Tensor? torch keeps their
    dtype, while Python floats take the default dtype."""
    for x in _leaves(data):
        if isinstance(x, _C.TensorBase):
            x = x._data
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float64:
            return True
    return False


def _first_bad_leaf(data):
    return next((x for x in _leaves(data) if not isinstance(
        x, (builtins.bool, builtins.int, builtins.float, complex, np.generic, np.ndarray,
            _C.TensorBase))), None)


def _check_kind(arr, data):
    """torch's refusals of data that is not numbers."""
    if arr.dtype.kind in "biufc":
        return arr
    if isinstance(data, (np.ndarray, np.generic)):
        raise TypeError(f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. "
                        f"The only supported types are: {_TORCH_NP_TYPES}.")
    bad = _first_bad_leaf(data) if isinstance(data, (list, tuple)) else data
    if isinstance(bad, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(bad).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(bad).__name__}")


def _from_data(data):
    """Convert Python data (nested lists of scalars/Tensors) to an ndarray; report whether
    the dtype came from Python scalars (then torch's defaults apply)."""
    if isinstance(data, _C.TensorBase):
        return data._data, False
    if isinstance(data, np.ndarray):
        return _check_kind(data, data), False
    if isinstance(data, np.generic):
        return _check_kind(np.asarray(data), data), False
    if isinstance(data, (list, tuple)):
        flat = [x._data if isinstance(x, _C.TensorBase) else x for x in data]
        try:
            arr = np.array(flat)
        except ValueError:
            if _first_bad_leaf(data) is None:
                raise               # ragged: NumPy's ValueError says where
            arr = np.array(flat, dtype=object)
        arr = _check_kind(arr, data)
        return arr, not (arr.dtype == np.float64 and _has_f64_leaf(data))
    if isinstance(data, (builtins.bool, builtins.int, builtins.float, complex)):
        return np.asarray(data), True
    return _check_kind(np.asarray(data), data), False


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Copy `data` into a new leaf tensor. Python floats become the default dtype (float32),
    ints int64.

    >>> import cgrad
    >>> cgrad.tensor([1.0, 2.5])
    tensor([1.0000, 2.5000])
    """
    arr, py = _from_data(data)
    if py:
        arr = _infer(arr, dtype)
    elif dtype is not None:
        arr = arr.astype(np.dtype(dtype), copy=False)
    return _finish(np.array(arr, copy=True), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Convert to a tensor, sharing memory with an ndarray or Tensor when possible."""
    if isinstance(data, _C.TensorBase):
        return data if dtype is None or np.dtype(dtype) == data._data.dtype else data.to(dtype)
    arr, py = _from_data(data)
    arr = _infer(arr, dtype) if py else (
        arr if dtype is None else arr.astype(np.dtype(dtype), copy=False))
    return _C._wrap(arr)


def from_numpy(arr):
    """Zero-copy: the tensor shares memory with `arr`."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    return _C._wrap(arr)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _dt(dtype):
    return np.dtype(dtype) if dtype is not None else _dtype.get_default_dtype()


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _finish(np.zeros(_shape(size), _dt(dtype)), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _finish(np.ones(_shape(size), _dt(dtype)), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _finish(np.empty(_shape(size), _dt(dtype)), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        if isinstance(fill_value, builtins.bool):
            dtype = np.bool_
        elif isinstance(fill_value, builtins.int):
            dtype = np.int64
    return _finish(np.full(tuple(size), fill_value, _dt(dtype)), requires_grad)


def _like_dtype(t, dtype):
    return np.dtype(dtype) if dtype is not None else t._data.dtype


def zeros_like(t, dtype=None, device=None, requires_grad=False):
    return _finish(np.zeros(t._data.shape, _like_dtype(t, dtype)), requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    return _finish(np.ones(t._data.shape, _like_dtype(t, dtype)), requires_grad)


def empty_like(t, dtype=None, device=None, requires_grad=False):
    return _finish(np.empty(t._data.shape, _like_dtype(t, dtype)), requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    return _finish(np.full(t._data.shape, fill_value, _like_dtype(t, dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
        dtype = np.int64 if is_int else _dtype.get_default_dtype()
    return _finish(np.arange(start, end, step).astype(dtype), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return _finish(np.linspace(start, end, steps).astype(_dt(dtype)), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _finish(np.eye(n, m, dtype=_dt(dtype)), requires_grad)


def rand(*size, dtype=None, generator=None, device=None, requires_grad=False):
    g = generator if generator is not None else _rng()
    return _finish(g.random(_shape(size)).astype(_dt(dtype)), requires_grad)


def randn(*size, dtype=None, generator=None, device=None, requires_grad=False):
    g = generator if generator is not None else _rng()
    return _finish(g.standard_normal(_shape(size)).astype(_dt(dtype)), requires_grad)


def randint(low, high=None, size=(), dtype=None, generator=None, device=None,
            requires_grad=False):
    if high is None:
        low, high = 0, low
    g = generator if generator is not None else _rng()
    return _finish(g.integers(low, high, size=tuple(size)).astype(dtype or np.int64),
                   requires_grad)
