/* cg_expf.h: exp(x) for x <= 0 in float32, branch-free so that loops over it vectorise
 * (shared by cg_fused.c and cg_attn.c; static inline, no state). */
#ifndef CGRAD_CG_EXPF_H
#define CGRAD_CG_EXPF_H

#include <stdint.h>
#include <string.h>

static inline float bits_to_f32(uint32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

/* exp(x) for x <= 0 in float32: x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite with Cephes'
 * constants; n rounded to nearest by adding and subtracting 1.5 * 2^23), exp(r) by Cephes'
 * degree-7 fit, times 2^n as two powers of two built in the exponent bits (n down to -150:
 * results in the subnormal range round once, at the last product). Below -103.98 (where
 * exp(x) rounds to 0) the result is 0. Branch-free (selects) so that loops over it
 * vectorise; nan propagates through the polynomial. */
static inline float expneg_f32(float x)
{
    const float lo = -103.972084045410f, magic = 12582912.0f;   /* 1.5 * 2^23 */
    float xc = x < lo ? lo : x;
    float n = (xc * 1.44269504088896341f + magic) - magic;    /* round(x / ln2) in [-150, 0] */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    /* 2^n = 2^n1 * 2^n2 with n1 = round(n / 2), both in [-75, 0]; the low bits of
     * n1 + 1.5 * 2^23 hold n1 + 2^22 (two's complement within the mantissa), so adding 127
     * and shifting by 23 leaves the biased exponent of 2^n1 */
    float m1 = n * 0.5f + magic;
    float n2 = n - (m1 - magic);
    float m2 = n2 + magic;
    float s1 = bits_to_f32((f32_to_bits(m1) + 127u) << 23);
    float s2 = bits_to_f32((f32_to_bits(m2) + 127u) << 23);
    float y = (p * s1) * s2;
    return x < lo ? 0.0f : y;
}

#endif /* CGRAD_CG_EXPF_H */
