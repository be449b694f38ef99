"""cgrad.nn.Parameter: a leaf Tensor that a Module registers as a learnable parameter."""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad import _dtype
from cgrad.tensor import Tensor

__all__ = ["Parameter", "Buffer"]


def _rebuild_parameter(arr, requires_grad, state):
    p = Parameter(_C._wrap(arr), requires_grad)
    if state:
        p.__dict__.update(state)
    return p


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers it
    in ``parameters()``. It shares storage (and the version counter) with ``data``; it is a
    leaf and requires grad unless ``requires_grad=False``. Ops on a Parameter, ``p.data``,
    ``p.detach()`` and ``p.grad`` are plain Tensors, as in torch.

    >>> import cgrad
    >>> cgrad.nn.Parameter(cgrad.zeros(2))
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    """

    # no __slots__: like torch's Parameter, instances accept extra attributes

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            arr, src = np.empty((0,), dtype=_dtype.get_default_dtype()), None
        elif isinstance(data, _C.TensorBase):
            arr, src = data._data, data
        else:
            from cgrad._checks import check_tensor
            check_tensor(data, "Parameter", "data", 1)
        self = _C.TensorBase.__new__(cls)
        self._data = arr
        if src is not None:
            self._share_version(src)
        if requires_grad:
            if arr.dtype.kind not in "fc":
                raise RuntimeError(
                    "Only Tensors of floating point and complex dtype can require gradients")
            self.requires_grad_(True)
        return self

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        key = id(self)
        if key in memo:
            return memo[key]
        result = type(self)(_C._wrap(self._data.copy()), self.requires_grad)
        if self.__dict__:
            import copy
            result.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[key] = result
        return result

    def __reduce_ex__(self, protocol):
        return _rebuild_parameter, (self._data, self.requires_grad, self.__dict__ or None)


class Buffer(Tensor):
    """A Tensor that registers itself as a buffer when assigned to a Module attribute
    (``self.running = nn.Buffer(cgrad.zeros(3))``), persistent (in ``state_dict()``) unless
    ``persistent=False``. It shares storage with ``data``, detached from its graph."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            arr, src = np.empty((0,), dtype=_dtype.get_default_dtype()), None
        elif isinstance(data, _C.TensorBase):
            arr, src = data._data, data
        else:
            raise TypeError(f"Buffer(): argument 'data' must be Tensor, not "
                            f"{type(data).__name__}")
        self = _C.TensorBase.__new__(cls)
        self._data = arr
        if src is not None:
            self._share_version(src)
            if src.requires_grad:
                self.requires_grad_(True)
        self.persistent = persistent
        return self

    def __init__(self, data=None, *, persistent=True):
        pass
