"""The float32 GEMM kernel (csrc/cg_gemm.c, cgrad._fused.sgemm) and its dispatch
(cgrad/ops/_gemm.py, Note [float32 GEMM]): results against float64 products over shapes that
hit every tail (rows past a multiple of 8, columns past a multiple of 32, depths past a
multiple of 256, more than 512 columns), every operand layout, accumulation, packing once,
threads, bad input and an allocation that fails; then the ops that use it against NumPy."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cgrad
from cgrad import _threads
from cgrad.ops import _gemm

from thread_util import run_threads

fx = pytest.importorskip("cgrad._fused")
needs_kernel = pytest.mark.skipif(not fx.sgemm_available(),
                                  reason="the kernel needs AVX-512F (NumPy is used instead)")

RNG = np.random.default_rng(1234)


def _f32(shape, rng=RNG):
    return rng.standard_normal(shape).astype(np.float32)


def _layout(x, kind):
    """x (a C-contiguous 2-D array) as another layout with the same values."""
    if kind == "c":
        return x
    if kind == "f":                          # column-major: a transposed C array's view
        return np.ascontiguousarray(x.T).T
    if kind == "step":                       # every other column of a wider array
        wide = np.zeros((x.shape[0], 2 * x.shape[1] + 1), np.float32)
        wide[:, ::2][:, :x.shape[1]] = x
        return wide[:, ::2][:, :x.shape[1]]
    raise AssertionError(kind)


def _bound(a, b):
    """float32 error bound of a k-term dot product, from the float64 magnitudes."""
    k = a.shape[1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return 2 * k * np.finfo(np.float32).eps * mag + 1e-30


SHAPES = [(1, 1, 1), (0, 5, 3), (5, 0, 3), (5, 3, 0), (7, 33, 5), (8, 32, 256), (9, 31, 257),
          (17, 65, 300), (3, 600, 40), (64, 129, 513), (33, 1100, 9), (512, 64, 64),
          (100, 256, 1000)]


@needs_kernel
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("la,lb", [("c", "c"), ("f", "c"), ("c", "f"), ("step", "f"),
                                   ("f", "step")])
def test_sgemm_matches_float64(M, N, K, la, lb):
    a0, b0 = _f32((M, K)), _f32((K, N))
    a, b = _layout(a0, la), _layout(b0, lb)
    out = fx.sgemm(a, b)
    assert out.shape == (M, N) and out.dtype == np.float32 and out.flags.c_contiguous
    ref = a0.astype(np.float64) @ b0.astype(np.float64)
    assert np.all(np.abs(out - ref) <= _bound(a0, b0))
    # the layout does not change the sums: the same bits as the C-contiguous operands
    np.testing.assert_array_equal(out, fx.sgemm(a0, b0))


@needs_kernel
@pytest.mark.parametrize("M,N,K", [(5, 3, 0), (9, 40, 300), (64, 1030, 70)])
def test_sgemm_accumulates_into_out(M, N, K):
    a, b = _f32((M, K)), _f32((K, N))
    c0 = _f32((M, N))
    c = c0.copy()
    assert fx.sgemm(a, b, out=c, accumulate=True) is c
    ref = c0 + a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - ref) <= _bound(a, b) + 2 * np.finfo(np.float32).eps * abs(ref))
    c[...] = np.nan                          # without accumulate out is only written
    fx.sgemm(a, b, out=c)
    np.testing.assert_array_equal(c, fx.sgemm(a, b))


@needs_kernel
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("la,lb", [("c", "c"), ("f", "f"), ("step", "c")])
def test_bias_in_the_store_gives_the_bits_of_adding_it_after(M, N, K, la, lb):
    """sgemm(a, b, bias=) adds the bias in the tile's store after the whole sum (the last
    depth block): the bits of sgemm(a, b) followed by += bias, for every tail, layout and a
    depth past 256; masked loads of the bias for ragged panels read nothing past its end."""
    a, b, bias = _f32((M, K)), _f32((K, N)), _f32((N,))
    want = fx.sgemm(_layout(a, la), _layout(b, lb))
    want += bias
    end = np.zeros(N + 1, np.float32)            # bias at the very end of a buffer
    end[1:] = bias
    for bv in (bias, end[1:]):
        got = fx.sgemm(_layout(a, la), _layout(b, lb), bias=bv)
        assert got.tobytes() == want.tobytes()
    out = np.full((M, N), np.nan, np.float32)    # into a given out: overwritten, not added to
    assert fx.sgemm(a, b, out, bias=bias) is out
    ref = fx.sgemm(a, b)
    ref += bias
    assert out.tobytes() == ref.tobytes()


def test_bias_input_checks():
    a, b = _f32((4, 5)), _f32((5, 6))
    if not fx.sgemm_available():
        pytest.skip("the kernel does not run here")
    with pytest.raises(ValueError, match=r"bias must have shape \(6,\)"):
        fx.sgemm(a, b, bias=_f32((5,)))
    with pytest.raises(ValueError, match="bias must have shape"):
        fx.sgemm(a, b, bias=_f32((1, 6)))
    with pytest.raises(TypeError, match="float32 ndarray"):
        fx.sgemm(a, b, bias=np.zeros(6))
    with pytest.raises(ValueError, match="cannot be combined"):
        fx.sgemm(a, b, np.zeros((4, 6), np.float32), accumulate=True, bias=_f32((6,)))
    out = np.zeros((4, 6), np.float32)
    with pytest.raises(ValueError, match="overlap"):
        fx.sgemm(a, b, out, bias=out[0])


@needs_kernel
def test_zero_depth_gives_zeros_and_keeps_accumulated_values():
    a, b = np.empty((4, 0), np.float32), np.empty((0, 35), np.float32)
    out = np.full((4, 35), np.nan, np.float32)
    fx.sgemm(a, b, out=out)
    assert not out.any()
    out[...] = 3
    fx.sgemm(a, b, out=out, accumulate=True)
    assert (out == 3).all()


@needs_kernel
def test_broadcast_operands_with_zero_strides():
    a = np.broadcast_to(np.float32(2), (10, 300))
    b = np.broadcast_to(_f32((300, 1)), (300, 45))
    np.testing.assert_allclose(fx.sgemm(a, b), np.asarray(a) @ np.asarray(b), rtol=1e-5)


@needs_kernel
def test_inf_and_nan_propagate_as_in_numpy():
    """Padding lanes (columns past N, rows past M) never reach the result."""
    a, b = _f32((11, 20)), _f32((20, 37))
    a[3, 5] = np.inf
    a[7, 2] = np.nan
    b[4, 36] = -np.inf
    b[6, :] = 0                                # inf * 0 -> nan in row 3 where b is 0
    out = fx.sgemm(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.all(np.abs(out[fin] - ref[fin]) <= 1e-4 * (1 + np.abs(ref[fin])))


@needs_kernel
@pytest.mark.parametrize("la", ["c", "f", "step"])
@pytest.mark.parametrize("M,N,K", [(32, 512, 128), (5, 33, 7), (9, 64, 600), (40, 0, 3),
                                   (3, 8, 0)])
def test_packed_b_gives_the_bits_of_sgemm(M, N, K, la):
    a0, b = _f32((M, K)), _f32((K, N))
    src = _layout(b, "f").copy(order="F")
    pb = fx.pack_b(src)
    assert pb.shape == (K, N)
    src[...] = 0                               # the packed copy is independent of its source
    out = np.full((M, N), np.nan, np.float32)
    assert fx.sgemm_packed(_layout(a0, la), pb, out) is out
    np.testing.assert_array_equal(out, fx.sgemm(a0, b))
    acc = np.ones((M, N), np.float32)
    fx.sgemm_packed(a0, pb, acc, accumulate=True)
    want = np.ones((M, N), np.float32)
    fx.sgemm(a0, b, out=want, accumulate=True)
    np.testing.assert_array_equal(acc, want)
    if K <= 256:                               # one block: out + (its sum), rounded once
        np.testing.assert_array_equal(acc, np.float32(1) + out)


@needs_kernel
def test_one_packed_b_on_four_threads():
    b = _f32((128, 512))
    pb = fx.pack_b(b)
    a = [_f32((32, 128), np.random.default_rng(s)) for s in range(4)]
    want = [fx.sgemm(x, b) for x in a]
    outs = [np.empty((32, 512), np.float32) for _ in range(4)]

    def work(k):
        for _ in range(200):
            fx.sgemm_packed(a[k], pb, outs[k])
            np.testing.assert_array_equal(outs[k], want[k])
            np.testing.assert_array_equal(fx.sgemm(a[k], b), want[k])

    run_threads(work, [(k,) for k in range(4)])


def test_bad_input_raises():
    a, b = _f32((3, 4)), _f32((4, 5))
    with pytest.raises(TypeError, match="float32"):
        fx.sgemm(a.astype(np.float64), b)
    with pytest.raises(TypeError, match="float32"):
        fx.sgemm(a, [[1.0]])
    with pytest.raises(ValueError, match="2-D"):
        fx.sgemm(a.ravel(), b)
    with pytest.raises(ValueError, match="inner dimensions"):
        fx.sgemm(a, _f32((5, 5)))
    if not fx.sgemm_available():
        return
    with pytest.raises(ValueError, match="accumulate needs out"):
        fx.sgemm(a, b, accumulate=True)
    with pytest.raises(ValueError, match="shape"):
        fx.sgemm(a, b, out=np.empty((3, 4), np.float32))
    with pytest.raises(TypeError, match="float32"):
        fx.sgemm(a, b, out=np.empty((3, 5)))
    with pytest.raises(ValueError, match="C-contiguous"):
        fx.sgemm(a, b, out=np.empty((5, 3), np.float32).T)
    ro = np.empty((3, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        fx.sgemm(a, b, out=ro)
    buf = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="overlap"):
        fx.sgemm(buf[:3, :4], buf[:4, :], out=buf[1:4])
    pb = fx.pack_b(b)
    with pytest.raises(ValueError, match="inner dimensions"):
        fx.sgemm_packed(_f32((3, 5)), pb, np.empty((3, 5), np.float32))
    with pytest.raises(TypeError):
        fx.sgemm_packed(a, None, np.empty((3, 5), np.float32))
    x = np.zeros((3, 5), np.float32)
    with pytest.raises(ValueError, match="overlap"):
        fx.sgemm_packed(x[:, :4], pb, x)


@needs_kernel
def test_layouts_the_kernel_does_not_read_are_declined():
    a, b = _f32((3, 4)), _f32((4, 5))
    assert fx.sgemm(a[::-1], b) is None                     # negative stride
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)
    assert not raw.flags.aligned
    assert fx.sgemm(raw, b) is None
    assert fx.pack_b(b[::-1]) is None
    np.testing.assert_allclose(_gemm.mm(a[::-1], b), a[::-1] @ b, rtol=1e-6)  # NumPy then


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS on Linux")
@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="ASan reserves more address space than any limit allows")
@needs_kernel
def test_a_failed_packing_allocation_is_a_memoryerror():
    code = textwrap.dedent("""
        import resource
        import numpy as np
        from cgrad import _fused as fx
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (used + (256 << 20), hard))
        b = np.broadcast_to(np.float32(1), (1200000, 64))     # packing it needs 307 MB
        a = np.ones((2, 1200000), np.float32)
        for f in (lambda: fx.sgemm(a, b), lambda: fx.pack_b(b)):
            try:
                f()
            except MemoryError as e:
                print("MemoryError", e)
        print(fx.sgemm(a[:, :3], b[:3, :5]).sum())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines[:2]] == ["MemoryError", "MemoryError"]
    assert "packing buffer" in lines[0]
    assert float(lines[2]) == 30.0


# -- dispatch ----------------------------------------------------------------------------------
def test_dispatch_rules(monkeypatch):
    a, b = _f32((512, 64)), _f32((64, 192))
    monkeypatch.setattr(_threads, "blas_single", lambda: False)
    assert not _gemm._kernel_for(a, b)                      # big, BLAS on several threads
    assert _gemm._kernel_for(a[:8], b) == _gemm._ON         # small: OpenBLAS uses one thread
    monkeypatch.setattr(_threads, "blas_single", lambda: True)
    assert _gemm._kernel_for(a, b) == _gemm._ON
    assert not _gemm._kernel_for(a.astype(np.float64), b.astype(np.float64))
    assert not _gemm._kernel_for(a[None], b)
    for n, ok in ((16, False), (23, False), (24, True), (31, True), (32, True), (40, False), (48, True), (65, False),
                  (72, True), (192, True)):
        assert _gemm._kernel_for(a, b[:, :1].repeat(n, 1)) == (ok and _gemm._ON), n


def test_set_num_threads_refreshes_the_blas_state():
    before = cgrad.get_num_threads()
    try:
        cgrad.set_num_threads(1)
        assert _threads.blas_single()
        cgrad.set_num_threads(2)
        assert not _threads.blas_single()
    finally:
        cgrad.set_num_threads(before)


@pytest.fixture(params=["kernel", "numpy"])
def gemm_path(request, monkeypatch):
    if request.param == "kernel":
        if not _gemm._ON:
            pytest.skip("the kernel does not run here")
        monkeypatch.setattr(_threads, "blas_single", lambda: True)
    else:
        monkeypatch.setattr(_gemm, "_ON", False)
    return request.param


@pytest.mark.parametrize("shape", [(7, 33), (4, 16, 64)])
def test_linear_float32_on_both_paths(gemm_path, shape):
    rng = np.random.default_rng(5)
    x0, w0, b0 = _f32(shape, rng), _f32((70, shape[-1]), rng), _f32((70,), rng)
    x, w, b = (cgrad.tensor(v, requires_grad=True) for v in (x0, w0, b0))
    y = cgrad.nn.functional.linear(x, w, b)
    g = _f32(y.shape, rng)
    y.backward(cgrad.tensor(g))
    X, G = x0.reshape(-1, shape[-1]).astype(np.float64), g.reshape(-1, 70).astype(np.float64)
    W = w0.astype(np.float64)
    np.testing.assert_allclose(y.detach().numpy(), (X @ W.T + b0).reshape(y.shape), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), (G @ W).reshape(shape), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), G.T @ X, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.grad.numpy(), G.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias_shape", [(70,), (1,), (1, 70), (3, 70)])
def test_linear_bias_forms_give_the_bits_of_product_then_add(gemm_path, bias_shape):
    """Linear's forward puts an (out,) bias into the product's store; other bias shapes are
    added after. Either way the bits of (x @ W^T) + b, as before the fused store."""
    rng = np.random.default_rng(8)
    x0, w0, b0 = _f32((3, 40), rng), _f32((70, 40), rng), _f32(bias_shape, rng)
    y = cgrad.nn.functional.linear(cgrad.tensor(x0), cgrad.tensor(w0), cgrad.tensor(b0))
    ref = _gemm.mm(x0, np.ascontiguousarray(w0).T)
    ref = ref + b0
    assert y.numpy().tobytes() == ref.tobytes()


def test_mm_and_matmul_float32_on_both_paths(gemm_path):
    rng = np.random.default_rng(6)
    a0, b0 = _f32((40, 300), rng), _f32((300, 50), rng)
    for op in (cgrad.mm, cgrad.matmul, lambda p, q: p @ q):
        a, b = cgrad.tensor(a0, requires_grad=True), cgrad.tensor(b0, requires_grad=True)
        y = op(a, b)
        y.sum().backward()
        A, B = a0.astype(np.float64), b0.astype(np.float64)
        np.testing.assert_allclose(y.detach().numpy(), A @ B, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a.grad.numpy(), np.ones((40, 50)) @ B.T, rtol=1e-5,
                                   atol=1e-4)
        np.testing.assert_allclose(b.grad.numpy(), A.T @ np.ones((40, 50)), rtol=1e-5,
                                   atol=1e-4)
    # a batch of small matrices times one matrix (folded into one product)
    x = cgrad.tensor(_f32((6, 5, 300), rng))
    np.testing.assert_allclose((x @ cgrad.tensor(b0)).numpy(),
                               x.numpy().astype(np.float64) @ b0, rtol=1e-4, atol=1e-4)


def test_lstm_float32_on_both_paths_against_float64(gemm_path):
    cgrad.manual_seed(0)
    lstm = cgrad.nn.LSTM(12, 40, num_layers=2)
    x0 = _f32((9, 5, 12), np.random.default_rng(7))
    x = cgrad.tensor(x0, requires_grad=True)
    out, _ = lstm(x)
    out.sum().backward()
    got = [x.grad.numpy()] + [p.grad.numpy() for p in lstm.parameters()]
    lstm64 = cgrad.nn.LSTM(12, 40, num_layers=2).double()
    lstm64.load_state_dict({k: v.double() for k, v in lstm.state_dict().items()})
    x64 = cgrad.tensor(x0.astype(np.float64), requires_grad=True)
    out64, _ = lstm64(x64)
    out64.sum().backward()
    want = [x64.grad.numpy()] + [p.grad.numpy() for p in lstm64.parameters()]
    np.testing.assert_allclose(out.detach().numpy(), out64.detach().numpy(), atol=2e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
