/* cg_apply.h: the `apply` callable installed on every cgrad.autograd.Function subclass.
 *
 * torch's `MyFunction.apply` is a classmethod: each lookup builds a bound method and each
 * call builds an argument tuple and a keyword dict. A cg_apply object instead sits in the
 * class dict and is called through vectorcall:
 *   - as a descriptor it returns ITSELF when looked up on its owner class or an instance of
 *     it (no allocation), and, looked up for any other class (`super().apply(...)` from a
 *     subclass that defines its own apply), defers to `fallback.__get__(obj, type)`, so the
 *     call runs that class's forward as torch's classmethod would;
 *   - calling it calls impl(info, args, nargs, kwnames) with the vectorcall arguments,
 *     borrowed, and returns impl's result (NEW reference, or NULL with an exception set).
 *
 * The object holds STRONG references to info, owner and fallback and takes part in the
 * cycle collector (owner's dict holds the object, the object holds owner).
 *
 * It is written in C because a Cython extension type can have neither a vectorcall slot nor
 * a descriptor that returns itself without building an object; what a call does is Cython's
 * (impl is cgrad._C._apply_vc).
 */
#ifndef CGRAD_CG_APPLY_H
#define CGRAD_CG_APPLY_H

#include "cg_common.h"

/* args: nargs positional values then one value per name in kwnames (kwnames may be NULL);
 * all borrowed, and the callee must not write through the pointer (it is not declared
 * const only so that Cython can implement the function). */
typedef PyObject *(*cg_apply_impl_t)(PyObject *info, PyObject **args, Py_ssize_t nargs,
                                     PyObject *kwnames);

/* Ready the type once (module init). Returns 0, or -1 with an exception set. */
int cg_apply_type_ready(void);

/* A new apply object (NEW reference), or NULL with an exception set. info, owner and
 * fallback are BORROWED (the object takes its own references). */
PyObject *cg_apply_new(PyObject *info, PyObject *owner, PyObject *fallback,
                       cg_apply_impl_t impl);

/* 1 if `o` is an apply object, else 0. `o` is BORROWED. Cannot fail. */
int cg_apply_check(PyObject *o);

#endif /* CGRAD_CG_APPLY_H */
