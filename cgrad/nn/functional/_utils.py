"""Helpers that several families of cgrad.nn.functional share: torch's spelling of dtypes
and shapes in messages, the grad-mode and floating-point checks, and ``inplace=True``
(``_inplace_apply``)."""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad.ops.promotion import torch_type_name


def _tname(dt):
    """torch's ScalarType name for a NumPy dtype (Float, Double, Long, ...)."""
    return torch_type_name(np.dtype(dt))


def _shape_list(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _grad_enabled():
    return _C.is_grad_enabled()


def _check_float(x, kernel):
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tname(x.dtype)}\'')


def _inplace_apply(input, compute):
    """torch's inplace=True: input takes compute(input)'s values; when autograd records it,
    the op is recorded and input's history rebased (cgrad/ops/inplace.py), as torch."""
    from cgrad.ops import inplace as _inplace
    if _inplace.needs_record(input):
        return _inplace.record(input, compute, saves_self=True)
    _inplace.check_overlap(input)
    out = compute(input)
    input._data[...] = out._data
    input._bump_version()
    return input
