"""layer_norm's first-order NumPy backward and its float32 kernel (Note [Layer norm in one
pass]): gradients against torch for odd shapes, non-contiguous input, float32/float64,
with/without weight and bias, only some inputs requiring grad, empty, on both paths; the
kernel against float64 formulas, its checks, threads."""
import numpy as np
import pytest
from thread_util import run_threads

import cgrad
import cgrad.nn.functional as F
from cgrad.nn.functional import _normalization

torch = pytest.importorskip("torch")


@pytest.fixture(params=["kernel", "numpy"])
def ln_path(request, monkeypatch):
    if request.param == "kernel" and not _normalization._LN_EXT:
        pytest.skip("cgrad._fused not built")
    monkeypatch.setattr(_normalization, "_LN_EXT", request.param == "kernel")
    return request.param


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("shape,k", [((3, 5, 7), 1), ((2, 3, 5), 2), ((7,), 1), ((0, 4), 1),
                                     ((4, 0, 3), 1)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("req", [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)])
@pytest.mark.parametrize("transposed", [False, True])
def test_layer_norm_backward_matches_torch(dtype, tol, shape, k, affine, req, transposed,
                                           ln_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape[::-1] if transposed else shape).astype(dtype)
    if transposed:
        x = x.T                 # non-contiguous view
    ns = shape[len(shape) - k:]
    w = rng.standard_normal(ns).astype(dtype)
    b = rng.standard_normal(ns).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    if not affine:
        req = (1, 0, 0)
    out = {}
    for m in (cgrad, torch):
        xs = m.tensor(np.ascontiguousarray(x), requires_grad=bool(req[0]))
        if transposed and m is cgrad:
            xs = m.tensor(x.T.copy(), requires_grad=bool(req[0]))
            xs_leaf, xs = xs, None
        ws = m.tensor(w, requires_grad=bool(req[1])) if affine else None
        bs = m.tensor(b, requires_grad=bool(req[2])) if affine else None
        if transposed and m is cgrad:
            xin = xs_leaf.transpose(0, -1) if len(shape) > 1 else xs_leaf
            leaf = xs_leaf
        else:
            xin = leaf = xs
        y = F.layer_norm(xin, ns, ws, bs) if m is cgrad else \
            torch.nn.functional.layer_norm(xin, ns, ws, bs)
        y.backward(m.tensor(g))
        out[m] = [t.grad for t in (leaf, ws, bs) if t is not None and t.requires_grad]
    for a, t in zip(out[cgrad], out[torch]):
        ga = np.asarray(a.numpy())
        if ga.shape != tuple(t.shape):
            ga = ga.T
        np.testing.assert_allclose(ga, t.numpy(), rtol=tol, atol=tol)


def test_layer_norm_gradcheck_float64():
    rng = np.random.default_rng(2)
    x = cgrad.tensor(rng.standard_normal((3, 4, 5)), requires_grad=True)
    w = cgrad.tensor(rng.standard_normal(5), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal(5), requires_grad=True)
    assert cgrad.autograd.gradcheck(lambda x, w, b: F.layer_norm(x, (5,), w, b), (x, w, b))


def _ln_ref(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    y = (x - mu) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, rstd


@pytest.mark.parametrize("C", [1, 7, 8, 64, 1000])
@pytest.mark.parametrize("affine", [True, False])
def test_kernel_against_float64(C, affine):
    fx = pytest.importorskip("cgrad._fused")
    rng = np.random.default_rng(C)
    x = (3 + 2 * rng.standard_normal((33, C))).astype(np.float32)
    w = rng.standard_normal(C).astype(np.float32) if affine else None
    b = rng.standard_normal(C).astype(np.float32) if affine else None
    y, mu, rstd = fx.layer_norm_f32(x, w, b, 1e-5)
    ry, rmu, rrstd = _ln_ref(x, w, b, 1e-5)
    assert y.dtype == mu.dtype == rstd.dtype == np.float32 and mu.shape == (33, 1)
    np.testing.assert_allclose(mu, rmu, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, rrstd, rtol=1e-6)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
    g = rng.standard_normal((33, C)).astype(np.float32)
    gx, gw, gb = fx.layer_norm_bwd_f32(x, mu, rstd, w, g, True, affine, affine)
    X, G = x.astype(np.float64), g.astype(np.float64)
    xh = (X - rmu) * rrstd
    gh = G * w if affine else G
    rgx = (gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True)) * rrstd
    np.testing.assert_allclose(gx, rgx, rtol=1e-4, atol=1e-5)
    if affine:
        np.testing.assert_allclose(gw, (G * xh).sum(0), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(gb, G.sum(0), rtol=1e-5, atol=1e-5)
    else:
        assert gw is None and gb is None


def test_kernel_specials_and_constant_rows():
    fx = pytest.importorskip("cgrad._fused")
    x = np.array([[1, 1, 1, 1], [0, np.nan, 0, 0], [np.inf, 0, 0, 0]], np.float32)
    y, mu, rstd = fx.layer_norm_f32(x, None, None, 1e-5)
    assert (y[0] == 0).all() and np.isclose(rstd[0, 0], 1 / np.sqrt(1e-5))
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()
    ty = torch.nn.functional.layer_norm(torch.tensor(x), (4,)).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ty))


def test_kernel_rejects_bad_input():
    fx = pytest.importorskip("cgrad._fused")
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="float32"):
        fx.layer_norm_f32(x.astype(np.float64), None, None, 1e-5)
    with pytest.raises(ValueError, match="weight must have 4 elements"):
        fx.layer_norm_f32(x, np.ones(3, np.float32), None, 1e-5)
    with pytest.raises(TypeError, match="bias must be a float32"):
        fx.layer_norm_f32(x, None, np.ones(4), 1e-5)
    y, mu, rstd = fx.layer_norm_f32(x, None, None, 1e-5)
    with pytest.raises(ValueError, match="one shape"):
        fx.layer_norm_bwd_f32(x, mu, rstd, None, np.zeros((3, 5), np.float32), 1, 0, 0)
    with pytest.raises(ValueError, match="mu and rstd must have 3 elements"):
        fx.layer_norm_bwd_f32(x, mu[:2], rstd, None, x, 1, 0, 0)


def test_kernel_path_on_four_threads():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((64, 48)).astype(np.float32)

    def run():
        x = cgrad.tensor(x0, requires_grad=True)
        w = cgrad.ones(48, requires_grad=True)
        F.layer_norm(x, (48,), w, None).square().sum().backward()
        return x.grad.numpy().copy(), w.grad.numpy().copy()

    ref = run()
    got = [None] * 4

    def work(k):
        for _ in range(20):
            got[k] = run()

    run_threads(work, [(k,) for k in range(4)])
    for g in got:
        for a, b in zip(g, ref):
            np.testing.assert_array_equal(a, b)
