# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""cgrad._sparse: the compiled sparse kernels (csrc/cg_sparse.c) behind cgrad.sparse.

``sddmm(row, col, G, B, out=None, nthreads=1)`` computes ``out[k] = dot(G[row[k]], B[col[k]])``
for every stored entry k (the gradient of the values of a sparse matrix in ``A @ B``; per head
for 3-D operands);
``csr_build`` / ``csr_transpose`` build CSR structures by stable counting sorts;
``spmm_csr`` multiplies a CSR matrix by a dense one, split over ``nthreads`` threads by output
rows. All run their C loops with the GIL released (the arrays they read are held by the
caller's references for the call's duration). cgrad.sparse falls back to NumPy/SciPy when
this module is missing or ``CGRAD_NO_SPARSE_EXT=1``.
"""
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t

import numpy as np

cnp.import_array()

cdef extern from "cg_sparse.h" nogil:
    int64_t cg_sddmm_f32(const int64_t *row, const int64_t *col, int64_t nnz,
                         const float *G, int64_t ldg, int64_t g_rows,
                         const float *B, int64_t ldb, int64_t b_rows,
                         int64_t H, int64_t F, float *out, int nthreads)
    int64_t cg_sddmm_f64(const int64_t *row, const int64_t *col, int64_t nnz,
                         const double *G, int64_t ldg, int64_t g_rows,
                         const double *B, int64_t ldb, int64_t b_rows,
                         int64_t H, int64_t F, double *out, int nthreads)
    int cg_sparse_has_threads()
    int64_t cg_segment_sum(const int64_t *ids, int64_t nnz, const void *V, int64_t ldv,
                           int64_t H, int is_f64, double *acc, int64_t n, int nthreads)
    int64_t cg_csr_transpose_i32(int64_t n, int64_t m, const int32_t *indptr,
                                 const int32_t *ind, const int64_t *perm, int32_t *tindptr,
                                 int32_t *tperm, int32_t *tind)
    int64_t cg_csr_transpose_i64(int64_t n, int64_t m, const int64_t *indptr,
                                 const int64_t *ind, const int64_t *perm, int64_t *tindptr,
                                 int64_t *tperm, int64_t *tind)
    void cg_spmm_csr(int kind, int64_t n, int64_t H, int64_t F, const void *indptr,
                     const void *ind, const void *perm, const void *vals, const void *X,
                     int64_t ldx, void *out, int nthreads)
    void cg_spmm_csr_t(int kind, int64_t n, int64_t m, int64_t H, int64_t F,
                       const void *indptr, const void *ind, const void *perm,
                       const void *vals, const void *X, int64_t ldx, void *out)
    int64_t cg_csr_build_i32(const int64_t *row, const int64_t *col, int64_t nnz, int64_t n,
                             int64_t m, int32_t *indptr, int64_t *perm, int32_t *ind)
    int64_t cg_csr_build_i64(const int64_t *row, const int64_t *col, int64_t nnz, int64_t n,
                             int64_t m, int64_t *indptr, int64_t *perm, int64_t *ind)


HAS_THREADS = bool(cg_sparse_has_threads())


cdef cnp.ndarray _index_array(object a, str name):
    if not (cnp.PyArray_Check(a) and a.dtype == np.int64 and a.ndim == 1):
        raise TypeError(f"sddmm: {name} must be a 1-D int64 ndarray")
    if not (cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a) and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)):
        a = np.require(a, np.int64, ["C", "A"])      # a contiguous aligned native copy
    return <cnp.ndarray>a


cdef cnp.ndarray _dense_rows(object a, str name, object dtype):
    """A 2-D float array whose rows are contiguous (any row stride, including 0)."""
    if not (cnp.PyArray_Check(a) and a.ndim == 2):
        raise TypeError(f"sddmm: {name} must be a 2-D ndarray")
    if a.dtype != dtype:
        raise TypeError(f"sddmm: {name} has dtype {a.dtype}, expected {dtype}")
    return _rows_of(a)


cdef cnp.ndarray _heads_rows(object a, str name, object dtype):
    """A 3-D (rows, H, F) float array as a 2-D (rows, H*F) one whose rows are contiguous (a
    view when each row's H*F elements are contiguous, else a copy)."""
    if not (cnp.PyArray_Check(a) and a.ndim == 3):
        raise TypeError(f"sddmm: {name} must be a 3-D ndarray")
    if a.dtype != dtype:
        raise TypeError(f"sddmm: {name} has dtype {a.dtype}, expected {dtype}")
    return _rows_of(a.reshape(a.shape[0], a.shape[1] * a.shape[2]))


cdef cnp.ndarray _rows_of(object a):
    """2-D a with contiguous aligned rows (a copy only when they are not)."""
    cdef cnp.ndarray arr = <cnp.ndarray>a
    cdef Py_ssize_t item = arr.itemsize
    if arr.shape[1] > 1 and arr.strides[1] != item:
        arr = np.ascontiguousarray(arr)
    if arr.shape[0] > 1 and (arr.strides[0] < 0 or arr.strides[0] % item != 0):
        arr = np.ascontiguousarray(arr)
    if not cnp.PyArray_ISALIGNED(arr):       # the kernel reads whole elements (C alignment)
        arr = np.require(arr, None, ["C", "A"])
    return arr


def sddmm(row, col, G, B, out=None, int nthreads=1):
    """out[k] = dot(G[row[k], :], B[col[k], :]) for k < len(row); returns out.

    row, col: 1-D int64 arrays of equal length; G (n, F) and B (m, F): float32 or float64
    arrays of the same dtype whose rows are contiguous; out: None or a contiguous writeable
    1-D array of that dtype and length. Raises IndexError for an index out of range.
    Multi-head: G (n, H, F) and B (m, H, F) give out (nnz, H) with
    ``out[k, h] = dot(G[row[k], h], B[col[k], h])`` (out=None only).
    """
    cdef cnp.ndarray r = _index_array(row, "row")
    cdef cnp.ndarray c = _index_array(col, "col")
    cdef int64_t nnz = r.shape[0]
    if c.shape[0] != nnz:
        raise ValueError(f"sddmm: row and col have different lengths ({nnz} and {c.shape[0]})")
    if not cnp.PyArray_Check(G):
        raise TypeError("sddmm: G must be a 2-D ndarray")
    dtype = G.dtype
    if dtype != np.float32 and dtype != np.float64:
        raise TypeError(f"sddmm: only float32 and float64 are supported, got {dtype}")
    cdef int64_t H = 1
    cdef cnp.ndarray g, b
    if G.ndim == 3:
        if not (cnp.PyArray_Check(B) and B.ndim == 3 and B.shape[1:] == G.shape[1:]):
            raise ValueError("sddmm: for a 3-D G, B must be 3-D with G's last two sizes")
        if out is not None:
            raise ValueError("sddmm: out must be None for 3-D operands")
        H = G.shape[1]
        g = _heads_rows(G, "G", dtype)
        b = _heads_rows(B, "B", dtype)
    else:
        g = _dense_rows(G, "G", dtype)
        b = _dense_rows(B, "B", dtype)
    if g.shape[1] != b.shape[1]:
        raise ValueError(
            f"sddmm: G and B must have the same number of columns, got {g.shape[1]} and "
            f"{b.shape[1]}")
    cdef cnp.ndarray o
    if G.ndim == 3:
        o = <cnp.ndarray>np.empty((nnz, H), dtype=dtype)
        if H == 0:
            return o
    elif out is None:
        o = <cnp.ndarray>np.empty(nnz, dtype=dtype)
    else:
        if not (cnp.PyArray_Check(out) and out.ndim == 1 and out.shape[0] == nnz
                and out.dtype == dtype and out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("sddmm: out must be a contiguous writeable 1-D array of length "
                             "nnz and G's dtype")
        o = <cnp.ndarray>out
    cdef int64_t F = g.shape[1] // H
    cdef Py_ssize_t item = g.itemsize
    cdef int64_t ldg = g.strides[0] // item if g.shape[0] > 1 else F
    cdef int64_t ldb = b.strides[0] // item if b.shape[0] > 1 else F
    cdef int64_t g_rows = g.shape[0], b_rows = b.shape[0], bad
    cdef const int64_t *rp = <const int64_t *>cnp.PyArray_DATA(r)
    cdef const int64_t *cp = <const int64_t *>cnp.PyArray_DATA(c)
    cdef void *gp = cnp.PyArray_DATA(g)
    cdef void *bp = cnp.PyArray_DATA(b)
    cdef void *op = cnp.PyArray_DATA(o)
    if dtype == np.float32:
        with nogil:
            bad = cg_sddmm_f32(rp, cp, nnz, <const float *>gp, ldg, g_rows,
                               <const float *>bp, ldb, b_rows, H, F, <float *>op, nthreads)
    else:
        with nogil:
            bad = cg_sddmm_f64(rp, cp, nnz, <const double *>gp, ldg, g_rows,
                               <const double *>bp, ldb, b_rows, H, F, <double *>op, nthreads)
    if bad >= 0:
        raise IndexError(
            f"sddmm: entry {bad} has index ({r[bad]}, {c[bad]}) out of range for G with "
            f"{g_rows} rows and B with {b_rows} rows")
    return o


def csr_build(row, col, int64_t n, int64_t m, bint wide=False):
    """CSR arrays of the 2-D pattern (row, col) of shape (n, m) by a stable counting sort on
    the rows: returns (perm or None, ind, indptr, cols_sorted).

    row, col: 1-D int64 arrays of equal length. ind and indptr are int64 when ``wide`` else
    int32 (then n, m and nnz must be below 2**31). perm (int64) is None when the rows are
    already non-decreasing (CSR order is entry order). cols_sorted: every row's columns are
    non-decreasing in CSR order (the result is then that of a stable sort on (row, col)).
    Raises IndexError for an index out of range, MemoryError.
    """
    cdef cnp.ndarray r = _index_array(row, "row")
    cdef cnp.ndarray c = _index_array(col, "col")
    cdef int64_t nnz = r.shape[0], res
    if c.shape[0] != nnz:
        raise ValueError(f"csr_build: row and col have different lengths ({nnz} and {c.shape[0]})")
    if n < 0 or m < 0:
        raise ValueError("csr_build: negative shape")
    if not wide and (n >= 2 ** 31 or m >= 2 ** 31 or nnz >= 2 ** 31):
        raise ValueError("csr_build: too large for int32 indices")
    itype = np.int64 if wide else np.int32
    cdef cnp.ndarray indptr = <cnp.ndarray>np.empty(n + 1, dtype=itype)
    cdef cnp.ndarray ind = <cnp.ndarray>np.empty(nnz, dtype=itype)
    # pages of perm are only touched (committed) when the rows need sorting
    cdef cnp.ndarray perm = <cnp.ndarray>np.empty(nnz, dtype=np.int64)
    cdef const int64_t *rp = <const int64_t *>cnp.PyArray_DATA(r)
    cdef const int64_t *cp = <const int64_t *>cnp.PyArray_DATA(c)
    cdef void *ipp = cnp.PyArray_DATA(indptr)
    cdef void *indp = cnp.PyArray_DATA(ind)
    cdef int64_t *pp = <int64_t *>cnp.PyArray_DATA(perm)
    if wide:
        with nogil:
            res = cg_csr_build_i64(rp, cp, nnz, n, m, <int64_t *>ipp, pp, <int64_t *>indp)
    else:
        with nogil:
            res = cg_csr_build_i32(rp, cp, nnz, n, m, <int32_t *>ipp, pp, <int32_t *>indp)
    if res == -1:
        raise IndexError(f"csr_build: an index is out of range for shape ({n}, {m})")
    if res == -2:
        raise MemoryError("csr_build: out of memory")
    return (None if res & 1 else perm), ind, indptr, bool(res & 2)


cdef cnp.ndarray _plain(object a, object dtype, str name):
    """a as a 1-D contiguous aligned native array of dtype (TypeError otherwise)."""
    if not (cnp.PyArray_Check(a) and a.ndim == 1 and a.dtype == dtype):
        raise TypeError(f"{name} must be a 1-D {np.dtype(dtype).name} ndarray")
    if not (cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a) and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)):
        a = np.require(a, dtype, ["C", "A"])
    return <cnp.ndarray>a


def csr_transpose(indptr, ind, perm, int64_t n, int64_t m):
    """(tperm, tind, tindptr): the CSR structure of the transpose of the (n, m) CSR pattern
    (indptr, ind) whose CSR position jj holds entry perm[jj] (perm None: jj); int32 or int64
    as indptr. Each transposed row lists its entries by increasing source row (scipy's
    csc_matvecs order). Raises IndexError for a column out of range."""
    wide = cnp.PyArray_Check(indptr) and indptr.dtype == np.int64
    itype = np.int64 if wide else np.int32
    cdef cnp.ndarray ip = _plain(indptr, itype, "indptr")
    cdef cnp.ndarray ix = _plain(ind, itype, "ind")
    if n < 0 or m < 0 or ip.shape[0] != n + 1:
        raise ValueError("csr_transpose: indptr must have n + 1 entries")
    cdef int64_t nnz = ix.shape[0], res
    if n and int(ip[n]) != nnz:
        raise ValueError("csr_transpose: indptr[n] != len(ind)")
    if not wide and (m >= 2 ** 31 or nnz >= 2 ** 31):
        raise ValueError("csr_transpose: too large for int32 indices")
    cdef cnp.ndarray pp
    cdef const int64_t *permp = NULL
    if perm is not None:
        pp = _plain(perm, np.int64, "perm")
        if pp.shape[0] != nnz:
            raise ValueError("csr_transpose: perm must have one entry per position")
        permp = <const int64_t *>cnp.PyArray_DATA(pp)
    cdef cnp.ndarray tindptr = <cnp.ndarray>np.empty(m + 1, dtype=itype)
    cdef cnp.ndarray tperm = <cnp.ndarray>np.empty(nnz, dtype=itype)
    cdef cnp.ndarray tind = <cnp.ndarray>np.empty(nnz, dtype=itype)
    cdef const void *ipd = cnp.PyArray_DATA(ip)
    cdef const void *ixd = cnp.PyArray_DATA(ix)
    cdef void *a = cnp.PyArray_DATA(tindptr)
    cdef void *b = cnp.PyArray_DATA(tperm)
    cdef void *c = cnp.PyArray_DATA(tind)
    if wide:
        with nogil:
            res = cg_csr_transpose_i64(n, m, <const int64_t *>ipd, <const int64_t *>ixd, permp,
                                       <int64_t *>a, <int64_t *>b, <int64_t *>c)
    else:
        with nogil:
            res = cg_csr_transpose_i32(n, m, <const int32_t *>ipd, <const int32_t *>ixd, permp,
                                       <int32_t *>a, <int32_t *>b, <int32_t *>c)
    if res == -1:
        raise IndexError(f"csr_transpose: a column index is out of range for {m} columns")
    if res == -2:
        raise MemoryError("csr_transpose: out of memory")
    return tperm, tind, tindptr


def spmm_csr(indptr, ind, perm, vals, X, int64_t m, int nthreads=1, bint transpose=False):
    """A @ X as a new C-contiguous array, for the (n, m) CSR matrix A (indptr, ind) whose
    CSR position jj holds vals[perm[jj]] (perm None: vals[jj]); bit for bit scipy's
    csr_matvec(s) with rows split over ``nthreads`` threads (each owns whole output rows).

    indptr/ind: int32 or int64 (same); perm: None, int64, or int32 with int32 indices;
    vals: float32/float64 1-D; X: (m,) or (m, F) of vals' dtype, rows contiguous. The
    structure is trusted (built by csr_build / csr_transpose); shapes are checked.
    Multi-head: vals (nnz, H) and X (m, H, F) give (n, H, F), head h the product of the
    matrix with values vals[:, h] and X[:, h] (H matrices sharing one structure).
    ``transpose``: A.T @ X instead (X with n rows, m rows out), by a scatter over A's rows on
    one thread (cg_spmm_csr_t): bit for bit the product over csr_transpose's structure."""
    wide = cnp.PyArray_Check(indptr) and indptr.dtype == np.int64
    itype = np.int64 if wide else np.int32
    cdef cnp.ndarray ip = _plain(indptr, itype, "indptr")
    cdef cnp.ndarray ix = _plain(ind, itype, "ind")
    cdef int64_t n = ip.shape[0] - 1
    if n < 0:
        raise ValueError("spmm_csr: empty indptr")
    cdef int64_t nnz = ix.shape[0]
    if int(ip[n]) != nnz or int(ip[0]) != 0:
        raise ValueError("spmm_csr: indptr does not match ind")
    if not cnp.PyArray_Check(vals) or vals.dtype not in (np.float32, np.float64):
        raise TypeError("spmm_csr: vals must be a float32 or float64 ndarray")
    dtype = vals.dtype
    cdef int64_t H = 1
    heads = vals.ndim == 2
    cdef cnp.ndarray v
    if heads:
        H = vals.shape[1]
        v = <cnp.ndarray>np.ascontiguousarray(vals)
        if not cnp.PyArray_ISALIGNED(v):
            v = np.require(v, None, ["C", "A"])
    else:
        v = _plain(vals, dtype, "vals")
    cdef cnp.ndarray pp
    cdef const void *permp = NULL
    cdef int p32 = 0
    if perm is not None:
        if not wide and cnp.PyArray_Check(perm) and perm.dtype == np.int32:
            pp = _plain(perm, np.int32, "perm")
            p32 = 1
        else:
            pp = _plain(perm, np.int64, "perm")
        if pp.shape[0] != nnz:
            raise ValueError("spmm_csr: perm must have one entry per position")
        permp = cnp.PyArray_DATA(pp)
    elif v.shape[0] != nnz:
        raise ValueError("spmm_csr: vals must have one entry per position")
    one_d = False
    cdef cnp.ndarray x
    if heads:
        if not (cnp.PyArray_Check(X) and X.dtype == dtype and X.ndim == 3
                and X.shape[1] == H):
            raise TypeError("spmm_csr: for 2-D vals, X must be a 3-D ndarray (m, H, F) of "
                            "vals' dtype")
        x = _heads_rows(X, "X", dtype)
    else:
        if not cnp.PyArray_Check(X) or X.dtype != dtype or X.ndim not in (1, 2):
            raise TypeError("spmm_csr: X must be a 1-D or 2-D ndarray of vals' dtype")
        one_d = X.ndim == 1
        x = _dense_rows(X.reshape(-1, 1) if one_d else X, "X", dtype)
    cdef int64_t rows_in = n if transpose else m, rows_out = m if transpose else n
    if m < 0:
        raise ValueError("spmm_csr: negative number of columns")
    if x.shape[0] != rows_in:
        raise ValueError(f"spmm_csr: X has {x.shape[0]} rows, expected {rows_in}")
    cdef int64_t F = X.shape[2] if heads else x.shape[1]
    cdef int64_t ldx = x.strides[0] // x.itemsize if x.shape[0] > 1 else H * F
    cdef cnp.ndarray out = <cnp.ndarray>np.empty((rows_out, H * F), dtype=dtype)
    cdef int kind
    if p32:
        kind = 5 if dtype == np.float64 else 4
    elif wide:
        kind = 3 if dtype == np.float64 else 2
    else:
        kind = 1 if dtype == np.float64 else 0
    cdef const void *ipd = cnp.PyArray_DATA(ip)
    cdef const void *ixd = cnp.PyArray_DATA(ix)
    cdef const void *vd = cnp.PyArray_DATA(v)
    cdef const void *xd = cnp.PyArray_DATA(x)
    cdef void *od = cnp.PyArray_DATA(out)
    if transpose:
        with nogil:
            cg_spmm_csr_t(kind, n, m, H, F, ipd, ixd, permp, vd, xd, ldx, od)
    else:
        with nogil:
            cg_spmm_csr(kind, n, H, F, ipd, ixd, permp, vd, xd, ldx, od, nthreads)
    if heads:
        return out.reshape(rows_out, H, F)
    return out.reshape(rows_out) if one_d else out


def segment_sum(ids, V, int64_t n, int nthreads=1):
    """float64 (n,) or (n, H) sums ``out[s] = sum of V[k] over ids[k] == s``, k ascending
    (np.bincount's order, bit for bit), for float32/float64 V of 1 or 2 dimensions; segments
    split over ``nthreads`` threads. Raises IndexError for an id outside [0, n)."""
    cdef cnp.ndarray ix = _plain(ids, np.int64, "ids")
    cdef int64_t nnz = ix.shape[0]
    if not (cnp.PyArray_Check(V) and V.ndim in (1, 2) and V.dtype in (np.float32, np.float64)):
        raise TypeError("segment_sum: V must be a 1-D or 2-D float32/float64 ndarray")
    if V.shape[0] != nnz:
        raise ValueError("segment_sum: V must have one row per id")
    if n < 0:
        raise ValueError("segment_sum: negative number of segments")
    one_d = V.ndim == 1
    cdef cnp.ndarray v = _dense_rows(V.reshape(-1, 1) if one_d else V, "V", V.dtype)
    cdef int64_t H = v.shape[1]
    cdef int64_t ldv = v.strides[0] // v.itemsize if v.shape[0] > 1 else H
    cdef int is_f64 = V.dtype == np.float64
    cdef cnp.ndarray acc = <cnp.ndarray>np.zeros((n, H), dtype=np.float64)
    cdef const int64_t *ip = <const int64_t *>cnp.PyArray_DATA(ix)
    cdef const void *vp = cnp.PyArray_DATA(v)
    cdef double *ap = <double *>cnp.PyArray_DATA(acc)
    cdef int64_t bad
    with nogil:
        bad = cg_segment_sum(ip, nnz, vp, ldv, H, is_f64, ap, n, nthreads)
    if bad >= 0:
        raise IndexError(f"segment_sum: id {ix[bad]} at position {bad} is out of range "
                         f"for {n} segments")
    return acc.reshape(n) if one_d else acc
