# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""cgrad._fused: fused kernels (csrc/cg_fused.c): recurrent time steps, GELU, layer
normalization; and a float32 GEMM (csrc/cg_gemm.c).

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
``layer_norm_f32(x, w, b, eps)`` -> (y, mu, rstd) and
``layer_norm_bwd_f32(x, mu, rstd, w, g, need_x, need_w, need_b)`` -> (gx, gw, gb) normalize
float32 rows over the last axis (Note [Layer norm in one pass] in
cgrad/nn/functional/_normalization.py).
``attn_fwd_f32(q, k, v, scale, causal)`` -> (o, p) and
``attn_bwd_f32(q, k, v, p, g, scale, causal)`` -> (dq, dk, dv): scaled dot-product attention
over float32 (..., T, D) stacks (Note [Attention in C] in cgrad/nn/functional/_attention.py).
``sgemm(a, b, out=None, accumulate=False)``, ``pack_b(b)`` and
``sgemm_packed(a, packed_b, out, accumulate=False)`` multiply 2-D float32 arrays of any
non-negative aligned strides (Note [float32 GEMM] in cgrad/ops/_gemm.py); they return None
when the kernel cannot run (no AVX-512F, or an operand layout it does not read).
cgrad.nn.functional._rnn, cgrad.ops.pointwise and cgrad.ops._gemm fall back to NumPy when
this module is missing or ``CGRAD_NO_FUSED_EXT=1``.
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
    void cg_elu_f32(int64_t n, const float *x, float a_s, float scale, float *y)
    void cg_elu_bwd_f32(int64_t n, const float *x, const float *g, float a_s, float scale,
                        float *out)
    void cg_layer_norm_f32(int64_t R, int64_t C, const float *x, const float *w,
                           const float *b, double eps, float *y, float *mu, float *rstd)
    int cg_layer_norm_bwd_f32(int64_t R, int64_t C, const float *x, const float *mu,
                              const float *rstd, const float *w, const float *g, float *gx,
                              float *gw, float *gb)

cdef extern from "cg_attn.h" nogil:
    int cg_attn_fwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                        const float *k, const float *v, float scale, int causal, float *p,
                        float *o)
    int cg_attn_bwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                        const float *k, const float *v, const float *p, const float *go,
                        float scale, int causal, float *dq, float *dk, float *dv)

cdef extern from "cg_gemm.h" nogil:
    ctypedef struct cg_packed_b:
        int64_t K
        int64_t N
        float *data
    int CG_GEMM_NOMEM
    int cg_sgemm_available()
    int cg_sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa, int64_t csa,
                 const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc,
                 int accumulate)
    int cg_sgemm_bias(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa,
                      int64_t csa, const float *b, int64_t rsb, int64_t csb,
                      const float *bias, float *c, int64_t ldc)
    int cg_sgemm_pack_b(int64_t K, int64_t N, const float *b, int64_t rsb, int64_t csb,
                        cg_packed_b *out)
    void cg_sgemm_free_b(cg_packed_b *p)
    int cg_sgemm_packed(int64_t M, const float *a, int64_t rsa, int64_t csa,
                        const cg_packed_b *p, float *c, int64_t ldc, int accumulate)

cdef extern from "cg_fused.h" nogil:
    int cg_lstm_seq_fwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                            const float *x, int64_t nin, const cg_packed_b *wih_t,
                            const cg_packed_b *whh_t, const float *bias, float *hh, float *c,
                            float *h, float *acts, float *cs, float *tcs, float *hs)
    int cg_lstm_seq_bwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                            const cg_packed_b *whh, const float *acts, const float *tcs,
                            const float *cprev, const float *go, float *dh, float *dc,
                            float *d)


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


cdef tuple _x_and_g(str fn, object x, object g):
    """(x, g) of a backward kernel: float32 arrays of one shape, C-contiguous."""
    a = _f32_c(fn, "x", x)
    gg = _f32_c(fn, "g", g)
    if tuple(x.shape) != tuple(g.shape):
        raise ValueError(f"{fn}: x and g must have one shape, got {x.shape} and {g.shape}")
    return a, gg


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
    cdef cnp.ndarray a, gg
    a, gg = _x_and_g("gelu_bwd_f32", x, g)
    cdef cnp.ndarray c = None
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


def elu_f32(x, float alpha_scale, float scale):
    """x > 0 ? x scale : expm1(x) alpha_scale of a float32 array, a new C-contiguous array
    (elu: alpha_scale = alpha, scale = 1; selu: SELU_ALPHA * SELU_SCALE, SELU_SCALE)."""
    cdef cnp.ndarray a = _f32_c("elu_f32", "x", x)
    cdef cnp.ndarray y = <cnp.ndarray>np.empty_like(a)
    cdef int64_t n = a.size
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef float *yp = <float *>cnp.PyArray_DATA(y)
    with nogil:
        cg_elu_f32(n, xp, alpha_scale, scale, yp)
    return y


def elu_bwd_f32(x, g, float alpha_scale, float scale):
    """g * (x > 0 or nan ? scale : exp(x) alpha_scale) for float32 x and g of one shape, a
    new C-contiguous array."""
    cdef cnp.ndarray a, gg
    a, gg = _x_and_g("elu_bwd_f32", x, g)
    cdef cnp.ndarray out = <cnp.ndarray>np.empty_like(a)
    cdef int64_t n = a.size
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef const float *gp = <const float *>cnp.PyArray_DATA(gg)
    cdef float *op = <float *>cnp.PyArray_DATA(out)
    with nogil:
        cg_elu_bwd_f32(n, xp, gp, alpha_scale, scale, op)
    return out


# -- float32 matrix products (csrc/cg_gemm.h) -------------------------------------------------
def sgemm_available():
    """True when this CPU and build run the AVX-512 kernel of ``sgemm``."""
    return cg_sgemm_available() == 1


cdef int _operand(str fn, str name, object x, int64_t *rs, int64_t *cs, const char **lo,
                  const char **hi) except -1:
    """Check a 2-D float32 operand; 1 with its element strides and byte range when the
    kernel can read it in place (aligned, native, non-negative strides), else 0."""
    if not (cnp.PyArray_Check(x) and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_FLOAT32):
        raise TypeError(f"{fn}: {name} must be a float32 ndarray")
    cdef cnp.ndarray arr = <cnp.ndarray>x
    if cnp.PyArray_NDIM(arr) != 2:
        raise ValueError(f"{fn}: {name} must be 2-D, got {cnp.PyArray_NDIM(arr)}-D")
    cdef cnp.npy_intp *st = cnp.PyArray_STRIDES(arr)
    cdef cnp.npy_intp *sh = cnp.PyArray_DIMS(arr)
    if (not cnp.PyArray_ISALIGNED(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)
            or st[0] < 0 or st[1] < 0 or st[0] % 4 or st[1] % 4):
        return 0
    rs[0] = st[0] // 4
    cs[0] = st[1] // 4
    lo[0] = <char *>cnp.PyArray_DATA(arr)
    hi[0] = lo[0]
    if sh[0] > 0 and sh[1] > 0:
        hi[0] = lo[0] + (sh[0] - 1) * st[0] + (sh[1] - 1) * st[1] + 4
    return 1


cdef cnp.ndarray _result(str fn, object out, int64_t M, int64_t N):
    if out is None:
        return <cnp.ndarray>np.empty((M, N), dtype=np.float32)
    if not (cnp.PyArray_Check(out) and cnp.PyArray_TYPE(<cnp.ndarray>out) == cnp.NPY_FLOAT32):
        raise TypeError(f"{fn}: out must be a float32 ndarray")
    cdef cnp.ndarray o = <cnp.ndarray>out
    if cnp.PyArray_NDIM(o) != 2 or cnp.PyArray_DIMS(o)[0] != M or cnp.PyArray_DIMS(o)[1] != N:
        raise ValueError(f"{fn}: out must have shape ({M}, {N}), got {out.shape}")
    if (cnp.PyArray_FLAGS(o) & _REQ_W) != _REQ_W or not cnp.PyArray_ISNOTSWAPPED(o):
        raise ValueError(f"{fn}: out must be a C-contiguous aligned native writeable array")
    return o


cdef int _gemm_error(str fn, int rc) except -1:
    if rc == CG_GEMM_NOMEM:
        raise MemoryError(f"{fn}: cannot allocate the packing buffer")
    return 0


def sgemm(a, b, out=None, bint accumulate=False, bias=None):
    """``a @ b`` for 2-D float32 ndarrays a (M, K) and b (K, N) of any layout, by the kernel of
    csrc/cg_gemm.c, into ``out`` (a new (M, N) array, or a given C-contiguous one; with
    ``accumulate`` out += a @ b; with ``bias``, a float32 (N,) array, ``a @ b + bias`` in the
    same pass: the bits of the product followed by ``out += bias``). Returns out, or None
    when the kernel cannot run here (no AVX-512F, or an operand with negative, unaligned or
    byte-swapped strides): the caller then uses NumPy. out must not overlap a, b or bias
    (ValueError)."""
    cdef int64_t rsa = 0, csa = 0, rsb = 0, csb = 0
    cdef const char *lo[4]
    cdef const char *hi[4]
    cdef bint ok_a = _operand("sgemm", "a", a, &rsa, &csa, &lo[0], &hi[0])
    cdef bint ok_b = _operand("sgemm", "b", b, &rsb, &csb, &lo[1], &hi[1])
    cdef int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1]
    if b.shape[0] != K:
        raise ValueError(f"sgemm: a is {M} x {K} and b is {b.shape[0]} x {N}: the inner "
                         f"dimensions differ")
    cdef cnp.ndarray bv = None
    cdef int nops = 3
    if bias is not None:
        if accumulate:
            raise ValueError("sgemm: bias and accumulate cannot be combined")
        bv = _f32_c("sgemm", "bias", bias)
        if bv.ndim != 1 or bv.shape[0] != N:
            raise ValueError(f"sgemm: bias must have shape ({N},), got {tuple(bias.shape)}")
        lo[3] = <const char *>cnp.PyArray_DATA(bv)
        hi[3] = lo[3] + N * 4
        nops = 4
    if not (ok_a and ok_b and cg_sgemm_available()):
        return None
    if accumulate and out is None:
        raise ValueError("sgemm: accumulate needs out")
    cdef cnp.ndarray o = _result("sgemm", out, M, N)
    cdef float *c = <float *>cnp.PyArray_DATA(o)
    lo[2] = <const char *>c
    hi[2] = lo[2] + M * N * 4
    if out is not None and not cg_fused_disjoint(lo, hi, nops):
        raise ValueError("sgemm: out must not overlap a, b or bias")
    cdef const float *ap = <const float *>lo[0]
    cdef const float *bp = <const float *>lo[1]
    cdef const float *biasp = <const float *>lo[3] if bv is not None else NULL
    cdef int rc
    with nogil:
        if biasp != NULL:
            rc = cg_sgemm_bias(M, N, K, ap, rsa, csa, bp, rsb, csb, biasp, c, N)
        else:
            rc = cg_sgemm(M, N, K, ap, rsa, csa, bp, rsb, csb, c, N, accumulate)
    _gemm_error("sgemm", rc)
    return o


cdef class PackedB:
    """A float32 (K, N) matrix packed for ``sgemm_packed`` (a recurrent layer's W_hh, used
    at every time step): a copy, independent of the array it came from afterwards. Made by
    ``pack_b``; read-only, so any number of threads may use one."""
    cdef cg_packed_b p

    def __dealloc__(self):
        cg_sgemm_free_b(&self.p)

    @property
    def shape(self):
        return (self.p.K, self.p.N)


def pack_b(b):
    """PackedB of a 2-D float32 array b (any non-negative aligned strides), or None when the
    kernel cannot run here."""
    cdef int64_t rs = 0, cs = 0
    cdef const char *lo
    cdef const char *hi
    if not (_operand("pack_b", "b", b, &rs, &cs, &lo, &hi) and cg_sgemm_available()):
        return None
    cdef PackedB pb = PackedB.__new__(PackedB)
    cdef int64_t K = b.shape[0], N = b.shape[1]
    cdef int rc
    with nogil:
        rc = cg_sgemm_pack_b(K, N, <const float *>lo, rs, cs, &pb.p)
    _gemm_error("pack_b", rc)
    return pb


def sgemm_packed(a, PackedB b not None, out, bint accumulate=False):
    """out = a @ b (or out += a @ b) for a 2-D float32 array a (M, K) and a PackedB (K, N);
    out: a C-contiguous (M, N) float32 array not overlapping a. Returns out, or None when
    a's layout is not one the kernel reads (the caller unpacks to NumPy)."""
    cdef int64_t rsa = 0, csa = 0
    cdef const char *lo[2]
    cdef const char *hi[2]
    if not _operand("sgemm_packed", "a", a, &rsa, &csa, &lo[0], &hi[0]):
        return None
    cdef int64_t M = a.shape[0]
    if a.shape[1] != b.p.K:
        raise ValueError(f"sgemm_packed: a is {M} x {a.shape[1]} and b is {b.p.K} x {b.p.N}: "
                         f"the inner dimensions differ")
    cdef cnp.ndarray o = _result("sgemm_packed", out, M, b.p.N)
    cdef float *c = <float *>cnp.PyArray_DATA(o)
    lo[1] = <const char *>c
    hi[1] = lo[1] + M * b.p.N * 4
    if not cg_fused_disjoint(lo, hi, 2):
        raise ValueError("sgemm_packed: out must not overlap a")
    cdef const float *ap = <const float *>lo[0]
    cdef int rc
    with nogil:
        rc = cg_sgemm_packed(M, ap, rsa, csa, &b.p, c, b.p.N, accumulate)
    _gemm_error("sgemm_packed", rc)
    return o


# -- whole LSTM time loops (float32, W_hh packed) ---------------------------------------------
cdef const int64_t *_offsets(str fn, object offsets, int64_t N, int64_t B,
                             int64_t *T) except NULL:
    """Check the step offsets (int64, 1-D, from 0 non-decreasing to N, steps of at most B
    rows); their pointer and T = the number of steps."""
    if not (cnp.PyArray_Check(offsets) and cnp.PyArray_TYPE(<cnp.ndarray>offsets) == cnp.NPY_INT64
            and cnp.PyArray_NDIM(<cnp.ndarray>offsets) == 1
            and (cnp.PyArray_FLAGS(<cnp.ndarray>offsets) & _REQ) == _REQ
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>offsets)):
        raise TypeError(f"{fn}: offsets must be a contiguous 1-D int64 ndarray")
    cdef cnp.ndarray o = <cnp.ndarray>offsets
    cdef int64_t n = cnp.PyArray_DIMS(o)[0]
    cdef const int64_t *p = <const int64_t *>cnp.PyArray_DATA(o)
    if n < 1 or p[0] != 0 or p[n - 1] != N:
        raise ValueError(f"{fn}: offsets must run from 0 to the {N} rows of the sequence")
    cdef int64_t t
    for t in range(n - 1):
        if p[t + 1] < p[t] or p[t + 1] - p[t] > B:
            raise ValueError(f"{fn}: step {t} has {p[t + 1] - p[t]} rows; steps must have "
                             f"0 to {B} rows (the state's)")
    T[0] = n - 1
    return p


cdef int64_t _rows(object a) except -1:
    if not (cnp.PyArray_Check(a) and cnp.PyArray_NDIM(<cnp.ndarray>a) == 2):
        raise TypeError("lstm_seq: every array must be a 2-D ndarray")
    return cnp.PyArray_DIMS(<cnp.ndarray>a)[0]


def lstm_seq_fwd(offsets, bint reverse, PackedB wih_t not None, PackedB whh_t not None, x,
                 bias, hh, c, h, acts, cs, tcs, hs):
    """The forward time loop of one float32 LSTM layer-direction (csrc/cg_fused.h): per
    step, hh = x[rows] @ W_ih^T + h @ W_hh^T by the GEMM on ``wih_t`` and ``whh_t``
    (pack_b of W_ih^T (I, 4H) and W_hh^T (H, 4H)), then the step of ``lstm_fwd`` with the
    gates' input ``bias`` (b_ih + b_hh, (4H,), or None) for every row. x: (N, I); the other
    arrays as in lstm_fwd, whole (N or B rows). Returns None."""
    cdef int64_t H = _hidden("lstm_seq_fwd", acts)
    cdef int64_t N = _rows(acts), B = _rows(hh), T = 0
    _rows(x)
    cdef int64_t I = cnp.PyArray_DIMS(<cnp.ndarray>x)[1]
    cdef const int64_t *off = _offsets("lstm_seq_fwd", offsets, N, B, &T)
    cdef _Step s = _Step()
    s.add("lstm_seq_fwd", "x", x, 0, N, I, False)
    s.add("lstm_seq_fwd", "hh", hh, 0, B, 4 * H, True)
    s.add("lstm_seq_fwd", "c", c, 0, B, H, True)
    s.add("lstm_seq_fwd", "h", h, 0, B, H, True)
    s.add("lstm_seq_fwd", "acts", acts, 0, N, 4 * H, True)
    s.add("lstm_seq_fwd", "cs", cs, 0, N, H, True)
    s.add("lstm_seq_fwd", "tcs", tcs, 0, N, H, True)
    s.add("lstm_seq_fwd", "hs", hs, 0, N, H, True)
    if bias is not None:
        if not isinstance(bias, np.ndarray) or (<object>bias).ndim != 1:
            raise TypeError("lstm_seq_fwd: bias must be a 1-D ndarray or None")
        s.add("lstm_seq_fwd", "bias", (<object>bias).reshape(1, -1), 0, 1, 4 * H, False)
    s.check("lstm_seq_fwd")
    if s.typenum != cnp.NPY_FLOAT32:
        raise TypeError("lstm_seq_fwd: the arrays must be float32")
    if wih_t.p.K != I or wih_t.p.N != 4 * H:
        raise ValueError(f"lstm_seq_fwd: wih_t must be ({I}, {4 * H}), got ({wih_t.p.K}, "
                         f"{wih_t.p.N})")
    if whh_t.p.K != H or whh_t.p.N != 4 * H:
        raise ValueError(f"lstm_seq_fwd: whh_t must be ({H}, {4 * H}), got "
                         f"({whh_t.p.K}, {whh_t.p.N})")
    cdef const float *bp = <const float *>s.ptr[8] if bias is not None else NULL
    cdef int rc
    with nogil:
        rc = cg_lstm_seq_fwd_f32(T, off, reverse, H, <const float *>s.ptr[0], I, &wih_t.p,
                                 &whh_t.p, bp, <float *>s.ptr[1], <float *>s.ptr[2],
                                 <float *>s.ptr[3], <float *>s.ptr[4], <float *>s.ptr[5],
                                 <float *>s.ptr[6], <float *>s.ptr[7])
    _gemm_error("lstm_seq_fwd", rc)


def lstm_seq_bwd(offsets, bint reverse, PackedB whh not None, acts, tcs, cprev, go, dh, dc,
                 d):
    """The backward time loop of one float32 LSTM layer-direction (csrc/cg_fused.h): per
    step (in the forward's order reversed), the step of ``lstm_bwd``, then dh = d @ W_hh by
    the GEMM on ``whh`` (pack_b of W_hh, (4H, H)). Returns None."""
    cdef int64_t H = _hidden("lstm_seq_bwd", acts)
    cdef int64_t N = _rows(acts), B = _rows(dh), T = 0
    cdef const int64_t *off = _offsets("lstm_seq_bwd", offsets, N, B, &T)
    cdef _Step s = _Step()
    s.add("lstm_seq_bwd", "acts", acts, 0, N, 4 * H, False)
    s.add("lstm_seq_bwd", "tcs", tcs, 0, N, H, False)
    s.add("lstm_seq_bwd", "cprev", cprev, 0, N, H, False)
    s.add("lstm_seq_bwd", "go", go, 0, N, H, False)
    s.add("lstm_seq_bwd", "dh", dh, 0, B, H, True)
    s.add("lstm_seq_bwd", "dc", dc, 0, B, H, True)
    s.add("lstm_seq_bwd", "d", d, 0, N, 4 * H, True)
    s.check("lstm_seq_bwd")
    if s.typenum != cnp.NPY_FLOAT32:
        raise TypeError("lstm_seq_bwd: the arrays must be float32")
    if whh.p.K != 4 * H or whh.p.N != H:
        raise ValueError(f"lstm_seq_bwd: whh must be ({4 * H}, {H}), got ({whh.p.K}, "
                         f"{whh.p.N})")
    cdef int rc
    with nogil:
        rc = cg_lstm_seq_bwd_f32(T, off, reverse, H, &whh.p, <const float *>s.ptr[0],
                                 <const float *>s.ptr[1], <const float *>s.ptr[2],
                                 <const float *>s.ptr[3], <float *>s.ptr[4],
                                 <float *>s.ptr[5], <float *>s.ptr[6])
    _gemm_error("lstm_seq_bwd", rc)


# -- layer normalization (float32) -------------------------------------------------------------
cdef const float *_ln_vec(str fn, str name, object v, int64_t C) except? NULL:
    """The data of a float32 C-contiguous vector of C elements (v None: NULL)."""
    if v is None:
        return NULL
    cdef cnp.ndarray a = _f32_c(fn, name, v)
    if a.size != C:
        raise ValueError(f"{fn}: {name} must have {C} elements, got {a.size}")
    return <const float *>cnp.PyArray_DATA(a)


def layer_norm_f32(x, w, b, double eps):
    """(y, mu, rstd) of a float32 array x (..., C) normalized over its last axis (the caller
    flattens the normalized dims): y of x's shape, mu and rstd of shape x.shape[:-1] + (1,);
    w, b: C-element float32 arrays or None (csrc/cg_fused.h)."""
    cdef cnp.ndarray a = _f32_c("layer_norm_f32", "x", x)
    if a.ndim < 1:
        raise ValueError("layer_norm_f32: x must have at least 1 dimension")
    cdef int64_t C = a.shape[a.ndim - 1]
    cdef int64_t R = a.size // C if C else 0
    # keep the vectors alive while their data is used: bind the contiguous arrays
    cdef object wc = np.ascontiguousarray(w) if w is not None else None
    cdef object bc = np.ascontiguousarray(b) if b is not None else None
    cdef const float *wp = _ln_vec("layer_norm_f32", "weight", wc, C)
    cdef const float *bp = _ln_vec("layer_norm_f32", "bias", bc, C)
    cdef cnp.ndarray y = <cnp.ndarray>np.empty_like(a)
    shp = tuple((<object>a).shape)
    stat_shape = shp[:len(shp) - 1] + (1,)
    cdef cnp.ndarray mu = <cnp.ndarray>np.empty(stat_shape, dtype=np.float32)
    cdef cnp.ndarray rstd = <cnp.ndarray>np.empty(stat_shape, dtype=np.float32)
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef float *yp = <float *>cnp.PyArray_DATA(y)
    cdef float *mp = <float *>cnp.PyArray_DATA(mu)
    cdef float *rp = <float *>cnp.PyArray_DATA(rstd)
    if C == 0:
        return y, mu, rstd
    with nogil:
        cg_layer_norm_f32(R, C, xp, wp, bp, eps, yp, mp, rp)
    return y, mu, rstd


def layer_norm_bwd_f32(x, mu, rstd, w, g, bint need_x, bint need_w, bint need_b):
    """(gx, gw, gb) of layer_norm_f32 for the output gradient g (x's shape; each None when
    not needed); mu, rstd as layer_norm_f32 returned them."""
    cdef cnp.ndarray a = _f32_c("layer_norm_bwd_f32", "x", x)
    cdef cnp.ndarray gg = _f32_c("layer_norm_bwd_f32", "g", g)
    if a.ndim < 1 or tuple((<object>a).shape) != tuple((<object>gg).shape):
        raise ValueError(f"layer_norm_bwd_f32: x and g must have one shape, got "
                         f"{(<object>a).shape} and {(<object>gg).shape}")
    cdef int64_t C = a.shape[a.ndim - 1]
    cdef int64_t R = a.size // C if C else 0
    cdef cnp.ndarray m = _f32_c("layer_norm_bwd_f32", "mu", mu)
    cdef cnp.ndarray r = _f32_c("layer_norm_bwd_f32", "rstd", rstd)
    if m.size != R or r.size != R:
        raise ValueError(f"layer_norm_bwd_f32: mu and rstd must have {R} elements")
    cdef object wc = np.ascontiguousarray(w) if w is not None else None
    cdef const float *wp = _ln_vec("layer_norm_bwd_f32", "weight", wc, C)
    cdef cnp.ndarray gx = <cnp.ndarray>np.empty_like(a) if need_x else None
    cdef cnp.ndarray gw = <cnp.ndarray>np.empty(C, dtype=np.float32) if need_w else None
    cdef cnp.ndarray gb = <cnp.ndarray>np.empty(C, dtype=np.float32) if need_b else None
    cdef const float *xp = <const float *>cnp.PyArray_DATA(a)
    cdef const float *gp = <const float *>cnp.PyArray_DATA(gg)
    cdef const float *mp = <const float *>cnp.PyArray_DATA(m)
    cdef const float *rp = <const float *>cnp.PyArray_DATA(r)
    cdef float *gxp = <float *>cnp.PyArray_DATA(gx) if need_x else NULL
    cdef float *gwp = <float *>cnp.PyArray_DATA(gw) if need_w else NULL
    cdef float *gbp = <float *>cnp.PyArray_DATA(gb) if need_b else NULL
    cdef int rc = 0
    if C == 0:
        return gx, gw, gb
    with nogil:
        rc = cg_layer_norm_bwd_f32(R, C, xp, mp, rp, wp, gp, gxp, gwp, gbp)
    if rc:
        raise MemoryError("layer_norm_bwd_f32: cannot allocate the column sums")
    return gx, gw, gb


# -- scaled dot-product attention (float32) ---------------------------------------------------
cdef cnp.ndarray _attn_arr(str fn, str name, object a, int nd):
    """a float32, C-contiguous, aligned, native ndarray of nd dims (nd -1: any >= 2)."""
    if not (cnp.PyArray_Check(a) and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_FLOAT32):
        raise TypeError(f"{fn}: {name} must be a float32 ndarray")
    cdef cnp.ndarray arr = <cnp.ndarray>a
    if (cnp.PyArray_FLAGS(arr) & _REQ) != _REQ or not cnp.PyArray_ISNOTSWAPPED(arr):
        raise ValueError(f"{fn}: {name} must be a C-contiguous aligned native array")
    cdef int got = cnp.PyArray_NDIM(arr)
    if got < 2 or (nd >= 0 and got != nd):
        raise ValueError(f"{fn}: {name} must have {'at least 2' if nd < 0 else nd} "
                         f"dimensions, got {got}")
    return arr


def attn_fwd_f32(q, k, v, double scale, bint causal):
    """(o, p) of softmax(q k^T * scale [causal]) v for float32 C-contiguous arrays q (..., T, D),
    k (..., S, D), v (..., S, Dv) with the same leading dims (csrc/cg_attn.h); o (..., T, Dv)
    and p (..., T, S) are new arrays. None when the GEMM kernel cannot run here."""
    cdef cnp.ndarray Q = _attn_arr("attn_fwd_f32", "q", q, -1)
    cdef int nd = Q.ndim
    cdef cnp.ndarray K = _attn_arr("attn_fwd_f32", "k", k, nd)
    cdef cnp.ndarray V = _attn_arr("attn_fwd_f32", "v", v, nd)
    lead = tuple((<object>Q).shape)[:nd - 2]
    if tuple((<object>K).shape)[:nd - 2] != lead or tuple((<object>V).shape)[:nd - 2] != lead:
        raise ValueError("attn_fwd_f32: q, k and v must have the same leading dimensions")
    cdef int64_t T = Q.shape[nd - 2], D = Q.shape[nd - 1], S = K.shape[nd - 2]
    cdef int64_t Dv = V.shape[nd - 1]
    if K.shape[nd - 1] != D or V.shape[nd - 2] != S:
        raise ValueError(f"attn_fwd_f32: k must be (..., S, {D}) and v (..., S, Dv) with k's S")
    cdef int64_t G = 1
    for n in lead:
        G *= n
    cdef cnp.ndarray o = <cnp.ndarray>np.empty(lead + (T, Dv), dtype=np.float32)
    cdef cnp.ndarray p = <cnp.ndarray>np.empty(lead + (T, S), dtype=np.float32)
    cdef int rc
    cdef float sc = <float>scale
    with nogil:
        rc = cg_attn_fwd_f32(G, T, S, D, Dv, <const float *>cnp.PyArray_DATA(Q),
                             <const float *>cnp.PyArray_DATA(K),
                             <const float *>cnp.PyArray_DATA(V), sc, causal,
                             <float *>cnp.PyArray_DATA(p), <float *>cnp.PyArray_DATA(o))
    if rc == CG_GEMM_NOMEM:
        raise MemoryError("attn_fwd_f32: cannot allocate the scratch")
    return (o, p) if rc == 0 else None


def attn_bwd_f32(q, k, v, p, g, double scale, bint causal):
    """(dq, dk, dv) of attn_fwd_f32 for the output gradient g (o's shape); p as attn_fwd_f32
    returned it. None when the GEMM kernel cannot run here."""
    cdef cnp.ndarray Q = _attn_arr("attn_bwd_f32", "q", q, -1)
    cdef int nd = Q.ndim
    cdef cnp.ndarray K = _attn_arr("attn_bwd_f32", "k", k, nd)
    cdef cnp.ndarray V = _attn_arr("attn_bwd_f32", "v", v, nd)
    cdef cnp.ndarray P = _attn_arr("attn_bwd_f32", "p", p, nd)
    cdef cnp.ndarray Gr = _attn_arr("attn_bwd_f32", "g", g, nd)
    lead = tuple((<object>Q).shape)[:nd - 2]
    cdef int64_t T = Q.shape[nd - 2], D = Q.shape[nd - 1], S = K.shape[nd - 2]
    cdef int64_t Dv = V.shape[nd - 1]
    if (tuple((<object>K).shape) != lead + (S, D) or tuple((<object>V).shape) != lead + (S, Dv)
            or tuple((<object>P).shape) != lead + (T, S)
            or tuple((<object>Gr).shape) != lead + (T, Dv)):
        raise ValueError("attn_bwd_f32: q, k, v, p and g do not fit together")
    cdef int64_t G = 1
    for n in lead:
        G *= n
    cdef cnp.ndarray dq = <cnp.ndarray>np.empty_like(Q)
    cdef cnp.ndarray dk = <cnp.ndarray>np.empty_like(K)
    cdef cnp.ndarray dv = <cnp.ndarray>np.empty_like(V)
    cdef int rc
    cdef float sc = <float>scale
    with nogil:
        rc = cg_attn_bwd_f32(G, T, S, D, Dv, <const float *>cnp.PyArray_DATA(Q),
                             <const float *>cnp.PyArray_DATA(K),
                             <const float *>cnp.PyArray_DATA(V),
                             <const float *>cnp.PyArray_DATA(P),
                             <const float *>cnp.PyArray_DATA(Gr), sc, causal,
                             <float *>cnp.PyArray_DATA(dq), <float *>cnp.PyArray_DATA(dk),
                             <float *>cnp.PyArray_DATA(dv))
    if rc == CG_GEMM_NOMEM:
        raise MemoryError("attn_bwd_f32: cannot allocate the scratch")
    return (dq, dk, dv) if rc == 0 else None
