"""cgrad.autograd.Variable: torch's pre-0.4 wrapper, kept for old programs.

As in torch, ``Variable(t, requires_grad=False, volatile=False)`` returns a plain Tensor: a
new leaf sharing t's data (and version counter) with no history, requiring grad when asked;
``volatile=True`` only warns (it has no effect: use ``cgrad.no_grad()``), and every Tensor is
an instance of Variable.
"""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad import _dtype
from cgrad._warn import warn as _warn

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _C.TensorBase)


class Variable(metaclass=_VariableMeta):
    """Variable(data=None, requires_grad=False, volatile=False): a Tensor (see the module
    docstring)."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            _warn("volatile was removed and now has no effect. Use `with cgrad.no_grad():` "
                  "instead.")
        if data is None:
            return _C._wrap(np.empty((0,), dtype=_dtype.get_default_dtype()))
        if not isinstance(data, _C.TensorBase):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{_checks.type_name(data)}")
        t = data.detach()
        if _checks.check_bool(requires_grad, "Variable"):
            if t._data.dtype.kind not in "fc":
                raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                   "require gradients")
            t.requires_grad_(True)
        return t


