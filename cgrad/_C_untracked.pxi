# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# Keeping graph objects out of CPython's cycle collector: Note [Untracked graphs] (the
# invariant, the ATOMIC / CLEAN / tracked kinds, _track, _hold, _adopt, _touch, the
# instance-dict properties handed to Python) and, in its second half, which nodes become
# CLEAN at the end of apply (_settle_node, _settle_outputs, what counts as atomic). Also
# Note [Direct tp_new] (_new_tensor: a new Tensor starts untracked). The registry itself is
# csrc/cg_untracked.c; the parts of the scheme that live inside TensorBase and Node are
# marked with the Note in _C_tensor.pxi and _C_node.pxi.


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
