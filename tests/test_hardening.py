"""Limits found by auditing csrc/ and the .pyx for fixed-size buffers, narrow integers and
unchecked indices (the audit that followed the wide-node crash, tests/test_wide.py)."""
from __future__ import annotations

import numpy as np
import pytest

import cgrad


def test_set_grad_fn_rejects_an_output_number_out_of_range():
    # the engine indexes a node's gradient buffers by a tensor's output number
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = cgrad.tensor([1.0, 2.0])
    for bad in (1, 5, -1, 2**62):
        with pytest.raises(IndexError, match="out of range"):
            z._set_grad_fn(y.grad_fn, bad)
    assert z.grad_fn is None and not z.requires_grad
    with pytest.raises(TypeError):
        z._set_grad_fn(object(), 0)
    # a multi-output node takes each of its output numbers
    a, b = cgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True).split(2)
    w = cgrad.tensor([0.0, 0.0])
    w._set_grad_fn(b.grad_fn, 1)
    assert w.output_nr == 1


def _unaligned(dtype, n):
    item = np.dtype(dtype).itemsize
    raw = np.zeros(item * n + 1, dtype=np.uint8)
    a = np.frombuffer(raw.data, dtype=dtype, count=n, offset=1)
    assert not a.flags.aligned
    return a


def test_sddmm_takes_unaligned_arrays():
    # the C kernel reads whole int64/float elements: misaligned inputs are copied first
    # (UBSan reports a misaligned load otherwise)
    _sparse = pytest.importorskip("cgrad._sparse")
    rng = np.random.default_rng(0)
    G = rng.standard_normal((4, 5))
    B = rng.standard_normal((6, 5))
    Gu = _unaligned(np.float64, 20).reshape(4, 5)
    Gu[...] = G
    Bu = _unaligned(np.float64, 30).reshape(6, 5)
    Bu[...] = B
    r = _unaligned(np.int64, 3)
    r[...] = [0, 3, 2]
    c = _unaligned(np.int64, 3)
    c[...] = [5, 0, 1]
    expect = np.einsum("kf,kf->k", G[[0, 3, 2]], B[[5, 0, 1]])
    np.testing.assert_allclose(_sparse.sddmm(r, c, Gu, Bu), expect, rtol=1e-12)
    np.testing.assert_allclose(_sparse.sddmm(r, c, Gu.astype(np.float32),
                                             Bu.astype(np.float32)), expect, rtol=1e-5)
    r[1] = 4
    with pytest.raises(IndexError, match="out of range"):
        _sparse.sddmm(r, c, Gu, Bu)
