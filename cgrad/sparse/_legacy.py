"""torch's legacy sparse constructors: ``cgrad.sparse.FloatTensor(indices, values, size)``
and the other typed classes (``DoubleTensor``, ``LongTensor``, ...).

As in torch, each form warns that it is deprecated and builds
``cgrad.sparse_coo_tensor(indices, values, size)``; the values keep their own dtype (torch's
legacy sparse constructors do not cast them). ``isinstance(t, cgrad.sparse.FloatTensor)``
asks whether t is a sparse float32 tensor (cgrad/_legacy.py, Note [Legacy constructors]).
"""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad import _device
from cgrad import _dtype
from cgrad._legacy import tensortype
from cgrad._warn import warn as _warn
from cgrad.sparse._tensor import sparse_coo_tensor

__all__ = ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]


def _deprecated(form, new):
    _warn(f"cgrad.sparse.SparseTensor({form}) is deprecated.  Please use "
          f"cgrad.sparse_coo_tensor({new}).")


def construct(dtype, args, device=None):
    """torch's legacy sparse constructor (with its deprecation warning)."""
    d = _device.parse(device, "new")
    if d is not None and d.type != "cpu":
        raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                           f"{d.type} was passed")
    if args and isinstance(args[0], _C.TensorBase):
        if len(args) == 3:
            _deprecated("indices, values, shape, *, device=",
                        "indices, values, shape, dtype=, device=")
            return sparse_coo_tensor(args[0], args[1], tuple(args[2]))
        if len(args) == 2:
            _deprecated("indices, values, *, device=", "indices, values, dtype=, device=")
            return sparse_coo_tensor(args[0], args[1])
        raise TypeError("new(): expected indices and values, and optionally a size")
    if not args:
        _deprecated("", "(0,), dtype=")
        args = (0,)
    else:
        _deprecated("shape, *, device=", "shape, dtype=")
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    shape = tuple(int(a) for a in args)
    return sparse_coo_tensor(_C._wrap(np.zeros((len(shape), 0), np.int64)),
                             _C._wrap(np.zeros((0,), dtype)), shape)


class _SparseType(tensortype):
    def __call__(cls, *args, device=None):
        return construct(cls.dtype, args, device)

    def __repr__(cls):
        return f"<class 'cgrad.sparse.{cls.__name__}'>"


def _legacy(name, dtype):
    return _SparseType(name, (), {"dtype": dtype, "is_sparse": True, "is_cuda": False,
                                  "__module__": __name__,
                                  "__doc__": f"cgrad.sparse.{name}: the legacy constructor of "
                                             f"sparse {dtype} tensors."})


FloatTensor = _legacy("FloatTensor", _dtype.float32)
DoubleTensor = _legacy("DoubleTensor", _dtype.float64)
LongTensor = _legacy("LongTensor", _dtype.int64)
IntTensor = _legacy("IntTensor", _dtype.int32)
ShortTensor = _legacy("ShortTensor", _dtype.int16)
CharTensor = _legacy("CharTensor", _dtype.int8)
ByteTensor = _legacy("ByteTensor", _dtype.uint8)
BoolTensor = _legacy("BoolTensor", _dtype.bool)
