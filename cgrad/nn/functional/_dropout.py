"""Dropout functions of cgrad.nn.functional: ``dropout`` (``input * mask``, a
``MulBackward0`` node as in torch)."""
from __future__ import annotations

import numpy as np

from cgrad._C import _wrap
from cgrad.nn.functional._utils import _inplace_apply, _tname


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (``input * mask``: ``MulBackward0``, as torch). The mask is drawn from cgrad's generator
    (``cgrad.manual_seed``). ``training=False`` or ``p=0`` return ``input`` itself."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = input._data
    if not training or p == 0 or x.size == 0:
        return input
    if x.dtype.kind != "f":
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{_tname(x.dtype)}")
    if p == 1:
        noise = np.zeros((), dtype=x.dtype)
    else:
        from cgrad._creation import _rng
        r = _rng().random(x.shape, dtype=x.dtype if x.dtype in (np.float32, np.float64)
                          else np.float64)
        noise = (r >= p).astype(x.dtype)
        noise *= x.dtype.type(1.0 / (1.0 - p))
    noise = _wrap(noise)
    if inplace:
        return _inplace_apply(input, lambda s: s * noise)
    return input * noise
