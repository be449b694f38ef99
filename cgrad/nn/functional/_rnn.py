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
