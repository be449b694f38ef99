"""In-place operations with autograd history (torch semantics).

An in-place op on a tensor that takes part in autograd (it requires grad, or an argument
does, under grad mode) is recorded as the out-of-place op and the tensor's history is rebased
onto it, as torch does (`a = x * 1; a.mul_(y)` leaves `a.grad_fn` a MulBackward0 whose
gradients are those of the out-of-place product). See Note [In-place rebase].

Note [In-place rebase]
~~~~~~~~~~~~~~~~~~~~~~
``_record(self, compute, saves_self)``:

1. ``src`` is a second Tensor object with ``self``'s history (same grad_fn and output_nr), so
   the recorded node's edge points to where ``self`` came from. When the op's backward needs
   the value of ``self`` before the modification (``saves_self``: mul, div, pow, clamp...),
   ``src`` holds a copy of the data (torch saves ``original_self`` the same way); otherwise it
   shares the data and nothing is copied.
2. ``out = compute(src)`` records the out-of-place node.
3. ``out``'s values are written into ``self``'s storage (views of it see them), the version
   counter is bumped (earlier saves of ``self`` now fail the version check, with torch's
   message) and ``self`` is rebased onto ``out``'s node.

Note [In-place on a view]
~~~~~~~~~~~~~~~~~~~~~~~~~
A view made by an op (``a[0]``, ``a.view(...)``, ``a.t()``; ``t._base`` is the tensor whose
storage it shares) that is modified in place rebases its *base*, as torch does: the view's
new values are recorded out of place, the base gets a ``CopySlices`` node (the base with the
view's elements replaced: gradient to the old base with those elements zeroed, gradient to
the new values gathered from them), its storage is updated (the view sees it), and the view
is regenerated from the new base (``AsStridedBackward0``). The view's elements are located
as flat indices into the base (a C-contiguous base; other bases raise NotImplementedError,
as do in-place ops on views whose base already has views on it modified elsewhere only in
the sense that those other views keep their old history). A view of a leaf that requires
grad raises torch's error; a view whose elements overlap (expand) raises torch's
"more than one element of the written-to tensor refers to a single memory location", except
for the ops torch lets write through it (Note [Expanded memory]).
"""
from __future__ import annotations

import sys

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:     # NumPy < 2
    from numpy import byte_bounds as _byte_bounds

from cgrad import _C
from cgrad._C import _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.ops.promotion import torch_type_name
from cgrad.ops.indexing import float_index_data, fold_ellipses

# node names of torch's view ops: an in-place op on their output would need CopySlices
_VIEW_NODES = frozenset({
    "ViewBackward0", "ReshapeAliasBackward0", "SelectBackward0", "SliceBackward0",
    "UnsqueezeBackward0", "AliasBackward0", "ExpandBackward0", "TransposeBackward0",
    "TBackward0", "PermuteBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "SqueezeBackward4", "NarrowBackward0", "SplitBackward0",
    "SplitWithSizesBackward0", "UnbindBackward0", "AsStridedBackward0",
    "UnflattenBackward0", "DiagonalBackward0", "UnfoldBackward0", "ViewAsRealBackward0",
    "MovedimBackward0", "ChunkBackward0", "UnsafeSplitBackward0", "TransposeBackward1",
})

_LEAF_MSG = "a leaf Variable that requires grad is being used in an in-place operation."




def needs_record(self, *others):
    """True if an in-place op on self with these operands must be recorded by autograd."""
    if not _C.is_grad_enabled():
        return False
    if self.requires_grad:
        return True
    for o in others:
        if isinstance(o, _C.TensorBase) and o.requires_grad:
            return True
    return False


def check_leaf(self):
    if self.requires_grad and self.grad_fn is None and _C.is_grad_enabled():
        raise RuntimeError(_LEAF_MSG)


_OVERLAP_MSG = ("unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.")


def has_internal_overlap(a):
    """torch's has_internal_overlap(t) == YES for an array: a dimension of size > 1 with
    stride 0 (an expanded view), so that several elements are one memory location."""
    for n, st in zip(a.shape, a.strides):
        if st == 0 and n > 1:
            return True
    return False


def check_overlap(self):
    """torch's check before writing into a tensor in place: none of its elements may share
    memory with another (an expanded view). A view of an expanded tensor without repeats (a
    chunk of width one of an expand, a row of an expanded column) passes and writes through
    to the expanded tensor's memory, as in torch (Note [Expanded memory])."""
    if has_internal_overlap(self._data):
        raise RuntimeError(_OVERLAP_MSG)


# Note [Expanded memory]
# ~~~~~~~~~~~~~~~~~~~~~~
# torch's rule for writing into a tensor in place: its memory is always writable, and an op
# raises _OVERLAP_MSG only when the tensor written to has internal overlap (a dimension of
# size > 1 and stride 0, has_internal_overlap). Expand's array is writable (NumPy's read-only
# broadcast_to made writable, cgrad/ops/shape.py), so views of it are too, and every path
# that writes into a tensor's memory asks has_internal_overlap first: apply_inplace, record,
# the in-place unary methods (ops/pointwise.py), nn.functional's inplace=True, uniform_ and
# normal_, nn.init, the engine's in-place gradient sums (_C_engine.pxi) and clip_grad. As in
# torch, fill_ and zero_ do not ask (every element gets the same value: they write through),
# masked_fill_ and an advanced-index assignment warn (torch's deprecation) and write through,
# and a basic-index assignment asks about the region it writes. Under autograd, a write into
# a view with overlap goes through CopySlices, which raises the overlap error in the
# backward (CopySlicesFlat), as torch's does.
_MASKED_FILL_EXPANDED = (
    "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
    "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = "
    "scalar")
_INDEX_PUT_EXPANDED = (
    "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
    "performing this operation. This also applies to advanced indexing e.g. tensor[indices] "
    "= tensor")


def warn_masked_fill_expanded(self):
    """masked_fill_ into a tensor with internal overlap: torch's deprecation warning (it
    writes through, or raises when autograd records the op)."""
    if has_internal_overlap(self._data):
        _warn(_MASKED_FILL_EXPANDED)


_PARTIAL_MSG = ("unsupported operation: some elements of the input tensor and the written-to "
                "tensor refer to a single memory location. Please clone() the tensor before "
                "performing the operation.")


def _dense(a):
    """torch's is_non_overlapping_and_dense: the elements fill a block with no gap and no
    repeat, in some order of the dimensions."""
    dims = sorted((abs(st), n) for n, st in zip(a.shape, a.strides) if n != 1)
    expect = a.itemsize
    for st, n in dims:
        if st != expect:
            return False
        expect *= n
    return True


def check_partial_overlap(self, *others):
    """torch's check before an in-place op reads `others` while writing self: an operand
    may share memory with self only as the very same layout (x.add_(x)), not in part
    (x[1:].add_(x[:-1])); layouts it cannot judge (gaps, repeats) pass, as in torch."""
    for o in others:
        if isinstance(o, _C.TensorBase) and o is not self and _partial(self._data, o._data):
            raise RuntimeError(_PARTIAL_MSG)


def _partial(a, b):
    """torch's get_overlap_status(a, b) == Partial, for arrays a and b."""
    if not a.size or not b.size or not np.may_share_memory(a, b):
        return False
    if not (_dense(a) and _dense(b)):
        return False            # too hard to tell: allowed
    la, ha = _byte_bounds(a)
    lb, hb = _byte_bounds(b)
    if la == lb and ha == hb:
        return a.strides != b.strides
    return la < hb and lb < ha


def check_cast(self, out_dtype):
    dt = self._data.dtype
    if out_dtype != dt and not np.can_cast(out_dtype, dt, "same_kind"):
        raise RuntimeError(f"result type {torch_type_name(out_dtype)} can't be cast to the "
                           f"desired output type {torch_type_name(dt)}")


def _check_view(self):
    """A view op's output that is not registered as a view (_base is None) but whose memory
    another array holds: an in-place op would change that array behind autograd's back.
    An output that only looks like a view (a NumPy view of a temporary nobody else holds:
    the base's only references are this array's and the call's) is fine."""
    gf = self.grad_fn
    if (gf is not None and type(gf).__name__ in _VIEW_NODES and self._data.base is not None
            and sys.getrefcount(self._data.base) > 2):
        raise NotImplementedError(
            f"in-place operation on a view ({type(gf).__name__}) of a tensor that requires "
            "grad is not supported by cgrad yet (torch rebases the base with CopySlices); "
            "call .clone() on the view first, or modify the base tensor")


def _offsets(arr, base_ptr, item):
    """Memory offset (in items, from base_ptr) of every element of arr, in arr's shape."""
    off = (arr.__array_interface__["data"][0] - base_ptr) // item
    idx = np.full(arr.shape, off, dtype=np.int64)
    for k, (n, st) in enumerate(zip(arr.shape, arr.strides)):
        shape = [1] * arr.ndim
        shape[k] = n
        idx = idx + (np.arange(n, dtype=np.int64) * (st // item)).reshape(shape)
    return idx


def _view_index(bd, vd):
    """Positions of the elements of the view vd in its base bd, as C-order flat indices into
    bd's shape (what bd.reshape(-1) and zeros(bd.shape).flat use), or None when that cannot
    be expressed (misaligned strides, an element outside bd, a base whose elements overlap).
    A non-contiguous base (a transposed or sliced tensor) is mapped through its strides."""
    item = bd.dtype.itemsize
    if item != vd.dtype.itemsize:
        return None
    bptr = bd.__array_interface__["data"][0]
    if (vd.__array_interface__["data"][0] - bptr) % item or \
            any(st % item for st in vd.strides + bd.strides):
        return None
    idx = _offsets(vd, bptr, item)
    if bd.flags.c_contiguous:
        if idx.size and (idx.min() < 0 or idx.max() >= bd.size):
            return None
        return idx
    # general base: a table from memory offset to the base element's C-order position
    boff = _offsets(bd, bptr, item).reshape(-1)
    if not boff.size:
        return idx if not idx.size else None
    lo, hi = int(boff.min()), int(boff.max())
    if idx.size and (idx.min() < lo or idx.max() > hi):
        return None
    table = np.full(hi - lo + 1, -1, dtype=np.int64)
    table[boff - lo] = np.arange(boff.size, dtype=np.int64)
    if np.count_nonzero(table >= 0) != boff.size:
        return None                     # the base's own elements overlap (an expand)
    pos = table[idx - lo]
    if pos.size and pos.min() < 0:
        return None                     # an element in a gap of the base's memory
    return pos


def _record_on_view(self, compute, saves_self, repeats_ok=False):
    """In-place op on a view of a tensor with history: Note [In-place on a view]. repeats_ok:
    the view may have internal overlap (fill_, zero_, masked_fill_, index_put_: Note
    [Expanded memory]); torch's CopySlices then raises the overlap error in the backward."""
    base = self._base
    if base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    bd, vd = base._data, self._data
    idx = _view_index(bd, vd)
    if idx is None:
        raise NotImplementedError(
            "in-place operation on a view of a non-contiguous tensor that requires grad is not "
            "supported by cgrad yet; call .clone() on the view first")
    repeats = idx.size != np.unique(idx).size
    if repeats and not repeats_ok:
        raise RuntimeError(_OVERLAP_MSG)
    balias = _wrap(bd)
    if base.grad_fn is not None or base.requires_grad:
        balias._set_grad_fn(base.grad_fn, base.output_nr)
    src = _wrap(vd.copy() if saves_self else vd)
    if balias.grad_fn is not None:
        # The op reads the view's values as a gather from the base's history, not through
        # the view's own node: torch's CopySlices applies the op's backward to a slice of the
        # base's gradient, so the view's old node (and its hooks) is no longer on any path.
        src._set_grad_fn(AsStridedView.apply(balias, idx, repeats).grad_fn, 0)
    elif self.grad_fn is not None or self.requires_grad:
        src._set_grad_fn(self.grad_fn, self.output_nr)
    seq0 = _C.Node()._sequence_nr()      # nodes made by compute have a larger number
    out = compute(src)
    od = out._data
    fn = out.grad_fn
    if fn is not None and fn._sequence_nr() > seq0:
        fn._mark_copy_fn()               # Note [Copy slices fn]
    if od.shape != vd.shape:
        raise RuntimeError(
            f"output with shape {list(vd.shape)} doesn't match the broadcast shape "
            f"{list(od.shape)}")
    check_cast(self, od.dtype)
    if out.grad_fn is not None and od.dtype != bd.dtype:
        out = out.to(bd.dtype)
    newb = CopySlicesFlat.apply(balias, idx, out, repeats)
    np.copyto(bd, newb._data, casting="unsafe")        # the view sees it: shared storage
    base._bump_version()                               # shared counter: bumps the view too
    if out.grad_fn is not None:
        _C._bind_saved_output(out.grad_fn, out, self)    # Note [In-place saved outputs]
    if newb.grad_fn is not None:
        base._set_grad_fn(newb.grad_fn, newb.output_nr)
        regen = AsStridedView.apply(base, idx, repeats)
        self._set_grad_fn(regen.grad_fn, 0)
    self._sync_view_version()
    return self


# Note [Copy slices fn]
# ~~~~~~~~~~~~~~~~~~~~~
# torch's CopySlices holds the in-place op's node (`fn`) and calls it on the view's slice of
# the gradient; when no gradient arrives (a custom backward returned None for that path) it
# returns at once and fn never runs, so fn's saved tensors are not unpacked and a later
# in-place change of them raises nothing. Here that node is the next one after
# CopySlicesFlat (out's node, made by `compute`); it is flagged (`_mark_copy_fn`), and the
# engine's no-gradient path skips its unpack. Nodes that `compute` did not make (the value
# of a copy_ that is itself a non-leaf) are not flagged: torch runs them as usual. Found by
# the long fuzz run: `v = base[None]; v.sigmoid_(); out = NoneGrad.apply(x, v); v[:] = s`,
# then a backward raised "modified by an inplace operation" where torch does not.


def _regenerate_view(view):
    """Called by the engine for a stale view (Note [Stale views] in _C_function.pxi): its grad_fn
    becomes a gather from the base's current history."""
    base = view._base
    idx = _view_index(base._data, view._data)
    if idx is None or not _C.is_grad_enabled():
        return
    regen = AsStridedView.apply(base, idx)
    if regen.grad_fn is not None:
        view._set_grad_fn(regen.grad_fn, 0)


_C._register_view_regen(_regenerate_view)


def _rebase_dirty_view(view):
    """A custom Function marked a view dirty (its forward modified it in place): the
    Function's output, whose node is now view.grad_fn, holds the view's new values; the base
    gets a CopySlices node with them and the view is regenerated from it, as torch. Returns
    the view's values gathered from the base's old history (or None when the base has
    none): the engine points the Function's edge for the view there (_rebase_dirty_views
    in _C_function.pxi), so that, as with a built-in in-place op, the view's old node is
    off the path."""
    base = view._base
    if base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    bd, vd = base._data, view._data
    idx = _view_index(bd, vd)
    if idx is None:
        raise NotImplementedError(
            "mark_dirty on a view of a non-contiguous tensor that requires grad is not "
            "supported by cgrad yet; call .clone() on the view first")
    out = _wrap(vd)
    out._set_grad_fn(view.grad_fn, view.output_nr)
    balias = _wrap(bd)
    src = None
    if base.grad_fn is not None or base.requires_grad:
        balias._set_grad_fn(base.grad_fn, base.output_nr)
        if balias.grad_fn is not None:
            src = AsStridedView.apply(balias, idx)
    newb = CopySlicesFlat.apply(balias, idx, out, False)
    base._set_grad_fn(newb.grad_fn, newb.output_nr)
    regen = AsStridedView.apply(base, idx)
    view._set_grad_fn(regen.grad_fn, 0)
    view._sync_view_version()
    return src


_C._register_dirty_view(_rebase_dirty_view)


def record(self, compute, saves_self, internal_check=True):
    """Run compute(src) out of place with autograd and rebase self onto its result.

    See Note [In-place rebase]. internal_check False: a view with internal overlap is
    written (fill_, zero_, masked_fill_, index_put_), and its CopySlices raises torch's
    overlap error in the backward."""
    if self._cmeta:
        _C._check_view_inplace(self)    # Note [View creation meta] in _C_function.pxi
    check_leaf(self)
    if internal_check or self._base is None:
        check_overlap(self)
    if self._base is not None:
        return _record_on_view(self, compute, saves_self, not internal_check)
    _check_view(self)
    data = self._data
    src = _wrap(data.copy() if saves_self else data)
    if self.grad_fn is not None or self.requires_grad:
        src._set_grad_fn(self.grad_fn, self.output_nr)
    out = compute(src)
    od = out._data
    if od.shape != data.shape:
        raise RuntimeError(
            f"output with shape {list(data.shape)} doesn't match the broadcast shape "
            f"{list(od.shape)}")
    check_cast(self, od.dtype)
    if od is not data:
        np.copyto(data, od, casting="unsafe")
    self._bump_version()
    if out.grad_fn is not None:
        self._set_grad_fn(out.grad_fn, out.output_nr)
        _C._bind_saved_output(out.grad_fn, out, self)    # Note [In-place saved outputs]
    return self


def apply_inplace(self, fn, others, compute, saves_self, overlap_check=True,
                  internal_check=True):
    """An in-place op: `fn(arr, *raw_others)` writes into arr when nothing is recorded,
    `compute(src)` builds the out-of-place result when autograd records it. overlap_check:
    torch's partial-overlap check of the operands; internal_check: its internal-overlap check
    of self when nothing is recorded (fill_, zero_ and masked_fill_ write through an expanded
    tensor: Note [Expanded memory])."""
    if overlap_check:
        check_partial_overlap(self, *others)
    if needs_record(self, *others):
        return record(self, compute, saves_self, internal_check)
    if internal_check:
        check_overlap(self)
    raw = [o._data if isinstance(o, _C.TensorBase) else o for o in others]
    fn(self._data, *raw)
    self._bump_version()
    return self


def check_random_fill(self, kernel):
    """uniform_/normal_ fill floating tensors only (torch's kernel error otherwise)."""
    if self._data.dtype.kind not in "fc":
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{torch_type_name(self._data.dtype)}'")


def check_mask_fill(self, mask, value, fname):
    """masked_fill(_)'s checks: a bool mask broadcastable to self, a Number or 0-d value."""
    from cgrad import _checks
    if isinstance(mask, _C.TensorBase) and mask._data.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {mask._data.dtype}")
    if not isinstance(value, (_C.TensorBase, int, float, bool, complex, np.number, np.bool_)):
        raise TypeError(f"{fname}(): argument 'value' (position 2) must be Number or Tensor, "
                        f"not {_checks.type_name(value)}")
    if isinstance(mask, _C.TensorBase) and fname.endswith("_"):
        shape = np.broadcast_shapes(self._data.shape, mask._data.shape)
        if shape != self._data.shape:
            raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")


def ufunc_inplace(ufunc):
    """fn(arr, other) for apply_inplace: ufunc(arr, other, out=arr) with torch's cast rule."""
    def fn(a, b):
        try:
            ufunc(a, b, out=a, casting="same_kind")
        except TypeError:
            out_dt = np.result_type(a, b)
            if ufunc is np.true_divide:
                out_dt = np.result_type(out_dt, np.float32)
            if a.dtype.kind in "iub" and out_dt.kind == "f" and np.ndim(b) == 0:
                raise RuntimeError(f"result type Float can't be cast to the desired output "
                                   f"type {torch_type_name(a.dtype)}") from None
            raise RuntimeError(f"result type {torch_type_name(out_dt)} can't be cast to the "
                               f"desired output type {torch_type_name(a.dtype)}") from None
        except ValueError as e:
            raise RuntimeError(
                f"output with shape {list(a.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(a.shape, np.shape(b)))}") from e
    return fn


# ------------------------------------------------------------------------------------------
# Functions that only exist for in-place forms
# ------------------------------------------------------------------------------------------
class Zero(Function):
    """zero_: the result does not depend on self."""
    _node_name = "ZeroBackward0"

    @staticmethod
    def forward(ctx, a):
        return np.zeros_like(a._data)

    @staticmethod
    def backward(ctx, g):
        return _zeros(g)


def _zeros(g):
    return _wrap(np.zeros_like(g._data))


class Fill(Function):
    """fill_(number): the result does not depend on self."""
    _node_name = "FillBackward2"

    @staticmethod
    def forward(ctx, a, value):
        return np.full_like(a._data, value)

    @staticmethod
    def backward(ctx, g):
        return _zeros(g), None


class FillSetitem(Fill):
    """t[:] = number (torch wraps the number: fill_ with a 0-d tensor that needs no grad)."""
    _node_name = "FillBackward3"


def _is_whole(idx):
    """An index that torch's setitem resolves to the tensor itself: full slices and Ellipsis
    (applySlice returns self for 0:len:1)."""
    parts = idx if type(idx) is tuple else (idx,)
    return all(p is Ellipsis or (type(p) is slice and p.start is None and p.stop is None
                                 and p.step is None) for p in parts)


class FillTensor(Function):
    """fill_(0-d tensor): gradient to the value is the sum of g."""
    _node_name = "FillBackward3"

    @staticmethod
    def forward(ctx, a, value):
        return np.full_like(a._data, value._data)

    @staticmethod
    def backward(ctx, g):
        return _zeros(g), g.sum()


class Copy(Function):
    """copy_(src): gradient to self is 0, to src the gradient (cast and summed to its shape)."""
    _node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, a, src):
        out = np.empty_like(a._data)
        np.copyto(out, src._data, casting="unsafe")
        return out

    @staticmethod
    def backward(ctx, g):
        return _zeros(g), g


def _np_index(idx):
    """An index for NumPy: Tensors become arrays (int64/bool), lists stay advanced indices
    (lists and arrays of floats become int64 arrays, as torch reads them)."""
    if isinstance(idx, tuple):
        return tuple(_np_index(i) for i in idx)
    if isinstance(idx, _C.TensorBase):
        return idx._data
    return float_index_data(idx)


def _is_basic(idx):
    items = idx if isinstance(idx, tuple) else (idx,)
    for i in items:
        if not (i is None or i is Ellipsis or isinstance(i, slice)
                or (isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)))):
            return False
    return True


class _ZeroAt(Function):
    """g with g[idx] = 0 (the gradient of index_put w.r.t. self); self-adjoint."""
    _node_name = "IndexPutBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, idx):
        if ctx is not None:
            ctx._aux = idx
        out = g._data.copy()
        out[idx] = 0
        return out

    @staticmethod
    def backward(ctx, gg):
        return _ZeroAt.apply(gg, ctx._aux), None


class IndexPut(Function):
    """self[idx] = value, out of place: (self, value) -> copy of self with idx set.

    d/dself = g with zeros at idx; d/dvalue = g[idx] (summed to value's shape)."""
    _node_name = "IndexPutBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, idx, value):
        arr = a._data
        v = value._data if isinstance(value, _C.TensorBase) else value
        out = arr.copy()
        try:
            out[idx] = v
        except ValueError as e:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(v))} "
                               f"cannot be broadcast to indexing result") from e
        if ctx is not None:
            ctx._aux = (idx, np.shape(v))
        return out

    @staticmethod
    def backward(ctx, g):
        idx, vshape = ctx._aux
        ga = _ZeroAt.apply(g, idx) if ctx.needs_input_grad[0] else None
        gv = None
        if ctx.needs_input_grad[2]:
            gv = g[idx]
            if tuple(gv.shape) != tuple(vshape):
                # value broadcast to the indexed region: sum over the broadcast dimensions
                from cgrad.ops.reductions import sum_to
                lead = gv.ndim - len(vshape)
                if lead < 0:
                    gv = gv.reshape(vshape)
                else:
                    gv = sum_to(gv, tuple(vshape))
        return ga, None, gv


class CopySlices(IndexPut):
    _node_name = "CopySlices"


class CopySlicesFlat(Function):
    """base with base.flat[idx] = vals (Note [In-place on a view])."""
    _node_name = "CopySlices"
    # No _cg_saves: torch's CopySlices raises on a second backward only when its fn (the
    # in-place op's node) saved something, and here that node is the next one (out's), which
    # raises by itself if it saves; a fill or copy into a view runs again, as in torch.

    @staticmethod
    def forward(ctx, base, idx, vals, overlap=False):
        out = base._data.copy()
        flat, i, v = out.reshape(-1), idx.reshape(-1), vals._data.reshape(-1)
        if overlap:
            # several elements of the view are one location of the base (fill_, zero_,
            # masked_fill_ or index_put_ of an expanded view, which torch writes in place):
            # a location takes the value of an element that changed (the last one), else
            # keeps its own
            old = flat[i]
            same = v == old
            if v.dtype.kind in "fc":
                same |= np.isnan(v) & np.isnan(old)
            i, v = i[~same], v[~same]
        flat[i] = v
        if ctx is not None:
            ctx._aux = (idx, base._data.shape, overlap)
        return out

    @staticmethod
    def backward(ctx, g):
        idx, shape, overlap = ctx._aux
        if overlap:
            # the view written had internal overlap (Note [Expanded memory]): torch's
            # CopySlices copies the gradient into that view's layout and raises
            raise RuntimeError(_OVERLAP_MSG)
        gb = gv = None
        if ctx.needs_input_grad[0]:
            gb = _ZeroAt.apply(g.reshape(-1), idx.reshape(-1)).reshape(shape)
        if ctx.needs_input_grad[2]:
            gv = g.reshape(-1)[idx]
        return gb, None, gv, None


class AsStridedView(Function):
    """The view's elements gathered from its base (only the node is used: the view keeps its
    own storage). d/dbase = zeros with the gradient summed at idx. idx repeats a position
    for a view with overlapping elements (an expand): `repeats` says whether it may (None:
    find out)."""
    _node_name = "AsStridedBackward0"

    @staticmethod
    def forward(ctx, base, idx, repeats=None):
        if ctx is not None:
            if repeats is None:
                repeats = np.unique(idx).size != idx.size
            ctx._aux = (idx, base._data.shape, repeats)
        return base._data.reshape(-1)[idx]

    @staticmethod
    def backward(ctx, g):
        idx, shape, repeats = ctx._aux
        return _ScatterFlat.apply(g, idx, shape, repeats), None, None


class _ScatterFlat(Function):
    """zeros(shape) with g added at .flat[idx] (summed where idx repeats a position);
    adjoint: a gather."""
    _node_name = "AsStridedScatterBackward0"

    @staticmethod
    def forward(ctx, g, idx, shape, repeats):
        if ctx is not None:
            ctx._aux = idx
        out = np.zeros(shape, dtype=g._data.dtype)
        if repeats:
            np.add.at(out.reshape(-1), idx.reshape(-1), g._data.reshape(-1))
        else:
            out.reshape(-1)[idx.reshape(-1)] = g._data.reshape(-1)
        return out

    @staticmethod
    def backward(ctx, gg):
        return gg.reshape(-1)[ctx._aux], None, None, None


_INDEX_TYPES = "only integers, slices (`:`), ellipsis (`...`), None and long or byte " \
               "Variables are valid indices"


def _setitem_error(self, idx, nidx, v, e):
    """torch's error for a setitem NumPy refused (`e`)."""
    if isinstance(e, IndexError):
        for i in (idx if isinstance(idx, tuple) else (idx,)):
            if isinstance(i, (float, str, dict, set)) or i is None.__class__:
                return IndexError(f"{_INDEX_TYPES} (got {type(i).__name__})")
        return IndexError(str(e).replace(" for axis ", " for dimension "))
    target = self._data[nidx].shape
    vs = np.shape(v)
    for k in range(1, max(len(target), len(vs)) + 1):
        t = target[-k] if k <= len(target) else 1
        s = vs[-k] if k <= len(vs) else 1
        if s != t and s != 1:
            return RuntimeError(
                f"The expanded size of the tensor ({t}) must match the existing size ({s}) at "
                f"non-singleton dimension {max(len(target), len(vs)) - k}.  Target sizes: "
                f"{list(target)}.  Tensor sizes: {list(vs)}")
    return RuntimeError(f"shape mismatch: value tensor of shape {list(vs)} cannot be broadcast "
                        f"to indexing result of shape {list(target)}")


def _basic_item(it):
    """An int (not a bool), slice, None or Ellipsis of a NumPy index."""
    return it is None or it is Ellipsis or isinstance(it, slice) or (
        isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)))


def _basic_part(nidx):
    """The basic items of a NumPy index, each array replaced by the full slices of the
    dimensions it consumes: torch applies these first (select, slice) and index_put_s the
    rest into the view they give."""
    out = []
    for it in (nidx if type(nidx) is tuple else (nidx,)):
        if _basic_item(it):
            out.append(it)
        else:
            a = np.asarray(it)
            out.extend([slice(None)] * (a.ndim if a.dtype == np.bool_ else 1))
    return tuple(out)


def _advanced_part(nidx):
    """What is left of a NumPy index once its basic items are applied (_basic_part): the
    arrays, with a full slice for each dimension a slice or None kept; an int's dimension is
    gone."""
    out = []
    for it in (nidx if type(nidx) is tuple else (nidx,)):
        if it is Ellipsis:
            out.append(it)
        elif it is None or isinstance(it, slice):
            out.append(slice(None))
        elif not _basic_item(it):
            out.append(it)
    return tuple(out)


def _masked_fill_path(nidx, value):
    """torch's index_put_ with one boolean mask and a one-element value is a masked_fill_."""
    items = nidx if type(nidx) is tuple else (nidx,)
    arrays = [it for it in items if not _basic_item(it)]
    if len(arrays) != 1 or np.asarray(arrays[0]).dtype != np.bool_:
        return False
    return not isinstance(value, _C.TensorBase) or value._data.size == 1


def _setitem_expanded(self, idx, nidx, value):
    """self[idx] = value where self has internal overlap (an expanded view), as torch (Note
    [Expanded memory]): a basic index writes into the region it selects, which must have no
    overlap itself (under autograd the region, a view, takes the value in place, so the
    write goes through to the expanded memory); an advanced one is index_put_ into the view
    the index's basic items select, with torch's deprecation warning when that view has
    overlap. None: continue with the ordinary assignment."""
    basic = _is_basic(idx)
    try:
        region = self._data[nidx] if basic else self._data[_basic_part(nidx)]
    except (IndexError, ValueError, TypeError):
        return None                     # the assignment reports the index's error
    overlap = has_internal_overlap(region)
    if basic:
        if overlap:
            raise RuntimeError(_OVERLAP_MSG)
        if not needs_record(self, value):
            return None
        view = self[idx]
        if isinstance(value, _C.TensorBase):
            k = 0                       # torch drops the value's leading size-1 dimensions
            while value.ndim - k > view.ndim and value._data.shape[k] == 1:
                k += 1
            if k:
                value = value.reshape(value._data.shape[k:])
            view.copy_(value)
        else:
            view.fill_(value)
        return self
    if overlap:
        _warn(_INDEX_PUT_EXPANDED)
        if _masked_fill_path(nidx, value):
            _warn(_MASKED_FILL_EXPANDED)
        return None             # writes through (its CopySlices raises in a backward)
    if needs_record(self, value):
        # the view the basic items select has no overlap: index_put_ into it, as torch
        setitem(self[_basic_part(nidx)], _advanced_part(nidx), value)
        return self
    return None


def setitem(self, idx, value):
    """Tensor.__setitem__ with torch semantics (in place, recorded when autograd needs it)."""
    from cgrad.tensor import Tensor
    if not isinstance(value, (_C.TensorBase, np.ndarray, int, float, bool, complex, np.number,
                              np.bool_)):
        raise TypeError(f"can't assign a {type(value).__name__} to a {self.type()}")
    for i in (idx if isinstance(idx, tuple) else (idx,)):
        if isinstance(i, (float, str)):
            raise IndexError(f"{_INDEX_TYPES} (got {type(i).__name__})")
    if type(idx) is tuple:
        idx = fold_ellipses(idx, self._data.ndim)      # torch's several Ellipses
    nidx = _np_index(idx)
    if isinstance(value, np.ndarray):
        value = _wrap(value)
    internal_check = True
    if has_internal_overlap(self._data):
        done = _setitem_expanded(self, idx, nidx, value)
        if done is not None:
            return done
        internal_check = _is_basic(idx)     # index_put_ writes through (Note [Expanded memory])
    if isinstance(value, _C.TensorBase) and np.may_share_memory(self._data, value._data):
        # as torch: a basic index copies the value, without its leading size-1 dims and
        # expanded, into the region; an advanced one is index_put_ (the whole tensor
        # against the value)
        v = value._data
        if _is_basic(idx):
            region = self._data[nidx + (Ellipsis,) if isinstance(nidx, tuple) and
                                Ellipsis not in nidx else nidx]
            if v.ndim == 0:
                v = None                    # torch fills the region: nothing to check
            elif v.shape != region.shape:
                k = 0
                while k < v.ndim and v.shape[k] == 1:
                    k += 1
                try:
                    v = np.broadcast_to(v.reshape(v.shape[k:]), region.shape)
                except ValueError:
                    v = None            # the assignment itself reports the shapes
        else:
            region = self._data
        if v is not None and _partial(region, v):
            raise RuntimeError(_PARTIAL_MSG)
    if needs_record(self, value):
        if _is_whole(idx) and not (isinstance(value, _C.TensorBase) and value.ndim > self.ndim):
            # torch: t[:], t[...], t[:, :] are t itself, so the value is filled or copied into
            # t (FillBackward3 / CopyBackwards, which save nothing), not through CopySlices
            if not isinstance(value, _C.TensorBase):
                return record(self, lambda src: FillSetitem.apply(src, value), saves_self=False)
            if value._data.dtype != self._data.dtype:
                value = value.to(self.dtype)
            cls = FillTensor if value.ndim == 0 else Copy
            return record(self, lambda src: cls.apply(src, value), saves_self=False)
        cls = CopySlices if _is_basic(idx) else IndexPut
        if isinstance(value, Tensor) and value._data.dtype != self._data.dtype:
            value = value.to(self.dtype)
        return record(self, lambda src: cls.apply(src, nidx, value), saves_self=False,
                      internal_check=internal_check)
    v = value._data if isinstance(value, _C.TensorBase) else value
    try:
        self._data[nidx] = v
    except (ValueError, IndexError) as e:
        raise _setitem_error(self, idx, nidx, v, e) from None
    self._bump_version()
    return self
