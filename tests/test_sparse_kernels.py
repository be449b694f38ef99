"""The compiled CSR builder, CSR transpose and threaded SpMM (csrc/cg_sparse.c, cgrad/_sparse.pyx)
behind ``Pattern.csr`` and ``Pattern.product``.

* ``csr_build`` (stable counting sort on rows) gives the arrays of the old argsort path
  whenever each row's columns come out sorted, says so otherwise, rejects bad indices;
* the products through the compiled SpMM (forward and transposed, i.e. spmm's forward and
  its gradient for b) are bitwise equal to scipy's csr/csc_matvecs on the same structure
  (the pre-kernel path), for float32/float64, 1-D and 2-D, non-contiguous b, empty rows,
  duplicates, unsorted entries, nnz = 0, sizes around the two-thread threshold;
* 1, 2 and 3 threads give the same bits, also with Python threads calling concurrently;
* a GAT-style heads pattern (rows not sorted, columns sorted within rows) takes the
  counting-sort path;
* the transposed product by a scatter (``spmm_csr(..., transpose=True)``, one thread) equals
  the gather over ``csr_transpose``'s structure bit for bit: int32/int64 indices, int32/int64
  or no perm, 1-D, 2-D and multi-head (nnz, H) values with an (n, H, F) operand.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from cgrad import _threads
from cgrad.sparse import _kernels
from cgrad.sparse._pattern import Pattern, _load_scipy

pytestmark = pytest.mark.skipif(not _kernels.extension_available(),
                                reason="cgrad._sparse not built")


def _old_csr(row, col, n, m):
    """The CSR arrays as the argsort path builds them (stable sort on row * m + col)."""
    lin = row * m + col
    if row.shape[0] > 1 and not np.all(row[1:] >= row[:-1]):
        perm = np.argsort(lin, kind="stable")
        ind = col[perm]
    else:
        perm, ind = None, col
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    return perm, ind, indptr


def _scipy_product(p, vals, B, transposed):
    """matrix(vals) @ B through scipy's compiled csr/csc_matvec(s), as before the kernel."""
    _load_scipy()
    from cgrad.sparse import _pattern as P
    perm, ind, indptr = p.csr()
    data = vals if perm is None else vals.take(perm)
    n, m = p.shape
    if transposed:
        n, m = m, n
    X = np.ascontiguousarray(B)
    st = P._st
    if B.ndim == 2:
        out = np.zeros((n, B.shape[1]), dtype=vals.dtype)
        fn = st.csc_matvecs if transposed else st.csr_matvecs
        fn(n, m, B.shape[1], indptr, ind, data, X.reshape(-1), out.reshape(-1))
    else:
        out = np.zeros(n, dtype=vals.dtype)
        fn = st.csc_matvec if transposed else st.csr_matvec
        fn(n, m, indptr, ind, data, X, out)
    return out


def _patterns():
    rng = np.random.default_rng(0)
    cases = []
    for n, m, nnz in ((1, 1, 0), (5, 7, 1), (6, 4, 30), (50, 40, 300), (400, 300, 9000),
                      (3000, 2000, 60_000)):
        row = rng.integers(0, n, nnz)
        col = rng.integers(0, m, nnz)
        cases.append((f"random-{n}x{m}-{nnz}", row, col, (n, m)))
    # sorted rows with empty rows in between, duplicates
    row = np.repeat(np.array([0, 0, 2, 2, 2, 5, 9]), 3)
    col = np.tile(np.array([1, 1, 0]), 7)
    cases.append(("sorted-empty-dups", row, col, (11, 3)))
    # GAT heads pattern: edge-major, head-minor numbering (rows unsorted, cols sorted per row)
    N, H = 300, 4
    lin = np.unique(rng.integers(0, N * N, 2000))
    r, c = lin // N, lin % N
    k = np.arange(H)
    cases.append(("heads", (r[:, None] * H + k).ravel(), (c[:, None] * H + k).ravel(),
                  (N * H, N * H)))
    return cases


CASES = _patterns()


@pytest.mark.parametrize("name,row,col,shape", CASES, ids=[c[0] for c in CASES])
def test_csr_build_matches_argsort(name, row, col, shape):
    n, m = shape
    perm, ind, indptr, cols_sorted = _kernels.csr_build(row, col, n, m, False)
    operm, oind, oindptr = _old_csr(row, col, n, m)
    assert ind.dtype == indptr.dtype == np.int32
    assert np.array_equal(indptr, oindptr)
    if perm is None:
        assert operm is None and np.array_equal(ind, oind)
    else:
        # stable by row: entries of a row in entry order
        assert np.array_equal(row[perm], np.repeat(np.arange(n), np.diff(oindptr)))
        assert np.array_equal(ind, col[perm])
        assert cols_sorted == all(np.all(np.diff(ind[a:b]) >= 0)
                                  for a, b in zip(indptr[:-1], indptr[1:]))
        if cols_sorted:
            assert np.array_equal(perm, operm)
    if name == "heads":
        assert perm is not None and cols_sorted
    w = _kernels.csr_build(row, col, n, m, True)
    assert w[1].dtype == w[2].dtype == np.int64
    assert np.array_equal(w[2], indptr) and np.array_equal(w[1], ind)


def test_csr_build_rejects_bad_indices():
    row, col = np.array([0, 3]), np.array([0, 1])
    with pytest.raises(IndexError):
        _kernels.csr_build(row, col, 3, 2, False)
    with pytest.raises(IndexError):
        _kernels.csr_build(np.array([0, -1]), col, 3, 2, False)
    with pytest.raises(IndexError):
        _kernels.csr_build(np.array([1, 0]), np.array([0, 2]), 3, 2, False)


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    prev = _threads.sparse_threads()
    _kernels.set_num_threads(request.param)
    yield request.param
    _kernels.set_num_threads(prev)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,row,col,shape", CASES, ids=[c[0] for c in CASES])
def test_products_bitwise_equal_scipy(name, row, col, shape, dtype, threads):
    rng = np.random.default_rng(1)
    p = Pattern(np.stack([row, col]).astype(np.int64), shape)
    vals = rng.standard_normal(row.shape[0]).astype(dtype)
    n, m = shape
    for F in (1, 3, 8, 17):
        B = rng.standard_normal((m, F)).astype(dtype)
        assert np.array_equal(p.product(vals, B), _scipy_product(p, vals, B, False))
        Bt = rng.standard_normal((n, F)).astype(dtype)
        assert np.array_equal(p.T().product(vals, Bt), _scipy_product(p, vals, Bt, True))
    # 1-D and non-contiguous b
    b = rng.standard_normal(m).astype(dtype)
    assert np.array_equal(p.product(vals, b), _scipy_product(p, vals, b, False))
    Bn = rng.standard_normal((m, 10)).astype(dtype)[:, ::2]
    assert np.array_equal(p.product(vals, Bn), _scipy_product(p, vals, Bn, False))
    Bf = np.asfortranarray(rng.standard_normal((n, 5)).astype(dtype))
    assert np.array_equal(p.T().product(vals, Bf), _scipy_product(p, vals, Bf, True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,row,col,shape", CASES, ids=[c[0] for c in CASES])
def test_transposed_scatter_equals_gather(name, row, col, shape, dtype):
    from cgrad import _sparse
    rng = np.random.default_rng(4)
    n, m = shape
    nnz = row.shape[0]
    for wide in (False, True):
        perm, ind, indptr, _ = _kernels.csr_build(row, col, n, m, wide)
        perms = [perm] if perm is None else [perm]
        if perm is not None and not wide:
            perms.append(perm.astype(np.int32))              # ops/indexing.py's int32 perm
        for pm in perms:
            tperm, tind, tindptr = _kernels.csr_transpose(indptr, ind, perm, n, m)
            for H, F in ((None, 1), (None, 5), (1, 3), (3, 4)):
                vals = rng.standard_normal(nnz if H is None else (nnz, H)).astype(dtype)
                X = rng.standard_normal((n, F) if H is None else (n, H, F)).astype(dtype)
                got = _sparse.spmm_csr(indptr, ind, pm, vals, X, m, 1, True)
                ref = _sparse.spmm_csr(tindptr, tind, tperm, vals, X, n, 1)
                assert got.shape == ref.shape and got.dtype == dtype
                assert np.array_equal(got, ref)
            x1 = rng.standard_normal(n).astype(dtype)
            v1 = rng.standard_normal(nnz).astype(dtype)
            assert np.array_equal(_sparse.spmm_csr(indptr, ind, pm, v1, x1, m, 1, True),
                                  _sparse.spmm_csr(tindptr, tind, tperm, v1, x1, n, 1))
    with pytest.raises(ValueError, match="rows, expected"):
        _sparse.spmm_csr(indptr, ind, perm, v1, np.ones(m + 1, dtype), m, 1, True)


@pytest.mark.parametrize("nnz", [1000, 8191, 8192, 8193, 16384, 40_000])
def test_thread_split_around_threshold(nnz):
    """Work per thread >= 2**16: at F = 8, two threads start around nnz + n = 16384."""
    rng = np.random.default_rng(nnz)
    n, m, F = 37, 50, 8
    row = np.sort(rng.integers(0, n, nnz))
    row[row == 5] = 6                          # an empty row
    col = rng.integers(0, m, nnz)
    p = Pattern(np.stack([row, col]), (n, m))
    vals = rng.standard_normal(nnz)
    B = rng.standard_normal((m, F))
    ref = _scipy_product(p, vals, B, False)
    perm, ind, indptr = p.csr()
    from cgrad import _sparse
    for t in (1, 2, 3, 64):
        out = _sparse.spmm_csr(indptr, ind, perm, vals, B, m, t)
        assert np.array_equal(out, ref)
        assert not out[5].any()


def test_concurrent_python_threads_same_bits():
    rng = np.random.default_rng(5)
    n, m, nnz, F = 2000, 1500, 200_000, 16
    p = Pattern(np.stack([rng.integers(0, n, nnz), rng.integers(0, m, nnz)]), (n, m))
    vals = rng.standard_normal(nnz).astype(np.float32)
    B = rng.standard_normal((m, F)).astype(np.float32)
    Bt = rng.standard_normal((n, F)).astype(np.float32)
    ref = _scipy_product(p, vals, B, False)
    reft = _scipy_product(p, vals, Bt, True)
    p.T().product(vals, Bt)                    # structures built before the race
    prev = _threads.sparse_threads()
    _kernels.set_num_threads(2)
    errors = []

    def work():
        try:
            for _ in range(5):
                if not (np.array_equal(p.product(vals, B), ref)
                        and np.array_equal(p.T().product(vals, Bt), reft)):
                    errors.append("mismatch")
        except Exception as exc:           # pragma: no cover - reported below
            errors.append(repr(exc))
    try:
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        _kernels.set_num_threads(prev)
    assert errors == []


def test_spmm_csr_checks_shapes_and_types():
    from cgrad import _sparse
    p = Pattern(np.array([[0, 1], [1, 0]]), (2, 2))
    perm, ind, indptr = p.csr()
    vals = np.ones(2)
    with pytest.raises(ValueError):
        _sparse.spmm_csr(indptr, ind, perm, vals, np.ones((3, 2)), 2)
    with pytest.raises(TypeError):
        _sparse.spmm_csr(indptr, ind, perm, vals, np.ones((2, 2), np.float32), 2)
    with pytest.raises(TypeError):
        _sparse.spmm_csr(indptr, ind, perm, vals.astype(np.int64), np.ones((2, 2)), 2)
    with pytest.raises(ValueError):
        _sparse.spmm_csr(indptr, ind, None, np.ones(3), np.ones((2, 2)), 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (50_000,), (50_000, 1), (50_000, 8),
                                   (9000, 16), (300, 3), (20_000, 17), (0, 5)])
def test_segment_sum_bitwise_equal_numpy(shape, dtype, threads):
    """The compiled segment sum equals the NumPy path (bincount per column, or np.add.at)
    bit for bit, with unsorted ids, empty segments and any thread count."""
    from cgrad.sparse._pattern import segment_sum_np
    rng = np.random.default_rng(shape[0])
    v = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3, shape)).astype(dtype)
    n = 1000
    ids = rng.integers(0, n, shape[0])
    ids[ids == 3] = 4                          # an empty segment
    got = segment_sum_np(v, ids, n)
    prev = _kernels.use_extension(False)
    try:
        ref = segment_sum_np(v, ids, n)
    finally:
        _kernels.use_extension(prev)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(got, ref)
    assert not got[3].any()
    Vn = np.asfortranarray(v) if v.ndim == 2 else v[::-1]  # strided values
    prev = _kernels.use_extension(False)
    try:
        ref2 = segment_sum_np(Vn, ids, n)
    finally:
        _kernels.use_extension(prev)
    assert np.array_equal(segment_sum_np(Vn, ids, n), ref2)
    if v.dtype == np.float32 and (v.ndim == 1 or v.shape[1] <= 16) or v.dtype == np.float64:
        from cgrad import _sparse
        acc = _sparse.segment_sum(ids, v, n, 1)
        for t in (2, 3, 64):                   # the kernel's own segment split
            assert np.array_equal(_sparse.segment_sum(ids, v, n, t), acc)


def test_segment_sum_rejects_bad_ids():
    from cgrad import _sparse
    with pytest.raises(IndexError):
        _sparse.segment_sum(np.array([0, 5]), np.ones(2), 5)
    with pytest.raises(IndexError):
        _sparse.segment_sum(np.array([-1, 0]), np.ones((2, 3), np.float32), 5)
    with pytest.raises(TypeError):
        _sparse.segment_sum(np.array([0, 1]), np.ones(2, np.int64), 5)


def test_spmm_takes_a_pattern():
    """cgrad.spmm(Pattern, values, shape, b): the same values and gradients as with an index
    tensor; the Pattern owns its indices (read-only); a shape mismatch raises."""
    import cgrad
    rng = np.random.default_rng(4)
    idx = np.stack([rng.integers(0, 30, 200), rng.integers(0, 20, 200)])
    p = Pattern(idx.copy(), (30, 20))
    assert not p.idx.flags.writeable
    outs = []
    for ind in (p, cgrad.from_numpy(idx)):
        v = cgrad.tensor(rng.standard_normal(200) if not outs else vals0, requires_grad=True)
        b = cgrad.tensor(np.arange(60.0).reshape(20, 3), requires_grad=True)
        vals0 = v.detach().numpy().copy()
        out = cgrad.spmm(ind, v, (30, 20), b)
        (out * out).sum().backward()
        outs.append((out.detach().numpy(), v.grad.numpy(), b.grad.numpy()))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
    with pytest.raises(RuntimeError, match="does not match"):
        cgrad.spmm(p, cgrad.ones(200, dtype=cgrad.float64), (20, 30), cgrad.ones(30, 1,
                   dtype=cgrad.float64))
