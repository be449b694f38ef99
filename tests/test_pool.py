"""Pooling against torch: F.max_pool1d/2d (with indices), F.avg_pool1d/2d, F.adaptive_avg_pool2d
and their modules: outputs, gradients and node names over a grid of kernel sizes, strides,
paddings, dilations and ceil_mode (float64 to 1e-10, float32 to 1e-5), finite-difference
gradchecks (first and second order), reprs and torch's errors."""
import itertools
import re
import zlib

import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as F
from cgrad import nn
from cgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _cmp(name, shape, *args, dtype=np.float64, **kw):
    x = RNG.standard_normal(shape).astype(dtype)
    tx, cx = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
    ty = getattr(torch.nn.functional, name)(tx, *args, **kw)
    cy = getattr(F, name)(cx, *args, **kw)
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(cy[1].numpy(), ty[1].numpy())
        assert cy[1].dtype == cgrad.int64
        ty, cy = ty[0], cy[0]
    assert tuple(cy.shape) == tuple(ty.shape)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    cy.backward(cgrad.tensor(g))
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), atol=tol, rtol=tol)
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), atol=tol, rtol=tol)
    assert cy.dtype.itemsize == ty.dtype.itemsize
    assert type(cy.grad_fn).__name__ == type(ty.grad_fn).__name__


@pytest.mark.parametrize("k,s,p,d,ceil", list(itertools.product(
    [2, 3, (2, 3)], [None, 1, 2, (2, 1)], [0, 1], [1, 2], [False, True])))
def test_max_pool2d_grid(k, s, p, d, ceil):
    _cmp("max_pool2d", (2, 3, 9, 8), k, s, p, d, ceil, return_indices=True)
    _cmp("max_pool2d", (3, 9, 8), k, s, p, d, ceil)


@pytest.mark.parametrize("k,s,p,ceil,cip,dv", list(itertools.product(
    [2, 3, (2, 3)], [None, 1, 2, (2, 1)], [0, 1], [False, True], [False, True], [None, 3])))
def test_avg_pool2d_grid(k, s, p, ceil, cip, dv):
    _cmp("avg_pool2d", (2, 3, 9, 8), k, s, p, ceil, cip, dv)
    _cmp("avg_pool2d", (3, 9, 8), k, s, p, ceil, cip, dv)


@pytest.mark.parametrize("k,s,p,ceil", list(itertools.product([2, 3], [None, 1, 2], [0, 1],
                                                              [False, True])))
def test_pool1d_grid(k, s, p, ceil):
    _cmp("max_pool1d", (2, 3, 11), k, s, p, 1, ceil, True)
    _cmp("max_pool1d", (3, 11), k, s, p, 2, ceil)
    _cmp("avg_pool1d", (2, 3, 11), k, s, p, ceil, False)
    _cmp("avg_pool1d", (3, 11), k, s, p, ceil, True)


@pytest.mark.parametrize("o", [1, 2, 3, (4, 5), (None, 3), 7, (9, 8)])
def test_adaptive_avg_pool2d(o):
    _cmp("adaptive_avg_pool2d", (2, 3, 9, 8), o)
    _cmp("adaptive_avg_pool2d", (3, 9, 8), o)


def test_float32():
    _cmp("max_pool2d", (4, 8, 16, 16), 3, 2, 1, dtype=np.float32)
    _cmp("avg_pool2d", (4, 8, 16, 16), 3, 2, 1, dtype=np.float32)
    _cmp("adaptive_avg_pool2d", (4, 8, 16, 16), 5, dtype=np.float32)


def test_max_pool_ties_and_nan_like_torch():
    x = np.array([[[[1.0, 1.0, 2.0, 2.0, np.nan, 1.0], [1.0, 0.0, np.nan, 2.0, np.nan, 3.0]]]])
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    cv, ci = F.max_pool2d(cgrad.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(ci.numpy(), ti.numpy())
    np.testing.assert_array_equal(cv.numpy(), tv.numpy())
    xi = np.arange(30).reshape(1, 1, 5, 6) % 7
    ti = torch.nn.functional.max_pool2d(torch.tensor(xi), 2, 1, 1, return_indices=True)
    ci = F.max_pool2d(cgrad.tensor(xi), 2, 1, 1, return_indices=True)
    for a, b in zip(ci, ti):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.dtype == cgrad.int64


def test_gradchecks():
    x = cgrad.tensor(RNG.standard_normal((2, 2, 7, 6)), requires_grad=True)
    for f in (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
              lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
              lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
              lambda x: F.max_pool1d(x[0], 2),
              lambda x: F.avg_pool1d(x[0], 3, 2, 1)):
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


MODULES = [
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", ((2, 3),), {"stride": 1, "padding": 1, "dilation": 2, "return_indices": True,
                              "ceil_mode": True}),
    ("AvgPool2d", (2,), {}),
    ("AvgPool2d", (3, 1, 1, True, False, 2), {}),
    ("AdaptiveAvgPool2d", (3,), {}),
    ("AdaptiveAvgPool2d", ((None, 2),), {}),
    ("MaxPool1d", (3,), {}),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1}),
]


@pytest.mark.parametrize("name,args,kw", MODULES)
def test_modules(name, args, kw):
    tm, cm = getattr(torch.nn, name)(*args, **kw), getattr(nn, name)(*args, **kw)
    assert repr(cm) == repr(tm)
    shape = (2, 3, 11) if name.endswith("1d") else (2, 3, 9, 8)
    x = RNG.standard_normal(shape)
    ty, cy = tm(torch.tensor(x)), cm(cgrad.tensor(x))
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(cy[1].numpy(), ty[1].numpy())
        ty, cy = ty[0], cy[0]
    np.testing.assert_allclose(cy.numpy(), ty.numpy(), atol=1e-12)
    for attr in ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "output_size",
                 "count_include_pad", "divisor_override", "return_indices"):
        if hasattr(tm, attr):
            assert getattr(cm, attr) == getattr(tm, attr), attr


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.max_pool2d(m.randn(2, 3, 8, 8), 2, padding=2),
    lambda m: m.nn.functional.max_pool2d(m.randn(2, 2), 2),
    lambda m: m.nn.functional.max_pool2d(m.randn(2, 3, 8, 8), 20),
    lambda m: m.nn.functional.avg_pool2d(m.randn(2, 3, 8, 8), 2, padding=2),
    lambda m: m.nn.functional.avg_pool2d(m.randn(2, 3, 8, 8), 20),
    lambda m: m.nn.functional.max_pool2d(m.randn(2, 3, 8, 8), 0),
    lambda m: m.nn.functional.max_pool2d(m.randn(2, 3, 8, 8), 2, stride=0),
    lambda m: m.nn.functional.adaptive_avg_pool2d(m.randn(2), 2),
])
def test_errors_like_torch(case):
    with pytest.raises(Exception) as te:
        case(torch)
    with pytest.raises(Exception) as ce:
        case(cgrad)
    assert type(ce.value).__name__ == type(te.value).__name__
    assert str(ce.value) == re.sub(r"\s*\(Triggered internally.*", "", str(te.value))


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 5, 7), {"size": (9, 4)}), ((2, 3, 5, 7), {"scale_factor": 2}),
    ((2, 3, 5, 7), {"scale_factor": 1.7}), ((2, 3, 5, 7), {"scale_factor": (0.5, 2.3)}),
    ((2, 3, 7), {"size": 10}), ((2, 3, 7), {"scale_factor": 2.5}),
    ((2, 3, 5, 7), {"scale_factor": 1.7, "recompute_scale_factor": True}),
    ((2, 3, 6, 6), {"size": 4}),
])
def test_interpolate_nearest(shape, kw):
    _cmp("interpolate", shape, **kw)


def test_interpolate_gradcheck_and_upsample_module():
    x = cgrad.tensor(RNG.standard_normal((1, 2, 3, 4)), requires_grad=True)
    assert gradgradcheck(lambda x: F.interpolate(x, scale_factor=1.5), (x,))
    for args in ({"scale_factor": 2}, {"size": (3, 4)}, {"size": 5}):
        tm, cm = torch.nn.Upsample(**args), nn.Upsample(**args)
        assert repr(cm) == repr(tm)
    x = RNG.standard_normal((2, 3, 4, 5))
    np.testing.assert_array_equal(nn.Upsample(scale_factor=2)(cgrad.tensor(x)).numpy(),
                                  torch.nn.Upsample(scale_factor=2)(torch.tensor(x)).numpy())


# Note [Max pooling layout]: many planes (N * C > 2 * Wo) take the planes-last copy, few take
# the strided views; inputs without NaN take np.maximum and integer offset arithmetic, inputs
# that may hold NaN the masked copies. Every combination against torch, values bitwise.
@pytest.mark.parametrize("planes", [(1, 1), (2, 3), (16, 8)])
@pytest.mark.parametrize("case", ["plain", "ties", "signed_zero", "nan", "inf",
                                  "neg_inf_windows", "int_min", "int"])
@pytest.mark.parametrize("geom", [((2,), (2,), (0,), (1,), False), ((3,), (2,), (1,), (1,), True),
                                  ((3, 2), (1, 2), (1, 0), (2, 1), False),
                                  ((2, 3), (3, 2), (0, 1), (1, 1), True)])
def test_max_pool_layouts_like_torch(planes, case, geom):
    k, s, p, d, ceil = geom
    N, C = planes
    rng = np.random.default_rng(zlib.crc32(repr((planes, case, geom)).encode()))
    shape = (N, C, 7, 9)
    if case == "plain":
        x = rng.standard_normal(shape).astype(np.float32)
    elif case == "ties":
        x = rng.integers(0, 3, shape).astype(np.float64)
    elif case == "signed_zero":
        x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(np.float32)
    elif case == "nan":
        x = rng.standard_normal(shape)
        x[rng.random(shape) < 0.2] = np.nan
    elif case == "neg_inf_windows":                 # windows of -inf beside the padding
        x = np.full(shape, -np.inf, dtype=np.float32)
        x[rng.random(shape) < 0.2] = 1.0
    elif case == "inf":
        x = rng.standard_normal(shape).astype(np.float32)
        x[rng.random(shape) < 0.1] = np.inf
        x[rng.random(shape) < 0.1] = -np.inf
    elif case == "int_min":
        x = np.full(shape, np.iinfo(np.int64).min)
        x[rng.random(shape) < 0.2] = 3
    else:
        x = rng.integers(-5, 5, shape)
    kw = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil,
              return_indices=True)
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), **kw)
    cv, ci = F.max_pool2d(cgrad.tensor(x), **kw)
    np.testing.assert_array_equal(ci.numpy(), ti.numpy())
    assert cv.dtype == cgrad.tensor(x).dtype and ci.dtype == cgrad.int64
    assert cv.numpy().tobytes() == tv.numpy().tobytes()      # bitwise: -0.0, NaN, inf
    tv3, ti3 = torch.nn.functional.max_pool2d(torch.tensor(x[0]), **kw)       # unbatched
    cv3, ci3 = F.max_pool2d(cgrad.tensor(x[0]), **kw)
    np.testing.assert_array_equal(ci3.numpy(), ti3.numpy())
    assert cv3.numpy().tobytes() == tv3.numpy().tobytes()


def test_max_pool_planes_last_gradients_and_noncontiguous():
    x = RNG.standard_normal((6, 5, 9, 8))
    xs = x.transpose(0, 1, 3, 2)                      # a non-contiguous input
    tx, cx = torch.tensor(xs, requires_grad=True), cgrad.tensor(xs, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 3, 2, 1)
    cy = F.max_pool2d(cx, 3, 2, 1)
    np.testing.assert_array_equal(cy.detach().numpy(), ty.detach().numpy())
    g = RNG.standard_normal(ty.shape)
    ty.backward(torch.tensor(g))
    cy.backward(cgrad.tensor(g))
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=0, atol=1e-14)
    small = cgrad.tensor(RNG.standard_normal((3, 4, 6, 5)), requires_grad=True)
    assert gradcheck(lambda t: F.max_pool2d(t, 2, 1), (small,))
    assert gradgradcheck(lambda t: F.max_pool2d(t, 2, 1), (small,))


@pytest.mark.parametrize("geom", [(2, 2, 0, 1), (2, 3, 1, 1), (3, 2, 0, 1), (2, 3, 0, 2)])
def test_max_pool_backward_placement_like_torch(geom):
    # disjoint windows (stride >= dilated kernel) place the gradient instead of summing it;
    # overlapping ones sum; placed gradients are bitwise torch's, -0.0 included (torch: 0.0)
    k, s, p, d = geom
    x = RNG.standard_normal((3, 4, 9, 8)).astype(np.float32)
    tx, cx = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, k, s, p, d)
    cy = F.max_pool2d(cx, k, s, p, d)
    g = RNG.standard_normal(ty.shape).astype(np.float32)
    g[RNG.random(g.shape) < 0.3] = -0.0
    ty.backward(torch.tensor(g))
    cy.backward(cgrad.tensor(g))
    if d * (k - 1) + 1 <= s:
        assert cx.grad.numpy().tobytes() == tx.grad.numpy().tobytes()
    else:       # sums of several gradients: cgrad adds in float64, torch in float32
        np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    xs = cgrad.tensor(RNG.standard_normal((2, 2, 6, 5)), requires_grad=True)
    assert gradgradcheck(lambda t: F.max_pool2d(t, k, s, p, d), (xs,))
