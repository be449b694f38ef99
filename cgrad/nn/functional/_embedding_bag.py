"""``embedding_bag``: sums, means or maxima of bags of embedding rows, without building the
rows' (bag, position) layout.

The looked-up rows come from ``embedding`` (so ``sparse``, ``max_norm`` and
``scale_grad_by_freq`` behave as there), are weighted by ``per_sample_weights`` and reduced
per bag with one ``index_add`` (sum/mean) or a ``gather`` of each bag's arg-max row (max, found
with ``np.maximum.reduceat``): no Python loop over bags, and gradients (also double backward)
are those of the ops. Entries equal to ``padding_idx`` are left out of their bag (also of the
mean's count); an empty bag gives zeros."""
from __future__ import annotations

import numpy as np

from cgrad import _C, _checks
from cgrad._C import _wrap
from cgrad.nn.functional._sparse import _renorm, embedding


def _size(shape):
    from cgrad.tensor import Size
    return repr(Size(shape))


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Reduce (``mode`` 'sum', 'mean' or 'max') the rows of ``weight`` looked up at ``input``
    bag by bag: a 2-D ``input`` is one bag per row; a 1-D one is cut at ``offsets`` (the
    last offset ends the last bag with ``include_last_offset``)."""
    _checks.check_tensor(input, "embedding_bag", "input", 1)
    _checks.check_tensor(weight, "embedding_bag", "weight", 2)
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({_size(per_sample_weights.shape)}"
                         f") is not None, then it must have the same shape as the input "
                         f"({_size(input.shape)})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    idx = np.asarray(input._data)
    for t in (input, offsets):
        if t is not None and t._data.dtype not in (np.int64, np.int32):
            raise RuntimeError(
                "Expected tensor for argument #1 'indices' to have one of the following scalar "
                f"types: Long, Int; but got {_C._type_name(t._data)} instead (while checking "
                "arguments for embedding_bag)")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets)}")
        B, L = idx.shape
        off = np.arange(0, B * L, L, dtype=np.int64)
        idx = idx.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        off = np.asarray(offsets._data).astype(np.int64)
        if off.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub.")
    if off.size and off[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {off[0]}")
    n = idx.shape[0]
    if include_last_offset:
        if off.size == 0:
            raise RuntimeError("include_last_offset: number of offsets should be at least 1")
        starts, ends = off[:-1], off[1:]
    else:
        starts, ends = off, np.append(off[1:], n)
    if off.size and off[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {off[-1]}")
    if idx.size and (idx.min() < 0 or idx.max() >= weight.shape[0]):
        bad = idx[(idx < 0) | (idx >= weight.shape[0])][0]
        raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found "
                           f"idx to be {bad}")
    B = starts.shape[0]
    V, D = weight.shape
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < V, "padding_idx must be within the number of embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -V, "padding_idx must be within the number of embeddings"
            padding_idx = V + padding_idx
    lengths = np.maximum(ends - starts, 0)
    seg = np.repeat(np.arange(B, dtype=np.int64), lengths)           # bag of each entry
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths          # entry number of each bag's start
    pos = np.repeat(starts, lengths) + np.arange(total) - np.repeat(first, lengths)
    keep = np.ones(pos.shape, dtype=bool) if padding_idx is None else idx[pos] != padding_idx
    sel = pos[keep]
    seg = seg[keep]
    if max_norm is not None and idx.size:
        _renorm(weight, idx, max_norm, norm_type)    # every index, the padding one too
    rows = embedding(_wrap(idx[sel].astype(np.int64)), weight, None, None, norm_type,
                     scale_grad_by_freq, sparse)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[_wrap(sel)].unsqueeze(1)
    zeros = _wrap(np.zeros((B, D), dtype=weight._data.dtype))
    if mode in ("sum", "mean"):
        out = zeros.index_add(0, _wrap(seg), rows)
        if mode == "mean":
            cnt = np.bincount(seg, minlength=B).astype(weight._data.dtype)
            out = out / _wrap(np.maximum(cnt, 1)[:, None])
        return out
    # max: each (bag, column) takes its first maximal entry
    R = rows._data
    m = seg.shape[0]
    if m == 0:
        return zeros + rows.sum() * 0 if rows.requires_grad else zeros
    bstart = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])       # first entry of each bag
    bags = seg[bstart]
    mx = np.maximum.reduceat(R, bstart, axis=0)                       # (nonempty, D)
    cand = np.where(R == mx[np.searchsorted(bstart, np.arange(m), side="right") - 1],
                    np.arange(m)[:, None], m)
    arg = np.minimum.reduceat(cand, bstart, axis=0)                   # (nonempty, D)
    picked = rows.gather(0, _wrap(arg.astype(np.int64)))
    if bags.shape[0] == B:
        return picked
    return zeros.index_add(0, _wrap(bags), picked)
