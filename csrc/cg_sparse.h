/* cg_sparse.h: sampled dense-dense products (SDDMM) for sparse gradients.
 *
 * out[k * H + h] = dot(G[row[k], h, :], B[col[k], h, :])   for k in [0, nnz), h in [0, H)
 *
 * (H = 1: out[k] = dot(G[row[k], :], B[col[k], :]); H > 1: H heads that share the
 * indices, each with its own F elements of a row: the multi-head products of cgrad.spmm.)
 *
 * This is the gradient of the stored values of a sparse matrix A in A @ B, given the
 * gradient G of the product: O(nnz * F) time and no memory beyond `out`.
 *
 * Pure C (no Python.h, no NumPy): the Cython layer (cgrad/_sparse.pyx) extracts the
 * pointers and calls these functions with the GIL released. Contracts:
 *   - row, col: nnz int64 entries; G: rows of H * F elements, row r at G + r * ldg, its
 *     head h at G + r * ldg + h * F; B likewise with ldb (ld may be 0 for a broadcast row);
 *     out: nnz * H elements, written once each; H >= 1 (H < 1: nothing done, -1);
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
                     int64_t H, int64_t F, float *out, int nthreads);

int64_t cg_sddmm_f64(const int64_t *row, const int64_t *col, int64_t nnz,
                     const double *G, int64_t ldg, int64_t g_rows,
                     const double *B, int64_t ldb, int64_t b_rows,
                     int64_t H, int64_t F, double *out, int nthreads);

/* CSR arrays of a 2-D COO pattern (row[k], col[k]) of shape (n, m), by a stable counting
 * sort on the rows: O(nnz + n) time, one n-element scratch array.
 *   indptr (n + 1): row starts; ind (nnz): the column of each entry in CSR order;
 *   perm (nnz): perm[d] = the entry stored at CSR position d; written only when the rows
 *   are not already non-decreasing (then CSR order is entry order and perm is untouched).
 * Entries of one row keep their entry order (stable), so when every row's columns come out
 * non-decreasing the result equals a stable sort on (row, col).
 * Returns a combination of CG_CSR_ROWS_SORTED and CG_CSR_COLS_SORTED (>= 0), or
 * CG_CSR_BAD_INDEX (an index outside [0, n) x [0, m); outputs undefined) or
 * CG_CSR_NO_MEMORY. The int32 variant requires n, m, nnz < 2^31. */
#define CG_CSR_ROWS_SORTED 1
#define CG_CSR_COLS_SORTED 2
#define CG_CSR_BAD_INDEX (-1)
#define CG_CSR_NO_MEMORY (-2)

int64_t cg_csr_build_i32(const int64_t *row, const int64_t *col, int64_t nnz, int64_t n,
                         int64_t m, int32_t *indptr, int64_t *perm, int32_t *ind);
int64_t cg_csr_build_i64(const int64_t *row, const int64_t *col, int64_t nnz, int64_t n,
                         int64_t m, int64_t *indptr, int64_t *perm, int64_t *ind);

/* The CSR structure of the transpose of an (n, m) CSR pattern (indptr, ind) whose entry
 * at CSR position jj is the original entry perm[jj] (perm NULL: jj): tindptr (m + 1), and
 * for every transposed position d its original entry tperm[d] and its column tind[d] (the
 * source row). Stable (counting sort over the CSR positions), so each transposed row lists
 * its entries in increasing source row, in CSR order within a row: the order in which
 * scipy's csc_matvec(s) adds them. Returns 0, CG_CSR_BAD_INDEX or CG_CSR_NO_MEMORY. */
int64_t cg_csr_transpose_i32(int64_t n, int64_t m, const int32_t *indptr, const int32_t *ind,
                             const int64_t *perm, int32_t *tindptr, int32_t *tperm,
                             int32_t *tind);
int64_t cg_csr_transpose_i64(int64_t n, int64_t m, const int64_t *indptr, const int64_t *ind,
                             const int64_t *perm, int64_t *tindptr, int64_t *tperm,
                             int64_t *tind);

/* out (n, H, F, contiguous) = A_h @ X[:, h, :] for every head h < H, for the CSR matrices
 * A_h (indptr, ind) whose value at CSR position jj is vals[perm[jj] * H + h] (perm NULL:
 * vals[jj * H + h]); X row r at X + r * ldx, its head h at X + r * ldx + h * F (H = 1: one
 * matrix, out (n, F)). Each output row is set to 0 and then gets a * X[ind[jj], h] added in
 * CSR order, element by element: per head the sums of scipy's csr_matvecs, bit for bit,
 * and so those of the block-diagonal (n*H, m*H) matrix with entries (i*H + h, j*H + h). nthreads > 1 splits the rows into contiguous
 * ranges (each thread owns whole output rows), so the result never depends on it. Indices
 * are trusted (the structure was built and checked by cg_csr_build / cg_csr_transpose).
 * kind: value type, index type and perm type. */
#define CG_SPMM_F32_I32_P64 0
#define CG_SPMM_F64_I32_P64 1
#define CG_SPMM_F32_I64_P64 2
#define CG_SPMM_F64_I64_P64 3
#define CG_SPMM_F32_I32_P32 4
#define CG_SPMM_F64_I32_P32 5
void cg_spmm_csr(int kind, int64_t n, int64_t H, int64_t F, const void *indptr,
                 const void *ind, const void *perm, const void *vals, const void *X,
                 int64_t ldx, void *out, int nthreads);

/* out (m, H, F, contiguous) = A_h.T @ X[:, h, :] for the (n, m) CSR matrices A_h of
 * cg_spmm_csr (X: n rows), by a scatter over A's rows in order: each output element gets
 * its terms in increasing source row, in CSR order within a row, the order of the gather
 * over cg_csr_transpose's structure, so the result is that of cg_spmm_csr on the
 * transposed structure (and of scipy's csc_matvecs), bit for bit, without building it.
 * One thread; out is zeroed here. Indices are trusted (ind < m). */
void cg_spmm_csr_t(int kind, int64_t n, int64_t m, int64_t H, int64_t F, const void *indptr,
                   const void *ind, const void *perm, const void *vals, const void *X,
                   int64_t ldx, void *out);

/* acc[ids[k] * H + c] += V[k * ldv + c] for k in [0, nnz), c in [0, H), in float64
 * (float32 values are widened), k ascending: np.bincount(ids, weights=V[:, c]) bit for bit.
 * acc: n x H doubles, zeroed by the caller. nthreads > 1 splits the segments (each thread
 * reads every id and sums the entries of the segments it owns, so every sum keeps its order). Returns -1, or the first k whose id
 * lies outside [0, n) (acc then partly updated). */
int64_t cg_segment_sum(const int64_t *ids, int64_t nnz, const void *V, int64_t ldv,
                       int64_t H, int is_f64, double *acc, int64_t n, int nthreads);

/* 1 if this build can run more than one thread (POSIX threads available), else 0. */
int cg_sparse_has_threads(void);

#ifdef __cplusplus
}
#endif

#endif /* CGRAD_CG_SPARSE_H */
