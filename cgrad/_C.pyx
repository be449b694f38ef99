# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""Object layouts and the calls between Python and the C engine.

TensorBase (the Tensor's layout), Node (a graph node, which is also a Function's ``ctx``),
AccumulateGrad, FunctionBase.apply, saved tensors, and the engine callbacks live here. The
graph algorithms are in csrc/ (cg_graph.c, cg_engine.c); the maths of every op is Python.

Reference discipline: every PyObject* handed to C is either borrowed for the duration of the
call or explicitly INCREF'd before it is stored (see the contracts in csrc/*.h).
"""
cimport cython
cimport numpy as cnp
from cpython.object cimport PyObject, PyTypeObject, visitproc, traverseproc, inquiry, destructor
from cpython.ref cimport Py_INCREF, Py_XINCREF, Py_DECREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.weakref cimport PyWeakref_NewRef
from cpython.contextvars cimport (PyContextVar_Set, PyContextVar_Reset, PyContext_Enter,
                                 PyContext_Exit)
from cpython.pystate cimport PyThreadState_GetDict
from cpython.dict cimport PyDict_GetItem
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock,
                               PyThread_release_lock, PyThread_get_thread_ident, WAIT_LOCK,
                               NOWAIT_LOCK)
from libc.stdint cimport uint64_t
from libc.string cimport memcpy
from numpy cimport PyUFuncGenericFunction, ufunc

from cgrad._csrc cimport *

import contextvars as _contextvars
import inspect
import math
import os
import sys
import threading
import weakref

import numpy as np

# cgrad/_warn.py imports nothing from cgrad, so it loads while cgrad/__init__ imports _C
from cgrad._warn import warn as _warn

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)
    object PyDataMem_GetHandler()
cnp.import_ufunc()

cdef extern from "Python.h":
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_Track(object o)
    void PyObject_GC_UnTrack(object o)
    Py_ssize_t Py_REFCNT(object o)
    void _xdecref "Py_XDECREF"(PyObject *o)
    PyObject *PyWeakref_GET_OBJECT(object ref)
    int _generic_setattr "PyObject_GenericSetAttr"(object o, object name, object v) except -1
    object _generic_get_dict "PyObject_GenericGetDict"(object o, void *context)
    int _generic_set_dict "PyObject_GenericSetDict"(object o, object v, void *context) except -1
    PyObject *_PyType_Lookup(PyTypeObject *t, PyObject *name)
    unsigned long PyType_GetFlags(PyTypeObject *t)
    unsigned long Py_TPFLAGS_HEAPTYPE

# --------------------------------------------------------------------------------------
# The module's code lives in include files next to this one, one concern each. `include` is
# textual: they compile into this one extension module (one C file, so no call between them
# crosses a module boundary and the fast paths keep their inlined C calls). Cython resolves
# cdef functions and classes module-wide, so a file may use one that a later file defines;
# module-level statements (globals, registrations, slot patches) run in the order below.
#   _C_module.pxi     what cgrad/__init__.py and cgrad.sparse register, grad mode, Note
#                     [Quiet floating point], helpers
#   _C_untracked.pxi  Note [Untracked graphs]: graph objects kept out of the cycle collector
#                     (tracking, the CLEAN registry, which nodes become CLEAN)
#   _C_tensor.pxi     TensorBase (the Tensor's layout), version counters, hook handles,
#                     Note [Binop slots]
#   _C_node.pxi       Node (a graph node, which is also a Function's ctx), AccumulateGrad,
#                     saved tensors and saved-tensor hooks, anomaly mode
#   _C_function.pxi   Function.apply, views (Note [Stale views], [View creation meta]), the
#                     wrapping of forward's outputs
#   _C_binop.pxi      the + - * / fast path: Note [Operator fast path], [Scalar cache],
#                     [Direct loops]
#   _C_engine.pxi     the engine callbacks (_cb_apply, accumulation) and _run_engine
include "_C_module.pxi"
include "_C_untracked.pxi"
include "_C_tensor.pxi"
include "_C_node.pxi"
include "_C_function.pxi"
include "_C_binop.pxi"
include "_C_engine.pxi"
