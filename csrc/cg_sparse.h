/* cg_sparse.h: sampled dense-dense products (SDDMM) for sparse gradients.
 *
 * out[k] = dot(G[row[k], :], B[col[k], :])   for k in [0, nnz)
 *
 * This is the gradient of the stored values of a sparse matrix A in A @ B, given the
 * gradient G of the product: O(nnz * F) time and no memory beyond `out`.
 *
 * Pure C (no Python.h, no NumPy): the Cython layer (cgrad/_sparse.pyx) extracts the
 * pointers and calls these functions with the GIL released. Contracts:
 *   - row, col: nnz int64 entries; G: rows of F elements, row r at G + r * ldg; B likewise
 *     with ldb (ld may be 0 for a broadcast row); out: nnz elements, written once each;
 *   - row[k] must lie in [0, g_rows) and col[k] in [0, b_rows); the functions check it and
 *     return the offending position k (>= 0) without touching out[k..] of that chunk, or
 *     -1 on success;
 *   - nthreads <= 1 runs on the calling thread; otherwise the edge range is split into
 *     nthreads contiguous ranges run by POSIX threads. Every output is a sum in a fixed
 *     order (8 independent partial sums over f, combined pairwise), so results do not
 *     depend on the thread count, and they vectorise at -O3 without -ffast-math.
 */
#ifndef CGRAD_CG_SPARSE_H
#define CGRAD_CG_SPARSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int64_t cg_sddmm_f32(const int64_t *row, const int64_t *col, int64_t nnz,
                     const float *G, int64_t ldg, int64_t g_rows,
                     const float *B, int64_t ldb, int64_t b_rows,
                     int64_t F, float *out, int nthreads);

int64_t cg_sddmm_f64(const int64_t *row, const int64_t *col, int64_t nnz,
                     const double *G, int64_t ldg, int64_t g_rows,
                     const double *B, int64_t ldb, int64_t b_rows,
                     int64_t F, double *out, int nthreads);

/* 1 if this build can run more than one thread (POSIX threads available), else 0. */
int cg_sparse_has_threads(void);

#ifdef __cplusplus
}
#endif

#endif /* CGRAD_CG_SPARSE_H */
