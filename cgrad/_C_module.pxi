# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# Module-wide state: the Python pieces that cgrad/__init__.py and cgrad.sparse register for
# the engine (the Tensor class, sum_to, cast, the sparse tensor class and its rules) and the
# module-level constants shared by the other includes (_SECOND_TIME, NumPy callables), grad
# mode (thread-local, kept in C), and small array helpers (_as_array, _wrap, _is_float, type
# names for messages). No Note lives here.


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
