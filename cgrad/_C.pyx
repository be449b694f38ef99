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
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock,
                               PyThread_release_lock, PyThread_get_thread_ident, WAIT_LOCK,
                               NOWAIT_LOCK)
from libc.stdint cimport uint64_t
from libc.string cimport memcpy
from numpy cimport PyUFuncGenericFunction, ufunc

from cgrad._csrc cimport *

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

# A view's creation meta (TensorBase._cmeta): Note [View creation meta].
DEF CM_DEFAULT = 0
DEF CM_MULTI = 1
DEF CM_NO_GRAD = 2
DEF CM_CUSTOM = 3

# --------------------------------------------------------------------------------------
# Registered by cgrad/__init__.py (see _register): the Python pieces the engine calls.
cdef type _tensor_cls = None      # cgrad.Tensor
cdef object _sum_to = None        # sum_to(grad_tensor, shape) -> Tensor (differentiable)
cdef object _cast = None          # cast(grad_tensor, np.dtype) -> Tensor (differentiable)
cdef object _np_add = np.add
cdef object _np_zeros = np.zeros
cdef object _np_asarray = np.asarray
cdef object _ndarray = np.ndarray
cdef object _empty_tuple = ()

_SECOND_TIME = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


# sparse: the sparse COO tensor class (a Python subclass of Tensor whose _data is a
# zero-strided placeholder carrying shape and dtype) and its rules, registered by
# cgrad.sparse: _sparse_acc(cur, g, owned, create_graph) -> new .grad (cur may be None);
# _sparse_add(a, b, create_graph) -> a + b in either order (engine buffers, never in place);
# _sparse_alias(t) -> a new sparse tensor sharing t's storage (no history).
cdef object _sparse_cls = None
cdef object _sparse_acc = None
cdef object _sparse_add = None
cdef object _sparse_alias = None


def _register_sparse(cls, accumulate, add, alias):  # sparse:
    """Called once by cgrad.sparse."""
    global _sparse_cls, _sparse_acc, _sparse_add, _sparse_alias
    if not issubclass(cls, TensorBase):
        raise TypeError("sparse tensor class must subclass TensorBase")
    _sparse_cls = cls
    _sparse_acc = accumulate
    _sparse_add = add
    _sparse_alias = alias


def _register(tensor_cls, sum_to, cast):
    """Called once by cgrad/__init__.py."""
    global _tensor_cls, _sum_to, _cast
    if not issubclass(tensor_cls, TensorBase):
        raise TypeError("tensor class must subclass TensorBase")
    _tensor_cls = tensor_cls
    _fix_binop_slots(tensor_cls)
    _sum_to = sum_to
    _cast = cast


# --------------------------------------------------------------------------------------
# Grad mode (thread-local, in C)

def is_grad_enabled():
    """Return True if grad mode is currently enabled (thread-local)."""
    return bool(cg_grad_enabled())


def _set_grad_enabled(bint mode):
    """Set grad mode for this thread; returns the previous mode."""
    cdef bint prev = cg_grad_enabled()
    cg_set_grad_enabled(mode)
    return prev


# --------------------------------------------------------------------------------------
# Helpers

cdef inline object _as_array(object a):
    """Return `a` as an exact ndarray (NumPy returns scalars from 0-d arithmetic)."""
    if cnp.PyArray_CheckExact(a):
        return a
    if isinstance(a, _ndarray):
        return a.view(_ndarray)
    return _np_asarray(a)


# Note [Untracked graphs]: CPython's cycle collector walks every tracked object again and
# again as a program's live objects grow, and a graph of n nodes is n + (live tensors)
# objects: at 10^6 nodes the collector took half of the time of building a graph. So, like
# CPython's own tuples and dicts of atomic values, cgrad keeps out of the collector every
# object that cannot be on a reference cycle, and keeps the invariant that makes that safe:
#
#   An untracked Tensor or Node references only (a) untracked Tensors and Nodes, (b) values
#   that hold no references the program can change (numbers, strings, non-object arrays,
#   NumPy's own scalars and dtypes (not instances of subclasses: they can have an instance
#   dict or slots), tuples of these, version counters, weak references) and (c) classes
#   that a module holds (a node's class and Function). Every mutation that adds any other
#   reference to an untracked object first tracks all of them again (cg_reg_flush).
#
# Then a cycle through an untracked object could only consist of untracked objects, and those
# only reference older ones (a node its inputs' nodes, a tensor its grad_fn), so there is
# none; and nothing reachable from them can change without cgrad seeing it. Three kinds:
#   - ATOMIC: a Tensor holding nothing but its array (gradients, no-grad results, most
#     leaves). Untracked when made (_new_tensor), never registered.
#   - CLEAN: an untracked Tensor or Node that references other graph objects; entered in
#     the registry (csrc/cg_untracked.c) so that a flush can find it. A node becomes CLEAN at
#     the end of apply when everything it holds qualifies (_settle_node), its new outputs
#     with it (_adopt); a leaf whose .grad is ATOMIC or CLEAN becomes CLEAN (_hold).
#   - tracked: everything else, as usual (a node with hooks, a ctx holding a list or a
#     model, a saved-tensor hook's pack result, a view, a Parameter, a Function class defined
#     inside a function, ...), and everything after a flush.
# `_cref` marks a tensor that a CLEAN object holds (sticky): a mutation of a tensor without
# it cannot close a cycle through CLEAN objects, so it tracks only that tensor (_track);
# with it, it flushes. A CLEAN node never gains a reference without a flush (_touch: hooks,
# metadata, attributes, save_for_backward after forward). Instance dicts: writing into one
# bypasses __setattr__, so the dict of a custom Function's node or of a Tensor is handed
# out (`vars(x)`, `x.__dict__`, `x.__getstate__()`) only after the object is tracked (for a
# node: a flush), and a Tensor's __setattr__ tracks it before an attribute (not a data
# descriptor such as .grad) goes into its dict; `t._data` set to anything but an exact
# ndarray tracks t. Not covered: references added through gc.get_referents() or ctypes,
# and cycles through arrays of dtype object (NumPy arrays are not collectable at all).
# `_C._set_untracking(False)` turns CLEAN nodes off (tests compare both).
cdef bint _untracking = True


def _set_untracking(bint on):
    """Enable or disable Note [Untracked graphs] for nodes made from now on; returns the
    previous setting. Disabling also tracks every registered object."""
    global _untracking
    prev = _untracking
    _untracking = on
    if not on:
        cg_reg_flush()
    return prev


def _untracked_count(bint capacity=False):
    """Number of CLEAN objects (Note [Untracked graphs]), or the registry's allocated
    entries; for tests."""
    return cg_reg_capacity() if capacity else cg_reg_count()


cdef extern from *:
    """
    /* type->tp_new(type, args, NULL) without tp_new_wrapper's checks; for types already
     * checked to derive from the extension type whose tp_new they inherit. NEW reference. */
    static PyObject *cg_tp_new(PyObject *type, PyObject *args) {
        return ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, args, NULL);
    }
    /* base->tp_new(type, args, NULL): a `type` instance made by its base's tp_new, skipping a
     * __new__ that `type` defines in Python. NEW reference. */
    static PyObject *cg_base_tp_new(PyObject *base, PyObject *type, PyObject *args) {
        return ((PyTypeObject *)base)->tp_new((PyTypeObject *)type, args, NULL);
    }
    """
    object cg_tp_new(object type, object args)
    object cg_base_tp_new(object base, object type, object args)


# Note [Direct tp_new]: `TensorBase.__new__(cls)` with a class known only at run time
# compiles to a Python method call (look up __new__, tp_new_wrapper's subtype checks, an
# argument tuple): ~0.1 us per tensor. The Tensor class and every node class are checked to
# derive from TensorBase / Node when registered, so their tp_new is called directly. For
# Tensor that is TensorBase's tp_new: cgrad.Tensor defines __new__ in Python (torch's legacy
# constructor, Note [Legacy constructors] in cgrad/_legacy.py), which its own tp_new slot
# would call; every tensor cgrad makes skips it.
cdef inline TensorBase _new_tensor(object arr):
    """A fresh leaf Tensor around `arr` (which must already be an exact ndarray)."""
    cdef TensorBase t = <TensorBase>cg_base_tp_new(TensorBase, _tensor_cls, _empty_tuple)
    t._data = arr
    PyObject_GC_UnTrack(t)
    return t


cdef inline void _track(TensorBase t) noexcept:
    """t is about to hold a reference that may close a cycle: see Note [Untracked graphs]."""
    if PyObject_GC_IsTracked(t):
        return
    if t._cref:
        cg_reg_flush()
        if PyObject_GC_IsTracked(t):
            return
    elif t._reg:
        cg_reg_remove(&t._reg)
    PyObject_GC_Track(t)


cdef inline bint _enter(TensorBase t) noexcept:
    """Make the untracked tensor t CLEAN (registered); False if it cannot be (not an exact
    cgrad.Tensor, or the registry cannot grow)."""
    return type(t) is _tensor_cls and (t._reg != 0 or cg_reg_add(<PyObject *>t, &t._reg) == 0)


cdef inline bint _enter_node(Node n) noexcept:
    """Make the tracked node n CLEAN: register, then untrack; False if the registry cannot
    grow (n stays tracked)."""
    if cg_reg_add(<PyObject *>n, &n._reg) < 0:
        return False
    PyObject_GC_UnTrack(n)
    return True


cdef inline void _hold(TensorBase t, object r) noexcept:
    """t is about to hold r (its .grad): stay untracked if r is an untracked Tensor and that
    cannot close a cycle (Note [Untracked graphs])."""
    cdef TensorBase rt
    if PyObject_GC_IsTracked(t):
        return
    if r is not t and type(r) is _tensor_cls and not PyObject_GC_IsTracked(r):
        rt = <TensorBase>r
        # t may hold a CLEAN r only if no CLEAN object holds t (else r might lead back to t)
        if (rt._reg == 0 or not t._cref) and _enter(t):
            rt._cref = True
            return
    _track(t)


cdef inline void _adopt(TensorBase t, Node ctx) noexcept:
    """t's grad_fn was just set to ctx, whose fate _settle_node has decided."""
    if PyObject_GC_IsTracked(t):
        return
    if not t._cref and not PyObject_GC_IsTracked(ctx) and _enter(t):
        return
    _track(t)


cdef inline void _touch(Node n) noexcept:
    """n is about to hold a reference that may close a cycle (Note [Untracked graphs])."""
    if not PyObject_GC_IsTracked(n):
        cg_reg_flush()


cdef inline bint _data_descriptor(type tp, object name) noexcept:
    """Is `name` a data descriptor of tp (a setattr that does not write the instance dict)?"""
    if type(name) is not str:
        return False
    cdef PyObject *d = _PyType_Lookup(<PyTypeObject *>tp, <PyObject *>name)
    return d != NULL and (<PyTypeObject *>d.ob_type).tp_descr_set != NULL


def _tensor_dict_get(TensorBase self not None):
    """`t.__dict__` of a cgrad.Tensor: its attributes, handed out only once the tensor is
    tracked (Note [Untracked graphs]: what the program holds can change unseen)."""
    _track(self)
    return _generic_get_dict(self, NULL)


def _tensor_dict_set(TensorBase self not None, value):
    _track(self)
    _generic_set_dict(self, value, NULL)


_tensor_dict = property(_tensor_dict_get, _tensor_dict_set, doc="The tensor's attributes.")


def _attrs_copy(obj):
    """A copy of obj's instance dict, or None when it has none or an empty one; the dict
    itself is not handed out (pickle and copy of tensors, Note [Untracked graphs])."""
    if not cg_has_dict(obj):
        return None
    d = _generic_get_dict(obj, NULL)
    return dict(d) if d else None


def _node_dict_get(Node self not None):
    """`ctx.__dict__` of a custom Function's node: the instance dict, handed out only after
    a flush (Note [Untracked graphs]: what the program holds can change unseen)."""
    _touch(self)
    self._attrs = True
    return _generic_get_dict(self, NULL)


def _node_dict_set(Node self not None, value):
    _touch(self)
    self._attrs = True
    _generic_set_dict(self, value, NULL)


# the `__dict__` of custom Functions' node classes (Function.__init_subclass__)
_node_dict = property(_node_dict_get, _node_dict_set, doc="The node's instance dict.")


def _wrap(arr):
    """Wrap an array (or array-like) into a leaf Tensor without copying."""
    return _new_tensor(_as_array(arr))


cdef inline bint _is_float(object arr):
    cdef int t = cnp.PyArray_TYPE(<cnp.ndarray>arr)
    return cnp.PyTypeNum_ISFLOAT(t) or cnp.PyTypeNum_ISCOMPLEX(t)


_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
    "uint8": "ByteTensor", "bool": "BoolTensor", "complex64": "ComplexFloatTensor",
    "complex128": "ComplexDoubleTensor",
}


def _type_name(arr):
    return "cgrad." + _TYPE_NAMES.get(str(arr.dtype), "Tensor")


cdef str _obj_type(object o):
    """torch's name for the type of an argument in messages ('list', 'numpy.ndarray')."""
    tp = type(o)
    mod = tp.__module__ or ""
    if mod == "builtins":
        return tp.__name__
    if mod.startswith("numpy"):
        return "numpy." + tp.__name__
    return tp.__name__


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


@cython.final
cdef class _VersionCounter:
    """Shared by a tensor, its views and its detach()es; bumped by in-place ops."""


cdef Py_ssize_t _next_handle_id = 0


cdef class RemovableHandle:
    """Handle returned by hook registration; ``remove()`` unregisters the hook."""
    cdef object _hooks
    cdef public object id

    def __init__(self, dict hooks):
        global _next_handle_id
        self._hooks = hooks
        self.id = _next_handle_id
        _next_handle_id += 1

    def remove(self):
        (<dict>self._hooks).pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.remove()


# --------------------------------------------------------------------------------------
# Tensor layout

@cython.trashcan(True)
@cython.c_api_binop_methods(True)
cdef class TensorBase:
    """The C layout of cgrad.Tensor; methods with maths live in cgrad/tensor.py."""

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "cgrad.Tensor cannot be constructed directly; use cgrad.tensor(data), "
            "cgrad.as_tensor or cgrad.from_numpy")

    # Note [Untracked graphs]: attributes. cgrad.Tensor has an instance dict (t.foo = 1, as
    # torch allows); a tensor attribute can close a cycle, so an untracked tensor is tracked
    # before anything is written into its dict: by setattr here (a data descriptor such as
    # .grad or ._data checks its own value), through `__dict__` (_tensor_dict) or through
    # __getstate__ (which hands out the dict itself).
    def __setattr__(self, name, value):
        if not PyObject_GC_IsTracked(self) and not _data_descriptor(type(self), name):
            _track(self)
        _generic_setattr(self, name, value)

    def __getstate__(self):
        _track(self)
        return object.__getstate__(self)

    @property
    def _data(self):
        """The ndarray (an exact np.ndarray for dense tensors)."""
        return self._data

    @_data.setter
    def _data(self, value):
        if type(value) is not _ndarray:
            _track(self)        # Note [Untracked graphs]: anything else may hold references
        self._data = value

    # -- autograd metadata -----------------------------------------------------------
    @property
    def requires_grad(self):
        """True if gradients need to be computed for this Tensor."""
        if (not self._requires_grad and self._base_t is not None
                and self._vc.version != self._view_ver):
            # a stale view (Note [Stale views]) requires grad when its base does, as torch
            return (<TensorBase>self._base_t)._requires_grad
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value is not True and value is not False:
            raise RuntimeError("requires_grad must be a bool")
        if self._grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach().")
        if value and not _is_float(self._data):
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients")
        self._set_requires_grad(value)

    cdef _set_requires_grad(self, bint value):
        if self._grad_fn is not None:
            if not value:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return
        if value and not _is_float(self._data):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place (leaves only) and return self."""
        self._set_requires_grad(bool(requires_grad))
        return self

    @property
    def grad_fn(self):
        """The graph node that produced this Tensor, or None for a leaf."""
        if self._base_t is not None and self._vc.version != self._view_ver:
            _regen_view(self)
        return self._grad_fn

    def _sync_view_version(self):
        """Internal: the view's grad_fn is current (after an in-place op rebased it)."""
        if self._vc is not None:
            self._view_ver = self._vc.version

    @property
    def is_leaf(self):
        """True for tensors not produced by a differentiable op (grad_fn is None)."""
        if self._base_t is not None and self._vc.version != self._view_ver:
            _regen_view(self)           # as grad_fn (torch's is_leaf reads grad_fn)
        return self._grad_fn is None

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def _base(self):
        """The tensor whose storage this view shares (views made by ops), or None."""
        return self._base_t

    def _is_view(self):
        return self._base_t is not None

    @property
    def _version(self):
        return self._vc.version if self._vc is not None else 0

    cdef _VersionCounter _get_vc(self):
        if self._vc is None:
            self._vc = _VersionCounter.__new__(_VersionCounter)
        return self._vc

    def _bump_version(self):
        """Record an in-place modification (invalidates earlier saves of this tensor)."""
        _bump(self)

    def _share_version(self, TensorBase other not None):
        """Make self share other's version counter (views, detach)."""
        self._vc = other._get_vc()

    @property
    def grad(self):
        """Accumulated gradient (leaves and tensors with retain_grad()), or None."""
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            _warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.",
                UserWarning)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
            return
        if not isinstance(value, TensorBase):
            raise TypeError(
                f"assigned grad expected to be a Tensor or None but got grad of type "
                f"{type(value).__name__}")
        if value is self:
            raise RuntimeError("can't assign Variable as its own grad")
        arr = (<TensorBase>value)._data
        if arr.dtype != self._data.dtype:
            raise RuntimeError(
                f"attempting to assign a gradient with dtype '{arr.dtype}' to a tensor with "
                f"dtype '{self._data.dtype}'. Please ensure that the gradient and the tensor "
                f"have the same dtype")
        if arr.shape != self._data.shape:
            raise RuntimeError(
                f"attempting to assign a gradient of size '{_shape_str(arr.shape)}' to a "
                f"tensor of size '{_shape_str(self._data.shape)}'. Please ensure that the "
                f"gradient and the tensor are the same size")
        _hold(self, value)          # Note [Untracked graphs]
        self._grad = value

    @property
    def retains_grad(self):
        return self._retains_grad and self._grad_fn is not None

    def retain_grad(self):
        """Populate .grad for this non-leaf tensor during backward."""
        _refresh(self)
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None:
            return
        if self._retains_grad:
            return
        x = self._grad_fn._extra()
        if x.retain is None:
            x.retain = {}
        x.retain[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def register_hook(self, hook):
        """Register a hook called with the gradient of this tensor; it may return a new one."""
        _refresh(self)
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        cdef dict hooks
        if self._grad_fn is None:
            if self._hooks is None:
                _track(self)
                self._hooks = {}
            hooks = self._hooks
        else:
            _touch(self._grad_fn)
            x = self._grad_fn._extra()
            if x.tensor_pre is None:
                x.tensor_pre = {}
            hooks = x.tensor_pre.get(self._output_nr)
            if hooks is None:
                hooks = {}
                x.tensor_pre[self._output_nr] = hooks
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook):
        """Register hook(param) run after .grad of this leaf has been updated."""
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._post_acc_hooks is None:
            _track(self)
            self._post_acc_hooks = {}
        handle = RemovableHandle(self._post_acc_hooks)
        self._post_acc_hooks[handle.id] = hook
        return handle

    # -- data ------------------------------------------------------------------------
    @property
    def data(self):
        """A detached Tensor sharing this tensor's storage (not its version counter)."""
        return _new_tensor(self._data)

    @data.setter
    def data(self, value):
        if not isinstance(value, TensorBase):
            raise TypeError(f"Variable data has to be a tensor, but got {_obj_type(value)}")
        if self._requires_grad and not _is_float((<TensorBase>value)._data):
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        self._data = (<TensorBase>value)._data
        if self._accum_ref is not None:
            acc = <object>PyWeakref_GET_OBJECT(self._accum_ref)
            if acc is not None:
                _set_meta(&(<Node>acc).c, 0, self._data)

    def detach(self):
        """A new leaf sharing storage and the version counter, with requires_grad=False."""
        cdef TensorBase t = _new_tensor(self._data)
        t._vc = self._get_vc()
        return t

    def detach_(self):
        """Detach in place: the tensor becomes a leaf that does not require grad."""
        if self._base_t is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        self._retains_grad = False
        return self

    def numpy(self, *, force=False):
        """The underlying ndarray (shared memory). Error if the tensor requires grad."""
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        a = self._data
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    @property
    def ndim(self):
        return cnp.PyArray_NDIM(<cnp.ndarray>self._data)

    def dim(self):
        return cnp.PyArray_NDIM(<cnp.ndarray>self._data)

    @property
    def dtype(self):
        return self._data.dtype

    def numel(self):
        return cnp.PyArray_SIZE(<cnp.ndarray>self._data)

    # -- hot operators, dispatched in C to the op table registered by cgrad.ops --------
    # Note [Binop slots]: with c_api_binop_methods the number slots are plain C functions
    # called with the operands in source order (either may be the Tensor), so CPython
    # exposes them as wrapper descriptors and every Python subclass (cgrad.Tensor,
    # nn.Parameter, user subclasses) inherits the C slot itself. Without it, `__mul__` is
    # a method object and each subclass gets CPython's generic slot_nb_multiply, which looks
    # `__mul__` up by name and builds a bound method on every `a * b` (~0.1 us).
    def __add__(a, b):
        if isinstance(a, TensorBase):
            return _binop(0, a, b, False)
        return _binop(0, b, a, True)

    def __sub__(a, b):
        if isinstance(a, TensorBase):
            return _binop(1, a, b, False)
        return _binop(1, b, a, True)

    def __mul__(a, b):
        if isinstance(a, TensorBase):
            return _binop(2, a, b, False)
        return _binop(2, b, a, True)

    def __truediv__(a, b):
        if isinstance(a, TensorBase):
            return _binop(3, a, b, False)
        return _binop(3, b, a, True)

    def __pow__(a, b, mod):
        if isinstance(a, TensorBase):
            return _binop(4, a, b, False)
        return _binop(4, b, a, True)

    def __neg__(self):
        return _apply(_neg_info, (self,))

    def _accumulator(self):
        """The AccumulateGrad node of this leaf (created on demand), or None."""
        if self._grad_fn is not None or not self._requires_grad:
            return None
        return _get_accumulator(self)

    def _set_grad_fn(self, node, Py_ssize_t output_nr=0):
        """Internal: rebase this tensor's history onto `node` (in-place ops, mark_dirty)."""
        cdef Py_ssize_t n_out
        if node is not None:
            # the engine indexes the node's gradient buffers by output_nr: never let an
            # out-of-range number reach it
            n_out = (<Node?>node).c.n_outputs
            if not 0 <= output_nr < (n_out if n_out > 1 else 1):
                raise IndexError(f"output_nr {output_nr} out of range for a node with "
                                 f"{n_out} output(s)")
        cdef bint retain = _drop_retain(self)
        _track(self)
        self._grad_fn = <Node?>node
        self._output_nr = output_nr
        self._requires_grad = node is not None
        self._retains_grad = False
        if retain and node is not None:
            self.retain_grad()          # as torch, retain_grad follows the new history


cdef bint _drop_retain(TensorBase t) except -1:
    """Unregister t's retain_grad from its current node; True if it retained its grad. An
    in-place op moves retain_grad to the tensor's new history (torch: .grad is then the
    gradient of the modified tensor); tensor hooks stay with the old one."""
    if not t._retains_grad or t._grad_fn is None:
        return False
    x = t._grad_fn._x
    if x is not None and x.retain is not None:
        ref = x.retain.get(t._output_nr)
        if ref is not None and ref() is t:
            del x.retain[t._output_nr]
            if not x.retain:
                x.retain = None
    t._retains_grad = False
    return True


# Note [Untracked graphs]: a registered tensor leaves the registry when it is freed. Done in a
# tp_dealloc wrapper rather than __dealloc__, which Cython surrounds with an error-state
# save and restore (~40 instructions for every tensor freed). The field is found by its
# offset: the wrapper must not make a Python reference to an object being freed.
cdef extern from "Python.h":
    ctypedef void (*c_destructor "destructor")(PyObject *) noexcept

cdef c_destructor _tensor_base_dealloc = <c_destructor>(<PyTypeObject *>TensorBase).tp_dealloc
cdef Py_ssize_t _tensor_reg_offset


cdef void _tensor_dealloc(PyObject *o) noexcept:
    cdef Py_ssize_t *slot = <Py_ssize_t *>(<char *>o + _tensor_reg_offset)
    if slot[0]:
        cg_reg_remove(slot)
    _tensor_base_dealloc(o)


cdef void _install_tensor_dealloc() except *:
    global _tensor_reg_offset
    cdef TensorBase probe = TensorBase.__new__(TensorBase)
    _tensor_reg_offset = <char *>&probe._reg - <char *><PyObject *>probe
    (<PyTypeObject *>TensorBase).tp_dealloc = <destructor>_tensor_dealloc


_install_tensor_dealloc()


# See Note [Binop slots]. CPython gives a Python subclass its generic slot (look the name up,
# bind, call) whenever the name resolves to a method object, and Cython stores `__add__`
# etc. as METH_COEXIST methods; so each new subclass gets the C slots back here, for every
# slot whose names it does not override.
cdef extern from *:
    """
    static void cg_copy_binop_slot(PyTypeObject *sub, PyTypeObject *base, int which) {
        PyNumberMethods *d = sub->tp_as_number, *s = base->tp_as_number;
        if (d == NULL || s == NULL) return;
        switch (which) {
        case 0: d->nb_add = s->nb_add; break;
        case 1: d->nb_subtract = s->nb_subtract; break;
        case 2: d->nb_multiply = s->nb_multiply; break;
        case 3: d->nb_true_divide = s->nb_true_divide; break;
        case 4: d->nb_power = s->nb_power; break;
        }
    }
    """
    void cg_copy_binop_slot(PyTypeObject *sub, PyTypeObject *base, int which)

cdef tuple _BINOP_SLOT_NAMES = (("__add__", "__radd__"), ("__sub__", "__rsub__"),
                                ("__mul__", "__rmul__"), ("__truediv__", "__rtruediv__"),
                                ("__pow__", "__rpow__"))


def _fix_binop_slots(type cls):
    """Called for cgrad.Tensor and by Tensor.__init_subclass__ for every subclass."""
    cdef int i
    if not issubclass(cls, TensorBase):
        raise TypeError("not a TensorBase subclass")
    base_dict = TensorBase.__dict__
    for i in range(5):
        if all(getattr(cls, name, None) is base_dict[name] for name in _BINOP_SLOT_NAMES[i]):
            cg_copy_binop_slot(<PyTypeObject *>cls, <PyTypeObject *>TensorBase, i)


cdef inline void _bump(TensorBase t) except *:
    cdef _VersionCounter vc = t._get_vc()
    vc.version += 1


cdef inline int _set_meta(cg_node_t *c, Py_ssize_t i, object arr) except -1:
    cdef cnp.ndarray a = <cnp.ndarray>arr
    return cg_node_set_meta(c, i, cnp.PyArray_NDIM(a), <Py_ssize_t *>cnp.PyArray_DIMS(a),
                            <PyObject *>cnp.PyArray_DESCR(a))


cdef AccumulateGrad _get_accumulator(TensorBase t):
    cdef AccumulateGrad acc
    if t._accum_ref is not None:
        obj = <object>PyWeakref_GET_OBJECT(t._accum_ref)
        if obj is not None:
            return <AccumulateGrad>obj
    acc = AccumulateGrad.__new__(AccumulateGrad)
    acc.c.kind = CG_NODE_ACCUMULATE
    acc._variable = t
    cg_node_alloc_outputs(&acc.c, 1)
    _set_meta(&acc.c, 0, t._data)
    t._accum_ref = PyWeakref_NewRef(acc, None)
    # Note [Untracked graphs]: an accumulator holds only its leaf
    if (_untracking and type(t) is _tensor_cls and not PyObject_GC_IsTracked(t)
            and _enter_node(acc)):
        t._cref = True
    return acc


# --------------------------------------------------------------------------------------
# Graph nodes

@cython.final
@cython.no_gc
cdef class _SavedOutput:
    """A saved output of the node that saved it, stored without the Tensor object so that
    the node does not keep its own output alive (no reference cycle)."""
    cdef object data
    cdef Py_ssize_t output_nr
    cdef _VersionCounter vc


cdef class _PackedSaved:
    """A tensor saved while saved_tensors_hooks were active: the pack hook's result and the
    unpack hook to call in backward (see cgrad/autograd/graph.py)."""
    cdef object packed
    cdef object unpack
    cdef _VersionCounter vc


# Saved-tensor hooks (thread-local, as torch's default hooks). The C counter
# cg_saved_hooks_depth() is the only thing _save reads when no hooks are active.
_hooks_tls = threading.local()


def _hooks_stack():
    st = getattr(_hooks_tls, "stack", None)
    if st is None:
        st = _hooks_tls.stack = []
    return st


def _push_saved_hooks(pack, unpack):
    msg = getattr(_hooks_tls, "disabled", None)
    if msg is not None:
        raise RuntimeError(msg)
    st = _hooks_stack()
    st.append((pack, unpack))
    cg_set_saved_hooks_depth(len(st))


def _pop_saved_hooks():
    st = _hooks_stack()
    st.pop()
    cg_set_saved_hooks_depth(len(st))


def _set_hooks_disabled(msg):
    """Set (or clear, with None) the message raised when hooks are registered; returns the
    previous one."""
    prev = getattr(_hooks_tls, "disabled", None)
    _hooks_tls.disabled = msg
    return prev


def _current_saved_hooks():
    st = _hooks_stack()
    return st[len(st) - 1] if st else None


cdef object _pack_saved(object obj):
    cdef _PackedSaved p
    cdef TensorBase t = <TensorBase>obj
    st = _hooks_stack()
    pack, unpack = st[len(st) - 1]
    p = _PackedSaved.__new__(_PackedSaved)
    p.vc = t._get_vc()
    p.unpack = unpack
    p.packed = pack(obj)
    return p


# Anomaly mode (process-wide, as torch's): see cgrad/autograd/anomaly_mode.py.
cdef bint _anomaly_on = False
cdef bint _anomaly_nan = True


def _set_anomaly(bint mode, bint check_nan=True):
    global _anomaly_on, _anomaly_nan
    _anomaly_on = mode
    _anomaly_nan = check_nan


def _anomaly_state():
    return (_anomaly_on, _anomaly_nan)


cdef void _anomaly_record(Node ctx) except *:
    """Keep the forward call's stack on the node (torch's metadata["traceback_"])."""
    import traceback
    tb = traceback.format_stack()
    del tb[len(tb) - 1]
    ctx.metadata["traceback_"] = tb


cdef void _anomaly_report(Node node) except *:
    md = node._x.metadata if node._x is not None else None
    tb = md.get("traceback_") if md is not None else None
    name = type(node).__name__
    if tb is None:
        _warn(f"Error detected in {name}. No forward pass information available. "
              "Enable detect anomaly during forward pass for more information.")
    else:
        _warn(f"Error detected in {name}. Traceback of forward call that caused the "
              "error:\n" + "".join(tb))


cdef void _anomaly_check_nan(Node node, tuple res) except *:
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(res)):
        r = <object>PyTuple_GET_ITEM(res, i)
        if isinstance(r, TensorBase) and _is_float((<TensorBase>r)._data) and \
                np.isnan((<TensorBase>r)._data).any():
            raise RuntimeError(
                f"Function '{type(node).__name__}' returned nan values in its {i}th output.")


@cython.trashcan(True)
cdef class _NodeExtra:
    pass    # fields in _C.pxd (Note [Compact node])


cdef class Node:
    """A backward graph node. For a custom Function it is also the ``ctx``."""

    def __cinit__(self):
        cg_node_init(&self.c, <PyObject *>self, CG_NODE_FUNCTION, cg_next_seq())
        self._materialize = True

    def __dealloc__(self):
        if self._reg:
            cg_reg_remove(&self._reg)
        cg_node_clear(&self.c)

    def __setattr__(self, name, value):
        _touch(self)                  # Note [Untracked graphs]
        self._attrs = True
        _generic_setattr(self, name, value)

    # Note [Untracked graphs]: the instance dict must not reach the program unseen: a write
    # into it (vars(ctx)[k] = v, ctx.__dict__.update(...)) would bypass __setattr__. The
    # node classes of custom Functions get `__dict__` as a property that flushes first
    # (_node_dict, installed by Function.__init_subclass__); object.__getstate__ returns
    # the dict too.
    def __getstate__(self):
        _touch(self)
        return object.__getstate__(self)

    cdef _NodeExtra _extra(self):
        if self._x is None:
            self._x = _NodeExtra.__new__(_NodeExtra)
        return self._x

    def name(self):
        """The node's class name, e.g. 'MulBackward0'."""
        return type(self).__name__

    def _sequence_nr(self):
        return self.c.seq_nr

    @property
    def next_functions(self):
        """One (node or None, input_nr) pair per tensor input of the forward op."""
        cdef Py_ssize_t i
        cdef cg_node_t *t
        out = []
        for i in range(self.c.n_edges):
            t = self.c.edges[i].node
            if t == NULL:
                out.append((None, 0))
            else:
                out.append((<object>t.self, self.c.edges[i].input_nr))
        return tuple(out)

    @property
    def metadata(self):
        _touch(self)
        x = self._extra()
        if x.metadata is None:
            x.metadata = {}
        return x.metadata

    # -- ctx API -------------------------------------------------------------------------
    def save_for_backward(self, *tensors):
        """Save the given tensors for a future call to backward.

        Call it at most once, in ``forward`` (or ``setup_context``), and only with tensors
        (inputs, outputs or intermediates) or None; backward reads them back through
        ``ctx.saved_tensors``. Saving the tensors (rather than storing them on ctx) lets
        autograd free them after backward unless ``retain_graph=True``, and check that none
        was modified in place since (torch's "modified by an inplace operation" error).

        Args:
            *tensors (Tensor or None): the tensors to save.
        """
        _save(self, tensors)

    @property
    def saved_tensors(self):
        """The tuple of tensors given to ``save_for_backward`` (for ``backward``).

        Raises RuntimeError if they were freed by a backward without retain_graph=True, or
        if one of them was modified in place after it was saved."""
        return self._unpack_saved()

    cdef tuple _unpack_saved(self):
        cdef Py_ssize_t i, n, cur, expected
        cdef TensorBase t
        cdef _SavedOutput so
        if self._released:
            raise RuntimeError(_SECOND_TIME)
        if not self._has_saved:
            return ()
        saved = <tuple>self._saved
        n = len(saved)
        vers = self._x.saved_vers if self._x is not None else None
        result = PyTuple_New(n)
        for i in range(n):
            obj = saved[i]
            expected = 0 if vers is None else vers[i]
            if type(obj) is _SavedOutput:
                so = <_SavedOutput>obj
                cur = so.vc.version if so.vc is not None else 0
                t = _new_tensor(so.data)
                t._vc = so.vc
                t._grad_fn = self
                t._output_nr = so.output_nr
                t._requires_grad = True
                _adopt(t, self)                 # Note [Untracked graphs]
                if cur != expected:
                    _raise_version_error(t, cur, expected)
                obj = t
            elif type(obj) is _PackedSaved:
                pk = <_PackedSaved>obj
                obj = pk.unpack(pk.packed)
                if not isinstance(obj, TensorBase):
                    raise TypeError(
                        "Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(obj).__name__}")
                cur = pk.vc.version
                if cur != expected:
                    _raise_version_error(<TensorBase>obj, cur, expected)
            elif obj is not None:
                t = <TensorBase>obj
                cur = t._vc.version if t._vc is not None else 0
                if cur != expected:
                    _raise_version_error(t, cur, expected)
            Py_INCREF(obj)
            PyTuple_SET_ITEM(result, i, obj)
        return result

    def _release(self):
        """Free saved tensors (called by the engine after backward unless retain_graph)."""
        if self._has_saved:
            _release_saved(self)

    @property
    def needs_input_grad(self):
        """A tuple of bools, one per argument of ``forward``: whether the gradient of that
        argument is needed (backward may skip computing the others and return None)."""
        if cg_needs_node == <PyObject *>self and cg_needs_value != NULL:
            return <object>cg_needs_value           # Note [Exact needs_input_grad]
        if self._needs is None:
            self._needs = _compute_needs(self)
        return self._needs

    def mark_non_differentiable(self, *outputs):
        """Mark outputs of ``forward`` as not differentiable (for example indices).

        Call it at most once, in ``forward``, with output tensors; they get
        ``requires_grad=False`` and backward receives a zero gradient for each of them.

        Args:
            *outputs (Tensor): outputs of forward.
        """
        for o in outputs:
            if not isinstance(o, TensorBase):
                raise RuntimeError("mark_non_differentiable only accepts variable arguments, "
                                   f"but got {_obj_type(o)}")
        _touch(self)
        x = self._extra()
        if x.non_diff is None:
            x.non_diff = []
        x.non_diff.extend(outputs)

    def set_materialize_grads(self, value):
        """Set whether to materialize gradients of the outputs (default True).

        With True, the gradient of an output that got none arrives in ``backward`` as a zero
        tensor of the output's shape; with False it arrives as None.

        Args:
            value (bool): whether to materialize output grad tensors.
        """
        if value is not True and value is not False:
            raise TypeError("set_materialize_grads(): argument 'value' must be bool, not "
                            f"{_obj_type(value)}")
        self._materialize = value

    def mark_dirty(self, *tensors):
        """Mark input tensors as modified in place by ``forward``.

        Call it at most once, in ``forward``, with every input modified in place; each of
        them must also be returned by forward (autograd then rebases its history on this
        node and checks that saved versions of it are not used stale).

        Args:
            *tensors (Tensor): the inputs forward modified in place.
        """
        for i, t in enumerate(tensors):
            if not isinstance(t, TensorBase):
                raise RuntimeError(f"mark_dirty can only accept variables, but argument {i} "
                                   f"is of type {_obj_type(t)}")
        _touch(self)
        x = self._extra()
        if x.dirty is None:
            x.dirty = []
        x.dirty.extend(tensors)

    def mark_shared_storage(self, *pairs):
        _warn(
            "mark_shared_storage is deprecated. Tensors with shared storages are automatically "
            "tracked. Note that calls to `set_()` are not tracked", FutureWarning)

    def save_for_forward(self, *tensors):
        _touch(self)
        self._extra().saved_fwd = tensors

    # -- node hooks ------------------------------------------------------------------------
    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> None or new grad_inputs, after backward."""
        _touch(self)
        x = self._extra()
        if x.post_hooks is None:
            x.post_hooks = {}
        h = RemovableHandle(x.post_hooks)
        x.post_hooks[h.id] = fn
        return h

    def register_prehook(self, fn):
        """fn(grad_outputs) -> None or new grad_outputs, before backward."""
        _touch(self)
        x = self._extra()
        if x.pre_hooks is None:
            x.pre_hooks = {}
        h = RemovableHandle(x.pre_hooks)
        x.pre_hooks[h.id] = fn
        return h

    def __call__(self, *grads):
        """Call the node's backward directly (as torch's grad_fn(grad) does)."""
        fn = self._fn
        if fn is None:
            raise RuntimeError("this node has no backward to call")
        if self._released and (<_FnInfo>fn).builtin:
            raise RuntimeError(_SECOND_TIME)    # Note [Freed saved values]
        return cg_call_prepend(_backward_of(fn), self, grads)


cdef inline void _release_saved(Node node) noexcept:
    node._saved = None     # may run deallocators; nothing here can fail
    if node._x is not None:
        node._x.saved_vers = None
    node._released = True


cdef int _save(Node ctx, tuple tensors) except -1:
    """save_for_backward: keep the tensors and the versions they have now."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(tensors)
    cdef TensorBase t
    vers = None
    for i in range(n):
        obj = <object>PyTuple_GET_ITEM(tensors, i)
        if isinstance(obj, TensorBase):
            t = <TensorBase>obj
            if t._vc is not None and t._vc.version != 0:
                if vers is None:
                    vers = [0] * n
                vers[i] = t._vc.version
        elif obj is not None:
            raise TypeError(
                "save_for_backward can only save variables, but argument "
                f"{i} is of type {type(obj).__name__}")
    # Note [Saved tuple]: the node owns a private copy of the tuple, kept out of the cycle
    # collector; _node_traverse visits its items directly, so cycles through saved tensors
    # are still found, with one tracked object less per node.
    cdef bint hooks = cg_saved_hooks_depth() > 0
    _touch(ctx)
    saved = PyTuple_New(n)
    for i in range(n):
        obj = <object>PyTuple_GET_ITEM(tensors, i)
        if hooks and obj is not None:
            obj = _pack_saved(obj)
        Py_INCREF(obj)
        PyTuple_SET_ITEM(saved, i, obj)
    PyObject_GC_UnTrack(saved)
    ctx._saved = saved
    if vers is not None:
        ctx._extra().saved_vers = vers
    elif ctx._x is not None:
        ctx._x.saved_vers = None
    ctx._has_saved = True
    ctx._released = False
    return 0


cdef tuple _compute_needs(Node node):
    """needs_input_grad: from the forward arguments while forward runs, else from the edges."""
    cdef Py_ssize_t i, e
    if node._args is not None:
        return tuple([isinstance(a, TensorBase) and (<TensorBase>a)._requires_grad
                      for a in <tuple>node._args])
    needs = [False] * node._n_args
    for e in range(node.c.n_edges):
        if node.c.edges[e].node != NULL:
            i = e if node._arg_pos is None else node._arg_pos[e]
            needs[i] = True
    return tuple(needs)


cdef void _raise_version_error(TensorBase t, Py_ssize_t cur, Py_ssize_t expected) except *:
    desc = f"[{_type_name(t._data)} {_shape_str(t._data.shape)}]"
    if t._grad_fn is not None:
        name = type(t._grad_fn).__name__
        for suffix in ("Backward0", "Backward1", "Backward"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        desc += f", which is output {t._output_nr} of {name},"
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: {desc} is at version {cur}; expected version {expected} "
        "instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with cgrad.autograd.set_detect_anomaly(True, check_nan=False).")


cdef class AccumulateGrad(Node):
    """The node that accumulates a leaf's gradient into ``leaf.grad``."""

    @property
    def variable(self):
        return self._variable

    def name(self):
        return "torch::autograd::AccumulateGrad".replace("torch", "cgrad")

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


# Keep Node's edges visible to the cycle collector, and let it break cycles through them.
cdef extern from "Python.h":
    ctypedef int (*c_traverseproc "traverseproc")(PyObject *, visitproc, void *) noexcept
    ctypedef int (*c_inquiry "inquiry")(PyObject *) noexcept

cdef c_traverseproc _node_base_traverse = <c_traverseproc>(<PyTypeObject *>Node).tp_traverse
cdef c_inquiry _node_base_clear = <c_inquiry>(<PyTypeObject *>Node).tp_clear

cdef int _node_traverse(PyObject *o, visitproc visit, void *arg) noexcept:
    cdef int r = 0
    cdef Py_ssize_t i
    cdef PyObject *item
    if _node_base_traverse != NULL:
        r = _node_base_traverse(o, visit, arg)
        if r:
            return r
    saved = (<Node><object>o)._saved
    if type(saved) is tuple:        # see Note [Saved tuple]
        for i in range(PyTuple_GET_SIZE(saved)):
            item = PyTuple_GET_ITEM(saved, i)
            if item != NULL:
                r = visit(item, arg)
                if r:
                    return r
    return cg_node_traverse(&(<Node><object>o).c, visit, arg)

cdef int _node_clear(PyObject *o) noexcept:
    if _node_base_clear != NULL:
        _node_base_clear(o)
    cg_node_clear(&(<Node><object>o).c)
    return 0

(<PyTypeObject *>Node).tp_traverse = <traverseproc>_node_traverse
(<PyTypeObject *>Node).tp_clear = <inquiry>_node_clear
# AccumulateGrad keeps Cython's own traverse and clear: they visit `_variable` (the leaf) and
# Node's fields, and an accumulator has no edges or saved tensors. (Giving it _node_traverse
# hid the leaf from the collector, so a cycle through a leaf's hook leaked.)


# --------------------------------------------------------------------------------------
# Function.apply

@cython.final
cdef class _FnInfo:
    cdef object cls
    cdef object node_cls
    cdef bint split          # forward(*args) + setup_context(ctx, inputs, output)
    cdef bint builtin        # a cgrad op: forward gets ctx=None when no graph is recorded
    cdef object sig          # inspect.Signature of forward, for keyword binding
    # Note [Cached methods]: cls.forward / backward / setup_context as looked up when cls
    # had version tag `tag`. CPython resets a class's tag (and its subclasses') whenever an
    # attribute of it or of a base changes, so comparing tags is an exact staleness test;
    # tag 0 means "no valid tag" and forces a fresh lookup every time.
    cdef unsigned int tag
    cdef object fwd
    cdef object bwd
    cdef object setup
    cdef int has_defaults    # -1: not computed yet (reset with the cached methods)
    cdef object pt_bwd       # Note [Pass-through backward]: that backward, or None
    cdef bint saves          # Note [Freed saved values]: `_cg_saves` of a built-in op
    cdef int rooted          # 1: a module holds cls (Note [Untracked graphs]); -1: unknown


cdef extern from *:
    """
    /* The version tag CPython's method cache uses for `t`, or 0 when it has none. */
    static unsigned int cg_type_tag(PyObject *t) {
        PyTypeObject *tp = (PyTypeObject *)t;
    #ifdef Py_TPFLAGS_VALID_VERSION_TAG
        if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
    #endif
        return tp->tp_version_tag;
    }

    /* f(first, *args) through vectorcall: no argument tuple is built. All references are
     * borrowed (the caller keeps `first` and `args` alive); returns a new reference. */
    static PyObject *cg_call_prepend(PyObject *f, PyObject *first, PyObject *args) {
        PyObject *small[8], **stack = small, *res;
        Py_ssize_t i, n = PyTuple_GET_SIZE(args);
        if (n + 1 > 8) {
            stack = (PyObject **)PyMem_Malloc(sizeof(PyObject *) * (size_t)(n + 1));
            if (stack == NULL) return PyErr_NoMemory();
        }
        stack[0] = first;
        for (i = 0; i < n; i++) stack[i + 1] = PyTuple_GET_ITEM(args, i);
        res = PyObject_Vectorcall(f, stack, (size_t)(n + 1), NULL);
        if (stack != small) PyMem_Free(stack);
        return res;
    }
    """
    unsigned int cg_type_tag(object t)
    object cg_call_prepend(object f, object first, object args)


cdef int _refresh_methods(_FnInfo info) except -1:
    cls = info.cls
    fwd_before = info.fwd
    info.tag = 0
    info.fwd = cls.forward
    info.bwd = getattr(cls, "backward", None)
    info.setup = cls.setup_context if info.split else None
    if info.fwd is not fwd_before:
        info.sig = None
        info.has_defaults = -1
    info.tag = cg_type_tag(cls)
    return 0


cdef inline int _check_methods(_FnInfo info) except -1:
    if info.tag == 0 or cg_type_tag(info.cls) != info.tag:
        _refresh_methods(info)
    return 0


cdef object _backward_of(object fn):
    """The backward function of a node's _fn (a _FnInfo; see Note [Cached methods])."""
    cdef _FnInfo info = <_FnInfo>fn
    _check_methods(info)
    if info.bwd is None:
        raise AttributeError(f"type object '{info.cls.__name__}' has no attribute 'backward'")
    return info.bwd


cg_apply_type_ready()
cg_tfn_type_ready()


def _tensor_function(fn, str name, str module, bint check=True, dict aliases=None,
                     str qualname=None):
    """fn called through csrc/cg_tfn.h: with `check`, behind a C check that its first
    positional argument is a Tensor (torch's TypeError otherwise); with `aliases`, keyword
    names renamed ({alias: name}). It pickles as module.qualname (default: name)."""
    f = cg_tfn_new(fn, name, TensorBase, check, aliases)
    f.__module__ = module
    f.__qualname__ = name if qualname is None else qualname
    return f


cdef object _apply_vc(object obj, PyObject **args, Py_ssize_t nargs, PyObject *kwnames):
    """The body of a Function subclass's `apply` (csrc/cg_apply.c): vectorcall arguments."""
    cdef _FnInfo info = <_FnInfo>obj
    cdef Py_ssize_t i, nk = 0
    targs = PyTuple_New(nargs)
    for i in range(nargs):
        a = <object>args[i]
        Py_INCREF(a)
        PyTuple_SET_ITEM(targs, i, a)
    if kwnames != NULL:
        nk = PyTuple_GET_SIZE(<object>kwnames)
    if nk:
        kwargs = {}
        for i in range(nk):
            kwargs[<object>PyTuple_GET_ITEM(<object>kwnames, i)] = <object>args[nargs + i]
        targs = _bind_args(info, targs, kwargs)
    elif info.split and _has_defaults(info):
        targs = _bind_args(info, targs, {})
    return _apply(info, targs)


def _register_function(cls, node_cls, bint split, bint builtin=False):
    """Called by Function.__init_subclass__ for every Function subclass: records how to run
    it and installs its `apply` (csrc/cg_apply.h) unless a class in its MRO defines its own."""
    cdef _FnInfo info = _FnInfo.__new__(_FnInfo)
    if not (isinstance(node_cls, type) and issubclass(node_cls, Node)):
        raise TypeError("node class must subclass cgrad._C.Node")
    info.cls = cls
    info.node_cls = node_cls
    info.split = split
    info.builtin = builtin
    info.sig = None
    info.tag = 0
    info.has_defaults = -1
    info.pt_bwd = None
    info.rooted = -1
    if builtin and cls.__dict__.get("_cg_passthrough", False):
        info.pt_bwd = _backward_of(info)
    info.saves = builtin and bool(getattr(cls, "_cg_saves", False))
    # kept in the class's own dict (not a global registry), so that a Function class
    # created at run time is freed with its last use, as torch's
    setattr(cls, "_cg_info", info)
    base_apply = FunctionBase.__dict__["apply"]
    for k in cls.__mro__:
        found = k.__dict__.get("apply")
        if found is None:
            continue
        if found is base_apply or cg_apply_check(found):
            setattr(cls, "apply", cg_apply_new(info, cls, base_apply, _apply_vc))
        break


cdef tuple _bind_args(_FnInfo info, tuple args, dict kwargs):
    _check_methods(info)
    if info.sig is None:
        info.sig = inspect.signature(info.cls.forward)
    if info.split:
        bound = info.sig.bind(*args, **kwargs)
    else:
        bound = info.sig.bind(None, *args, **kwargs)
    for name in bound.kwargs:
        if name in kwargs:
            # apply passes arguments on positionally, so a keyword-only parameter cannot be
            # given (torch fails the same way)
            raise TypeError(f"forward() got an unexpected keyword argument '{name}'")
    bound.apply_defaults()
    return tuple(bound.args) if info.split else tuple(bound.args[1:])


cdef bint _has_defaults(_FnInfo info) except -1:
    _check_methods(info)
    if info.has_defaults < 0:
        if info.sig is None:
            info.sig = inspect.signature(info.cls.forward)
        info.has_defaults = any(p.default is not p.empty for p in info.sig.parameters.values())
    return info.has_defaults


cdef inline _FnInfo _info_of(object cls):
    info = (<type?>cls).__dict__.get("_cg_info")
    if type(info) is not _FnInfo:
        raise RuntimeError(f"{cls.__name__} is not a registered cgrad Function")
    return <_FnInfo>info


cdef object _apply(_FnInfo info, tuple args):
    """Function.apply: classify the arguments once, run forward with grad mode off, wrap the
    outputs, and record a node (the ctx) when grad mode is on and an input requires grad."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(args), n_tensors = 0, n_out, k
    cdef bint any_rg = False, is_graph, prev, multi
    cdef TensorBase t
    cdef Node ctx
    cdef object pi                # Note [Typed object before a steal]
    _check_methods(info)
    prev = cg_grad_enabled()
    for i in range(n):
        a = <object>PyTuple_GET_ITEM(args, i)
        if isinstance(a, TensorBase):
            n_tensors += 1
            if prev:
                _refresh(<TensorBase>a)     # a stale view may require grad now
            if (<TensorBase>a)._requires_grad:
                any_rg = True
    is_graph = prev and any_rg

    if info.builtin and not is_graph:
        # Fast path for cgrad's own ops: no node, forward gets ctx=None.
        cg_set_grad_enabled(False)
        try:
            out = cg_call_prepend(info.fwd, None, args)
        except ValueError as e:
            _raise_broadcast_error(e)
            raise
        finally:
            cg_set_grad_enabled(prev)
        if type(out) is tuple:
            return tuple([_wrap_plain(o, args) for o in <tuple>out])
        return _wrap_plain(out, args)

    ctx = <Node>cg_tp_new(info.node_cls, _empty_tuple)     # Note [Direct tp_new]
    ctx._fn = info
    ctx._args = args if not is_graph else None
    ctx._n_args = n
    if is_graph:
        # Edges first: mark_dirty inside forward rebases the inputs' history.
        cg_node_alloc_edges(&ctx.c, n_tensors)
        k = 0
        arg_pos = None if n_tensors == n else PyTuple_New(n_tensors)
        for i in range(n):
            a = <object>PyTuple_GET_ITEM(args, i)
            if not isinstance(a, TensorBase):
                continue
            t = <TensorBase>a
            if arg_pos is not None:
                # Note [Typed object before a steal]: `pi` must be a declared object.
                # Untyped, Cython infers Py_ssize_t, boxes a temporary for each call and
                # drops the reference PyTuple_SET_ITEM stole: the tuple then held a dead int
                # for every position > 256 (CPython caches only -5..256), and a built-in op
                # with more than 256 inputs crashed the next graph. .ci/reflint.py checks
                # the generated C for any reference macro applied to a temporary.
                pi = i
                Py_INCREF(pi)
                PyTuple_SET_ITEM(arg_pos, k, pi)
            _set_edge(ctx, k, t)
            k += 1
        ctx._arg_pos = arg_pos
        ctx._args = args
        if _anomaly_on:
            _anomaly_record(ctx)

    cg_set_grad_enabled(False)
    try:
        if info.split:
            out = (<object>info.fwd)(*args)
            (<object>info.setup)(ctx, args, out)
        else:
            out = cg_call_prepend(info.fwd, ctx, args)
    except ValueError as e:
        _raise_broadcast_error(e)
        raise
    finally:
        cg_set_grad_enabled(prev)
    ctx._args = None

    multi = type(out) is tuple
    if multi:
        n_out = PyTuple_GET_SIZE(out)
        outs = out
    else:
        n_out = 1
        outs = (out,)
    if is_graph:
        cg_node_alloc_outputs(&ctx.c, n_out)
    result = PyTuple_New(n_out) if multi else None
    for i in range(n_out):
        o = <object>PyTuple_GET_ITEM(outs, i)
        o = _wrap_output(ctx, o, i, args, is_graph)
        if not multi:
            result = o
        else:
            Py_INCREF(o)
            PyTuple_SET_ITEM(result, i, o)
    if ctx._x is not None and ctx._x.dirty is not None:
        _check_dirty_returned(ctx._x.dirty, outs)
    if is_graph:
        if ctx._has_saved:
            _convert_saved_outputs(ctx)
        _settle_node(ctx)                   # Note [Untracked graphs]
        _settle_outputs(ctx, result, multi)
        if ctx._x is not None and ctx._x.dirty is not None:
            _rebase_dirty_views(ctx)
    return result


cdef void _rebase_dirty_views(Node ctx) except *:
    """An input a custom Function marked dirty that is a view: its base is rebased onto the
    Function's output (CopySlices), as an in-place op on a view (Note [In-place on a view])."""
    cdef TensorBase t
    for d in ctx._x.dirty:
        if not isinstance(d, TensorBase):
            continue
        t = <TensorBase>d
        if t._base_t is None or t._grad_fn is not ctx:
            continue
        t._view_ver = t._vc.version         # its history (ctx) is current, not stale
        if _dirty_view_fn is not None:
            _dirty_view_fn(t)



# --------------------------------------------------------------------------------------
# Operator dispatch (registered by cgrad/ops/__init__.py)

cdef list _tt_ops = [None] * 5      # tensor-tensor op per code
cdef list _ts_ops = [None] * 5      # tensor-scalar op per code
cdef list _st_ops = [None] * 5      # scalar-tensor (reflected) op per code, called as (t, s)
cdef _FnInfo _neg_info = None
cdef object _list_to_tensor = None
_BINOP_CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4}


def _register_binops(dict table, neg, list_to_tensor, promote):
    global _neg_info, _list_to_tensor, _promote_py
    _promote_py = promote
    for name, (tt, ts, st) in table.items():
        code = _BINOP_CODES[name]
        _tt_ops[code] = _info_of(tt)
        _ts_ops[code] = _info_of(ts)
        _st_ops[code] = _info_of(st)
    _neg_info = _info_of(neg)
    _list_to_tensor = list_to_tensor


cdef object _promote_py = None     # cgrad.ops.promotion.promote_any(out, x, y_or_scalar)

# Note [Operator fast path]: + - * / between tensors and scalars are the hottest calls in
# any model, so _binop computes them here instead of going through Function.apply and a
# Python forward. The node it records is identical to what the registered Function's
# forward would record (same class, edges, saved tensors, ctx._aux), so that Function's
# backward runs unchanged; tests/test_ops_core.py compares both paths.
_BCAST = "operands could not be broadcast together with shapes "


cdef void _raise_broadcast_error(object e) except *:
    """Turn NumPy's broadcasting ValueError into torch's RuntimeError (same text)."""
    msg = str(e)
    if not msg.startswith(_BCAST):
        return
    import re
    shapes = [tuple(int(d) for d in m.split(",") if d.strip())
              for m in re.findall(r"\(([\d,]*)\)", msg)]
    if len(shapes) < 2:
        return
    sa = shapes[0]
    for sb in shapes[1:]:       # pairwise, as the operands are broadcast in turn
        n = max(len(sa), len(sb))
        acc = []
        for k in range(1, n + 1):
            da = sa[len(sa) - k] if k <= len(sa) else 1
            db = sb[len(sb) - k] if k <= len(sb) else 1
            if da != db and da != 1 and db != 1:
                raise RuntimeError(
                    f"The size of tensor a ({da}) must match the size of tensor b ({db}) at "
                    f"non-singleton dimension {n - k}") from None
            acc.append(da if db == 1 else db)
        sa = tuple(reversed(acc))


def _raise_if_broadcast(e):
    """Raise torch's RuntimeError if `e` is NumPy's broadcasting ValueError (else return)."""
    _raise_broadcast_error(e)


# Note [Scalar cache]: NumPy multiplies a float32 array by a 0-d float32 array ~0.3 us
# faster than by a Python float (no weak-scalar conversion and no scalar-to-array wrapping on
# every call). Python scalars seen by the operators are converted once per float dtype to a
# read-only 0-d array of the array's own dtype and kept in a bounded dict (dict operations
# are atomic under the GIL, so threads are safe); a loop like `y = y * 1.0001; y = y + 0.5`
# hits it every time. Only float32/float64 arrays, and only values whose conversion is exact
# or rounds to a finite number, use it, so the result dtype and values are the same as with
# the Python scalar (NEP 50: the array's dtype). Zeros are never cached: -0.0 == 0.0 as
# dict keys, but x * -0.0 and x * 0.0 differ in sign. The 0-d array only feeds the ufunc;
# nodes keep the Python scalar (ctx._aux), so backward sees a scalar, as torch's does.
cdef dict _sc_f32 = {}
cdef dict _sc_f64 = {}
cdef object _np_float32 = np.float32
cdef object _np_float64 = np.float64
cdef object _np_subtract = np.subtract
cdef object _np_multiply = np.multiply
cdef object _np_divide = np.true_divide
cdef object _dt_f32 = np.dtype(np.float32)
cdef object _dt_f64 = np.dtype(np.float64)
DEF _SC_MAX = 256


# In front of the dicts, a small table per dtype keyed by object identity: a loop
# multiplying by the literal 1.0001 passes the same float object every time, so `is` finds
# it without hashing. A slot's key and value are stored together with no Python call in
# between (atomic under the GIL), and the table holds its keys, so a key's address cannot be
# reused while it is cached. The slot comes from the address: pymalloc puts Python floats in
# 32-byte blocks at the same offset mod 32 and pools 4 KiB apart, so bits 5.. tell apart the
# floats of one pool and bits 11.. the pools (bits 4.. would leave half the slots unused and
# made the two literals of the loop above share one slot, each evicting the other).
DEF _RT_SIZE = 64
cdef list _rk32 = [None] * _RT_SIZE, _rv32 = [None] * _RT_SIZE
cdef list _rk64 = [None] * _RT_SIZE, _rv64 = [None] * _RT_SIZE


cdef inline object _np_scalar(object other, object x):
    cdef int t = cnp.PyArray_TYPE(<cnp.ndarray>x)
    cdef dict d
    cdef list keys, vals
    cdef double v
    cdef size_t a = <size_t><PyObject *>other
    cdef Py_ssize_t h = <Py_ssize_t>(((a >> 5) ^ (a >> 11)) & (_RT_SIZE - 1))
    if t == cnp.NPY_FLOAT:
        d, keys, vals = _sc_f32, _rk32, _rv32
    elif t == cnp.NPY_DOUBLE:
        d, keys, vals = _sc_f64, _rk64, _rv64
    else:
        return other
    if keys[h] is other:
        return vals[h]
    r = d.get(other)
    if r is not None:
        keys[h] = other
        vals[h] = r
        return r
    if len(d) >= _SC_MAX:
        return other
    try:
        v = other
    except OverflowError:
        return other
    if not (-3.0e38 < v < 3.0e38) or v == 0.0:   # inf, nan, beyond float32, or a zero
        return other
    r = np.array(v, dtype=_dt_f32 if t == cnp.NPY_FLOAT else _dt_f64)
    r.flags.writeable = False
    d[other] = r
    return r


# Note [Direct loops]: a NumPy ufunc call on a tiny array costs ~0.3 us, nearly all of it
# dispatch (type resolution, override and wrap checks, error-state lookups) around an inner
# loop that takes ~20 ns for 8 elements. For + - * / on float32/float64 arrays that are
# exact, aligned and native-order, each either C-contiguous or one element repeated (a 0-d
# cached scalar, Note [Scalar cache], or a broadcast view such as a sum's gradient), with
# equal shapes or one side 0-d, the operators and the engine's buffer sums call that same
# inner loop directly: NumPy's own kernel (the `functions` entry of the ufunc for the
# dtype), so the values are bit-identical. NumPy's floating-point warnings are kept exactly:
# the FP status flags (csrc/cg_fpe.h) are cleared before the loop and, if it raised any
# (overflow, division by zero, invalid, underflow), the result is discarded and the caller
# runs the ufunc, which recomputes and warns or raises as np.errstate says. An in-place sum
# writes through a stack scratch buffer, so a discarded result never touched its target.
# Up to 16384 elements (1024 for in-place sums, the scratch's size) the loop takes a few
# microseconds at most, for which the GIL is kept; larger arrays go through the ufunc (its
# dispatch is then noise, and it releases the GIL).
cdef extern from "cg_fpe.h":
    void cg_fpe_clear() noexcept nogil
    int cg_fpe_raised() noexcept nogil

DEF _DL_MAX = 16384       # elements, for a result in a new array
DEF _DL_MAX_INPLACE = 1024   # elements, for an in-place sum (the scratch buffer's size)
cdef PyUFuncGenericFunction _dl_fn[8]     # [2 * code + (0 float32 | 1 float64)]
cdef void *_dl_data[8]


cdef void _dl_init() except *:
    cdef ufunc uf
    cdef int code, k, i
    cdef char t
    for code, u in enumerate((np.add, np.subtract, np.multiply, np.true_divide)):
        uf = <ufunc>u
        for k in range(2):
            t = cnp.NPY_FLOAT if k == 0 else cnp.NPY_DOUBLE
            _dl_fn[2 * code + k] = NULL
            if uf.nin != 2 or uf.nout != 1:
                continue
            for i in range(uf.ntypes):
                if uf.types[3 * i] == t and uf.types[3 * i + 1] == t and \
                        uf.types[3 * i + 2] == t:
                    _dl_fn[2 * code + k] = uf.functions[i]
                    _dl_data[2 * code + k] = uf.data[i]
                    break


_dl_init()


cdef inline int _dl_slot(int code, object a) noexcept:
    """The loop slot for a <code> on a's dtype (float32/float64, exact ndarray, native byte
    order, aligned; Note [Direct loops]), or -1."""
    cdef int t, slot
    if not cnp.PyArray_CheckExact(a):
        return -1
    t = cnp.PyArray_TYPE(<cnp.ndarray>a)
    if t == cnp.NPY_FLOAT:
        slot = 2 * code
    elif t == cnp.NPY_DOUBLE:
        slot = 2 * code + 1
    else:
        return -1
    if (_dl_fn[slot] == NULL or not cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a)):
        return -1
    return slot


cdef inline cnp.npy_intp _dl_step(object b, object a) noexcept:
    """The step to walk `b` (qualifying like `a`, with a's dtype) as one flat run: its item
    size when C-contiguous, 0 when every element is the same memory (a 0-d array, or a
    broadcast one such as the gradient of a sum), else -1."""
    cdef cnp.ndarray y
    cdef int d
    if not (cnp.PyArray_CheckExact(b)
            and cnp.PyArray_TYPE(<cnp.ndarray>b) == cnp.PyArray_TYPE(<cnp.ndarray>a)
            and cnp.PyArray_ISALIGNED(<cnp.ndarray>b)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>b)):
        return -1
    y = <cnp.ndarray>b
    if cnp.PyArray_IS_C_CONTIGUOUS(y):
        return 0 if cnp.PyArray_NDIM(y) == 0 else cnp.PyArray_ITEMSIZE(y)
    for d in range(cnp.PyArray_NDIM(y)):
        if cnp.PyArray_DIM(y, d) > 1 and cnp.PyArray_STRIDE(y, d) != 0:
            return -1
    return 0


cdef inline bint _dl_run(int slot, char *pa, char *pb, char *po, cnp.npy_intp n,
                         cnp.npy_intp sa, cnp.npy_intp sb, cnp.npy_intp so) noexcept:
    """One call of the inner loop; False when it raised a floating-point flag."""
    cdef char *args[3]
    cdef cnp.npy_intp steps[3]
    args[0] = pa
    args[1] = pb
    args[2] = po
    steps[0] = sa
    steps[1] = sb
    steps[2] = so
    cg_fpe_clear()
    _dl_fn[slot](args, &n, steps, _dl_data[slot])
    return not cg_fpe_raised()


cdef inline int _dl_plan(int code, object a, object b, cnp.npy_intp *steps) noexcept:
    """How to run a <code> b as one inner-loop call (Note [Direct loops]): the loop slot, with
    steps[0], steps[1] set to the operands' steps; -1 when it does not apply. The result has
    a's shape unless a is 0-d and b is not (then b's): callers take it from the 0-d test."""
    cdef int slot = _dl_slot(code, a)
    if slot < 0:
        return -1
    steps[0] = _dl_step(a, a)
    steps[1] = _dl_step(b, a)
    if steps[0] < 0 or steps[1] < 0:
        return -1
    if not (_same_shape(<cnp.ndarray>a, <cnp.ndarray>b)
            or cnp.PyArray_NDIM(<cnp.ndarray>a) == 0 or cnp.PyArray_NDIM(<cnp.ndarray>b) == 0):
        return -1
    return slot


cdef object _dl_binary(int code, object a, object b):
    """a <code> b (0 add, 1 sub, 2 mul, 3 div) by NumPy's inner loop, as a new array; None
    when Note [Direct loops] does not apply and the caller must call the ufunc. The operands
    have equal shapes, or one is 0-d; each is contiguous or one repeated element."""
    cdef cnp.npy_intp steps[2]
    cdef int slot = _dl_plan(code, a, b, steps)
    cdef cnp.ndarray shape_of, out
    cdef cnp.npy_intp n
    if slot < 0:
        return None
    shape_of = <cnp.ndarray>(b if cnp.PyArray_NDIM(<cnp.ndarray>a) == 0 else a)
    n = cnp.PyArray_SIZE(shape_of)
    if n > _DL_MAX:
        return None
    out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(shape_of), cnp.PyArray_DIMS(shape_of),
                            cnp.PyArray_TYPE(shape_of), 0)
    if not _dl_run(slot, <char *>cnp.PyArray_DATA(<cnp.ndarray>a),
                   <char *>cnp.PyArray_DATA(<cnp.ndarray>b), <char *>cnp.PyArray_DATA(out),
                   n, steps[0], steps[1], cnp.PyArray_ITEMSIZE(out)):
        return None
    return out


cdef bint _dl_iadd(object a, object b) noexcept:
    """a += b in place by NumPy's inner loop (a writeable and C-contiguous, b of a's shape or
    0-d); False when Note [Direct loops] does not apply (a is then unchanged) and the caller
    must call np.add."""
    cdef cnp.npy_intp steps[2]
    cdef int slot = _dl_plan(0, a, b, steps)
    cdef cnp.npy_intp n, isz
    cdef double scratch[_DL_MAX_INPLACE]
    if (slot < 0 or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a)
            or not (_same_shape(<cnp.ndarray>a, <cnp.ndarray>b)
                    or cnp.PyArray_NDIM(<cnp.ndarray>b) == 0)):
        return False
    n = cnp.PyArray_SIZE(<cnp.ndarray>a)
    if n > _DL_MAX_INPLACE:
        return False
    isz = cnp.PyArray_ITEMSIZE(<cnp.ndarray>a)
    if not _dl_run(slot, <char *>cnp.PyArray_DATA(<cnp.ndarray>a),
                   <char *>cnp.PyArray_DATA(<cnp.ndarray>b), <char *>scratch, n,
                   steps[0], steps[1], isz):
        return False
    memcpy(cnp.PyArray_DATA(<cnp.ndarray>a), scratch, <size_t>(n * isz))
    return True


def _direct_binary(int code, a, b):
    """Tests: a <code> b (0 add, 1 sub, 2 mul, 3 div) through Note [Direct loops], or None
    where the operators would call the ufunc instead."""
    if not 0 <= code <= 3:
        raise ValueError(f"code must be 0..3, got {code}")
    return _dl_binary(code, a, b)


def _direct_iadd(a, b):
    """Tests: a += b through Note [Direct loops]; False where np.add would be called."""
    return _dl_iadd(a, b)


cdef inline bint _descr_differs(object out, object x) except -1:
    """out.dtype is not x.dtype, without attribute lookups when both are arrays."""
    if cnp.PyArray_Check(out):
        return <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>out) != \
            <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>x)
    return out.dtype is not (<object>x).dtype


cdef object _ts_ufunc(int code, object x, object k, bint reflected):
    """x <code> k (k <code> x if reflected) by the ufunc, for a scalar or 0-d k."""
    if code == 0:
        return _np_add(x, k)
    if code == 1:
        return _np_subtract(k, x) if reflected else _np_subtract(x, k)
    if code == 2:
        return _np_multiply(x, k)
    return _np_divide(k, x) if reflected else _np_divide(x, k)


cdef object _tt_ufunc(int code, object x, object y):
    """x <code> y by the ufunc, with torch's message for shapes that do not broadcast."""
    try:
        if code == 0:
            return _np_add(x, y)
        if code == 1:
            return _np_subtract(x, y)
        if code == 2:
            return _np_multiply(x, y)
        return _np_divide(x, y)
    except ValueError as e:
        _raise_broadcast_error(e)
        raise


cdef object _binop(int code, object self, object other, bint reflected):
    cdef object tp = type(other)
    cdef bint scalar
    cdef TensorBase a = <TensorBase>self
    cdef TensorBase b
    cdef _FnInfo info
    if tp is float or tp is int or tp is bool:
        scalar = True
    elif isinstance(other, TensorBase):
        scalar = False
    elif isinstance(other, np.generic):
        # a NumPy scalar of the array's own float dtype (e.g. from Note [Scalar cache]) is
        # used as is; others become Python scalars (torch: weak, dtype from the tensor)
        if not (tp is _np_float32 or tp is _np_float64) or \
                <PyObject *>cnp.PyArray_DESCR(<cnp.ndarray>a._data) != \
                <PyObject *>(<object>other).dtype:
            other = other.item()
        scalar = True
    elif cnp.PyArray_Check(other):
        other = _new_tensor(_as_array(other))
        scalar = False
    else:
        return NotImplemented       # lists, tuples, None, str...: TypeError, as in torch
    if code == 4:    # pow: no fast path
        if scalar:
            return _apply(<_FnInfo>(_st_ops[code] if reflected else _ts_ops[code]), (self, other))
        return _apply(<_FnInfo>_tt_ops[code], (other, self) if reflected else (self, other))
    x = a._data
    if scalar:
        info = <_FnInfo>(_st_ops[code] if reflected else _ts_ops[code])
        k = _np_scalar(other, x) if (tp is float or tp is int) else other
        out = None
        if cnp.PyArray_CheckExact(k):       # a cached 0-d array: Note [Direct loops]
            out = _dl_binary(code, k, x) if reflected else _dl_binary(code, x, k)
        if out is None:
            out = _ts_ufunc(code, x, k, reflected)
        if _descr_differs(out, x):
            out = _promote_py(code, out, x, other)
        if cg_grad_enabled():
            _refresh(a)
        if not (a._requires_grad and cg_grad_enabled()):
            return _new_tensor(_as_array(out))
        if code == 3 and reflected:
            # s / a is recorded as torch records it, reciprocal(a) * s: the reciprocal is
            # saved, not a, so an in-place op on a afterwards does not break backward
            return _binop(2, a.reciprocal(), other, False)
        return _record_binop(info, code, out, a, None, other)
    b = <TensorBase>other
    if reflected:
        a, b = b, a
        x = a._data
    y = b._data
    info = <_FnInfo>_tt_ops[code]
    out = _dl_binary(code, x, y)            # Note [Direct loops]
    if out is None:
        out = _tt_ufunc(code, x, y)
    if _descr_differs(out, x) or _descr_differs(out, y):
        out = _promote_py(code, out, x, y)
    if cg_grad_enabled():
        _refresh(a)
        _refresh(b)
    if not ((a._requires_grad or b._requires_grad) and cg_grad_enabled()):
        return _new_tensor(_as_array(out))
    return _record_binop(info, code, out, a, b, None)


cdef object _record_binop(_FnInfo info, int code, object out, TensorBase a, TensorBase b,
                          object scalar):
    """Record the node that info.cls.forward would record; see Note [Operator fast path]."""
    cdef Node ctx = <Node>cg_tp_new(info.node_cls, _empty_tuple)     # Note [Direct tp_new]
    cdef TensorBase t
    ctx._fn = info
    ctx._n_args = 2
    if b is None:
        cg_node_alloc_edges(&ctx.c, 1)
        _set_edge(ctx, 0, a)
        ctx._arg_pos = _ARG_POS_0
        if code == 2 or code == 3:
            ctx._aux = scalar
    else:
        cg_node_alloc_edges(&ctx.c, 2)
        _set_edge(ctx, 0, a)
        _set_edge(ctx, 1, b)
        # what torch saves: a * b keeps b for a's gradient and a for b's; a / b keeps b,
        # and a for b's gradient (an in-place op on an unsaved operand is allowed)
        if code == 2:
            _save(ctx, (a if b._requires_grad else None, b if a._requires_grad else None))
        elif code == 3:
            _save(ctx, (a if b._requires_grad else None, b))
    cg_node_alloc_outputs(&ctx.c, 1)
    if _anomaly_on:
        _anomaly_record(ctx)
    t = _new_tensor(_as_array(out))
    _set_meta(&ctx.c, 0, t._data)
    _settle_node(ctx)                       # Note [Untracked graphs]
    if _is_float(t._data):
        t._grad_fn = ctx
        t._requires_grad = True
        _adopt(t, ctx)
    return t


cdef tuple _ARG_POS_0 = (0,)


cdef object _regen_view_fn = None


def _register_view_regen(fn):
    global _regen_view_fn
    _regen_view_fn = fn


cdef object _dirty_view_fn = None


def _register_dirty_view(fn):
    """fn(view): rebase the base of a view a custom Function marked dirty (inplace.py)."""
    global _dirty_view_fn
    _dirty_view_fn = fn


cdef void _regen_view(TensorBase t) except *:
    """Note [Stale views]: a view whose storage was modified in place through its base or
    another view (its shared version moved since its grad_fn was made) gets its grad_fn
    regenerated from the base's current history before it is used, as torch does. A view
    torch cannot regenerate (Note [View creation meta]) raises instead, every time."""
    if (<TensorBase>t._base_t)._requires_grad and t._cmeta != CM_DEFAULT:
        raise _view_meta_error(t, True)
    t._view_ver = t._vc.version
    if _regen_view_fn is not None and (<TensorBase>t._base_t)._requires_grad:
        _regen_view_fn(t)


cdef inline void _refresh(TensorBase t) except *:
    """A stale view's history brought up to date before its requires_grad or grad_fn is
    relied on (Note [Stale views])."""
    if t._base_t is not None and t._vc.version != t._view_ver:
        _regen_view(t)


# Note [View creation meta]: torch forbids in-place ops recorded by autograd on some views,
# and reading the history of such a view after its base was modified in place:
# - outputs of ops returning several views (split, chunk, unbind) and their views: MULTI;
# - views made while grad mode is off: NO_GRAD;
# - outputs of a custom Function that are views (an input returned as is, or a view made in
#   forward): CUSTOM (their backward is the Function's, which view+inplace would bypass).
# A view made from a view keeps that meta (torch's propagate_creation_meta); `_cmeta` holds
# it (0 for a plain view and for every non-view). cgrad/ops/inplace.py checks it before
# recording an in-place op, _regen_view before regenerating a stale view's history.
cdef dict _CM_REASON = {
    CM_MULTI: "This view is the output of a function that returns multiple views. Such "
              "functions do not allow the output views to be modified inplace. You should "
              "replace the inplace operation by an out-of-place one.",
    CM_NO_GRAD: "Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both "
                "inside the no_grad block (if you don't want the inplace to be tracked) or "
                "both outside (if you want the inplace to be tracked).",
    CM_CUSTOM: "This view was created inside a custom Function (or because an input was "
               "returned as-is) and the autograd logic to handle view+inplace would override "
               "the custom backward associated with the custom Function, leading to incorrect "
               "gradients. This behavior is forbidden. You can fix this by cloning the output "
               "of the custom Function.",
}


cdef object _view_meta_error(TensorBase t, bint indirect):
    """torch's message for an in-place op on (indirect: the base of) a view it forbids."""
    what = ("its base or another view of its base has been modified inplace" if indirect
            else "is being modified inplace")
    if t._grad_fn is not None:
        name = type(t._grad_fn).__name__
        for suffix in ("Backward0", "Backward1", "Backward2", "Backward"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        msg = f"Output {t._output_nr} of {name} is a view and {what}."
    else:
        msg = f"A view was created in no_grad mode and {what} with grad mode enabled."
    return RuntimeError(msg + " " + _CM_REASON[t._cmeta])


def _check_view_inplace(TensorBase t not None):
    """Raise torch's error if an in-place op recorded by autograd may not modify view t
    (Note [View creation meta])."""
    if t._cmeta != CM_DEFAULT:
        raise _view_meta_error(t, False)


def _set_multi_view(outs):
    """Mark the outputs of an op returning several views (split, chunk, unbind)."""
    cdef TensorBase t
    cdef char m = CM_MULTI if cg_grad_enabled() else CM_NO_GRAD
    for o in outs:
        if isinstance(o, TensorBase) and (<TensorBase>o)._base_t is not None:
            t = <TensorBase>o
            t._cmeta = m
    return outs


cdef inline void _set_edge(Node ctx, Py_ssize_t k, TensorBase t) except *:
    if t._base_t is not None and t._vc.version != t._view_ver:
        _regen_view(t)
    if t._grad_fn is not None:
        cg_node_set_edge(&ctx.c, k, &t._grad_fn.c, t._output_nr)
    elif t._requires_grad:
        acc = _get_accumulator(t)     # keep a reference until the edge holds one
        cg_node_set_edge(&ctx.c, k, &(<Node>acc).c, 0)


cdef void _view_vc(TensorBase t, tuple args) except *:
    """Note [Views share the version counter]: an output whose array is a NumPy view of (or
    is) an input's array shares that input's version counter, as torch's views share their
    base's. NumPy collapses view chains (arr.base is the array that owns the memory), so one
    pointer comparison per tensor input decides; fresh arrays (base NULL) cost one test."""
    cdef PyObject *b = cnp.PyArray_BASE(<cnp.ndarray>t._data)
    cdef PyObject *ab
    cdef TensorBase src
    arr = t._data
    for a in args:
        if not isinstance(a, TensorBase):
            continue
        src = <TensorBase>a
        ad = src._data
        if ad is arr:
            t._vc = src._get_vc()
            return
        if b == NULL or not cnp.PyArray_Check(ad):
            continue
        ab = cnp.PyArray_BASE(<cnp.ndarray>ad)
        if (ab == NULL and b == <PyObject *>ad) or (ab != NULL and ab == b):
            t._vc = src._get_vc()
            # torch's _base: the root tensor whose storage the view shares (in-place ops
            # on the view rebase the base through CopySlices, cgrad/ops/inplace.py)
            t._base_t = src._base_t if src._base_t is not None else src
            t._view_ver = t._vc.version
            # Note [View creation meta]: a view of a view keeps its meta
            t._cmeta = src._cmeta if cg_grad_enabled() else CM_NO_GRAD
            _track(t)
            return


cdef inline object _wrap_plain(object o, tuple args):
    cdef TensorBase t
    if isinstance(o, TensorBase):
        return o
    if cnp.PyArray_CheckExact(o):
        t = _new_tensor(o)
    elif cnp.PyArray_Check(o) or isinstance(o, np.generic):
        t = _new_tensor(_as_array(o))
    else:
        return o
    if cnp.PyArray_BASE(<cnp.ndarray>t._data) != NULL:
        _view_vc(t, args)
    return t


@cython.auto_pickle(False)
cdef class FunctionBase:
    """Base of cgrad.autograd.Function: the compiled ``apply``."""

    @classmethod
    def apply(cls, *args, **kwargs):
        """Apply the Function: ``MyFunction.apply(*args, **kwargs)``.

        Runs ``forward`` with grad mode off and returns its outputs as Tensors; when grad
        mode is on and a tensor argument requires grad, the outputs get a ``grad_fn``: the
        ``ctx`` passed to forward, a node whose ``backward`` autograd calls later. Keyword
        arguments are bound by forward's signature and passed on positionally."""
        cdef _FnInfo info = _info_of(cls)
        if kwargs or (info.split and _has_defaults(info)):
            args = _bind_args(info, args, kwargs)
        return _apply(info, args)


cdef int _check_dirty_returned(list dirty, tuple outs) except -1:
    for d in dirty:
        if not any(o is d for o in outs):
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the "
                "Function.")
    return 0


cdef object _wrap_output(Node ctx, object o, Py_ssize_t i, tuple args, bint is_graph):
    cdef TensorBase t, src
    cdef bint is_input = False, dirty = False, retain = False
    if isinstance(o, TensorBase):
        src = <TensorBase>o
        for a in args:
            if a is o:
                is_input = True
                break
        if (is_input and ctx._x is not None and ctx._x.dirty is not None
                and any(d is o for d in ctx._x.dirty)):
            dirty = True
            t = src
            _bump(t)
            if is_graph and t._grad_fn is None and t._requires_grad:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place operation.")
            if is_graph and t._cmeta != CM_DEFAULT:
                raise _view_meta_error(t, False)       # Note [View creation meta]
        elif is_input or src._grad_fn is not None or src._requires_grad:
            if type(src) is _sparse_cls:    # sparse: an alias keeps the sparse layout
                t = <TensorBase>_sparse_alias(src)
            else:
                t = _new_tensor(src._data)
            t._vc = src._get_vc()
            if is_input and not (<_FnInfo>ctx._fn).builtin and type(src) is not _sparse_cls:
                # an input returned as is: a view of it, as torch
                t._base_t = src._base_t if src._base_t is not None else src
                t._view_ver = t._vc.version
                _track(t)
        else:
            t = src
    elif cnp.PyArray_Check(o) or isinstance(o, np.generic):
        t = _new_tensor(_as_array(o))
        if cnp.PyArray_BASE(<cnp.ndarray>t._data) != NULL:
            _view_vc(t, args)
    else:
        return o        # non-tensor output: returned unchanged
    if not dirty and t._base_t is not None and not (<_FnInfo>ctx._fn).builtin:
        # Note [View creation meta]: a view returned by a custom Function
        t._cmeta = CM_CUSTOM
    if is_graph:
        _set_meta(&ctx.c, i, t._data)
        if _is_float(t._data) and not (
                ctx._x is not None and ctx._x.non_diff is not None
                and any(d is o for d in ctx._x.non_diff)):
            if dirty:
                _track(t)               # else _settle_outputs decides (Note [Untracked graphs])
                retain = _drop_retain(t)
            t._grad_fn = ctx
            t._output_nr = i
            t._requires_grad = True
            t._retains_grad = False
            if dirty and retain:
                t.retain_grad()
        elif dirty:
            t._grad_fn = None
            t._requires_grad = False
    return t


cdef void _convert_saved_outputs(Node ctx) except *:
    """Replace saved outputs of ctx by _SavedOutput records (no ctx <-> output cycle)."""
    cdef Py_ssize_t i, n
    cdef TensorBase t
    cdef _SavedOutput so
    saved = <tuple>ctx._saved
    n = len(saved)
    lst = None
    for i in range(n):
        obj = saved[i]
        if (isinstance(obj, TensorBase) and (<TensorBase>obj)._grad_fn is ctx
                and type(obj) is not _sparse_cls):     # sparse: saved as is (no _data copy)
            t = <TensorBase>obj
            so = _SavedOutput.__new__(_SavedOutput)
            so.data = t._data
            so.output_nr = t._output_nr
            so.vc = t._get_vc()
            if lst is None:
                lst = list(saved)
            lst[i] = so
    if lst is not None:
        saved = tuple(lst)
        PyObject_GC_UnTrack(saved)      # see Note [Saved tuple]
        ctx._saved = saved



def _bind_saved_output(Node node not None, TensorBase out not None, TensorBase target not None):
    """Note [In-place saved outputs]: an in-place op is recorded as its out-of-place op on a
    copy (cgrad/ops/inplace.py), whose node may save its output `out`; torch's in-place node
    saves `target` itself, so that a later in-place change of target makes backward raise.
    Point every saved record of `out` at target's data and version counter, expecting the
    version target has now."""
    cdef Py_ssize_t i, n
    cdef _SavedOutput so
    if not node._has_saved or node._released or type(node._saved) is not tuple:
        return
    saved = <tuple>node._saved
    n = len(saved)
    vc = target._get_vc()
    for i in range(n):
        obj = saved[i]
        if type(obj) is _SavedOutput:
            so = <_SavedOutput>obj
            if so.data is out._data and so.output_nr == out._output_nr:
                so.data = target._data
                so.vc = vc
                x = node._extra()
                if x.saved_vers is None:
                    x.saved_vers = [0] * n
                x.saved_vers[i] = vc.version


# -- Note [Untracked graphs]: which nodes become CLEAN ------------------------------------
cdef object _np_generic = np.generic
cdef object _np_void = np.void
cdef object _np_dtype = np.dtype


cdef int _is_rooted(_FnInfo info) except -1:
    """Is info.cls held by its module (so its node class is not garbage while nodes live)?
    Looked up once, on first use: a class is not in its module yet while it is created."""
    if info.rooted < 0:
        cls = info.cls
        qn = getattr(cls, "__qualname__", "")
        obj = sys.modules.get(getattr(cls, "__module__", None))
        if "<" in qn:
            obj = None
        else:
            for part in qn.split("."):
                if obj is None:
                    break
                obj = getattr(obj, part, None)
        info.rooted = 1 if obj is cls else 0
    return info.rooted


def _fn_rooted(cls):
    """Test hook: would nodes of Function `cls` qualify as rooted (Note [Untracked graphs])?"""
    return bool(_is_rooted(_info_of(cls)))


cdef inline bint _heap_type(object t) noexcept:
    return (PyType_GetFlags(<PyTypeObject *>t) & Py_TPFLAGS_HEAPTYPE) != 0


cdef inline bint _atomic_scalar(object v) noexcept:
    t = type(v)
    return v is None or t is int or t is float or t is bool


cdef bint _atomic_item(object v, bint mark) noexcept:
    """Does v qualify under (a) or (b) of Note [Untracked graphs]? With mark, flag the
    untracked Tensors it is."""
    if _atomic_scalar(v):
        return True
    t = type(v)
    if t is str or t is complex or t is bytes:
        return True
    if t is _tensor_cls:
        if PyObject_GC_IsTracked(v):
            return False
        if mark:
            (<TensorBase>v)._cref = True
        return True
    if t is _ndarray:
        return (cnp.PyArray_TYPE(<cnp.ndarray>v) != cnp.NPY_OBJECT
                and cnp.PyArray_TYPE(<cnp.ndarray>v) != cnp.NPY_VOID)
    if t is _SavedOutput or t is _VersionCounter:
        return True
    if t is slice:
        return (_atomic_scalar(v.start) and _atomic_scalar(v.stop)
                and _atomic_scalar(v.step))
    # NumPy's own scalar and dtype classes only: an instance of a subclass (a heap type) can
    # carry an instance dict or slots that hold anything (class Tag(np.float64))
    if isinstance(v, _np_generic):
        return t is not _np_void and not _heap_type(t)
    if isinstance(v, _np_dtype):
        return v.metadata is None and not _heap_type(t)     # (a metadata dict: anything)
    return False



cdef type _size_cls = tuple       # cgrad.Size (a tuple with no instance dict)


def _register_size(type cls):
    global _size_cls
    if not issubclass(cls, tuple) or cls.__dictoffset__ != 0:
        raise TypeError("Size must be a tuple subclass without an instance dict")
    _size_cls = cls


cdef inline bint _is_tuple(object v) noexcept:
    return type(v) is tuple or type(v) is _size_cls


cdef bint _atomic(object v, bint mark) noexcept:
    """_atomic_item, also for tuples of them (two levels)."""
    if not _is_tuple(v):
        return _atomic_item(v, mark)
    for item in <tuple>v:
        if _is_tuple(item):
            for it2 in <tuple>item:
                if _is_tuple(it2) or not _atomic_item(it2, mark):
                    return False
        elif not _atomic_item(item, mark):
            return False
    return True


cdef extern from *:
    """
    static int cg_has_dict(PyObject *o) { return Py_TYPE(o)->tp_dictoffset != 0; }
    """
    bint cg_has_dict(object o) noexcept


cdef inline bint _saved_ok(object saved) noexcept:
    """Every saved item is None, a _SavedOutput or an untracked Tensor."""
    cdef Py_ssize_t i
    cdef PyObject *item
    for i in range(PyTuple_GET_SIZE(saved)):
        item = PyTuple_GET_ITEM(saved, i)
        if item == <PyObject *>None or item.ob_type == <PyTypeObject *>_SavedOutput:
            continue
        if item.ob_type != <PyTypeObject *>_tensor_cls or PyObject_GC_IsTracked(<object>item):
            return False
    return True


cdef inline void _saved_mark(object saved) noexcept:
    cdef Py_ssize_t i
    cdef PyObject *item
    for i in range(PyTuple_GET_SIZE(saved)):
        item = PyTuple_GET_ITEM(saved, i)
        if item.ob_type == <PyTypeObject *>_tensor_cls:
            (<TensorBase>item)._cref = True


cdef bint _clean_holdings(Node ctx, bint mark) except -1:
    """Everything ctx holds besides its class, Function, edges and saved tuple qualifies
    (with mark: flag the tensors)."""
    cdef _NodeExtra x = ctx._x
    if x is not None and (x.saved_fwd is not None or x.non_diff is not None
                          or x.dirty is not None or x.tensor_pre is not None
                          or x.pre_hooks is not None or x.post_hooks is not None
                          or x.metadata is not None):
        return False
    if ctx._aux is not None and not _atomic(ctx._aux, mark):
        return False
    if ctx._needs is not None and not _atomic(ctx._needs, mark):
        return False
    if ctx._attrs and cg_has_dict(ctx):
        d = _generic_get_dict(ctx, NULL)      # not ctx.__dict__: that flushes (_node_dict)
        if d is not None:
            if type(d) is not dict:
                return False
            for v in (<dict>d).values():
                if not _atomic(v, mark):
                    return False
    return True


cdef void _settle_node(Node ctx) except *:
    """End of apply: make ctx CLEAN if it qualifies (Note [Untracked graphs])."""
    cdef _FnInfo info = <_FnInfo>ctx._fn
    if not _untracking or not PyObject_GC_IsTracked(ctx):
        return
    if info.rooted <= 0 and not _is_rooted(info):
        return
    if not cg_node_edges_untracked(&ctx.c):
        return
    if ctx._saved is not None and not _saved_ok(ctx._saved):
        return
    cdef bint simple = (ctx._x is None and ctx._needs is None and not ctx._attrs
                        and _atomic_scalar(ctx._aux))
    if not simple and not _clean_holdings(ctx, False):
        return
    if not _enter_node(ctx):
        return
    if ctx._saved is not None:
        _saved_mark(ctx._saved)
    if not simple:
        _clean_holdings(ctx, True)


cdef void _settle_outputs(Node ctx, object result, bint multi) noexcept:
    cdef Py_ssize_t i
    if not multi:
        if isinstance(result, TensorBase) and (<TensorBase>result)._grad_fn is ctx:
            _adopt(<TensorBase>result, ctx)
        return
    for i in range(PyTuple_GET_SIZE(result)):
        o = <object>PyTuple_GET_ITEM(result, i)
        if isinstance(o, TensorBase) and (<TensorBase>o)._grad_fn is ctx:
            _adopt(<TensorBase>o, ctx)


# --------------------------------------------------------------------------------------
# Engine callbacks

@cython.final
cdef class _RunState:
    cdef bint create_graph


cdef object _zeros_for(cg_node_t *c, Py_ssize_t i):
    cdef cg_meta_t *m = &c.meta[i]
    if m.ndim < 0:
        return None
    shape = tuple([m.dims[d] for d in range(m.ndim)])
    dtype = <object>m.dtype if m.dtype != NULL else None
    return _new_tensor(_np_zeros(shape, dtype))


cdef object _meta_shape(cg_node_t *c, Py_ssize_t i):
    cdef cg_meta_t *m = &c.meta[i]
    return tuple([m.dims[d] for d in range(m.ndim)])


cdef bint _expandable(tuple shape, tuple to):
    """Can `shape` be broadcast to `to`?"""
    cdef Py_ssize_t i, ns = len(shape), nt = len(to)
    if ns > nt:
        return False
    for i in range(1, ns + 1):
        if shape[ns - i] != to[nt - i] and shape[ns - i] != 1:
            return False
    return True


cdef object _validate_grad(Node node, object g, Py_ssize_t pos, cg_node_t *target,
                           Py_ssize_t nr):
    """Check one gradient returned by node's backward against the metadata of the input it
    flows into; sum it to shape (broadcasting) and cast its dtype when needed."""
    cdef cnp.ndarray arr
    cdef cg_meta_t *m
    if not isinstance(g, TensorBase):
        if hasattr(g, "_cg_sparse_grad"):
            return g._cg_sparse_grad(<object>target.self, nr)
        # cgrad's own ops may hand back ndarrays; a user's backward returns Tensors (torch)
        if ((cnp.PyArray_Check(g) or isinstance(g, np.generic)) and node._fn is not None
                and (<_FnInfo>node._fn).builtin):
            g = _new_tensor(_as_array(g))
        else:
            raise RuntimeError(
                f"function {type(node).__name__} returned an invalid gradient at index {pos}: "
                f"expected Variable or None (got {_obj_type(g)})")
    arr = <cnp.ndarray>(<TensorBase>g)._data
    m = &target.meta[nr]
    if not cg_node_meta_matches(target, nr, cnp.PyArray_NDIM(arr),
                                <Py_ssize_t *>cnp.PyArray_DIMS(arr)):
        want = _meta_shape(target, nr)
        got = (<object>arr).shape
        if not _expandable(want, got):
            raise RuntimeError(
                f"Function {type(node).__name__} returned an invalid gradient at index {pos} - "
                f"got {_shape_str(got)} but expected shape compatible with {_shape_str(want)}")
        g = _sum_to(g, want)
        arr = <cnp.ndarray>(<TensorBase>g)._data
    if m.dtype != NULL and <PyObject *>cnp.PyArray_DESCR(arr) != m.dtype:
        if (<object>arr).dtype != <object>m.dtype:
            g = _cast(g, <object>m.dtype)
    return g


cdef int _cb_apply(void *state, cg_node_t *c, cg_buf_t *bufs, const unsigned char *needed,
                   PyObject **out) except -1:
    cdef Node node = <Node>c.self
    cdef Py_ssize_t i, n_out = c.n_outputs, e, pos, n_res
    cdef cg_node_t *target
    grads = PyTuple_New(n_out + 1)
    Py_INCREF(node)
    PyTuple_SET_ITEM(grads, 0, node)
    for i in range(n_out):
        if bufs[i].g != NULL:
            g = <object>bufs[i].g
        else:
            g = None
        Py_INCREF(g)
        PyTuple_SET_ITEM(grads, i + 1, g)
    x = node._x
    if x is not None and (x.tensor_pre is not None or x.retain is not None
                          or x.pre_hooks is not None):
        grads = (node,) + _run_pre_hooks(x, grads[1:])
    if node._fn is not None and (<_FnInfo>node._fn).builtin:
        # torch's built-in nodes pass "no gradient" on: when none arrived (a custom backward
        # returned None for this path), nothing is sent, not zeros (custom Functions still
        # get materialized zeros, as in torch)
        for i in range(n_out):
            if grads[i + 1] is not None:
                break
        else:
            if node._has_saved:
                node._unpack_saved()    # torch's node unpacks (and version-checks) first
            return 0
    if node._materialize:
        for i in range(n_out):
            if grads[i + 1] is None and c.meta[i].ndim >= 0:
                lst = list(grads)
                for k in range(n_out):
                    if lst[k + 1] is None:
                        lst[k + 1] = _zeros_for(c, k)
                grads = tuple(lst)
                break
    fn = node._fn
    if fn is None:
        raise RuntimeError(f"{type(node).__name__} has no backward")
    if needed != NULL and (<_FnInfo>fn).builtin:
        # Note [Nothing needed]: a built-in node that runs in a pruned run although none of
        # its inputs needs a gradient (the node of a non-leaf passed as `inputs=` to
        # backward, which runs for its hooks, as in torch) computes nothing: its post hooks
        # see no gradients. As torch's generated backwards it still unpacks its saved
        # tensors (the version check, "backward through the graph a second time"), except
        # where torch's node of that name is the view or copy that ends a composite and saved
        # nothing (`_cg_composite`: a 1-D @ 2-D matmul ends in SqueezeBackward4 there).
        for e in range(c.n_edges):
            if needed[e]:
                break
        else:
            if not getattr((<_FnInfo>fn).cls, "_cg_composite", False):
                if node._released:
                    raise RuntimeError(_SECOND_TIME)    # Note [Freed saved values]
                if node._has_saved:
                    node._unpack_saved()
            if x is not None and x.post_hooks is not None:
                _run_post_hooks(x, (None,) * node._n_args, grads[1:])
            return 0
    if node._released and (<_FnInfo>fn).builtin:
        raise RuntimeError(_SECOND_TIME)    # Note [Freed saved values]
    fn = _backward_of(fn)
    res = None
    if (fn is (<_FnInfo>node._fn).pt_bwd and needed == NULL and not _anomaly_on
            and n_out == 1 and (x is None or x.post_hooks is None)):
        # Note [Pass-through backward]: the backward of a built-in op that declares
        # `_cg_passthrough` (Add, AddScalar, SubScalar) returns the incoming gradient for every
        # tensor input, so it is not called: each edge gets that gradient (`same`), validated
        # (summed to the input's shape, cast) as the returned tuple would be. The identity
        # test with the backward found at registration keeps a patched backward running.
        same = <object>PyTuple_GET_ITEM(grads, 1)
        if same is None:
            return 0
    else:
        same = None
        if needed != NULL or cg_needs_node != NULL:
            # Note [Exact needs_input_grad]
            res = _apply_pruned(node, fn, grads, needed)
        elif _anomaly_on:
            res = _apply_anomaly(node, fn, grads)
        else:
            res = fn(*grads)
        if (type(res) is not tuple and node._n_args == 1 and c.n_edges == 1
                and (x is None or x.post_hooks is None) and not _anomaly_on):
            # one input, one gradient returned bare (the usual custom backward): no tuple
            target = c.edges[0].node
            if target != NULL and res is not None:
                g = _validate_grad(node, res, 0, target, c.edges[0].input_nr)
                Py_INCREF(g)
                out[0] = <PyObject *>g
            return 0
        if type(res) is not tuple:
            res = (res,)
        if _anomaly_on and _anomaly_nan:
            _anomaly_check_nan(node, res)
        if x is not None and x.post_hooks is not None:
            res = _run_post_hooks(x, res, grads[1:])
        n_res = PyTuple_GET_SIZE(res)
        if n_res != node._n_args:
            if n_res < node._n_args or any(r is not None for r in res[node._n_args:]):
                raise RuntimeError(
                    f"function {type(node).__name__} returned an incorrect number of "
                    f"gradients (expected {node._n_args}, got {n_res})")
    arg_pos = node._arg_pos
    if arg_pos is not None and res is not None and not (<_FnInfo>node._fn).builtin:
        _check_untracked_grads(node, res, <tuple>arg_pos)
    for e in range(c.n_edges):
        target = c.edges[e].node
        if target == NULL:
            continue
        pos = e if arg_pos is None else <Py_ssize_t>arg_pos[e]
        g = same if res is None else <object>PyTuple_GET_ITEM(res, pos)
        if g is None:
            continue
        g = _validate_grad(node, g, pos, target, c.edges[e].input_nr)
        Py_INCREF(g)
        out[e] = <PyObject *>g
    return 0


cdef int _check_untracked_grads(Node node, tuple res, tuple arg_pos) except -1:
    """A gradient for a forward argument that is not a Tensor is an error (torch)."""
    cdef Py_ssize_t p
    for p in range(node._n_args):
        if <object>PyTuple_GET_ITEM(res, p) is not None and p not in arg_pos:
            raise RuntimeError(
                f"function {type(node).__name__} returned a gradient different than None at "
                f"position {p + 1}, but the corresponding forward input was not a Variable")
    return 0


cdef object _apply_anomaly(Node node, object fn, tuple grads):
    try:
        return fn(*grads)
    except BaseException:
        _anomaly_report(node)
        raise


# Note [Exact needs_input_grad]: in a pruned run (grad(), backward(inputs=)) a backward sees
# needs_input_grad True only for the arguments whose gradient is used. That value belongs to
# one call of the backward, not to the node: other threads, and runs nested in this
# backward, may run the same node meanwhile and must see its own value (writing it into the
# node for the call made them see it, and two threads restoring it out of order left it
# wrong for good). So it is this thread's override for the node whose backward is running,
# saved and restored around the call; a call outside any pruned one needs no override.
cdef extern from *:
    """
    static CG_THREAD_LOCAL PyObject *cg_needs_node = NULL;   /* borrowed */
    static CG_THREAD_LOCAL PyObject *cg_needs_value = NULL;  /* borrowed; NULL: the node's */
    """
    PyObject *cg_needs_node
    PyObject *cg_needs_value


cdef object _apply_pruned(Node node, object fn, tuple grads, const unsigned char *needed):
    """Call a backward with this thread's needs_input_grad override: `needed` (an edge mask)
    in a pruned run, or none (the node's own value) when needed is NULL."""
    global cg_needs_node, cg_needs_value
    cdef Py_ssize_t e, pos
    cdef cg_node_t *c = &node.c
    cdef PyObject *prev_node = cg_needs_node
    cdef PyObject *prev_value = cg_needs_value
    needs = None
    if needed != NULL:
        lst = [False] * node._n_args
        arg_pos = node._arg_pos
        for e in range(c.n_edges):
            if needed[e]:
                pos = e if arg_pos is None else <Py_ssize_t>arg_pos[e]
                lst[pos] = True
        needs = tuple(lst)
        cg_needs_node = <PyObject *>node
        cg_needs_value = <PyObject *>needs      # kept alive by `needs` during the call
    else:
        cg_needs_node = NULL
        cg_needs_value = NULL
    try:
        if _anomaly_on:
            return _apply_anomaly(node, fn, grads)
        return fn(*grads)
    finally:
        cg_needs_node = prev_node
        cg_needs_value = prev_value


cdef tuple _run_pre_hooks(_NodeExtra x, tuple grads):
    lst = list(grads)
    _run_tensor_hooks(x, lst)
    if x.pre_hooks is not None:
        for fn in list(x.pre_hooks.values()):
            r = fn(tuple(lst))
            if r is not None:
                lst = list(r)
    return tuple(lst)


cdef _run_tensor_hooks(_NodeExtra x, list lst):
    """A node's tensor pre-hooks (Tensor.register_hook on its outputs), then retain_grad,
    on the gradients in lst (replaced in place by what the hooks return)."""
    if x.tensor_pre is not None:
        for nr, hooks in list(x.tensor_pre.items()):
            if lst[nr] is None:
                continue
            for fn in list(hooks.values()):
                r = fn(lst[nr])
                if r is not None:
                    _check_hook_result(fn, lst[nr], r)
                    lst[nr] = r
    if x.retain is not None:
        for nr, ref in list(x.retain.items()):
            t = ref()
            if t is None or lst[nr] is None:
                continue
            _retain_accumulate(<TensorBase>t, lst[nr])


cdef _retain_accumulate(TensorBase t, object g):
    _acc_enter()
    try:
        _retain_locked(t, g)
    finally:
        _acc_exit()


cdef _retain_locked(TensorBase t, object g):
    if type(g) is _sparse_cls or type(t._grad) is _sparse_cls:     # sparse:
        t._grad = _sparse_acc(t._grad, g, False, cg_grad_enabled())
    elif t._grad is None:
        t._grad = g.detach().clone() if not cg_grad_enabled() else g.clone()
    elif cg_grad_enabled():
        t._grad = t._grad + g
    else:
        t._grad = _new_tensor(_as_array((<TensorBase>t._grad)._data + (<TensorBase>g)._data))
    _hold(t, t._grad)                       # Note [Untracked graphs]


cdef tuple _run_post_hooks(_NodeExtra x, tuple res, tuple grad_outputs):
    for fn in list(x.post_hooks.values()):
        r = fn(res, grad_outputs)
        if r is not None:
            res = tuple(r) if isinstance(r, (tuple, list)) else (r,)
    return res


cdef _check_hook_result(object fn, object old, object new):
    if not isinstance(new, TensorBase):
        raise TypeError(f"expected Variable, but hook returned '{_obj_type(new)}'")
    if (<TensorBase>new)._data.shape != (<TensorBase>old)._data.shape:
        name = getattr(fn, "__name__", repr(fn))
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    if (<TensorBase>new)._data.dtype != (<TensorBase>old)._data.dtype:
        name = getattr(fn, "__name__", repr(fn))
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"{_type_name((<TensorBase>old)._data)} got "
                           f"{_type_name((<TensorBase>new)._data)})")


cdef inline bint _stealable(PyObject *g, bint owned):
    """Can the engine's gradient become leaf.grad without a copy? Only if nothing else can
    see it: engine-owned, or a fresh Tensor whose array owns its (contiguous, writeable)
    memory and is referenced by nobody else. See Note [Grad buffer ownership]."""
    cdef TensorBase t = <TensorBase>g
    if t._grad_fn is not None or t._requires_grad or t._hooks is not None:
        return False
    arr = t._data
    if not cnp.PyArray_CheckExact(arr):
        return False
    if owned:
        return True
    # refs to the Tensor: the engine buffer, or the hook result `r`, in _accumulate_leaf (1)
    # + `g` in _accumulate_leaf (1: Cython owns a reassigned argument) + `t` above (1);
    # to the array: t._data (1) + `arr` (1). Pinned by test_memory's steal tests: if Cython
    # ever borrowed one of these, the tests see a copy instead of a steal.
    if Py_REFCNT(t) > 3 or Py_REFCNT(arr) > 2:
        return False
    if cnp.PyArray_BASE(<cnp.ndarray>arr) != NULL:
        return False
    return cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>arr) and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>arr)


# Note [Accumulation lock]: backward runs in several threads may accumulate into the same
# leaf (or retained non-leaf) at once, and NumPy releases the GIL inside a large add, so the
# read-modify-write of .grad is guarded, as torch guards AccumulateGrad with a mutex.
# One process-wide lock, reentrant for its owner thread (the guarded region calls Python:
# tensor ops, sparse accumulation), taken without the GIL when contended; at fork the child
# gets a fresh one, since the thread that held it does not exist there. Uncontended it costs
# two C calls per accumulation.
cdef PyThread_type_lock _acc_lock = PyThread_allocate_lock()
cdef long _acc_owner = 0
cdef int _acc_depth = 0


cdef inline int _acc_enter() except -1:
    global _acc_owner, _acc_depth
    cdef long me = <long>PyThread_get_thread_ident()
    if _acc_depth > 0 and _acc_owner == me:
        _acc_depth += 1
        return 0
    if _acc_lock == NULL:
        raise MemoryError("cgrad: could not allocate the accumulation lock")
    if not PyThread_acquire_lock(_acc_lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(_acc_lock, WAIT_LOCK)
    _acc_owner = me
    _acc_depth = 1
    return 0


cdef inline void _acc_exit() noexcept:
    global _acc_owner, _acc_depth
    _acc_depth -= 1
    if _acc_depth == 0:
        _acc_owner = 0
        PyThread_release_lock(_acc_lock)


def _acc_after_fork():
    """os.register_at_fork(after_in_child=...): a fresh, free accumulation lock."""
    global _acc_lock, _acc_owner, _acc_depth
    _acc_lock = PyThread_allocate_lock()
    _acc_owner = 0
    _acc_depth = 0


def _acc_lock_state():
    """Tests: (owner thread ident or 0, depth)."""
    return (_acc_owner, _acc_depth)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_acc_after_fork)


cdef int _accumulate_leaf(TensorBase var, object g, bint owned, bint create_graph) except -1:
    """Torch's AccumulateGrad: hooks, then steal / clone / add in place / add."""
    if var._hooks is not None:
        for fn in list((<dict>var._hooks).values()):
            r = fn(g)
            if r is not None:
                _check_hook_result(fn, g, r)
                g = r
                owned = False
    _acc_enter()
    try:
        _accumulate_locked(var, g, owned, create_graph)
    finally:
        _acc_exit()
    if var._post_acc_hooks is not None:
        for fn in list((<dict>var._post_acc_hooks).values()):
            fn(var)
    return 0


cdef int _accumulate_locked(TensorBase var, object g, bint owned, bint create_graph) except -1:
    """The read-modify-write of var.grad (under Note [Accumulation lock])."""
    if type(g) is _sparse_cls or type(var._grad) is _sparse_cls:     # sparse:
        var._grad = _sparse_acc(var._grad, g, owned, create_graph)
    elif var._grad is None:
        if not create_graph and isinstance(g, TensorBase):
            if _stealable(<PyObject *>g, owned):
                var._grad = g
            else:
                var._grad = _new_tensor((<TensorBase>g)._data.copy())
        elif isinstance(g, TensorBase):
            var._grad = g.clone()
        else:
            var._grad = g._cg_accumulate_new(var) if hasattr(g, "_cg_accumulate_new") else g
    elif not create_graph:
        cur = var._grad
        if isinstance(cur, TensorBase) and isinstance(g, TensorBase):
            a = (<TensorBase>cur)._data
            b = (<TensorBase>g)._data
            if (cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a) and a.shape == b.shape
                    and a.dtype == b.dtype):
                if not _dl_iadd(a, b):          # Note [Direct loops]
                    _np_add(a, b, a)
                _bump(<TensorBase>cur)
            else:
                var._grad = _new_tensor(_as_array(a + b))
        else:
            var._grad = cur + g
    else:
        var._grad = var._grad + g
    _hold(var, var._grad)                   # Note [Untracked graphs]
    return 0


cdef int _cb_accumulate(void *state, cg_node_t *c, PyObject *grad, int owned) except -1:
    cdef AccumulateGrad acc = <AccumulateGrad>c.self
    return _accumulate_leaf(<TensorBase>acc._variable, <object>grad, owned,
                            (<_RunState>state).create_graph)


cdef inline bint _same_shape(cnp.ndarray x, cnp.ndarray y) noexcept:
    cdef int d, nd = cnp.PyArray_NDIM(x)
    if cnp.PyArray_NDIM(y) != nd:
        return False
    for d in range(nd):
        if cnp.PyArray_DIM(x, d) != cnp.PyArray_DIM(y, d):
            return False
    return True


cdef PyObject *_cb_add(void *state, PyObject *a, PyObject *b, int a_owned) except NULL:
    cdef TensorBase ta, tb
    A = <object>a
    B = <object>b
    if type(A) is _sparse_cls or type(B) is _sparse_cls:     # sparse:
        r = _sparse_add(A, B, (<_RunState>state).create_graph)
    elif (<_RunState>state).create_graph or not (
            type(A) is _tensor_cls and type(B) is _tensor_cls):
        r = A + B
    else:
        ta = <TensorBase>A
        tb = <TensorBase>B
        x = ta._data
        y = tb._data
        if (a_owned and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>x)
                and _same_shape(<cnp.ndarray>x, <cnp.ndarray>y)
                and (cnp.PyArray_DESCR(<cnp.ndarray>x) == cnp.PyArray_DESCR(<cnp.ndarray>y)
                     or x.dtype == y.dtype)):
            if not _dl_iadd(x, y):              # Note [Direct loops]
                _np_add(x, y, x)
            r = A
        else:
            o = _dl_binary(0, x, y)
            r = _new_tensor(o if o is not None else _as_array(_np_add(x, y)))
    Py_INCREF(r)
    return <PyObject *>r


# Note [Freed saved values]: after a node runs in a backward without retain_graph, torch
# frees what the node saved, and running the node again raises _SECOND_TIME. A built-in op
# keeps what torch saves either through save_for_backward (freed here; the node is then
# `_released`) or, where torch saves a tensor that cgrad keeps as a plain value (the scalar of
# x * 2, which torch wraps in a tensor; index arrays, masks), in `ctx._aux`: such an op
# declares `_cg_saves = True`, and the node is marked released and its `_aux` dropped as
# well (kept, while other runs are active: one of them, in another thread or around a nested
# backward, may be inside this node's backward and about to read it). A released built-in
# node refuses to run again (_cb_apply, Node.__call__), whether or not its backward would
# read what was freed, as torch's nodes do; a custom Function raises only when its backward
# reads ctx.saved_tensors (torch's behaviour for custom Functions). Ops that save nothing (add,
# views, sum, cat, ...) run again as in torch. None of this is on the forward path.
cdef int _cb_release(void *state, cg_node_t *c) except -1:
    cdef Node node = <Node>c.self
    if node._has_saved:
        _release_saved(node)
    fn = node._fn
    if fn is not None and (<_FnInfo>fn).saves:
        node._released = True
        if cg_engine_active_runs() <= 1:
            # no other run (another thread's, or an outer one around a nested backward)
            # can be inside this node's backward, reading it: free it as torch does
            node._aux = None
    return 0


cdef int _cb_hooks(void *state, cg_node_t *c, cg_buf_t *bufs) except -1:
    """The tensor hooks of a gradient autograd.grad captures at a node it does not run: a
    leaf's hooks, or a non-leaf's hooks and retain_grad (not the node's pre-hooks), as torch
    runs them (call_tensor_pre_hooks) before capturing."""
    cdef Node node = <Node>c.self
    cdef Py_ssize_t i, n = c.n_outputs if c.n_outputs > 0 else 1
    cdef TensorBase var
    cdef PyObject *old
    cdef PyObject *new
    if c.kind == CG_NODE_ACCUMULATE:
        var = <TensorBase>(<AccumulateGrad>node)._variable
        if var._hooks is None or bufs[0].g == NULL:
            return 0
        g = <object>bufs[0].g
        for fn in list((<dict>var._hooks).values()):
            r = fn(g)
            if r is not None:
                _check_hook_result(fn, g, r)
                g = r
        lst = [g]
    else:
        x = node._x
        if x is None or (x.tensor_pre is None and x.retain is None):
            return 0
        lst = [None if bufs[i].g == NULL else <object>bufs[i].g for i in range(n)]
        _run_tensor_hooks(x, lst)
    for i in range(n):
        g = lst[i]
        new = NULL if g is None else <PyObject *>g
        if new != bufs[i].g:
            Py_XINCREF(new)
            old = bufs[i].g
            bufs[i].g = new
            bufs[i].owned = 0
            _xdecref(old)
    return 0


cdef cg_callbacks_t _make_callbacks(_RunState st):
    cdef cg_callbacks_t cb
    cb.ctx = <void *>st
    cb.apply = _cb_apply
    cb.accumulate = _cb_accumulate
    cb.add = _cb_add
    cb.release = _cb_release
    cb.hooks = _cb_hooks
    return cb


def _roots_ready(list tensors, list grads):
    """The common case of autograd.backward's argument checks, in one C loop: True when
    every root requires grad and every gradient is a Tensor with its root's shape and dtype
    (nothing to create, cast or report). Otherwise the Python checks run and raise."""
    cdef Py_ssize_t i, n = len(tensors)
    cdef TensorBase t, g
    if len(grads) != n:
        return False
    for i in range(n):
        a = tensors[i]
        b = grads[i]
        if not isinstance(a, TensorBase) or not isinstance(b, TensorBase):
            return False
        t = <TensorBase>a
        g = <TensorBase>b
        if not t._requires_grad or type(t._data) is not _ndarray or type(g._data) is not _ndarray:
            return False
        if not _same_shape(<cnp.ndarray>t._data, <cnp.ndarray>g._data):
            return False
        if cnp.PyArray_DESCR(<cnp.ndarray>t._data) != cnp.PyArray_DESCR(<cnp.ndarray>g._data):
            if t._data.dtype != g._data.dtype:
                return False
    return True


cdef tuple _root_of(TensorBase t, Py_ssize_t i):
    _refresh(t)
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    if t._requires_grad:
        return (_get_accumulator(t), 0)
    raise RuntimeError(
        f"element {i} of tensors does not require grad and does not have a grad_fn")


def _run_engine(list tensors, list grads, bint keep_graph, bint create_graph, inputs,
                bint accumulate=False):
    """Run the engine from `tensors` seeded with `grads` (validated by the caller).

    inputs is None: accumulate into every reachable leaf. Otherwise a list of tensors: the run
    is pruned to them, and either (accumulate=False: autograd.grad) the gradients that reach
    them are returned (a list, None where no gradient arrived) and nothing is accumulated, or
    (accumulate=True: backward(inputs=)) they are accumulated into the inputs as the run
    reaches them (leaves, and non-leaves through their retain_grad) and None is returned.
    """
    cdef Py_ssize_t n = len(tensors), m = 0, i
    cdef _RunState st = _RunState.__new__(_RunState)
    cdef cg_callbacks_t cb
    cdef cg_node_t **roots = NULL
    cdef cg_node_t **targets = NULL
    cdef Py_ssize_t *root_nrs = NULL
    cdef Py_ssize_t *target_nrs = NULL
    cdef PyObject **root_grads = NULL
    cdef PyObject **captured = NULL
    cdef bint prev
    cdef int rc
    keep = []   # keeps every node and gradient alive for the duration of the run
    roots_info = [_root_of(<TensorBase?>tensors[i], i) for i in range(n)]
    targets_info = []
    if inputs is not None:
        m = len(inputs)
        for i in range(m):
            t = <TensorBase?>inputs[i]
            _refresh(<TensorBase>t)
            if not (<TensorBase>t)._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets_info.append(_root_of(<TensorBase>t, i))
    st.create_graph = create_graph
    cb = _make_callbacks(st)
    try:
        roots = <cg_node_t **>PyMem_Malloc(sizeof(cg_node_t *) * (n + 1))
        root_nrs = <Py_ssize_t *>PyMem_Malloc(sizeof(Py_ssize_t) * (n + 1))
        root_grads = <PyObject **>PyMem_Malloc(sizeof(PyObject *) * (n + 1))
        targets = <cg_node_t **>PyMem_Malloc(sizeof(cg_node_t *) * (m + 1))
        target_nrs = <Py_ssize_t *>PyMem_Malloc(sizeof(Py_ssize_t) * (m + 1))
        captured = <PyObject **>PyMem_Malloc(sizeof(PyObject *) * (m + 1))
        if (roots == NULL or root_nrs == NULL or root_grads == NULL or targets == NULL
                or target_nrs == NULL or captured == NULL):
            raise MemoryError()
        for i in range(m):
            captured[i] = NULL
        for i in range(n):
            node, nr = roots_info[i]
            roots[i] = &(<Node>node).c
            root_nrs[i] = nr
            g = grads[i]
            keep.append(g)
            root_grads[i] = <PyObject *>g
        for i in range(m):
            node, nr = targets_info[i]
            targets[i] = &(<Node>node).c
            target_nrs[i] = nr
            captured[i] = NULL
        prev = cg_grad_enabled()
        cg_set_grad_enabled(create_graph)
        try:
            cg_engine_run(roots, root_nrs, root_grads, n, targets, target_nrs, m, captured,
                          accumulate, keep_graph, &cb)
        finally:
            cg_set_grad_enabled(prev)
        if inputs is None or accumulate:
            return None
        out = []
        for i in range(m):
            if captured[i] == NULL:
                out.append(None)
            else:
                obj = <object>captured[i]
                _xdecref(captured[i])
                captured[i] = NULL
                out.append(obj)
        return out
    finally:
        if captured != NULL:
            for i in range(m):
                _xdecref(captured[i])
                captured[i] = NULL
        PyMem_Free(roots)
        PyMem_Free(root_nrs)
        PyMem_Free(root_grads)
        PyMem_Free(targets)
        PyMem_Free(target_nrs)
        PyMem_Free(captured)


def _engine_active_runs():
    """Tests: how many engine runs are registered now (all threads); see Note [Run claims]."""
    return cg_engine_active_runs()


def _engine_after_fork():
    """os.register_at_fork(after_in_child=...): drop the runs of threads that do not exist in
    the child (Note [Runs across fork] in csrc/cg_engine.c)."""
    cg_engine_after_fork_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_engine_after_fork)


def _accumulate_into(TensorBase t not None, g, bint create_graph):
    """Accumulate g into t.grad (leaf rules; the retain_grad rule for a non-leaf)."""
    if t._grad_fn is None:
        _accumulate_leaf(t, g, False, create_graph)
    else:
        _retain_accumulate(t, g)
