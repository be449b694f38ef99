"""Pooling of cgrad.nn.functional: ``max_pool1d/2d`` (``MaxPool2DWithIndicesBackward0``),
``avg_pool1d/2d`` (``AvgPool2DBackward0``), ``adaptive_avg_pool2d``
(``AdaptiveAvgPool2DBackward0``), and ``interpolate`` with mode='nearest'
(``UpsampleNearest1DBackward0``/``UpsampleNearest2DBackward0``: a gather, as max pooling's
gradient is a scatter). 1-D forms are the 2-D ones over a height of 1 (torch: a
``SqueezeBackward1`` on top).

Windows are strided views of the padded input (no copy, no loop over pixels). The max's
backward scatters the gradient to the argmax positions with one ``np.bincount``; the average's
adds it back once per kernel offset (a loop over kh * kw). Each backward is a Function whose
own backward is the forward's linear map (gather at the indices; average pooling), so double
backward works.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.lib.stride_tricks import as_strided

from cgrad import _checks
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _shape_list


def _pair(v, name):
    if isinstance(v, numbers.Integral):
        return (int(v), int(v))
    t = tuple(int(e) for e in v)
    if len(t) == 1:
        return t * 2
    if len(t) != 2:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of two ints")
    return t


def _out_len(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _windows(X, k, s, p, d, out, fill):
    """(N, C, Ho, Wo, kh, kw) strided view of X padded with `fill` (enough on the right for
    ceil_mode's last window)."""
    N, C, H, W = X.shape
    need = [(o - 1) * st + dd * (kk - 1) + 1 for o, st, dd, kk in zip(out, s, d, k)]
    hi = [max(nd - n - pp, 0) for nd, n, pp in zip(need, (H, W), p)]
    if p[0] or p[1] or hi[0] or hi[1]:
        Xp = np.pad(X, ((0, 0), (0, 0), (p[0], hi[0] + p[0]), (p[1], hi[1] + p[1])),
                    constant_values=fill)
    else:
        Xp = X
    s0, s1, s2, s3 = Xp.strides
    return as_strided(Xp, (N, C, out[0], out[1], k[0], k[1]),
                      (s0, s1, s2 * s[0], s3 * s[1], s2 * d[0], s3 * d[1]), writeable=False)


def _pad_extents(shape, k, s, p, d, out):
    """Right-hand padding of each spatial dim: p plus what ceil_mode's last window needs."""
    need = [(o - 1) * st + dd * (kk - 1) + 1 for o, st, dd, kk in zip(out, s, d, k)]
    return [max(nd - n - pp, 0) + pp for nd, n, pp in zip(need, shape, p)]


# Note [Max pooling layout]: the max over each window is one vectorised pass per kernel
# offset (kh * kw of them), never a loop over pixels. A pass reads an (N, C, Ho, Wo) view with
# a stride of sw elements along Wo, so NumPy's inner loop runs Wo elements at a time: for the
# small images of a CNN (Wo = 4) that costs more than the arithmetic. When the planes
# outnumber the output columns, the input is first copied to (H, W, N*C) ("planes last"),
# where every pass runs over N*C contiguous elements, and the results are transposed back
# (two copies, ~5x less time than the strided passes for a batch of 8x8 images).
# The pass itself: a larger value takes the place (`>`, so the first of equal values wins, as
# torch: -0.0 before 0.0 keeps -0.0) and a NaN takes it too (torch's rule: the last NaN wins;
# looked for only when the input's sum is not finite). The value's bits and the winning offset
# are then updated without a masked copy (np.copyto(where=) is ~5x slower than the pass):
# x += m * (new - x) in integers, which wrap, so the result is exact. (np.maximum is not
# torch's tie rule: it returns 0.0 for maximum(-0.0, 0.0).)
def _max_windows(X, k, s, p, d, out):
    """(max, flat argmax index in the input plane) of each window of X (N, C, H, W)."""
    N, C, H, W = X.shape
    fill = -np.inf if X.dtype.kind == "f" else np.iinfo(X.dtype).min
    NC = N * C
    planes_last = NC > 2 * out[1]
    if planes_last:
        rh, rw = _pad_extents((H, W), k, s, p, d, out)
        padded = p[0] or p[1] or rh or rw
        Xt = np.empty((p[0] + H + rh, p[1] + W + rw, NC), dtype=X.dtype)
        if padded:
            Xt.fill(fill)
        np.copyto(Xt[p[0]: p[0] + H, p[1]: p[1] + W], X.reshape(NC, H, W).transpose(1, 2, 0))
        s0, s1, s2 = Xt.strides
        win = as_strided(Xt, (out[0], out[1], k[0], k[1], NC),
                         (s0 * s[0], s1 * s[1], s0 * d[0], s1 * d[1], s2), writeable=False)

        def view(i, j):
            return win[:, :, i, j]
    else:
        win = _windows(X, k, s, p, d, out, fill)

        def view(i, j):
            return win[..., i, j]
    val = view(0, 0).copy()
    off = np.zeros(val.shape, dtype=np.int64 if H * W >= 2 ** 31 else np.int32)
    m = np.empty(val.shape, dtype=np.bool_)
    nan = X.dtype.kind == "f" and not np.isfinite(np.add.reduce(X, axis=None))
    bits = np.dtype(f"i{X.dtype.itemsize}") if X.dtype.kind == "f" else X.dtype
    ival, tmp, toff = val.view(bits), np.empty(val.shape, bits), np.empty_like(off)
    for i in range(k[0]):
        for j in range(k[1]):
            if i == 0 and j == 0:
                continue
            v = view(i, j)
            np.greater(v, val, out=m)
            if nan:
                m |= np.isnan(v)
            # val = m ? v : val on the bits, in wrapping integer arithmetic: exact (-0.0,
            # NaN payloads), and faster than a masked copy
            np.subtract(v.view(bits), ival, out=tmp)
            np.multiply(tmp, m, out=tmp)
            ival += tmp
            np.subtract(i * d[0] * W + j * d[1], off, out=toff)
            np.multiply(toff, m, out=toff)
            off += toff
    base = (np.arange(out[0])[:, None] * (s[0] * W) - p[0] * W
            + np.arange(out[1])[None, :] * s[1] - p[1])
    if planes_last:
        idx = np.add(off.transpose(2, 0, 1), base, dtype=np.int64)
        val = val.transpose(2, 0, 1).copy().reshape(N, C, out[0], out[1])
        idx = idx.reshape(N, C, out[0], out[1])
    else:
        idx = np.add(off, base, dtype=np.int64)
    if p[0] or p[1]:
        # a window whose values are all the padding's fill (-inf, or the integer minimum)
        # points at its first element inside the input, as torch (never at the padding)
        low = val == fill
        if low.any():
            first = [np.arange(o) * st - pp for o, st, pp in zip(out, s, p)]
            first = [np.where(f < 0, f + (-f + dd - 1) // dd * dd, f) for f, dd in zip(first, d)]
            np.copyto(idx, first[0][:, None] * W + first[1][None, :], where=low)
    return val, idx


class _MaxPool(Function):
    """max over each window; saves the flat argmax index of each output in the input plane."""
    _node_name = "MaxPool2DWithIndicesBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, x, k, s, p, d, out):
        X = x._data
        unbatched = X.ndim == 3
        if unbatched:
            X = X[None]
        val, idx = _max_windows(X, k, s, p, d, out)
        if unbatched:
            val, idx = val[0], idx[0]
        if ctx is not None:
            # disjoint windows (a stride at least the dilated kernel) give distinct indices
            disjoint = all(dd * (kk - 1) + 1 <= ss for kk, ss, dd in zip(k, s, d))
            ctx._aux = (idx, x._data.shape, disjoint)
        return val, idx

    @staticmethod
    def backward(ctx, g, _gi):
        idx, shape, disjoint = ctx._aux
        return (_MaxUnpoolAdd.apply(g, idx, shape, disjoint), None, None, None, None, None)


class _MaxUnpoolAdd(Function):
    """Scatter-add g to the argmax positions; its gradient gathers at them."""
    _node_name = "MaxPool2DWithIndicesBackwardBackward0"

    @staticmethod
    def forward(ctx, g, idx, shape, distinct=False):
        H, W = shape[-2:]
        planes = int(np.prod(shape[:-2]))
        G = g._data
        flat = idx + np.arange(planes).reshape(idx.shape[:-2] + (1, 1)) * (H * W)
        if ctx is not None:
            ctx._aux = idx
        if distinct and G.dtype.kind == "f":
            # no index twice: the sum is a placement (G + 0.0 as 0.0 + g: -0.0 becomes 0.0)
            out = np.zeros(planes * H * W, dtype=G.dtype)
            out[flat.ravel()] = np.add(G, 0.0, dtype=G.dtype).ravel()
            return out.reshape(shape)
        out = np.bincount(flat.ravel(), weights=G.ravel(), minlength=planes * H * W)
        return out.astype(G.dtype, copy=False).reshape(shape)

    @staticmethod
    def backward(ctx, gg):
        return _Gather.apply(gg, ctx._aux), None, None, None


class _Gather(Function):
    _node_name = "GatherBackward0"

    @staticmethod
    def forward(ctx, a, idx):
        A = a._data
        planes = int(np.prod(A.shape[:-2]))
        out = np.take_along_axis(A.reshape(planes, -1), idx.reshape(planes, -1), -1)
        if ctx is not None:
            ctx._aux = (idx, A.shape)
        return out.reshape(idx.shape)

    @staticmethod
    def backward(ctx, g):
        idx, shape = ctx._aux
        return _MaxUnpoolAdd.apply(g, idx, shape, False), None


def _divisor(n, k, s, p, o, include_pad):
    """Per output position along one axis: the window's size (clipped to the padded input)
    and its count of real elements."""
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    size = end - start
    real = np.minimum(end, n) - np.maximum(start, 0)
    return size if include_pad else real


class _AvgPool(Function):
    _node_name = "AvgPool2DBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, x, k, s, p, out, div):
        X = x._data
        win = _windows(X if X.ndim == 4 else X[None], k, s, p, (1, 1), out, 0)
        acc = win[..., 0, 0].copy()
        for i in range(k[0]):           # one pass per kernel offset, as the max
            for j in range(k[1]):
                if i or j:
                    acc += win[..., i, j]
        res = (acc / div).astype(X.dtype, copy=False)
        if ctx is not None:
            ctx._aux = (k, s, p, out, div, X.shape)
        return res if X.ndim == 4 else res[0]

    @staticmethod
    def backward(ctx, g):
        return (_AvgPoolAdjoint.apply(g, *ctx._aux),) + (None,) * 5


class _AvgPoolAdjoint(Function):
    """The gradient of average pooling: g / divisor added back over each window."""
    _node_name = "AvgPool2DBackwardBackward0"

    @staticmethod
    def forward(ctx, g, k, s, p, out, div, shape):
        H, W = shape[-2:]
        G = g._data / div
        need = [(o - 1) * st + kk for o, st, kk in zip(out, s, k)]
        Hp, Wp = max(H + 2 * p[0], need[0]), max(W + 2 * p[1], need[1])
        dx = np.zeros(tuple(shape[:-2]) + (Hp, Wp), dtype=G.dtype)
        for i in range(k[0]):
            for j in range(k[1]):
                dx[..., i: i + s[0] * (out[0] - 1) + 1: s[0],
                   j: j + s[1] * (out[1] - 1) + 1: s[1]] += G
        if ctx is not None:
            ctx._aux = (k, s, p, out, div)
        return np.ascontiguousarray(dx[..., p[0]: p[0] + H, p[1]: p[1] + W]).astype(
            g._data.dtype, copy=False)

    @staticmethod
    def backward(ctx, gg):
        return (_AvgPool.apply(gg, *ctx._aux),) + (None,) * 6


def _check_pool_input(input, name):
    if input.dim() not in (3, 4) or any(n == 0 for n in input.shape[1:]):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")


def _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode):
    k = _pair(kernel_size, "kernel_size")
    s = k if (stride is None or (not isinstance(stride, numbers.Integral) and
                                  len(tuple(stride)) == 0)) else _pair(stride, "stride")
    p = _pair(padding, "padding")
    d = _pair(dilation, "dilation")
    if any(e == 0 for e in s):
        raise RuntimeError("stride should not be zero")
    if any(e <= 0 for e in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} "
                           f"kW: {k[1]}")
    if any(e <= 0 for e in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} "
                           f"dilationW: {d[1]}")
    for pp, kk, dd in zip(p, k, d):
        if pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation={dd}")
    H, W = input.shape[-2:]
    out = (_out_len(H, k[0], s[0], p[0], d[0], ceil_mode),
           _out_len(W, k[1], s[1], p[1], d[1], ceil_mode))
    if out[0] < 1 or out[1] < 1:
        C = input.shape[-3]
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: "
                           f"({C}x{out[0]}x{out[1]}). Output size is too small")
    return k, s, p, d, out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``; ``stride`` defaults to
    ``kernel_size``; padding counts as -inf. ``return_indices=True`` also returns the flat
    index (``h * W + w``) of each maximum in its input plane."""
    _checks.check_tensor(input, "max_pool2d")
    _check_pool_input(input, "max_pool2d")
    k, s, p, d, out = _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode)
    if input._data.dtype.kind not in "fiu":
        raise RuntimeError(f'"max_pool2d" not implemented for \'{input.dtype}\'')

    v, i = _MaxPool.apply(input, k, s, p, d, out)
    return (v, i) if return_indices else v


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``: 2-D max pooling over a height of 1."""
    _checks.check_tensor(input, "max_pool1d")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"max_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{_shape_list(input.shape)}")
    one = (lambda v: (1, v if isinstance(v, numbers.Integral) else next(iter(v))))
    res = max_pool2d(input.unsqueeze(-2), one(kernel_size),
                     None if stride is None or (not isinstance(stride, numbers.Integral) and
                                                len(tuple(stride)) == 0) else one(stride),
                     (0, one(padding)[1]), (1, one(dilation)[1]), ceil_mode, return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``; ``stride`` defaults to
    ``kernel_size``; ``count_include_pad`` counts the zero padding in the divisor;
    ``divisor_override`` replaces the divisor."""
    _checks.check_tensor(input, "avg_pool2d")
    _check_pool_input(input, "avg_pool2d")
    k, s, p, _, out = _pool_args(input, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        div = float(divisor_override)
    else:
        H, W = input.shape[-2:]
        dh = _divisor(H, k[0], s[0], p[0], out[0], count_include_pad)
        dw = _divisor(W, k[1], s[1], p[1], out[1], count_include_pad)
        div = (dh[:, None] * dw[None, :]).astype(np.float64)
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"avg_pool2d" not implemented for \'{input.dtype}\'')
    div = np.asarray(div, dtype=input._data.dtype)
    return _AvgPool.apply(input, k, s, p, out, div)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``: 2-D over a height of 1."""
    _checks.check_tensor(input, "avg_pool1d")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"avg_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{_shape_list(input.shape)}")
    one = (lambda v: (1, v if isinstance(v, numbers.Integral) else next(iter(v))))
    st = None if stride is None or (not isinstance(stride, numbers.Integral) and
                                    len(tuple(stride)) == 0) else one(stride)
    return avg_pool2d(input.unsqueeze(-2), one(kernel_size), st, (0, one(padding)[1]),
                      ceil_mode, count_include_pad).squeeze(-2)


def _adaptive_matrix(n, o, dtype):
    """(o, n): row i averages input [floor(i n / o), ceil((i + 1) n / o))."""
    i = np.arange(o)
    start = (i * n) // o
    end = -((-(i + 1) * n) // o)
    j = np.arange(n)
    m = (j[None, :] >= start[:, None]) & (j[None, :] < end[:, None])
    return (m / (end - start)[:, None]).astype(dtype)


class _AdaptiveAvg(Function):
    """out = A_h @ x @ A_w^T with the averaging matrices; the gradient is A_h^T @ g @ A_w,
    written with cgrad's matmul so it can be differentiated again."""
    _node_name = "AdaptiveAvgPool2DBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, x, ah, aw):
        out = ah @ x._data @ aw.T
        if ctx is not None:
            ctx._aux = (ah, aw)
        return out

    @staticmethod
    def backward(ctx, g):
        from cgrad._C import _wrap
        ah, aw = ctx._aux
        return _wrap(np.ascontiguousarray(ah.T)) @ g @ _wrap(aw), None, None


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed ``output_size`` (int, pair; ``None`` keeps that size) over
    ``(N, C, H, W)`` or ``(C, H, W)``: window i spans ``[floor(i H / Ho), ceil((i+1) H / Ho))``.
    An output of 1x1 is a mean over the plane (``MeanBackward1``), as torch."""
    _checks.check_tensor(input, "adaptive_avg_pool2d")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{_shape_list(input.shape)}")
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    H, W = input.shape[-2:]
    oh = H if output_size[0] is None else int(output_size[0])
    ow = W if output_size[1] is None else int(output_size[1])
    if oh == 1 and ow == 1:
        return input.mean((-2, -1), keepdim=True)
    dt = input._data.dtype
    if dt.kind != "f":
        raise NotImplementedError(f'"adaptive_avg_pool2d" not implemented for \'{input.dtype}\'')
    return _AdaptiveAvg.apply(input, _adaptive_matrix(H, oh, dt), _adaptive_matrix(W, ow, dt))



class _UpsampleNearest(_Gather):
    """Nearest-neighbour upsampling: a gather of the source pixel of each output pixel; its
    gradient adds each output's gradient back onto its source (_MaxUnpoolAdd)."""
    _node_name = "UpsampleNearest2DBackward0"


class _UpsampleNearest1d(_Gather):
    _node_name = "UpsampleNearest1DBackward0"


def _nearest_index(n, o, scale):
    """torch's 'nearest': source floor(dst * scale), scale = in / out or 1 / scale_factor."""
    s = n / o if scale is None else 1.0 / scale
    return np.minimum(np.floor(np.arange(o) * np.float32(s)).astype(np.int64), n - 1)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of ``(N, C, L)`` or ``(N, C, H, W)``: mode 'nearest'
    (``UpsampleNearest1DBackward0`` / ``UpsampleNearest2DBackward0``), 'linear', 'bilinear',
    'bicubic' (Note [Separable resizing] in cgrad/nn/functional/_upsample.py) or 'area'
    (adaptive average pooling); ``antialias=True`` and 'trilinear' are not implemented."""
    _checks.check_tensor(input, "interpolate")
    interpolating = mode in ("linear", "bilinear", "bicubic", "trilinear")
    if align_corners is not None and not interpolating:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if interpolating and align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented in cgrad")
    nd = input.dim() - 2
    if mode == "nearest" and nd not in (1, 2):
        raise NotImplementedError(f"interpolate: {input.dim()}-D inputs are not implemented in "
                                  f"cgrad (3-D and 4-D are)")
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined" if size is None else
                         "only one of size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        sizes = (size,) * nd if isinstance(size, numbers.Integral) else tuple(size)
        scales = (None,) * nd
    else:
        sc = ((scale_factor,) * nd if isinstance(scale_factor, numbers.Number)
              else tuple(scale_factor))
        sizes = tuple(math.floor(n * f) for n, f in zip(spatial, sc))
        scales = (None,) * nd if recompute_scale_factor else sc
    if len(sizes) != nd:
        raise ValueError(f"Input and output must have the same number of spatial dimensions, "
                         f"but got input with spatial dimensions of {list(spatial)} and output "
                         f"size of {list(sizes)}. Please provide input tensor in (N, C, d1, "
                         f"d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
    if mode == "area" and nd in (1, 2):
        if nd == 1:
            return adaptive_avg_pool2d(input.unsqueeze(-2), (1, sizes[0])).squeeze(-2)
        return adaptive_avg_pool2d(input, sizes)
    if mode != "nearest":
        # linear, bilinear, bicubic (Note [Separable resizing])
        from cgrad.nn.functional._upsample import _resize
        return _resize(input, sizes, scales, mode, align_corners)
    N, C = input.shape[:2]
    if nd == 1:
        iw = _nearest_index(spatial[0], sizes[0], scales[0])
        # the gather works on planes of the last two dims: (C, L) here, so the channel's
        # offset is part of the index
        idx = np.broadcast_to(np.arange(C)[:, None] * spatial[0] + iw, (N, C, sizes[0]))
        return _UpsampleNearest1d.apply(input, np.ascontiguousarray(idx))
    ih = _nearest_index(spatial[0], sizes[0], scales[0])
    iw = _nearest_index(spatial[1], sizes[1], scales[1])
    idx = np.broadcast_to(ih[:, None] * spatial[1] + iw[None, :], (N, C) + tuple(sizes))
    return _UpsampleNearest.apply(input, np.ascontiguousarray(idx))
