"""layer_norm's first-order NumPy backward: gradients against torch for odd shapes, non-contiguous
input, float32/float64, with/without weight and bias, only some inputs requiring grad, empty."""
import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("shape,k", [((3, 5, 7), 1), ((2, 3, 5), 2), ((7,), 1), ((0, 4), 1),
                                     ((4, 0, 3), 1)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("req", [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)])
@pytest.mark.parametrize("transposed", [False, True])
def test_layer_norm_backward_matches_torch(dtype, tol, shape, k, affine, req, transposed):
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
