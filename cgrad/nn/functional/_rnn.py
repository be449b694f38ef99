"""Fused recurrent layers: one graph node per layer-direction for the whole sequence.

Sequences are in packed form: data (N, I) holding step t's rows at offsets[t]:offsets[t+1],
batch_sizes bs non-increasing (equal lengths: every bs[t] = B). Forward runs the time loop in
NumPy (one matmul for the input projection of every step, one matmul per step for the
hidden-to-hidden gates of the active rows) and keeps the gate activations; backward runs BPTT
in NumPy, with every factor that does not depend on the recursion computed for all steps at
once, and ends with one matmul each for dW_ih, dW_hh and dx. The state is a (B, H) array of
which step t updates the first bs[t] rows; the rows left alone hold the final state of the
sequences that ended (forward) or the initial state of those not yet started (reverse).
When backward itself is recorded (create_graph), it rebuilds the layer from cgrad ops and
differentiates that, so double backward works.
"""
from __future__ import annotations


import numpy as np

from cgrad._C import _wrap
from cgrad.autograd.engine import grad as _autograd_grad
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _grad_enabled
from cgrad.ops import _gemm
from cgrad.ops._sums import _fast_sum

__all__ = []

from cgrad._fused_switch import FUSED as _fused_ext, ON as _FUSED_ON

# Note [Fused LSTM step]: per time step the LSTM cell is ~15 NumPy calls forward and ~20
# backward on (batch, 4H) blocks, a few microseconds each at batch 32 x 128 hidden, so the
# calls, not the arithmetic, took a third of the char-LSTM training step. cgrad._fused
# (csrc/cg_fused.c) does each step's cell in one pass over the same buffers, with the same
# formulas in the same order; the per-step matrix products go to the float32 GEMM with W_hh
# packed once per call (Note [float32 GEMM]), else to NumPy's BLAS. float64 uses the C
# library's exp and tanh; float32 polynomial exp and tanh (<= 1 ulp of the float64 functions
# rounded; sigmoid <= 3 ulp; NumPy's own float32 exp is <= 2.5 ulp), so float32 results differ
# from the NumPy path by rounding. CGRAD_NO_FUSED_EXT=1 at import selects the NumPy path
# (tests run both).
_FUSED = _FUSED_ON


# Note [Recurrent step buffers]: the time loop is a few hundred NumPy calls on (batch, 4H)
# blocks, so what each step allocates or strides over costs as much as its arithmetic. The
# forward multiplies by a C-contiguous copy of W_hh^T (OpenBLAS is ~30 % slower on the
# transposed view at these shapes), writes the recurrent product, the gates and the cell
# state into buffers made once per call (no temporaries per step) and applies the sigmoid in
# place. The LSTM backward computes the factors that do not depend on the recursion
# (s (1 - s) of the sigmoid gates, 1 - g^2, o (1 - tanh(c)^2)) per step on the (n, 4H) block
# that is hot in cache, directly in the pre-activation gradient's rows, instead of for all
# steps at once on strided per-gate views of (N, 4H) (which took 1.5 ms per layer-direction
# at batch 32 x 64 steps x 128 hidden); the recurrent product goes straight into dh. The
# products are the same; some are taken in another order, so gradients agree with the
# all-steps version to rounding (tests compare with torch, float64 at 1e-10).


def _layout(bs, reverse):
    """Offsets of each step and the processing order."""
    bs = np.asarray(bs, dtype=np.int64)
    T = bs.size
    offsets = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(bs, out=offsets[1:])
    order = range(T - 1, -1, -1) if reverse else range(T)
    return offsets, order


def _prev_index(bs, reverse):
    """For every packed row the row of its previous state: a packed row, or N + b for the
    initial state of batch entry b."""
    bs = np.asarray(bs, dtype=np.int64)
    T = bs.size
    offsets, _ = _layout(bs, reverse)
    N = int(offsets[-1])
    t_idx = np.repeat(np.arange(T), bs)
    b_idx = np.arange(N) - offsets[t_idx]
    tp = t_idx + 1 if reverse else t_idx - 1
    has_prev = (tp >= 0) & (tp < T)
    tp_c = np.clip(tp, 0, T - 1)
    has_prev &= b_idx < bs[tp_c]
    return np.where(has_prev, offsets[tp_c] + b_idx, N + b_idx)


def _equal_lengths(first, seq, bs):
    B, N = first.shape[0], seq.shape[0]
    return B and N % B == 0 and bs[0] == B and bs[-1] == B     # bs is non-increasing


def _prev_rows(seq, first, bs, reverse):
    """The previous state of every packed row: for equal lengths a shifted copy (what
    the gather gives, without the gather), else the gather over _prev_index."""
    B, N = first.shape[0], seq.shape[0]
    if _equal_lengths(first, seq, bs):
        out = np.empty((N, seq.shape[1]), dtype=np.result_type(seq, first))
        if reverse:
            out[:N - B] = seq[B:]
            out[N - B:] = first
        else:
            out[:B] = first
            out[B:] = seq[:N - B]
        return out
    return np.concatenate([seq, first], 0)[_prev_index(bs, reverse)]


def _prev_grad(dG, seq, first, bs, reverse):
    """dG^T @ (the previous state of every packed row): for equal lengths two products on
    the rows as they are (the first step's rows against the initial state, the others
    against the outputs shifted by one step), without copying them into one array."""
    B, N = first.shape[0], seq.shape[0]
    if _equal_lengths(first, seq, bs) and dG.dtype == seq.dtype == first.dtype:
        f0, s0 = (slice(N - B, N), slice(0, N - B)) if reverse else (slice(0, B), slice(B, N))
        out = _gemm.mm(dG[f0].T, first)
        out += _gemm.mm(dG[s0].T, seq[B:] if reverse else seq[:N - B])
        return out
    return _gemm.mm(dG.T, _prev_rows(seq, first, bs, reverse))


def _composite_grads(ctx, tensors, grads_out, composite, args):
    """create_graph path: rebuild the layer from cgrad ops and differentiate it."""
    needs = ctx.needs_input_grad
    inputs = [t for t, n in zip(tensors, needs) if n and t is not None]
    outs = composite(*tensors, *args)
    grads = iter(_autograd_grad(outs, inputs, grads_out, create_graph=True, allow_unused=True))
    return [next(grads) if (n and t is not None) else None for t, n in zip(tensors, needs)]


def _param_grads(needs, x, w_ih, dGI, dGH, prev, b_ih, b_hh, k=2):
    """dx, dW_ih, dW_hh, db_ih, db_hh from the packed pre-activation gradients (needs from
    position k: x is input 0, w_ih k, w_hh k+1, b_ih k+2, b_hh k+3); prev: the previous
    states for dW_hh, an (N, H) array or (hs, h0, bs, reverse) for _prev_grad."""
    gx = _wrap(_gemm.mm(dGI, w_ih._data)) if needs[0] else None
    gwih = _wrap(_gemm.mm(dGI.T, x._data)) if needs[k] else None
    gwhh = None
    if needs[k + 1]:
        gwhh = _wrap(_prev_grad(dGH, *prev) if type(prev) is tuple else _gemm.mm(dGH.T, prev))
    gbih = _wrap(_fast_sum(dGI, 0)) if (b_ih is not None and needs[k + 2]) else None
    gbhh = None
    if b_hh is not None and needs[k + 3]:
        if dGH is dGI:              # LSTM, RNN: one pre-activation gradient for both biases
            gbhh = _wrap(gbih._data.copy()) if gbih is not None else _wrap(_fast_sum(dGH, 0))
        else:
            gbhh = _wrap(_fast_sum(dGH, 0))
    return gx, gwih, gwhh, gbih, gbhh


def _lstm_fwd_numpy(gi, whh_t, offsets, order, h, c, hh, acts, cs, tcs, hs):
    """The LSTM forward time loop in NumPy calls (float16, or without cgrad._fused)."""
    H = h.shape[1]
    ig = np.empty_like(h)                         # i * g of one step
    for t in order:
        lo, hi = offsets[t], offsets[t + 1]
        n = hi - lo
        a = gi[lo:hi]
        np.matmul(h[:n], whh_t, out=hh[:n])
        a += hh[:n]
        act = acts[lo:hi]
        np.negative(a, out=act)                   # sigmoid, in place in act
        np.exp(act, out=act)
        act += 1
        np.reciprocal(act, out=act)
        np.tanh(a[:, 2 * H:3 * H], out=act[:, 2 * H:3 * H])
        cn = cs[lo:hi]
        np.multiply(act[:, H:2 * H], c[:n], out=cn)
        np.multiply(act[:, :H], act[:, 2 * H:3 * H], out=ig[:n])
        cn += ig[:n]
        c[:n] = cn
        np.tanh(cn, out=tcs[lo:hi])
        np.multiply(act[:, 3 * H:], tcs[lo:hi], out=hs[lo:hi])
        h[:n] = hs[lo:hi]


def _lstm_bwd_numpy(acts, tcs, cprev, go, whh, offsets, order, dh, dc, dA):
    """The LSTM backward time loop in NumPy calls (float16, or without cgrad._fused)."""
    H = dh.shape[1]
    kc = np.empty_like(dc)
    for t in reversed(order):
        lo, hi = offsets[t], offsets[t + 1]
        n = hi - lo
        act, tc, d = acts[lo:hi], tcs[lo:hi], dA[lo:hi]
        i, f, g, o = act[:, :H], act[:, H:2 * H], act[:, 2 * H:3 * H], act[:, 3 * H:]
        # the factors that do not depend on the recursion (Note [Recurrent step buffers])
        np.subtract(1, act, out=d)                 # s (1 - s) for i, f, o
        d *= act
        dg = d[:, 2 * H:3 * H]                     # 1 - g^2 for g = tanh
        np.multiply(g, g, out=dg)
        np.subtract(1, dg, out=dg)
        d[:, :H] *= g                              # d a_i / dc = g i (1 - i)
        d[:, H:2 * H] *= cprev[lo:hi]              # d a_f / dc = c_prev f (1 - f)
        dg *= i                                    # d a_g / dc = i (1 - g^2)
        d[:, 3 * H:] *= tc                         # d a_o / dh = tanh(c) o (1 - o)
        k = kc[:n]                                 # dc / dh through h = o tanh(c)
        np.multiply(tc, tc, out=k)
        np.subtract(1, k, out=k)
        k *= o
        dhn = dh[:n]
        dhn += go[lo:hi]
        dcn = dc[:n]
        k *= dhn
        dcn += k
        d3 = d.reshape(n, 4, H)
        d3[:, :3] *= dcn[:, None, :]
        d[:, 3 * H:] *= dhn
        dcn *= f
        np.matmul(d, whh, out=dhn)


class _LSTMLayer(Function):
    """(x (N, I), h0 (B, H), c0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (N, H), h_n, c_n)
    for one direction (reverse: time runs from the last step to the first)."""
    _node_name = "LSTMBackward"

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, bs, reverse, composite):
        H = h0.shape[1]
        X, Wih, Whh = x._data, w_ih._data, w_hh._data
        dt = np.result_type(X, Wih)
        offsets, order = _layout(bs, reverse)
        N = int(offsets[-1])
        acts = np.empty((N, 4 * H), dtype=dt)         # i, f, g, o after their nonlinearity
        cs = np.empty((N, H), dtype=dt)               # c_t
        tcs = np.empty_like(cs)                       # tanh(c_t)
        hs = np.empty_like(cs)                        # h_t (the output)
        h = h0._data.astype(dt, order="C", copy=True)
        c = c0._data.astype(dt, order="C", copy=True)
        B = h.shape[0]
        hh = np.empty((B, 4 * H), dtype=dt)           # h @ W_hh^T of one step
        bias = None if b_ih is None else b_ih._data + b_hh._data
        pk = None
        if (_FUSED and dt == np.float32 and Whh.dtype == dt
                and (bias is None or bias.dtype == dt)):
            # Note [float32 GEMM]: both weights packed once, the whole time loop in C, the
            # input projection of a step made at that step (never stored)
            pk = _gemm.packed(Wih.T), _gemm.packed(Whh.T)
        if pk is not None and pk[0] is not None and pk[1] is not None:
            _fused_ext.lstm_seq_fwd(offsets, reverse, pk[0], pk[1], np.ascontiguousarray(X),
                                    bias, hh, c, h, acts, cs, tcs, hs)
        else:
            gi = _gemm.mm(X, Wih.T)
            if bias is not None:
                gi += bias
            whh_t = np.ascontiguousarray(Whh.T, dtype=dt)   # Note [Recurrent step buffers]
            if _FUSED and dt in (np.float32, np.float64):    # Note [Fused LSTM step]
                step = _fused_ext.lstm_fwd
                for t in order:
                    lo, hi = offsets[t], offsets[t + 1]
                    n = hi - lo
                    np.matmul(h[:n], whh_t, out=hh[:n])
                    step(lo, n, gi, hh, c, h, acts, cs, tcs, hs)
            else:
                _lstm_fwd_numpy(gi, whh_t, offsets, order, h, c, hh, acts, cs, tcs, hs)
        if ctx is not None:
            ctx.save_for_backward(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (bs, reverse, acts, cs, tcs, hs, composite)
        return hs.copy(), h, c        # (a copy: hs is saved for backward)

    @staticmethod
    def backward(ctx, g_out, g_h, g_c):
        tensors = ctx.saved_tensors
        x, h0, c0, w_ih, w_hh, b_ih, b_hh = tensors
        bs, reverse, acts, cs, tcs, hs, composite = ctx._aux
        if _grad_enabled():          # create_graph: differentiate the composite layer
            res = _composite_grads(ctx, tensors, (g_out, g_h, g_c), composite, (bs, reverse))
            return tuple(res) + (None, None, None)
        needs = ctx.needs_input_grad
        N, H = hs.shape
        whh = w_hh._data
        go = g_out._data
        offsets, order = _layout(bs, reverse)
        cprev = _prev_rows(cs, c0._data, bs, reverse)
        dA = np.empty((N, 4 * H), dtype=acts.dtype)
        dh = g_h._data.astype(hs.dtype, order="C", copy=True)
        dc = g_c._data.astype(hs.dtype, order="C", copy=True)
        if _FUSED and dA.dtype in (np.float32, np.float64):  # Note [Fused LSTM step]
            go = np.ascontiguousarray(go, dtype=dA.dtype)
            cprev = np.ascontiguousarray(cprev, dtype=dA.dtype)
            pk = _gemm.packed(whh) if whh.dtype == dA.dtype else None
            if pk is not None:                  # the whole time loop in C
                _fused_ext.lstm_seq_bwd(offsets, reverse, pk, acts, tcs, cprev, go, dh, dc,
                                        dA)
            else:
                step = _fused_ext.lstm_bwd
                for t in reversed(order):
                    lo, hi = offsets[t], offsets[t + 1]
                    n = hi - lo
                    step(lo, n, acts, tcs, cprev, go, dh, dc, dA)
                    np.matmul(dA[lo:hi], whh, out=dh[:n])
        else:
            _lstm_bwd_numpy(acts, tcs, cprev, go, whh, offsets, order, dh, dc, dA)
        gx, gwih, gwhh, gbih, gbhh = _param_grads(needs, x, w_ih, dA, dA,
                                                  (hs, h0._data, bs, reverse), b_ih, b_hh, k=3)
        gh0 = _wrap(dh) if needs[1] else None
        gc0 = _wrap(dc) if needs[2] else None
        return gx, gh0, gc0, gwih, gwhh, gbih, gbhh, None, None, None


class _GRULayer(Function):
    """(x (N, I), h0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (N, H), h_n): one GRU
    layer-direction (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)))."""
    _node_name = "GRUBackward"

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, bs, reverse, composite):
        H = h0.shape[1]
        whh = w_hh._data
        gi = x._data @ w_ih._data.T
        if b_ih is not None:
            gi += b_ih._data
        dt = gi.dtype
        N = gi.shape[0]
        offsets, order = _layout(bs, reverse)
        rz = np.empty((N, 2 * H), dtype=dt)
        ns = np.empty((N, H), dtype=dt)
        ghn = np.empty((N, H), dtype=dt)
        hs = np.empty((N, H), dtype=dt)
        h = h0._data.astype(dt, copy=True)
        bhh = b_hh._data if b_hh is not None else None
        whh_t = np.ascontiguousarray(whh.T, dtype=dt)    # Note [Recurrent step buffers]
        ghb = np.empty((h.shape[0], 3 * H), dtype=dt)
        for t in order:
            lo, hi = offsets[t], offsets[t + 1]
            n = hi - lo
            hn_prev = h[:n]
            gh = ghb[:n]
            np.matmul(hn_prev, whh_t, out=gh)
            if bhh is not None:
                gh += bhh
            a = gi[lo:hi, :2 * H]
            a += gh[:, :2 * H]
            r = rz[lo:hi]
            np.negative(a, out=r)                       # sigmoid, in place
            np.exp(r, out=r)
            r += 1
            np.reciprocal(r, out=r)
            ghn[lo:hi] = gh[:, 2 * H:]
            nn_ = gh[:, 2 * H:] * rz[lo:hi, :H]
            nn_ += gi[lo:hi, 2 * H:]
            np.tanh(nn_, out=ns[lo:hi])
            d = hn_prev - ns[lo:hi]                   # h' = n + z * (h - n)
            d *= rz[lo:hi, H:]
            np.add(ns[lo:hi], d, out=hs[lo:hi])
            h[:n] = hs[lo:hi]
        if ctx is not None:
            ctx.save_for_backward(x, h0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (bs, reverse, rz, ns, ghn, hs, composite)
        return hs.copy(), h

    @staticmethod
    def backward(ctx, g_out, g_h):
        tensors = ctx.saved_tensors
        x, h0, w_ih, w_hh, b_ih, b_hh = tensors
        bs, reverse, rz, ns, ghn, hs, composite = ctx._aux
        if _grad_enabled():
            res = _composite_grads(ctx, tensors, (g_out, g_h), composite, (bs, reverse))
            return tuple(res) + (None, None, None)
        needs = ctx.needs_input_grad
        N, H = hs.shape
        whh = w_hh._data
        go = g_out._data
        offsets, order = _layout(bs, reverse)
        hprev = _prev_rows(hs, h0._data, bs, reverse)
        r, z = rz[:, :H], rz[:, H:]
        k_n = (1 - z) * (1 - ns * ns)                    # d pre-activation(n) / dh
        kh = np.empty((N, 3, H), dtype=hs.dtype)         # d (W_hh h + b_hh) / dh per gate
        kh[:, 1] = (hprev - ns) * z * (1 - z)
        kh[:, 2] = k_n * r
        kh[:, 0] = kh[:, 2] * ghn * (1 - r)
        dGH = np.empty((N, 3, H), dtype=hs.dtype)
        dhs = np.empty((N, H), dtype=hs.dtype)
        dh = g_h._data.astype(hs.dtype, copy=True)
        for t in reversed(order):
            lo, hi = offsets[t], offsets[t + 1]
            n = hi - lo
            dhn = dh[:n]
            dhn += go[lo:hi]
            dhs[lo:hi] = dhn
            np.multiply(dhn[:, None, :], kh[lo:hi], out=dGH[lo:hi])
            new = dhn * z[lo:hi]
            new += dGH[lo:hi].reshape(n, 3 * H) @ whh
            dh[:n] = new
        dGI = dGH.copy()
        dGI[:, 2] = dhs * k_n
        gx, gwih, gwhh, gbih, gbhh = _param_grads(needs, x, w_ih, dGI.reshape(N, 3 * H),
                                                  dGH.reshape(N, 3 * H), hprev, b_ih, b_hh)
        gh0 = _wrap(dh) if needs[1] else None
        return gx, gh0, gwih, gwhh, gbih, gbhh, None, None, None


class _RNNLayer(Function):
    """(x (N, I), h0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (N, H), h_n): one Elman
    layer-direction, h' = act(W_ih x + b_ih + W_hh h + b_hh) with act tanh or relu."""
    _node_name = "RNNBackward"

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, bs, reverse, composite, relu):
        whh = w_hh._data
        gi = x._data @ w_ih._data.T
        if b_ih is not None:
            gi += b_ih._data + b_hh._data
        offsets, order = _layout(bs, reverse)
        hs = np.empty_like(gi)
        h = h0._data.astype(gi.dtype, copy=True)
        whh_t = np.ascontiguousarray(whh.T, dtype=gi.dtype)    # Note [Recurrent step buffers]
        hh = np.empty_like(h)
        for t in order:
            lo, hi = offsets[t], offsets[t + 1]
            n = hi - lo
            a = gi[lo:hi]
            np.matmul(h[:n], whh_t, out=hh[:n])
            a += hh[:n]
            if relu:
                np.maximum(a, 0, out=hs[lo:hi])
            else:
                np.tanh(a, out=hs[lo:hi])
            h[:n] = hs[lo:hi]
        if ctx is not None:
            ctx.save_for_backward(x, h0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (bs, reverse, hs, composite, relu)
        return hs.copy(), h

    @staticmethod
    def backward(ctx, g_out, g_h):
        tensors = ctx.saved_tensors
        x, h0, w_ih, w_hh, b_ih, b_hh = tensors
        bs, reverse, hs, composite, relu = ctx._aux
        if _grad_enabled():
            res = _composite_grads(ctx, tensors, (g_out, g_h), composite, (bs, reverse))
            return tuple(res) + (None, None, None, None)
        needs = ctx.needs_input_grad
        whh = w_hh._data
        go = g_out._data
        offsets, order = _layout(bs, reverse)
        k = (hs > 0).astype(hs.dtype) if relu else 1 - hs * hs
        dA = np.empty_like(hs)
        dh = g_h._data.astype(hs.dtype, copy=True)
        for t in reversed(order):
            lo, hi = offsets[t], offsets[t + 1]
            n = hi - lo
            dhn = dh[:n]
            dhn += go[lo:hi]
            np.multiply(dhn, k[lo:hi], out=dA[lo:hi])
            dh[:n] = dA[lo:hi] @ whh
        hprev = _prev_rows(hs, h0._data, bs, reverse)
        gx, gwih, gwhh, gbih, gbhh = _param_grads(needs, x, w_ih, dA, dA, hprev, b_ih, b_hh)
        gh0 = _wrap(dh) if needs[1] else None
        return gx, gh0, gwih, gwhh, gbih, gbhh, None, None, None, None
