/* cg_gemm.h: a float32 matrix product for the small and medium shapes of training steps.
 *
 *   C (M x N, row-major, leading dimension ldc)  =  A (M x K) @ B (K x N)   [+ C]
 *
 * Why: NumPy's OpenBLAS reaches 100-130 GFLOP/s on one core at the shapes of nanoGPT-tiny's
 * Linear layers and an LSTM's per-step product ((512 x 64) @ (64 x 192), (32 x 128) @
 * (128 x 512)), where torch's MKL reaches 150-170; the recurrent loop also pays OpenBLAS's
 * packing of the same W_hh at every time step. This is the BLIS scheme with one AVX-512
 * micro-kernel (8 rows x 32 columns of C in 16 zmm accumulators, FMA) and B packed in
 * 32-column panels (zero-padded), optionally once for many products (cg_sgemm_pack_b);
 * loops: depth blocks of KC, then blocks of 64 rows of A (which stay in cache while every
 * panel of B passes), then the panels, then the tiles.
 * A is read in place with any strides (8 row pointers; rows past M repeat a valid row and
 * are not stored), except that an A which is not row-major is packed in 8-row panels when
 * each panel serves 4 or more panels of B (its in-place tiles would touch 8 cache lines a
 * k); partial tiles are stored with masks.
 *
 * Numerics: each C element is a sum over k in increasing order, by FMA, in blocks of
 * CG_GEMM_KC (a block's sum is added to C once); a different order than OpenBLAS's or
 * MKL's, so results agree with theirs to float32 rounding, not bit for bit. Deterministic:
 * the same inputs give the same bits on any machine that runs this kernel.
 *
 * Availability: GCC or clang on x86-64 with a CPU that has AVX-512F (checked at run time).
 * Elsewhere every entry point returns CG_GEMM_UNAVAILABLE and the caller uses NumPy.
 *
 * Pure C (no Python.h): cgrad/_fused.pyx checks the arrays and calls these with the GIL
 * released. Contracts:
 *   - element (i, k) of A is a[i * rsa + k * csa], (k, n) of B is b[k * rsb + n * csb]
 *     (strides in elements, any sign-free values; the caller guarantees every element of
 *     the M x K and K x N index ranges is inside its array), C's rows are contiguous;
 *   - M, N, K >= 0; C does not overlap A or B;
 *   - a packed B (cg_sgemm_pack_b) is owned by the caller, freed with cg_sgemm_free_b, and
 *     read-only afterwards: any number of threads may use one packed B at once.
 * State: every call allocates its own packing buffers (malloc, freed on return); the one
 * global is the cached answer of cg_sgemm_available (written with relaxed atomics, the same
 * value by every thread), so calls from any number of threads at once are safe.
 */
#ifndef CGRAD_CG_GEMM_H
#define CGRAD_CG_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CG_GEMM_OK 0
#define CG_GEMM_UNAVAILABLE (-1)   /* no AVX-512F on this CPU or build: use another GEMM */
#define CG_GEMM_NOMEM (-2)         /* malloc failed */

#define CG_GEMM_MR 8                /* rows of the micro-tile */
#define CG_GEMM_NR 32               /* columns of the micro-tile (two zmm) */
#define CG_GEMM_KC 256              /* depth of one packed block of B */

/* 1 when this process can run the kernel (AVX-512F present and CGRAD_NO_AVX512 not set to
 * 1 when first asked), else 0. cg_fused.c's AVX-512 loops follow the same switch. */
int cg_sgemm_available(void);

/* C = A @ B (accumulate 0) or C += A @ B (accumulate 1). */
int cg_sgemm(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa, int64_t csa,
             const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc, int accumulate);

/* C = A @ B + bias, bias N contiguous floats added to every row after the sum (in the
 * tile's store: the bits of cg_sgemm followed by C += bias, without that second pass over
 * C; Linear's forward). bias is read, not kept. */
int cg_sgemm_bias(int64_t M, int64_t N, int64_t K, const float *a, int64_t rsa, int64_t csa,
                  const float *b, int64_t rsb, int64_t csb, const float *bias, float *c,
                  int64_t ldc);

/* B packed once for many products with the same B (a recurrent layer's W_hh): panels of
 * CG_GEMM_NR columns, k-major, zero-padded to a multiple of CG_GEMM_NR columns. */
typedef struct cg_packed_b {
    int64_t K, N;
    float *data;                 /* ceil(N / NR) panels of K x NR floats, 64-byte aligned */
} cg_packed_b;

/* Fill *out (data owned by *out afterwards). On failure out->data is NULL. */
int cg_sgemm_pack_b(int64_t K, int64_t N, const float *b, int64_t rsb, int64_t csb,
                    cg_packed_b *out);
void cg_sgemm_free_b(cg_packed_b *p);

/* C = A @ B or C += A @ B with B packed; A's K must equal p->K and C has p->N columns. */
int cg_sgemm_packed(int64_t M, const float *a, int64_t rsa, int64_t csa,
                    const cg_packed_b *p, float *c, int64_t ldc, int accumulate);

#ifdef __cplusplus
}
#endif

#endif /* CGRAD_CG_GEMM_H */
