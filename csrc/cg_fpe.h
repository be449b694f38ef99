/* cg_fpe.h: clear and test the floating-point exception flags around a NumPy inner loop.
 *
 * Note [Direct loops] (cgrad/_C_binop.pxi) runs NumPy's float loops itself and must know whether
 * a loop raised division by zero, overflow, invalid or underflow, so that the ufunc can redo
 * the operation with NumPy's warnings. On x86-64 those loops use SSE/AVX only, whose flags
 * live in MXCSR: reading and writing it costs ~15 ns, against ~80 ns for C99's
 * feclearexcept + fetestexcept, which also save and reload the x87 environment (measured on
 * this project's machine, 10^7 pairs). Elsewhere the C99 functions are used.
 *
 * No Python objects; thread-safe (the flags are per thread).
 */
#ifndef CGRAD_CG_FPE_H
#define CGRAD_CG_FPE_H

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>

/* MXCSR status bits: invalid 0x01, denormal operand 0x02, divide-by-zero 0x04,
 * overflow 0x08, underflow 0x10, precision 0x20. */
static inline void cg_fpe_clear(void) { _mm_setcsr(_mm_getcsr() & ~0x3fu); }
static inline int cg_fpe_raised(void) { return (_mm_getcsr() & 0x1du) != 0; }

#else
#include <fenv.h>

static inline void cg_fpe_clear(void) { feclearexcept(FE_ALL_EXCEPT); }
static inline int cg_fpe_raised(void) {
    return fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID | FE_UNDERFLOW) != 0;
}
#endif

#endif /* CGRAD_CG_FPE_H */
