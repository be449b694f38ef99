"""Dropout functions of cgrad.nn.functional: ``dropout`` (``input * mask``, a
``MulBackward0`` node as in torch)."""
from __future__ import annotations

import numpy as np

from cgrad._C import _wrap
from cgrad.nn.functional._utils import _inplace_apply, _tname


_TWO32 = 2 ** 32


def _keep_mask(shape, dtype, p):
    """``mask * (1 / (1 - p))`` in ``dtype``: each element kept independently with
    probability ``1 - p`` (to within 2**-33), from 32 random bits of cgrad's generator per
    element (``random_raw``: half a 64-bit draw each; same seed, same mask).

    One draw, one compare, one multiply, and for float32 the noise is written over the
    random bits themselves: no float64 uniforms or other temporaries beyond a bool mask
    (the old float uniforms + compare + astype + scale cost 5x more on large inputs)."""
    from cgrad._creation import _rng
    n = 1
    for d in shape:
        n *= d
    keep = min(int(round((1.0 - p) * _TWO32)), _TWO32 - 1)   # p > 0: at most 2**32 - 1
    bits = _rng().bit_generator.random_raw((n + 1) // 2).view(np.uint32)[:n]
    mask = np.less(bits, np.uint32(keep))
    scale = dtype.type(1.0 / (1.0 - p))
    out = bits.view(np.float32) if dtype == np.float32 else None
    return np.multiply(mask, scale, out=out, dtype=dtype).reshape(shape)


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
        noise = _keep_mask(x.shape, x.dtype, p)
    noise = _wrap(noise)
    if inplace:
        return _inplace_apply(input, lambda s: s * noise)
    return input * noise
