"""Regression tests for bugs found by the differential fuzzer (tests/test_fuzz.py), each
shrunk to a minimal example. Each test says what was wrong; the expected values are torch
2.13's (checked against torch where it is importable)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cgrad


def _torch():
    return pytest.importorskip("torch")


def _f64(lib, data, requires_grad=False):
    return lib.tensor(np.asarray(data, dtype=np.float64), dtype=lib.float64,
                      requires_grad=requires_grad)


# --------------------------------------------------------------------------------------
# A 0-d result of integer indexing, select() or unbind() was a copy, not a view: NumPy
# returns a scalar for `arr[i]` on a 1-D array. An in-place op on the base then did not show
# in it (fuzzer: `t5 = t3.select(0, -3); t3 -= 1.5`, t5 kept its old value).


def _zero_d_views(lib):
    y = _f64(lib, [1.0, 2.0, 3.0])
    z = _f64(lib, [[1.0, 2.0], [3.0, 4.0]])
    views = [y.select(0, 1), y[2], y[-1], y.unbind(0)[0], z[1, 0], z[1][1], list(y)[0]]
    y.mul_(10)
    z.mul_(10)
    return [float(v.item()) for v in views], [v._version for v in views]


def test_zero_d_index_select_unbind_are_views():
    vals, versions = _zero_d_views(cgrad)
    assert vals == [20.0, 30.0, 30.0, 10.0, 30.0, 40.0, 10.0]
    assert versions == [1] * 7


def test_zero_d_views_match_torch():
    assert _zero_d_views(cgrad) == _zero_d_views(_torch())


def _zero_d_view_inplace_grad(lib):
    x = _f64(lib, [1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    v = y[1]
    v.mul_(x[0])             # in place on a 0-d view: rebases y
    w = y.select(0, 2)
    y[2] += 5                # w sees it and its history is regenerated
    out = (y * y).sum() + w * 3 + v * v
    out.backward()
    return float(out.item()), float(w.item()), x.grad.numpy().tolist()


def test_zero_d_view_inplace_gradients():
    assert _zero_d_view_inplace_grad(cgrad) == (97.0, 8.0, [18.0, 8.0, 19.0])


def test_zero_d_view_inplace_gradients_match_torch():
    assert _zero_d_view_inplace_grad(cgrad) == _zero_d_view_inplace_grad(_torch())
