# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# Function.apply: _FnInfo (what is known about a Function class) and its registration, the
# apply path (_apply: classify the arguments, run forward, record the node), FunctionBase,
# and what apply does with forward's outputs: views (stale views regenerated, view creation
# meta, shared version counters), wrapping the outputs, saved outputs. Notes here: Note
# [Cached methods], Note [Typed object before a steal], Note [Stale views], Note [View
# creation meta], Note [Views share the version counter], Note [In-place saved outputs].


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
        quiet = _quiet_on()                 # Note [Quiet floating point]
        try:
            out = cg_call_prepend(info.fwd, None, args)
        except ValueError as e:
            _raise_broadcast_error(e)
            raise
        finally:
            _quiet_off(quiet)
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
    quiet = _quiet_on() if info.builtin else None     # Note [Quiet floating point]
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
        _quiet_off(quiet)
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
    # Note [Wide outputs]: with many outputs, the identity tests of each output against the
    # earlier outputs, the arguments, and the dirty and non-differentiable lists go through
    # id() maps built once, so that apply stays linear (a Function returning 70,000 outputs
    # took 0.7 s in those scans alone). Small calls keep the plain scans.
    look = _OutputLookup.build(ctx, args, <tuple>outs) if n_out > _WIDE_OUTPUTS else None
    for i in range(n_out):
        o = <object>PyTuple_GET_ITEM(outs, i)
        if multi and i > 0 and isinstance(o, TensorBase):
            k = _same_output(ctx, <tuple>outs, <tuple>result, i, is_graph, look)
            if k >= 0:
                o = <object>PyTuple_GET_ITEM(result, k)
                Py_INCREF(o)
                PyTuple_SET_ITEM(result, i, o)
                continue
        o = _wrap_output(ctx, o, i, args, is_graph, look)
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
            _rebase_dirty_views(ctx, args)
    return result


cdef void _rebase_dirty_views(Node ctx, tuple args) except *:
    """An input a custom Function marked dirty that is a view: its base is rebased onto the
    Function's output (CopySlices), as an in-place op on a view (Note [In-place on a view]).
    The Function's edge for that input then leads to a gather from the base's old history,
    not to the view's old node: as torch's CopySlices, which takes the base's edge in place
    of the view's, so the view's old node (and the hooks on it) is off the path."""
    cdef TensorBase t
    cdef Py_ssize_t k
    for d in ctx._x.dirty:
        if not isinstance(d, TensorBase):
            continue
        t = <TensorBase>d
        if t._base_t is None or t._grad_fn is not ctx:
            continue
        t._view_ver = t._vc.version         # its history (ctx) is current, not stale
        if _dirty_view_fn is not None:
            src = _dirty_view_fn(t)
            if src is None:
                continue
            k = 0
            for a in args:
                if isinstance(a, TensorBase):
                    if a is t:
                        _set_edge(ctx, k, <TensorBase?>src)
                    k += 1


# --------------------------------------------------------------------------------------
# Views (Note [Stale views], Note [View creation meta]) and forward's outputs

# A view's creation meta (TensorBase._cmeta): Note [View creation meta].
DEF CM_DEFAULT = 0
DEF CM_MULTI = 1
DEF CM_NO_GRAD = 2
DEF CM_CUSTOM = 3


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


cdef Py_ssize_t _WIDE_OUTPUTS = 16


cdef class _OutputLookup:
    """Note [Wide outputs]: id() maps over what apply compares each output with. The objects
    stay referenced by `outs`, `args` and ctx while apply runs, so their ids are stable."""
    cdef dict first         # id(output) -> its first position in outs
    cdef set args           # ids of the arguments
    cdef set dirty          # ids of the tensors marked dirty (None: none)
    cdef set non_diff       # ids of the tensors marked non-differentiable (None: none)

    @staticmethod
    cdef _OutputLookup build(Node ctx, tuple args, tuple outs):
        cdef _OutputLookup lk = _OutputLookup.__new__(_OutputLookup)
        cdef Py_ssize_t i
        lk.first = {}
        for i in range(PyTuple_GET_SIZE(outs)):
            lk.first.setdefault(id(<object>PyTuple_GET_ITEM(outs, i)), i)
        lk.args = {id(a) for a in args}
        lk.dirty = lk.non_diff = None
        if ctx._x is not None:
            if ctx._x.dirty is not None:
                lk.dirty = {id(d) for d in ctx._x.dirty}
            if ctx._x.non_diff is not None:
                lk.non_diff = {id(d) for d in ctx._x.non_diff}
        return lk


cdef Py_ssize_t _same_output(Node ctx, tuple outs, tuple result, Py_ssize_t i,
                             bint is_graph, _OutputLookup look) except -2:
    """A forward that returns the same tensor object twice (`return x, x` for a new x, or a
    dirty input): torch returns that one object at both places, as output i (the last
    place wins its output_nr), and sends both outputs' gradients to output i. Returns the
    earlier place k whose wrapped result is that object, after making it output i; -1 if
    outs[i] is not such a repeat (an input returned as is twice gives two views, as torch)."""
    cdef Py_ssize_t k, start = 0, stop = i
    cdef TensorBase t
    o = <object>PyTuple_GET_ITEM(outs, i)
    if look is not None:
        start = <Py_ssize_t>look.first[id(o)]     # the first place of o: the only candidate
        stop = start + 1 if start < i else start
    for k in range(start, stop):
        if <object>PyTuple_GET_ITEM(outs, k) is o:
            r = <object>PyTuple_GET_ITEM(result, k)
            if r is not o:
                return -1           # wrapped into a new tensor: an input returned as is
            t = <TensorBase>r
            if is_graph:
                _set_meta(&ctx.c, i, t._data)
                if t._grad_fn is ctx:
                    t._output_nr = i
            return k
    return -1


cdef object _wrap_output(Node ctx, object o, Py_ssize_t i, tuple args, bint is_graph,
                         _OutputLookup look):
    cdef TensorBase t, src
    cdef bint is_input = False, dirty = False, retain = False
    if isinstance(o, TensorBase):
        src = <TensorBase>o
        if look is not None:
            is_input = id(o) in look.args
        else:
            for a in args:
                if a is o:
                    is_input = True
                    break
        if (is_input and ctx._x is not None and ctx._x.dirty is not None
                and (id(o) in look.dirty if look is not None
                     else any(d is o for d in ctx._x.dirty))):
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
                and (id(o) in look.non_diff if look is not None
                     else any(d is o for d in ctx._x.non_diff))):
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
