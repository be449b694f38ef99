/* cg_attn.h: scaled dot-product attention in float32 (cgrad.nn.functional's
 * scaled_dot_product_attention without an explicit mask, dropout or grouped heads).
 *
 * For each of G groups (batch x heads), with q (T x D), k (S x D), v (S x Dv) row-major:
 *   forward   s = q k^T * scale; with causal, s[i, j] = -inf for j > i (torch's is_causal:
 *             the lower triangle of a T x S matrix); p = softmax over each row (a row whose
 *             scores are all -inf, or S = 0, gives zeros, as torch's CPU kernel), o = p v.
 *             p (T x S) is kept for the backward.
 *   backward  from go (T x Dv): dv = p^T go, dp = go v^T, ds = p (dp - rowsum(dp p)),
 *             dq = ds k * scale, dk = ds^T q * scale.
 * The products by cg_gemm.h's kernel (so only where it runs: AVX-512F), the softmax's exp
 * by cg_expf.h.
 *
 * Pure C: cgrad/_fused.pyx checks the arrays (float32, C-contiguous, shapes) and calls these
 * with the GIL released. Contract: all arrays hold G groups back to back, do not overlap,
 * outputs are written in full. Returns CG_GEMM_OK (0), CG_GEMM_UNAVAILABLE when the GEMM
 * kernel cannot run here (nothing written: use another path), or CG_GEMM_NOMEM. No global
 * state. */
#ifndef CGRAD_CG_ATTN_H
#define CGRAD_CG_ATTN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int cg_attn_fwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                    const float *k, const float *v, float scale, int causal, float *p,
                    float *o);
int cg_attn_bwd_f32(int64_t G, int64_t T, int64_t S, int64_t D, int64_t Dv, const float *q,
                    const float *k, const float *v, const float *p, const float *go,
                    float scale, int causal, float *dq, float *dk, float *dv);

#ifdef __cplusplus
}
#endif

#endif /* CGRAD_CG_ATTN_H */
