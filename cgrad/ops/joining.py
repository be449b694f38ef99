"""Joining, splitting and repeating (see cgrad/ops/__init__.py for the conventions):
cat/concat, stack, hstack/vstack/dstack/column_stack, atleast_1d/2d/3d, broadcast_tensors,
meshgrid, cartesian_prod, block_diag, split/split_with_sizes/chunk/unbind, repeat/tile, flip,
rot90, roll, and diff (differences of neighbours along a dim, prepend/append joined first).

split/chunk/unbind pieces are views, as in torch; ops that copy in torch (repeat, tile, cat,
stack, flip, roll) return fresh arrays, so writing into their result never changes the
input. Every backward is written with cgrad ops (double backward works); a tensor list of
any length is one node.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from cgrad.ops.shape import _dim
from cgrad._warn import warn as _warn
from cgrad import _C
from cgrad._C import TensorBase
from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result
from cgrad.ops._util import _norm_dims
from cgrad.ops.shape import _dims_arg, _select_along, _slice_along, _unique_dims

_FULL = slice(None)


def _check_tensors(tensors, fn):
    if isinstance(tensors, TensorBase) or not hasattr(tensors, "__iter__"):
        from cgrad._checks import type_name
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type_name(tensors)}")
    tensors = tuple(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, TensorBase):
            tp = type(t)
            name = tp.__name__ if tp.__module__ == "builtins" else f"{tp.__module__}.{tp.__name__}"
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {name}")
    return tensors


def _result_dtype(arrays):
    """torch.promote_types over all operands (cat/stack: every tensor counts, 0-d or not)."""
    from cgrad.ops.promotion import _promote2
    dt = None
    for a in arrays:
        dt = a.dtype if dt is None else _promote2(dt, a.dtype)
    return dt


# ----------------------------------------------------------------------------------------
# repeat / tile
# ----------------------------------------------------------------------------------------
class Repeat(Function):
    """repeat(a, reps) (np.tile after padding a's shape with leading 1s): a copy.
    d/da = g.reshape(r0, s0, r1, s1, ...).sum(r axes).reshape(a.shape)."""
    _node_name = "RepeatBackward0"

    @staticmethod
    def forward(ctx, a, reps):
        arr = a._data
        pad = (1,) * (len(reps) - arr.ndim) + arr.shape
        if ctx is not None:
            ctx._aux = (arr.shape, reps, pad)
        return np.tile(arr.reshape(pad), reps)

    @staticmethod
    def backward(ctx, g):
        shape, reps, pad = ctx._aux
        split = []
        for r, s in zip(reps, pad):
            split += [r, s]
        g = g.reshape(tuple(split)).sum(tuple(range(0, 2 * len(reps), 2)))
        return g.reshape(shape), None


def _repeat_args(sizes, fname="repeat", what="'repeats' (position 1)"):
    sizes = _dims_arg(sizes)
    if len(sizes) == 1 and isinstance(sizes[0], TensorBase):
        sizes = tuple(sizes[0].tolist())
    try:
        return tuple(operator.index(s) for s in sizes)
    except TypeError:
        from cgrad._checks import type_name
        bad = next(s for s in sizes if not isinstance(s, (int, np.integer)))
        raise TypeError(f"{fname}(): argument {what} must be tuple of ints, not "
                        f"{type_name(bad)}") from None


def repeat(self, *sizes, repeats=None):
    """Tensor.repeat: tile the tensor sizes[i] times along dim i (a copy); the sizes may be
    given as several ints, one sequence, or the keyword repeats."""
    if repeats is not None:
        if sizes:
            raise TypeError("repeat() got multiple values for argument 'repeats'")
        sizes = (repeats,)
    reps = _repeat_args(sizes)
    arr = self._data
    if len(reps) < arr.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    pad = (1,) * (len(reps) - arr.ndim) + arr.shape
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(r * s for r, s in zip(reps, pad))}: "
                           f"{[r * s for r, s in zip(reps, pad)]}")
    try:
        return Repeat.apply(self, reps)
    except (MemoryError, ValueError) as e:
        from cgrad._checks import shape_error
        err = shape_error("repeat", [r * s for r, s in zip(reps, pad)], arr.dtype, e)
        if err is e and not isinstance(e, MemoryError):
            raise
        raise err from None


def tile(input, *args, dims=None):
    """torch.tile: repeat with leading 1s added to `dims` when it is shorter than the shape."""
    reps = _repeat_args(args if dims is None else (dims,), "tile", "'dims' (position 2)")
    nd = input._data.ndim
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return repeat(input, reps)


# ----------------------------------------------------------------------------------------
# cat / stack
# ----------------------------------------------------------------------------------------
def _channels_last(a):
    """torch's is_channels_last_strides_2d / _3d (what suggest_memory_format reads) for a 4-D
    or 5-D array: its strides order the channel dimension innermost, then the spatial ones
    from the last, then the batch one."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(a.ndim)
    if order is None or a.strides[1] == 0:
        return False
    least = 0
    for d in order:
        n, st = a.shape[d], a.strides[d]
        if n == 0 or st < least or (d == 0 and least == a.strides[1]):
            return False
        least = st * n if n > 1 else st
    return True


def _cat_layout(out, arrays):
    """cat's result in torch's memory format: channels-last when every input suggests it,
    C-contiguous otherwise (np.concatenate follows its inputs' memory order instead)."""
    if all(_channels_last(a) for a in arrays):
        if not _channels_last(out):
            out = np.moveaxis(np.ascontiguousarray(np.moveaxis(out, 1, -1)), -1, 1)
        return out
    return out if out.flags.c_contiguous else out.copy(order="C")


class Cat(Function):
    """cat(dim, *tensors) (tensors are direct arguments so that autograd sees them).
    d/dt_i = g[(:,) * dim + (off_i:off_i + n_i,)]."""
    _node_name = "CatBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        arrays = [t._data for t in tensors]
        a0 = arrays[0]
        dt = a0.dtype
        if a0.ndim and a0.shape != (0,) and all(a.dtype == dt for a in arrays):
            # fast path: one dtype, NumPy's checks are torch's (except for the messages)
            d = _dim(dim, a0.ndim)
            try:
                out = np.concatenate(arrays, axis=d)
            except ValueError:
                out = None
            if out is not None:
                if ctx is not None:
                    ctx._aux = (d, tuple([a.shape[d] for a in arrays]))
                return _cat_layout(out, arrays)
        # torch's legacy rule: 1-D empty tensors are skipped (cat([x, tensor([])]) == x)
        keep = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)]
        ref = keep[0] if keep else arrays[0]
        nd = ref.ndim
        d = _dim(dim, nd)
        for i, a in enumerate(arrays):
            if a.ndim == 0:
                raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                                   "concatenated")
        for i, a in enumerate(arrays):
            if a.ndim == 1 and a.shape[0] == 0:
                continue
            if a.ndim != nd:
                raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                                   f"{a.ndim}")
            for k in range(nd):
                if k != d and a.shape[k] != ref.shape[k]:
                    raise RuntimeError(
                        f"Sizes of tensors must match except in dimension {d}. Expected size "
                        f"{ref.shape[k]} but got size {a.shape[k]} for tensor number {i} in "
                        "the list.")
        dt = _result_dtype(arrays)
        if ctx is not None:
            ctx._aux = (d, tuple(None if (a.ndim == 1 and a.shape[0] == 0 and nd != 1)
                                 else a.shape[d] for a in arrays))
        if not keep:
            return np.empty((0,), dtype=dt)
        return _cat_layout(np.concatenate(keep, axis=d, dtype=dt, casting="unsafe"), keep)

    @staticmethod
    def backward(ctx, g):
        d, sizes = ctx._aux
        needs = ctx.needs_input_grad
        out = [None]
        off = 0
        for i, n in enumerate(sizes):
            if n is None:                  # a skipped legacy empty tensor
                out.append(None)
                continue
            out.append(_slice_along(g, d, off, off + n) if needs[i + 1] else None)
            off += n
        return tuple(out)


def _into_out(name, out, tensors, compute):
    """torch's ``out=`` for cat and stack: nothing is recorded (an error if something requires
    grad), ``out`` is resized if its shape differs (with torch's warning when it had
    elements), the result is cast to out's dtype and written into it in place."""
    from cgrad.ops.promotion import torch_type_name
    if not isinstance(out, TensorBase):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _C.is_grad_enabled() and (out.requires_grad or any(t.requires_grad for t in tensors)):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    r = compute()._data
    od = out._data
    if not np.can_cast(r.dtype, od.dtype, "same_kind"):
        raise TypeError(f"{name}(): input types can't be cast to the desired output type "
                        f"{torch_type_name(od.dtype)}")
    if any(np.shares_memory(t._data, od) for t in tensors):
        raise RuntimeError(
            "unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location. Please clone() the tensor before performing "
            "the operation.")
    if od.shape != r.shape:
        if od.size:
            _warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(od.shape)}, which does not match the required output shape "
                f"{list(r.shape)}. This behavior is deprecated, and in a future release "
                "outputs will not be resized unless they have zero elements. You can explicitly "
                "reuse an out tensor t by resizing it, inplace, to zero elements with "
                "t.resize_(0).", UserWarning)
        od = out._data = np.empty(r.shape, od.dtype)
    np.copyto(od, r, casting="unsafe")
    out._bump_version()
    return out


def cat(tensors, dim=0, *, axis=None, out=None):
    """Concatenate tensors along an existing dim (torch's type promotion)."""
    if axis is not None:
        dim = axis
    tensors = _check_tensors(tensors, "cat")
    if not tensors:
        raise ValueError("cat(): expected a non-empty list of Tensors")
    if out is not None:
        return _into_out("cat", out, tensors, lambda: Cat.apply(dim, *tensors))
    return Cat.apply(dim, *tensors)


class Stack(Function):
    """stack(dim, *tensors).  d/dt_i = g.select(dim, i)."""
    _node_name = "StackBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        arrays = [t._data for t in tensors]
        shape = arrays[0].shape
        d = _dim(dim, len(shape) + 1)
        for i, a in enumerate(arrays):
            if a.shape != shape:
                raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                                   f"{list(shape)} at entry 0 and {list(a.shape)} at entry {i}")
        if ctx is not None:
            ctx._aux = d
        out = np.empty(shape[:d] + (len(arrays),) + shape[d:], dtype=_result_dtype(arrays))
        pre = (_FULL,) * d
        for i, a in enumerate(arrays):
            out[pre + (i,)] = a
        return out

    @staticmethod
    def backward(ctx, g):
        d = ctx._aux
        needs = ctx.needs_input_grad
        return (None,) + tuple(_select_along(g, d, i) if needs[i + 1] else None
                               for i in range(len(needs) - 1))


def stack(tensors, dim=0, *, out=None):
    """Join equally shaped tensors along a new dim."""
    tensors = _check_tensors(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if out is not None:
        return _into_out("stack", out, tensors, lambda: Stack.apply(dim, *tensors))
    return Stack.apply(dim, *tensors)


def hstack(tensors):
    """cat along dim 1 (dim 0 for 1-D tensors); 0-d tensors count as 1-D."""
    tensors = _check_tensors(tensors, "hstack")
    if not tensors:
        raise RuntimeError("hstack expects a non-empty TensorList")
    tensors = tuple(t.reshape(1) if t._data.ndim == 0 else t for t in tensors)
    return cat(tensors, 0 if tensors[0]._data.ndim == 1 else 1)


def vstack(tensors):
    """cat along dim 0 of the tensors made at least 2-D (1-D (n,) becomes (1, n))."""
    tensors = _check_tensors(tensors, "vstack")
    if not tensors:
        raise RuntimeError("vstack expects a non-empty TensorList")
    tensors = tuple(t.reshape(1, -1) if t._data.ndim < 2 else t for t in tensors)
    return cat(tensors, 0)


def dstack(tensors):
    """cat along dim 2 of the tensors made at least 3-D (torch.atleast_3d)."""
    tensors = _check_tensors(tensors, "dstack")
    if not tensors:
        raise RuntimeError("dstack expects a non-empty TensorList")
    return cat(tuple(_atleast(t, 3) for t in tensors), 2)


def column_stack(tensors):
    """hstack of the tensors with 0-d and 1-D ones made columns ((n,) -> (n, 1))."""
    tensors = _check_tensors(tensors, "column_stack")
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return cat(tuple(t.reshape(-1, 1) if t._data.ndim <= 1 else t for t in tensors), 1)


def _atleast(t, n):
    nd = t._data.ndim
    if nd >= n:
        return t
    if nd == 0:
        return t.reshape((1,) * n)
    if n == 2 or nd == 2:                     # (k,) -> (1, k); (m, k) -> (m, k, 1)
        return t.unsqueeze(0) if n == 2 else t.unsqueeze(-1)
    return t.unsqueeze(0).unsqueeze(-1)       # (k,) -> (1, k, 1)


def _atleast_fn(n):
    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(_atleast(t, n) for t in _check_tensors(tensors[0], f"atleast_{n}d"))
        if len(tensors) == 1 and not isinstance(tensors[0], TensorBase):
            from cgrad._checks import type_name
            raise TypeError(f"atleast_{n}d(): argument 'input' (position 1) must be Tensor or "
                            f"tuple of Tensors, not {type_name(tensors[0])}")
        tensors = _check_tensors(tensors, f"atleast_{n}d")
        out = tuple(_atleast(t, n) for t in tensors)
        return out[0] if len(out) == 1 else out
    fn.__name__ = fn.__qualname__ = f"atleast_{n}d"
    fn.__doc__ = (f"Views of the inputs with at least {n} dimensions (one tensor in, one out; "
                  "several or a sequence in, a tuple out).")
    return fn


atleast_1d = _atleast_fn(1)
atleast_2d = _atleast_fn(2)
atleast_3d = _atleast_fn(3)


def broadcast_tensors(*tensors):
    """Expand the tensors to their common broadcast shape (views, ExpandBackward0)."""
    from cgrad.ops.indexing import _broadcast_shape
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    tensors = _check_tensors(tensors, "broadcast_tensors")
    if len(tensors) == 1:
        return tensors
    shape = ()
    for t in tensors:
        if t._data.shape != shape:
            shape = tuple(_broadcast_shape(shape, t._data.shape))
    return tuple(t._expand_to(shape) for t in tensors)   # as torch: t itself when no expand


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-D/1-D tensors: output k varies along dim k (indexing="ij",
    the default, with torch's warning when not given) or with the first two dims swapped
    ("xy"). Each output is an expanded view (ExpandBackward0)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    tensors = _check_tensors(tensors, "meshgrid")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        _warn("cgrad.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('cgrad.meshgrid: indexing must be one of "xy" or "ij", but '
                           f"received: {indexing}")
    dt = tensors[0]._data.dtype
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError("cgrad.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
        if t._data.dtype != dt:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    n = len(tensors)
    swap = indexing == "xy" and n >= 2
    order = list(range(n))
    if swap:
        order[0], order[1] = 1, 0
    sizes = [t._data.size for t in tensors]
    shape = tuple(sizes[order[k]] for k in range(n))
    pos = {order[k]: k for k in range(n)}       # input i varies along output dim pos[i]
    outs = []
    for i, t in enumerate(tensors):
        view = [1] * n
        view[pos[i]] = sizes[i]
        outs.append(t.reshape(view).expand(shape))
    return tuple(outs)


class BlockDiag(Function):
    """block_diag(*tensors) for 0-D, 1-D and 2-D tensors (0-D as 1x1, (n,) as 1xn); torch's
    type promotion.  d/dt_i = the block of g at t_i's place, reshaped to t_i's shape."""
    _node_name = "BlockDiagBackward0"

    @staticmethod
    def forward(ctx, *tensors):
        arrays = []
        for i, t in enumerate(tensors):
            a = t._data
            if a.ndim > 2:
                raise RuntimeError("cgrad.block_diag: Input tensors must have 2 or fewer "
                                   f"dimensions. Input {i} has {a.ndim} dimensions")
            arrays.append(a.reshape(1, -1) if a.ndim < 2 else a)
        if not arrays:
            from cgrad._dtype import get_default_dtype
            return np.zeros((1, 0), dtype=get_default_dtype())
        dt = _result_dtype(arrays)
        rows = builtins.sum(a.shape[0] for a in arrays)
        cols = builtins.sum(a.shape[1] for a in arrays)
        out = np.zeros((rows, cols), dtype=dt)
        r = c = 0
        spans = []
        for t, a in zip(tensors, arrays):
            h, w = a.shape
            out[r:r + h, c:c + w] = a
            spans.append((r, h, c, w, t._data.shape))
            r += h
            c += w
        if ctx is not None:
            ctx._aux = tuple(spans)
        return out

    @staticmethod
    def backward(ctx, g):
        needs = ctx.needs_input_grad
        out = []
        for i, (r, h, c, w, shape) in enumerate(ctx._aux):
            out.append(g[r:r + h, c:c + w].reshape(shape) if needs[i] else None)
        return tuple(out)


def block_diag(*tensors):
    """A block-diagonal matrix from 0-D, 1-D and 2-D tensors."""
    tensors = _check_tensors(tensors, "block_diag")
    return BlockDiag.apply(*tensors)


# ----------------------------------------------------------------------------------------
# split / chunk / unbind (several outputs, all views)
# ----------------------------------------------------------------------------------------
class Split(Function):
    """split(a, sizes, dim): views of consecutive pieces along dim.
    d/da = cat(grads, dim) (unused pieces arrive as zeros)."""
    _node_name = "SplitBackward0"

    @staticmethod
    def forward(ctx, a, sizes, dim):
        arr = a._data
        if ctx is not None:
            ctx._aux = dim
        pre = (_FULL,) * dim
        out = []
        off = 0
        for n in sizes:
            out.append(arr[pre + (slice(off, off + n),)])
            off += n
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        return Cat.apply(ctx._aux, *grads), None, None


class SplitWithSizes(Split):
    _node_name = "SplitWithSizesBackward0"


def _split_dim(arr, dim, fn):
    if arr.ndim == 0:
        raise RuntimeError(f"{fn} expects at least a 1-dimensional tensor")
    return _dim(dim, arr.ndim)


def _split_sizes(n, size):
    if size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got "
                           f"split_size={size}")
    if size == 0:
        if n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        return (0,)
    k = max(1, -(-n // size))
    return tuple(min(size, n - i * size) for i in range(k))


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size` along dim (the last may be smaller), or of the given sizes."""
    arr = tensor._data
    d = _split_dim(arr, dim, "split")
    n = arr.shape[d]
    s = split_size_or_sections
    if isinstance(s, TensorBase):
        s = s.tolist()
    if isinstance(s, (list, tuple)):
        sizes = tuple(operator.index(k) for k in s)
        if any(k < 0 for k in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={list(sizes)}")
        if builtins.sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                f"size at dimension {d}), but got split_sizes={list(sizes)}")
        return _C._set_multi_view(SplitWithSizes.apply(tensor, sizes, d))
    return _C._set_multi_view(Split.apply(tensor, _split_sizes(n, operator.index(s)), d))


def _split_method(self, split_size, dim=0):
    return split(self, split_size, dim)


def split_with_sizes(input, split_sizes, dim=0):
    return split(input, list(split_sizes), dim)


def chunk(input, chunks, dim=0):
    """At most `chunks` pieces of equal size ceil(n / chunks) along dim (views)."""
    arr = input._data
    d = _split_dim(arr, dim, "chunk")
    chunks = operator.index(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = arr.shape[d]
    if n == 0:                       # torch: `chunks` empty pieces
        return _C._set_multi_view(Split.apply(input, (0,) * chunks, d))
    return _C._set_multi_view(Split.apply(input, _split_sizes(n, -(-n // chunks)), d))


class Unbind(Function):
    """unbind(a, dim): the slices along dim (views).  d/da = stack(grads, dim)."""
    _node_name = "UnbindBackward0"

    @staticmethod
    def forward(ctx, a, dim):
        arr = a._data
        if ctx is not None:
            ctx._aux = dim
        pre = (_FULL,) * dim
        return tuple(arr[pre + (i, Ellipsis)] for i in range(arr.shape[dim]))   # views

    @staticmethod
    def backward(ctx, *grads):
        return Stack.apply(ctx._aux, *grads), None


def unbind(input, dim=0):
    """A tuple of all slices along dim, without it (views)."""
    arr = input._data
    if arr.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return _C._set_multi_view(Unbind.apply(input, _dim(dim, arr.ndim)))


# ----------------------------------------------------------------------------------------
# flip / roll / narrow
# ----------------------------------------------------------------------------------------
class Flip(Function):
    """flip(a, dims): a copy, as torch.  d/da = flip(g, dims)."""
    _node_name = "FlipBackward0"

    @staticmethod
    def forward(ctx, a, dims):
        if ctx is not None:
            ctx._aux = dims
        if a._data.ndim == 0:               # dim 0 (or -1) of a 0-d tensor: nothing to flip
            return a._data.copy()
        # torch allocates the result like its input (preserve_format): a permuted input
        # gives a permuted result; an expanded one a C-contiguous copy
        return np.flip(a._data, dims).copy(order="C" if 0 in a._data.strides else "K")

    @staticmethod
    def backward(ctx, g):
        return Flip.apply(g, ctx._aux), None


def flip(input, *args, dims=None):
    """Reverse the order of elements along the given dims (a copy); flip(x, (0, 1)),
    x.flip(0, 1) and flip(x, dims=...) all work."""
    dims = _dims_arg(args) if dims is None else _dims_arg((dims,))
    return Flip.apply(input, _unique_dims(dims, input._data.ndim))


class Roll(Function):
    """roll(a, shifts, dims) (np.roll; dims=None rolls the flattened tensor): a copy.
    d/da = roll(g, -shifts, dims)."""
    _node_name = "RollBackward0"

    @staticmethod
    def forward(ctx, a, shifts, dims):
        if ctx is not None:
            ctx._aux = (shifts, dims)
        arr = a._data
        out = np.roll(arr, shifts, dims)
        if dims is not None and _channels_last(arr):
            # torch: the input's suggested memory format (a roll of the flattened tensor,
            # without dims, is C-contiguous)
            return out if _channels_last(out) else \
                np.moveaxis(np.ascontiguousarray(np.moveaxis(out, 1, -1)), -1, 1)
        return contiguous_result(out, arr)

    @staticmethod
    def backward(ctx, g):
        shifts, dims = ctx._aux
        neg = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
        return Roll.apply(g, neg, dims), None, None


def roll(input, shifts, dims=None):
    """Shift elements along dims (wrapping around); without dims, of the flattened tensor."""
    sh = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    sh = tuple(operator.index(s) for s in sh)
    if dims is None:
        if len(sh) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(sh)}, dims:0")
        return Roll.apply(input, sh[0], None)
    dm = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(sh) != len(dm):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(sh)}, "
                           f"dims:{len(dm)}")
    dm = _norm_dims(dm, input._data.ndim)
    return Roll.apply(input, sh, dm)


# ----------------------------------------------------------------------------------------
# cartesian_prod / rot90 / diff
# ----------------------------------------------------------------------------------------
def cartesian_prod(*tensors):
    """The Cartesian product of the given 1-D tensors: a (n1 * n2 * ..., k) tensor whose rows
    are the tuples, in order (one tensor is returned as it is, as in torch)."""
    tensors = _check_tensors(tensors, "cartesian_prod")
    for t in tensors:
        if t._data.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t._data.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.flatten() for g in grids], 1)


class Rot90(Function):
    """rot90(a, k, dims): a rotated copy, laid out as torch's (flip, then a transposed view
    for odd k).  d/da = rot90(g, -k, dims)."""
    _node_name = "Rot90Backward0"

    @staticmethod
    def forward(ctx, a, k, d0, d1):
        x = a._data
        if ctx is not None:
            ctx._aux = (k, d0, d1)
        k %= 4
        if k == 1:
            return np.swapaxes(np.flip(x, d1).copy(), d0, d1)
        if k == 2:
            return np.flip(x, (d0, d1)).copy()
        if k == 3:
            return np.swapaxes(np.flip(x, d0).copy(), d0, d1)
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        k, d0, d1 = ctx._aux
        return Rot90.apply(g, -k, d0, d1), None, None, None


def rot90(input, k=1, dims=(0, 1)):
    """Rotates input by 90 degrees k times in the plane of dims, from the first dim towards
    the second (a copy)."""
    k = operator.index(k)
    dims = list(dims)
    nd = input._data.ndim
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = (operator.index(d) for d in dims)
    w0, w1 = _dim(d0, nd), _dim(d1, nd)         # torch's IndexError first
    if d0 == d1 or abs(d0 - d1) == nd:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return Rot90.apply(input, k, w0, w1)


class _CopyOf(Function):
    """diff with n=0: a copy (torch's empty_like(x).copy_(x)).  d/da = g."""
    _node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, a):
        return a._data.copy()

    @staticmethod
    def backward(ctx, g):
        return g


def _diff_other(input, other, d):
    if other is None:
        return None
    if not isinstance(other, TensorBase):
        from cgrad._checks import type_name
        raise TypeError(f"diff(): argument 'prepend' must be Tensor, not {type_name(other)}")
    x, o = input._data, other._data
    if o.ndim != x.ndim:
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for i in range(o.ndim):
        if i != d and o.shape[i] != x.shape[i]:
            raise RuntimeError(
                "diff expects the shape of tensor to prepend or append to match that of input "
                f"except along the differencing dimension; input.size({i}) = {x.shape[i]}, but "
                f"got tensor.size({i}) = {o.shape[i]}")
    return other


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim: out[i] = input[i + 1] - input[i], applied n
    times, after joining prepend and append to input along dim (booleans: xor)."""
    from cgrad.ops.comparison import logical_xor
    x = input._data
    if x.ndim < 1:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _dim(dim, x.ndim)
    if isinstance(prepend, TensorBase) or prepend is None:
        prepend = _diff_other(input, prepend, d)
    else:
        from cgrad._checks import type_name
        raise TypeError(f"diff(): argument 'prepend' must be Tensor, not {type_name(prepend)}")
    if append is not None and not isinstance(append, TensorBase):
        from cgrad._checks import type_name
        raise TypeError(f"diff(): argument 'append' must be Tensor, not {type_name(append)}")
    append = _diff_other(input, append, d)
    if n == 0:
        return _CopyOf.apply(input)
    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        input = cat(parts, d)
    size = input._data.shape[d]
    n = builtins.min(n, size)
    out_len = size - 1
    result = input
    for _ in range(n):
        hi, lo = result.narrow(d, 1, out_len), result.narrow(d, 0, out_len)
        result = logical_xor(hi, lo) if result._data.dtype == np.bool_ else hi - lo
        out_len -= 1
    return result


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "repeat": repeat, "tile": tile, "split": _split_method,
    "split_with_sizes": split_with_sizes, "chunk": chunk, "unbind": unbind, "flip": flip,
    "roll": roll, "rot90": rot90, "diff": diff,
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "tile": tile, "cat": cat, "concat": cat, "concatenate": cat, "stack": stack,
    "hstack": hstack, "vstack": vstack, "dstack": dstack, "column_stack": column_stack,
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d,
    "broadcast_tensors": broadcast_tensors, "meshgrid": meshgrid, "block_diag": block_diag,
    "split": split, "split_with_sizes": split_with_sizes, "chunk": chunk, "unbind": unbind,
    "flip": flip, "roll": roll, "cartesian_prod": cartesian_prod, "rot90": rot90,
    "diff": diff,
}
