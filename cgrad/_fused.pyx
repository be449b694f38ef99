# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""cgrad._fused: fused pointwise kernels (csrc/cg_fused.c): recurrent time steps, GELU.

``lstm_fwd(lo, n, gi, hh, c, h, acts, cs, tcs, hs)`` and
``lstm_bwd(lo, n, acts, tcs, cprev, go, dh, dc, d)`` run one LSTM time step on rows
``lo:lo + n`` of the per-sequence arrays (gi, acts, cs, tcs, hs, cprev, go, d: (N, 4H) or
(N, H)) and rows ``:n`` of the state arrays (hh, c, h, dh, dc: (B, 4H) or (B, H)); the
formulas are in csrc/cg_fused.h. Every array must be a C-contiguous, aligned, native
float32 or float64 ndarray of one dtype, the written ones writeable, no two overlapping;
anything else raises TypeError or ValueError (nothing is copied: the kernels write into
the caller's buffers). The C loops run with the GIL released.
``gelu_f32(x)`` returns (x Phi(x), Phi(x)) and ``gelu_bwd_f32(x, cdf, g)`` returns
g (Phi(x) + x phi(x)) for float32 arrays (cdf None: Phi recomputed), new C-contiguous
arrays of x's shape (Note [GELU in float32] in cgrad/ops/pointwise.py).
cgrad.nn.functional._rnn and cgrad.ops.pointwise fall back to NumPy when this module is
missing or ``CGRAD_NO_FUSED_EXT=1``.
"""
cimport numpy as cnp
from libc.stdint cimport int64_t

import numpy as np

cnp.import_array()

cdef extern from "cg_fused.h" nogil:
    void cg_lstm_fwd_f32(int64_t n, int64_t H, const float *gi, const float *hh, float *c,
                         float *h, float *acts, float *cs, float *tcs, float *hs)
    void cg_lstm_fwd_f64(int64_t n, int64_t H, const double *gi, const double *hh,
                         double *c, double *h, double *acts, double *cs, double *tcs,
                         double *hs)
    void cg_lstm_bwd_f32(int64_t n, int64_t H, const float *acts, const float *tcs,
                         const float *cprev, const float *go, const float *dh, float *dc,
                         float *d)
    void cg_lstm_bwd_f64(int64_t n, int64_t H, const double *acts, const double *tcs,
                         const double *cprev, const double *go, const double *dh,
                         double *dc, double *d)
    int cg_fused_disjoint(const char *const *lo, const char *const *hi, int k)
    void cg_fused_map_f32(int which, int64_t n, const float *x, float *out)
    void cg_gelu_f32(int64_t n, const float *x, float *y, float *cdf)
    void cg_gelu_bwd_f32(int64_t n, const float *x, const float *cdf, const float *g,
                         float *out)


cdef int _REQ = cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_ALIGNED
cdef int _REQ_W = _REQ | cnp.NPY_ARRAY_WRITEABLE


cdef class _Step:
    """The pointers of one call's arrays, checked (dtype, layout, shape, overlap)."""
    cdef const char *lo[9]
    cdef const char *hi[9]
    cdef char *ptr[9]
    cdef int k
    cdef int typenum
    cdef int64_t H

    cdef int add(self, str fn, str name, object a, int64_t first, int64_t n, int64_t width,
                 bint write) except -1:
        """Rows first:first + n of a 2-D array a of `width` columns (width -1: take a's,
        which sets H = width / 4 or width)."""
        if not cnp.PyArray_Check(a):
            raise TypeError(f"{fn}: {name} must be an ndarray, got {type(a).__name__}")
        cdef cnp.ndarray arr = <cnp.ndarray>a
        cdef int flags = cnp.PyArray_FLAGS(arr)
        if cnp.PyArray_NDIM(arr) != 2:
            raise ValueError(f"{fn}: {name} must be 2-D, got {cnp.PyArray_NDIM(arr)}-D")
        cdef int t = cnp.PyArray_TYPE(arr)
        if self.k == 0:
            if t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64:
                raise TypeError(f"{fn}: only float32 and float64 are supported, got "
                                f"{arr.dtype}")
            self.typenum = t
        elif t != self.typenum:
            raise TypeError(f"{fn}: {name} has dtype {arr.dtype}, expected "
                            f"{np.dtype('float32' if self.typenum == cnp.NPY_FLOAT32 else 'float64')}")
        if (flags & (_REQ_W if write else _REQ)) != (_REQ_W if write else _REQ) \
                or not cnp.PyArray_ISNOTSWAPPED(arr):
            raise ValueError(f"{fn}: {name} must be a C-contiguous aligned native"
                             f"{' writeable' if write else ''} array")
        cdef cnp.npy_intp *shape = cnp.PyArray_DIMS(arr)
        if shape[1] != width:
            raise ValueError(f"{fn}: {name} has {shape[1]} columns, expected {width}")
        if first < 0 or n < 0 or first + n > shape[0]:
            raise ValueError(f"{fn}: rows {first}:{first + n} out of range for {name} with "
                             f"{shape[0]} rows")
        cdef int64_t item = cnp.PyArray_ITEMSIZE(arr)
        cdef char *base = <char *>cnp.PyArray_DATA(arr) + first * width * item
        self.ptr[self.k] = base
        self.lo[self.k] = base
        self.hi[self.k] = base + n * width * item
        self.k += 1
        return 0

    cdef int check(self, str fn) except -1:
        if not cg_fused_disjoint(self.lo, self.hi, self.k):
            raise ValueError(f"{fn}: the arrays must not overlap")
        return 0


cdef int64_t _hidden(str fn, object gi) except -1:
    if not (cnp.PyArray_Check(gi) and cnp.PyArray_NDIM(<cnp.ndarray>gi) == 2):
        raise TypeError(f"{fn}: the gates array must be a 2-D ndarray")
    cdef int64_t w = cnp.PyArray_DIMS(<cnp.ndarray>gi)[1]
    if w % 4:
        raise ValueError(f"{fn}: the gates array has {w} columns, not a multiple of 4")
    return w // 4


def lstm_fwd(int64_t lo, int64_t n, gi, hh, c, h, acts, cs, tcs, hs):
    """One LSTM forward step (see the module docstring); returns None."""
    cdef int64_t H = _hidden("lstm_fwd", gi)
    cdef _Step s = _Step()
    s.add("lstm_fwd", "gi", gi, lo, n, 4 * H, False)
    s.add("lstm_fwd", "hh", hh, 0, n, 4 * H, False)
    s.add("lstm_fwd", "c", c, 0, n, H, True)
    s.add("lstm_fwd", "h", h, 0, n, H, True)
    s.add("lstm_fwd", "acts", acts, lo, n, 4 * H, True)
    s.add("lstm_fwd", "cs", cs, lo, n, H, True)
    s.add("lstm_fwd", "tcs", tcs, lo, n, H, True)
    s.add("lstm_fwd", "hs", hs, lo, n, H, True)
    s.check("lstm_fwd")
    if s.typenum == cnp.NPY_FLOAT32:
        with nogil:
            cg_lstm_fwd_f32(n, H, <const float *>s.ptr[0], <const float *>s.ptr[1],
                            <float *>s.ptr[2], <float *>s.ptr[3], <float *>s.ptr[4],
                            <float *>s.ptr[5], <float *>s.ptr[6], <float *>s.ptr[7])
    else:
        with nogil:
            cg_lstm_fwd_f64(n, H, <const double *>s.ptr[0], <const double *>s.ptr[1],
                            <double *>s.ptr[2], <double *>s.ptr[3], <double *>s.ptr[4],
                            <double *>s.ptr[5], <double *>s.ptr[6], <double *>s.ptr[7])


def lstm_bwd(int64_t lo, int64_t n, acts, tcs, cprev, go, dh, dc, d):
    """One LSTM backward step (see the module docstring); returns None."""
    cdef int64_t H = _hidden("lstm_bwd", acts)
    cdef _Step s = _Step()
    s.add("lstm_bwd", "acts", acts, lo, n, 4 * H, False)
    s.add("lstm_bwd", "tcs", tcs, lo, n, H, False)
    s.add("lstm_bwd", "cprev", cprev, lo, n, H, False)
    s.add("lstm_bwd", "go", go, lo, n, H, False)
    s.add("lstm_bwd", "dh", dh, 0, n, H, False)
    s.add("lstm_bwd", "dc", dc, 0, n, H, True)
    s.add("lstm_bwd", "d", d, lo, n, 4 * H, True)
    s.check("lstm_bwd")
    if s.typenum == cnp.NPY_FLOAT32:
        with nogil:
            cg_lstm_bwd_f32(n, H, <const float *>s.ptr[0], <const float *>s.ptr[1],
                            <const float *>s.ptr[2], <const float *>s.ptr[3],
                            <const float *>s.ptr[4], <float *>s.ptr[5], <float *>s.ptr[6])
    else:
        with nogil:
            cg_lstm_bwd_f64(n, H, <const double *>s.ptr[0], <const double *>s.ptr[1],
                            <const double *>s.ptr[2], <const double *>s.ptr[3],
                            <const double *>s.ptr[4], <double *>s.ptr[5], <double *>s.ptr[6])


_MAPS = {"exp": 0, "tanh": 1, "sigmoid": 2}


def map_f32(str which, x):
    """exp (of x <= 0 only), tanh or sigmoid of a float32 array by the kernels' polynomial
    functions (for tests); returns a new C-contiguous float32 array of x's shape."""
    if which not in _MAPS:
        raise ValueError(f"map_f32: which must be one of {sorted(_MAPS)}, got {which!r}")
    cdef cnp.ndarray a = <cnp.ndarray>np.ascontiguousarray(x, dtype=np.float32)
    cdef cnp.ndarray out = <cnp.ndarray>np.empty_like(a)
    cdef int w = _MAPS[which]
    cdef int64_t n = a.size
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef float *op = <float *>cnp.PyArray_DATA(out)
    with nogil:
        cg_fused_map_f32(w, n, xp, op)
    return out


cdef cnp.ndarray _f32_c(str fn, str name, object a):
    if not (cnp.PyArray_Check(a) and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_FLOAT32):
        raise TypeError(f"{fn}: {name} must be a float32 ndarray")
    return <cnp.ndarray>np.ascontiguousarray(a)       # also native and aligned


def gelu_f32(x):
    """(x * Phi(x), Phi(x)) of a float32 array, as two new C-contiguous arrays."""
    cdef cnp.ndarray a = _f32_c("gelu_f32", "x", x)
    cdef cnp.ndarray y = <cnp.ndarray>np.empty_like(a)
    cdef cnp.ndarray cdf = <cnp.ndarray>np.empty_like(a)
    cdef int64_t n = a.size
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef float *yp = <float *>cnp.PyArray_DATA(y)
    cdef float *cp = <float *>cnp.PyArray_DATA(cdf)
    with nogil:
        cg_gelu_f32(n, xp, yp, cp)
    return y, cdf


def gelu_bwd_f32(x, cdf, g):
    """g * (Phi(x) + x phi(x)) for float32 x and g of one shape (cdf: Phi(x) of that shape,
    or None to recompute it), as a new C-contiguous array."""
    cdef cnp.ndarray a = _f32_c("gelu_bwd_f32", "x", x)
    cdef cnp.ndarray gg = _f32_c("gelu_bwd_f32", "g", g)
    cdef cnp.ndarray c = None
    if tuple(x.shape) != tuple(g.shape):
        raise ValueError(f"gelu_bwd_f32: x and g must have one shape, got {x.shape} and "
                         f"{g.shape}")
    if cdf is not None:
        c = _f32_c("gelu_bwd_f32", "cdf", cdf)
        if tuple(cdf.shape) != tuple(x.shape):
            raise ValueError(f"gelu_bwd_f32: cdf must have x's shape {x.shape}, got "
                             f"{cdf.shape}")
    cdef cnp.ndarray out = <cnp.ndarray>np.empty_like(a)
    cdef int64_t n = a.size
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef const float *gp = <const float *>cnp.PyArray_DATA(gg)
    cdef const float *cp = <const float *>cnp.PyArray_DATA(c) if c is not None else NULL
    cdef float *op = <float *>cnp.PyArray_DATA(out)
    with nogil:
        cg_gelu_bwd_f32(n, xp, cp, gp, op)
    return out
