"""Note [Sums by BLAS]: _fast_sum (gemv with a vector of ones over a leading or trailing block
of axes) against np.sum: shapes, axes, keepdims, dtypes, non-contiguous and small inputs (the
np.sum fallback), nan/inf, the cache of ones vectors (bounded, read-only, shared by threads),
and the users of it (softmax, log_softmax, layer_norm, linear's bias) against torch."""

import numpy as np
import pytest
from thread_util import run_threads

import cgrad
import cgrad.nn.functional as F
from cgrad.ops import _sums as R
from cgrad.ops._sums import _fast_sum

SHAPES_DIMS = [((64, 3), 0), ((64, 3), 1), ((64, 3), -1), ((5, 7, 9), (0,)), ((5, 7, 9), (0, 1)),
               ((5, 7, 9), (2,)), ((5, 7, 9), (1, 2)), ((5, 7, 9), (-2, -1)), ((5, 7, 9), (0, 2)),
               ((5, 7, 9), 1), ((2, 3, 4, 5), (0, 1, 2)), ((2, 3, 4, 5), (3,)),
               ((300, 1), 1), ((1, 300), 0), ((4097, 2), 0), ((2, 4097), 1)]


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-13)])
@pytest.mark.parametrize("shape,dims", SHAPES_DIMS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matches_np_sum(dtype, tol, shape, dims, keepdims):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = _fast_sum(a, dims, keepdims)
    want = np.sum(a, axis=dims, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(a.size))
    got[...] = 0                               # a new array: the input is untouched
    assert np.array_equal(a, np.random.default_rng(0).standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("make", [
    lambda r: r.standard_normal((9, 40)).T,                  # non-contiguous
    lambda r: r.standard_normal((3, 4)),                     # small: np.sum
    lambda r: r.integers(0, 5, (40, 40)),                    # integers: np.sum
    lambda r: r.standard_normal((40, 40)).astype(np.float16),
    lambda r: np.zeros((0, 70)), lambda r: np.zeros((70, 0))])
def test_fallbacks_equal_np_sum(make):
    a = make(np.random.default_rng(1))
    for dims in (0, 1, (0,), (1,)):
        got, want = _fast_sum(a, dims, True), np.sum(a, axis=dims, keepdims=True)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_nan_inf_propagate():
    a = np.ones((50, 8), np.float32)
    a[3, 2] = np.nan
    a[7, 1] = np.inf
    a[8, 1] = -np.inf
    a[9, 4] = np.inf
    with np.errstate(invalid="ignore"):     # inf - inf warns as np.sum's does
        rows = _fast_sum(a, 1)
        cols = _fast_sum(a, 0)
    assert np.isnan(rows[3]) and rows[7] == np.inf and rows[8] == -np.inf and rows[9] == np.inf
    assert rows[0] == 8
    assert np.isnan(cols[1]) and np.isnan(cols[2]) and cols[4] == np.inf and cols[0] == 50


def test_ones_cache_bounded_readonly_and_threads():
    R._ONES.clear()
    for n in range(64, 64 + 600):
        _fast_sum(np.ones((n, 1), np.float64) if n % 2 else np.ones((1, n)), 0 if n % 2 else 1)
    assert len(R._ONES) <= 257
    assert all(not v.flags.writeable for v in R._ONES.values())

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            n = int(rng.integers(64, 900))
            a = rng.standard_normal((n, 3)).astype(np.float32)
            np.testing.assert_allclose(_fast_sum(a, 0), a.sum(0), rtol=1e-4, atol=1e-4)
            R._ONES.clear() if rng.random() < 0.05 else None

    run_threads(work, [(s,) for s in range(4)])


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_users_match_torch(dtype, tol):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 11, 65)).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    w = rng.standard_normal((13, 65)).astype(dtype)
    b = rng.standard_normal(13).astype(dtype)
    gl = rng.standard_normal((6, 11, 13)).astype(dtype)
    lw, lb = rng.standard_normal(65).astype(dtype), rng.standard_normal(65).astype(dtype)
    for dim in (-1, 1, 0):
        for name in ("softmax", "log_softmax"):
            res = []
            for m, f in ((cgrad, getattr(F, name)), (torch, getattr(torch.nn.functional, name))):
                t = m.tensor(x, requires_grad=True)
                y = f(t, dim=dim)
                y.backward(m.tensor(g))
                res.append((y.detach().numpy(), t.grad.numpy()))
            for a, c in zip(*res):
                np.testing.assert_allclose(a, c, rtol=tol, atol=tol)
    res = []
    for m, fn in ((cgrad, F), (torch, torch.nn.functional)):
        t = m.tensor(x, requires_grad=True)
        W, B = m.tensor(w, requires_grad=True), m.tensor(b, requires_grad=True)
        LW, LB = m.tensor(lw, requires_grad=True), m.tensor(lb, requires_grad=True)
        y = fn.linear(fn.layer_norm(t, (65,), LW, LB), W, B)
        y.backward(m.tensor(gl))
        res.append([y.detach().numpy()] + [v.grad.numpy() for v in (t, W, B, LW, LB)])
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=tol * 10, atol=tol * 10)


def test_softmax_first_order_equals_double_backward_path():
    """The NumPy first-order backward and the Tensor path (create_graph) agree."""
    rng = np.random.default_rng(3)
    x = cgrad.tensor(rng.standard_normal((7, 33)), requires_grad=True)
    g = cgrad.tensor(rng.standard_normal((7, 33)))
    for f in (F.softmax, F.log_softmax):
        for dim in (0, 1):
            a, = cgrad.autograd.grad(f(x, dim=dim), x, g)
            b, = cgrad.autograd.grad(f(x, dim=dim), x, g, create_graph=True)
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-13, atol=1e-14)
        assert cgrad.autograd.gradgradcheck(lambda t: f(t, dim=1), (x,))
