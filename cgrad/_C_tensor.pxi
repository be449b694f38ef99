# Included by cgrad/_C.pyx (part of the one extension module cgrad._C).
# The Tensor's layout: TensorBase (fields in _C.pxd; autograd metadata, .grad, hooks, data
# access, the number slots of the hot operators), _VersionCounter, RemovableHandle, the
# tp_dealloc wrapper that takes a freed tensor out of the untracked registry, the copying of
# the binop slots into Python subclasses, and the leaf's AccumulateGrad lookup. Notes here:
# Note [Binop slots]; the TensorBase parts of Note [Untracked graphs] (defined in
# _C_untracked.pxi).


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
        """The underlying ndarray (shared memory). Error if the tensor requires grad and grad
        mode is on (torch allows it under no_grad)."""
        if self._requires_grad and not force and cg_grad_enabled():
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad and cg_grad_enabled():
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
