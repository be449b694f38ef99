"""parameters_to_vector / vector_to_parameters."""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad.autograd.function import Function

__all__ = ["parameters_to_vector", "vector_to_parameters"]


class _CatFlat(Function):
    """Concatenate the flattened inputs.  d/d(input i) = g[offset_i : offset_i + n_i]
    reshaped to input i's shape."""
    _node_name = "CatBackward0"

    @staticmethod
    def forward(ctx, *tensors):
        arrays = [t._data.reshape(-1) for t in tensors]
        if ctx is not None:
            ctx._aux = tuple(t._data.shape for t in tensors)
        return np.concatenate(arrays) if arrays else np.zeros(0)

    @staticmethod
    def backward(ctx, g):
        out, off = [], 0
        for shape, need in zip(ctx._aux, ctx.needs_input_grad):
            n = int(np.prod(shape))
            out.append(g[off:off + n].reshape(shape) if need else None)
            off += n
        return tuple(out)


def parameters_to_vector(parameters):
    """One 1-D Tensor with all parameters flattened and concatenated (differentiable)."""
    params = list(parameters)
    if not params:
        raise RuntimeError("cgrad.cat(): expected a non-empty list of Tensors")
    return _CatFlat.apply(*params)


def vector_to_parameters(vec, parameters):
    """Make each parameter's data the matching slice of ``vec`` (storage shared with vec)."""
    if not isinstance(vec, _C.TensorBase):
        from cgrad.nn.modules.module import _typename
        raise TypeError(f"expected cgrad.Tensor, but got: {_typename(vec)}")
    arr = vec._data
    pointer = 0
    for param in parameters:
        n = param.numel()
        piece = arr[pointer:pointer + n]
        if piece.size != n:
            raise RuntimeError(f"shape '{list(param.shape)}' is invalid for input of size "
                               f"{piece.size}")
        param.data = _C._wrap(piece.reshape(param.shape))
        pointer += n
