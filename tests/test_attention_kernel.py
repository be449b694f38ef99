"""scaled_dot_product_attention's compiled float32 path (csrc/cg_attn.c, Note [Attention in
C]): forward and gradients against the NumPy path and torch, causal or not, odd shapes; the
cases that must keep the NumPy path; double backward; specials; bad input; threads."""
from __future__ import annotations

import numpy as np
import pytest
from thread_util import run_threads

import cgrad
import cgrad.nn.functional as F
from cgrad.nn.functional import _attention

fx = pytest.importorskip("cgrad._fused")
needs_kernel = pytest.mark.skipif(not (_attention._ATTN_EXT and fx.sgemm_available()),
                                  reason="the compiled path needs AVX-512F")

SHAPES = [(2, 3, 5, 7, 4, 6), (16, 2, 32, 32, 32, 32), (1, 1, 1, 1, 1, 1), (3, 9, 2, 8, 8),
          (2, 1, 40, 33, 17, 65)]


def _qkv(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    *lead, T, S, D, Dv = shape
    lead = tuple(lead)
    return (rng.standard_normal(lead + (T, D)).astype(dtype),
            rng.standard_normal(lead + (S, D)).astype(dtype),
            rng.standard_normal(lead + (S, Dv)).astype(dtype))


def _run(arrs, causal, g=None, scale=None):
    ts = [cgrad.tensor(a, requires_grad=True) for a in arrs]
    out = F.scaled_dot_product_attention(*ts, is_causal=causal, scale=scale)
    if g is None:
        g = np.random.default_rng(9).standard_normal(out.shape).astype(arrs[0].dtype)
    out.backward(cgrad.tensor(g))
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


@needs_kernel
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_the_numpy_path(shape, causal, monkeypatch):
    arrs = _qkv(shape)
    calls = []
    fwd = fx.attn_fwd_f32
    monkeypatch.setattr(fx, "attn_fwd_f32", lambda *a: calls.append(1) or fwd(*a))
    got = _run(arrs, causal, scale=0.3 if shape[0] == 3 else None)
    assert calls, "the compiled path was not taken"
    monkeypatch.setattr(_attention, "_ATTN_EXT", False)
    want = _run(arrs, causal, scale=0.3 if shape[0] == 3 else None)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@needs_kernel
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_against_torch_float64(causal):
    torch = pytest.importorskip("torch")
    arrs = _qkv((4, 2, 12, 12, 8, 8), seed=3)
    got = _run(arrs, causal)
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrs]
    out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
    g = np.random.default_rng(9).standard_normal(tuple(out.shape))
    out.backward(torch.tensor(g))
    want = [out.detach().numpy()] + [t.grad.numpy() for t in ts]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-6)


@needs_kernel
def test_other_cases_keep_the_numpy_path(monkeypatch):
    calls = []
    fwd = fx.attn_fwd_f32
    monkeypatch.setattr(fx, "attn_fwd_f32", lambda *a: calls.append(1) or fwd(*a))
    q, k, v = (cgrad.tensor(a) for a in _qkv((2, 4, 6, 6, 8, 8)))
    F.scaled_dot_product_attention(q, k, v, attn_mask=cgrad.ones(6, 6, dtype=cgrad.bool))
    F.scaled_dot_product_attention(q, k, v, attn_mask=cgrad.zeros(6, 6))
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    kv = cgrad.tensor(_qkv((2, 2, 6, 6, 8, 8))[1])
    F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    F.scaled_dot_product_attention(q, k[:1], v[:1])             # broadcast leading dims
    assert not calls
    F.scaled_dot_product_attention(q, k, v)
    assert calls == [1]
    # transposed views, as nanoGPT's (B, T, nh, hs).transpose(1, 2): copied, then compiled
    qt, kt, vt = (cgrad.tensor(np.ascontiguousarray(a.numpy().transpose(0, 2, 1, 3)),
                               requires_grad=True).transpose(1, 2) for a in (q, k, v))
    assert not qt._data.flags.c_contiguous
    got = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    assert calls == [1, 1]
    got.sum().backward()
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@needs_kernel
def test_double_backward_through_the_kernel_forward():
    q, k, v = (cgrad.tensor(a.astype(np.float32), requires_grad=True)
               for a in _qkv((2, 2, 5, 5, 4, 4), seed=1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (gq,) = cgrad.autograd.grad(out.square().sum(), q, create_graph=True)
    gq.sum().backward()
    with cgrad.no_grad():
        pass
    q2, k2, v2 = (cgrad.tensor(t.detach().numpy().astype(np.float64), requires_grad=True)
                  for t in (q, k, v))
    out2 = F.scaled_dot_product_attention(q2, k2, v2, is_causal=True)
    (gq2,) = cgrad.autograd.grad(out2.square().sum(), q2, create_graph=True)
    gq2.sum().backward()
    np.testing.assert_allclose(gq.detach().numpy(), gq2.detach().numpy(), rtol=1e-4, atol=1e-5)
    for a, b in ((q, q2), (k, k2), (v, v2)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3, atol=1e-4)


@needs_kernel
def test_nan_and_inf(monkeypatch):
    """A nan score makes its row nan (as the NumPy path: np.max propagates it); a key with an
    infinite score that the causal mask hides does not reach the row (as torch, which skips
    masked keys; so does the NumPy path, test_causal_mask_skips_an_infinite_key_on_every_path)."""
    arrs = list(_qkv((1, 2, 4, 4, 3, 3)))
    arrs[0][0, 0, 1, 2] = np.nan
    arrs[2][0, 0, 2, 1] = -np.inf
    with np.errstate(all="ignore"):
        got = fx.attn_fwd_f32(*arrs, 0.5, False)[0]
        monkeypatch.setattr(_attention, "_ATTN_EXT", False)
        want = F.scaled_dot_product_attention(*(cgrad.tensor(a) for a in arrs),
                                              scale=0.5).numpy()
    assert np.isnan(got[0, 0, 1]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    arrs = list(_qkv((1, 2, 4, 4, 3, 3), seed=2))
    arrs[1][0, 1, 3, :] = np.inf                 # key 3 of head 1: seen by row 3 only
    with np.errstate(all="ignore"):
        got = fx.attn_fwd_f32(*arrs, 0.5, True)[0]
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in arrs), is_causal=True, scale=0.5).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isfinite(got[0, 1, :3]).all()
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", ["kernel", "numpy"])
def test_causal_mask_skips_an_infinite_key_on_every_path(path, monkeypatch):
    """is_causal sets the masked scores to -inf (torch skips those keys): a key whose score
    is infinite does not make the rows that cannot see it nan, on the compiled path and the
    NumPy path. Rows that do see it are nan, as torch's. (The gradients are nan throughout,
    in torch too: 0 * inf in dS K.)"""
    torch = pytest.importorskip("torch")
    if path == "kernel" and not (_attention._ATTN_EXT and fx.sgemm_available()):
        pytest.skip("no compiled attention here")
    if path != "kernel":
        monkeypatch.setattr(_attention, "_ATTN_EXT", False)
    arrs = list(_qkv((1, 2, 4, 4, 3, 3), seed=2))
    arrs[1][0, 1, 3, :] = np.inf                 # key 3 of head 1: seen by row 3 only
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in arrs), is_causal=True, scale=0.5).numpy()
    with np.errstate(all="ignore"):
        got = F.scaled_dot_product_attention(*(cgrad.tensor(a) for a in arrs),
                                             is_causal=True, scale=0.5).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isfinite(got[0, 1, :3]).all()
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6)


@needs_kernel
def test_empty_key_sequence_gives_zeros():
    q, k, v = _qkv((2, 2, 3, 0, 4, 5))
    o, p = fx.attn_fwd_f32(q, k, v, 0.5, False)
    assert o.shape == (2, 2, 3, 5) and not o.any() and p.shape == (2, 2, 3, 0)


def test_bad_input_raises():
    q, k, v = _qkv((2, 2, 3, 3, 4, 4))
    with pytest.raises(TypeError, match="float32"):
        fx.attn_fwd_f32(q.astype(np.float64), k, v, 1.0, False)
    with pytest.raises(TypeError, match="float32"):
        fx.attn_fwd_f32([[1.0]], k, v, 1.0, False)
    with pytest.raises(ValueError, match="C-contiguous"):
        fx.attn_fwd_f32(q, k.transpose(0, 1, 3, 2), v, 1.0, False)
    with pytest.raises(ValueError, match="at least 2"):
        fx.attn_fwd_f32(q.ravel(), k, v, 1.0, False)
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        fx.attn_fwd_f32(q, k[0], v, 1.0, False)
    with pytest.raises(ValueError, match="same leading"):
        fx.attn_fwd_f32(q, k[:1].copy(), v, 1.0, False)
    with pytest.raises(ValueError, match="k must be"):
        fx.attn_fwd_f32(q, k[..., :3].copy(), v, 1.0, False)
    res = fx.attn_fwd_f32(q, k, v, 1.0, True)
    if res is None:
        return
    o, p = res
    with pytest.raises(ValueError, match="do not fit"):
        fx.attn_bwd_f32(q, k, v, p[..., :2].copy(), o, 1.0, True)
    with pytest.raises(ValueError, match="do not fit"):
        fx.attn_bwd_f32(q, k, v, p, o[..., :2].copy(), 1.0, True)


@needs_kernel
def test_threads():
    arrs = _qkv((4, 2, 16, 16, 8, 8), seed=5)
    ref = _run(arrs, True)
    got = [None] * 4

    def work(i):
        for _ in range(10):
            got[i] = _run(arrs, True)

    run_threads(work, [(i,) for i in range(4)])
    for g in got:
        for a, b in zip(g, ref):
            np.testing.assert_array_equal(a, b)
