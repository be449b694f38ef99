/* cg_fused.c: see cg_fused.h for the formulas and the contracts. */
#include "cg_fused.h"
#include "cg_expf.h"
#include "cg_gemm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Function multi-versioning: GCC on x86-64 Linux (ifunc) compiles the step kernels for
 * AVX-512, AVX2 and the x86-64 baseline and picks one at load time; these versions give the
 * same results (no FMA contraction: -std=c11 sets -ffp-contract=off; the same operations in
 * the same order at every width). On a CPU with AVX-512F the float32 transcendental loops
 * (the LSTM forward step, GELU, map_f32) run hand-written AVX-512 versions instead (below:
 * FMA in the polynomials, vscalefps for the 2^n scaling, ~2.5x faster than what GCC makes
 * of the portable code); their results can differ from the portable ones by an ulp, within
 * the same error bounds (tests/test_fused.py runs the dispatched code). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CG_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CG_MULTIVERSION
#endif

/* sigmoid(x) = 1 / (1 + exp(-x)), as 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0
 * with e = exp(-|x|) (no overflow; the tail keeps its relative accuracy into the
 * subnormal range). */
static inline float sigmoid_f32(float x)
{
    float e = expneg_f32(-fabsf(x));
    float q = 1.0f / (1.0f + e);
    return x >= 0.0f ? q : e * q;
}

/* tanh(x) in float32: Cephes' odd fit below |x| = 0.625, (1 - e) / (1 + e) with
 * e = exp(-2|x|) above (sign restored). */
static inline float tanh_f32(float x)
{
    float ax = fabsf(x);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = x + x * (z * p);
    float e = expneg_f32(-2.0f * ax);
    float big = (1.0f - e) / (1.0f + e);
    big = x < 0.0f ? -big : big;
    return ax < 0.625f ? small : big;               /* nan: ax < 0.625 false, big is nan */
}

static inline double sigmoid_f64(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* ---- AVX-512 versions of the float32 functions and loops ----------------------------- */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define CG_HAVE_V512 1
#define CG_V512 __attribute__((target("avx512f")))

static int v512(void)
{
    return cg_sgemm_available();       /* AVX-512F, unless CGRAD_NO_AVX512=1 (cg_gemm.c) */
}

#define VS(c) _mm512_set1_ps(c)

/* expneg_f32 on 16 lanes: the same reduction and fit, by FMA; 2^n by vscalefps (one
 * rounding, so subnormal results round once, as the two-factor product above). */
CG_V512 static inline __m512 v_expneg(__m512 x)
{
    const __m512 lo = VS(-103.972084045410f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __m512 xc = _mm512_max_ps(lo, x);              /* max returns its 2nd operand on nan */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, VS(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, VS(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, VS(-2.12194440e-4f), r);
    __m512 p = VS(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, VS(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, VS(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, VS(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, VS(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, VS(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, VS(1.0f));
    return _mm512_mask_mov_ps(_mm512_scalef_ps(p, n), under, _mm512_setzero_ps());
}

CG_V512 static inline __m512 v_negabs(__m512 x)       /* -|x| */
{
    return _mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(x),
                                               _mm512_set1_epi32((int)0x80000000u)));
}

CG_V512 static inline __m512 v_sigmoid(__m512 x)
{
    __m512 e = v_expneg(v_negabs(x));
    __m512 q = _mm512_div_ps(VS(1.0f), _mm512_add_ps(VS(1.0f), e));
    __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(pos, _mm512_mul_ps(e, q), q);
}

CG_V512 static inline __m512 v_tanh(__m512 x)
{
    __m512 na = v_negabs(x);
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = VS(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, z, VS(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, z, VS(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, z, VS(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, z, VS(-3.33332819422e-1f));
    __m512 small = _mm512_fmadd_ps(x, _mm512_mul_ps(z, p), x);
    __m512 e = v_expneg(_mm512_add_ps(na, na));
    __m512 big = _mm512_div_ps(_mm512_sub_ps(VS(1.0f), e), _mm512_add_ps(VS(1.0f), e));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    big = _mm512_mask_sub_ps(big, neg, _mm512_setzero_ps(), big);
    /* nan: the compare is false, big (nan) is kept */
    __mmask16 lt = _mm512_cmp_ps_mask(na, VS(-0.625f), _CMP_GT_OQ);  /* |x| < 0.625 */
    return _mm512_mask_blend_ps(lt, big, small);
}

CG_V512 static inline __m512 v_gelu_cdf(__m512 x)
{
    const float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                         0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    __m512 ax = _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(x),
                                                     _mm512_set1_epi32(0x7fffffff)));
    __m512 t = _mm512_div_ps(VS(1.0f), _mm512_fmadd_ps(ax, VS(0.353553390593273762f),
                                                      VS(1.0f)));
    __m512 e = VS(c[9]);
    for (int k = 8; k >= 0; k--)
        e = _mm512_fmadd_ps(e, t, VS(c[k]));
    e = _mm512_fnmadd_ps(_mm512_mul_ps(x, VS(0.5f)), x, e);
    __m512 E = _mm512_mul_ps(v_expneg(e), t);
    __m512 half = _mm512_mul_ps(VS(0.5f), E);
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(neg, _mm512_sub_ps(VS(1.0f), half), half);
}

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

CG_V512 static void v_lstm_fwd(int64_t n, int64_t H, const float *gi, int64_t gs,
                               const float *hh, float *c, float *h, float *acts, float *cs,
                               float *tcs, float *hs)
{
    for (int64_t r = 0; r < n; r++) {
        const float *a = gi + r * gs, *b = hh + r * 4 * H;
        float *act = acts + r * 4 * H, *cr = c + r * H, *hr = h + r * H;
        float *csr = cs + r * H, *tcr = tcs + r * H, *hsr = hs + r * H;
        for (int64_t j = 0; j < H; j += 16) {
            __mmask16 m = tail_mask(H - j);
#define LD(p) _mm512_maskz_loadu_ps(m, (p))
            __m512 i = v_sigmoid(_mm512_add_ps(LD(a + j), LD(b + j)));
            __m512 f = v_sigmoid(_mm512_add_ps(LD(a + H + j), LD(b + H + j)));
            __m512 g = v_tanh(_mm512_add_ps(LD(a + 2 * H + j), LD(b + 2 * H + j)));
            __m512 o = v_sigmoid(_mm512_add_ps(LD(a + 3 * H + j), LD(b + 3 * H + j)));
            __m512 cn = _mm512_fmadd_ps(i, g, _mm512_mul_ps(f, LD(cr + j)));
#undef LD
            __m512 tc = v_tanh(cn);
            __m512 hn = _mm512_mul_ps(o, tc);
            _mm512_mask_storeu_ps(act + j, m, i);
            _mm512_mask_storeu_ps(act + H + j, m, f);
            _mm512_mask_storeu_ps(act + 2 * H + j, m, g);
            _mm512_mask_storeu_ps(act + 3 * H + j, m, o);
            _mm512_mask_storeu_ps(csr + j, m, cn);
            _mm512_mask_storeu_ps(cr + j, m, cn);
            _mm512_mask_storeu_ps(tcr + j, m, tc);
            _mm512_mask_storeu_ps(hsr + j, m, hn);
            _mm512_mask_storeu_ps(hr + j, m, hn);
        }
    }
}

CG_V512 static void v_gelu(int64_t n, const float *x, float *y, float *cdf)
{
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask(n - j);
        __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        __m512 p = v_gelu_cdf(v);
        _mm512_mask_storeu_ps(cdf + j, m, p);
        _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(v, p));
    }
}

CG_V512 static void v_gelu_bwd(int64_t n, const float *x, const float *cdf, const float *g,
                               float *out)
{
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask(n - j);
        __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        __m512 d = _mm512_mul_ps(v_expneg(_mm512_mul_ps(_mm512_mul_ps(v, v), VS(-0.5f))),
                                 VS(0.398942280401432678f));
        __m512 p = cdf ? _mm512_maskz_loadu_ps(m, cdf + j) : v_gelu_cdf(v);
        d = _mm512_fmadd_ps(d, v, p);
        _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, g + j)));
    }
}

CG_V512 static void v_map(int which, int64_t n, const float *x, float *out)
{
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = tail_mask(n - j);
        __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        __m512 r = which == 0 ? v_expneg(v) : which == 1 ? v_tanh(v) : v_sigmoid(v);
        _mm512_mask_storeu_ps(out + j, m, r);
    }
}
#undef VS
#else
#define CG_HAVE_V512 0
#endif

/* The step loops, one per dtype: T the element type, SIG and TANH its functions. */
#define CG_LSTM_FWD(T, SIG, TANH, GS)                                                   \
    for (int64_t r = 0; r < n; r++) {                                                   \
        const T *restrict a = gi + r * (GS), *restrict b = hh + r * 4 * H;              \
        T *restrict act = acts + r * 4 * H;                                             \
        T *restrict cr = c + r * H, *restrict hr = h + r * H;                           \
        T *restrict csr = cs + r * H, *restrict tcr = tcs + r * H, *restrict hsr = hs + r * H; \
        for (int64_t j = 0; j < H; j++) {                                               \
            T i = SIG(a[j] + b[j]);                                                     \
            T f = SIG(a[H + j] + b[H + j]);                                             \
            T g = TANH(a[2 * H + j] + b[2 * H + j]);                                    \
            T o = SIG(a[3 * H + j] + b[3 * H + j]);                                     \
            T cn = f * cr[j];                                                           \
            cn += i * g;                                                                \
            T tc = TANH(cn);                                                            \
            T hn = o * tc;                                                              \
            act[j] = i;                                                                 \
            act[H + j] = f;                                                             \
            act[2 * H + j] = g;                                                         \
            act[3 * H + j] = o;                                                         \
            csr[j] = cn;                                                                \
            cr[j] = cn;                                                                 \
            tcr[j] = tc;                                                                \
            hsr[j] = hn;                                                                \
            hr[j] = hn;                                                                 \
        }                                                                               \
    }

#define CG_LSTM_BWD(T)                                                                  \
    for (int64_t r = 0; r < n; r++) {                                                   \
        const T *restrict act = acts + r * 4 * H;                                       \
        const T *restrict tcr = tcs + r * H, *restrict cp = cprev + r * H;              \
        const T *restrict gor = go + r * H, *restrict dhr = dh + r * H;                 \
        T *restrict dcr = dc + r * H, *restrict dr = d + r * 4 * H;                     \
        for (int64_t j = 0; j < H; j++) {                                               \
            T i = act[j], f = act[H + j], g = act[2 * H + j], o = act[3 * H + j];       \
            T tc = tcr[j];                                                              \
            T dhv = dhr[j] + gor[j];                                                    \
            T k = (1 - tc * tc) * o;                                                    \
            T dcv = dcr[j] + k * dhv;                                                   \
            dr[j] = (1 - i) * i * g * dcv;                                              \
            dr[H + j] = (1 - f) * f * cp[j] * dcv;                                      \
            dr[2 * H + j] = (1 - g * g) * i * dcv;                                      \
            dr[3 * H + j] = (1 - o) * o * tc * dhv;                                     \
            dcr[j] = dcv * f;                                                           \
        }                                                                               \
    }

/* gi's rows gs floats apart: 4H, or 0 for one row (a bias) shared by every row */
CG_MULTIVERSION
static void lstm_fwd_f32(int64_t n, int64_t H, const float *restrict gi, int64_t gs,
                         const float *restrict hh, float *restrict c, float *restrict h,
                         float *restrict acts, float *restrict cs, float *restrict tcs,
                         float *restrict hs)
{
#if CG_HAVE_V512
    if (v512()) {
        v_lstm_fwd(n, H, gi, gs, hh, c, h, acts, cs, tcs, hs);
        return;
    }
#endif
    CG_LSTM_FWD(float, sigmoid_f32, tanh_f32, gs)
}

void cg_lstm_fwd_f32(int64_t n, int64_t H, const float *gi, const float *hh, float *c,
                     float *h, float *acts, float *cs, float *tcs, float *hs)
{
    lstm_fwd_f32(n, H, gi, 4 * H, hh, c, h, acts, cs, tcs, hs);
}

void cg_lstm_fwd_f64(int64_t n, int64_t H, const double *restrict gi,
                     const double *restrict hh, double *restrict c, double *restrict h,
                     double *restrict acts, double *restrict cs, double *restrict tcs,
                     double *restrict hs)
{
    CG_LSTM_FWD(double, sigmoid_f64, tanh, 4 * H)
}

CG_MULTIVERSION
void cg_lstm_bwd_f32(int64_t n, int64_t H, const float *restrict acts,
                     const float *restrict tcs, const float *restrict cprev,
                     const float *restrict go, const float *restrict dh, float *restrict dc,
                     float *restrict d)
{
    CG_LSTM_BWD(float)
}

void cg_lstm_bwd_f64(int64_t n, int64_t H, const double *restrict acts,
                     const double *restrict tcs, const double *restrict cprev,
                     const double *restrict go, const double *restrict dh,
                     double *restrict dc, double *restrict d)
{
    CG_LSTM_BWD(double)
}

int cg_lstm_seq_fwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                        const float *x, int64_t nin, const cg_packed_b *wih_t,
                        const cg_packed_b *whh_t, const float *bias, float *hh, float *c,
                        float *h, float *acts, float *cs, float *tcs, float *hs)
{
    float *zero = NULL;
    if (!bias) {
        if (!(zero = (float *)calloc((size_t)(4 * H > 0 ? 4 * H : 1), sizeof(float))))
            return CG_GEMM_NOMEM;
        bias = zero;
    }
    int rc = CG_GEMM_OK;
    for (int64_t s = 0; s < T && rc == CG_GEMM_OK; s++) {
        int64_t t = reverse ? T - 1 - s : s;
        int64_t lo = offsets[t], n = offsets[t + 1] - lo;
        rc = cg_sgemm_packed(n, x + lo * nin, nin, 1, wih_t, hh, 4 * H, 0);
        if (rc == CG_GEMM_OK)
            rc = cg_sgemm_packed(n, h, H, 1, whh_t, hh, 4 * H, 1);
        if (rc == CG_GEMM_OK)
            lstm_fwd_f32(n, H, bias, 0, hh, c, h, acts + lo * 4 * H, cs + lo * H,
                         tcs + lo * H, hs + lo * H);
    }
    free(zero);
    return rc;
}

int cg_lstm_seq_bwd_f32(int64_t T, const int64_t *offsets, int reverse, int64_t H,
                        const cg_packed_b *whh, const float *acts, const float *tcs,
                        const float *cprev, const float *go, float *dh, float *dc, float *d)
{
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? s : T - 1 - s;        /* the forward's order, reversed */
        int64_t lo = offsets[t], n = offsets[t + 1] - lo;
        cg_lstm_bwd_f32(n, H, acts + lo * 4 * H, tcs + lo * H, cprev + lo * H, go + lo * H,
                        dh, dc, d + lo * 4 * H);
        int rc = cg_sgemm_packed(n, d + lo * 4 * H, 4 * H, 1, whh, dh, H, 0);
        if (rc != CG_GEMM_OK)
            return rc;
    }
    return CG_GEMM_OK;
}

int cg_fused_disjoint(const char *const *lo, const char *const *hi, int k)
{
    for (int a = 0; a < k; a++) {
        uintptr_t la = (uintptr_t)lo[a], ha = (uintptr_t)hi[a];
        if (la >= ha)
            continue;
        for (int b = a + 1; b < k; b++) {
            uintptr_t lb = (uintptr_t)lo[b], hb = (uintptr_t)hi[b];
            if (lb >= hb)
                continue;
            if (la < hb && lb < ha)
                return 0;
        }
    }
    return 1;
}

/* Phi(x) for GELU in float32, the formula of cgrad/ops/pointwise.py's _gelu_cdf (Note [GELU
 * in float32]): E = erfc(|x| / sqrt 2) = t exp(P(t) - x^2 / 2) with t = 1 / (1 + |x| k)
 * (Numerical Recipes' erfcc fit), Phi = E / 2 for x < 0 and 1 - E / 2 otherwise. The
 * exponent is <= 0 up to the fit's rounding (~1e-8 at x = 0), inside expneg_f32's range. */
static inline float gelu_cdf_f32(float x)
{
    const float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                         0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    float t = 1.0f / (fabsf(x) * 0.353553390593273762f + 1.0f);
    float e = t * c[9];
    for (int k = 8; k > 0; k--)
        e = (e + c[k]) * t;
    e += c[0];
    e -= (x * x) * 0.5f;
    float E = expneg_f32(e) * t;
    return x < 0.0f ? 0.5f * E : 1.0f - 0.5f * E;   /* nan: 1 - nan */
}

CG_MULTIVERSION
void cg_gelu_f32(int64_t n, const float *restrict x, float *restrict y, float *restrict cdf)
{
#if CG_HAVE_V512
    if (v512()) {
        v_gelu(n, x, y, cdf);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) {
        float p = gelu_cdf_f32(x[j]);
        cdf[j] = p;
        y[j] = x[j] * p;
    }
}

CG_MULTIVERSION
void cg_gelu_bwd_f32(int64_t n, const float *restrict x, const float *restrict cdf,
                     const float *restrict g, float *restrict out)
{
#if CG_HAVE_V512
    if (v512()) {
        v_gelu_bwd(n, x, cdf, g, out);
        return;
    }
#endif
    const float inv_sqrt_2pi = 0.398942280401432678f;
    /* two loops, so that each vectorises (a select between cdf[j] and the fit would not) */
    if (cdf) {
        for (int64_t j = 0; j < n; j++) {
            float d = expneg_f32((x[j] * x[j]) * -0.5f) * inv_sqrt_2pi;
            d *= x[j];
            d += cdf[j];
            out[j] = d * g[j];
        }
    } else {
        for (int64_t j = 0; j < n; j++) {
            float d = expneg_f32((x[j] * x[j]) * -0.5f) * inv_sqrt_2pi;
            d *= x[j];
            d += gelu_cdf_f32(x[j]);
            out[j] = d * g[j];
        }
    }
}

CG_MULTIVERSION
void cg_fused_map_f32(int which, int64_t n, const float *restrict x, float *restrict out)
{
#if CG_HAVE_V512
    if (v512()) {
        v_map(which, n, x, out);
        return;
    }
#endif
    if (which == 0) {
        for (int64_t j = 0; j < n; j++)
            out[j] = expneg_f32(x[j]);
    } else if (which == 1) {
        for (int64_t j = 0; j < n; j++)
            out[j] = tanh_f32(x[j]);
    } else {
        for (int64_t j = 0; j < n; j++)
            out[j] = sigmoid_f32(x[j]);
    }
}

/* exp(x) = 2^k (1 + q) with q = expm1(r), x = k ln2 + r, |r| <= ln2 / 2, for float x <= 0
 * (x < -104 is taken as -104: expm1 is -1 and exp is 0 in float32 there; nan stays nan).
 * Returns q (Taylor to r^8: truncation < 0.3 ulp) and sets p[0] p[1] = 2^k as two normal
 * floats 2^(k >> 1) and 2^(k - (k >> 1)) (2^k itself is subnormal below k = -126). Cody-Waite reduction
 * (ln2's high part has 9 bits, so k ln2_hi is exact for |k| <= 151). Branch-free, so GCC
 * vectorises the loops; k is rounded by the 1.5 * 2^23 trick (no conversion of a nan to an
 * integer, which C leaves undefined). */
static inline float expm1_parts(float xf, float p[2])
{
    const float magic = 12582912.0f;                          /* 1.5 * 2^23 */
    float x = xf < -104.0f ? -104.0f : xf;
    float kf = x * 1.44269504f + magic;
    uint32_t kbits;
    memcpy(&kbits, &kf, sizeof kbits);
    kf -= magic;
    float r = x - kf * 0.693359375f;
    r -= kf * -2.12194440e-4f;
    float q = 2.48015873e-05f;                                /* 1/8! */
    q = q * r + 1.98412698e-04f;
    q = q * r + 1.38888889e-03f;
    q = q * r + 8.33333333e-03f;
    q = q * r + 4.16666667e-02f;
    q = q * r + 1.66666667e-01f;
    q = q * r + 0.5f;
    q = q * (r * r) + r;
    /* k = kbits - bits(magic) (two's complement), -151 <= k <= 0 for x <= 0; for x > 0 or
     * nan the bits are garbage (the callers do not use them) but no operation overflows */
    int32_t k = (int32_t)(kbits - 0x4b400000u);
    int32_t k1 = k >> 1;
    uint32_t e1 = (((uint32_t)k1 + 127u) & 0xffu) << 23;
    uint32_t e2 = (((uint32_t)k - (uint32_t)k1 + 127u) & 0xffu) << 23;
    memcpy(&p[0], &e1, sizeof e1);
    memcpy(&p[1], &e2, sizeof e2);
    return q;
}

CG_MULTIVERSION
void cg_elu_f32(int64_t n, const float *x, float as, float scale, float *y)
{
    for (int64_t j = 0; j < n; j++) {
        float v = x[j];
        float p2[2];
        float q = expm1_parts(v, p2);
        float m1 = (p2[0] * q) * p2[1] + (p2[0] * p2[1] - 1.0f);  /* expm1(v); k = 0: q */
        y[j] = v > 0.0f ? v * scale : m1 * as;
    }
}

CG_MULTIVERSION
void cg_elu_bwd_f32(int64_t n, const float *x, const float *g, float as, float scale,
                    float *out)
{
    for (int64_t j = 0; j < n; j++) {
        float v = x[j];
        float p2[2];
        float q = expm1_parts(v, p2);
        float ex = (p2[0] * q + p2[0]) * p2[1];                /* exp(v) */
        float d = v > 0.0f || v != v ? scale : ex * as;
        out[j] = g[j] * d;
    }
}

/* Layer normalization over rows of C floats (see cg_fused.h). Row sums in double over 8
 * lanes (lane l takes the elements j = l mod 8, then the lanes are added in order): GCC
 * vectorises the lanes, and the order, so the result, is the same at every width. */
#define LN_LANES 8

static inline double ln_sum(int64_t C, const float *restrict x)
{
    double acc[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= C; j += LN_LANES)
        for (int l = 0; l < LN_LANES; l++)
            acc[l] += (double)x[j + l];
    for (int l = 0; j < C; j++, l++)
        acc[l] += (double)x[j];
    double s = 0;
    for (int l = 0; l < LN_LANES; l++)
        s += acc[l];
    return s;
}

static inline double ln_sum_sq_dev(int64_t C, const float *restrict x, double mu)
{
    double acc[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= C; j += LN_LANES)
        for (int l = 0; l < LN_LANES; l++) {
            double d = (double)x[j + l] - mu;
            acc[l] += d * d;
        }
    for (int l = 0; j < C; j++, l++) {
        double d = (double)x[j] - mu;
        acc[l] += d * d;
    }
    double s = 0;
    for (int l = 0; l < LN_LANES; l++)
        s += acc[l];
    return s;
}

CG_MULTIVERSION
void cg_layer_norm_f32(int64_t R, int64_t C, const float *restrict x, const float *restrict w,
                       const float *restrict b, double eps, float *restrict y,
                       float *restrict mu, float *restrict rstd)
{
    for (int64_t r = 0; r < R; r++) {
        const float *restrict xr = x + r * C;
        float *restrict yr = y + r * C;
        double m = ln_sum(C, xr) / (double)C;
        double v = ln_sum_sq_dev(C, xr, m) / (double)C;
        float mf = (float)m, rs = (float)(1.0 / sqrt(v + eps));
        mu[r] = mf;
        rstd[r] = rs;
        if (w && b) {
            for (int64_t j = 0; j < C; j++)
                yr[j] = (xr[j] - mf) * rs * w[j] + b[j];
        } else if (w) {
            for (int64_t j = 0; j < C; j++)
                yr[j] = (xr[j] - mf) * rs * w[j];
        } else if (b) {
            for (int64_t j = 0; j < C; j++)
                yr[j] = (xr[j] - mf) * rs + b[j];
        } else {
            for (int64_t j = 0; j < C; j++)
                yr[j] = (xr[j] - mf) * rs;
        }
    }
}

/* gx, and the column sums gw += g xhat, gb += g accumulated in double (ws, bs: C doubles
 * each, zeroed by the caller; NULL when not wanted). xh: a row of scratch (C floats). */
CG_MULTIVERSION
static void ln_bwd_rows(int64_t R, int64_t C, const float *restrict x,
                        const float *restrict mu, const float *restrict rstd,
                        const float *restrict w, const float *restrict g, float *restrict gx,
                        double *restrict ws, double *restrict bs, float *restrict xh,
                        float *restrict gh)
{
    for (int64_t r = 0; r < R; r++) {
        const float *restrict xr = x + r * C, *restrict gr = g + r * C;
        float m = mu[r], rs = rstd[r];
        for (int64_t j = 0; j < C; j++)
            xh[j] = (xr[j] - m) * rs;
        if (ws)
            for (int64_t j = 0; j < C; j++)
                ws[j] += (double)gr[j] * (double)xh[j];
        if (bs)
            for (int64_t j = 0; j < C; j++)
                bs[j] += (double)gr[j];
        if (!gx)
            continue;
        if (w)
            for (int64_t j = 0; j < C; j++)
                gh[j] = gr[j] * w[j];
        else
            memcpy(gh, gr, (size_t)C * sizeof(float));
        double m1 = ln_sum(C, gh) / (double)C;
        double acc[LN_LANES] = {0};
        int64_t j = 0;
        for (; j + LN_LANES <= C; j += LN_LANES)
            for (int l = 0; l < LN_LANES; l++)
                acc[l] += (double)gh[j + l] * (double)xh[j + l];
        for (int l = 0; j < C; j++, l++)
            acc[l] += (double)gh[j] * (double)xh[j];
        double m2 = 0;
        for (int l = 0; l < LN_LANES; l++)
            m2 += acc[l];
        m2 /= (double)C;
        float m1f = (float)m1, m2f = (float)m2;
        float *restrict gxr = gx + r * C;
        for (int64_t k = 0; k < C; k++)
            gxr[k] = (gh[k] - m1f - xh[k] * m2f) * rs;
    }
}

int cg_layer_norm_bwd_f32(int64_t R, int64_t C, const float *x, const float *mu,
                          const float *rstd, const float *w, const float *g, float *gx,
                          float *gw, float *gb)
{
    double *ws = gw ? (double *)calloc((size_t)(C ? C : 1), sizeof(double)) : NULL;
    double *bs = gb ? (double *)calloc((size_t)(C ? C : 1), sizeof(double)) : NULL;
    float *scratch = (float *)malloc((size_t)(2 * C + 2) * sizeof(float));
    if ((gw && !ws) || (gb && !bs) || !scratch) {
        free(ws);
        free(bs);
        free(scratch);
        return -1;
    }
    ln_bwd_rows(R, C, x, mu, rstd, w, g, gx, ws, bs, scratch, scratch + C + 1);
    for (int64_t j = 0; j < C; j++) {
        if (gw)
            gw[j] = (float)ws[j];
        if (gb)
            gb[j] = (float)bs[j];
    }
    free(ws);
    free(bs);
    free(scratch);
    return 0;
}
