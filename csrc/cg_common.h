/* cg_common.h: included first by every csrc file.
 *
 * csrc/ holds graph algorithms and buffer bookkeeping only. It includes Python.h (for
 * PyObject reference counting and error reporting) but never NumPy: the arithmetic on
 * gradients is done by callbacks supplied by the Cython layer (cgrad/_C_engine.pxi, part of
 * cgrad/_C.pyx).
 *
 * Conventions (as CPython):
 *   - functions returning int give 0 on success, -1 with a Python exception set on error;
 *   - functions returning a pointer give NULL with an exception set on error;
 *   - every prototype says which PyObject references are NEW (caller owns), BORROWED
 *     (caller must not decref), or STOLEN (callee takes the caller's reference);
 *   - every function is called with the GIL held.
 */
#ifndef CGRAD_CG_COMMON_H
#define CGRAD_CG_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(_MSC_VER)
#define CG_THREAD_LOCAL __declspec(thread)
#else
#define CG_THREAD_LOCAL _Thread_local
#endif

#define CG_INLINE_DIMS 4
#define CG_INLINE_EDGES 2

#endif /* CGRAD_CG_COMMON_H */
