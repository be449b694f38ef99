"""Attention functions of cgrad.nn.functional: ``scaled_dot_product_attention`` (one fused
node, ``ScaledDotProductFlashAttentionForCpuBackward0``) and
``multi_head_attention_forward`` (what nn.MultiheadAttention calls).

Note [Fused attention]: ``softmax(q @ k^T * scale + mask) @ v`` is one node. The forward
keeps the softmax probabilities P (and the dropout mask D, already scaled by 1 / (1 - p));
with Pd = P * D the first-order backward is, in batched NumPy matmuls over the stack,

    dV = Pd^T @ g,   dP = (g @ V^T) * D,   dS = P * (dP - rowsum(dP * P)),
    dQ = dS @ K * scale,   dK = dS^T @ Q * scale,   dmask = dS (summed to the mask's shape)

With ``create_graph=True`` the same formulas are written with cgrad ops on a recomputed P, so
double backward works. Grouped-query attention (``enable_gqa``) repeats each key/value head
``Hq / Hk`` times inside the node and sums the gradients of the repeats.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad._warn import warn as _warn
from cgrad import _C, _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _grad_enabled, _tname
from cgrad.ops._sums import _fast_sum


def _repeat_np(x, rep):
    """Repeat each head (dim -3) ``rep`` times, as repeat_interleave."""
    if rep == 1:
        return x
    return np.repeat(x, rep, axis=-3)


def _unrepeat_np(g, rep):
    if rep == 1:
        return g
    sh = g.shape
    return g.reshape(sh[:-3] + (sh[-3] // rep, rep) + sh[-2:]).sum(axis=-3)


def _repeat_t(x, rep):
    if rep == 1:
        return x
    sh = tuple(x.shape)
    y = x.unsqueeze(-3).expand(*(sh[:-2] + (rep,) + sh[-2:]))
    return y.reshape(*(sh[:-3] + (sh[-3] * rep,) + sh[-2:]))


def _unrepeat_t(g, rep):
    if rep == 1:
        return g
    sh = tuple(g.shape)
    return g.reshape(*(sh[:-3] + (sh[-3] // rep, rep) + sh[-2:])).sum(-3)


# Note [Attention in C]: in float32 without an explicit mask, dropout or grouped heads (what
# nanoGPT and most decoders call), the node's forward and first-order backward are
# cgrad._fused.attn_fwd_f32 / attn_bwd_f32 (csrc/cg_attn.c): per (batch, head) the four
# products by the float32 GEMM of Note [float32 GEMM] (K^T, P^T and dS^T read in place, no
# transposed copies) and the row softmax and its backward in one C pass each, instead of
# ~12 NumPy calls on (batch, heads, T, S) stacks forward and ~10 backward (nanoGPT-tiny's
# (16, 2, 32, 32): 244 -> 161 us forward, 441 -> 313 us both ways; torch 91 and 357). The
# causal mask is applied by skipping the masked keys, as torch's kernel does (the NumPy
# path sets the masked scores to -inf, so an infinite score behind the mask gives no nan
# on either path).
# q, k, v that are views (nanoGPT's heads are (B, T, nh, hs).transpose(1, 2)) are copied to
# C order first. Results agree with the NumPy path to float32 rounding (the sums run in
# another order);
# double backward recomputes P with cgrad ops as before. CGRAD_NO_FUSED_EXT=1 selects the
# NumPy path; so does a CPU without AVX-512F (the GEMM's requirement).
from cgrad._fused_switch import FUSED as _fused_ext, ON as _FUSED_ON
_ATTN_EXT = _FUSED_ON
_F32 = np.dtype(np.float32)


def _attn_ext_ok(q, k, v):
    """Note [Attention in C]: float32 q, k, v of one leading shape (views are copied to
    C order first: nanoGPT's heads are transposed views)."""
    return (_ATTN_EXT and q.dtype == _F32 and k.dtype == _F32 and v.dtype == _F32
            and q.ndim >= 2 and q.ndim == k.ndim == v.ndim
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2])


def _c(a):
    return np.ascontiguousarray(a)


def _safe_softmax_np(s):
    """softmax over the last dim; rows that are entirely -inf give zeros (as torch's CPU
    kernel), not nan."""
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)
    e = np.exp(s - m)
    d = _fast_sum(e, -1, True)
    d[d == 0] = 1
    e /= d
    return e


class _SDPA(Function):
    """softmax(q k^T * scale + bias) (dropout) @ v, one node (Note [Fused attention])."""
    _node_name = "ScaledDotProductFlashAttentionForCpuBackward0"

    @staticmethod
    def forward(ctx, query, key, value, mask, const_bias, scale, rep, drop, causal=False):
        """causal: whether const_bias is is_causal's (0 on and below the diagonal, -inf
        above). The masked keys are skipped, not added -inf to, as torch's kernel does: an
        infinite score behind the mask gives no nan. Without mask, dropout and repeats the
        compiled path may run (Note [Attention in C])."""
        q, k, v = query._data, key._data, value._data
        fast = (mask is None and drop is None and rep == 1
                and (causal or const_bias is None))
        if fast and _attn_ext_ok(q, k, v):
            res = _fused_ext.attn_fwd_f32(_c(q), _c(k), _c(v), scale, causal)
            if res is not None:
                out, p = res
                if ctx is not None:
                    ctx.save_for_backward(query, key, value, mask)
                    ctx._aux = (p, const_bias, scale, rep, drop, True, causal)
                return out
        kr, vr = _repeat_np(k, rep), _repeat_np(v, rep)
        s = np.matmul(q, np.swapaxes(kr, -1, -2))
        s *= q.dtype.type(scale)
        if causal:
            s = np.where(const_bias == 0, s, const_bias)    # -inf above, whatever s was
        elif const_bias is not None:
            s = s + const_bias
        if mask is not None:
            s = s + mask._data
        p = _safe_softmax_np(s)
        pd = p * drop if drop is not None else p
        out = np.matmul(pd, vr)
        if ctx is not None:
            ctx.save_for_backward(query, key, value, mask)
            ctx._aux = (p, const_bias, scale, rep, drop, False, causal)
        return out

    @staticmethod
    def backward(ctx, g):
        query, key, value, mask = ctx.saved_tensors
        p, const_bias, scale, rep, drop, compiled, is_causal = ctx._aux
        nq, nk, nv, nm = ctx.needs_input_grad[:4]
        if _grad_enabled():
            return (_SDPA._backward_graph(query, key, value, mask, const_bias, scale, rep, drop,
                                          g, (nq, nk, nv, nm), is_causal) + (None,))
        q, k, v, ga = query._data, key._data, value._data, g._data
        if compiled and ga.dtype == np.float32 and ga.shape == p.shape[:-1] + (
                v.shape[-1],):
            res = _fused_ext.attn_bwd_f32(_c(q), _c(k), _c(v), p, _c(ga), scale, is_causal)
            if res is not None:
                dq, dk, dv = res
                return (_wrap(dq) if nq else None, _wrap(dk) if nk else None,
                        _wrap(dv) if nv else None, None, None, None, None, None, None)
        kr, vr = _repeat_np(k, rep), _repeat_np(v, rep)
        dt = q.dtype.type
        gq = gk = gv = gm = None
        if nv:
            pd = p * drop if drop is not None else p
            gv = _wrap(_unrepeat_np(np.matmul(np.swapaxes(pd, -1, -2), ga), rep))
        if nq or nk or nm:
            dp = np.matmul(ga, np.swapaxes(vr, -1, -2))
            if drop is not None:
                dp *= drop
            ds = dp - _fast_sum(dp * p, -1, True)
            ds *= p
            if nm:
                gm = _wrap(ds.copy())
            ds *= dt(scale)
            if nq:
                gq = _wrap(np.matmul(ds, kr))
            if nk:
                gk = _wrap(_unrepeat_np(np.matmul(np.swapaxes(ds, -1, -2), q), rep))
        return gq, gk, gv, gm, None, None, None, None, None

    @staticmethod
    def _backward_graph(query, key, value, mask, const_bias, scale, rep, drop, g, needs,
                        is_causal=False):
        """The backward as cgrad ops on a recomputed P (create_graph=True)."""
        nq, nk, nv, nm = needs
        kr, vr = _repeat_t(key, rep), _repeat_t(value, rep)
        s = (query @ kr.transpose(-1, -2)) * scale
        if is_causal:
            s = s.masked_fill(_wrap(const_bias != 0), -np.inf)
        elif const_bias is not None:
            s = s + _wrap(const_bias)
        if mask is not None:
            s = s + mask
        p = s.softmax(-1)
        d = _wrap(drop) if drop is not None else None
        pd = p * d if d is not None else p
        gq = gk = gv = gm = None
        if nv:
            gv = _unrepeat_t(pd.transpose(-1, -2) @ g, rep)
        if nq or nk or nm:
            dp = g @ vr.transpose(-1, -2)
            if d is not None:
                dp = dp * d
            ds = p * (dp - (dp * p).sum(-1, keepdim=True))
            if nm:
                gm = ds
            if nq:
                gq = (ds @ kr) * scale
            if nk:
                gk = _unrepeat_t((ds.transpose(-1, -2) @ query) * scale, rep)
        return gq, gk, gv, gm, None, None, None, None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, *, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, with
    arbitrary leading batch dims. ``attn_mask``: bool (True takes part) or float (added);
    ``is_causal`` masks the upper triangle (an error together with ``attn_mask``, as torch's
    documented behaviour); ``scale`` defaults to ``1 / sqrt(E)``; ``enable_gqa``
    repeats key/value heads (dim -3) to the query's head count; ``dropout_p`` drops
    attention weights with cgrad's generator. One node (Note [Fused attention])."""
    for pos, (name, t) in enumerate((("query", query), ("key", key), ("value", value)), 1):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' (position "
                            f"{pos}) must be Tensor, not {_checks.type_name(t)}")
    q, k, v = query._data, key._data, value._data
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_tname(q.dtype).lower()} key.dtype: "
                           f"{_tname(k.dtype).lower()} and value.dtype: "
                           f"{_tname(v.dtype).lower()} instead.")
    if q.dtype.kind != "f":
        raise RuntimeError(f"\"scaled_dot_product_attention\" not implemented for "
                           f"'{_tname(q.dtype)}'")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention: expected query, key and value to "
                           "be at least 2-dimensional")
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError(f"Expected query and key to have the same embedding dimension, "
                           f"but got {q.shape[-1]} and {k.shape[-1]}")
    rep = 1
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3:
        hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
        if hk != hv or hk == 0 or hq % hk != 0:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in ")
        rep = hq // hk
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    L, S = q.shape[-2], k.shape[-2]
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    const_bias = None
    mask = None
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if is_causal:
        const_bias = np.where(np.tri(L, S, dtype=bool), 0, -np.inf).astype(q.dtype)
    if attn_mask is not None:
        m = attn_mask._data
        if m.dtype == np.bool_:
            mb = np.where(m, 0, -np.inf).astype(q.dtype)
            const_bias = mb if const_bias is None else const_bias + mb
        else:
            if m.dtype != q.dtype:
                raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match "
                                   f"query dtype, but got attn_mask.dtype: "
                                   f"{_tname(m.dtype).lower()} and  query.dtype: "
                                   f"{_tname(q.dtype).lower()} instead.")
            mask = attn_mask
    drop = None
    if dropout_p > 0.0:
        from cgrad._creation import _rng
        shape = np.broadcast_shapes(q.shape[:-1] + (S,), _repeat_np(k, rep).shape[:-2]
                                    + (L, S))
        if dropout_p >= 1.0:
            drop = np.zeros(shape, dtype=q.dtype)
        else:
            drop = (_rng().random(shape, dtype=q.dtype) >= dropout_p).astype(q.dtype)
            drop *= q.dtype.type(1.0 / (1.0 - dropout_p))
    # Note [Attention in C]: the common case (float32, no explicit mask, no dropout, no
    # grouped heads, q, k, v of one leading shape) takes the compiled path
    return _SDPA.apply(query, key, value, mask, const_bias, sc, rep, drop, bool(is_causal))


# ---------------------------------------------------------------------------
# multi_head_attention_forward


def _canonical_mask(mask, mask_name, other_type, other_name, target_type):
    """A bool mask (True = masked out) becomes a float mask with -inf; a float mask is kept.
    torch's deprecation warning when ``mask``'s dtype differs from ``other_type``'s."""
    if mask is None:
        return None
    md = mask._data.dtype
    if md != np.bool_ and md.kind != "f":
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if other_type is not None and md != other_type:
        _warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
              "Use same type for both instead.")
    if md == np.bool_:
        return _wrap(np.where(mask._data, -np.inf, 0).astype(target_type))
    return mask


def _dtype_of(mask):
    return None if mask is None else mask._data.dtype


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention on (L, N, E) inputs (or unbatched (L, E)), as
    nn.MultiheadAttention calls it; returns ``(output, weights or None)``."""
    from cgrad._creation import zeros
    from cgrad.ops.joining import cat
    from cgrad.ops.linalg import bmm
    from cgrad.ops.products import baddbmm
    from cgrad.nn.functional._linear import linear
    from cgrad.nn.functional._dropout import dropout
    from cgrad.nn.functional._padding import pad

    is_batched = query.dim() == 3
    if not is_batched:
        if query.dim() != 2 or key.dim() != 2 or value.dim() != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to "
                                 f"be 2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif key.dim() != 3 or value.dim() != 3:
        raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D"
                             f" but found {key.dim()}-D and {value.dim()}-D tensors "
                             "respectively")
    dt = query._data.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _dtype_of(attn_mask), "attn_mask", dt)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", dt)
        if key_padding_mask is not None:
            is_causal = False

    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")

    # input projections
    if not use_separate_proj_weight:
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    else:
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    q = linear(query, w_q, b_q)
    k = linear(key, w_k, b_k)
    v = linear(value, w_v, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key/value.")
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        v = static_v

    if add_zero_attn:
        zshape = (bsz * num_heads, 1, head_dim)
        k = cat([k, zeros(zshape, dtype=k.dtype)], dim=1)
        v = cat([v, zeros(zshape, dtype=v.dtype)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but "
                                 f"got {tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(
            bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / head_dim)
        if attn_mask is not None:
            w = baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            w = bmm(q_scaled, k.transpose(-2, -1))
        w = w.softmax(-1)
        if dropout_p > 0.0:
            w = dropout(w, p=dropout_p)
        out = bmm(w, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias)
        out = out.reshape(tgt_len, bsz, out.shape[1])
        w = w.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(1)
        if not is_batched:
            out = out.squeeze(1)
            w = w.squeeze(0)
        return out, w

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.shape[1])
    if not is_batched:
        out = out.squeeze(1)
    return out, None
