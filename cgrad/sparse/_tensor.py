"""The sparse COO tensor: a cgrad.Tensor whose storage is (indices, values, shape).

Design. ``SparseTensor`` subclasses ``cgrad.Tensor``, so a sparse tensor is a tensor for the
autograd engine: it can require grad, be the input or output of a Function, be saved with
``ctx.save_for_backward``, and have a (sparse) ``.grad``. The engine reads an output's
metadata (ndim, shape, dtype) from ``t._data``; for a sparse tensor ``_data`` is a read-only
zero-strided placeholder of the right shape and dtype (no memory), an ndarray subclass that
refuses arithmetic: any NumPy ufunc, NumPy function or data method on it raises
NotImplementedError, so a dense op that does not know sparse tensors fails loudly instead of
computing with zeros. The real storage is ``_pattern`` (a shared ``Pattern``: indices, shape,
cached CSR / coalescing structure) and ``_vals`` (an ndarray of the nnz values, in the
user's entry order).

Gradient rules (torch's):
* the gradient of a sparse tensor may be sparse or dense; ``sparse_coo_tensor(i, v)`` maps
  either back to ``v`` (``grad_values[k]`` = the gradient at position (i[0,k], i[1,k]));
* a sparse gradient is always the gradient *as a matrix* (duplicates add up), so gradients
  on a pattern are coalesced, as torch's ``sparse.mm`` / ``to_dense`` give them;
* accumulation: sparse + sparse stays sparse (same pattern: values add, else the entries
  are concatenated), sparse + dense is dense (see ``_accumulate`` / ``_engine_add``).
"""
from __future__ import annotations

import builtins

import numpy as np

from cgrad import _C, _device, _dtype
from cgrad._tensor_str import _add_suffixes, _dtype_str, _tensor_str
from cgrad.autograd.function import Function
from cgrad.sparse._pattern import Pattern, cached_pattern, segment_sum_np
from cgrad.tensor import Tensor

_wrap = _C._wrap
_TensorBase = _C.TensorBase

# The products, sum and segment ops of cgrad/sparse/_ops.py (a module above this one: it
# imports SparseTensor), handed over at import of cgrad (cgrad/__init__.py, _wire)
_OPS = {}


sparse_coo = _device.sparse_coo
strided = _device.strided

_SUPPORTED = ("matmul/mm with a dense operand, t(), coalesce(), to_dense(), sum, softmax, "
              "addition and multiplication by a scalar")


def _unsupported(name):
    return NotImplementedError(
        f"Could not run '{name}' with arguments from the 'SparseCPU' backend: cgrad's sparse "
        f"COO tensors support {_SUPPORTED}. Use Tensor.to_dense() first for other ops.")


class _SparseData(np.ndarray):
    """The ``_data`` of a sparse tensor: a read-only zero-strided array that carries the
    shape and dtype for the engine and refuses to be computed with."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _unsupported(ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")

    def __array_function__(self, func, types, args, kwargs):
        raise _unsupported(func.__name__)

    def __repr__(self):
        return f"<sparse tensor placeholder {self.shape} {self.dtype}>"

    __str__ = __repr__

    def _refuse(name):
        def method(self, *args, **kwargs):
            raise _unsupported(name)
        method.__name__ = name
        return method

    for _n in ("copy", "astype", "reshape", "ravel", "flatten", "transpose", "swapaxes",
               "squeeze", "tolist", "item", "tobytes", "fill", "view", "__getitem__",
               "__setitem__", "__iter__", "__bool__", "__float__", "__int__", "__index__",
               "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "dot", "take",
               "repeat", "put", "sort", "argsort", "nonzero", "clip", "round"):
        locals()[_n] = _refuse(_n)
    del _n, _refuse

    @property
    def T(self):
        raise _unsupported("t")

    @property
    def mT(self):
        raise _unsupported("mT")


_placeholders: dict = {}


def _placeholder(shape, dtype):
    key = (shape, dtype)
    p = _placeholders.get(key)
    if p is None:
        base = np.broadcast_to(np.zeros((), dtype=dtype), shape)
        p = np.ndarray.view(base, _SparseData)
        if len(_placeholders) < 4096:
            _placeholders[key] = p
    return p


_TORCH_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _scalar_name(dt):
    return _TORCH_SCALAR.get(str(dt), str(dt))


def _check_values_dtype(dt):
    if dt == np.float16:
        raise RuntimeError(
            "cgrad sparse tensors do not support float16 values (scipy.sparse has no float16); "
            "use float32 or float64 values")
    if dt.kind not in "biufc":
        raise RuntimeError(f"unsupported dtype for sparse values: {dt}")


def _make(pattern, vals, coalesced=False):
    """A new sparse tensor (no history) with this pattern and values array."""
    t = _TensorBase.__new__(SparseTensor)       # not Tensor.__new__ (the legacy constructor)
    t._data = _placeholder(pattern.shape, vals.dtype)
    t._pattern = pattern
    t._vals = vals
    t._coalesced = coalesced
    return t


def _alias(t):
    """A new sparse tensor sharing t's storage (registered with the engine)."""
    return _make(t._pattern, t._vals, t._coalesced)


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout=cgrad.sparse_coo``), backed by NumPy arrays and SciPy.

    Create one with ``cgrad.sparse_coo_tensor(indices, values, size)``,
    ``Tensor.to_sparse()`` or ``cgrad.sparse.from_scipy``. 1-D and 2-D tensors with scalar
    values (``dense_dim() == 0``) are supported.
    """

    __slots__ = ("_pattern", "_vals", "_coalesced")

    def __init__(self, *args, **kwargs):
        raise TypeError("cgrad.sparse.SparseTensor cannot be constructed directly; use "
                        "cgrad.sparse_coo_tensor(indices, values, size)")

    # -- layout and storage --------------------------------------------------------------
    @property
    def is_sparse(self):
        return True

    @property
    def layout(self):
        return sparse_coo

    def sparse_dim(self):
        return self._pattern.ndim

    def dense_dim(self):
        return 0

    def _nnz(self):
        return self._pattern.nnz

    def _indices(self):
        """The indices (int64, (sparse_dim, nnz)), uncoalesced as stored. Read-only: the
        products cache structure built from them (torch lets them be written)."""
        return _wrap(self._pattern.idx)

    def _values(self):
        """The values as stored (no gradient flows through this alias, as torch)."""
        return _wrap(self._vals)

    def indices(self):
        if not self._coalesced:
            raise RuntimeError(
                "Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._indices()

    def values(self):
        if not self._coalesced:
            raise RuntimeError(
                "Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return _Values.apply(self)

    def is_coalesced(self):
        return self._coalesced

    def _coalesced_(self, coalesced):
        """Assert (or clear) the coalesced flag, as torch's ``_coalesced_``."""
        self._coalesced = bool(coalesced)
        return self

    def coalesce(self):
        """Sort the entries row-major and sum duplicates (differentiable in the values)."""
        if self._coalesced:
            return self
        return _Coalesce.apply(self)

    def t(self):
        if self._pattern.ndim == 1:
            return self
        return _SparseT.apply(self)

    def transpose(self, dim0, dim1):
        from cgrad.ops._util import _norm_dims
        nd = self._pattern.ndim
        d0, d1 = _norm_dims((dim0, dim1), nd)
        if d0 == d1:
            return self
        return self.t()

    def to_dense(self, dtype=None):
        out = _ToDense.apply(self)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, *args, **kwargs):
        return self

    def to_scipy(self):
        """``scipy.sparse.coo_array`` with the same entries (uncoalesced as stored; detached).
        A coo_array (never coo_matrix) keeps ``*`` elementwise."""
        return to_scipy(self)

    def _dense_array(self):
        return _dense_array(self._pattern, self._vals)

    # -- autograd-related copies ------------------------------------------------------------
    def detach(self):
        t = _alias(self)
        t._share_version(self)
        return t

    @property
    def data(self):
        return _alias(self)

    @data.setter
    def data(self, value):
        if type(value) is not SparseTensor:
            raise RuntimeError("cannot set the data of a sparse tensor to a dense tensor")
        if value.shape != self.shape or value.dtype != self.dtype:
            raise RuntimeError("data set to a sparse tensor of a different size or dtype")
        self._pattern, self._vals, self._coalesced = value._pattern, value._vals, value._coalesced

    def clone(self, memory_format=None):
        return _SparseClone.apply(self)

    def __reduce_ex__(self, protocol):
        raise _unsupported("__reduce_ex__")

    def __deepcopy__(self, memo):
        raise _unsupported("__deepcopy__")

    def contiguous(self, memory_format=None):
        raise RuntimeError("unsupported memory format option Contiguous")

    def to(self, *args, **kwargs):
        """Tensor.to's forms (cgrad.tensor.parse_to): self when nothing changes (unless
        copy=True), else a copy with the values cast."""
        from cgrad.tensor import parse_to
        dtype, copy, _ = parse_to(args, kwargs)
        if dtype is None:
            dtype = self._vals.dtype
        if dtype == self._vals.dtype and not copy:
            return self
        _check_values_dtype(dtype)
        return _SparseToCopy.apply(self, dtype)

    def numpy(self, *, force=False):
        raise TypeError(
            "can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def tolist(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._dense_array().item()

    # -- printing ----------------------------------------------------------------------
    def __repr__(self, *, tensor_contents=None):
        indent = len("tensor(")
        dt = self._vals.dtype
        default = _dtype.get_default_dtype()
        suffixes = ["size=" + str(tuple(self.shape)), "nnz=" + str(self._pattern.nnz)]
        if dt not in (default, np.dtype(np.int64), np.dtype(np.bool_)):
            suffixes.append("dtype=" + _dtype_str(dt))
        suffixes.append("layout=" + repr(sparse_coo))
        fn = self.grad_fn
        if fn is not None:
            suffixes.append(f"grad_fn=<{type(fn).__name__}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        ip, vp = "indices=tensor(", "values=tensor("
        idx, vals = self._pattern.idx, self._vals
        istr = _tensor_str(idx, indent + len(ip))
        if idx.size == 0:
            istr += ", size=" + str(tuple(idx.shape))
        vstr = _tensor_str(vals, indent + len(vp))
        if vals.size == 0:
            vstr += ", size=" + str(tuple(vals.shape))
        body = ip + istr + "),\n" + " " * indent + vp + vstr + ")"
        return _add_suffixes("tensor(" + body, suffixes, indent, force_newline=True)

    __str__ = __repr__

    # -- products ----------------------------------------------------------------------
    def matmul(self, other):
        return _OPS["matmul"](self, other)

    def mm(self, other):
        return _OPS["mm"](self, other)

    def mv(self, other):
        return _OPS["matmul"](self, other)

    def __matmul__(self, other):
        other = _as_tensor(other)
        if other is NotImplemented:
            return NotImplemented
        return _OPS["matmul"](self, other)

    def __rmatmul__(self, other):
        other = _as_tensor(other)
        if other is NotImplemented:
            return NotImplemented
        return _OPS["matmul"](other, self)

    def sum(self, dim=None, keepdim=False, dtype=None):
        if keepdim:
            raise NotImplementedError("sum(keepdim=True) is not supported for sparse tensors")
        return _OPS["sum"](self, dim, dtype=dtype)

    # -- arithmetic --------------------------------------------------------------------
    def __add__(self, other):
        return _add(self, other, 1)

    def __radd__(self, other):
        return _radd(other, self, 1)

    def __sub__(self, other):
        return _add(self, other, -1)

    def __rsub__(self, other):
        return _radd(other, self, -1)

    def add(self, other, alpha=1):
        return _add(self, other, alpha)

    def sub(self, other, alpha=1):
        return _add(self, other, -alpha)

    def __mul__(self, other):
        return _mul(self, other)

    __rmul__ = __mul__

    def mul(self, other):
        return _mul(self, other)

    def __truediv__(self, other):
        if isinstance(other, _SCALARS):
            return _SparseDivScalar.apply(self, other)
        raise _unsupported("div")

    def div(self, other):
        return self / other

    def __rtruediv__(self, other):
        raise _unsupported("div")

    def __neg__(self):
        return _SparseNeg.apply(self)

    def neg(self):
        return _SparseNeg.apply(self)

    def __pow__(self, other, mod=None):
        raise _unsupported("pow")

    def __rpow__(self, other, mod=None):
        raise _unsupported("pow")

    # -- views and indexing (not defined on sparse tensors) -------------------------------
    def view(self, *shape):
        raise _unsupported("aten::view")

    def reshape(self, *shape):
        raise RuntimeError("reshape is not implemented for sparse tensors")

    def flatten(self):
        raise RuntimeError("reshape is not implemented for sparse tensors")

    def __getitem__(self, idx):
        raise _unsupported("aten::index")

    def __setitem__(self, idx, value):
        raise _unsupported("aten::index_put_")

    def __iter__(self):
        raise _unsupported("aten::select")

    def zero_(self):
        """Remove every entry (in place), as torch's ``zero_`` on a sparse tensor."""
        self._check_inplace()
        self._pattern = Pattern(np.zeros((self._pattern.ndim, 0), dtype=np.int64),
                                self._pattern.shape, canonical=True, check=False)
        self._vals = np.zeros(0, dtype=self._vals.dtype)
        self._coalesced = True
        self._bump_version()
        return self


_SCALARS = (builtins.int, builtins.float, builtins.bool, np.number, np.bool_)


def _as_tensor(x):
    if isinstance(x, _TensorBase):
        return x
    if isinstance(x, np.ndarray):
        return _wrap(x)
    if isinstance(x, (list, tuple)):
        from cgrad._creation import tensor
        return tensor(x)
    return NotImplemented


# --------------------------------------------------------------------------------------
# Construction

def _index_array(indices):
    """indices (Tensor, ndarray or nested list) -> (int64 ndarray (d, nnz), cache key,
    version, owned). ``owned``: the array is a fresh one that nobody else holds; otherwise it
    may be the caller's memory (a Pattern must copy it: Note [Index cache])."""
    owned = False
    if isinstance(indices, _TensorBase):
        arr = indices._data
        key, version = indices, indices._version
    elif isinstance(indices, np.ndarray):
        arr = indices
        key, version = (indices, 0) if not indices.flags.writeable else (None, 0)
    else:
        if not isinstance(indices, (list, tuple)):
            from cgrad._checks import type_name
            raise TypeError(f"sparse_coo_tensor(): argument 'indices' (position 1) must be "
                            f"Tensor, not {type_name(indices)}")
        arr = np.asarray(indices)
        owned = isinstance(indices, (list, tuple))      # always a new array
        if arr.size == 0:
            arr = arr.astype(np.int64).reshape(arr.shape if arr.ndim == 2 else (0, 0))
            owned = True
        key, version = None, 0
    if arr.dtype.kind not in "iu":
        raise RuntimeError(f"indices must be an int64 tensor, got {arr.dtype}")
    if arr.ndim != 2:
        raise RuntimeError(
            f"indices must be sparse_dim x nnz, but got: {list(arr.shape)}")
    if arr.dtype != np.int64:
        arr = arr.astype(np.int64)
        owned = True
    if not (arr.flags.c_contiguous or arr.shape[1] <= 1):
        arr = np.ascontiguousarray(arr)
        owned = True
    return arr, key, version, owned


def _shape_of(size, idx):
    if size is None:
        if idx.shape[1] == 0:
            return (0,) * idx.shape[0]
        return tuple(int(m) + 1 for m in idx.max(axis=1))
    if isinstance(size, (builtins.int, np.integer)):
        size = (size,)
    import operator
    from cgrad._checks import type_name
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"sparse_coo_tensor(): argument 'size' (position 3) must be tuple of "
                        f"ints, not {type_name(size)}")
    try:
        shape = tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError("sparse_coo_tensor(): argument 'size' (position 3) must be tuple of "
                        "ints") from None
    if any(s < 0 for s in shape):
        raise RuntimeError(f"sparse_coo_tensor: negative dimension in size {list(shape)}")
    return shape


def _pattern_for(indices, size):
    """The (possibly cached) Pattern for user indices and a size (None: inferred)."""
    if isinstance(indices, Pattern):
        return indices
    if type(indices) is SparseTensor:
        return indices._pattern
    idx, key, version, owned = _index_array(indices)
    shape = _shape_of(size, idx)
    if len(shape) != idx.shape[0]:
        if len(shape) > idx.shape[0]:
            raise NotImplementedError(
                f"cgrad sparse tensors have no dense dimensions: got indices for "
                f"{idx.shape[0]} sparse dims and a size of {len(shape)} dims")
        raise RuntimeError(
            f"number of dimensions must be sparse_dim ({idx.shape[0]}) + dense_dim (0), but "
            f"got {len(shape)}")
    if len(shape) not in (1, 2):
        raise NotImplementedError(
            f"cgrad sparse tensors are 1-D or 2-D, got {len(shape)} sparse dimensions")
    if key is not None:
        return cached_pattern(key, idx, shape, version, owned)
    return Pattern(idx if owned else idx.copy(), shape)


def _values_tensor(values, dtype):
    if isinstance(values, _TensorBase):
        if type(values) is SparseTensor:
            raise TypeError("values must be a dense tensor")
        if dtype is not None and np.dtype(dtype) != values.dtype:
            values = values.to(np.dtype(dtype))
        return values
    from cgrad._creation import tensor
    return tensor(values, dtype=dtype)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with ``values[k]`` at ``indices[:, k]`` (torch's signature).

    Never coalesces (duplicates are kept; ``is_coalesced()`` is False unless
    ``is_coalesced=True`` asserts it). When ``values`` requires grad the result has
    ``grad_fn=<SparseCooTensorWithDimsAndTensorsBackward0>`` and the gradient flows back to
    ``values``. Works inside a Function's forward on raw inputs. Indices are validated
    (RuntimeError for negative or out-of-range ones) and copied: unlike torch, the result
    does not alias ``indices``, so a later write to them does not change it (its products
    cache structure on them; Note [Index cache]); values must be 1-D (no hybrid tensors)
    and not float16 (scipy.sparse has no float16).
    """
    from cgrad import _checks
    _checks.check_device(device, "sparse_coo_tensor")
    pattern = _pattern_for(indices, size)
    values = _values_tensor(values, dtype)
    if values._data.ndim != 1:
        if values._data.ndim == 0:
            raise RuntimeError("values must be a 1-D tensor of nnz values")
        raise NotImplementedError(
            "cgrad sparse tensors have scalar values (dense_dim() == 0); got values of "
            f"shape {list(values.shape)}")
    if values._data.shape[0] != pattern.nnz:
        raise RuntimeError(
            f"indices and values must have same nnz, but got nnz from indices: {pattern.nnz}, "
            f"nnz from values: {values._data.shape[0]}")
    _check_values_dtype(values._data.dtype)
    out = _SparseCoo.apply(pattern, values, bool(is_coalesced))
    if requires_grad:
        if values._data.dtype.kind not in "fc":
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        if out.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables.")
        out.requires_grad_(True)
    return out


def from_scipy(m, dtype=None, requires_grad=False):
    """A sparse COO tensor from any scipy.sparse matrix or array (entries as stored)."""
    import scipy.sparse as sp
    if not sp.issparse(m):
        raise TypeError(
            f"from_scipy expects a scipy.sparse matrix or array, got {type(m).__name__}")
    coo = m.tocoo()
    idx = np.vstack([np.asarray(coo.row, dtype=np.int64), np.asarray(coo.col, dtype=np.int64)])
    vals = np.asarray(coo.data)
    if dtype is not None:
        vals = vals.astype(np.dtype(dtype))
    coalesced = bool(getattr(coo, "has_canonical_format", False))
    return sparse_coo_tensor(idx, _wrap(vals), tuple(coo.shape),
                             requires_grad=requires_grad, is_coalesced=coalesced)


def to_scipy(t):
    """``scipy.sparse.coo_array`` of a 2-D sparse tensor (detached; entries as stored)."""
    import scipy.sparse as sp
    p = t._pattern
    if p.ndim != 2:
        raise RuntimeError("to_scipy: only 2-D sparse tensors convert to scipy.sparse")
    return sp.coo_array((t._vals, (p.idx[0], p.idx[1])), shape=p.shape)


def _dense_array(pattern, vals):
    out = np.zeros(pattern.shape, dtype=vals.dtype)
    if pattern.nnz:
        flat = out.reshape(-1)
        if pattern.is_canonical():
            flat[pattern.lin()] = vals
        else:
            np.add.at(flat, pattern.lin(), vals)
    return out


# --------------------------------------------------------------------------------------
# Differentiable building blocks

class _SparseCoo(Function):
    """sparse_coo_tensor(pattern, values).  d/dvalues = the gradient at each entry."""
    _node_name = "SparseCooTensorWithDimsAndTensorsBackward0"

    @staticmethod
    def forward(ctx, pattern, values, coalesced):
        if ctx is not None:
            ctx._aux = pattern
        return _make(pattern, values._data, coalesced)

    @staticmethod
    def backward(ctx, g):
        return None, values_on(ctx._aux, g), None


class _Values(Function):
    """s.values() (any pattern).  d/ds = a sparse tensor on s's pattern."""
    _node_name = "ValuesBackward0"

    @staticmethod
    def forward(ctx, s):
        if ctx is not None:
            ctx._aux = (s._pattern, s._coalesced)
        return s._vals

    @staticmethod
    def backward(ctx, g):
        # The gradient of a sparse tensor is the gradient of its matrix, so duplicate
        # entries (which add up in the matrix) must not be counted twice: a tensor with
        # duplicates gets its gradient on the coalesced pattern, read from one entry per
        # position (the value gradients are equal on duplicates whenever the loss depends on
        # the matrix only, as for every op here).
        pattern, coalesced = ctx._aux
        rep = pattern.representatives()
        if rep is None:
            return _SparseCoo.apply(pattern, g, coalesced)
        return _SparseCoo.apply(pattern.coalesced()[0], g[rep], True)


def values_of(s):
    """The values of sparse tensor s as a Tensor that carries s's gradient."""
    return _Values.apply(s)


def values_on(pattern, g):
    """The gradient of the values on `pattern` given the gradient `g` of the sparse tensor
    (sparse or dense): grad_values[k] = g at the position of entry k (a Tensor, with graph
    when g has one)."""
    if type(g) is SparseTensor:
        gp = g._pattern
        if gp is pattern:
            v = _Values.apply(g)
            if not pattern.has_duplicates():
                return v
            # g's matrix holds the sum of its duplicates: read that sum for every entry
            SegmentGather, SegmentSum = _OPS["SegmentGather"], _OPS["SegmentSum"]
            cp, inverse = pattern.coalesced()
            return SegmentGather.apply(SegmentSum.apply(v, inverse, cp.nnz), inverse)
        coal = pattern._coal
        if coal is not None and gp is coal[0]:
            v = _Values.apply(g)
            return v if coal[1] is None else v[coal[1]]
        return _lookup_values(pattern, g)
    if pattern.ndim == 2:
        return g[pattern.idx[0], pattern.idx[1]]
    return g[pattern.idx[0]]


def _lookup_values(pattern, g):
    """values_on for a sparse g on an unrelated pattern: binary search of the positions."""
    gc = g.coalesce()
    glin = gc._pattern.lin()
    lin = pattern.lin()
    dt = gc._vals.dtype
    if glin.shape[0] == 0:
        return _wrap(np.zeros(pattern.nnz, dtype=dt))
    pos = np.searchsorted(glin, lin)
    np.minimum(pos, glin.shape[0] - 1, out=pos)
    found = glin[pos] == lin
    v = _Values.apply(gc)[pos]
    if found.all():
        return v
    return v * _wrap(found.astype(dt))


class _ToDense(Function):
    """s.to_dense().  d/ds = the gradient on s's coalesced pattern (sparse)."""
    _node_name = "ToDenseBackward0"

    @staticmethod
    def forward(ctx, s):
        if ctx is not None:
            ctx._aux = s._pattern
        return _dense_array(s._pattern, s._vals)

    @staticmethod
    def backward(ctx, g):
        cp = ctx._aux.coalesced()[0]
        if type(g) is SparseTensor:
            return g
        return _SparseCoo.apply(cp, values_on(cp, g), True)


class _ToSparse(Function):
    """dense.to_sparse(): the nonzero entries, coalesced.  d/ddense = g.to_dense()."""
    _node_name = "ToSparseBackward1"

    @staticmethod
    def forward(ctx, d):
        arr = d._data
        if arr.ndim not in (1, 2):
            raise NotImplementedError(
                f"to_sparse: cgrad sparse tensors are 1-D or 2-D, got {arr.ndim} dims")
        _check_values_dtype(arr.dtype)
        nz = np.nonzero(arr)
        idx = np.vstack([np.asarray(i, dtype=np.int64) for i in nz]) if arr.ndim \
            else np.zeros((0, 0), dtype=np.int64)
        p = Pattern(np.ascontiguousarray(idx), tuple(arr.shape), canonical=True, check=False)
        return _make(p, arr[nz], True)

    @staticmethod
    def backward(ctx, g):
        return g.to_dense() if type(g) is SparseTensor else g


def to_sparse(t, sparse_dim=None):
    """Tensor.to_sparse(): a coalesced sparse COO tensor of the nonzero entries."""
    if type(t) is SparseTensor:
        return t
    if sparse_dim is not None and sparse_dim != t.dim():
        raise NotImplementedError("to_sparse(sparse_dim) with dense dimensions is not supported")
    return _ToSparse.apply(t)


class _Coalesce(Function):
    """s.coalesce(): sorted unique entries, duplicates summed.  As matrices the output
    equals the input, so d/ds = g."""
    _node_name = "CoalesceBackward0"

    @staticmethod
    def forward(ctx, s):
        p = s._pattern
        cp = p.coalesced()[0]
        return _make(cp, p.coalesce_values(s._vals), True)

    @staticmethod
    def backward(ctx, g):
        return g


class _SparseT(Function):
    """s.t() of a 2-D sparse tensor (same entries, rows and columns swapped)."""
    _node_name = "TBackward0"

    @staticmethod
    def forward(ctx, s):
        return _make(s._pattern.T(), s._vals, False)

    @staticmethod
    def backward(ctx, g):
        return g.t()


class _SparseClone(Function):
    _node_name = "CloneBackward0"

    @staticmethod
    def forward(ctx, s):
        return _make(s._pattern, s._vals.copy(), s._coalesced)

    @staticmethod
    def backward(ctx, g):
        return g


class _SparseToCopy(Function):
    _node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, s, dtype):
        if ctx is not None:
            ctx._aux = s._vals.dtype
        return _make(s._pattern, s._vals.astype(dtype), s._coalesced)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx._aux), None


class _SparseMulScalar(Function):
    _node_name = "MulBackward0"

    @staticmethod
    def forward(ctx, s, c):
        if ctx is not None:
            ctx._aux = c
        v = s._vals * c
        if v.dtype != s._vals.dtype and isinstance(c, builtins.float) and s._vals.dtype.kind == "f":
            v = v.astype(s._vals.dtype)
        return _make(s._pattern, v, s._coalesced)

    @staticmethod
    def backward(ctx, g):
        return g * ctx._aux, None


class _SparseDivScalar(Function):
    _node_name = "DivBackward0"

    @staticmethod
    def forward(ctx, s, c):
        if ctx is not None:
            ctx._aux = c
        v = s._vals / c
        if v.dtype != s._vals.dtype and s._vals.dtype.kind == "f":
            v = v.astype(s._vals.dtype)
        return _make(s._pattern, v, s._coalesced)

    @staticmethod
    def backward(ctx, g):
        return g / ctx._aux, None


class _SparseNeg(Function):
    _node_name = "NegBackward0"

    @staticmethod
    def forward(ctx, s):
        return _make(s._pattern, np.negative(s._vals), s._coalesced)

    @staticmethod
    def backward(ctx, g):
        return -g


def _cat_entries(a, b, alpha):
    """(pattern, values, coalesced) of a + alpha * b for two sparse tensors (no graph)."""
    va, vb = a._vals, b._vals
    if alpha != 1:
        vb = vb * alpha
    dt = np.result_type(va, vb)
    if a._pattern is b._pattern:
        return a._pattern, np.add(va, vb, dtype=dt), a._coalesced and b._coalesced
    pa, pb = a._pattern, b._pattern
    idx = np.concatenate([pa.idx, pb.idx], axis=1)
    vals = np.concatenate([va.astype(dt, copy=False), vb.astype(dt, copy=False)])
    p = Pattern(idx, pa.shape, check=False)
    if a._coalesced and b._coalesced:
        cp = p.coalesced()[0]
        return cp, p.coalesce_values(vals), True
    return p, vals, False


class _SparseAdd(Function):
    """a + alpha * b for sparse a, b (sparse result).  d/da = g, d/db = alpha * g."""
    _node_name = "AddBackward0"

    @staticmethod
    def forward(ctx, a, b, alpha):
        if a.shape != b.shape:
            raise RuntimeError(
                f"add: expected 'self' and 'other' to have same size, but self has size "
                f"{list(a.shape)} while other has size {list(b.shape)} (FYI: op2-sparse "
                f"addition does not currently support broadcasting)")
        if ctx is not None:
            ctx._aux = alpha
        p, v, c = _cat_entries(a, b, alpha)
        return _make(p, v, c)

    @staticmethod
    def backward(ctx, g):
        alpha = ctx._aux
        return g, (g if alpha == 1 else g * alpha), None


class _SparseSub(_SparseAdd):
    _node_name = "SubBackward0"


class _DenseSparseAdd(Function):
    """d + alpha * s for dense d and sparse s (dense result).  d/dd = g, d/ds = alpha * g."""
    _node_name = "AddBackward0"

    @staticmethod
    def forward(ctx, d, s, alpha):
        D = d._data
        if D.shape != s._data.shape:
            raise RuntimeError(
                f"add: expected 'self' and 'other' to have same size, but self has size "
                f"{list(D.shape)} while other has size {list(s.shape)}")
        if ctx is not None:
            ctx._aux = alpha
        vals = s._vals if alpha == 1 else s._vals * alpha
        out = D.astype(np.result_type(D, vals), copy=True)
        if s._pattern.nnz:
            p = s._pattern
            np.add.at(out, tuple(p.idx), vals)
        return out

    @staticmethod
    def backward(ctx, g):
        alpha = ctx._aux
        return g, (g if alpha == 1 else g * alpha), None


class _DenseSparseSub(_DenseSparseAdd):
    _node_name = "SubBackward0"


def _add(a, other, alpha):
    """a + alpha * other with a sparse."""
    if type(other) is SparseTensor:
        return (_SparseAdd if alpha == 1 else _SparseSub).apply(a, other, alpha)
    raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")


def _radd(other, s, alpha):
    """other + alpha * s with s sparse and other dense (dense result)."""
    if isinstance(other, _SCALARS):
        raise RuntimeError(
            "add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    other = _as_tensor(other)
    if other is NotImplemented:
        return NotImplemented
    return (_DenseSparseAdd if alpha == 1 else _DenseSparseSub).apply(other, s, alpha)


def _mul(s, other):
    if isinstance(other, _SCALARS):
        return _SparseMulScalar.apply(s, other)
    if type(other) is SparseTensor:
        raise _unsupported("mul (sparse * sparse)")
    other = _as_tensor(other)
    if other is NotImplemented:
        return NotImplemented
    if other._data.ndim == 0:
        return _SparseCoo.apply(s._pattern, values_of(s) * other, s._coalesced)
    if tuple(other.shape) != tuple(s.shape):
        raise RuntimeError(
            f"mul: sparse * dense needs operands of the same size, got {list(s.shape)} and "
            f"{list(other.shape)}")
    # sparse * dense -> sparse on s's pattern (duplicates are each scaled: correct sums)
    return _SparseCoo.apply(s._pattern, values_of(s) * values_on(s._pattern, other),
                            s._coalesced)


# --------------------------------------------------------------------------------------
# Engine hooks: accumulation into .grad and sums of gradients (registered with _C)

def _add_nograd(a, b):
    """a + b (no graph) for gradients: sparse + sparse -> sparse, otherwise dense."""
    a_sp, b_sp = type(a) is SparseTensor, type(b) is SparseTensor
    if a_sp and b_sp:
        p, v, c = _cat_entries(a, b, 1)
        return _make(p, v, c)
    s, d = (a, b) if a_sp else (b, a)
    D = d._data
    out = D.astype(np.result_type(D, s._vals), copy=True)
    if s._pattern.nnz:
        np.add.at(out, tuple(s._pattern.idx), s._vals)
    return _wrap(out)


def _engine_add(a, b, create_graph):
    """Sum of two gradients for one engine slot (either may be sparse). Never in place."""
    if create_graph:
        if type(a) is SparseTensor and type(b) is not SparseTensor:
            return b + a
        return a + b
    return _add_nograd(a, b)


def _accumulate(cur, g, owned, create_graph):
    """The new ``.grad`` of a leaf (torch's AccumulateGrad) when `g` or the current grad
    `cur` is sparse. Identity is kept as torch does: sparse += sparse updates cur's storage
    (never a shared buffer), dense += sparse adds into cur's array in place."""
    if create_graph:
        if cur is None:
            return g.clone()
        return _engine_add(cur, g, True)
    if cur is None:
        if type(g) is SparseTensor:
            return _alias(g) if owned else _make(g._pattern, g._vals.copy(), g._coalesced)
        return _wrap(g._data.copy())
    cur_sp, g_sp = type(cur) is SparseTensor, type(g) is SparseTensor
    if cur_sp and g_sp:
        p, v, c = _cat_entries(cur, g, 1)
        if v.dtype != cur._vals.dtype:
            v = v.astype(cur._vals.dtype)
        cur._pattern, cur._vals, cur._coalesced = p, v, c
        cur._bump_version()
        return cur
    if not cur_sp:      # dense .grad += sparse g, in place when we may
        arr = cur._data
        if (isinstance(arr, np.ndarray) and type(arr) is np.ndarray and arr.flags.writeable
                and arr.shape == g._data.shape and arr.dtype == g._vals.dtype):
            if g._pattern.nnz:
                np.add.at(arr, tuple(g._pattern.idx), g._vals)
            cur._bump_version()
            return cur
    return _add_nograd(cur, g)


_C._register_sparse(SparseTensor, _accumulate, _engine_add, _alias)
