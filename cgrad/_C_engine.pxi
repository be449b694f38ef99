# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# The Python side of backward: the callbacks that csrc/cg_engine.c calls (_cb_apply: run a
# node's backward with its hooks and checks; _cb_accumulate / _cb_add: gradient buffers and
# accumulation into .grad; _cb_release; _cb_hooks) and _run_engine, which validates the
# roots and runs the C engine. Notes here: Note [Nothing needed], Note [Pass-through
# backward], Note [Exact needs_input_grad], Note [Accumulation lock], Note [Freed saved
# values].


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
    if not _anomaly_on:
        return _run_function_node(c, bufs, needed, out)
    # anomaly mode: whatever fails while this node runs (its hooks, its backward, the checks
    # of what it returned, the NaN check) is reported with the node's forward traceback, as
    # torch reports the node of a failed task
    try:
        return _run_function_node(c, bufs, needed, out)
    except BaseException:
        _anomaly_report(<Node>c.self)
        raise


cdef int _run_function_node(cg_node_t *c, cg_buf_t *bufs, const unsigned char *needed,
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
        # get materialized zeros, as in torch); the post hooks see no gradients
        for i in range(n_out):
            if grads[i + 1] is not None:
                break
        else:
            # torch's node unpacks (and version-checks) first, except the op node of an
            # in-place op on a view: torch's CopySlices that wraps it returns at once when
            # no gradient arrived, and never calls it (Note [Copy slices fn], ops/inplace.py)
            if node._has_saved and (x is None or not (<_NodeExtra>x).copy_fn):
                node._unpack_saved()
            if x is not None and x.post_hooks is not None:
                _run_post_hooks(node, x, (None,) * node._n_args, grads[1:])
            return 0
    # the post hooks see the gradients as they arrived (after the pre hooks), not the zeros
    # materialized for a custom backward (torch)
    grad_outputs = grads
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
                _run_post_hooks(node, x, (None,) * node._n_args, grad_outputs[1:])
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
        # Note [Quiet floating point]: a built-in backward is cgrad's maths
        quiet = _quiet_on() if (<_FnInfo>node._fn).builtin else None
        try:
            if needed != NULL or cg_needs_node != NULL:
                # Note [Exact needs_input_grad]
                res = _apply_pruned(node, fn, grads, needed)
            else:
                res = fn(*grads)
        finally:
            _quiet_off(quiet)
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
        n_res = PyTuple_GET_SIZE(res)
        if n_res != node._n_args:
            if n_res < node._n_args or any(r is not None for r in res[node._n_args:]):
                raise RuntimeError(
                    f"function {type(node).__name__} returned an incorrect number of "
                    f"gradients (expected {node._n_args}, got {n_res})")
        if _anomaly_on and _anomaly_nan:
            _anomaly_check_nan(node, res)
        if x is not None and x.post_hooks is not None:
            res = _run_post_hooks(node, x, res, grad_outputs[1:])
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
    """A gradient for a forward argument that is not a Tensor is an error (torch).
    arg_pos holds the Tensor arguments' positions in increasing order: one merge-like walk,
    linear in the argument count (a `p in arg_pos` test per argument was quadratic)."""
    cdef Py_ssize_t p, k = 0
    cdef Py_ssize_t n_pos = PyTuple_GET_SIZE(arg_pos)
    for p in range(node._n_args):
        while k < n_pos and <Py_ssize_t>(<object>PyTuple_GET_ITEM(arg_pos, k)) < p:
            k += 1
        if k < n_pos and <Py_ssize_t>(<object>PyTuple_GET_ITEM(arg_pos, k)) == p:
            continue
        if <object>PyTuple_GET_ITEM(res, p) is not None:
            raise RuntimeError(
                f"function {type(node).__name__} returned a gradient different than None at "
                f"position {p + 1}, but the corresponding forward input was not a Variable")
    return 0


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
        return fn(*grads)
    finally:
        cg_needs_node = prev_node
        cg_needs_value = prev_value


cdef tuple _run_pre_hooks(_NodeExtra x, tuple grads):
    """A node's tensor hooks and retain_grad, then its pre hooks, on the gradients that
    arrived (grads: one per output, None where none arrived)."""
    lst = list(grads)
    _run_tensor_hooks(x, lst)
    if x.pre_hooks is not None:
        grads = tuple(lst)
        for fn in list(x.pre_hooks.values()):
            r = fn(grads)
            if r is not None:
                _check_hooks_tuple(fn, grads, r)
                grads = <tuple>r
        return grads
    return tuple(lst)


cdef _run_tensor_hooks(_NodeExtra x, list lst):
    """A node's tensor pre-hooks (Tensor.register_hook on its outputs), then retain_grad,
    on the gradients in lst (replaced in place by what the hooks return). As torch, a hook
    is called with None for an output that received no gradient (and may only return None
    then); retain_grad skips it."""
    if x.tensor_pre is not None:
        for nr, hooks in list(x.tensor_pre.items()):
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
        quiet = _quiet_on()                 # Note [Quiet floating point]
        try:
            t._grad = _new_tensor(_as_array((<TensorBase>t._grad)._data
                                            + (<TensorBase>g)._data))
        finally:
            _quiet_off(quiet)
    _hold(t, t._grad)                       # Note [Untracked graphs]


cdef tuple _run_post_hooks(Node node, _NodeExtra x, tuple res, tuple grad_outputs):
    """A node's post hooks: fn(grad_inputs, grad_outputs) -> None or new grad_inputs, where
    grad_inputs has one entry per edge (tensor input, as next_functions), as torch's. `res`
    has one gradient per forward argument; the result too."""
    cdef Py_ssize_t e, n_e = node.c.n_edges
    arg_pos = node._arg_pos
    if arg_pos is None:
        gi = res[:n_e] if PyTuple_GET_SIZE(res) != n_e else res
    else:
        gi = tuple([res[<Py_ssize_t>arg_pos[e]] for e in range(n_e)])
    changed = False
    for fn in list(x.post_hooks.values()):
        r = fn(gi, grad_outputs)
        if r is not None:
            _check_hooks_tuple(fn, gi, r)
            gi = <tuple>r
            changed = True
    if not changed:
        return res
    lst = list(res)
    for e in range(n_e):
        lst[e if arg_pos is None else <Py_ssize_t>arg_pos[e]] = gi[e]
    return tuple(lst)


cdef _check_hooks_tuple(object fn, tuple old, object new):
    """What a node's pre or post hook returned in place of `old` (torch's checks)."""
    cdef Py_ssize_t i
    if type(new) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{_obj_type(new)}'")
    if PyTuple_GET_SIZE(<tuple>new) != PyTuple_GET_SIZE(old):
        name = getattr(fn, "__name__", repr(fn))
        raise RuntimeError(
            f"hook '{name}' has returned an incorrect number of values (got "
            f"{PyTuple_GET_SIZE(<tuple>new)}, but expected {PyTuple_GET_SIZE(old)})")
    for i in range(PyTuple_GET_SIZE(old)):
        r = <object>PyTuple_GET_ITEM(<tuple>new, i)
        if r is not None:
            _check_hook_result(fn, <object>PyTuple_GET_ITEM(old, i), r)


cdef _check_hook_result(object fn, object old, object new):
    """A gradient `new` a hook returned in place of `old` (not None)."""
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(new, TensorBase):
        raise TypeError(f"expected Variable, but hook returned '{_obj_type(new)}'")
    if not isinstance(old, TensorBase):
        return
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
        _run_post_acc_hooks(var)
    return 0


cdef int _run_post_acc_hooks(TensorBase var) except -1:
    for fn in list((<dict>var._post_acc_hooks).values()):
        r = fn(var)
        if r is not None:
            if not isinstance(r, TensorBase):
                raise TypeError(f"expected Variable, but hook returned '{_obj_type(r)}'")
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")
    return 0


cdef int _accumulate_node(AccumulateGrad acc, object g, bint owned,
                          bint create_graph) except -1:
    """An AccumulateGrad node with pre or post hooks of its own, or that received no
    gradient (g None: a backward returned None for its leaf; the hooks see None and .grad is
    left as it is), in torch's order: the leaf's tensor hooks, the node's pre hooks,
    accumulation, the post-accumulate-grad hooks, the node's post hooks (which see
    grad_inputs=() and the gradient as the pre hooks left it)."""
    cdef TensorBase var = <TensorBase>acc._variable
    x = acc._x
    if var._hooks is not None:
        for fn in list((<dict>var._hooks).values()):
            r = fn(g)
            if r is not None:
                _check_hook_result(fn, g, r)
                g = r
                owned = False
    go = (g,)
    if x is not None and x.pre_hooks is not None:
        for fn in list(x.pre_hooks.values()):
            r = fn(go)
            if r is not None:
                _check_hooks_tuple(fn, go, r)
                go = <tuple>r
        if go[0] is not g:
            g = go[0]
            owned = False
    if g is not None:
        _acc_enter()
        try:
            _accumulate_locked(var, g, owned, create_graph)
        finally:
            _acc_exit()
    if var._post_acc_hooks is not None:
        _run_post_acc_hooks(var)
    if x is not None and x.post_hooks is not None:
        for fn in list(x.post_hooks.values()):
            r = fn((), go)
            if r is not None:
                _check_hooks_tuple(fn, (), r)
    return 0


cdef inline bint _internal_overlap(cnp.ndarray a) noexcept:
    """A dimension of size > 1 and stride 0 (an expanded view, whose memory is writable:
    Note [Expanded memory] in ops/inplace.py): a sum in place would add into one element
    several times."""
    cdef int d
    for d in range(cnp.PyArray_NDIM(a)):
        if cnp.PyArray_STRIDE(a, d) == 0 and cnp.PyArray_DIM(a, d) > 1:
            return True
    return False


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
                    and a.dtype == b.dtype and not _internal_overlap(<cnp.ndarray>a)):
                if not _dl_iadd(a, b):          # Note [Direct loops]
                    _quiet_add(a, b, a)
                _bump(<TensorBase>cur)
            else:
                var._grad = _new_tensor(_as_array(_quiet_add(a, b, None)))
        else:
            var._grad = cur + g
    else:
        var._grad = var._grad + g
    _hold(var, var._grad)                   # Note [Untracked graphs]
    return 0


cdef int _cb_accumulate(void *state, cg_node_t *c, PyObject *grad, int owned) except -1:
    cdef AccumulateGrad acc = <AccumulateGrad>c.self
    cdef _NodeExtra x = acc._x
    if grad != NULL and (x is None or (x.pre_hooks is None and x.post_hooks is None)):
        return _accumulate_leaf(<TensorBase>acc._variable, <object>grad, owned,
                                (<_RunState>state).create_graph)
    return _accumulate_node(acc, None if grad == NULL else <object>grad, owned,
                            (<_RunState>state).create_graph)


cdef object _quiet_add(object a, object b, object out):
    """np.add(a, b[, out]) under Note [Quiet floating point]."""
    quiet = _quiet_on()
    try:
        return _np_add(a, b) if out is None else _np_add(a, b, out)
    finally:
        _quiet_off(quiet)


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
                and not _internal_overlap(<cnp.ndarray>x)
                and _same_shape(<cnp.ndarray>x, <cnp.ndarray>y)
                and (cnp.PyArray_DESCR(<cnp.ndarray>x) == cnp.PyArray_DESCR(<cnp.ndarray>y)
                     or x.dtype == y.dtype)):
            if not _dl_iadd(x, y):              # Note [Direct loops]
                _quiet_add(x, y, x)
            r = A
        else:
            o = _dl_binary(0, x, y)
            r = _new_tensor(o if o is not None else _as_array(_quiet_add(x, y, None)))
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
        if var._hooks is None:
            return 0
        g = None if bufs[0].g == NULL else <object>bufs[0].g
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


cdef tuple _edge_of(object edge):
    """(node, input_nr) of a GradientEdge (autograd.graph), checked: the engine indexes the
    node's gradient buffers by input_nr (torch does not check it, and crashes)."""
    cdef Py_ssize_t nr, n_out
    if not isinstance(edge, tuple) or PyTuple_GET_SIZE(edge) < 2:     # no bounds checks here
        raise TypeError(f"expected a GradientEdge (node, output_nr), got {_obj_type(edge)}")
    node = <object>PyTuple_GET_ITEM(edge, 0)
    if not isinstance(node, Node):
        raise RuntimeError("GradientEdge's first object must be an autograd.graph.Node but "
                           f"got {_obj_type(node)}")
    nr = <object>PyTuple_GET_ITEM(edge, 1)
    n_out = (<Node>node).c.n_outputs
    if n_out < 1:
        n_out = 1
    if not 0 <= nr < n_out:
        raise IndexError(f"GradientEdge's output_nr {nr} is out of range for "
                         f"{type(node).__name__}, which has {n_out} input(s)")
    return (node, nr)


cdef tuple _start_of(object t, Py_ssize_t i):
    """A root of a run: a Tensor, or a GradientEdge."""
    if isinstance(t, TensorBase):
        return _root_of(<TensorBase>t, i)
    return _edge_of(t)


def _edge_meta(object edge):
    """(shape, dtype) of the gradient that flows into a GradientEdge, as recorded by its node
    (torch's node._input_metadata[output_nr]); None where the node recorded none."""
    node, nr = _edge_of(edge)
    cdef cg_node_t *c = &(<Node>node).c
    cdef Py_ssize_t i = nr
    if c.meta == NULL or i >= c.n_outputs or c.meta[i].ndim < 0:
        return None
    return (_meta_shape(c, i), <object>c.meta[i].dtype if c.meta[i].dtype != NULL else None)


def _run_engine(list tensors, list grads, bint keep_graph, bint create_graph, inputs,
                bint accumulate=False):
    """Run the engine from `tensors` seeded with `grads` (validated by the caller). Any of
    `tensors` and `inputs` may be a GradientEdge (autograd.graph) instead of a Tensor.

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
    roots_info = [_start_of(tensors[i], i) for i in range(n)]
    targets_info = []
    if inputs is not None:
        m = len(inputs)
        for i in range(m):
            t = inputs[i]
            if not isinstance(t, TensorBase):
                targets_info.append(_edge_of(t))        # a GradientEdge
                continue
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
