"""SpMM / SDDMM (cgrad/sparse/_ops.py, _kernels.py, csrc/cg_sparse.c, cgrad/_sparse.pyx).

* the SDDMM kernel equals ``(G @ B.T)[row, col]`` in float32/float64, for the compiled kernel
  and the chunked NumPy fallback, with any F, strided and broadcast rows, 1 or 2 threads
  (bitwise equal), and rejects bad indices and dtypes;
* ``cgrad.spmm(indices, values, shape, b)``: forward and both gradients equal dense NumPy
  math and torch for duplicates, unsorted entries, empty rows, nnz = 0, rectangular shapes,
  F = 1 and a 1-D b, under both SDDMM backends; gradcheck and gradgradcheck in float64;
* the structure is cached per indices tensor (and rebuilt after an in-place change);
* dtype rules (equal dtypes; float16 rejected); ``CGRAD_NO_SPARSE_EXT=1`` selects NumPy;
* memory: backward at N = 50,000, nnz = 500,000, F = 64 allocates < 50 MB extra (tracemalloc).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import cgrad
from cgrad.sparse import _kernels
from cgrad.sparse._pattern import Pattern

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402

BACKENDS = ["c", "numpy"] if _kernels.extension_available() else ["numpy"]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(params=BACKENDS)
def backend(request):
    prev = _kernels.use_extension(request.param == "c")
    assert _kernels.backend() == request.param
    yield request.param
    _kernels.use_extension(prev)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------
# the SDDMM kernel
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("F", [1, 3, 8, 13, 64])
def test_sddmm_matches_dense(backend, dtype, F):
    rng = _rng(F)
    n, m, nnz = 30, 20, 200
    row = rng.integers(0, n, nnz)
    col = rng.integers(0, m, nnz)
    G = rng.standard_normal((n, F)).astype(dtype)
    B = rng.standard_normal((m, F)).astype(dtype)
    out = _kernels.sddmm(row, col, G, B)
    assert out.dtype == dtype and out.shape == (nnz,)
    ref = (G.astype(np.float64) @ B.T.astype(np.float64))[row, col]
    np.testing.assert_allclose(out, ref, **_tol(dtype))


def test_sddmm_numpy_chunks_and_empty():
    rng = _rng(1)
    row, col = rng.integers(0, 9, 1000), rng.integers(0, 7, 1000)
    G, B = rng.standard_normal((9, 5)), rng.standard_normal((7, 5))
    ref = (G @ B.T)[row, col]
    np.testing.assert_allclose(_kernels.sddmm_numpy(row, col, G, B, chunk=37), ref, rtol=1e-12)
    empty = np.zeros(0, dtype=np.int64)
    for fn in (_kernels.sddmm_numpy, _kernels.sddmm):
        assert fn(empty, empty, G, B).shape == (0,)


@pytest.mark.skipif(not _kernels.extension_available(), reason="cgrad._sparse not built")
class TestCompiledKernel:
    def test_threads_give_identical_bits(self):
        from cgrad import _sparse
        rng = _rng(2)
        n, nnz, F = 500, 200_000, 19            # enough work for two threads
        row, col = rng.integers(0, n, nnz), rng.integers(0, n, nnz)
        for dtype in (np.float32, np.float64):
            G = rng.standard_normal((n, F)).astype(dtype)
            B = rng.standard_normal((n, F)).astype(dtype)
            o1 = _sparse.sddmm(row, col, G, B, None, 1)
            o2 = _sparse.sddmm(row, col, G, B, None, 2)
            o3 = _sparse.sddmm(row, col, G, B, None, 3)
            assert np.array_equal(o1, o2) and np.array_equal(o1, o3)
            np.testing.assert_allclose(o1, _kernels.sddmm_numpy(row, col, G, B), **_tol(dtype))

    def test_strided_and_broadcast_rows(self):
        from cgrad import _sparse
        rng = _rng(3)
        row, col = rng.integers(0, 6, 50), rng.integers(0, 4, 50)
        big = rng.standard_normal((12, 10))
        G = big[::2, 1:6]                        # row stride 20 elements, inner stride 1
        B = np.broadcast_to(rng.standard_normal(5), (4, 5))    # row stride 0
        Gt = rng.standard_normal((5, 6)).T      # inner stride != 1: copied
        for g in (G, Gt):
            np.testing.assert_allclose(_sparse.sddmm(row, col, g, B),
                                       (g @ np.asarray(B).T)[row, col], rtol=1e-12)

    def test_errors(self):
        from cgrad import _sparse
        G = np.ones((3, 4))
        ok = np.array([0, 1], dtype=np.int64)
        with pytest.raises(IndexError, match="out of range"):
            _sparse.sddmm(np.array([0, 3]), ok, G, G)
        with pytest.raises(IndexError, match="out of range"):
            _sparse.sddmm(ok, np.array([-1, 0]), G, G)
        with pytest.raises(TypeError, match="int64"):
            _sparse.sddmm(ok.astype(np.int32), ok, G, G)
        with pytest.raises(TypeError, match="dtype"):
            _sparse.sddmm(ok, ok, G, G.astype(np.float32))
        with pytest.raises(TypeError, match="float32 and float64"):
            _sparse.sddmm(ok, ok, G.astype(np.int64), G.astype(np.int64))
        with pytest.raises(ValueError, match="columns"):
            _sparse.sddmm(ok, ok, G, np.ones((3, 5)))
        with pytest.raises(ValueError, match="lengths"):
            _sparse.sddmm(ok, ok[:1], G, G)
        out = np.empty(2)
        assert _sparse.sddmm(ok, ok, G, G, out) is out
        with pytest.raises(ValueError, match="out"):
            _sparse.sddmm(ok, ok, G, G, np.empty(3))


def test_thread_setting():
    prev = _kernels.get_num_threads()
    try:
        _kernels.set_num_threads(1)
        assert _kernels.get_num_threads() == 1
        with pytest.raises(ValueError):
            _kernels.set_num_threads(0)
    finally:
        _kernels.set_num_threads(prev)
    assert cgrad.sparse.get_num_threads() == prev


def test_env_switch_selects_numpy():
    code = ("import cgrad, numpy as np\n"
            "i = cgrad.tensor([[0, 1, 1], [1, 0, 1]])\n"
            "v = cgrad.tensor([1., 2., 3.], dtype=cgrad.float64, requires_grad=True)\n"
            "b = cgrad.tensor(np.arange(6.).reshape(2, 3), requires_grad=True)\n"
            "cgrad.spmm(i, v, (2, 2), b).sum().backward()\n"
            "print(cgrad.sparse.backend(), v.grad.tolist())\n")
    env = dict(os.environ, CGRAD_NO_SPARSE_EXT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    assert out[0] == "numpy"
    assert eval(out[1]) == [12.0, 3.0, 12.0]


# ----------------------------------------------------------------------------------------
# spmm: forward and gradients
# ----------------------------------------------------------------------------------------
def _structure(kind, rng):
    """(indices (2, nnz), shape) for the structures SPARSE.md asks to test."""
    if kind == "duplicates":
        idx = np.array([[0, 2, 2, 0, 1, 2, 0], [1, 0, 0, 1, 3, 0, 1]])
        return idx, (3, 4)
    if kind == "unsorted":
        return np.array([[2, 0, 1, 0, 2], [0, 3, 1, 0, 2]]), (3, 4)
    if kind == "empty_rows":
        return np.array([[1, 1, 4], [0, 2, 1]]), (6, 3)
    if kind == "nnz0":
        return np.zeros((2, 0), dtype=np.int64), (4, 3)
    if kind == "rectangular":
        return np.vstack([rng.integers(0, 2, 9), rng.integers(0, 7, 9)]), (2, 7)
    if kind == "random":
        return np.vstack([rng.integers(0, 8, 30), rng.integers(0, 6, 30)]), (8, 6)
    raise KeyError(kind)


STRUCTURES = ["duplicates", "unsorted", "empty_rows", "nnz0", "rectangular", "random"]


def _dense(idx, vals, shape):
    A = np.zeros(shape, dtype=np.float64)
    np.add.at(A, (idx[0], idx[1]), vals)
    return A


@pytest.mark.parametrize("kind", STRUCTURES)
@pytest.mark.parametrize("F", [1, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmm_matches_dense_math(backend, kind, F, dtype):
    rng = _rng(hash(kind) % 1000)
    idx, shape = _structure(kind, rng)
    nnz = idx.shape[1]
    vals = rng.standard_normal(nnz).astype(dtype)
    B = rng.standard_normal((shape[1], F)).astype(dtype)
    G = rng.standard_normal((shape[0], F)).astype(dtype)
    v = cgrad.tensor(vals, requires_grad=True)
    b = cgrad.tensor(B, requires_grad=True)
    out = cgrad.spmm(cgrad.tensor(idx), v, shape, b)
    assert out.dtype == dtype and tuple(out.shape) == (shape[0], F)
    assert type(out.grad_fn).__name__ == "SpmmBackward0"
    out.backward(cgrad.tensor(G))
    A = _dense(idx, vals, shape)
    tol = _tol(dtype)
    np.testing.assert_allclose(out.detach().numpy(), A @ B, **tol)
    # grad_values[k] = (G @ B.T)[row[k], col[k]]: duplicates each get the dot product
    np.testing.assert_allclose(v.grad.numpy(), (G.astype(np.float64) @ B.T)[idx[0], idx[1]],
                               **tol)
    np.testing.assert_allclose(b.grad.numpy(), A.T @ G, **tol)
    assert v.grad.dtype == dtype and b.grad.dtype == dtype


def test_spmm_vector_operand():
    rng = _rng(4)
    idx, shape = _structure("duplicates", rng)
    vals, x, g = rng.standard_normal(idx.shape[1]), rng.standard_normal(4), rng.standard_normal(3)
    v = cgrad.tensor(vals, requires_grad=True)
    b = cgrad.tensor(x, requires_grad=True)
    out = cgrad.spmm(idx, v, shape, b)
    assert tuple(out.shape) == (3,)
    out.backward(cgrad.tensor(g))
    A = _dense(idx, vals, shape)
    np.testing.assert_allclose(out.detach().numpy(), A @ x)
    np.testing.assert_allclose(v.grad.numpy(), g[idx[0]] * x[idx[1]])
    np.testing.assert_allclose(b.grad.numpy(), A.T @ g)


@pytest.mark.parametrize("kind", STRUCTURES)
def test_spmm_gradcheck(kind):
    rng = _rng(5)
    idx, shape = _structure(kind, rng)
    it = cgrad.tensor(idx)
    v = cgrad.tensor(rng.standard_normal(idx.shape[1]), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal((shape[1], 2)), requires_grad=True)
    fn = lambda v, b: cgrad.spmm(it, v, shape, b)  # noqa: E731
    assert gradcheck(fn, (v, b))
    if kind in ("duplicates", "rectangular", "nnz0"):
        assert gradgradcheck(fn, (v, b))


@pytest.mark.parametrize("F", [1, 3])
def test_sddmm_function_gradcheck(F):
    rng = _rng(6)
    idx, shape = _structure("duplicates", rng)
    G = cgrad.tensor(rng.standard_normal((shape[0], F)), requires_grad=True)
    B = cgrad.tensor(rng.standard_normal((shape[1], F)), requires_grad=True)
    fn = lambda G, B: cgrad.sparse.sddmm(idx, G, B, shape)  # noqa: E731
    out = fn(G, B)
    np.testing.assert_allclose(out.detach().numpy(),
                               (G.detach().numpy() @ B.detach().numpy().T)[idx[0], idx[1]])
    assert type(out.grad_fn).__name__ == "SddmmBackward0"
    assert gradcheck(fn, (G, B))
    assert gradgradcheck(fn, (G, B))


def test_spmm_only_b_or_only_values_requires_grad():
    rng = _rng(7)
    idx, shape = _structure("random", rng)
    vals, B = rng.standard_normal(idx.shape[1]), rng.standard_normal((shape[1], 3))
    b = cgrad.tensor(B, requires_grad=True)
    cgrad.spmm(idx, cgrad.tensor(vals), shape, b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), _dense(idx, vals, shape).T @ np.ones((8, 3)))
    v = cgrad.tensor(vals, requires_grad=True)
    cgrad.spmm(idx, v, shape, cgrad.tensor(B)).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), B.sum(1)[idx[1]])
    with cgrad.no_grad():
        out = cgrad.spmm(idx, v, shape, b)
    assert out.grad_fn is None and not out.requires_grad


def test_spmm_matches_torch(torch):
    rng = _rng(8)
    idx, shape = _structure("duplicates", rng)
    vals, B, G = (rng.standard_normal(idx.shape[1]), rng.standard_normal((4, 3)),
                  rng.standard_normal((3, 3)))
    v = cgrad.tensor(vals, requires_grad=True)
    b = cgrad.tensor(B, requires_grad=True)
    cgrad.spmm(idx, v, shape, b).backward(cgrad.tensor(G))
    tv = torch.tensor(vals, requires_grad=True)
    tb = torch.tensor(B, requires_grad=True)
    a = torch.sparse_coo_tensor(torch.tensor(idx), tv, shape, check_invariants=True)
    torch.sparse.mm(a, tb).backward(torch.tensor(G))
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        cgrad.spmm(cgrad.sparse_coo_tensor(idx, vals, shape), cgrad.tensor(B)).numpy(),
        torch.spmm(a.detach(), tb.detach()).numpy(), rtol=1e-12)


# ----------------------------------------------------------------------------------------
# structure cache, dtypes, errors
# ----------------------------------------------------------------------------------------
def test_structure_is_cached_per_indices_tensor():
    from cgrad.sparse._tensor import _pattern_for
    idx = cgrad.tensor([[0, 2, 1], [1, 0, 2]])
    p1 = _pattern_for(idx, (3, 3))
    assert _pattern_for(idx, (3, 3)) is p1
    assert _pattern_for(idx, (4, 3)) is not p1          # another shape: another structure
    csr = p1.csr()
    assert p1.csr() is csr                              # built once
    a = cgrad.sparse_coo_tensor(idx, [1., 2., 3.], (3, 3))
    assert a._pattern is _pattern_for(idx, (3, 3))
    assert a.t()._pattern is a._pattern.T()              # transposed structure cached too
    idx.add_(0)                                          # in-place change: version bump
    assert _pattern_for(idx, (3, 3)) is not p1
    arr = np.array([[0, 1], [1, 0]])
    assert _pattern_for(arr, (2, 2)) is not _pattern_for(arr, (2, 2))   # writeable: no cache
    arr.flags.writeable = False
    assert _pattern_for(arr, (2, 2)) is _pattern_for(arr, (2, 2))


def test_cache_entry_dies_with_its_tensor():
    from cgrad.sparse import _pattern
    idx = cgrad.tensor([[0, 1], [1, 0]])
    cgrad.spmm(idx, cgrad.tensor([1., 2.]), (2, 2), cgrad.ones(2, 1))
    key = id(idx)
    assert key in _pattern._cache
    del idx
    assert key not in _pattern._cache


def test_transposed_structure_reuses_the_csr_arrays():
    p = Pattern(np.array([[2, 0, 1, 0], [0, 3, 1, 0]]), (3, 4))
    vals = np.array([1., 2., 3., 4.])
    m = p.T().matrix(vals)
    assert m.format == "csc"
    assert np.shares_memory(m.indices, p.csr()[1])      # no copy of the structure
    np.testing.assert_array_equal(m.toarray(), p.matrix(vals).toarray().T)


def test_public_scipy_path_gives_the_same_products():
    """Float products call scipy's compiled kernels directly; the public API (used for
    other dtypes, or if the private module changed) gives the same results."""
    from cgrad.sparse import _pattern
    rng = _rng(10)
    idx, shape = _structure("duplicates", rng)
    vals, B = rng.standard_normal(idx.shape[1]), rng.standard_normal((4, 3))
    p = Pattern(idx, shape)
    fast = [p.product(vals, B), p.T().product(vals, B[:3]), p.product(vals, B[:, 0])]
    prev, _pattern._fast[0] = _pattern._fast[0], False
    try:
        slow = [p.product(vals, B), p.T().product(vals, B[:3]), p.product(vals, B[:, 0])]
    finally:
        _pattern._fast[0] = prev
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-14)
    A = _dense(idx, vals, shape)
    np.testing.assert_allclose(slow[1], A.T @ B[:3], rtol=1e-12)
    a = cgrad.sparse_coo_tensor(idx, np.arange(1, 8), shape)
    ints = a @ cgrad.ones(4, 2, dtype=cgrad.int64)
    assert ints.dtype == cgrad.int64
    np.testing.assert_array_equal(ints.numpy(),
                                  _dense(idx, np.arange(1, 8), shape) @ np.ones((4, 2)))


def test_dtype_rules():
    idx = np.array([[0, 1], [1, 0]])
    v32 = cgrad.tensor([1., 2.])
    b64 = cgrad.ones(2, 3, dtype=cgrad.float64)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        cgrad.spmm(idx, v32, (2, 2), b64)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        cgrad.spmm(idx, v32.double(), (2, 2), b64.float())
    a = cgrad.sparse_coo_tensor(idx, v32, (2, 2))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        a @ b64
    # the rule: convert one operand explicitly
    assert (a.double() @ b64).dtype == cgrad.float64
    with pytest.raises(RuntimeError, match="float16"):
        cgrad.sparse_coo_tensor(idx, v32.half(), (2, 2))
    with pytest.raises(RuntimeError, match="float16"):
        a.half()


def test_spmm_errors():
    idx = np.array([[0, 1], [1, 0]])
    v = cgrad.tensor([1., 2.])
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        cgrad.spmm(idx, v, (2, 2), cgrad.ones(3, 1))
    with pytest.raises(RuntimeError, match="values must have shape"):
        cgrad.spmm(idx, cgrad.tensor([1., 2., 3.]), (2, 2), cgrad.ones(2, 1))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        cgrad.spmm(idx, v, (1, 2), cgrad.ones(2, 1))
    with pytest.raises(RuntimeError, match="negative index"):
        cgrad.spmm(np.array([[0, -1], [1, 0]]), v, (2, 2), cgrad.ones(2, 1))
    with pytest.raises(TypeError):
        cgrad.spmm(idx, v, (2, 2))


# ----------------------------------------------------------------------------------------
# memory: O(nnz * F) backward, never N x N
# ----------------------------------------------------------------------------------------
def test_backward_memory_is_bounded():
    rng = _rng(9)
    N, nnz, F = 50_000, 500_000, 64
    idx = cgrad.tensor(np.vstack([rng.integers(0, N, nnz), rng.integers(0, N, nnz)]))
    v = cgrad.tensor(rng.standard_normal(nnz).astype(np.float32), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal((N, F)).astype(np.float32), requires_grad=True)
    G = cgrad.tensor(rng.standard_normal((N, F)).astype(np.float32))
    out = cgrad.spmm(idx, v, (N, N), b)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out.backward(G)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # grad_b (12.8 MB) + grad_values (2 MB) + one values gather for the transposed product
    assert peak < 50e6, f"backward peak {peak / 1e6:.1f} MB"
    assert v.grad.shape == (nnz,) and b.grad.shape == (N, F)
    k = rng.integers(0, nnz, 50)
    ref = np.einsum("ij,ij->i", G.numpy()[idx.numpy()[0, k]], b.detach().numpy()[idx.numpy()[1, k]])
    np.testing.assert_allclose(v.grad.numpy()[k], ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------------------
# heads: (nnz, H) values and an (M, H, F) operand on one structure
# ----------------------------------------------------------------------------------------
def _block_pattern(idx, shape, H):
    """The block-diagonal (N*H, M*H) indices of H heads: entry k*H + h at (i*H + h, j*H + h)."""
    h = np.arange(H)
    big = np.stack([(idx[0][:, None] * H + h).reshape(-1), (idx[1][:, None] * H + h).reshape(-1)])
    return Pattern(big, (shape[0] * H, shape[1] * H))


def _heads_case(seed, n=23, m=17, nnz=90, H=3, F=5, dtype=np.float64, sort=False):
    rng = _rng(seed)
    idx = np.stack([rng.integers(0, n, nnz), rng.integers(0, m, nnz)])   # duplicates, unsorted
    if sort:
        idx = idx[:, np.lexsort((idx[1], idx[0]))]
    vals = rng.standard_normal((nnz, H)).astype(dtype)
    b = rng.standard_normal((m, H, F)).astype(dtype)
    g = rng.standard_normal((n, H, F)).astype(dtype)
    return idx, vals, b, g, (n, m)


def _run_heads(pattern, vals, b, g, shape, block):
    V = cgrad.tensor(vals, requires_grad=True)
    B = cgrad.tensor(b, requires_grad=True)
    H, F = b.shape[1], b.shape[2]
    if block:
        out = cgrad.spmm(pattern, V.reshape(-1), (shape[0] * H, shape[1] * H),
                         B.reshape(shape[1] * H, F)).view(shape[0], H, F)
    else:
        out = cgrad.spmm(pattern, V, shape, B)
    out.backward(cgrad.tensor(g))
    return out.detach().numpy(), V.grad.numpy(), B.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("H,F,sort", [(1, 4, False), (3, 5, False), (8, 8, True), (2, 1, True)])
def test_spmm_heads_bitwise_equal_to_block_diagonal(backend, dtype, H, F, sort):
    """The H-head product and both its gradients equal, bit for bit, those of the
    block-diagonal (N*H) x (M*H) matrix (examples/gat.py's former formulation) and the
    per-head single products, and dense math; on 1 and 2 sparse threads."""
    idx, vals, b, g, shape = _heads_case(H * 10 + F, H=H, F=F, dtype=dtype, sort=sort)
    ref = _run_heads(_block_pattern(idx, shape, H), vals, b, g, shape, True)
    prev = cgrad.sparse.get_num_threads()
    try:
        for threads in (1, 2):
            cgrad.sparse.set_num_threads(threads)
            got = _run_heads(Pattern(idx.copy(), shape), vals, b, g, shape, False)
            for x, y in zip(got, ref):
                assert x.dtype == dtype and x.shape == y.shape
                np.testing.assert_array_equal(x, y)
    finally:
        cgrad.sparse.set_num_threads(prev)
    for h in range(H):                       # head h is the one-head product
        one = cgrad.spmm(cgrad.tensor(idx), cgrad.tensor(np.ascontiguousarray(vals[:, h])),
                         shape, cgrad.tensor(np.ascontiguousarray(b[:, h])))
        np.testing.assert_array_equal(ref[0][:, h], one.numpy())
    dense = np.zeros(shape + (H,))
    np.add.at(dense, (idx[0], idx[1]), vals.astype(np.float64))
    np.testing.assert_allclose(ref[0], np.einsum("ijh,jhf->ihf", dense, b), **_tol(dtype))


def test_spmm_heads_gradcheck():
    idx, vals, b, _, shape = _heads_case(5, n=6, m=5, nnz=14, H=2, F=3)
    I = cgrad.tensor(idx)
    inputs = [cgrad.tensor(vals, requires_grad=True), cgrad.tensor(b, requires_grad=True)]

    def fn(v, x):
        return cgrad.spmm(I, v, shape, x)
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


def test_sddmm_heads(backend):
    idx, _, b, g, shape = _heads_case(6, H=3, F=4)
    G = cgrad.tensor(g, requires_grad=True)
    B = cgrad.tensor(b, requires_grad=True)
    out = cgrad.sparse.sddmm(cgrad.tensor(idx), G, B)
    assert out.shape == (idx.shape[1], 3)
    np.testing.assert_allclose(out.detach().numpy(), np.einsum("khf,khf->kh", g[idx[0]], b[idx[1]]),
                               rtol=1e-12)
    for h in range(3):                       # the same dot products as one head at a time
        one = _kernels.sddmm(idx[0], idx[1], np.ascontiguousarray(g[:, h]),
                             np.ascontiguousarray(b[:, h]))
        np.testing.assert_array_equal(out.detach().numpy()[:, h], one)
    inputs = [cgrad.tensor(g[:6], requires_grad=True), cgrad.tensor(b[:5], requires_grad=True)]
    small = idx[:, (idx[0] < 6) & (idx[1] < 5)]
    assert gradcheck(lambda x, y: cgrad.sparse.sddmm(cgrad.tensor(small), x, y), inputs)


def test_spmm_heads_odd_inputs(backend):
    # a non-contiguous b (a transposed view), float32, an empty pattern, zero heads' features
    idx, vals, b, g, shape = _heads_case(7, H=2, F=3, dtype=np.float32)
    bt = np.ascontiguousarray(b.transpose(1, 0, 2)).transpose(1, 0, 2)   # (m, H, F), strided
    assert not bt.flags.c_contiguous
    a = cgrad.spmm(cgrad.tensor(idx), cgrad.tensor(vals), shape, cgrad.tensor(bt)).numpy()
    np.testing.assert_array_equal(a, cgrad.spmm(cgrad.tensor(idx), cgrad.tensor(vals), shape,
                                                cgrad.tensor(b)).numpy())
    vt = np.asfortranarray(vals)                                         # strided values
    np.testing.assert_array_equal(
        cgrad.spmm(cgrad.tensor(idx), cgrad.tensor(vt), shape, cgrad.tensor(b)).numpy(), a)
    empty = np.zeros((2, 0), dtype=np.int64)
    V = cgrad.zeros(0, 2, requires_grad=True)
    B = cgrad.tensor(b, requires_grad=True)
    out = cgrad.spmm(cgrad.tensor(empty), V, shape, B)
    assert out.shape == (shape[0], 2, 3) and not out.detach().numpy().any()
    out.sum().backward()
    assert V.grad.shape == (0, 2) and not B.grad.numpy().any()
    z = cgrad.spmm(cgrad.tensor(idx), cgrad.tensor(vals), shape, cgrad.zeros(shape[1], 2, 0))
    assert z.shape == (shape[0], 2, 0)


def test_spmm_heads_errors():
    idx, vals, b, _, shape = _heads_case(8, H=2, F=3)
    I, V = cgrad.tensor(idx), cgrad.tensor(vals)
    with pytest.raises(RuntimeError, match=r"b must have shape \[17, 2, F\]"):
        cgrad.spmm(I, V, shape, cgrad.tensor(b[:, :1]))
    with pytest.raises(RuntimeError, match=r"b must have shape \[17, 2, F\]"):
        cgrad.spmm(I, V, shape, cgrad.tensor(b[:, 0]))
    with pytest.raises(RuntimeError, match=r"values must have shape \[90\]"):
        cgrad.spmm(I, cgrad.tensor(vals[:5]), shape, cgrad.tensor(b))
    with pytest.raises(RuntimeError, match="expected scalar type"):
        cgrad.spmm(I, V, shape, cgrad.tensor(b.astype(np.float32)))
    with pytest.raises(RuntimeError, match="must both be 2-D"):
        cgrad.sparse.sddmm(I, cgrad.tensor(np.zeros((23, 2, 3))), cgrad.tensor(np.zeros((17, 6))))
