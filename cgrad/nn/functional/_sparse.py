"""Sparse functions of cgrad.nn.functional (torch's name for the family, as in
nn/modules/sparse.py): ``embedding`` (``EmbeddingBackward0``, with its double backward) and
``one_hot``."""
from __future__ import annotations

import numpy as np

from cgrad import _C
from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.ops.indexing import accumulate_along


class _Embedding(Function):
    """weight[idx].  d/dweight = rows of g summed into their indices (padding_idx: none).
    With ``adjoint`` it is the gradient of _EmbeddingDenseBackward: the gather with the
    padding positions zeroed and the frequency scaling applied."""
    _node_name = "EmbeddingBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, weight, idx, padding_idx, scale, adjoint, sparse=False):
        W = weight._data
        out = W[idx]
        if adjoint:
            if padding_idx is not None:
                out[idx == padding_idx] = 0
            if scale:
                out /= _counts(idx, W.shape[0])[idx][..., None]
        if ctx is not None:
            ctx._aux = (idx, W.shape[0], padding_idx, scale, sparse)
        return out

    @staticmethod
    def backward(ctx, g):
        idx, V, padding_idx, scale, sparse = ctx._aux
        if sparse:
            return _sparse_grad(g, idx, V, padding_idx, scale), None, None, None, None, None
        return (_EmbeddingDenseBackward.apply(g, idx, V, padding_idx, scale), None, None, None,
                None, None)


def _sparse_grad(g, idx, V, padding_idx, scale):
    """The weight's gradient as a sparse COO tensor (V, D), uncoalesced as torch's: one entry
    per looked-up index (the padding index left out) and column. cgrad's sparse tensors have
    scalar values, so its indices are (2, n * D) where torch's hybrid tensor has (1, n) and
    values (n, D); to_dense() and the optimizers see the same gradient."""
    from cgrad.sparse import sparse_coo_tensor
    if scale:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse "
                           "gradients")
    D = g.shape[-1]
    flat = idx.reshape(-1)
    keep = np.ones(flat.shape, dtype=bool) if padding_idx is None else flat != padding_idx
    rows = flat[keep]
    G = g.reshape(-1, D)
    if not keep.all():
        G = G[_wrap(np.nonzero(keep)[0])]
    n = rows.shape[0]
    ind = np.stack([np.repeat(rows, D), np.tile(np.arange(D, dtype=np.int64), n)])
    return sparse_coo_tensor(_wrap(ind), G.reshape(-1), (V, D))


def _counts(idx, V):
    return np.bincount(idx.reshape(-1), minlength=V)


class _EmbeddingDenseBackward(Function):
    """Scatter-add the rows of g into zeros(V, D) at idx; the padding row stays zero."""
    _node_name = "EmbeddingDenseBackwardBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, idx, V, padding_idx, scale):
        G = g._data
        D = G.shape[-1]
        flat = idx.reshape(-1)
        G2 = G.reshape(-1, D)
        if scale:
            G2 = G2 / _counts(idx, V)[flat][:, None]
        out = np.zeros((V, D), dtype=G.dtype)
        # rows added in index order (Note [Scatter-add order]): bitwise torch's on one thread
        accumulate_along(out, 0, flat, G2)
        if padding_idx is not None:
            out[padding_idx] = 0
        if ctx is not None:
            ctx._aux = (idx, padding_idx, scale)
        return out

    @staticmethod
    def backward(ctx, gg):
        idx, padding_idx, scale = ctx._aux
        return _Embedding.apply(gg, idx, padding_idx, scale, True), None, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Look up rows of ``weight`` (num_embeddings, dim) at the int64/int32 indices ``input``.
    Repeated indices accumulate their gradients; the ``padding_idx`` row gets no gradient.
    ``max_norm`` renormalises the looked-up rows of ``weight`` in place (no gradient), as in
    torch."""
    _checks.check_tensor(weight, "embedding", "weight", 1)
    _checks.check_tensor(input, "embedding", "indices", 2)
    idx = input._data
    W = weight._data
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {_C._type_name(idx)} instead (while checking arguments "
            "for embedding)")
    if W.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    V = W.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < V, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -V, "Padding_idx must be within num_embeddings"
            padding_idx = V + padding_idx
    if idx.size and (idx.min() < 0 or idx.max() >= V):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _renorm(weight, idx, max_norm, norm_type)
    return _Embedding.apply(weight, idx.astype(np.int64, copy=False), padding_idx,
                            bool(scale_grad_by_freq), False, bool(sparse))


def _renorm(weight, idx, max_norm, norm_type):
    """torch's embedding_renorm_: rows of weight looked up at idx whose norm exceeds
    max_norm are scaled in place to max_norm / (norm + 1e-7) (no gradient)."""
    W = weight._data
    uniq = np.unique(idx)
    rows = W[uniq]
    norms = np.linalg.norm(rows, ord=norm_type, axis=1)
    over = norms > max_norm
    if over.any():
        W[uniq[over]] = rows[over] * (max_norm / (norms[over] + 1e-7))[:, None].astype(W.dtype)
        weight._bump_version()


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a trailing class dim; ``num_classes=-1`` infers max + 1.
    Never requires grad."""
    t = tensor._data
    if t.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if t.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(t.max()) + 1
    if t.size:
        if t.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if t.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes < 0:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(t.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, t[..., None], 1, axis=-1)
    return _wrap(out)
