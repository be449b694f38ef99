"""More pooling of cgrad.nn.functional: ``adaptive_avg_pool1d``, ``adaptive_max_pool1d/2d``
(``AdaptiveMaxPool2DBackward0``), ``lp_pool1d/2d`` and ``max_unpool1d/2d``
(``MaxUnpool2DBackward0``).

Note [Adaptive max pooling]
Output i along an axis of length n pools input ``[floor(i n / o), ceil((i + 1) n / o))``.
The windows differ in length by at most one, so each is read as a window of the longest
length ``kmax`` whose missing tail repeats its last element (a repeated element never
changes the maximum nor, compared strictly, its first position). One fancy-indexed gather
makes ``(N, C, oh, ow, kh, kw)``; the maximum is then taken with one vectorised pass per
kernel offset (kh * kw of them, never per pixel), with torch's rule that a larger value or a
NaN takes the place. The gradient scatters to the argmax with one bincount
(``_MaxUnpoolAdd`` of cgrad/nn/functional/_pooling.py), whose gradient is a gather, so double
backward works.
"""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _checks
from cgrad.autograd.function import Function
from cgrad.nn.functional._pooling import _MaxUnpoolAdd, adaptive_avg_pool2d, avg_pool2d
from cgrad.nn.functional._utils import _shape_list


def _adaptive_index(n, o):
    """(o, kmax) input positions of each adaptive window, the short ones padded with their
    last element."""
    i = np.arange(o)
    start = (i * n) // o
    end = -((-(i + 1) * n) // o)
    kmax = int((end - start).max()) if o else 1
    idx = start[:, None] + np.arange(kmax)[None, :]
    return np.minimum(idx, (end - 1)[:, None])


class _AdaptiveMax(Function):
    """Note [Adaptive max pooling]."""
    _node_name = "AdaptiveMaxPool2DBackward0"
    _cg_saves = True      # torch saves self and the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, x, out):
        X = x._data
        H, W = X.shape[-2:]
        ih, iw = _adaptive_index(H, out[0]), _adaptive_index(W, out[1])
        # (..., oh, kh, ow, kw) -> (..., oh, ow, kh, kw)
        win = X[..., ih[:, :, None, None], iw[None, None, :, :]]
        win = np.moveaxis(win, -3, -2)
        kh, kw = ih.shape[1], iw.shape[1]
        val = win[..., 0, 0].copy()
        bi = np.zeros(val.shape, dtype=np.int64)
        bj = np.zeros(val.shape, dtype=np.int64)
        for i in range(kh):
            for j in range(kw):
                if i == 0 and j == 0:
                    continue
                v = win[..., i, j]
                m = v > val
                if X.dtype.kind == "f":
                    m |= np.isnan(v)
                np.copyto(val, v, where=m)
                bi[m] = i
                bj[m] = j
        oh_idx = np.arange(out[0])[:, None]
        ow_idx = np.arange(out[1])[None, :]
        idx = ih[oh_idx, bi] * W + iw[ow_idx, bj]
        if ctx is not None:
            ctx._aux = (idx, X.shape)
        return val, idx

    @staticmethod
    def backward(ctx, g, _gi):
        idx, shape = ctx._aux
        return _MaxUnpoolAdd.apply(g, idx, shape, False), None


def _check_adaptive(input, name, nd):
    _checks.check_tensor(input, name)
    if input.dim() not in (nd + 1, nd + 2) or any(n == 0 for n in input.shape[-nd:]):
        if nd == 1:
            raise RuntimeError(f"{name}(): Expected 2D or 3D tensor, but got: "
                               f"{_shape_list(input.shape)}")
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got: "
                           f"{_shape_list(input.shape)}")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed ``output_size`` (int, pair; ``None`` keeps that size) over
    ``(N, C, H, W)`` or ``(C, H, W)``; ``return_indices`` also returns the flat index
    ``h * W + w`` of each maximum (Note [Adaptive max pooling])."""
    _check_adaptive(input, "adaptive_max_pool2d", 2)
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    output_size = tuple(output_size)
    if len(output_size) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
    H, W = input.shape[-2:]
    out = (H if output_size[0] is None else int(output_size[0]),
           W if output_size[1] is None else int(output_size[1]))
    if any(o < 0 for o in out):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected output_size to be non-negative, "
                           f"but got {list(out)}")
    if input._data.dtype.kind not in "f":
        raise NotImplementedError(f'"adaptive_max_pool2d" not implemented for '
                                  f"'{input.dtype}'")
    v, i = _AdaptiveMax.apply(input, out)
    return (v, i) if return_indices else v


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to a fixed length over ``(N, C, L)`` or ``(C, L)``: the 2-D form over a
    height of 1."""
    _check_adaptive(input, "adaptive_max_pool1d", 1)
    o = output_size if isinstance(output_size, numbers.Integral) else tuple(output_size)
    if not isinstance(o, numbers.Integral):
        if len(o) != 1:
            raise RuntimeError("adaptive_max_pool1d: output_size must be 1")
        o = o[0]
    v, i = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), True)
    v, i = v.squeeze(-2), i.squeeze(-2)
    return (v, i) if return_indices else v


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to a fixed length over ``(N, C, L)`` or ``(C, L)``: the 2-D form over
    a height of 1 (``SqueezeBackward1`` on top, as torch)."""
    _check_adaptive(input, "adaptive_avg_pool1d", 1)
    o = output_size if isinstance(output_size, numbers.Integral) else tuple(output_size)
    if not isinstance(o, numbers.Integral):
        if len(o) != 1:
            raise RuntimeError("adaptive_avg_pool1d: output_size must be 1")
        o = o[0]
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


# -- power-average pooling -------------------------------------------------------------------


def _lp(x, norm_type, kernel_size, stride, ceil_mode, nk):
    # the mean of x^p over each window, times the window's size, to the power 1/p; a window
    # whose mean is negative (odd p) is taken as zero, as torch
    m = avg_pool2d(x.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (m.sign() * m.abs().relu()).mul(nk).pow(1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling ``(sum over the window of x^p)^(1/p)`` over ``(N, C, H, W)`` or
    ``(C, H, W)``."""
    _checks.check_tensor(input, "lp_pool2d")
    k = (kernel_size, kernel_size) if isinstance(kernel_size, numbers.Integral) \
        else tuple(kernel_size)
    return _lp(input, norm_type, k, stride, ceil_mode, k[0] * k[1])


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling ``(sum over the window of x^p)^(1/p)`` over ``(N, C, L)`` or
    ``(C, L)``."""
    _checks.check_tensor(input, "lp_pool1d")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"avg_pool1d() Expected 2D or 3D input tensor, but got "
                           f"{_shape_list(input.shape)}")
    k = kernel_size if isinstance(kernel_size, numbers.Integral) else next(iter(kernel_size))
    st = None
    if stride is not None:
        st = (1, stride if isinstance(stride, numbers.Integral) else next(iter(stride)))
    m = avg_pool2d(input.unsqueeze(-2).pow(norm_type), (1, k), st, 0, ceil_mode).squeeze(-2)
    return (m.sign() * m.abs().relu()).mul(k).pow(1.0 / norm_type)


# -- max unpooling -----------------------------------------------------------------------------


class _MaxUnpool(_MaxUnpoolAdd):
    """Put each value at its index in a zero plane (a scatter; its gradient gathers). A
    repeated index keeps the last value written, as torch's CPU kernel."""
    _node_name = "MaxUnpool2DBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, idx, shape):
        H, W = shape[-2:]
        planes = int(np.prod(shape[:-2]))
        out = np.zeros(planes * H * W, dtype=g._data.dtype)
        flat = idx + np.arange(planes).reshape(idx.shape[:-2] + (1, 1)) * (H * W)
        out[flat.ravel()] = g._data.ravel()
        if ctx is not None:
            ctx._aux = idx
        return out.reshape(shape)


def _unpool_size(input, kernel_size, stride, padding, output_size, nd, name):
    k = (kernel_size,) * nd if isinstance(kernel_size, numbers.Integral) else tuple(kernel_size)
    if stride is None or (not isinstance(stride, numbers.Integral) and len(tuple(stride)) == 0):
        s = k
    else:
        s = (stride,) * nd if isinstance(stride, numbers.Integral) else tuple(stride)
    p = (padding,) * nd if isinstance(padding, numbers.Integral) else tuple(padding)
    spatial = tuple(input.shape[-nd:])
    default = [(n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(spatial, s, p, k)]
    if output_size is None:
        return tuple(default)
    size = list(output_size)
    if len(size) == nd + 2 or (len(size) == nd + 1 and input.dim() == nd + 1):
        size = size[-nd:]
    if len(size) != nd:
        raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                         f"elements, but it has a length of '{len(size)}'")
    for d in range(nd):
        lo, hi = default[d] - s[d], default[d] + s[d]
        if not lo < size[d] < hi:
            raise ValueError(f'invalid output_size "{tuple(size)}" (dim {d} must be between '
                             f"{lo} and {hi})")
    return tuple(int(v) for v in size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value of ``(N, C, H, W)`` or ``(C, H, W)`` put at its
    flat index (``h * W_out + w``) in a zero plane of the output size."""
    _checks.check_tensor(input, "max_unpool2d")
    hw = _unpool_size(input, kernel_size, stride, padding, output_size, 2, "max_unpool2d")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({_shape_list(input.shape)}) but got indices tensor with shape: "
                           f"{_shape_list(indices.shape)}")
    idx = np.asarray(indices._data, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= hw[0] * hw[1]):
        bad = idx.max() if idx.max() >= hw[0] * hw[1] else idx.min()
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{hw[0]}x{hw[1]}")
    shape = tuple(input.shape[:-2]) + hw
    return _MaxUnpool.apply(input, idx, shape)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d over ``(N, C, L)`` or ``(C, L)``: the 2-D form over a height
    of 1."""
    _checks.check_tensor(input, "max_unpool1d")
    (L,) = _unpool_size(input, kernel_size, stride, padding, output_size, 1, "max_unpool1d")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Input to max_unpooling1d should be a 2d or 3d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    idx = np.asarray(indices._data, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= L):
        bad = idx.max() if idx.max() >= L else idx.min()
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{L}")
    shape = tuple(input.shape[:-1]) + (1, L)
    x2 = input.unsqueeze(-2)
    return _MaxUnpool.apply(x2, idx[..., None, :], shape).squeeze(-2)
