/* cg_fused.h: fused kernels: the recurrent layers' time steps, GELU, layer normalization.
 *
 * One LSTM step over n rows of H hidden units, in the order and the formulas of the NumPy
 * code in cgrad/nn/functional/_rnn.py (gates i, f, g, o in blocks of H columns):
 *
 *   forward   a = gi + hh;  i, f, o = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)
 *             c' = f * c + i * g;  h' = o * tanh(c')
 *   backward  dh += go;  dc += o (1 - tanh(c')^2) dh
 *             d_i = i (1 - i) g dc;  d_f = f (1 - f) c dc;  d_g = (1 - g^2) i dc
 *             d_o = o (1 - o) tanh(c') dh;  dc *= f
 *
 * (the matrix products between the steps stay in NumPy's BLAS). The point is the number of
 * calls: NumPy needs ~15 calls per step forward and ~20 backward on (n, 4H) blocks, each a
 * few microseconds at batch 32 x 128 hidden; one pass here replaces them.
 *
 * sigmoid(x) = 1 / (1 + exp(-x)). float64 uses the C library's exp and tanh. float32 uses
 * polynomial functions (cg_fused.c: Cephes' expf and tanhf fits; exp only of x <= 0, so
 * sigmoid is 1 / (1 + e) or e / (1 + e) and tanh (1 - e) / (1 + e) with e = exp(-|x|) or
 * exp(-2|x|): nothing overflows), written branch-free so that the compiler vectorises the
 * loops; x86-64 builds with GCC compile them for AVX-512, AVX2 and the baseline and pick one
 * at load time (function multi-versioning), and on CPUs with AVX-512F the float32 forward
 * step, GELU and map_f32 run hand-written AVX-512 loops (FMA, vscalefps; results within the
 * same bounds, possibly an ulp from the portable code's). nan propagates, +-inf saturate.
 *
 * Pure C (no Python.h, no NumPy): cgrad/_fused.pyx validates the arrays and calls these
 * with the GIL released. Contracts (all arrays row-major, rows contiguous):
 *   - gi, hh, acts, d: n rows of 4H elements; c, h, cs, tcs, hs, cprev, go, dh, dc: n rows
 *     of H elements; n >= 0, H >= 0;
 *   - no two arrays overlap (the pointers are `restrict`); the caller checks it
 *     (cg_fused_disjoint).
 */
#ifndef CGRAD_CG_FUSED_H
#define CGRAD_CG_FUSED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* forward step: reads gi, hh, c; writes acts (i, f, g, o after their nonlinearity), cs
 * (c'), tcs (tanh(c')), hs (h'), and the state: c = c', h = h'. */
void cg_lstm_fwd_f32(int64_t n, int64_t H, const float *gi, const float *hh, float *c,
                     float *h, float *acts, float *cs, float *tcs, float *hs);
void cg_lstm_fwd_f64(int64_t n, int64_t H, const double *gi, const double *hh, double *c,
                     double *h, double *acts, double *cs, double *tcs, double *hs);

/* backward step: reads acts, tcs, cprev (the state c before the step), go (the gradient of
 * the step's output), dh (the gradient of h' from later steps; not written); updates dc
 * (in: gradient of c', out: of c) and writes d, the gradient of the pre-activations a. */
void cg_lstm_bwd_f32(int64_t n, int64_t H, const float *acts, const float *tcs,
                     const float *cprev, const float *go, const float *dh, float *dc,
                     float *d);
void cg_lstm_bwd_f64(int64_t n, int64_t H, const double *acts, const double *tcs,
                     const double *cprev, const double *go, const double *dh, double *dc,
                     double *d);

/* The whole time loop of one float32 layer-direction, the per-step products by the GEMM of
 * cg_gemm.h on weights packed once: step t covers rows offsets[t] .. offsets[t + 1] of the
 * per-sequence arrays (and rows 0 .. n of the state arrays), steps run 0 .. T-1 forward
 * (T-1 .. 0 with reverse), the backward in the opposite order.
 * forward: hh[:n] = x[rows] @ W_ih^T (wih_t packed (I, 4H)), hh[:n] += h[:n] @ W_hh^T
 * (whh_t packed (H, 4H)), then the step of cg_lstm_fwd_f32 with gi = bias (4H floats, the
 * sum b_ih + b_hh, or NULL for none) for every row: the input projection is never stored.
 * backward: cg_lstm_bwd_f32, then dh[:n] = d[rows] @ W_hh (whh packed (4H, H)).
 * Contract: offsets non-decreasing from 0, each step's n at most the state arrays' rows, the
 * arrays as above (x: N rows of nin) and disjoint (the caller checks all of it). Returns
 * CG_GEMM_OK, or CG_GEMM_NOMEM (forward without a bias: its zero row). */
struct cg_packed_b;                 /* cg_gemm.h */
int cg_lstm_seq_fwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                        const float *x, int64_t nin, const struct cg_packed_b *wih_t,
                        const struct cg_packed_b *whh_t, const float *bias, float *hh,
                        float *c, float *h, float *acts, float *cs, float *tcs, float *hs);
int cg_lstm_seq_bwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                        const struct cg_packed_b *whh, const float *acts, const float *tcs,
                        const float *cprev, const float *go, float *dh, float *dc, float *d);

/* 1 when the k byte ranges [lo[j], hi[j]) are pairwise disjoint (empty ranges are disjoint
 * from everything), else 0. O(k^2); k is small. */
int cg_fused_disjoint(const char *const *lo, const char *const *hi, int k);

/* GELU (approximate='none') in float32, elementwise over n contiguous elements:
 * forward y = x Phi(x), cdf = Phi(x) (kept for the backward); backward
 * out = g (Phi(x) + x phi(x)) with Phi from cdf, or recomputed when cdf is NULL. Phi by the
 * erfc fit of cgrad/ops/pointwise.py (Note [GELU in float32]) with the exp above. Arrays of
 * n elements, not overlapping. */
void cg_gelu_f32(int64_t n, const float *x, float *y, float *cdf);
void cg_gelu_bwd_f32(int64_t n, const float *x, const float *cdf, const float *g, float *out);

/* ELU in float32 (elu, selu; torch's elu kernel with input_scale 1), as = alpha * scale:
 *   y = x > 0 ? x scale : expm1(x) as          (nan: nan)
 *   out = g * (x > 0 ? scale : exp(x) as)       (nan x: g scale, as torch's x <= 0 test)
 * expm1 and exp of x <= 0 are computed in double (a degree-11 Taylor polynomial on
 * |r| <= ln2 / 2 after x = k ln2 + r, relative error < 1e-13) and rounded once to float32:
 * correctly rounded but for ties within that error. The products are float32 (as NumPy's
 * expm1(x) * as). Arrays of n elements; y/out may alias x or g exactly, nothing else. */
void cg_elu_f32(int64_t n, const float *x, float as, float scale, float *y);
void cg_elu_bwd_f32(int64_t n, const float *x, const float *g, float as, float scale,
                    float *out);

/* Layer normalization in float32 over R rows of C contiguous elements (torch's
 * native_layer_norm): mu = mean(x), var = mean((x - mu)^2) (both summed in double),
 * rstd = 1 / sqrt(var + eps), y = (x - mu) rstd [* w] [+ b] in float32 (w, b: C elements or
 * NULL); mu and rstd (R each) are kept for the backward:
 *   xhat = (x - mu) rstd, gh = g [* w], gx = (gh - mean(gh) - xhat mean(gh xhat)) rstd,
 *   gw = sum over rows of g xhat, gb = sum over rows of g (column sums in double).
 * gx, gw, gb may each be NULL (not computed). Arrays do not overlap. The backward returns 0,
 * or -1 when its scratch (3 C doubles at most) cannot be allocated (nothing written). */
void cg_layer_norm_f32(int64_t R, int64_t C, const float *x, const float *w, const float *b,
                       double eps, float *y, float *mu, float *rstd);
int cg_layer_norm_bwd_f32(int64_t R, int64_t C, const float *x, const float *mu,
                          const float *rstd, const float *w, const float *g, float *gx,
                          float *gw, float *gb);

/* the float32 functions of the kernels above, elementwise, for tests: which = 0: exp of
 * x <= 0 (x > 0 is outside the contract), 1: tanh, 2: sigmoid */
void cg_fused_map_f32(int which, int64_t n, const float *x, float *out);

#ifdef __cplusplus
}
#endif

#endif
