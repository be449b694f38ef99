"""Argument checks shared by the factories, Tensor.to, nn.Module.to and sparse: torch's
error types and messages for devices, dtypes, sizes and flags (docs/bad_inputs.md).

These run on the error path or once per factory call, never per element."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from cgrad import _device

_INT64_MAX = 2 ** 63 - 1


def type_name(x):
    """torch's name for the type of an argument in its messages: 'list', 'Tensor',
    'numpy.ndarray', 'numpy.float64'."""
    from cgrad import _C
    if isinstance(x, _C.TensorBase):
        return "Tensor"
    t = type(x)
    mod = t.__module__ or ""
    if mod == "builtins":
        return t.__name__
    if mod.startswith("numpy"):
        return f"numpy.{t.__name__}"
    return t.__name__


def is_device_string(s):
    """Does the string name a device type (whether or not cgrad has it)?"""
    return s.partition(":")[0] in _device.DEVICE_TYPES


def check_device(device, fname="tensor"):
    """The device= argument as a cgrad.device (or None): torch's errors for a malformed one
    and for one cgrad cannot place a tensor on (Note [Devices] in cgrad/_device.py)."""
    return _device.check(device, fname)


def check_bool(value, fname, name="requires_grad"):
    if value is not True and value is not False:
        if isinstance(value, np.bool_):
            return builtins.bool(value)
        raise TypeError(f"{fname}(): argument '{name}' must be bool, not {type_name(value)}")
    return value


def dtype_of(dtype, fname="tensor"):
    """An np.dtype from a dtype argument (cgrad's dtypes are NumPy dtypes), or None."""
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fname}(): argument 'dtype' must be a dtype such as cgrad.float32, "
                        f"not {type_name(dtype)} {dtype!r}") from None


def _shape_items(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return size[0], True
    if len(size) == 1 and type(size[0]).__name__ == "Size":
        return size[0], True
    return size, False


def size_error(fname, size, dtype, err):
    """The torch error for a size given to a factory, after NumPy refused it (`err`)."""
    items, seq = _shape_items(size) if isinstance(size, tuple) else (size, True)
    if not isinstance(items, (tuple, list)):
        return TypeError(f"{fname}(): argument 'size' (position 1) must be tuple of ints, not "
                         f"{type_name(items)}")
    dims = []
    for i, d in enumerate(items):
        try:
            dims.append(operator.index(d))
        except TypeError:
            if len(items) == 1 and not seq:
                return TypeError(f"{fname}(): argument 'size' (position 1) must be tuple of "
                                 f"ints, not {type_name(d)}")
            return TypeError(f"{fname}(): argument 'size' failed to unpack the object at pos "
                             f"{i + 1} with error \"type must be tuple of ints,but got "
                             f"{type_name(d)}\"")
    return shape_error(fname, dims, dtype, err)


def shape_error(fname, dims, dtype, err):
    """torch's error for a shape of ints NumPy refused (`err`); `err` itself when the shape
    was not the problem."""
    for d in dims:
        if d < 0:
            if fname == "zeros":
                return RuntimeError("zeros: Dimension size must be non-negative.")
            return RuntimeError(f"Trying to create tensor with negative dimension {d}: "
                                f"{list(dims)}")
    numel = math.prod(dims)
    nbytes = numel * np.dtype(dtype).itemsize
    if numel > _INT64_MAX or nbytes > _INT64_MAX:
        return RuntimeError(f"Storage size calculation overflowed with sizes={list(dims)}")
    if isinstance(err, MemoryError):
        return alloc_error(nbytes)
    return err


class AllocationError(RuntimeError, MemoryError):
    """Memory the system would not give: torch raises RuntimeError ("can't allocate memory");
    NumPy and Python code catch MemoryError. This is both, so either except clause works."""


def alloc_error(nbytes):
    return AllocationError(f"can't allocate memory: you tried to allocate {nbytes} bytes. cgrad "
                        "could not get that much memory from the system.")


class NotATensorError(TypeError, AttributeError):
    """A Tensor argument that is not a Tensor. torch raises TypeError from its C bindings and,
    from its Python functions that read an attribute first, AttributeError: this error is
    both, so either except clause catches it."""


def check_tensor(x, fname, name="input", pos=1):
    from cgrad import _C
    if not isinstance(x, _C.TensorBase):
        raise NotATensorError(f"{fname}(): argument '{name}' (position {pos}) must be Tensor, "
                              f"not {type_name(x)}")
    return x


def check_number(value, fname, name, pos):
    """A Number argument (Python or NumPy scalar, or a one-element tensor): its value."""
    from cgrad import _C
    if isinstance(value, (builtins.int, builtins.float, builtins.complex, np.number, np.bool_)):
        return value
    if isinstance(value, _C.TensorBase) and value._data.ndim == 0:
        return value._data.item()
    raise TypeError(f"{fname}(): argument '{name}' (position {pos}) must be Number, not "
                    f"{type_name(value)}")


def check_int(value, fname, name, pos):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{fname}(): argument '{name}' (position {pos}) must be int, not "
                        f"{type_name(value)}") from None
    if not -2 ** 63 <= v <= _INT64_MAX:
        raise ValueError("Overflow when unpacking long long")
    return v


def _dim_int(d):
    """A dim given as an int-like (NumPy int, 0-d integer tensor); torch's TypeError else."""
    try:
        return operator.index(d)
    except TypeError:
        raise TypeError(f"argument 'dim' must be int or tuple of ints, not {type_name(d)}") \
            from None


def _norm_dims(dim, ndim, unique=False):
    """dim (an int or ints) as non-negative dims; torch's errors for a bad type, a dim out of
    range and (unique) a dim given twice."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    elif not isinstance(dim, (tuple, list)):
        dim = (_dim_int(dim),)
    out = []
    for d in dim:
        if type(d) is not int:
            d = _dim_int(d)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                f"{max(ndim, 1) - 1}], but got {d})")
        out.append(d % ndim if ndim else 0)
    if unique and len(out) > 1 and len(set(out)) < len(out):
        dup = next(d for i, d in enumerate(out) if d in out[:i])
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return tuple(out)
