/* cg_gemm.c: see cg_gemm.h for the scheme, the numerics and the contracts. */
#include "cg_gemm.h"

#include <stdlib.h>
#include <string.h>

#define MR CG_GEMM_MR
#define NR CG_GEMM_NR
#define KC CG_GEMM_KC
#ifndef MC
#define MC 64
#endif
#define NC_PANELS 16                 /* cg_sgemm packs B in chunks of 16 panels (512 columns) */
#ifndef INPLACE_B_ROWS
#define INPLACE_B_ROWS 64            /* up to this many rows of A, a row-major B is not packed */
#endif

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* 64-byte aligned, for the packed panels' aligned loads; size rounded up as C11 asks. */
static float *alloc_panels(int64_t n_floats)
{
    size_t bytes = (size_t)n_floats * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    return bytes ? (float *)aligned_alloc(64, bytes) : NULL;
}

/* Panels of NR columns: dst[p][k][t] = B(k, j0 + p * NR + t) for t < nr, else 0. */
static void pack_panels(int64_t K, int64_t n, const float *b, int64_t rsb, int64_t csb,
                        float *dst)
{
    for (int64_t p = 0; p < cdiv(n, NR); p++) {
        int64_t j = p * NR, nr = n - j < NR ? n - j : NR;
        float *d = dst + p * K * NR;
        if (csb == 1 && nr == NR) {  /* rows of B contiguous: a fixed-size copy a row,
                                        which the compiler inlines (no call per row) */
            for (int64_t k = 0; k < K; k++)
                memcpy(d + k * NR, b + k * rsb + j, NR * sizeof(float));
        } else if (csb == 1) {       /* the last, partial panel */
            for (int64_t k = 0; k < K; k++) {
                memcpy(d + k * NR, b + k * rsb + j, (size_t)nr * sizeof(float));
                memset(d + k * NR + nr, 0, (size_t)(NR - nr) * sizeof(float));
            }
        } else {                     /* B = W^T: nr streams down W's rows, written a k at a time */
            const float *src = b + j * csb;
            for (int64_t k = 0; k < K; k++) {
                float *dk = d + k * NR;
                for (int64_t t = 0; t < nr; t++)
                    dk[t] = src[t * csb + k * rsb];
                for (int64_t t = nr; t < NR; t++)
                    dk[t] = 0.0f;
            }
        }
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define CG_HAVE_KERNEL 1
#define CG_AVX512 __attribute__((target("avx512f")))

/* AVX-512F present and not turned off by CGRAD_NO_AVX512=1 (read once: tests use it to run
 * the portable code on an AVX-512 machine). 0/1 once known, -1 before; every thread that
 * finds -1 computes the same value, so the relaxed atomics only keep the race defined. */
static int have_avx512 = -1;

int cg_sgemm_available(void)
{
    int v = __atomic_load_n(&have_avx512, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *off = getenv("CGRAD_NO_AVX512");
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && !(off && off[0] && strcmp(off, "0")) ? 1 : 0;
        __atomic_store_n(&have_avx512, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* One MR x NR tile: acc = sum over k < kc of A(r, k) B(k, :) (k increasing, FMA), then
 * C = acc (add 0) or C += acc, then C += bias[:] when bias is not NULL (the last depth
 * block only), rows r < mr and columns < nr only. ap[r]: A's row r at the block's first
 * k, stepping csa a k; bp: the panel at that k (NR floats a k, aligned). */
CG_AVX512 static void tile(int64_t kc, const float *const *ap, int64_t csa, const float *bp,
                           int64_t ldb, float *c, int64_t ldc, int mr, int nr, int add,
                           const float *bias)
{
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF
                            : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1u) : (__mmask16)0;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00,
           c61 = c00, c70 = c00, c71 = c00;
    const float *a0 = ap[0], *a1 = ap[1], *a2 = ap[2], *a3 = ap[3], *a4 = ap[4],
                *a5 = ap[5], *a6 = ap[6], *a7 = ap[7];
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        /* masked: B read in place (ldb its row stride) ends at its last column */
        __m512 b0 = _mm512_maskz_loadu_ps(m0, bp), b1 = _mm512_maskz_loadu_ps(m1, bp + 16), a;
        bp += ldb;
#define CG_ROW(r)                                   \
        a = _mm512_set1_ps(*a##r);                  \
        a##r += csa;                                \
        c##r##0 = _mm512_fmadd_ps(a, b0, c##r##0);  \
        c##r##1 = _mm512_fmadd_ps(a, b1, c##r##1);
        CG_ROW(0) CG_ROW(1) CG_ROW(2) CG_ROW(3) CG_ROW(4) CG_ROW(5) CG_ROW(6) CG_ROW(7)
#undef CG_ROW
    }
    __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                         {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (bias) {
        bias0 = _mm512_maskz_loadu_ps(m0, bias);
        bias1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        __m512 v0 = acc[r][0], v1 = acc[r][1];
        if (add) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), v1);
        }
        if (bias) {
            v0 = _mm512_add_ps(v0, bias0);
            v1 = _mm512_add_ps(v1, bias1);
        }
        _mm512_mask_storeu_ps(cr, m0, v0);
        _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
}

/* A's rows i..i+MR-1, columns pc..pc+kc-1 as kc groups of MR floats (rows past M: zeros),
 * for an A that is not row-major: its tile then reads 32 contiguous bytes a k instead of
 * MR cache lines a k. */
static void pack_a(int64_t M, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                   float *dst)
{
    if (rsa == 1) {          /* A^T row-major: read it a row (a k) at a time, in order */
        int64_t full = M / MR * MR;
        for (int64_t k = 0; k < kc; k++) {
            const float *src = a + k * csa;
            for (int64_t i = 0; i < full; i += MR)
                memcpy(dst + (i / MR) * kc * MR + k * MR, src + i, MR * sizeof(float));
        }
        if (full == M)
            return;
        a += full;                   /* the last, partial block below */
        dst += (full / MR) * kc * MR;
        M -= full;
    }
    for (int64_t i = 0; i < M; i += MR) {
        int64_t mr = M - i < MR ? M - i : MR;
        float *d = dst + (i / MR) * kc * MR;
        for (int64_t k = 0; k < kc; k++) {
            const float *src = a + i * rsa + k * csa;
            for (int64_t r = 0; r < MR; r++)
                d[k * MR + r] = r < mr ? src[r * rsa] : 0.0f;
        }
    }
}

/* C[:, 0:n] (=|+=) A @ B for B packed as panels of all K rows (panel stride K * NR), or,
 * when panels is NULL, B read in place (row-major, row stride rsb: for few rows of A the
 * packing would cost more than it saves). The same KC blocks in the same order for every
 * caller: packed or not, the same bits. abuf:
 * NULL, or room for ceil(M / MR) * MR * min(K, KC) floats to pack an A that is not
 * row-major (csa != 1) into (packing copies values; the sums are the same). */
CG_AVX512 static void core(int64_t M, int64_t n, int64_t K, const float *a, int64_t rsa,
                           int64_t csa, const float *panels, const float *b, int64_t rsb,
                           float *c, int64_t ldc, int accumulate, float *abuf,
                           const float *bias)
{
    int64_t ldb = panels ? NR : rsb;
    /* packing A pays when its micro-panels are reused over >= 4 panels of B */
    int pack = csa != 1 && abuf && cdiv(n, NR) >= 4;
    for (int64_t pc = 0; pc < K; pc += KC) {
        int64_t kc = K - pc < KC ? K - pc : KC;
        int add = accumulate || pc > 0;
        int last = pc + kc == K;         /* the bias goes on after the whole sum */
        if (pack)
            pack_a(M, kc, a + pc * csa, rsa, csa, abuf);
        for (int64_t ic = 0; ic < M; ic += MC)   /* MC rows of A stay in L1/L2 over B */
        for (int64_t p = 0; p < cdiv(n, NR); p++) {
            int64_t j = p * NR;
            int nr = (int)(n - j < NR ? n - j : NR);
            const float *bp = panels ? panels + p * K * NR + pc * NR : b + pc * rsb + j;
            const float *bj = bias && last ? bias + j : NULL;
            for (int64_t i = ic; i < M && i < ic + MC; i += MR) {
                int mr = (int)(M - i < MR ? M - i : MR);
                const float *ap[MR];
                if (pack) {
                    for (int r = 0; r < MR; r++)
                        ap[r] = abuf + (i / MR) * kc * MR + r;
                    tile(kc, ap, MR, bp, ldb, c + i * ldc + j, ldc, mr, nr, add, bj);
                } else {
                    for (int r = 0; r < MR; r++)   /* rows past M repeat row i (not stored) */
                        ap[r] = a + (i + (r < mr ? r : 0)) * rsa + pc * csa;
                    tile(kc, ap, csa, bp, ldb, c + i * ldc + j, ldc, mr, nr, add, bj);
                }
            }
        }
    }
}

#else
#define CG_HAVE_KERNEL 0
int cg_sgemm_available(void) { return 0; }
#endif

static void zero_rows(int64_t M, int64_t N, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        memset(c + i * ldc, 0, (size_t)N * sizeof(float));
}

static int sgemm_impl(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa,
                      int64_t csa, const float *b, int64_t rsb, int64_t csb, const float *bias,
                      float *c, int64_t ldc, int accumulate)
{
    if (!cg_sgemm_available())
        return CG_GEMM_UNAVAILABLE;
    if (M == 0 || N == 0)
        return CG_GEMM_OK;
    if (K == 0) {
        if (!accumulate)
            zero_rows(M, N, c, ldc);
        if (bias)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    c[i * ldc + j] += bias[j];
        return CG_GEMM_OK;
    }
#if CG_HAVE_KERNEL
    if (csb == 1 && M <= INPLACE_B_ROWS) {
        /* few rows of A: B is read in place, its rows contiguous (no packing pass) */
        float *abuf1 = csa != 1 ? alloc_panels(cdiv(M, MR) * MR * (K < KC ? K : KC)) : NULL;
        if (csa != 1 && !abuf1)
            return CG_GEMM_NOMEM;
        core(M, N, K, a, rsa, csa, NULL, b, rsb, c, ldc, accumulate, abuf1, bias);
        free(abuf1);
        return CG_GEMM_OK;
    }
    int64_t chunk = (int64_t)NC_PANELS * NR;
    float *buf = alloc_panels(K * (N < chunk ? cdiv(N, NR) * NR : chunk));
    float *abuf = csa != 1 ? alloc_panels(cdiv(M, MR) * MR * (K < KC ? K : KC)) : NULL;
    if (!buf || (csa != 1 && !abuf)) {
        free(buf);
        free(abuf);
        return CG_GEMM_NOMEM;
    }
    for (int64_t j = 0; j < N; j += chunk) {
        int64_t n = N - j < chunk ? N - j : chunk;
        pack_panels(K, n, b + j * csb, rsb, csb, buf);
        core(M, n, K, a, rsa, csa, buf, NULL, 0, c + j, ldc, accumulate, abuf,
             bias ? bias + j : NULL);
    }
    free(buf);
    free(abuf);
    return CG_GEMM_OK;
#else
    (void)a; (void)rsa; (void)csa; (void)b; (void)rsb; (void)csb; (void)bias;
    return CG_GEMM_UNAVAILABLE;
#endif
}

int cg_sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa, int64_t csa,
             const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc, int accumulate)
{
    return sgemm_impl(M, N, K, a, rsa, csa, b, rsb, csb, NULL, c, ldc, accumulate);
}

int cg_sgemm_bias(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa, int64_t csa,
                  const float *b, int64_t rsb, int64_t csb, const float *bias, float *c,
                  int64_t ldc)
{
    return sgemm_impl(M, N, K, a, rsa, csa, b, rsb, csb, bias, c, ldc, 0);
}

int cg_sgemm_pack_b(int64_t K, int64_t N, const float *b, int64_t rsb, int64_t csb,
                    cg_packed_b *out)
{
    out->K = K;
    out->N = N;
    out->data = NULL;
    if (!cg_sgemm_available())
        return CG_GEMM_UNAVAILABLE;
    if (K == 0 || N == 0)
        return CG_GEMM_OK;           /* nothing to pack; products are zeros or empty */
    out->data = alloc_panels(K * cdiv(N, NR) * NR);
    if (!out->data)
        return CG_GEMM_NOMEM;
    pack_panels(K, N, b, rsb, csb, out->data);
    return CG_GEMM_OK;
}

void cg_sgemm_free_b(cg_packed_b *p)
{
    free(p->data);
    p->data = NULL;
}

int cg_sgemm_packed(int64_t M, const float *a, int64_t rsa, int64_t csa,
                    const cg_packed_b *p, float *c, int64_t ldc, int accumulate)
{
    if (!cg_sgemm_available())
        return CG_GEMM_UNAVAILABLE;
    if (M == 0 || p->N == 0)
        return CG_GEMM_OK;
    if (p->K == 0) {
        if (!accumulate)
            zero_rows(M, p->N, c, ldc);
        return CG_GEMM_OK;
    }
#if CG_HAVE_KERNEL
    float *abuf = NULL;
    if (csa != 1 && !(abuf = alloc_panels(cdiv(M, MR) * MR * (p->K < KC ? p->K : KC))))
        return CG_GEMM_NOMEM;
    core(M, p->N, p->K, a, rsa, csa, p->data, NULL, 0, c, ldc, accumulate, abuf, NULL);
    free(abuf);
    return CG_GEMM_OK;
#else
    (void)a; (void)rsa; (void)csa;
    return CG_GEMM_UNAVAILABLE;
#endif
}
