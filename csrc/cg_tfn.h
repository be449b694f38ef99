/* cg_tfn.h: a callable that checks its first argument is a Tensor, then calls a function.
 *
 * torch's functions bound in C (torch.exp, torch.sum, ...) refuse a first argument that is
 * not a Tensor with TypeError("exp(): argument 'input' (position 1) must be Tensor, not
 * list"). cgrad's functions are Python and would fail later with an AttributeError about an
 * internal attribute. Wrapping each in Python costs a frame and an argument repack per call;
 * this object does the type check in C and passes the call on with vectorcall.
 *
 * A cg_tfn object holds STRONG references to fn, name, tensor_type and its attribute dict
 * (which carries __wrapped__, __name__, __qualname__, __doc__ and __module__, so inspect and
 * help() see the wrapped function), and takes part in the cycle collector. It is not a
 * descriptor: stored on a class it behaves like a staticmethod.
 */
#ifndef CGRAD_CG_TFN_H
#define CGRAD_CG_TFN_H

#include "cg_common.h"

/* Ready the type once (module init). Returns 0, or -1 with an exception set. */
int cg_tfn_type_ready(void);

/* A new checked callable (NEW reference), or NULL with an exception set. fn, name (a str:
 * the name in messages) and tensor_type (the Tensor base type) are BORROWED. A positional
 * first argument that is not an instance of tensor_type raises TypeError; a call with no
 * positional argument is passed on unchanged. */
PyObject *cg_tfn_new(PyObject *fn, PyObject *name, PyObject *tensor_type);

#endif /* CGRAD_CG_TFN_H */
