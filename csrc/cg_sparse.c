/* cg_sparse.c: SDDMM kernels (see cg_sparse.h for the contracts). No Python, no NumPy. */
#include "cg_sparse.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if !defined(_WIN32)
#include <pthread.h>
#define CG_HAVE_PTHREADS 1
#else
#define CG_HAVE_PTHREADS 0
#endif

#define CG_MAX_THREADS 64
/* Below this much work (nnz * F multiply-adds) a second thread costs more than it saves. */
#define CG_MIN_WORK_PER_THREAD ((int64_t)1 << 16)

/* One dot product with 8 independent partial sums. The combination order is fixed, so the
 * result depends only on the data, never on the thread that computes it. */
#define CG_DEFINE_DOT(NAME, T)                                                            \
    static inline T NAME(const T *g, const T *b, int64_t F)                               \
    {                                                                                     \
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;                 \
        int64_t f = 0;                                                                    \
        for (; f + 8 <= F; f += 8) {                                                      \
            s0 += g[f] * b[f];                                                            \
            s1 += g[f + 1] * b[f + 1];                                                    \
            s2 += g[f + 2] * b[f + 2];                                                    \
            s3 += g[f + 3] * b[f + 3];                                                    \
            s4 += g[f + 4] * b[f + 4];                                                    \
            s5 += g[f + 5] * b[f + 5];                                                    \
            s6 += g[f + 6] * b[f + 6];                                                    \
            s7 += g[f + 7] * b[f + 7];                                                    \
        }                                                                                 \
        switch (F - f) {                                                                  \
        case 7: s6 += g[f + 6] * b[f + 6]; /* fall through */                             \
        case 6: s5 += g[f + 5] * b[f + 5]; /* fall through */                             \
        case 5: s4 += g[f + 4] * b[f + 4]; /* fall through */                             \
        case 4: s3 += g[f + 3] * b[f + 3]; /* fall through */                             \
        case 3: s2 += g[f + 2] * b[f + 2]; /* fall through */                             \
        case 2: s1 += g[f + 1] * b[f + 1]; /* fall through */                             \
        case 1: s0 += g[f] * b[f]; /* fall through */                                     \
        default: break;                                                                   \
        }                                                                                 \
        return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));                         \
    }

CG_DEFINE_DOT(dot_f32, float)
CG_DEFINE_DOT(dot_f64, double)

#if defined(__GNUC__) || defined(__clang__)
#define CG_PREFETCH(p) __builtin_prefetch(p)
#define CG_PREFETCH_W(p) __builtin_prefetch((p), 1)
#else
#define CG_PREFETCH(p) ((void)0)
#define CG_PREFETCH_W(p) ((void)0)
#endif
/* Rows are gathered in random order, so the loop is bound by memory latency: prefetch the
 * rows of the entry CG_PREFETCH_AHEAD positions ahead (about 30% faster on random graphs). */
#define CG_PREFETCH_AHEAD 16

/* The serial kernel over [lo, hi): returns -1, or the first k whose index is out of range. */
#define CG_DEFINE_RANGE(NAME, T, DOT)                                                     \
    static int64_t NAME(const int64_t *row, const int64_t *col, int64_t lo, int64_t hi,   \
                        const T *G, int64_t ldg, int64_t g_rows, const T *B, int64_t ldb, \
                        int64_t b_rows, int64_t H, int64_t F, T *out)                     \
    {                                                                                     \
        const int64_t step = 64 / (int64_t)sizeof(T);     /* elements per cache line */   \
        const int64_t HF = H * F;                                                         \
        int64_t k, q, h;                                                                  \
        for (k = lo; k < hi; k++) {                                                       \
            int64_t r = row[k], c = col[k];                                               \
            if (r < 0 || r >= g_rows || c < 0 || c >= b_rows)                             \
                return k;                                                                 \
            if (k + CG_PREFETCH_AHEAD < hi) {                                             \
                int64_t pr = row[k + CG_PREFETCH_AHEAD], pc = col[k + CG_PREFETCH_AHEAD]; \
                if (pr >= 0 && pr < g_rows && pc >= 0 && pc < b_rows) {                   \
                    for (q = 0; q < HF; q += step) {                                      \
                        CG_PREFETCH(G + pr * ldg + q);                                    \
                        CG_PREFETCH(B + pc * ldb + q);                                    \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
            for (h = 0; h < H; h++)                                                       \
                out[k * H + h] = DOT(G + r * ldg + h * F, B + c * ldb + h * F, F);        \
        }                                                                                 \
        return -1;                                                                        \
    }

CG_DEFINE_RANGE(range_f32, float, dot_f32)
CG_DEFINE_RANGE(range_f64, double, dot_f64)

typedef struct {
    const int64_t *row, *col;
    int64_t lo, hi;
    const void *G, *B;
    int64_t ldg, g_rows, ldb, b_rows, H, F;
    void *out;
    int is_f64;
    int64_t bad;
} cg_sddmm_job_t;

static void run_job(cg_sddmm_job_t *j)
{
    if (j->is_f64)
        j->bad = range_f64(j->row, j->col, j->lo, j->hi, (const double *)j->G, j->ldg,
                           j->g_rows, (const double *)j->B, j->ldb, j->b_rows, j->H, j->F,
                           (double *)j->out);
    else
        j->bad = range_f32(j->row, j->col, j->lo, j->hi, (const float *)j->G, j->ldg,
                           j->g_rows, (const float *)j->B, j->ldb, j->b_rows, j->H, j->F,
                           (float *)j->out);
}

#if CG_HAVE_PTHREADS
static void *thread_main(void *arg)
{
    run_job((cg_sddmm_job_t *)arg);
    return NULL;
}
#endif

static int64_t sddmm(const int64_t *row, const int64_t *col, int64_t nnz, const void *G,
                     int64_t ldg, int64_t g_rows, const void *B, int64_t ldb, int64_t b_rows,
                     int64_t H, int64_t F, void *out, int nthreads, int is_f64)
{
    cg_sddmm_job_t jobs[CG_MAX_THREADS];
    int64_t work, bad = -1;
    int t, n = nthreads;

    if (nnz <= 0)
        return -1;
    if (F < 1)
        F = 0;
    if (H < 1)
        return -1;
    work = nnz * H * (F > 0 ? F : 1);
    if (n > CG_MAX_THREADS)
        n = CG_MAX_THREADS;
    if (!CG_HAVE_PTHREADS || n < 2)
        n = 1;
    while (n > 1 && work / n < CG_MIN_WORK_PER_THREAD)
        n--;
    for (t = 0; t < n; t++) {
        jobs[t].row = row;
        jobs[t].col = col;
        jobs[t].lo = nnz * t / n;
        jobs[t].hi = nnz * (t + 1) / n;
        jobs[t].G = G;
        jobs[t].B = B;
        jobs[t].ldg = ldg;
        jobs[t].g_rows = g_rows;
        jobs[t].ldb = ldb;
        jobs[t].b_rows = b_rows;
        jobs[t].H = H;
        jobs[t].F = F;
        jobs[t].out = out;
        jobs[t].is_f64 = is_f64;
        jobs[t].bad = -1;
    }
#if CG_HAVE_PTHREADS
    if (n > 1) {
        pthread_t tids[CG_MAX_THREADS];
        int started[CG_MAX_THREADS];
        /* Threads 1..n-1 run on new threads, range 0 on this one; a thread that cannot be
         * started has its range run here instead, so the result is the same either way. */
        for (t = 1; t < n; t++)
            started[t] = pthread_create(&tids[t], NULL, thread_main, &jobs[t]) == 0;
        run_job(&jobs[0]);
        for (t = 1; t < n; t++) {
            if (started[t])
                pthread_join(tids[t], NULL);
            else
                run_job(&jobs[t]);
        }
    }
    else
#endif
    {
        run_job(&jobs[0]);
    }
    for (t = 0; t < n; t++) {
        if (jobs[t].bad >= 0 && (bad < 0 || jobs[t].bad < bad))
            bad = jobs[t].bad;
    }
    return bad;
}

int64_t cg_sddmm_f32(const int64_t *row, const int64_t *col, int64_t nnz,
                     const float *G, int64_t ldg, int64_t g_rows,
                     const float *B, int64_t ldb, int64_t b_rows,
                     int64_t H, int64_t F, float *out, int nthreads)
{
    return sddmm(row, col, nnz, G, ldg, g_rows, B, ldb, b_rows, H, F, out, nthreads, 0);
}

int64_t cg_sddmm_f64(const int64_t *row, const int64_t *col, int64_t nnz,
                     const double *G, int64_t ldg, int64_t g_rows,
                     const double *B, int64_t ldb, int64_t b_rows,
                     int64_t H, int64_t F, double *out, int nthreads)
{
    return sddmm(row, col, nnz, G, ldg, g_rows, B, ldb, b_rows, H, F, out, nthreads, 1);
}

int cg_sparse_has_threads(void)
{
    return CG_HAVE_PTHREADS;
}

/* ---------------------------------------------------------------------------------------
 * CSR structure by a stable counting sort over the rows (see cg_sparse.h). */

#define CG_DEFINE_CSR(NAME, IT)                                                           \
    int64_t NAME(const int64_t *row, const int64_t *col, int64_t nnz, int64_t n,          \
                 int64_t m, IT *indptr, int64_t *perm, IT *ind)                           \
    {                                                                                     \
        int64_t k, i, rows_sorted = 1, cols_sorted = 1;                                   \
        IT *pos;                                                                          \
        for (i = 0; i <= n; i++)                                                          \
            indptr[i] = 0;                                                                \
        for (k = 0; k < nnz; k++) {                                                       \
            int64_t r = row[k], c = col[k];                                               \
            if (r < 0 || r >= n || c < 0 || c >= m)                                       \
                return CG_CSR_BAD_INDEX;                                                  \
            if (k && r < row[k - 1])                                                      \
                rows_sorted = 0;                                                          \
            indptr[r + 1]++;                                                              \
        }                                                                                 \
        for (i = 0; i < n; i++)                                                           \
            indptr[i + 1] += indptr[i];                                                   \
        if (rows_sorted) {                                                                \
            for (k = 0; k < nnz; k++)                                                     \
                ind[k] = (IT)col[k];                                                      \
        }                                                                                 \
        else {                                                                            \
            pos = (IT *)malloc((size_t)(n > 0 ? n : 1) * sizeof(IT));                     \
            if (pos == NULL)                                                              \
                return CG_CSR_NO_MEMORY;                                                  \
            memcpy(pos, indptr, (size_t)n * sizeof(IT));                                  \
            for (k = 0; k < nnz; k++) {                                                   \
                int64_t d = (int64_t)pos[row[k]]++;                                       \
                perm[d] = k;                                                              \
                ind[d] = (IT)col[k];                                                      \
            }                                                                             \
            free(pos);                                                                    \
        }                                                                                 \
        for (i = 0; i < n && cols_sorted; i++) {                                          \
            int64_t jj;                                                                   \
            for (jj = (int64_t)indptr[i] + 1; jj < (int64_t)indptr[i + 1]; jj++) {        \
                if (ind[jj] < ind[jj - 1]) {                                              \
                    cols_sorted = 0;                                                      \
                    break;                                                                \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
        return (rows_sorted ? CG_CSR_ROWS_SORTED : 0) | (cols_sorted ? CG_CSR_COLS_SORTED : 0); \
    }

CG_DEFINE_CSR(cg_csr_build_i32, int32_t)
CG_DEFINE_CSR(cg_csr_build_i64, int64_t)

/* ---------------------------------------------------------------------------------------
 * The transposed CSR structure (see cg_sparse.h). */

#define CG_DEFINE_TRANSPOSE(NAME, IT)                                                     \
    int64_t NAME(int64_t n, int64_t m, const IT *indptr, const IT *ind,                   \
                 const int64_t *perm, IT *tindptr, IT *tperm, IT *tind)                   \
    {                                                                                     \
        int64_t i, jj, c, nnz = n > 0 ? (int64_t)indptr[n] : 0;                           \
        IT *pos;                                                                          \
        for (c = 0; c <= m; c++)                                                          \
            tindptr[c] = 0;                                                               \
        for (jj = 0; jj < nnz; jj++) {                                                    \
            c = (int64_t)ind[jj];                                                         \
            if (c < 0 || c >= m)                                                          \
                return CG_CSR_BAD_INDEX;                                                  \
            tindptr[c + 1]++;                                                             \
        }                                                                                 \
        for (c = 0; c < m; c++)                                                           \
            tindptr[c + 1] += tindptr[c];                                                 \
        pos = (IT *)malloc((size_t)(m > 0 ? m : 1) * sizeof(IT));                         \
        if (pos == NULL)                                                                  \
            return CG_CSR_NO_MEMORY;                                                      \
        memcpy(pos, tindptr, (size_t)m * sizeof(IT));                                     \
        for (i = 0; i < n; i++) {                                                         \
            for (jj = (int64_t)indptr[i]; jj < (int64_t)indptr[i + 1]; jj++) {            \
                int64_t d = (int64_t)pos[ind[jj]]++;                                      \
                tperm[d] = (IT)(perm ? perm[jj] : jj);                                    \
                tind[d] = (IT)i;                                                          \
            }                                                                             \
        }                                                                                 \
        free(pos);                                                                        \
        return 0;                                                                         \
    }

CG_DEFINE_TRANSPOSE(cg_csr_transpose_i32, int32_t)
CG_DEFINE_TRANSPOSE(cg_csr_transpose_i64, int64_t)

/* ---------------------------------------------------------------------------------------
 * SpMM over CSR rows (see cg_sparse.h). */

typedef struct {
    int64_t lo, hi, H, F, ldx;
    const void *indptr, *ind, *perm, *vals, *X;
    void *out;
    int kind;
} cg_spmm_job_t;

#define CG_DEFINE_SPMM_RANGE(NAME, T, IT, PT)                                             \
    static void NAME(const cg_spmm_job_t *j)                                              \
    {                                                                                     \
        const IT *indptr = (const IT *)j->indptr, *ind = (const IT *)j->ind;              \
        const PT *perm = (const PT *)j->perm;                                             \
        const T *vals = (const T *)j->vals, *X = (const T *)j->X;                         \
        T *out = (T *)j->out;                                                             \
        const int64_t H = j->H, F = j->F, HF = j->H * j->F, ldx = j->ldx;                 \
        const int64_t step = 64 / (int64_t)sizeof(T), end = (int64_t)indptr[j->hi];    \
        int64_t i, jj, f, q, h;                                                           \
        for (i = j->lo; i < j->hi; i++) {                                                 \
            T *y = out + i * HF;                                                          \
            for (f = 0; f < HF; f++)                                                      \
                y[f] = 0;                                                                 \
            for (jj = (int64_t)indptr[i]; jj < (int64_t)indptr[i + 1]; jj++) {            \
                const T *v = vals + (perm ? (int64_t)perm[jj] : jj) * H;                  \
                const T *x = X + (int64_t)ind[jj] * ldx;                                  \
                if (jj + CG_PREFETCH_AHEAD < end) {  /* X rows are read in random order */ \
                    const T *px = X + (int64_t)ind[jj + CG_PREFETCH_AHEAD] * ldx;         \
                    for (q = 0; q < HF; q += step)                                        \
                        CG_PREFETCH(px + q);                                              \
                    if (perm)                                                             \
                        CG_PREFETCH(vals + (int64_t)perm[jj + CG_PREFETCH_AHEAD] * H);    \
                }                                                                         \
                for (h = 0; h < H; h++) {                                                 \
                    const T a = v[h];                                                     \
                    T *yh = y + h * F;                                                    \
                    const T *xh = x + h * F;                                              \
                    for (f = 0; f < F; f++)                                               \
                        yh[f] += a * xh[f];                                               \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

CG_DEFINE_SPMM_RANGE(spmm_f32_i32_p64, float, int32_t, int64_t)
CG_DEFINE_SPMM_RANGE(spmm_f64_i32_p64, double, int32_t, int64_t)
CG_DEFINE_SPMM_RANGE(spmm_f32_i64_p64, float, int64_t, int64_t)
CG_DEFINE_SPMM_RANGE(spmm_f64_i64_p64, double, int64_t, int64_t)
CG_DEFINE_SPMM_RANGE(spmm_f32_i32_p32, float, int32_t, int32_t)
CG_DEFINE_SPMM_RANGE(spmm_f64_i32_p32, double, int32_t, int32_t)

/* The transposed product by a scatter over the (source) CSR rows: out[ind[jj]] += a * X[i]
 * for the rows i in order and their positions jj in CSR order, so every output element
 * gets its terms in the order of the transposed CSR (increasing i, then CSR order): the
 * sums of the gather over cg_csr_transpose's structure, bit for bit, without it. One
 * thread (the outputs are written in random order); out is zeroed here. */
#define CG_DEFINE_SPMM_T(NAME, T, IT, PT)                                                 \
    static void NAME(int64_t n, int64_t m, int64_t H, int64_t F, const IT *indptr,        \
                     const IT *ind, const PT *perm, const T *vals, const T *X,            \
                     int64_t ldx, T *out)                                                 \
    {                                                                                     \
        const int64_t HF = H * F, step = 64 / (int64_t)sizeof(T);                         \
        const int64_t end = n > 0 ? (int64_t)indptr[n] : 0;                              \
        int64_t i, jj, f, q, h;                                                           \
        for (q = 0; q < m * HF; q++)                                                      \
            out[q] = 0;                                                                   \
        for (i = 0; i < n; i++) {                                                         \
            const T *x = X + i * ldx;                                                     \
            for (jj = (int64_t)indptr[i]; jj < (int64_t)indptr[i + 1]; jj++) {            \
                const T *v = vals + (perm ? (int64_t)perm[jj] : jj) * H;                  \
                T *y = out + (int64_t)ind[jj] * HF;                                       \
                if (jj + CG_PREFETCH_AHEAD < end) {  /* out rows are written at random */ \
                    T *py = out + (int64_t)ind[jj + CG_PREFETCH_AHEAD] * HF;              \
                    for (q = 0; q < HF; q += step)                                        \
                        CG_PREFETCH_W(py + q);                                            \
                    if (perm)                                                             \
                        CG_PREFETCH(vals + (int64_t)perm[jj + CG_PREFETCH_AHEAD] * H);    \
                }                                                                         \
                for (h = 0; h < H; h++) {                                                 \
                    const T a = v[h];                                                     \
                    T *yh = y + h * F;                                                    \
                    const T *xh = x + h * F;                                              \
                    for (f = 0; f < F; f++)                                               \
                        yh[f] += a * xh[f];                                               \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

CG_DEFINE_SPMM_T(spmm_t_f32_i32_p64, float, int32_t, int64_t)
CG_DEFINE_SPMM_T(spmm_t_f64_i32_p64, double, int32_t, int64_t)
CG_DEFINE_SPMM_T(spmm_t_f32_i64_p64, float, int64_t, int64_t)
CG_DEFINE_SPMM_T(spmm_t_f64_i64_p64, double, int64_t, int64_t)
CG_DEFINE_SPMM_T(spmm_t_f32_i32_p32, float, int32_t, int32_t)
CG_DEFINE_SPMM_T(spmm_t_f64_i32_p32, double, int32_t, int32_t)

void cg_spmm_csr_t(int kind, int64_t n, int64_t m, int64_t H, int64_t F, const void *indptr,
                   const void *ind, const void *perm, const void *vals, const void *X,
                   int64_t ldx, void *out)
{
    if (H < 1)
        return;
    switch (kind) {
#define CG_T_CASE(K, FN, T, IT, PT)                                                       \
    case K:                                                                               \
        FN(n, m, H, F, (const IT *)indptr, (const IT *)ind, (const PT *)perm,             \
           (const T *)vals, (const T *)X, ldx, (T *)out);                                 \
        break;
    CG_T_CASE(CG_SPMM_F32_I32_P64, spmm_t_f32_i32_p64, float, int32_t, int64_t)
    CG_T_CASE(CG_SPMM_F64_I32_P64, spmm_t_f64_i32_p64, double, int32_t, int64_t)
    CG_T_CASE(CG_SPMM_F32_I64_P64, spmm_t_f32_i64_p64, float, int64_t, int64_t)
    CG_T_CASE(CG_SPMM_F64_I64_P64, spmm_t_f64_i64_p64, double, int64_t, int64_t)
    CG_T_CASE(CG_SPMM_F32_I32_P32, spmm_t_f32_i32_p32, float, int32_t, int32_t)
    CG_T_CASE(CG_SPMM_F64_I32_P32, spmm_t_f64_i32_p32, double, int32_t, int32_t)
#undef CG_T_CASE
    default: break;
    }
}

static void spmm_run(cg_spmm_job_t *j)
{
    switch (j->kind) {
    case CG_SPMM_F32_I32_P64: spmm_f32_i32_p64(j); break;
    case CG_SPMM_F64_I32_P64: spmm_f64_i32_p64(j); break;
    case CG_SPMM_F32_I64_P64: spmm_f32_i64_p64(j); break;
    case CG_SPMM_F64_I64_P64: spmm_f64_i64_p64(j); break;
    case CG_SPMM_F32_I32_P32: spmm_f32_i32_p32(j); break;
    case CG_SPMM_F64_I32_P32: spmm_f64_i32_p32(j); break;
    default: break;
    }
}

#if CG_HAVE_PTHREADS
static void *spmm_thread_main(void *arg)
{
    spmm_run((cg_spmm_job_t *)arg);
    return NULL;
}
#endif

static int64_t indptr_at(const void *indptr, int wide, int64_t i)
{
    return wide ? ((const int64_t *)indptr)[i] : (int64_t)((const int32_t *)indptr)[i];
}

void cg_spmm_csr(int kind, int64_t n, int64_t H, int64_t F, const void *indptr,
                 const void *ind, const void *perm, const void *vals, const void *X,
                 int64_t ldx, void *out, int nthreads)
{
    cg_spmm_job_t jobs[CG_MAX_THREADS];
    int wide = (kind == CG_SPMM_F32_I64_P64 || kind == CG_SPMM_F64_I64_P64);
    int64_t nnz, work, lo = 0;
    int t, nt = nthreads;

    if (n <= 0 || H < 1)
        return;
    nnz = indptr_at(indptr, wide, n);
    work = (nnz + n) * H * (F > 0 ? F : 1);
    if (nt > CG_MAX_THREADS)
        nt = CG_MAX_THREADS;
    if (!CG_HAVE_PTHREADS || nt < 2)
        nt = 1;
    while (nt > 1 && work / nt < CG_MIN_WORK_PER_THREAD)
        nt--;
    /* contiguous row ranges of about equal nnz + rows: each thread owns whole output rows,
     * so every output is summed in the same order whatever the thread count */
    for (t = 0; t < nt; t++) {
        int64_t hi = n;
        if (t < nt - 1) {
            int64_t target = (nnz + n) * (t + 1) / nt, a = lo, b = n;
            while (a < b) {          /* first row r with indptr[r] + r >= target */
                int64_t mid = a + (b - a) / 2;
                if (indptr_at(indptr, wide, mid) + mid < target)
                    a = mid + 1;
                else
                    b = mid;
            }
            hi = a;
        }
        jobs[t].lo = lo;
        jobs[t].hi = hi;
        jobs[t].H = H;
        jobs[t].F = F;
        jobs[t].ldx = ldx;
        jobs[t].indptr = indptr;
        jobs[t].ind = ind;
        jobs[t].perm = perm;
        jobs[t].vals = vals;
        jobs[t].X = X;
        jobs[t].out = out;
        jobs[t].kind = kind;
        lo = hi;
    }
#if CG_HAVE_PTHREADS
    if (nt > 1) {
        pthread_t tids[CG_MAX_THREADS];
        int started[CG_MAX_THREADS];
        for (t = 1; t < nt; t++)
            started[t] = pthread_create(&tids[t], NULL, spmm_thread_main, &jobs[t]) == 0;
        spmm_run(&jobs[0]);
        for (t = 1; t < nt; t++) {
            if (started[t])
                pthread_join(tids[t], NULL);
            else
                spmm_run(&jobs[t]);
        }
        return;
    }
#endif
    spmm_run(&jobs[0]);
}

/* ---------------------------------------------------------------------------------------
 * Segment sums (see cg_sparse.h). */

typedef struct {
    const int64_t *ids;
    int64_t nnz, n, ldv, H, s0, s1, bad;
    const void *V;
    double *acc;
    int is_f64;
} cg_segsum_job_t;

static void segsum_run(cg_segsum_job_t *j)
{
    int64_t k, c;
    const int64_t H = j->H, ldv = j->ldv, s0 = j->s0, s1 = j->s1;
    j->bad = -1;
    for (k = 0; k < j->nnz; k++) {
        int64_t s = j->ids[k];
        double *a;
        if (s < 0 || s >= j->n) {
            j->bad = k;
            return;
        }
        if (s < s0 || s >= s1)          /* another thread's segment */
            continue;
        a = j->acc + s * H;
        if (j->is_f64) {
            const double *v = (const double *)j->V + k * ldv;
            for (c = 0; c < H; c++)
                a[c] += v[c];
        }
        else {
            const float *v = (const float *)j->V + k * ldv;
            for (c = 0; c < H; c++)
                a[c] += (double)v[c];
        }
    }
}

#if CG_HAVE_PTHREADS
static void *segsum_thread_main(void *arg)
{
    segsum_run((cg_segsum_job_t *)arg);
    return NULL;
}
#endif

int64_t cg_segment_sum(const int64_t *ids, int64_t nnz, const void *V, int64_t ldv,
                       int64_t H, int is_f64, double *acc, int64_t n, int nthreads)
{
    cg_segsum_job_t jobs[CG_MAX_THREADS];
    int64_t bad = -1;
    int t, nt = nthreads;

    if (nnz <= 0 || H <= 0)
        return -1;
    if (nt > CG_MAX_THREADS)
        nt = CG_MAX_THREADS;
    if (!CG_HAVE_PTHREADS || nt < 2)
        nt = 1;
    if (nt > n)
        nt = (int)n;
    while (nt > 1 && nnz * H / nt < CG_MIN_WORK_PER_THREAD)
        nt--;
    for (t = 0; t < nt; t++) {
        jobs[t].ids = ids;
        jobs[t].nnz = nnz;
        jobs[t].n = n;
        jobs[t].ldv = ldv;
        jobs[t].H = H;
        jobs[t].s0 = n * t / nt;        /* each thread owns whole segments (output rows) */
        jobs[t].s1 = n * (t + 1) / nt;
        jobs[t].V = V;
        jobs[t].acc = acc;
        jobs[t].is_f64 = is_f64;
        jobs[t].bad = -1;
    }
#if CG_HAVE_PTHREADS
    if (nt > 1) {
        pthread_t tids[CG_MAX_THREADS];
        int started[CG_MAX_THREADS];
        for (t = 1; t < nt; t++)
            started[t] = pthread_create(&tids[t], NULL, segsum_thread_main, &jobs[t]) == 0;
        segsum_run(&jobs[0]);
        for (t = 1; t < nt; t++) {
            if (started[t])
                pthread_join(tids[t], NULL);
            else
                segsum_run(&jobs[t]);
        }
    }
    else
#endif
    {
        segsum_run(&jobs[0]);
    }
    for (t = 0; t < nt; t++) {
        if (jobs[t].bad >= 0 && (bad < 0 || jobs[t].bad < bad))
            bad = jobs[t].bad;
    }
    return bad;
}
