"""Padding of cgrad.nn.functional: ``pad`` with 'constant' (``ConstantPadNdBackward0``),
'reflect', 'replicate' and 'circular' modes (gathers whose nodes carry torch's names:
``ReflectionPad{k}DBackward0``, ``ReplicationPad{k}DBackward0``, ``CopySlices``)."""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _checks
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _shape_list


class _ConstantPad(Function):
    """Pad (or crop, for negative amounts) with a constant.  d/da = g cropped back (a
    constant-pad of g by the negated amounts)."""
    _node_name = "ConstantPadNdBackward0"

    @staticmethod
    def forward(ctx, a, pads, value):
        x = a._data
        nd = x.ndim
        new_shape = list(x.shape)
        src, dst = [slice(None)] * nd, [slice(None)] * nd
        for i in range(len(pads) // 2):
            d = nd - 1 - i
            lo, hi = pads[2 * i], pads[2 * i + 1]
            n = x.shape[d]
            size = n + lo + hi
            if size < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
            new_shape[d] = size
            s0, s1 = max(-lo, 0), n - max(-hi, 0)
            src[d] = slice(s0, max(s1, s0))
            dst[d] = slice(max(lo, 0), max(lo, 0) + max(s1 - s0, 0))
        out = np.full(new_shape, value, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        if ctx is not None:
            ctx._aux = pads
        return out

    @staticmethod
    def backward(ctx, g):
        return _ConstantPad.apply(g, tuple(-p for p in ctx._aux), 0), None, None


def _pad_indices(n, lo, hi, mode):
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i > n - 1, 2 * (n - 1) - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    else:
        i = i % n
    return i


class _IndexPad(Function):
    """reflect/replicate/circular padding as a gather along each padded dim.
    d/da = the matching scatter-add of g (_IndexPadBackward)."""
    _node_name = "ReflectionPad1DBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, spec):
        out = a._data
        for d, idx in spec:
            out = np.take(out, idx, axis=d)
        if ctx is not None:
            ctx._aux = (spec, a._data.shape)
        return out

    @staticmethod
    def backward(ctx, g):
        spec, shape = ctx._aux
        return _IndexPadBackward.apply(g, spec, shape), None


class _IndexPadBackward(Function):
    """Scatter-add g back through the gathers of _IndexPad; its gradient is that gather."""
    _node_name = "ReflectionPad1DBackwardBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, spec, shape):
        out = g._data
        cur = list(out.shape)
        for d, idx in reversed(spec):
            cur[d] = shape[d]
            acc = np.zeros(cur, dtype=out.dtype)
            np.add.at(acc, (slice(None),) * d + (idx,), out)
            out = acc
        if ctx is not None:
            ctx._aux = spec
        return out

    @staticmethod
    def backward(ctx, gg):
        return _IndexPad.apply(gg, ctx._aux), None, None


_PAD_CLASSES = {}


def _pad_class(mode, k):
    key = (mode, k)
    if key not in _PAD_CLASSES:
        if mode == "circular":
            name = "CopySlices"
        else:
            name = f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{k}DBackward0"
        fwd = type(f"_IndexPad_{mode}{k}", (_IndexPad,), {"_node_name": name})
        # found by name: its nodes can be untracked (Note [Untracked graphs], _C_untracked.pxi)
        globals()[fwd.__name__] = fwd
        _PAD_CLASSES[key] = fwd
    return _PAD_CLASSES[key]


_PAD_HELP = ("Supported combinations for non-constant padding:\n"
             "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
             "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
             "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left_last, right_last, left_2nd_last,
    ...)``. Modes: 'constant' (any rank; negative amounts crop), 'reflect', 'replicate',
    'circular' (2-D..5-D inputs as in torch)."""
    _checks.check_tensor(input, "pad")
    if value is not None and not isinstance(value, (numbers.Number, np.number)):
        raise TypeError(f"pad(): argument 'value' (position 4) must be float, not "
                        f"{_checks.type_name(value)}")
    pads = tuple(pad)
    for i, p in enumerate(pads):
        if not isinstance(p, (numbers.Integral,)) or isinstance(p, bool):
            raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but found "
                            f"element of type {type(p).__name__} at pos {i}")
    pads = tuple(int(p) for p in pads)
    nd = input.dim()
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pads)} and input of "
                           f"dimension {nd}")
    if mode == "constant":
        return _ConstantPad.apply(input, pads, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pads) // 2
    if k not in (1, 2, 3) or nd not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pads)} is not supported for {nd}D input "
                                  f"tensor.\n{_PAD_HELP}")
    shape = tuple(input.shape)
    spec = []
    for i in range(k):
        d = nd - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        n = shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension "
                               f"{d} of input {_shape_list(shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + lo + hi <= 0:
            raise RuntimeError(f"input (W: {n}) is too small. Calculated output W: {n + lo + hi}")
        spec.append((d, _pad_indices(n, lo, hi, mode)))
    return _pad_class(mode, k).apply(input, tuple(spec))
