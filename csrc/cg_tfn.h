/* cg_tfn.h: a callable that checks its first argument is a Tensor, then calls a function.
 *
 * torch's functions bound in C (torch.exp, torch.sum, ...) refuse a first argument that is
 * not a Tensor with TypeError("exp(): argument 'input' (position 1) must be Tensor, not
 * list"). cgrad's functions are Python and would fail later with an AttributeError about an
 * internal attribute. Wrapping each in Python costs a frame and an argument repack per call;
 * this object does the type check in C and passes the call on with vectorcall.
 *
 * The same object renames NumPy-style keywords to torch's names (aliases, below), which is
 * how cgrad's Python functions accept them without a Python frame per call; cgrad installs
 * its public functions and Tensor methods as such objects (cgrad/_api.py).
 *
 * A cg_tfn object holds STRONG references to fn, name, tensor_type, aliases and its
 * attribute dict (which carries __wrapped__, __name__, __qualname__, __doc__, __module__ and
 * __signature__, so inspect and help() see a documented function), and takes part in the
 * cycle collector. It is a method descriptor (as a Python function is): stored on a class it
 * binds to instances, and CPython calls it without making a bound method
 * (Py_TPFLAGS_METHOD_DESCRIPTOR).
 */
#ifndef CGRAD_CG_TFN_H
#define CGRAD_CG_TFN_H

#include "cg_common.h"

/* Ready the type once (module init). Returns 0, or -1 with an exception set. */
int cg_tfn_type_ready(void);

/* A new callable (NEW reference), or NULL with an exception set. fn, name (a str: the name
 * in messages), tensor_type (the Tensor base type) and aliases are BORROWED. With `check`, a
 * positional first argument that is not an instance of tensor_type raises TypeError (a call
 * with no positional argument is passed on unchanged). `aliases` (a dict, or NULL) maps
 * keyword names to the names fn takes: NumPy's names that torch's C-bound ops accept
 * (axis -> dim, keepdims -> keepdim, x -> input, x2 -> other); calls without keywords do not
 * look at it. A call with an `out` keyword goes to the callable stored under "_out_impl"
 * in the object's attribute dict instead of fn, when there is one (the out= form of the
 * function, installed by cgrad/_api.py: Note [out= arguments]); calls without keywords do
 * not look for it. */
PyObject *cg_tfn_new(PyObject *fn, PyObject *name, PyObject *tensor_type, int check,
                     PyObject *aliases);

#endif /* CGRAD_CG_TFN_H */
