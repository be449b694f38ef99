"""A fused LSTM layer-direction: one graph node for the whole sequence.

Forward runs the time loop in NumPy (one matmul for the input projection of every step, one
matmul per step for the hidden-to-hidden gates) and keeps the gate activations; backward runs
BPTT in NumPy and ends with one matmul each for dW_ih, dW_hh and dx. When backward itself is
recorded (create_graph), it rebuilds the layer from cgrad ops and differentiates that, so
double backward works.
"""
from __future__ import annotations

import numpy as np

from cgrad._C import _wrap
from cgrad.autograd.engine import grad as _autograd_grad
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _grad_enabled

__all__ = []


def _sigmoid(a):
    out = np.negative(a)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)
    return out


class _LSTMLayer(Function):
    """(x (T*B, I), h0 (B, H), c0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (T*B, H), h_n, c_n)
    for one direction (reverse: time runs from T-1 down to 0)."""
    _node_name = "LSTMBackward"

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, T, reverse, composite):
        xd = x._data
        B, H = h0.shape[0], h0.shape[1]
        wih, whh = w_ih._data, w_hh._data
        gi = xd @ wih.T
        if b_ih is not None:
            gi += b_ih._data + b_hh._data
        gi = gi.reshape(T, B, 4 * H)
        dt = gi.dtype
        acts = np.empty((T, B, 4 * H), dtype=dt)      # i, f, g, o after their nonlinearity
        cs = np.empty((T, B, H), dtype=dt)            # c_t
        tcs = np.empty((T, B, H), dtype=dt)           # tanh(c_t)
        hs = np.empty((T, B, H), dtype=dt)            # h_t (the output)
        h = h0._data.astype(dt, copy=False)
        c = c0._data.astype(dt, copy=False)
        steps = range(T - 1, -1, -1) if reverse else range(T)
        for t in steps:
            a = gi[t]
            a += h @ whh.T
            act = acts[t]
            act[:] = _sigmoid(a)
            np.tanh(a[:, 2 * H:3 * H], out=act[:, 2 * H:3 * H])
            c = act[:, H:2 * H] * c
            c += act[:, :H] * act[:, 2 * H:3 * H]
            cs[t] = c
            np.tanh(c, out=tcs[t])
            h = hs[t]
            np.multiply(act[:, 3 * H:], tcs[t], out=h)
        if ctx is not None:
            ctx.save_for_backward(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (T, reverse, acts, cs, tcs, hs, composite)
        return hs.reshape(T * B, H), h.copy(), c.copy()

    @staticmethod
    def backward(ctx, g_out, g_h, g_c):
        x, h0, c0, w_ih, w_hh, b_ih, b_hh = ctx.saved_tensors
        T, reverse, acts, cs, tcs, hs, composite = ctx._aux
        needs = ctx.needs_input_grad
        if _grad_enabled():          # create_graph: differentiate the composite layer
            inputs = [t for t, n in zip((x, h0, c0, w_ih, w_hh, b_ih, b_hh), needs[:7])
                      if n and t is not None]
            outs = composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, T, reverse)
            grads = iter(_autograd_grad(outs, inputs, (g_out, g_h, g_c), create_graph=True,
                                        allow_unused=True))
            res = [next(grads) if (n and t is not None) else None
                   for t, n in zip((x, h0, c0, w_ih, w_hh, b_ih, b_hh), needs[:7])]
            return tuple(res) + (None, None, None)
        B, H = h0.shape[0], h0.shape[1]
        whh = w_hh._data
        go = g_out._data.reshape(T, B, H)
        dh = g_h._data.astype(hs.dtype, copy=True)
        dc = g_c._data.astype(hs.dtype, copy=True)
        # h_{t-1} and c_{t-1} for every t, in processing order
        if reverse:
            hprev = np.concatenate([hs[1:], h0._data[None]], 0)
            cprev = np.concatenate([cs[1:], c0._data[None]], 0)
        else:
            hprev = np.concatenate([h0._data[None], hs[:-1]], 0)
            cprev = np.concatenate([c0._data[None], cs[:-1]], 0)
        # every factor that does not depend on the recursion, for all steps at once
        a4 = acts.reshape(T, B, 4, H)
        i, f, g, o = a4[:, :, 0], a4[:, :, 1], a4[:, :, 2], a4[:, :, 3]
        k_c = o * (1 - tcs * tcs)                       # dc/dh through h = o tanh(c)
        coef = np.empty((T, B, 3, H), dtype=acts.dtype)  # d pre-activation / dc for i, f, g
        coef[:, :, 0] = g * i * (1 - i)
        coef[:, :, 1] = cprev * f * (1 - f)
        coef[:, :, 2] = i * (1 - g * g)
        k_o = tcs * o * (1 - o)                         # d pre-activation(o) / dh
        dA = np.empty((T, B, 4, H), dtype=acts.dtype)
        order = range(T) if reverse else range(T - 1, -1, -1)
        for t in order:
            dh += go[t]
            dc += dh * k_c[t]
            np.multiply(dc[:, None, :], coef[t], out=dA[t, :, :3])
            np.multiply(dh, k_o[t], out=dA[t, :, 3])
            dc *= f[t]
            dh = dA[t].reshape(B, 4 * H) @ whh
        dAf = dA.reshape(T * B, 4 * H)
        gx = _wrap(dAf @ w_ih._data) if needs[0] else None
        gh0 = _wrap(dh) if needs[1] else None
        gc0 = _wrap(dc) if needs[2] else None
        gwih = _wrap(dAf.T @ x._data) if needs[3] else None
        gwhh = _wrap(dAf.T @ hprev.reshape(T * B, H)) if needs[4] else None
        gb = dAf.sum(0)
        gbih = _wrap(gb) if (b_ih is not None and needs[5]) else None
        gbhh = _wrap(gb.copy()) if (b_hh is not None and needs[6]) else None
        return gx, gh0, gc0, gwih, gwhh, gbih, gbhh, None, None, None


def _composite_grads(ctx, tensors, grads_out, composite, args):
    """create_graph path: rebuild the layer from cgrad ops and differentiate it."""
    needs = ctx.needs_input_grad
    inputs = [t for t, n in zip(tensors, needs) if n and t is not None]
    outs = composite(*tensors, *args)
    grads = iter(_autograd_grad(outs, inputs, grads_out, create_graph=True, allow_unused=True))
    return [next(grads) if (n and t is not None) else None for t, n in zip(tensors, needs)]


def _shifted(seq, first, reverse):
    """The previous step's value for every step, in processing order."""
    if reverse:
        return np.concatenate([seq[1:], first[None]], 0)
    return np.concatenate([first[None], seq[:-1]], 0)


class _GRULayer(Function):
    """(x (T*B, I), h0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (T*B, H), h_n): one GRU
    layer-direction (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)))."""
    _node_name = "GRUBackward"

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, T, reverse, composite):
        B, H = h0.shape[0], h0.shape[1]
        whh = w_hh._data
        gi = x._data @ w_ih._data.T
        if b_ih is not None:
            gi += b_ih._data
        gi = gi.reshape(T, B, 3 * H)
        dt = gi.dtype
        rz = np.empty((T, B, 2 * H), dtype=dt)
        ns = np.empty((T, B, H), dtype=dt)
        ghn = np.empty((T, B, H), dtype=dt)
        hs = np.empty((T, B, H), dtype=dt)
        h = h0._data.astype(dt, copy=False)
        bhh = b_hh._data if b_hh is not None else None
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            gh = h @ whh.T
            if bhh is not None:
                gh += bhh
            a = gi[t, :, :2 * H]
            a += gh[:, :2 * H]
            rz[t] = _sigmoid(a)
            n = gh[:, 2 * H:] * rz[t, :, :H]
            ghn[t] = gh[:, 2 * H:]
            n += gi[t, :, 2 * H:]
            np.tanh(n, out=ns[t])
            # h' = n + z * (h - n)
            hn = h - ns[t]
            hn *= rz[t, :, H:]
            np.add(ns[t], hn, out=hs[t])
            h = hs[t]
        if ctx is not None:
            ctx.save_for_backward(x, h0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (T, reverse, rz, ns, ghn, hs, composite)
        return hs.reshape(T * B, H), h.copy()

    @staticmethod
    def backward(ctx, g_out, g_h):
        tensors = ctx.saved_tensors
        x, h0, w_ih, w_hh, b_ih, b_hh = tensors
        T, reverse, rz, ns, ghn, hs, composite = ctx._aux
        if _grad_enabled():
            res = _composite_grads(ctx, tensors, (g_out, g_h), composite, (T, reverse))
            return tuple(res) + (None, None, None)
        needs = ctx.needs_input_grad
        B, H = h0.shape[0], h0.shape[1]
        whh = w_hh._data
        go = g_out._data.reshape(T, B, H)
        hprev = _shifted(hs, h0._data, reverse)
        r, z = rz[:, :, :H], rz[:, :, H:]
        k_n = (1 - z) * (1 - ns * ns)                    # d pre-activation(n) / dh
        kh = np.empty((T, B, 3, H), dtype=hs.dtype)      # d (W_hh h + b_hh) / dh per gate
        kh[:, :, 1] = (hprev - ns) * z * (1 - z)
        kh[:, :, 2] = k_n * r
        kh[:, :, 0] = kh[:, :, 2] * ghn * (1 - r)
        dGH = np.empty((T, B, 3, H), dtype=hs.dtype)
        dhs = np.empty((T, B, H), dtype=hs.dtype)
        dh = g_h._data.astype(hs.dtype, copy=True)
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            dh += go[t]
            dhs[t] = dh
            np.multiply(dh[:, None, :], kh[t], out=dGH[t])
            dh = dh * z[t]
            dh += dGH[t].reshape(B, 3 * H) @ whh
        dGI = dGH.copy()
        dGI[:, :, 2] = dhs * k_n
        dGIf, dGHf = dGI.reshape(T * B, 3 * H), dGH.reshape(T * B, 3 * H)
        gx = _wrap(dGIf @ w_ih._data) if needs[0] else None
        gh0 = _wrap(dh) if needs[1] else None
        gwih = _wrap(dGIf.T @ x._data) if needs[2] else None
        gwhh = _wrap(dGHf.T @ hprev.reshape(T * B, H)) if needs[3] else None
        gbih = _wrap(dGIf.sum(0)) if (b_ih is not None and needs[4]) else None
        gbhh = _wrap(dGHf.sum(0)) if (b_hh is not None and needs[5]) else None
        return gx, gh0, gwih, gwhh, gbih, gbhh, None, None, None


class _RNNLayer(Function):
    """(x (T*B, I), h0 (B, H), w_ih, w_hh, b_ih, b_hh) -> (out (T*B, H), h_n): one Elman
    layer-direction, h' = act(W_ih x + b_ih + W_hh h + b_hh) with act tanh or relu."""
    _node_name = "RNNBackward"

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, T, reverse, composite, relu):
        B, H = h0.shape[0], h0.shape[1]
        whh = w_hh._data
        gi = x._data @ w_ih._data.T
        if b_ih is not None:
            gi += b_ih._data + b_hh._data
        gi = gi.reshape(T, B, H)
        hs = np.empty((T, B, H), dtype=gi.dtype)
        h = h0._data.astype(gi.dtype, copy=False)
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            a = gi[t]
            a += h @ whh.T
            if relu:
                np.maximum(a, 0, out=hs[t])
            else:
                np.tanh(a, out=hs[t])
            h = hs[t]
        if ctx is not None:
            ctx.save_for_backward(x, h0, w_ih, w_hh, b_ih, b_hh)
            ctx._aux = (T, reverse, hs, composite, relu)
        return hs.reshape(T * B, H), h.copy()

    @staticmethod
    def backward(ctx, g_out, g_h):
        tensors = ctx.saved_tensors
        x, h0, w_ih, w_hh, b_ih, b_hh = tensors
        T, reverse, hs, composite, relu = ctx._aux
        if _grad_enabled():
            res = _composite_grads(ctx, tensors, (g_out, g_h), composite, (T, reverse))
            return tuple(res) + (None, None, None, None)
        needs = ctx.needs_input_grad
        B, H = h0.shape[0], h0.shape[1]
        whh = w_hh._data
        go = g_out._data.reshape(T, B, H)
        k = (hs > 0).astype(hs.dtype) if relu else 1 - hs * hs
        dA = np.empty_like(hs)
        dh = g_h._data.astype(hs.dtype, copy=True)
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            dh += go[t]
            np.multiply(dh, k[t], out=dA[t])
            dh = dA[t] @ whh
        hprev = _shifted(hs, h0._data, reverse)
        dAf = dA.reshape(T * B, H)
        gx = _wrap(dAf @ w_ih._data) if needs[0] else None
        gh0 = _wrap(dh) if needs[1] else None
        gwih = _wrap(dAf.T @ x._data) if needs[2] else None
        gwhh = _wrap(dAf.T @ hprev.reshape(T * B, H)) if needs[3] else None
        gb = dAf.sum(0)
        gbih = _wrap(gb) if (b_ih is not None and needs[4]) else None
        gbhh = _wrap(gb.copy()) if (b_hh is not None and needs[5]) else None
        return gx, gh0, gwih, gwhh, gbih, gbhh, None, None, None, None
