# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# Module-wide state: the Python pieces that cgrad/__init__.py and cgrad.sparse register for
# the engine (the Tensor class, sum_to, cast, the sparse tensor class and its rules) and the
# module-level constants shared by the other includes (_SECOND_TIME, NumPy callables), grad
# mode (thread-local, kept in C), NumPy's floating-point error handling for cgrad's own maths
# (Note [Quiet floating point]), and small array helpers (_as_array, _wrap, _is_float, type
# names for messages).


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
# Note [Quiet floating point]: torch computes inf and nan silently: log(0), 1 / 0, 0 / 0,
# sqrt(-1), an overflow, in forward or in backward, give their IEEE results and no warning,
# whatever NumPy's error settings are. NumPy warns (RuntimeWarning) or raises
# (np.errstate(all="raise")) instead, so cgrad's own maths runs with NumPy's floating-point
# error handling set to "ignore": the forward of every built-in Function (_apply in
# _C_function.pxi), the backward of every built-in node (_cb_apply in _C_engine.pxi), the
# ufunc calls of the operator fast path (_binop; its direct loops, Note [Direct loops], raise
# nothing), and the engine's gradient sums and accumulation. Code the user wrote (a custom
# Function's forward and backward, hooks) runs under the user's own settings; the cgrad ops
# it calls are quiet. NumPy warnings that are not floating-point errors (the mean of an
# empty slice) are each op's business.
#
# NumPy 2 keeps its error settings in a context variable. Setting it and resetting it costs
# ~180 ns (a new immutable mapping and a token object, each time); entering a Context object
# in which it is already set, and leaving it, costs ~10 ns. So each thread has one such
# Context (in its thread-state dict, freed with the thread), entered around the quiet part
# and left after it; an op inside an op (the thread-local flag is set) enters nothing. Inside
# it the other context variables have their default values: cgrad's maths reads none. Where
# a context variable matters to the code inside (Python's context-aware warnings, 3.14), the
# variable is set and reset instead; without it (NumPy 1.x), np.errstate is used.
cdef extern from *:
    """
    static CG_THREAD_LOCAL int cg_quiet_now = 0;    /* inside a quiet part, in this thread */
    """
    int cg_quiet_now

cdef object _fp_var = None      # NumPy's error-state context variable, or None (NumPy 1.x)
cdef object _fp_quiet = None    # its value with every floating-point error ignored
cdef bint _fp_enter = False     # quiet by entering a per-thread Context (else set / reset)
cdef object _QUIET_KEY = "cgrad._C.quiet_context"


cdef void _init_quiet() except *:
    global _fp_var, _fp_quiet, _fp_enter
    try:
        from numpy._core import _ufunc_config as ufc
        var = ufc._extobj_contextvar
        with np.errstate(all="ignore"):
            value = var.get()
    except (ImportError, AttributeError):
        return
    _fp_var = var
    _fp_quiet = value
    _fp_enter = not getattr(sys.flags, "context_aware_warnings", False)


_init_quiet()


cdef object _thread_quiet_context():
    """This thread's Context in which NumPy ignores floating-point errors."""
    cdef PyObject *d = PyThreadState_GetDict()
    cdef PyObject *ctx
    if d == NULL:
        raise RuntimeError("cgrad: no thread state dict")
    ctx = PyDict_GetItem(<object>d, _QUIET_KEY)
    if ctx != NULL:
        return <object>ctx
    c = _contextvars.Context()
    c.run(_fp_var.set, _fp_quiet)
    # NumPy's data allocator is a context variable too: the quiet context uses the one
    # current here (Note [Array buffer cache]: cgrad's cache, after import cgrad)
    c.run(_set_data_handler, PyDataMem_GetHandler())
    (<object>d)[_QUIET_KEY] = c
    return c


def _set_data_handler(handler):
    PyDataMem_SetHandler(handler)


cdef inline object _quiet_on():
    """Enter Note [Quiet floating point]; returns the token for _quiet_off (None when this
    thread is quiet already)."""
    global cg_quiet_now
    if cg_quiet_now:
        return None
    if _fp_var is None:
        st = np.errstate(all="ignore")
        st.__enter__()
    elif _fp_enter:
        st = _thread_quiet_context()
        PyContext_Enter(st)
    else:
        st = PyContextVar_Set(_fp_var, _fp_quiet)
    cg_quiet_now = 1
    return st


cdef inline int _quiet_off(object token) except -1:
    global cg_quiet_now
    if token is None:
        return 0
    cg_quiet_now = 0
    if _fp_var is None:
        token.__exit__(None, None, None)
    elif _fp_enter:
        PyContext_Exit(token)
    else:
        PyContextVar_Reset(_fp_var, token)
    return 0


# --------------------------------------------------------------------------------------
# Helpers

cdef inline object _as_array(object a):
    """Return `a` as an exact ndarray (NumPy returns scalars from 0-d arithmetic)."""
    if cnp.PyArray_CheckExact(a):
        return a
    if isinstance(a, _ndarray):
        return a.view(_ndarray)
    return _np_asarray(a)


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
