# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# Graph nodes: Node (a graph node, which is also a Function's ctx; fields in _C.pxd, Note
# [Compact node] there), AccumulateGrad, saved tensors (save_for_backward, _SavedOutput,
# saved-tensor hooks, version checks on unpacking), anomaly mode, and the cycle collector's
# view of a node's edges (tp_traverse / tp_clear wrappers). Notes here: Note [Saved tuple];
# the Node parts of Note [Untracked graphs] (defined in _C_untracked.pxi).


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


cdef void _anomaly_report(Node node) noexcept:
    """Warn with the forward traceback of `node`, whose backward is failing. Called while the
    error propagates: nothing here may replace it, not even this warning turned into an
    exception by a warnings filter (torch keeps the original error too). Called from the
    handler of that error."""
    try:
        md = node._x.metadata if node._x is not None else None
        tb = md.get("traceback_") if md is not None else None
        name = type(node).__name__
        if tb is None:
            _warn(f"Error detected in {name}. No forward pass information available. "
                  "Enable detect anomaly during forward pass for more information.")
        else:
            _warn(f"Error detected in {name}. Traceback of forward call that caused the "
                  "error:\n" + "".join(tb))
    except BaseException:
        pass


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

    def _mark_copy_fn(self):
        """Flag the op node of an in-place op on a view (Note [Copy slices fn])."""
        self._extra().copy_fn = True

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

    @property
    def saved_variables(self):
        """Deprecated alias of ``saved_tensors`` (torch warns the same way)."""
        _warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning)
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
