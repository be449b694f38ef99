/* cg_attn.c: scaled dot-product attention in float32, forward and first-order backward, for
 * the groups (batch x heads) of one call; see cg_attn.h for the formulas and the contract.
 * The products of each group go to cg_gemm.h's kernel (any operand layout, so K^T, P^T and
 * dS^T are read in place); the row softmax and its backward are loops here (vectorised by
 * GCC, multi-versioned as in cg_fused.c). */
#include "cg_attn.h"
#include "cg_expf.h"
#include "cg_gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CG_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CG_MULTIVERSION
#endif

/* the last key a query row sees: all of them, or j <= i (causal, torch's tri(T, S)) */
static inline int64_t row_end(int64_t i, int64_t S, int causal)
{
    return causal ? (i + 1 < S ? i + 1 : S) : S;
}

/* Row reductions in LANES lanes: lane l takes the elements j = l mod LANES and the lanes are
 * combined by a fixed pairwise tree, so GCC vectorises them (a plain float sum or max is a
 * sequential chain it may not reorder) and the result is the same at every vector width. */
#define LANES 16

static inline float lane_max(int64_t n, const float *x)
{
    float m[LANES];
    for (int l = 0; l < LANES; l++)
        m[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)          /* a nan wins, as np.max */
            m[l] = (x[j + l] > m[l] || x[j + l] != x[j + l]) ? x[j + l] : m[l];
    for (int l = 0; j + l < n; l++)
        m[l] = (x[j + l] > m[l] || x[j + l] != x[j + l]) ? x[j + l] : m[l];
    for (int w = LANES / 2; w >= 1; w /= 2)      /* a fixed tree: 4 steps, not 15 */
        for (int l = 0; l < w; l++)
            m[l] = (m[l + w] > m[l] || m[l + w] != m[l + w]) ? m[l + w] : m[l];
    return m[0];
}

static inline float lane_sum(int64_t n, const float *x)
{
    float s[LANES] = {0.0f};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            s[l] += x[j + l];
    for (int l = 0; j + l < n; l++)
        s[l] += x[j + l];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            s[l] += s[l + w];
    return s[0];
}

static inline float lane_dot(int64_t n, const float *x, const float *y)
{
    float s[LANES] = {0.0f};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            s[l] += x[j + l] * y[j + l];
    for (int l = 0; j + l < n; l++)
        s[l] += x[j + l] * y[j + l];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            s[l] += s[l + w];
    return s[0];
}

/* p = softmax(p * scale) over each row's first row_end keys, zeros after them; a row with
 * no key or only -inf scores gives zeros (torch's CPU kernel). The loops run over whole
 * rows (the masked keys as -inf, whose exp is 0), so that they vectorise without scalar
 * tails when S is a multiple of the vector width; the masked keys are zeroed at the end
 * (a nan score makes its row nan, but never the masked keys' p). */
CG_MULTIVERSION
static void softmax_rows(int64_t T, int64_t S, float *p, float scale, int causal)
{
    for (int64_t i = 0; i < T; i++) {
        float *pr = p + i * S;
        int64_t end = row_end(i, S, causal);
        for (int64_t j = 0; j < S; j++)
            pr[j] = j < end ? pr[j] * scale : -INFINITY;
        float m = lane_max(S, pr);
        if (m == -INFINITY) {
            memset(pr, 0, (size_t)S * sizeof(float));
            continue;
        }
        for (int64_t j = 0; j < S; j++)              /* x - max <= 0 (nan stays nan) */
            pr[j] = expneg_f32(pr[j] - m);
        float inv = 1.0f / lane_sum(S, pr);
        for (int64_t j = 0; j < S; j++)
            pr[j] *= inv;
        if (end < S)
            memset(pr + end, 0, (size_t)(S - end) * sizeof(float));
    }
}

/* ds = p (dp - rowsum(dp p)) * scale, in place over dp (masked keys have p = 0: ds = 0) */
CG_MULTIVERSION
static void softmax_bwd_rows(int64_t T, int64_t S, const float *p, float *ds, float scale)
{
    for (int64_t i = 0; i < T; i++) {
        const float *pr = p + i * S;
        float *dr = ds + i * S;
        float r = lane_dot(S, dr, pr);
        for (int64_t j = 0; j < S; j++)
            dr[j] = pr[j] * (dr[j] - r) * scale;
    }
}

/* The products by cg_gemm.h's kernel (strides in elements: A (i, k) at a[i rsa + k csa]). */
int cg_attn_fwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                    const float *k, const float *v, float scale, int causal, float *p,
                    float *o)
{
    if (!cg_sgemm_available())
        return CG_GEMM_UNAVAILABLE;
    for (int64_t g = 0; g < G; g++) {
        const float *qg = q + g * T * D, *kg = k + g * S * D, *vg = v + g * S * Dv;
        float *pg = p + g * T * S, *og = o + g * T * Dv;
        int rc = cg_sgemm(T, S, D, qg, D, 1, kg, 1, D, pg, S, 0);       /* q k^T */
        if (rc != CG_GEMM_OK)
            return rc;
        softmax_rows(T, S, pg, scale, causal);
        rc = cg_sgemm(T, Dv, S, pg, S, 1, vg, Dv, 1, og, Dv, 0);        /* p v */
        if (rc != CG_GEMM_OK)
            return rc;
    }
    return CG_GEMM_OK;
}

int cg_attn_bwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                    const float *k, const float *v, const float *p, const float *go,
                    float scale, int causal, float *dq, float *dk, float *dv)
{
    (void)causal;                    /* p is 0 at the masked keys: nothing else to do */
    if (!cg_sgemm_available())
        return CG_GEMM_UNAVAILABLE;
    float *ds = (float *)malloc((size_t)(T * S > 0 ? T * S : 1) * sizeof(float));
    if (!ds)
        return CG_GEMM_NOMEM;
    int rc = CG_GEMM_OK;
    for (int64_t g = 0; g < G && rc == CG_GEMM_OK; g++) {
        const float *qg = q + g * T * D, *kg = k + g * S * D, *vg = v + g * S * Dv;
        const float *pg = p + g * T * S, *gg = go + g * T * Dv;
        rc = cg_sgemm(S, Dv, T, pg, 1, S, gg, Dv, 1, dv + g * S * Dv, Dv, 0);     /* p^T g */
        if (rc == CG_GEMM_OK)
            rc = cg_sgemm(T, S, Dv, gg, Dv, 1, vg, 1, Dv, ds, S, 0);           /* g v^T */
        if (rc != CG_GEMM_OK)
            break;
        softmax_bwd_rows(T, S, pg, ds, scale);
        rc = cg_sgemm(T, D, S, ds, S, 1, kg, D, 1, dq + g * T * D, D, 0);         /* ds k */
        if (rc == CG_GEMM_OK)
            rc = cg_sgemm(S, D, T, ds, 1, S, qg, D, 1, dk + g * S * D, D, 0);     /* ds^T q */
    }
    free(ds);
    return rc;
}
