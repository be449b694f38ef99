"""Sparse kernels: SDDMM (compiled or chunked NumPy), and the compiled CSR builder, CSR
transpose and SpMM behind ``Pattern.csr`` / ``Pattern.product``.

``sddmm(row, col, G, B)`` returns ``out[k] = dot(G[row[k]], B[col[k]])``: the gradient of
the stored values of A in ``A @ B``. Both backends work in O(nnz * F) time; the NumPy one
uses two gather buffers of ``CHUNK`` rows (about 4 MB at F = 64 in float64), never
``G[row]`` for all edges at once (0.5 GB per 1M x 64 edges).

``csr_build`` makes a pattern's CSR arrays by a stable counting sort on the rows (O(nnz + n),
no sort of int64 keys); ``csr_transpose`` the CSR of the transpose in scipy's csc_matvecs
order; ``spmm_csr`` the product, values gathered through the permutation inside the loop,
bit for bit scipy's csr_matvecs (tests/test_sparse_kernels.py); ``spmm_csr_t`` the
transposed product on one thread by a scatter over the source CSR rows, the same sums in the
same order as ``spmm_csr`` over the transposed structure (1.7-2x faster at 1M nodes / 11M
edges than that gather, whose values are read in random order, and no transposed structure
to build or keep). With more than one sparse thread the transposed product is the gather
(it splits the output rows over the threads).

Backend choice: the compiled kernels when they are built, unless the environment variable
``CGRAD_NO_SPARSE_EXT=1`` is set at import or ``use_extension(False)`` was called (tests run
both; without them Pattern falls back to argsort + scipy's kernels). Threads:
``set_num_threads(n)`` (or ``cgrad.set_num_threads``, which also sets the BLAS: Note [Thread
pools] in cgrad/_threads.py); the default is ``min(2, os.cpu_count())``, or the environment
variable ``CGRAD_SPARSE_THREADS``. SDDMM splits the entries, SpMM the output rows (ranges of
about equal nnz, each thread owning whole rows, so every sum keeps its order); below about
65,536 multiply-adds per thread one thread runs. The result never depends on the thread
count. Segment sums of float values (``segment_sum``: float64 accumulators, np.bincount's
order) run on one thread: a second one was measured slower. The GAT's other per-edge ops
stay single-threaded NumPy.
"""
from __future__ import annotations

import os

import numpy as np

from cgrad import _threads

try:
    from cgrad import _sparse as _ext
except ImportError:  # pragma: no cover - only when the module was not built
    _ext = None

CHUNK = 8192

_use_ext = _ext is not None and os.environ.get("CGRAD_NO_SPARSE_EXT", "") in ("", "0")


def extension_available():
    """True if the compiled SDDMM kernel (cgrad._sparse) is importable."""
    return _ext is not None


def use_extension(flag=True):
    """Select the compiled kernel (True, when built) or the NumPy fallback (False).
    Returns the previous setting."""
    global _use_ext
    prev = _use_ext
    _use_ext = bool(flag) and _ext is not None
    return prev


def backend():
    """'c' or 'numpy': the SDDMM backend in use."""
    return "c" if _use_ext else "numpy"


def set_num_threads(n):
    """Number of threads for the compiled SDDMM kernel (>= 1)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads: expected a positive number, got {n}")
    _threads.set_sparse_threads(n)


def get_num_threads():
    """Number of threads of the compiled SDDMM kernel."""
    return _threads.sparse_threads()


def has_csr_build():
    """True if the compiled counting-sort CSR builder is in use (see ``csr_build``)."""
    return _use_ext


def csr_build(row, col, n, m, wide):
    """(perm or None, ind, indptr, cols_sorted): CSR arrays of the (n, m) pattern (row, col)
    by a stable counting sort on the rows (cgrad._sparse.csr_build; the caller checked
    ``has_csr_build()``). int64 ind/indptr when ``wide`` else int32."""
    return _ext.csr_build(row, col, n, m, wide)


def csr_transpose(indptr, ind, perm, n, m):
    """(tperm, tind, tindptr): the transpose of an (n, m) CSR structure (see
    cgrad._sparse.csr_transpose)."""
    return _ext.csr_transpose(indptr, ind, perm, n, m)


def spmm_csr(indptr, ind, perm, vals, X, m):
    """CSR matrix (values ``vals[perm]``) @ X with the sparse threads: bit for bit scipy's
    csr_matvecs whatever the thread count (see cgrad._sparse.spmm_csr). vals (nnz, H) and X
    (m, H, F): H heads sharing the structure, (n, H, F) out."""
    return _ext.spmm_csr(indptr, ind, perm, vals, X, m, _threads.sparse_threads())


def spmm_csr_t(indptr, ind, perm, vals, X, m):
    """The transposed product ``A.T @ X`` of the (n, m) CSR matrix of ``spmm_csr`` (X with n
    rows; heads as there), by a scatter over A's rows on one thread: bit for bit the gather
    over ``csr_transpose``'s structure, without building it (cgrad._sparse.spmm_csr with
    ``transpose=True``)."""
    return _ext.spmm_csr(indptr, ind, perm, vals, X, m, 1, True)


def segment_sum(ids, V, n):
    """float64 segment sums of float32/float64 V (1-D or 2-D) in np.bincount's order, bit for
    bit (one thread), or None when the compiled kernel is not in use."""
    if not _use_ext:
        return None
    # one thread: the kernel can split the segments (tested), but on the 2-core machine a
    # second thread was slower than one (memory bound: 13 ms vs 11 ms at 3.3M x 8, bench
    # note in bench/README.md); it is 8x faster than the bincount per column either way
    return _ext.segment_sum(ids, V, n, 1)


def _rows(a):
    """a as a 2-D array whose rows are contiguous (a copy only when they are not)."""
    if a.ndim == 2 and (a.shape[1] <= 1 or a.strides[1] == a.itemsize):
        return a
    return np.ascontiguousarray(a)


def sddmm_numpy(row, col, G, B, out=None, chunk=CHUNK):
    """Chunked NumPy SDDMM (the fallback; also the reference in the tests)."""
    nnz = row.shape[0]
    dtype = G.dtype
    if out is None:
        out = np.empty(nnz, dtype=dtype)
    if nnz == 0:
        return out
    F = G.shape[1]
    if F == 1:
        np.multiply(G[row, 0], B[col, 0], out=out)
        return out
    n = min(chunk, nnz)
    bg = np.empty((n, F), dtype=dtype)
    bb = np.empty((n, F), dtype=dtype)
    for s in range(0, nnz, n):
        e = min(s + n, nnz)
        m = e - s
        # mode='clip' skips the bounds check (2.3x faster); indices were validated when the
        # sparse structure was built.
        np.take(G, row[s:e], axis=0, out=bg[:m], mode="clip")
        np.take(B, col[s:e], axis=0, out=bb[:m], mode="clip")
        np.einsum("ij,ij->i", bg[:m], bb[:m], out=out[s:e])
    return out


def sddmm(row, col, G, B):
    """out[k] = dot(G[row[k]], B[col[k]]) for int64 row/col and 2-D float G, B of one dtype;
    for 3-D G (n, H, F) and B (m, H, F), out (nnz, H) with ``out[k, h] = dot(G[row[k], h],
    B[col[k], h])`` (H heads sharing the indices; the same dot products, bit for bit, as
    G.reshape(n*H, F) and B.reshape(m*H, F) at the block-diagonal indices row*H + h).

    Indices must be valid (the caller's structure was validated); the compiled kernel checks
    them again and raises IndexError, the NumPy path clips.
    """
    if _use_ext and G.dtype.kind == "f" and G.dtype.itemsize in (4, 8):
        if G.ndim == 3:
            return _ext.sddmm(row, col, G, B, None, _threads.sparse_threads())
        return _ext.sddmm(row, col, _rows(G), _rows(B), None, _threads.sparse_threads())
    if G.ndim == 3:
        out = np.empty((row.shape[0], G.shape[1]), dtype=G.dtype)
        for h in range(G.shape[1]):
            out[:, h] = sddmm_numpy(row, col, G[:, h], B[:, h])
        return out
    return sddmm_numpy(row, col, G, B)
