"""torch's legacy constructors: ``cgrad.Tensor(data)`` / ``cgrad.Tensor(*sizes)``,
``Tensor.new(...)``, and the typed classes ``cgrad.FloatTensor``, ``DoubleTensor``,
``HalfTensor``, ``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``,
``ByteTensor``, ``BoolTensor``.

Note [Legacy constructors]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``construct(dtype, args, size, device)`` is torch's ``new()``: no argument gives an empty 1-D
tensor, a Tensor gives an alias of it (same data and version counter; its history through an
``AliasBackward0`` node, as torch's ``other.alias()``), a
sequence or ndarray is data (cast to the dtype), ints or one ``Size`` are sizes (torch leaves
the memory uninitialised; cgrad fills it with zeros). ``cgrad.Tensor(...)`` calls it from
``Tensor.__new__`` with the default dtype (so a subclass's ``super().__new__(cls, data)``
works as in torch; ``Tensor.__init__`` does nothing): the compiled fast paths that create
tensors (``_C._wrap``, every op) call TensorBase's ``tp_new`` directly and never run
``Tensor.__new__`` (Note [Direct tp_new] in cgrad/_C.pyx), so the constructor costs nothing
to internal tensor creation.

The typed classes are not Tensor subclasses (as in torch, ``issubclass(FloatTensor, Tensor)``
is False): calling one returns a ``cgrad.Tensor`` of its dtype, and ``isinstance(t,
cgrad.FloatTensor)`` asks whether ``t`` is a dense float32 tensor (their metaclass,
``tensortype``). The sparse ones (``cgrad.sparse.FloatTensor``, ...) live in
cgrad/sparse/_legacy.py.
"""
from __future__ import annotations

import builtins
import collections.abc
import operator

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad import _creation
from cgrad import _device
from cgrad import _dtype
from cgrad.autograd.function import Function

__all__ = ["tensortype", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


def _options(dt):
    return (f"TensorOptions(dtype={_dtype.c10_name(dt)}, device=cpu, "
            "layout=Strided, requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def _check_device(device):
    d = _device.parse(device, "new")
    if d is not None and d.type != "cpu":
        raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                           f"{d.type} was passed")


def _is_int(x):
    return (not isinstance(x, (builtins.bool, np.bool_, _C.TensorBase, float, complex,
                               np.ndarray)) and hasattr(x, "__index__"))


def _is_sequence(x):
    """CPython's PySequence_Check, torch's test for data: range, array.array, deque and
    memoryview are data; a set, dict, generator or scalar is not."""
    if isinstance(x, collections.abc.Sequence):
        return True
    return (hasattr(type(x), "__getitem__") and hasattr(type(x), "__len__")
            and not isinstance(x, (collections.abc.Mapping, np.generic)))


def _sizes_array(dims, dt):
    shape = []
    for i, d in enumerate(dims):
        if not _is_int(d):
            raise TypeError(f"new(): argument 'size' failed to unpack the object at pos {i + 1} "
                            f"with error \"type must be tuple of ints,but got "
                            f"{_checks.type_name(d)}\"")
        shape.append(operator.index(d))
    try:
        return np.zeros(tuple(shape), dtype=dt)
    except (ValueError, MemoryError, OverflowError) as e:
        raise _checks.shape_error("new", shape, dt, e) from None


def construct(dtype, args, size=None, device=None, strict=False):
    """An ndarray, or the Tensor to alias, for torch's legacy constructor (Note [Legacy
    constructors]). strict: a Tensor argument must already have `dtype` (typed classes,
    Tensor.new)."""
    _check_device(device)
    if size is not None:
        if args:
            raise TypeError("new() got multiple values for argument 'size'")
        args = tuple(size) if isinstance(size, (tuple, list)) else (size,)
        return _sizes_array(args, dtype)
    if not args:
        return np.empty((0,), dtype=dtype)
    first = args[0]
    if len(args) == 1 and isinstance(first, _C.TensorBase):
        if strict and first._data.dtype != dtype:
            raise TypeError(f"expected {_options(dtype)} (got {_options(first._data.dtype)})")
        return first
    if len(args) == 1 and not _is_int(first) and not type(first).__name__ == "Size":
        if isinstance(first, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(first).__name__}'")
        if not isinstance(first, (list, tuple, np.ndarray)):
            if not _is_sequence(first):
                raise TypeError(f"new(): data must be a sequence (got "
                                f"{_checks.type_name(first)})")
            first = list(first)         # range, array.array, deque, memoryview, ...
        arr, _ = _creation._from_data(first)
        return np.array(arr, dtype=dtype, copy=True)
    if len(args) == 1 and type(first).__name__ == "Size":
        args = tuple(first)
    return _sizes_array(args, dtype)


def new_tensor(dtype, args, size=None, device=None, strict=False):
    """construct(...) as a Tensor (an alias for a Tensor argument)."""
    r = construct(dtype, args, size, device, strict)
    if isinstance(r, _C.TensorBase):
        t = _C._wrap(r._data)
        t._share_version(r)
        return t
    return _C._wrap(r)


class _Alias(Function):
    """cgrad.Tensor(other): the same data, and other's history through an AliasBackward0
    node (torch's Tensor(other) is other.alias())."""
    _node_name = "AliasBackward0"

    @staticmethod
    def forward(ctx, a):
        return a._data

    @staticmethod
    def backward(ctx, g):
        return g


def init_tensor(self, args, size, device):
    """Tensor.__new__: fill a tensor that TensorBase's tp_new made (cgrad.Tensor(...) or a
    subclass)."""
    r = construct(_dtype.get_default_dtype(), args, size, device)
    if isinstance(r, _C.TensorBase):
        self._data = r._data
        self._share_version(r)
        if r.requires_grad and _C.is_grad_enabled():
            out = _Alias.apply(r)
            self._set_grad_fn(out.grad_fn, out.output_nr)
    else:
        self._data = r


class tensortype(type):
    """The type of the legacy classes: calling one constructs a tensor of its dtype;
    ``isinstance(t, cls)`` checks the dtype (and layout) of t."""

    def __call__(cls, *args, device=None, size=None):
        return new_tensor(cls.dtype, args, size, device, strict=True)

    def __instancecheck__(cls, obj):
        return (isinstance(obj, _C.TensorBase) and getattr(obj, "is_sparse", False)
                == cls.is_sparse and obj.dtype == cls.dtype)

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __repr__(cls):
        return f"<class 'cgrad.{cls.__name__}'>"


def _legacy(name, dtype):
    return tensortype(name, (), {"dtype": dtype, "is_sparse": False, "is_cuda": False,
                                 "__module__": __name__,
                                 "__doc__": f"cgrad.{name}: the legacy constructor of {dtype} "
                                            "tensors."})


FloatTensor = _legacy("FloatTensor", _dtype.float32)
DoubleTensor = _legacy("DoubleTensor", _dtype.float64)
HalfTensor = _legacy("HalfTensor", _dtype.float16)
LongTensor = _legacy("LongTensor", _dtype.int64)
IntTensor = _legacy("IntTensor", _dtype.int32)
ShortTensor = _legacy("ShortTensor", _dtype.int16)
CharTensor = _legacy("CharTensor", _dtype.int8)
ByteTensor = _legacy("ByteTensor", _dtype.uint8)
BoolTensor = _legacy("BoolTensor", _dtype.bool)

BY_NAME = {c.__name__: c for c in (FloatTensor, DoubleTensor, HalfTensor, LongTensor,
                                   IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor)}
