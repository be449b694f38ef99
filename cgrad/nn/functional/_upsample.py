"""Interpolating resizes and channel rearrangements of cgrad.nn.functional: ``interpolate``
with mode 'linear' / 'bilinear' / 'bicubic' (the 'nearest' and 'area' modes live in
cgrad/nn/functional/_pooling.py), ``pixel_shuffle``, ``pixel_unshuffle``,
``channel_shuffle``.

Note [Separable resizing]
Linear, bilinear and bicubic resizing are separable: each spatial axis of length n becomes
length o by a fixed (o, n) matrix whose row i holds the weights of the source pixels of
output i (two taps for linear, four for cubic with torch's A = -0.75, clamped at the border
and summed where taps coincide). The output is ``A_h @ x @ A_w^T`` (``x @ A_w^T`` in 1-D),
BLAS matmuls over all planes at once; the gradient is ``A_h^T @ g @ A_w``, written with
cgrad's matmul so that it can be differentiated again. Source coordinates follow torch:
``align_corners=True`` maps the corner pixels onto each other (``i (n - 1) / (o - 1)``),
otherwise ``(i + 0.5) / scale - 0.5`` (clamped at 0 for linear), with ``scale = o / n`` or the
given ``scale_factor`` unless ``recompute_scale_factor=True``.
"""
from __future__ import annotations

import numpy as np

from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function

_A = -0.75


def _source(n, o, scale, align_corners, cubic):
    i = np.arange(o, dtype=np.float64)
    if align_corners:
        return i * ((n - 1) / (o - 1) if o > 1 else 0.0)
    r = (1.0 / scale) if (scale is not None and scale > 0) else n / o
    src = r * (i + 0.5) - 0.5
    return src if cubic else np.maximum(src, 0.0)


def _linear_matrix(n, o, scale, align_corners, dtype):
    src = _source(n, o, scale, align_corners, False)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = src - i0
    m = np.zeros((o, n))
    rows = np.arange(o)
    np.add.at(m, (rows, i0), 1.0 - lam)
    np.add.at(m, (rows, i1), lam)
    return m.astype(dtype)


def _cubic_weights(t):
    def near(x):           # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):            # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _cubic_matrix(n, o, scale, align_corners, dtype):
    src = _source(n, o, scale, align_corners, True)
    i0 = np.floor(src)
    t = src - i0
    i0 = i0.astype(np.int64)
    m = np.zeros((o, n))
    rows = np.arange(o)
    for off, w in zip((-1, 0, 1, 2), _cubic_weights(t)):
        np.add.at(m, (rows, np.clip(i0 + off, 0, n - 1)), w)
    return m.astype(dtype)


class _Resize(Function):
    """out = A_h @ x @ A_w^T (Note [Separable resizing])."""
    _node_name = "UpsampleBilinear2DBackward0"

    @staticmethod
    def forward(ctx, x, ah, aw):
        X = x._data
        out = X @ aw.T if ah is None else ah @ X @ aw.T
        if ctx is not None:
            ctx._aux = (ah, aw)
        return np.ascontiguousarray(out)

    @staticmethod
    def backward(ctx, g):
        ah, aw = ctx._aux
        gx = g @ _wrap(aw)
        if ah is not None:
            gx = _wrap(np.ascontiguousarray(ah.T)) @ gx
        return gx, None, None


class _ResizeLinear1d(_Resize):
    _node_name = "UpsampleLinear1DBackward0"


class _ResizeBicubic(_Resize):
    _node_name = "UpsampleBicubic2DBackward0"


_NEEDS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _resize(input, sizes, scales, mode, align_corners):
    """input (N, C, *spatial) resized to `sizes` by `mode` (called from interpolate)."""
    nd = input.dim() - 2
    need = _NEEDS.get(mode)
    if need is None:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.dim()}D) for the modes: nearest | linear | "
                                  f"bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if need != nd:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{need + 2}D input")
    if mode == "trilinear":
        raise NotImplementedError("interpolate: mode 'trilinear' is not implemented in cgrad")
    dt = input._data.dtype
    if dt.kind != "f":
        raise NotImplementedError(f'"upsample_{mode}{nd}d_out_frame" not implemented for '
                                  f"'{input.dtype}'")
    make = _cubic_matrix if mode == "bicubic" else _linear_matrix
    spatial = tuple(input.shape[2:])
    if any(n <= 0 for n in spatial) or any(o <= 0 for o in sizes):
        names = ("W",) if nd == 1 else ("H", "W")
        fmt = (lambda v: ", ".join(f"{a}: {b}" for a, b in zip(names, v)))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({fmt(spatial)}) {'and ' if nd == 1 else ''}output "
                           f"({fmt(sizes)})")
    mats = [make(n, o, s, bool(align_corners), dt) for n, o, s in zip(spatial, sizes, scales)]
    if nd == 1:
        return _ResizeLinear1d.apply(input, None, mats[0])
    cls = _ResizeBicubic if mode == "bicubic" else _Resize
    return cls.apply(input, mats[0], mats[1])


# -- pixel and channel shuffles ----------------------------------------------------------------


def pixel_shuffle(input, upscale_factor):
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)``: a view, a permute and a reshape."""
    _checks.check_tensor(input, "pixel_shuffle")
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    C, H, W = input.shape[-3:]
    if C % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={C} "
                           f"is not divisible by {r * r}")
    lead = tuple(input.shape[:-3])
    k = len(lead)
    y = input.reshape(lead + (C // (r * r), r, r, H, W))
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(lead + (C // (r * r), H * r, W * r))


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)``: the inverse of pixel_shuffle."""
    _checks.check_tensor(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    C, H, W = input.shape[-3:]
    if H % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={H} is not divisible by {r}")
    if W % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by "
                           f"downscale_factor, but input.size(-1)={W} is not divisible by {r}")
    lead = tuple(input.shape[:-3])
    k = len(lead)
    y = input.reshape(lead + (C, H // r, r, W // r, r))
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(lead + (C * r * r, H // r, W // r))


def channel_shuffle(input, groups):
    """``(N, C, *)``: the channels read as ``(groups, C / groups)`` and transposed."""
    _checks.check_tensor(input, "channel_shuffle")
    g = int(groups)
    if input.dim() < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{g}")
    N, C = input.shape[:2]
    if C % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {C} channels "
                           f"and {g} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape((N, g, C // g) + rest).transpose(1, 2).reshape((N, C) + rest)
