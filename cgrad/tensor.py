"""cgrad.Tensor: the user-facing tensor. Layout and autograd fields are in _C.TensorBase;
this module maps methods and operators onto ops (cgrad/ops)."""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad import _creation
from cgrad import _device
from cgrad import _dtype
from cgrad import _legacy
from cgrad import _random
from cgrad import _threads
from cgrad._tensor_str import format_tensor
from cgrad._warn import warn as _warn

# Note [Tensor bindings]: methods of Tensor call the op library (cgrad/ops), the autograd API
# and sparse, which are layers above this module. This module imports none of them: they are
# handed over by _bind, called once at import of cgrad (cgrad/__init__.py, _wire: the one
# place where a lower layer receives pieces of higher ones; docs/ARCHITECTURE.md).
_ops = _index = _reshape = _inplace = _add_alpha = None
_backward = _to_sparse = _masked_fill = None
_IADD = _ISUB = _IMUL = _IDIV = _IPOW = None


def _bind(ops, index, reshape, inplace, add_alpha, backward, to_sparse, masked_fill):
    """Note [Tensor bindings]."""
    global _ops, _index, _reshape, _inplace, _add_alpha, _backward, _to_sparse, _masked_fill
    global _IADD, _ISUB, _IMUL, _IDIV, _IPOW
    _ops, _index, _reshape, _inplace, _add_alpha = ops, index, reshape, inplace, add_alpha
    _backward, _to_sparse, _masked_fill = backward, to_sparse, masked_fill
    _IADD = inplace.ufunc_inplace(np.add)
    _ISUB = inplace.ufunc_inplace(np.subtract)
    _IMUL = inplace.ufunc_inplace(np.multiply)
    _IDIV = inplace.ufunc_inplace(np.true_divide)
    _IPOW = inplace.ufunc_inplace(np.power)


_AXPY = {}


def _axpy(self, other, alpha):
    """self += alpha * other with BLAS axpy, in place and without a temporary (the
    optimizer-step pattern `p.data.add_(g, alpha=-lr)`); False when it does not apply."""
    if not isinstance(other, _C.TensorBase) or _inplace.needs_record(self, other):
        return False
    a, b = self._data, other._data
    if (a.dtype != b.dtype or a.shape != b.shape or a.dtype.char not in "fd" or a.size < 4096
            or not a.flags.c_contiguous or not a.flags.writeable
            or not b.flags.c_contiguous or np.shares_memory(a, b)):
        return False
    fn = _AXPY.get(a.dtype.char)
    if fn is None:
        from scipy.linalg import blas
        _threads.sync_blas()        # SciPy's BLAS was just loaded (Note [Thread pools])
        fn = _AXPY[a.dtype.char] = blas.saxpy if a.dtype.char == "f" else blas.daxpy
    fn(b.reshape(-1), a.reshape(-1), a=alpha)
    self._bump_version()
    return True


def _float_only(ufunc, name):
    def fn(a):
        if a.dtype.kind not in "fc":
            raise RuntimeError(f"result type Float can't be cast to the desired output type "
                               f"{_dtype.torch_type_name(a.dtype)}")
        ufunc(a, out=a)
    return fn

_wrap = _C._wrap
_Scalar = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)


class Size(tuple):
    """A tensor's shape: a tuple that prints as torch.Size does."""

    __slots__ = ()      # immutable, as torch.Size (and so atomic: Note [Untracked graphs])

    def __repr__(self):
        return f"cgrad.Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


_C._register_size(Size)


def _other(x, like):
    """Coerce the other operand of a binary op: scalars stay Python scalars; lists, tuples and
    other objects are not operands (TypeError from Python, as in torch)."""
    if isinstance(x, _C.TensorBase) or isinstance(x, _Scalar):
        return x
    if isinstance(x, np.ndarray):
        return _wrap(x)
    return NotImplemented


_CMP_OK = (builtins.int, builtins.float, builtins.bool, builtins.complex, np.number, np.bool_,
           np.ndarray)
_ONE_ELEMENT = "only one element tensors can be converted to Python scalars"


def _alpha_check(fname, self, other, alpha):
    """torch's checks of add/sub's alpha: a Number, and no float alpha for integer inputs."""
    if not isinstance(alpha, _Scalar):
        raise TypeError(f"{fname}(): argument 'alpha' must be Number, not "
                        f"{_checks.type_name(alpha)}")
    if isinstance(alpha, (builtins.float, np.floating)) and self._data.dtype.kind in "iub":
        o = other._data.dtype.kind if isinstance(other, _C.TensorBase) else (
            "f" if isinstance(other, (builtins.float, np.floating)) else "i")
        if o in "iub":
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")


def _rebuild_tensor(cls, arr, requires_grad, attrs):
    if cls is Tensor:
        t = _wrap(arr)
    else:
        t = _C.TensorBase.__new__(cls)
        t._data = arr
    if requires_grad:
        t.requires_grad_(True)
    if attrs:
        t.__dict__.update(attrs)
    return t


class Tensor(_C.TensorBase):
    """A NumPy-backed tensor with PyTorch's autograd API."""

    # an instance dict, as torch (t.foo = 1), seen by the untracked-graph invariant: vars(t)
    # and t.__dict__ track the tensor first (Note [Untracked graphs] in cgrad/_C_untracked.pxi)
    __dict__ = _C._tensor_dict
    __array_priority__ = 1000
    __hash__ = object.__hash__

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _C._fix_binop_slots(cls)    # see Note [Binop slots] in cgrad/_C_tensor.pxi

    def __new__(cls, *args, device=None, size=None):
        """torch's legacy constructor: cgrad.Tensor(data), cgrad.Tensor(*sizes) (zeros),
        cgrad.Tensor(size=...), cgrad.Tensor(other) (an alias) or cgrad.Tensor() (empty), in
        the default dtype; a subclass's ``super().__new__(cls, data)`` too (Note [Legacy
        constructors] in cgrad/_legacy.py). Only a call of the class runs it: cgrad creates
        its own tensors without it (Note [Direct tp_new] in cgrad/_C.pyx)."""
        self = _C.TensorBase.__new__(cls)
        _legacy.init_tensor(self, args, size, device)
        return self

    def __init__(self, *args, **kwargs):
        """Construction happens in __new__ (as torch's); a subclass may call
        super().__init__() with any arguments."""

    @staticmethod
    def _make_subclass(cls, data, require_grad=False):
        """torch's Tensor._make_subclass: an instance of the Tensor subclass cls sharing data's
        storage and version counter, without its history."""
        _checks.check_tensor(data, "_make_subclass", "data", 2)
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"cls must be a type (got {_checks.type_name(cls)})")
        self = _C.TensorBase.__new__(cls)
        self._data = data._data
        self._share_version(data)
        if require_grad:
            self.requires_grad_(True)
        return self

    # -- pickle and copy (torch's rules) ---------------------------------------------------
    # The data, requires_grad and the attributes; never the graph fields (an unpickled copy
    # of a tensor in the untracked registry must not inherit its registry slot, nor a copy
    # of a leaf its AccumulateGrad node, which would send the copy's gradients to the
    # original).
    def __reduce_ex__(self, protocol):
        """pickle / copy.copy: the same data (copy.copy shares it), requires_grad and the
        attributes; no .grad and no history, as torch."""
        return _rebuild_tensor, (type(self), self._data, self.requires_grad,
                                 _C._attrs_copy(self))

    def __deepcopy__(self, memo):
        """A leaf with a copy of the data, requires_grad, a deep copy of .grad and of the
        attributes (torch: graph leaves only)."""
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a "
                "module, this may be because of a weight_norm usage.")
        key = id(self)
        if key in memo:
            return memo[key]
        import copy
        new = _rebuild_tensor(type(self), self._data.copy(), self.requires_grad, None)
        memo[key] = new
        grad = self.grad
        if grad is not None:
            new.grad = copy.deepcopy(grad, memo)
        attrs = _C._attrs_copy(self)
        if attrs:
            new.__dict__.update(copy.deepcopy(attrs, memo))
        return new

    # -- printing ----------------------------------------------------------------------
    def __repr__(self, *, tensor_contents=None):
        fn = self.grad_fn
        return format_tensor(
            self._data, default_dtype=_dtype.get_default_dtype(),
            requires_grad=self.requires_grad and fn is None,
            grad_fn_name=type(fn).__name__ if fn is not None else None)

    __str__ = __repr__

    def __format__(self, spec):
        if self._data.ndim == 0:
            return self._data.item().__format__(spec)
        return object.__format__(self, spec)

    # -- metadata ----------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        try:
            return self._data.shape[dim]
        except (IndexError, TypeError):
            _checks._norm_dims(_checks.check_int(dim, "size", "dim", 1), self._data.ndim)
            raise

    @property
    def is_sparse(self):
        return False

    @property
    def device(self):
        """The tensor's device: always device(type='cpu')."""
        return _device.CPU

    @property
    def layout(self):
        """The tensor's layout: cgrad.strided (cgrad.sparse_coo for sparse tensors)."""
        return _device.strided

    @property
    def is_cpu(self):
        return True

    @property
    def is_cuda(self):
        return False

    @property
    def is_mps(self):
        return False

    @property
    def is_meta(self):
        return False

    @property
    def is_xpu(self):
        return False

    @property
    def is_quantized(self):
        return False

    def get_device(self):
        """The index of the tensor's device: -1 for the CPU, as torch."""
        return -1

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def element_size(self):
        return self._data.itemsize

    @property
    def itemsize(self):
        """Bytes per element (``element_size()``)."""
        return self._data.itemsize

    @property
    def nbytes(self):
        """Bytes of the elements: ``numel() * element_size()``."""
        return self._data.size * self._data.itemsize

    def nelement(self):
        """The number of elements (``numel()``)."""
        return self._data.size

    def ndimension(self):
        """The number of dimensions (``dim()``)."""
        return self._data.ndim

    def is_complex(self):
        """True for a complex dtype (complex64, complex128)."""
        return self._data.dtype.kind == "c"

    def stride(self, dim=None):
        """The step in elements from one index to the next along each dimension: a tuple,
        or the step along ``dim``. The strides of the NumPy array underneath (a
        broadcast view's repeated dimension steps 0, as torch's ``expand``)."""
        a = self._data
        if a.size == 0:                 # torch's strides of an empty tensor: row-major
            acc, rev = 1, []
            for n in reversed(a.shape):
                rev.append(acc)
                acc *= max(n, 1)
            st = tuple(reversed(rev))
        else:
            st = tuple(s // a.itemsize for s in a.strides)
        if dim is None:
            return st
        if a.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return st[_checks._norm_dims(dim, a.ndim)[0]]

    def is_contiguous(self, memory_format=_device.contiguous_format):
        """True when the elements lie in memory in row-major order with no gaps (dimensions
        of size 1 and tensors of at most one element do not count, as in torch); with
        ``memory_format=cgrad.channels_last`` (``channels_last_3d``), in that order."""
        a = self._data
        if memory_format in (_device.contiguous_format, _device.preserve_format, None):
            return bool(a.flags.c_contiguous)         # preserve_format: as torch, row-major
        order = {_device.channels_last: (4, (1, 3, 2, 0)),
                 _device.channels_last_3d: (5, (1, 4, 3, 2, 0))}.get(memory_format)
        if order is None:
            raise TypeError(f"is_contiguous(): argument 'memory_format' must be "
                            f"cgrad.memory_format, not {type(memory_format).__name__}")
        rank, dims = order
        if a.ndim != rank:
            return False
        expected = a.itemsize
        for d in dims:
            if a.shape[d] != 1:
                if a.strides[d] != expected:
                    return False
                expected *= a.shape[d]
        return True

    def storage_offset(self):
        """The offset, in elements, of the first element from the start of the memory
        block the tensor views (0 for a tensor that owns its data)."""
        a = self._data
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if base is a:
            return 0
        off = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return off // a.itemsize

    def data_ptr(self):
        """The address of the first element (an int)."""
        return self._data.__array_interface__["data"][0]

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                "Boolean value of Tensor with no values is ambiguous" if self._data.size == 0
                else "Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self._data)

    def __float__(self):
        if self._data.size != 1:
            raise ValueError(_ONE_ELEMENT)
        return builtins.float(self.item())

    def __int__(self):
        if self._data.size != 1:
            raise ValueError(_ONE_ELEMENT)
        return builtins.int(self.item())

    def __complex__(self):
        if self._data.size != 1:
            raise ValueError(_ONE_ELEMENT)
        return builtins.complex(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self._data)

    # -- autograd ----------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute the gradient of this tensor w.r.t. graph leaves (torch semantics)."""
        _backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # -- conversion --------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """to(device=None, dtype=None, non_blocking=False, copy=False, *, memory_format=None),
        to(dtype, non_blocking=False, copy=False) or to(other, non_blocking=False,
        copy=False): self when nothing changes (unless copy=True), else a differentiable copy
        (ToCopyBackward0). cgrad has only the cpu device."""
        if len(args) == 1 and not kwargs and isinstance(args[0], np.dtype):   # .float(), ...
            dtype, copy, fmt = args[0], False, False
        else:
            dtype, copy, fmt = parse_to(args, kwargs, self._data.ndim)
        if not copy and not fmt and (dtype is None or dtype == self._data.dtype):
            return self
        out = _ops.ToCopy.apply(self, self._data.dtype if dtype is None else dtype)
        if fmt:
            out._data = _device.channels_last_copy(out._data)
        return out

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """The type name ('cgrad.FloatTensor'; 'cgrad.sparse.FloatTensor' for a sparse tensor)
        when dtype is None, else this tensor cast to dtype: a dtype, a type name (cgrad's or
        torch's spelling) or a legacy class (cgrad.DoubleTensor)."""
        for k in kwargs:
            if k != "async":
                raise TypeError(f"type() got an unexpected keyword argument '{k}'")
        if dtype is None:
            name = _C._type_name(self._data)
            return name.replace("cgrad.", "cgrad.sparse.", 1) if self.is_sparse else name
        return self.to(_type_dtype(dtype))

    def type_as(self, other):
        """self cast to the dtype of other (self when it already has it)."""
        _checks.check_tensor(other, "type_as", "other")
        if other.is_sparse != self.is_sparse:
            raise RuntimeError("to(options) doesn't support converting to a different layout, "
                               f"but got self.layout being {_layout_name(self)} and "
                               f"options.layout set as {_layout_name(other)}")
        return self.to(other.dtype)

    def float(self):
        return self.to(_dtype.float32)

    def double(self):
        return self.to(_dtype.float64)

    def half(self):
        return self.to(_dtype.float16)

    def long(self):
        return self.to(_dtype.int64)

    def int(self):
        return self.to(_dtype.int32)

    def bool(self):
        return self.to(_dtype.bool)

    def clone(self, memory_format=None):
        return _ops.Clone.apply(self)

    def contiguous(self, memory_format=None):
        if self._data.flags.c_contiguous:
            return self
        return _ops.Clone.apply(self, True)

    def cpu(self, *, memory_format=None):
        """self: cgrad tensors live in CPU memory."""
        if _device.check_memory_format(memory_format, "cpu", self._data.ndim):
            return self.to(memory_format=memory_format)
        return self

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        """Raises what torch built without CUDA raises: cgrad runs on the CPU only."""
        _device.refuse_cuda(device)

    def pin_memory(self, device=None):
        """Raises, as torch does without an accelerator (there is no pinned memory)."""
        raise RuntimeError(_device.NO_ACCELERATOR)

    def is_pinned(self, device=None):
        """False: without an accelerator no memory is pinned."""
        return False

    # -- new_* (dtype from self; torch's factories otherwise) ---------------------------
    def new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None,
                   pin_memory=False):
        """A new leaf tensor holding a copy of data, in self's dtype unless dtype is given."""
        if isinstance(data, _C.TensorBase):
            _warn("To copy construct from a tensor, it is recommended to use "
                 "sourceTensor.detach().clone() or sourceTensor.detach().clone()"
                 ".requires_grad_(True), rather than tensor.new_tensor(sourceTensor).")
        requires_grad = _creation._options("new_tensor", device, requires_grad, layout,
                                           pin_memory)
        dt = self._data.dtype if dtype is None else _checks.dtype_of(dtype, "new_tensor")
        arr, _ = _creation._from_data(data)
        return _creation._finish(np.array(arr, dtype=dt, copy=True), requires_grad)

    def new_zeros(self, *args, size=None, dtype=None, device=None, requires_grad=False,
                  layout=None, pin_memory=False):
        """A tensor of zeros of the given size, in self's dtype unless dtype is given."""
        return _creation._make("new_zeros", np.zeros, _new_size("new_zeros", args, size),
                               self._data.dtype if dtype is None else dtype, device,
                               requires_grad, None, layout, pin_memory)

    def new_ones(self, *args, size=None, dtype=None, device=None, requires_grad=False,
                 layout=None, pin_memory=False):
        """A tensor of ones of the given size, in self's dtype unless dtype is given."""
        return _creation._make("new_ones", np.ones, _new_size("new_ones", args, size),
                               self._data.dtype if dtype is None else dtype, device,
                               requires_grad, None, layout, pin_memory)

    def new_empty(self, *args, size=None, dtype=None, device=None, requires_grad=False,
                  layout=None, pin_memory=False):
        """An uninitialised tensor of the given size, in self's dtype unless dtype is
        given."""
        return _creation._make("new_empty", np.empty, _new_size("new_empty", args, size),
                               self._data.dtype if dtype is None else dtype, device,
                               requires_grad, None, layout, pin_memory)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False,
                 layout=None, pin_memory=False):
        """A tensor of the given size filled with fill_value, in self's dtype unless dtype is
        given."""
        if not isinstance(size, (tuple, list)):
            raise TypeError("new_full(): argument 'size' (position 1) must be tuple of ints, "
                            f"not {_checks.type_name(size)}")
        value = _creation._fill_value(fill_value, "new_full")
        return _creation._make("new_full", lambda shape, dt: np.full(shape, value, dt),
                               (tuple(size),), self._data.dtype if dtype is None else dtype,
                               device, requires_grad, None, layout, pin_memory)

    def new(self, *args, device=None, size=None):
        """torch's legacy Tensor.new: cgrad.Tensor's constructor in self's dtype."""
        return _legacy.new_tensor(self._data.dtype, args, size, device, strict=True)


    def to_sparse(self, sparse_dim=None):  # sparse: Tensor.to_sparse()
        """A coalesced sparse COO tensor holding the nonzero entries (1-D or 2-D)."""
        return _to_sparse(self, sparse_dim)

    # -- arithmetic: + - * / ** and unary - are C slots of TensorBase (see _C._binop) ----
    __array_ufunc__ = None   # make NumPy defer to our reflected operators

    def __pos__(self):
        return self

    def __matmul__(self, other):
        if not isinstance(other, _C.TensorBase):
            other = _other(other, self)
            if other is NotImplemented or not isinstance(other, _C.TensorBase):
                return NotImplemented
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        other = _other(other, self)
        if other is NotImplemented or not isinstance(other, _C.TensorBase):
            return NotImplemented
        return _ops.matmul(other, self)

    def add(self, other, *, alpha=1):
        if alpha != 1 or type(alpha) is not builtins.int:
            _alpha_check("add", self, other, alpha)
        return self + other if alpha == 1 else _add_alpha(self, other, alpha)

    def sub(self, other, *, alpha=1):
        if alpha != 1 or type(alpha) is not builtins.int:
            _alpha_check("sub", self, other, alpha)
        return self - other if alpha == 1 else _add_alpha(self, other, alpha, True)

    def mul(self, other):
        return self * other

    def pow(self, exponent):
        return self ** exponent

    def neg(self):
        return -self

    def exp(self):
        return _ops.Exp.apply(self)

    def log(self):
        return _ops.Log.apply(self)

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        cls = _ops.Sum if dim is None else _ops.SumDim
        return cls.apply(self, dim, keepdim, None if dtype is None else
                         _checks.dtype_of(dtype, "sum"))

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        cls = _ops.Mean if dim is None else _ops.MeanDim
        return cls.apply(self, dim, keepdim, None if dtype is None else
                         _checks.dtype_of(dtype, "mean"))

    # -- shape -------------------------------------------------------------------------
    # torch's reshape/view/expand take the shape as one argument or as several, by position
    # or (one) by keyword: reshape(2, 3), reshape((2, 3)), reshape(shape=(2, 3))
    def reshape(self, *args, shape=None):
        shape = _sizes(args, shape, "reshape", "shape")
        return _reshape(self, shape)

    def view(self, *args, size=None, dtype=None):
        if dtype is not None and not args and size is None:
            return _view_dtype(self, np.dtype(dtype))
        shape = _sizes(args, size, "view", "size")
        if len(shape) == 1 and isinstance(shape[0], np.dtype):
            return _view_dtype(self, shape[0])
        return _ops.View.apply(self, shape)

    def expand(self, *args, size=None, implicit=False):
        shape = _sizes(args, size, "expand", "size")
        return _ops.Expand.apply(self, tuple(shape))      # a new view even for the same shape

    def expand_as(self, other):
        return self.expand(other.shape)

    def _expand_to(self, shape):
        """expand for cgrad's own code (backward formulas, broadcast_tensors): self when it
        already has that shape, as before torch's always-a-new-view expand was followed."""
        shape = tuple(shape)
        return self if self._data.shape == shape else _ops.Expand.apply(self, shape)

    def unsqueeze(self, dim):
        return _ops.Unsqueeze.apply(self, dim)

    def __getitem__(self, idx):
        return _index(self, idx)

    # -- in place (recorded and rebased when autograd needs it; see ops/inplace.py) -------
    def _check_inplace(self):
        _inplace.check_leaf(self)

    def _requires_grad_now(self):
        return self.requires_grad and _C.is_grad_enabled()

    def add_(self, other, *, alpha=1):
        if alpha != 1:
            _alpha_check("add_", self, other, alpha)
            if _axpy(self, other, alpha):
                return self
            if isinstance(other, _C.TensorBase):
                return _inplace.apply_inplace(
                    self, lambda a, o: _IADD(a, o * alpha), (other,),
                    lambda s: _add_alpha(s, other, alpha), False)
            other = other * alpha
        return _inplace.apply_inplace(self, _IADD, (other,), lambda s: s + other, False)

    def sub_(self, other, *, alpha=1):
        if alpha != 1:
            _alpha_check("sub_", self, other, alpha)
            if _axpy(self, other, -alpha):
                return self
            if isinstance(other, _C.TensorBase):
                return _inplace.apply_inplace(
                    self, lambda a, o: _ISUB(a, o * alpha), (other,),
                    lambda s: _add_alpha(s, other, alpha, True), False)
            other = other * alpha
        return _inplace.apply_inplace(self, _ISUB, (other,), lambda s: s - other, False)

    def mul_(self, other):
        return _inplace.apply_inplace(self, _IMUL, (other,), lambda s: s * other,
                                      isinstance(other, _C.TensorBase))

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is not None:
            return _inplace.apply_inplace(
                self, None, (other,), lambda s: s.div(other, rounding_mode=rounding_mode),
                True) if _inplace.needs_record(self, other) else self.copy_(
                    self.div(other, rounding_mode=rounding_mode))
        return _inplace.apply_inplace(self, _IDIV, (other,), lambda s: s / other,
                                      isinstance(other, _C.TensorBase))

    def pow_(self, exponent):
        return _inplace.apply_inplace(self, _IPOW, (exponent,), lambda s: s ** exponent, True)

    def neg_(self):
        if self._data.dtype == np.bool_:
            raise RuntimeError(_ops.arithmetic._NEG_BOOL)
        return _inplace.apply_inplace(self, lambda a: np.negative(a, out=a), (),
                                      lambda s: -s, False)

    def exp_(self):
        return _inplace.apply_inplace(self, _float_only(np.exp, "exp_"), (),
                                      lambda s: s.exp(), False)

    def log_(self):
        return _inplace.apply_inplace(self, _float_only(np.log, "log_"), (),
                                      lambda s: s.log(), True)

    def zero_(self):
        return _inplace.apply_inplace(self, lambda a: a.fill(0), (),
                                      lambda s: _inplace.Zero.apply(s), False,
                                      internal_check=False)   # Note [Expanded memory]

    def fill_(self, value):
        if not isinstance(value, (_C.TensorBase,) + _Scalar + (builtins.complex,)):
            raise TypeError(f"fill_(): argument 'value' (position 1) must be Number or Tensor, "
                            f"not {_checks.type_name(value)}")
        if isinstance(value, _C.TensorBase):
            if value.ndim != 0:
                raise RuntimeError(
                    "fill_ only supports 0-dimension value tensor but got tensor with "
                    f"{value.ndim} dimensions.")
            # torch's fill_ with a tensor value checks the overlap (it is a copy_)
            return _inplace.apply_inplace(
                self, lambda a, v: a.fill(v), (value,),
                lambda s: _inplace.FillTensor.apply(s, value), False)
        return _inplace.apply_inplace(self, lambda a, v: a.fill(v), (value,),
                                      lambda s: _inplace.Fill.apply(s, value), False,
                                      internal_check=False)   # Note [Expanded memory]

    def copy_(self, other, non_blocking=False):
        src = other
        if not isinstance(src, _C.TensorBase):
            raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not "
                            f"{_checks.type_name(src)}")
        try:
            np.broadcast_to(src._data, self._data.shape)
        except ValueError:
            raise RuntimeError(
                f"The size of tensor a ({self._data.shape[-1] if self.ndim else 1}) must "
                f"match the size of tensor b ({src._data.shape[-1] if src.ndim else 1}) at "
                "non-singleton dimension") from None
        return _inplace.apply_inplace(
            self, lambda a, b: np.copyto(a, b, casting="unsafe"), (src,),
            lambda s: _inplace.Copy.apply(s, src), False)

    def masked_fill_(self, mask, value):
        _inplace.check_mask_fill(self, mask, value, "masked_fill_")
        _inplace.warn_masked_fill_expanded(self)           # Note [Expanded memory]
        return _inplace.apply_inplace(
            self, lambda a, m, v: np.copyto(a, v, where=np.broadcast_to(m, a.shape),
                                            casting="unsafe"),
            (mask, value), lambda s: _masked_fill(s, mask, value), False,
            overlap_check=False,          # torch does not check masked_fill_'s value
            internal_check=False)

    def __setitem__(self, idx, value):
        _inplace.setitem(self, idx, value)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # -- random fills (cgrad/_random.py draws; recorded with a zero gradient) ------------
    def _random_fill(self, node_values):
        node, values = node_values
        return _inplace.apply_inplace(
            self, lambda a: np.copyto(a, values, casting="unsafe"), (),
            lambda s: _random.record_fill(s, values, node), False)

    def uniform_(self, *args, generator=None, **kwargs):     # torch: uniform_(from=0, to=1)
        """Fills self with numbers drawn uniformly from [from, to)."""
        a, b = _uniform_bounds(args, kwargs)
        _inplace.check_leaf(self)
        return self._random_fill(_random.uniform_values(self, a, b, generator))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fills self with numbers drawn from N(mean, std**2)."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.normal_values(self, mean, std, generator))

    def random_(self, *args, to=None, generator=None, **kwargs):
        """random_(from=0, to=None): fills self with integers drawn uniformly from [from,
        to - 1] (by default up to the largest integer the dtype holds exactly)."""
        if "from" in kwargs:
            args = (kwargs.pop("from"),) + args
        for k in kwargs:
            raise TypeError(f"random_() got an unexpected keyword argument '{k}'")
        _inplace.check_leaf(self)
        return self._random_fill(_random.random_values(self, args, to, generator))

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fills self with numbers drawn from the exponential distribution of rate lambd."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.exponential_values(self, lambd, generator))

    def geometric_(self, p, *, generator=None):
        """Fills self with the number of Bernoulli(p) trials up to the first success."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.geometric_values(self, p, generator))

    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        """Fills self with exp(N(mean, std**2)) draws."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.log_normal_values(self, mean, std, generator))

    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        """Fills self with numbers drawn from the Cauchy distribution."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.cauchy_values(self, median, sigma, generator))

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fills self with 0/1 draws of probability p (a number or a tensor broadcast to
        self)."""
        _inplace.check_leaf(self)
        return self._random_fill(_random.bernoulli_values(self, p, generator))

    def bernoulli(self, p=None, *, generator=None):
        """0/1 draws with self as the probabilities, or with probability p (see
        cgrad.bernoulli)."""
        return _random.bernoulli(self, p, generator=generator)

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        """Indices sampled from the distributions in the rows of self (see
        cgrad.multinomial)."""
        return _random.multinomial(self, num_samples, replacement, generator=generator)

    # -- comparisons (no gradient) -----------------------------------------------------
    def _cmp(self, other, fn):
        if isinstance(other, _C.TensorBase):
            o = other._data
        elif isinstance(other, _CMP_OK):
            o = other
        else:
            return NotImplemented       # == None is False, < "a" a TypeError (torch)
        try:
            return _wrap(fn(self._data, o))
        except ValueError as e:
            _C._raise_if_broadcast(e)
            raise

    def __eq__(self, other):
        return self._cmp(other, np.equal)

    def __ne__(self, other):
        return self._cmp(other, np.not_equal)

    def __lt__(self, other):
        return self._cmp(other, np.less)

    def __le__(self, other):
        return self._cmp(other, np.less_equal)

    def __gt__(self, other):
        return self._cmp(other, np.greater)

    def __ge__(self, other):
        return self._cmp(other, np.greater_equal)

    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__


def _sizes(args, given, name, kw):
    """The shape of reshape/view/expand: several ints, one sequence, or the keyword."""
    if given is not None:
        if args:
            raise TypeError(f"{name}() got multiple values for argument '{kw}'")
        args = (given,)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _uniform_bounds(args, kwargs):
    """(from, to) of Tensor.uniform_(from=0, to=1) (`from` is a Python keyword)."""
    names = ("from", "to")
    if len(args) > 2:
        raise TypeError(f"uniform_() takes from 0 to 2 positional arguments but {len(args)} "
                        "were given")
    vals = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"uniform_() got an unexpected keyword argument '{k}'")
        if k in vals:
            raise TypeError(f"uniform_() got multiple values for argument '{k}'")
        vals[k] = v
    return vals.get("from", 0.0), vals.get("to", 1.0)


_TO_KEYWORDS = ("device", "dtype", "non_blocking", "copy", "memory_format")


def _to_error(args, kwargs, bad=None):
    got = ", ".join([_checks.type_name(a) for a in args]
                    + [f"{k}={_checks.type_name(v)}" for k, v in kwargs.items()])
    why = f" (argument '{bad}' has the wrong type)" if bad else ""
    return TypeError(f"to() received an invalid combination of arguments - got ({got}){why}, "
                     "but expected one of:\n * (cgrad.device device = None, cgrad.dtype dtype = "
                     "None, bool non_blocking = False, bool copy = False, *, "
                     "cgrad.memory_format memory_format = None)\n * (cgrad.dtype dtype, bool "
                     "non_blocking = False, bool copy = False, *, cgrad.memory_format "
                     "memory_format = None)\n * (Tensor tensor, bool non_blocking = False, bool "
                     "copy = False, *, cgrad.memory_format memory_format = None)")


def _is_dtype(a):
    """A dtype argument: a cgrad (NumPy) dtype, a NumPy scalar type, or bool/int/float/complex
    (torch reads Python's types as dtypes too)."""
    return isinstance(a, np.dtype) or (isinstance(a, type) and (
        issubclass(a, np.generic) or a in (builtins.bool, builtins.int, builtins.float,
                                          builtins.complex)))


def _is_dtype_string(a):
    """A string that is no device type but a NumPy dtype name ("float64"): cgrad's dtypes are
    NumPy dtypes, so Tensor.to takes one as a dtype (torch refuses it as a device)."""
    if not isinstance(a, str) or _checks.is_device_string(a):
        return False
    try:
        return _creation._supported(np.dtype(a))
    except TypeError:
        return False


def parse_to(args, kwargs, ndim=None):
    """(dtype or None, copy, channels-last wanted) from the arguments of Tensor.to, in
    torch's three forms; torch's errors for arguments that fit none (the device is checked:
    Note [Devices] in cgrad/_device.py)."""
    for k in kwargs:
        if k not in _TO_KEYWORDS:
            raise _to_error(args, kwargs)
    first = args[0] if args else None
    if isinstance(first, _C.TensorBase) or _is_dtype(first) or _is_dtype_string(first):
        names = ("other", "non_blocking", "copy")     # to(tensor, ...) / to(dtype, ...)
        if "dtype" in kwargs or "device" in kwargs:
            raise _to_error(args, kwargs)
    else:
        names = ("device", "dtype", "non_blocking", "copy")
    if len(args) > len(names):
        if len(args) > 4:
            raise TypeError(f"to() takes from 0 to 4 positional arguments but {len(args)} "
                            "were given")
        raise _to_error(args, kwargs)
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise _to_error(args, kwargs)
        given[k] = v
    for flag in ("non_blocking", "copy"):
        if not isinstance(given.get(flag, False), (builtins.bool, np.bool_)):
            raise _to_error(args, kwargs, flag)
    fmt = given.get("memory_format")
    if fmt is not None and not isinstance(fmt, _device.memory_format):
        raise _to_error(args, kwargs, "memory_format")
    dtype = given.get("dtype")
    if "other" in given:
        other = given["other"]
        dtype = other.dtype if isinstance(other, _C.TensorBase) else other
    if dtype is not None:
        if not (_is_dtype(dtype) or _is_dtype_string(dtype)):
            raise _to_error(args, kwargs, "dtype")
        dtype = _checks.dtype_of(dtype, "to")
    device = _checks.check_device(given.get("device"), "to")
    # torch copies for an explicit index ("cpu:0" is not a CPU tensor's device, "cpu")
    copy = bool(given.get("copy", False)) or (device is not None and device.index is not None)
    return dtype, copy, _device.check_memory_format(fmt, "to", ndim)


def _type_dtype(dtype):
    """The dtype Tensor.type(dtype) asks for: a dtype, a type name or a legacy class."""
    if isinstance(dtype, str):
        head, _, kind = dtype.rpartition(".")
        if head.partition(".")[0] not in ("cgrad", "torch") or (
                kind not in _legacy.BY_NAME and kind != "Tensor"):
            raise ValueError(f"invalid type: '{dtype}'")
        if head.endswith(".cuda"):
            raise RuntimeError("Cannot initialize CUDA: cgrad is not compiled with CUDA "
                               "enabled (it runs on the CPU only)")
        return _dtype.get_default_dtype() if kind == "Tensor" else _legacy.BY_NAME[kind].dtype
    if isinstance(dtype, _legacy.tensortype):
        return dtype.dtype
    if dtype is Tensor:
        return _dtype.get_default_dtype()
    if _is_dtype(dtype):
        return np.dtype(dtype)
    raise TypeError("dtype must be a type, str, or dtype object")


def _layout_name(t):
    return "Sparse" if t.is_sparse else "Strided"


def _new_size(fname, args, size):
    """The size of new_zeros/new_ones/new_empty: varargs, one sequence or size=."""
    if size is not None:
        if args:
            raise TypeError(f"{fname}() got multiple values for argument 'size'")
        return (size,)
    if not args:
        raise TypeError(f"{fname}() missing 1 required positional arguments: \"size\"")
    return args


def _view_dtype(t, dt):
    """Tensor.view(dtype): the same bytes read as another dtype (not differentiable, as in
    torch); with a different element size the last dimension shrinks or grows."""
    tn = _dtype.torch_type_name
    a = t._data
    src = a.dtype
    if dt.itemsize != src.itemsize:
        what = f"to view {tn(src)} as {tn(dt)} (different element sizes)"
        if a.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if a.shape[-1] != 1 and a.strides[-1] != a.itemsize:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got "
                               f"{a.strides[-1] // a.itemsize}")
        ratio = dt.itemsize // src.itemsize
        if ratio > 1 and a.shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got "
                               f"{a.shape[-1]}")
    out = _C._wrap(a.view(dt))
    out._share_version(t)
    return out


def typename(obj):
    """torch.typename: 'cgrad.FloatTensor' for tensors, the qualified type name otherwise."""
    if isinstance(obj, _C.TensorBase):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"
