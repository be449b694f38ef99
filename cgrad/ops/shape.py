"""Views and reshapes (see cgrad/ops/__init__.py for the conventions): reshape/view,
expand, clone, transpose/t/swapdims, permute, x.T/x.mT/x.mH/x.H, adjoint, squeeze/unsqueeze,
flatten/unflatten/ravel, movedim, view_as/reshape_as, narrow.

Views stay views where torch returns views (reshape of a viewable input, expand, transposes
and permutations, squeeze, flatten of a contiguous tensor, unflatten, narrow), with torch's
node names and errors. Every backward is written with cgrad ops (double backward works).
Joining and splitting (cat, stack, split, ...) live in cgrad/ops/joining.py, a[idx] in
cgrad/ops/indexing.py.
"""
from __future__ import annotations

import operator

import numpy as np

from cgrad._warn import warn as _warn
from cgrad._C import TensorBase
from cgrad.autograd.function import Function
from cgrad.ops._util import _norm_dims
from cgrad.ops.indexing import SelectIndex, SliceIndex

_FULL = slice(None)


def _infer_shape(shape, numel, fname="view"):
    """shape (ints, one of them possibly -1) checked against numel, with -1 inferred.
    Plain Python products: np.prod on a short list costs ~1.5 us a call, and views run
    this on every call (nanoGPT's step: 61 times)."""
    shape = list(shape)
    neg = -1
    rest = 1
    for i, s in enumerate(shape):
        if type(s) is not int:
            try:
                shape[i] = s = operator.index(s)
            except TypeError:
                from cgrad._checks import type_name
                raise TypeError(f"{fname}(): argument 'size' must be tuple of ints, but found "
                                f"element of type {type_name(s)} at pos {i}") from None
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
        if s == -1:
            if neg >= 0:
                raise RuntimeError("only one dimension can be inferred")
            neg = i
        else:
            rest *= s
    if neg >= 0:
        if rest == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because "
                               "the unspecified dimension size -1 can be any value and is "
                               "ambiguous")
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg] = numel // rest
    elif rest != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


class Reshape(Function):
    """reshape(a, shape).  d/da = g.reshape(a.shape)."""
    _node_name = "ReshapeAliasBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        if ctx is not None:
            ctx._aux = a._data.shape
        return a._data.reshape(_infer_shape(shape, a._data.size, "reshape"))

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


class View(Function):
    """view(a, shape): like reshape but never copies.  d/da = g.reshape(a.shape)."""
    _node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        new = _infer_shape(shape, arr.size)
        out = arr.view()
        try:
            out.shape = new          # raises instead of copying
        except AttributeError:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) "
                "instead.") from None
        return out

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


def _expand_shape(arr, shape):
    """torch.expand's target shape (-1 keeps a size), with torch's errors."""
    nd, n = arr.ndim, len(shape)
    if n < nd:
        from cgrad._C import _type_name
        raise RuntimeError(
            f"expand({_type_name(arr)}{{{list(arr.shape)}}}, size={list(shape)}): the number "
            f"of sizes provided ({n}) must be greater or equal to the number of dimensions in "
            f"the tensor ({nd})")
    out = []
    for i, s in enumerate(shape):
        try:
            s = operator.index(s)
        except TypeError:
            from cgrad._checks import type_name
            raise TypeError(f"expand(): argument 'size' (position 1) must be tuple of ints, not "
                            f"{type_name(s)}") from None
        j = i - (n - nd)
        if j < 0:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
        else:
            cur = arr.shape[j]
            if s == -1:
                s = cur
            elif cur != 1 and s != cur:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) must match the existing size "
                    f"({cur}) at non-singleton dimension {i}.  Target sizes: {list(shape)}.  "
                    f"Tensor sizes: {list(arr.shape)}")
            elif s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                                   f"{list(shape)}")
        out.append(s)
    return tuple(out)


class Expand(Function):
    """expand(a, shape): a broadcast view.  d/da = sum_to(g, a.shape)."""
    _node_name = "ExpandBackward0"

    @staticmethod
    def forward(ctx, a, shape):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        out = None
        if -1 not in shape:
            try:
                out = np.broadcast_to(arr, shape)
            except (ValueError, TypeError):
                pass                 # torch's message, or a shape with -1 or odd entries
        if out is None:
            out = np.broadcast_to(arr, _expand_shape(arr, shape))
        if out.size == arr.size:
            # nothing repeated (size-1 dims added or kept): an ordinary view
            out = arr.reshape(out.shape)
        elif arr.flags.writeable:
            # as torch, the memory stays writable (broadcast_to makes the view read-only; its
            # base is still the array that owns the memory, which the view tracking of
            # _C_function.pxi needs): an in-place op on the view itself raises torch's overlap
            # error (Note [Expanded memory] in ops/inplace.py), one on a part of it without
            # repeats (a chunk of width one, a row of an expanded column) writes through to a
            out.flags.writeable = True
        return out

    @staticmethod
    def backward(ctx, g):
        from cgrad.ops.reductions import sum_to
        return sum_to(g, ctx._aux), None


class Clone(Function):
    """clone(a).  d/da = g."""
    _node_name = "CloneBackward0"

    @staticmethod
    def forward(ctx, a, contiguous=False):
        # torch's default memory_format=torch.preserve_format keeps the input's stride order
        # (a permuted tensor stays permuted, so a later reshape of the clone copies, as in
        # torch; an expanded one becomes contiguous); contiguous() asks for C order
        x = a._data
        return x.copy(order="C" if contiguous or 0 in x.strides else "K")

    @staticmethod
    def backward(ctx, g):
        return (g, None)


class UnsafeView(Reshape):
    """reshape that had to copy (non-contiguous input)."""
    _node_name = "UnsafeViewBackward0"


class ViewReshape(Reshape):
    """reshape of a contiguous tensor: a view."""
    _node_name = "ViewBackward0"


def reshape(a, shape):
    """torch.reshape: a view when the input is contiguous, a copy otherwise."""
    arr = a._data
    if arr.flags.c_contiguous:
        return ViewReshape.apply(a, shape)
    # a strided input: a view (torch's _reshape_alias) when the strides allow it, else a copy
    v = arr.view()
    try:
        v.shape = _infer_shape(shape, arr.size)
    except AttributeError:
        return UnsafeView.apply(a, shape)
    return Reshape.apply(a, shape)


# ----------------------------------------------------------------------------------------
# indexing: a[idx] with torch's semantics
# ----------------------------------------------------------------------------------------
# torch applies an index in two steps (torch/csrc/autograd/python_variable_indexing.cpp):
# first the basic items in order (ints select, slices slice, None unsqueezes, Python bools
# unsqueeze and become an index [0] or []), which gives a view; then the tensor items
# (integer arrays, boolean masks) on that view with NumPy's advanced-indexing rules, slices
# of the first step standing as ':' placeholders. The only difference from NumPy is where
# ints sit: NumPy treats an int next to an index array as an index array too, so
# x[1, :, [0, 1]] has shape (2, 3) in NumPy and (3, 2) in torch. Purely basic indices (no
# arrays) give NumPy views and need no translation.






# ----------------------------------------------------------------------------------------
# transposes
# ----------------------------------------------------------------------------------------
def t(input):
    """Transpose of a tensor with at most 2 dims (0-D and 1-D tensors are returned as is)."""
    return T.apply(input)


def transpose(input, dim0, dim1):
    """A view with dims dim0 and dim1 swapped."""
    return Transpose.apply(input, dim0, dim1)


swapdims = transpose


def swapaxes(input, axis0, axis1):
    """transpose with NumPy's name (and torch's argument names for it)."""
    return Transpose.apply(input, axis0, axis1)


def permute(input, dims):
    """A view with the dims reordered: ``out.shape[i] == input.shape[dims[i]]``."""
    if isinstance(dims, TensorBase):
        dims = dims.tolist()
    return Permute.apply(input, tuple(dims))


def _permute_method(self, *args, dims=None):
    """x.permute(1, 0), x.permute((1, 0)) or x.permute(dims=(1, 0))."""
    if dims is not None:
        if args:
            raise TypeError("permute() got multiple values for argument 'dims'")
        args = (dims,)
    return Permute.apply(self, permute_dims(args))


def _no_complex(x, what):
    if x._data.dtype.kind == "c":
        raise NotImplementedError(f"{what} of a complex tensor (conjugation) is not supported")


def _mT(self):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {nd}-D tensor.")
    return Transpose.apply(self, -2, -1)


def _mH(self):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {nd}-D tensor.")
    _no_complex(self, "tensor.mH")
    return Transpose.apply(self, -2, -1)


def _H(self):
    nd = self._data.ndim
    if nd != 2:
        extra = ". For batches of matrices, consider using tensor.mH" if nd > 2 else "."
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{nd}-D tensor{extra}")
    _no_complex(self, "tensor.H")
    return Transpose.apply(self, 0, 1)


def adjoint(input):
    """The conjugate transpose of the last two dims (the transpose for real tensors)."""
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {nd}-D tensor.")
    _no_complex(input, "adjoint()")
    return Transpose.apply(input, -2, -1)


# ----------------------------------------------------------------------------------------
# transposes and permutations (views)
# ----------------------------------------------------------------------------------------
def _wrap_dim(d, nd):
    """torch's maybe_wrap_dim (a 0-d tensor accepts dims -1 and 0)."""
    d = operator.index(d)
    n = max(nd, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % n


class T(Function):
    """t(a): transpose of a 0/1/2-D tensor (a view).  d/da = g.t()."""
    _node_name = "TBackward0"

    @staticmethod
    def forward(ctx, a):
        arr = a._data
        if arr.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{arr.ndim}D")
        return arr.T

    @staticmethod
    def backward(ctx, g):
        return T.apply(g)


class Transpose(Function):
    """transpose(a, d0, d1) (a view).  d/da = g.transpose(d0, d1)."""
    _node_name = "TransposeBackward0"

    @staticmethod
    def forward(ctx, a, d0, d1):
        arr = a._data
        nd = arr.ndim
        d0, d1 = _wrap_dim(d0, nd), _wrap_dim(d1, nd)
        if ctx is not None:
            ctx._aux = (d0, d1)
        if nd == 0:
            return arr.view()
        return np.swapaxes(arr, d0, d1)

    @staticmethod
    def backward(ctx, g):
        return Transpose.apply(g, *ctx._aux), None, None


class Permute(Function):
    """permute(a, dims) (a view).  d/da = g.permute(inverse of dims)."""
    _node_name = "PermuteBackward0"

    @staticmethod
    def forward(ctx, a, dims):
        arr = a._data
        nd = arr.ndim
        if len(dims) != nd:
            raise RuntimeError(
                "permute(sparse_coo): number of dimensions in the tensor input does not match "
                "the length of the desired ordering of dimensions i.e. input.dim() = "
                f"{nd} is not equal to len(dims) = {len(dims)}")
        dims = tuple(_wrap_dim(d, nd) for d in dims)
        if len(set(dims)) != nd:
            raise RuntimeError("permute(): duplicate dims are not allowed.")
        if ctx is not None:
            ctx._aux = dims
        return np.transpose(arr, dims) if nd else arr.view()

    @staticmethod
    def backward(ctx, g):
        dims = ctx._aux
        inv = [0] * len(dims)
        for i, d in enumerate(dims):
            inv[d] = i
        return Permute.apply(g, tuple(inv)), None


def permute_dims(dims):
    """Tensor.permute's argument forms: permute(1, 0) or permute((1, 0))."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    if len(dims) == 1 and isinstance(dims[0], TensorBase):
        return tuple(dims[0].tolist())
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    for d in dims:
        if not isinstance(d, (int, np.integer)):
            from cgrad._checks import type_name
            raise TypeError(f"permute(): argument 'dims' (position 1) must be tuple of ints, "
                            f"not {type_name(d)}")
    return dims


_T_WARNING = ("The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
              "deprecated and it will throw an error in a future release. Consider `x.mT` to "
              "transpose batches of matrices or `x.permute(*cgrad.arange(x.ndim - 1, -1, -1))` "
              "to reverse the dimensions of a tensor.")


def reverse_dims(x):
    """x.T: all dims reversed (torch warns for tensors that are not 2-D)."""
    nd = x._data.ndim
    if nd != 2:
        _warn(_T0_WARNING if nd == 0 else _T_WARNING, UserWarning)
    return Permute.apply(x, tuple(range(nd - 1, -1, -1)))


class Unsqueeze(Function):
    """unsqueeze(a, dim).  d/da = g.squeeze(dim)."""
    _node_name = "UnsqueezeBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        nd = a._data.ndim + 1
        if not -nd <= dim < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {dim})")
        if ctx is not None:
            ctx._aux = a._data.shape
        return np.expand_dims(a._data, dim % nd)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


# ----------------------------------------------------------------------------------------
# movedim
# ----------------------------------------------------------------------------------------
def movedim(input, source, destination):
    """Move dim(s) `source` to position(s) `destination`, the others keep their order."""
    nd = input._data.ndim
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)")
    src_n = _norm_dims(src, nd) if src else ()
    dst_n = _norm_dims(dst, nd) if dst else ()
    for name, orig, norm in (("source", src, src_n), ("destination", dst, dst_n)):
        if len(set(norm)) != len(norm):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(orig)})")
    order = [None] * nd
    for s, d in zip(src_n, dst_n):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in set(src_n))
    perm = tuple(o if o is not None else next(rest) for o in order)
    return Permute.apply(input, perm)


# ----------------------------------------------------------------------------------------
# squeeze / unsqueeze / flatten / unflatten
# ----------------------------------------------------------------------------------------
class Squeeze(Function):
    """squeeze(a) (no dim): a view without the size-1 dims.  d/da = g.reshape(a.shape)."""
    _node_name = "SqueezeBackward0"

    @staticmethod
    def forward(ctx, a, dims):
        arr = a._data
        if ctx is not None:
            ctx._aux = arr.shape
        return arr.squeeze(dims)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx._aux), None


class SqueezeDim(Squeeze):
    """squeeze(a, dim) with an int dim."""
    _node_name = "SqueezeBackward1"


class SqueezeDims(Squeeze):
    """squeeze(a, dims) with a tuple of dims."""
    _node_name = "SqueezeBackward2"


def squeeze(input, dim=None):
    """Remove dims of size 1: all of them, or those in `dim` (an int or a tuple) that have
    size 1 (others are left alone, as torch)."""
    arr = input._data
    if dim is None:
        return Squeeze.apply(input, tuple(i for i, s in enumerate(arr.shape) if s == 1))
    if isinstance(dim, (tuple, list)):
        dims = _unique_dims(tuple(dim), arr.ndim)
        cls = SqueezeDims
    else:
        dims = (_dim(dim, arr.ndim),)
        cls = SqueezeDim
    return cls.apply(input, tuple(d for d in dims if d < arr.ndim and arr.shape[d] == 1))


def unsqueeze(input, dim):
    """A view with a new dim of size 1 at `dim`."""
    return input.unsqueeze(dim)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one (a view when the input is contiguous, as
    reshape). A 0-d input gives shape (1,); start_dim == end_dim returns the input itself."""
    arr = input._data
    nd = arr.ndim
    if nd == 0:
        return reshape(input, (1,))
    s, e = _dim(start_dim, nd), _dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shape = arr.shape
    n = 1
    for k in shape[s:e + 1]:
        n *= k
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


def unflatten(input, dim, sizes):
    """Split dim into `sizes` (one entry may be -1): always a view."""
    arr = input._data
    d = _dim(dim, arr.ndim)
    sizes = tuple(operator.index(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = arr.shape[d]
    known = 1
    for s in sizes:
        if s != -1:
            known *= s
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if (-1 in sizes and (known == 0 or n % known)) or (-1 not in sizes and known != n):
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
            f"{dim} ({n}) in the input tensor")
    if -1 in sizes:
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    return View.apply(input, arr.shape[:d] + sizes + arr.shape[d + 1:])


def ravel(input):
    """A contiguous 1-D tensor: a view of a contiguous input, else a copy."""
    return input.contiguous().view(-1)


def view_as(self, other):
    return self.view(other.shape)


def reshape_as(self, other):
    return self.reshape(other.shape)


def narrow(input, dim, start, length):
    """input[(:,) * dim + (start:start + length,)]: a view (SliceBackward0). start may be
    negative (counted from the end) or a 0-d integer tensor."""
    arr = input._data
    if arr.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _dim(dim, arr.ndim)
    start, length = _int(start), _int(length)
    n = arr.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice_along(input, d, start, start + length)


# ----------------------------------------------------------------------------------------
# function forms of methods defined elsewhere
# ----------------------------------------------------------------------------------------
def clone(input, *, memory_format=None):
    """A copy that stays in the graph (CloneBackward0)."""
    return input.clone()


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "movedim": movedim, "moveaxis": movedim, "squeeze": squeeze, "flatten": flatten,
    "unflatten": unflatten, "ravel": ravel, "view_as": view_as, "reshape_as": reshape_as,
    "narrow": narrow, "t": t, "transpose": transpose, "swapdims": swapdims,
    "swapaxes": swapaxes, "permute": _permute_method, "adjoint": adjoint,
    "T": property(reverse_dims), "mT": property(_mT), "mH": property(_mH), "H": property(_H),
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "movedim": movedim, "moveaxis": movedim, "squeeze": squeeze, "unsqueeze": unsqueeze,
    "flatten": flatten, "unflatten": unflatten, "ravel": ravel, "narrow": narrow,
    "clone": clone, "t": t, "transpose": transpose, "swapdims": swapdims, "swapaxes": swapaxes,
    "permute": permute, "adjoint": adjoint,
}


_T0_WARNING = ("Tensor.T is deprecated on 0-D tensors. This function is the identity in these "
               "cases.")


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _dim(d, ndim):
    """A single dim normalised to [0, ndim) (0 for 0-d), torch's IndexError when out of
    range."""
    try:
        d = operator.index(d)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(d).__name__}") from None
    return _norm_dims(d, ndim)[0]


def _dims_arg(dims):
    """Varargs or one sequence: f(0, 1) and f((0, 1)) both give (0, 1)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    return tuple(dims)


def _unique_dims(dims, ndim):
    out = _norm_dims(tuple(dims), ndim) if dims else ()
    seen = set()
    for d in out:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return out


def _int(x):
    if isinstance(x, TensorBase):
        return int(x.item())
    return operator.index(x)


def _slice_along(t, d, start, stop):
    """t[(:,) * d + (start:stop,)] as a differentiable view (SliceBackward0)."""
    return SliceIndex.apply(t, (_FULL,) * d + (slice(start, stop),))


def _select_along(t, d, i):
    return SelectIndex.apply(t, (_FULL,) * d + (i,))
