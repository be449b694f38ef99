"""cgrad._fused: the fused LSTM step kernels (csrc/cg_fused.c) and their use by nn.LSTM.

* the float32 exp / tanh / sigmoid against float64 references (ulp bounds over a dense grid,
  the subnormal tail, nan, +-inf, +-0);
* one step forward and backward against the NumPy formulas, float64 and float32, with row
  offsets, partial batches (packed sequences) and hidden sizes that leave vector tails;
* the Python layer: wrong types, dtypes, layouts, read-only outputs, overlapping arrays,
  rows out of range raise TypeError/ValueError and write nothing;
* nn.LSTM on the fused path equals the NumPy path (float64 to 1e-13, float32 to rounding)
  for packed variable lengths, bidirectional, with gradients; threads share nothing;
* the whole float32 time loop in C (lstm_seq_fwd / lstm_seq_bwd, W_hh packed for the GEMM of
  csrc/cg_gemm.c): the bits of the step-by-step loop over the same GEMM, its checks, and
  nn.LSTM through it against the NumPy path.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from thread_util import run_threads

import cgrad
import cgrad.nn as nn
from cgrad import _threads
from cgrad.nn.functional import _rnn
from cgrad.nn.utils import rnn as rnn_utils

_fused = pytest.importorskip("cgrad._fused")

F32 = np.float32
TINY = np.finfo(F32).tiny


def _ulps(got, ref):
    """|got - ref| in units of the float32 spacing at ref (ref float64, normal results)."""
    ref32 = ref.astype(F32)
    keep = np.isfinite(ref32) & (np.abs(ref32) >= TINY)
    return np.abs(got[keep].astype(np.float64) - ref[keep]) / np.spacing(
        np.abs(ref32[keep])).astype(np.float64)


GRID = np.linspace(-120, 120, 1_200_001, dtype=F32)


def test_exp_of_nonpositive_within_one_ulp():
    x = np.concatenate([GRID[GRID <= 0], -np.abs(np.random.default_rng(0).standard_normal(
        100_000, dtype=F32)), -np.logspace(-30, 2, 10_000, dtype=F32)])
    got = _fused.map_f32("exp", x)
    ref = np.exp(x.astype(np.float64))
    assert _ulps(got, ref).max() <= 1.0
    # the subnormal tail: at most 1 unit of the smallest subnormal off, and 0 below it
    sub = (ref < TINY)
    assert np.abs(got[sub].astype(np.float64) - ref[sub]).max() <= 1.5e-45
    assert _fused.map_f32("exp", np.float32([-104.0, -1e4, -np.inf])).tolist() == [0, 0, 0]
    assert _fused.map_f32("exp", np.float32([0.0, -0.0])).tolist() == [1.0, 1.0]
    assert np.isnan(_fused.map_f32("exp", np.float32([np.nan])))[0]


@pytest.mark.parametrize("name,ref,bound", [
    ("tanh", np.tanh, 2.0),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), 3.0),
])
def test_tanh_and_sigmoid_bounds(name, ref, bound):
    x = np.concatenate([GRID, np.random.default_rng(1).standard_normal(200_000, dtype=F32),
                        np.logspace(-38, 1, 20_000, dtype=F32),
                        -np.logspace(-38, 1, 20_000, dtype=F32)])
    got = _fused.map_f32(name, x)
    with np.errstate(over="ignore"):
        r = ref(x.astype(np.float64))
    assert _ulps(got, r).max() <= bound
    # the same (or subnormal-close) tails as the float64 function rounded
    with np.errstate(over="ignore"):
        assert np.abs(got - r.astype(F32)).max() <= 2 * np.spacing(F32(1))


def test_specials():
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 100.0, -100.0])
    t = _fused.map_f32("tanh", x)
    assert t[:4].tolist() == [0.0, 0.0, 1.0, -1.0] and np.isnan(t[4])
    assert t[5:].tolist() == [F32(1e-30), F32(-1e-30), 1.0, -1.0]
    s = _fused.map_f32("sigmoid", x)
    assert s[:4].tolist() == [0.5, 0.5, 1.0, 0.0] and np.isnan(s[4])
    assert s[5] == 0.5 and s[6] == 0.5 and s[7] == 1.0
    assert s[8] == F32(1 / (1 + np.exp(100.0)))           # subnormal, as torch's
    with pytest.raises(ValueError, match="which must be one of"):
        _fused.map_f32("log", x)


# --- one step against the NumPy formulas ----------------------------------------------------

def _sig(a):
    return 1 / (1 + np.exp(-a))


def _ref_fwd(gi, hh, c):
    H = c.shape[1]
    a = gi + hh
    i, f, o = _sig(a[:, :H]), _sig(a[:, H:2 * H]), _sig(a[:, 3 * H:])
    g = np.tanh(a[:, 2 * H:3 * H])
    cn = f * c + i * g
    tc = np.tanh(cn)
    return np.concatenate([i, f, g, o], 1), cn, tc, o * tc


def _ref_bwd(acts, tc, cp, go, dh, dc):
    H = tc.shape[1]
    i, f, g, o = (acts[:, k * H:(k + 1) * H] for k in range(4))
    dhv = dh + go
    dcv = dc + (1 - tc * tc) * o * dhv
    d = np.concatenate([(1 - i) * i * g * dcv, (1 - f) * f * cp * dcv,
                        (1 - g * g) * i * dcv, (1 - o) * o * tc * dhv], 1)
    return d, dcv * f


def _step_arrays(rng, dt, N, B, H):
    gi = (rng.standard_normal((N, 4 * H)) * 3).astype(dt)
    hh = (rng.standard_normal((B, 4 * H)) * 3).astype(dt)
    c = rng.standard_normal((B, H)).astype(dt)
    return gi, hh, c


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("H", [1, 7, 16, 33, 128])
def test_step_forward_and_backward(dt, H):
    rng = np.random.default_rng(H)
    N, B, lo, n = 40, 9, 13, 6               # rows lo:lo+n of the sequence, :n of the state
    gi, hh, c = _step_arrays(rng, dt, N, B, H)
    c0 = c.copy()
    h = np.full((B, H), 7, dt)
    acts = np.full((N, 4 * H), 7, dt)
    cs, tcs, hs = (np.full((N, H), 7, dt) for _ in range(3))
    _fused.lstm_fwd(lo, n, gi, hh, c, h, acts, cs, tcs, hs)
    ra, rc, rt, rh = _ref_fwd(gi[lo:lo + n].astype(np.float64), hh[:n].astype(np.float64),
                              c0[:n].astype(np.float64))
    tol = dict(rtol=1e-14, atol=1e-15) if dt == np.float64 else dict(rtol=2e-6, atol=2e-7)
    for got, ref in [(acts[lo:lo + n], ra), (cs[lo:lo + n], rc), (tcs[lo:lo + n], rt),
                     (hs[lo:lo + n], rh), (c[:n], rc), (h[:n], rh)]:
        np.testing.assert_allclose(got, ref, **tol)
    # rows outside the step are untouched
    assert (acts[:lo] == 7).all() and (acts[lo + n:] == 7).all() and (hs[:lo] == 7).all()
    np.testing.assert_array_equal(c[n:], c0[n:])
    assert (h[n:] == 7).all()

    cprev = rng.standard_normal((N, H)).astype(dt)
    go = rng.standard_normal((N, H)).astype(dt)
    dh = rng.standard_normal((B, H)).astype(dt)
    dc = rng.standard_normal((B, H)).astype(dt)
    dh0, dc0 = dh.copy(), dc.copy()
    d = np.full((N, 4 * H), 7, dt)
    _fused.lstm_bwd(lo, n, acts, tcs, cprev, go, dh, dc, d)
    rd, rdc = _ref_bwd(*(a.astype(np.float64) for a in (
        acts[lo:lo + n], tcs[lo:lo + n], cprev[lo:lo + n], go[lo:lo + n], dh0[:n], dc0[:n])))
    np.testing.assert_allclose(d[lo:lo + n], rd, **tol)
    np.testing.assert_allclose(dc[:n], rdc, **tol)
    np.testing.assert_array_equal(dh, dh0)          # read only
    np.testing.assert_array_equal(dc[n:], dc0[n:])
    assert (d[:lo] == 7).all() and (d[lo + n:] == 7).all()


def test_step_float32_matches_numpy_float32_to_rounding():
    """The float32 kernel against the same formulas in NumPy float32 (what the NumPy path
    computes): a few ulp of the values, never more."""
    rng = np.random.default_rng(5)
    N, B, H = 64, 64, 128
    gi, hh, c = _step_arrays(rng, F32, N, B, H)
    ra, rc, rt, rh = _ref_fwd(gi, hh, c.copy())
    h = np.empty((B, H), F32)
    acts = np.empty((N, 4 * H), F32)
    cs, tcs, hs = (np.empty((N, H), F32) for _ in range(3))
    _fused.lstm_fwd(0, B, gi, hh, c, h, acts, cs, tcs, hs)
    for got, ref in [(acts, ra), (cs, rc), (tcs, rt), (hs, rh)]:
        assert np.abs(got - ref).max() <= 8 * np.spacing(F32(np.abs(ref).max()))


def test_empty_step_and_zero_hidden():
    gi = np.zeros((4, 8)); hh = np.zeros((2, 8)); c = np.zeros((2, 2)); h = np.zeros((2, 2))
    acts = np.zeros((4, 8)); cs, tcs, hs = np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 2))
    _fused.lstm_fwd(4, 0, gi, hh, c, h, acts, cs, tcs, hs)      # n = 0 at the end: no-op
    z0 = np.zeros((3, 0))
    _fused.lstm_fwd(0, 3, z0, z0.copy(), z0.copy(), z0.copy(), z0.copy(), z0.copy(),
                    z0.copy(), z0.copy())
    assert not acts.any() and not c.any()


# --- the Python layer rejects what the kernels cannot take ----------------------------------

def _fwd_args(dt=np.float64, N=6, B=3, H=2):
    return [np.zeros((N, 4 * H), dt), np.zeros((B, 4 * H), dt), np.zeros((B, H), dt),
            np.zeros((B, H), dt), np.zeros((N, 4 * H), dt), np.zeros((N, H), dt),
            np.zeros((N, H), dt), np.zeros((N, H), dt)]


@pytest.mark.parametrize("pos,bad,exc,msg", [
    (0, [[0.0] * 8] * 6, TypeError, "gates array must be a 2-D ndarray"),
    (0, np.zeros((6, 7)), ValueError, "not a multiple of 4"),
    (0, np.zeros((6, 8), np.float16), TypeError, "only float32 and float64"),
    (0, np.zeros((6, 8), np.int64), TypeError, "only float32 and float64"),
    (2, np.zeros((3, 2), np.float32), TypeError, "c has dtype float32, expected float64"),
    (1, np.zeros((3, 16))[:, ::2], ValueError, "hh must be a C-contiguous"),
    (2, np.zeros((2, 3)).T, ValueError, "c must be a C-contiguous"),
    (3, np.zeros((3, 3)), ValueError, "h has 3 columns, expected 2"),
    (4, np.zeros((6, 8, 1)), ValueError, "acts must be 2-D"),
    (5, [[0.0, 0.0]] * 6, TypeError, "cs must be an ndarray, got list"),
    (6, np.zeros((3, 2)), ValueError, "rows 2:4 out of range for tcs with 3 rows"),
    (2, np.zeros((1, 2)), ValueError, "rows 0:2 out of range for c with 1 rows"),
])
def test_forward_rejects(pos, bad, exc, msg):
    args = _fwd_args()
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    args[pos] = bad
    with pytest.raises(exc, match=msg):
        _fused.lstm_fwd(2, 2, *args)
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype:
            np.testing.assert_array_equal(a, b)


def test_readonly_and_overlap_rejected():
    args = _fwd_args()
    args[5].flags.writeable = False
    with pytest.raises(ValueError, match="cs must be a C-contiguous aligned native writeable"):
        _fused.lstm_fwd(0, 3, *args)
    args = _fwd_args()
    args[6] = args[5]                                   # tcs is cs
    with pytest.raises(ValueError, match="must not overlap"):
        _fused.lstm_fwd(0, 3, *args)
    args = _fwd_args()
    big = np.zeros((7, 2))
    args[5], args[6] = big[:6], big[1:]                 # overlapping views
    with pytest.raises(ValueError, match="must not overlap"):
        _fused.lstm_fwd(0, 3, *args)
    args[5], args[6] = big[:3], big[3:6]                # adjacent rows 0:3 of each: disjoint
    _fused.lstm_fwd(0, 3, *args)
    bw = [np.zeros((6, 8)), np.zeros((6, 2)), np.zeros((6, 2)), np.zeros((6, 2)),
          np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((6, 8))]
    bw[5] = bw[4]                                       # dc is dh
    with pytest.raises(ValueError, match="must not overlap"):
        _fused.lstm_bwd(0, 3, *bw)
    with pytest.raises(ValueError, match="rows -1:2"):
        _fused.lstm_bwd(-1, 3, *_fwd_args()[:1], *bw[1:4], np.zeros((3, 2)), np.zeros((3, 2)),
                        bw[6])
    bw[2] = np.zeros((6, 2), np.float32)
    with pytest.raises(TypeError, match="cprev has dtype float32"):
        _fused.lstm_bwd(0, 3, *bw)


# --- nn.LSTM: the fused path against the NumPy path -----------------------------------------

def _run_lstm(fused, dtype, packed, seed=0, seq=False):
    """seq: as if the BLAS ran on one thread, so that float32 layers pack W_hh and run
    their time loops in C (lstm_seq_*); else the state's own setting. (Both switches are
    module state: threads must not call this with different settings at once.)"""
    prev, prev_single = _rnn._FUSED, _threads._state["single"]
    _rnn._FUSED = fused
    _threads._state["single"] = True if seq else prev_single
    try:
        m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, dtype=dtype)
        rng = np.random.default_rng(seed)       # weights from a local stream (threads)
        m.load_state_dict({k: rng.uniform(-0.5, 0.5, v.shape) for k, v in m.state_dict().items()})
        x = cgrad.tensor(rng.standard_normal((6, 4, 3)), dtype=dtype, requires_grad=True)
        h0 = cgrad.tensor(rng.standard_normal((4, 4, 5)), dtype=dtype, requires_grad=True)
        c0 = cgrad.tensor(rng.standard_normal((4, 4, 5)), dtype=dtype, requires_grad=True)
        if packed:
            inp = rnn_utils.pack_padded_sequence(x, [6, 2, 4, 1], enforce_sorted=False)
            out, (hn, cn) = m(inp, (h0, c0))
            out = rnn_utils.pad_packed_sequence(out)[0]
        else:
            out, (hn, cn) = m(x, (h0, c0))
        w = [cgrad.tensor(np.random.default_rng(9).standard_normal(t.shape), dtype=dtype)
             for t in (out, hn, cn)]
        ((out * w[0]).sum() + (hn * w[1]).sum() + (cn * w[2]).sum()).backward()
        res = [t.detach().numpy() for t in (out, hn, cn)]
        res += [t.grad.numpy() for t in (x, h0, c0)] + [p.grad.numpy() for p in m.parameters()]
        return res
    finally:
        _rnn._FUSED = prev
        _threads._state["single"] = prev_single


@pytest.mark.parametrize("packed", [False, True])
def test_lstm_fused_equals_numpy_path_float64(packed):
    for a, b in zip(_run_lstm(True, cgrad.float64, packed), _run_lstm(False, cgrad.float64, packed)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("packed", [False, True])
def test_lstm_fused_equals_numpy_path_float32(packed):
    for a, b in zip(_run_lstm(True, cgrad.float32, packed), _run_lstm(False, cgrad.float32, packed)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_lstm_threads():
    """Four threads running the fused LSTM at once get what one thread gets (the kernels
    release the GIL and keep no state)."""
    ref = _run_lstm(True, cgrad.float32, True, seed=3)
    got = [None] * 4

    def work(k):
        for _ in range(5):
            got[k] = _run_lstm(True, cgrad.float32, True, seed=3)

    run_threads(work, [(k,) for k in range(4)])
    for g in got:
        for a, b in zip(g, ref):
            np.testing.assert_array_equal(a, b)


def test_lstm_float32_against_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.LSTM(8, 32, num_layers=2, batch_first=True)
    cm = nn.LSTM(8, 32, num_layers=2, batch_first=True)
    cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 20, 8)).astype(F32)
    tx, cx = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
    to, co = tm(tx)[0], cm(cx)[0]
    np.testing.assert_allclose(co.detach().numpy(), to.detach().numpy(), atol=2e-6)
    to.square().sum().backward()
    co.square().sum().backward()
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), atol=1e-5, rtol=1e-4)
    tp = dict(tm.named_parameters())
    for k, p in cm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[k].grad.numpy(), atol=1e-5, rtol=1e-4)


# --- the whole time loop in C (float32, W_hh packed) -----------------------------------------
needs_gemm = pytest.mark.skipif(not _fused.sgemm_available(), reason="needs AVX-512F")


def _seq_arrays(rng, N, B, H, I=3):
    x = rng.standard_normal((N, I)).astype(F32)
    wih = (0.5 * rng.standard_normal((4 * H, I))).astype(F32)
    whh = (0.3 * rng.standard_normal((4 * H, H))).astype(F32)
    bias = rng.standard_normal(4 * H).astype(F32)
    st = [rng.standard_normal((B, H)).astype(F32) for _ in range(2)]
    return x, wih, whh, bias, st


@needs_gemm
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bs,H", [([3, 3, 3], 5), ([4, 3, 3, 1], 33), ([2], 1), ([], 4)])
def test_lstm_seq_has_the_bits_of_the_step_loop(bs, H, reverse, with_bias):
    rng = np.random.default_rng(len(bs) * 10 + H)
    offsets = np.concatenate([[0], np.cumsum(bs)]).astype(np.int64)
    N, B = int(offsets[-1]), max(bs, default=2)
    x, wih, whh, bias, (h0, c0) = _seq_arrays(rng, N, B, H)
    bias = bias if with_bias else None
    order = range(len(bs) - 1, -1, -1) if reverse else range(len(bs))

    def fresh():
        return (np.zeros((B, 4 * H), F32), c0.copy(), h0.copy(), np.zeros((N, 4 * H), F32),
                np.zeros((N, H), F32), np.zeros((N, H), F32), np.zeros((N, H), F32))

    a = fresh()
    _fused.lstm_seq_fwd(offsets, reverse, _fused.pack_b(wih.T), _fused.pack_b(whh.T), x, bias,
                        *a)
    b = fresh()                                 # the same steps from Python
    pih, phh = _fused.pack_b(wih.T), _fused.pack_b(whh.T)
    gi = np.zeros((N, 4 * H), F32) + (bias if with_bias else 0)
    for t in order:
        lo, n = offsets[t], offsets[t + 1] - offsets[t]
        _fused.sgemm_packed(x[lo:lo + n], pih, b[0][:n])
        _fused.sgemm_packed(b[2][:n], phh, b[0][:n], accumulate=True)
        _fused.lstm_fwd(lo, n, gi, b[0], b[1], b[2], *b[3:])
    for p, q in zip(a[1:], b[1:]):
        np.testing.assert_array_equal(p, q)
    acts, tcs = a[3], a[5]
    cprev = rng.standard_normal((N, H)).astype(F32)
    go = rng.standard_normal((N, H)).astype(F32)

    def fresh_b():
        return np.ones((B, H), F32), np.full((B, H), 0.5, F32), np.zeros((N, 4 * H), F32)

    dh, dc, d = fresh_b()
    _fused.lstm_seq_bwd(offsets, reverse, _fused.pack_b(whh), acts, tcs, cprev, go, dh, dc, d)
    dh2, dc2, d2 = fresh_b()
    pkb = _fused.pack_b(whh)
    for t in reversed(order):
        lo, n = offsets[t], offsets[t + 1] - offsets[t]
        _fused.lstm_bwd(lo, n, acts, tcs, cprev, go, dh2, dc2, d2)
        _fused.sgemm_packed(d2[lo:lo + n], pkb, dh2[:n])
    for p, q in zip((dh, dc, d), (dh2, dc2, d2)):
        np.testing.assert_array_equal(p, q)


def _seq_fwd_args(N=6, B=3, H=2):
    rng = np.random.default_rng(0)
    x, wih, whh, bias, (h0, c0) = _seq_arrays(rng, N, B, H)
    return [np.array([0, 3, 5, 6], np.int64), False, _fused.pack_b(wih.T),
            _fused.pack_b(whh.T), x, bias, np.zeros((B, 4 * H), F32), c0, h0,
            np.zeros((N, 4 * H), F32), np.zeros((N, H), F32), np.zeros((N, H), F32),
            np.zeros((N, H), F32)]


@needs_gemm
@pytest.mark.parametrize("pos,bad,exc,msg", [
    (0, np.array([0, 3, 5, 6], np.int32), TypeError, "offsets must be a contiguous 1-D int64"),
    (0, [0, 3, 5, 6], TypeError, "offsets must be a contiguous 1-D int64"),
    (0, np.array([1, 3, 5, 6], np.int64), ValueError, "offsets must run from 0"),
    (0, np.array([0, 3, 5, 7], np.int64), ValueError, "offsets must run from 0"),
    (0, np.array([0, 4, 5, 6], np.int64), ValueError, "step 0 has 4 rows"),
    (0, np.array([0, 3, 2, 6], np.int64), ValueError, "step 1 has -1 rows"),
    (0, np.array([], np.int64), ValueError, "offsets must run from 0"),
    (2, None, TypeError, "wih_t"),
    (3, None, TypeError, "whh_t"),
    (3, "pack", ValueError, r"whh_t must be \(2, 8\)"),
    (2, "pack", ValueError, r"wih_t must be \(3, 8\), got \(8, 8\)"),
    (4, np.zeros((6, 3)), TypeError, "float32"),
    (4, np.zeros((6, 4), F32), ValueError, r"wih_t must be \(4, 8\), got \(3, 8\)"),
    (4, np.zeros((5, 3), F32), ValueError, "rows 0:6 out of range for x with 5 rows"),
    (4, np.zeros(6, F32), TypeError, "must be a 2-D ndarray"),
    (5, np.zeros(7, F32), ValueError, "bias has 7 columns, expected 8"),
    (5, [0.0] * 8, TypeError, "bias must be a 1-D ndarray"),
    (5, np.zeros(8), TypeError, "bias has dtype float64"),
    (6, np.zeros((3, 8), F32)[:, ::-1], ValueError, "hh must be a C-contiguous"),
    (8, np.zeros((3, 3), F32), ValueError, "h has 3 columns"),
])
def test_lstm_seq_rejects(pos, bad, exc, msg):
    args = _seq_fwd_args()
    if isinstance(bad, str):
        bad = _fused.pack_b(np.zeros((8, 2) if pos == 3 else (8, 8), F32))
    args[pos] = bad
    before = [a.copy() for a in args[6:]]
    with pytest.raises(exc, match=msg):
        _fused.lstm_seq_fwd(*args)
    for a, b in zip(args[6:], before):
        if a.shape == b.shape and a.dtype == b.dtype:
            np.testing.assert_array_equal(a, b)


@needs_gemm
def test_lstm_seq_rejects_overlap_and_bad_backward_input():
    args = _seq_fwd_args()
    args[10] = args[11]                                 # cs is tcs
    with pytest.raises(ValueError, match="overlap"):
        _fused.lstm_seq_fwd(*args)
    N, B, H = 6, 3, 2
    off = np.array([0, 3, 5, 6], np.int64)
    pk = _fused.pack_b(np.zeros((4 * H, H), F32))
    arrs = [np.zeros((N, 4 * H), F32), np.zeros((N, H), F32), np.zeros((N, H), F32),
            np.zeros((N, H), F32), np.zeros((B, H), F32), np.zeros((B, H), F32),
            np.zeros((N, 4 * H), F32)]
    _fused.lstm_seq_bwd(off, True, pk, *arrs)
    with pytest.raises(ValueError, match=r"whh must be \(8, 2\)"):
        _fused.lstm_seq_bwd(off, False, _fused.pack_b(np.zeros((2, 8), F32)), *arrs)
    with pytest.raises(ValueError, match="step 0 has 2 rows"):
        _fused.lstm_seq_bwd(np.array([0, 2, 4, 6], np.int64), False, pk, *arrs[:4],
                            np.zeros((1, H), F32), np.zeros((1, H), F32), arrs[6])
    arrs[6] = arrs[0]
    with pytest.raises(ValueError, match="overlap"):
        _fused.lstm_seq_bwd(off, False, pk, *arrs)


@needs_gemm
@pytest.mark.parametrize("packed", [False, True])
def test_lstm_seq_path_equals_numpy_path_float32(packed):
    for a, b in zip(_run_lstm(True, cgrad.float32, packed, seq=True),
                    _run_lstm(False, cgrad.float32, packed)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@needs_gemm
def test_lstm_seq_threads(monkeypatch):
    monkeypatch.setitem(_threads._state, "single", True)   # for every thread at once
    ref = _run_lstm(True, cgrad.float32, True, seed=4)
    got = [None] * 4

    def work(k):
        for _ in range(5):
            got[k] = _run_lstm(True, cgrad.float32, True, seed=4)

    run_threads(work, [(k,) for k in range(4)])
    for g in got:
        for a, b in zip(g, ref):
            np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not _fused.sgemm_available(), reason="the portable code is what runs here")
def test_the_portable_code_on_an_avx512_machine():
    """CGRAD_NO_AVX512=1: this file, the GELU, GEMM, layer-norm and attention-kernel tests again
    in a process that runs the portable (multi-versioned C) loops and NumPy's BLAS instead of
    the AVX-512 kernels, so that both are tested on a machine that has AVX-512."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CGRAD_NO_AVX512="1")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         os.path.join(here, "test_fused.py"), os.path.join(here, "test_gemm.py"),
         os.path.join(here, "test_layer_norm_paths.py"),
         os.path.join(here, "test_attention_kernel.py"),
         os.path.join(here, "test_ops_elementwise.py"), "-k",
         "not ops_elementwise or gelu"],
        env=env, capture_output=True, text=True, timeout=900, cwd=os.path.dirname(here))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
