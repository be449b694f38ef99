"""More normalization functions of cgrad.nn.functional: ``group_norm`` (one fused
``NativeGroupNormBackward0`` node, normalisation and affine, as layer_norm's), ``instance_norm``
(batch_norm over the (1, N*C, ...) view, running statistics averaged back over N, as torch),
``rms_norm``, ``local_response_norm`` and ``normalize`` (compositions of cgrad ops, so every
order of derivative works)."""
from __future__ import annotations

import numbers

import numpy as np

from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.nn.functional._normalization import batch_norm
from cgrad.nn.functional._utils import _check_float, _grad_enabled, _shape_list, _tname


class _GroupNorm(Function):
    """Group normalization in one node: each (sample, group) of the (N, G, C/G * spatial)
    view normalised (biased variance), then the per-channel affine.
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) per group, gh = g * w;
    d/dw = sum(g * xhat), d/db = sum(g) over every dim but 1."""
    _node_name = "NativeGroupNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, groups, eps):
        x = input._data
        shape = x.shape
        pshape = (1, shape[1]) + (1,) * (x.ndim - 2)
        xr = x.reshape(shape[0], groups, -1)
        mu = xr.mean(axis=2, keepdims=True)
        xc = xr - mu
        var = np.mean(np.square(xc), axis=2, keepdims=True)
        rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
        xc *= rstd
        y = xc.reshape(shape)
        if weight is not None:
            y = y * weight._data.reshape(pshape)
        if bias is not None:
            y = y + bias._data.reshape(pshape)
        if ctx is not None:
            ctx.save_for_backward(input, weight, bias)
            ctx._aux = (groups, eps, pshape, mu, rstd)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        groups, eps, pshape, mu, rstd = ctx._aux
        nx, nw, nb = ctx.needs_input_grad[:3]
        shape = tuple(x.shape)
        gshape = (shape[0], groups, -1)
        xr = x.reshape(gshape)
        if _grad_enabled():       # create_graph: mean and rstd as functions of x
            xc = xr - xr.mean(2, keepdim=True)
            rstd_t = ((xc * xc).mean(2, keepdim=True) + eps) ** -0.5
        else:
            xc = xr - _wrap(mu)
            rstd_t = _wrap(rstd)
        xhat = xc * rstd_t
        red = (0,) + tuple(range(2, len(shape)))
        gx = gw = gb = None
        if nx:
            gh = (g * w.reshape(pshape) if w is not None else g).reshape(gshape)
            gx = (rstd_t * (gh - gh.mean(2, keepdim=True)
                            - xhat * (gh * xhat).mean(2, keepdim=True))).reshape(shape)
        if nw:
            gw = (g * xhat.reshape(shape)).sum(red)
        if nb:
            gb = g.sum(red)
        return gx, gw, gb, None, None


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each of ``num_groups`` channel groups per sample (biased variance), then
    the per-channel affine ``weight``/``bias``."""
    _checks.check_tensor(input, "group_norm")
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{len(shape)}")
    N, C = shape[0], shape[1]
    G = int(num_groups)
    if G <= 0 or C % G != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {_shape_list(shape)} and "
                           f"num_groups={G}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (p.dim() != 1 or p.numel() != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{_shape_list(p.shape)} and input of shape "
                               f"{_shape_list(shape)}")
    _check_float(input._data, "GroupNormKernelImpl")
    for p in (weight, bias):
        if p is not None and p.dtype != input.dtype:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               f"{_tname(input.dtype)}")
    return _GroupNorm.apply(input, weight, bias, G, float(eps))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) plane. With ``use_input_stats`` the plane statistics
    are used (and the running statistics, if given, updated with their mean over the batch);
    otherwise the running statistics."""
    _checks.check_tensor(input, "instance_norm")
    shape = tuple(input.shape)
    if len(shape) < 3:
        if use_input_stats:
            size = int(np.prod(shape[2:])) if len(shape) > 2 else 1
            if size == 1 or len(shape) < 2:
                from cgrad.tensor import Size
                raise ValueError("Expected more than 1 spatial element when training, got "
                                 f"input size {Size(shape)!r}")
    elif use_input_stats and int(np.prod(shape[2:])) == 1:
        from cgrad.tensor import Size
        raise ValueError("Expected more than 1 spatial element when training, got input size "
                         f"{Size(shape)!r}")
    N, C = shape[0], shape[1]
    x = input.reshape((1, N * C) + shape[2:])
    w = weight.repeat(N) if weight is not None else None
    b = bias.repeat(N) if bias is not None else None
    rm = _wrap(np.tile(running_mean._data, N)) if running_mean is not None else None
    rv = _wrap(np.tile(running_var._data, N)) if running_var is not None else None
    out = batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats:
        for r, t in ((running_mean, rm), (running_var, rv)):
            if r is not None:
                r._data[...] = t._data.reshape(N, C).mean(axis=0)
                r._bump_version()
    return out.reshape(shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps=None`` is the input dtype's machine epsilon."""
    _checks.check_tensor(input, "rms_norm")
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    shape = tuple(input.shape)
    if weight is not None and tuple(weight.shape) != ns:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {_shape_list(weight.shape)} and normalized_shape "
                           f"= {_shape_list(ns)}")
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if len(shape) < k or shape[len(shape) - k:] != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size"
                           f"{_shape_list(shape)}")
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps)
    dims = tuple(range(len(shape) - k, len(shape)))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    return y


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x**2 over a window of ``size`` channels) ** beta``, the
    window zero-padded by size // 2 before and (size - 1) // 2 after each channel."""
    _checks.check_tensor(input, "local_response_norm")
    d = input.dim()
    if d < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {d} dimensions)")
    if input.numel() == 0:
        return input
    from cgrad.nn.functional._padding import pad
    C = input.shape[1]
    sq = input * input
    # pad dim 1: F.pad's pairs run from the last dim backwards
    pads = [0, 0] * (d - 2) + [size // 2, (size - 1) // 2]
    sq = pad(sq, pads)
    acc = sq.narrow(1, 0, C)
    for i in range(1, size):        # a loop over the window (size), not over elements
        acc = acc + sq.narrow(1, i, C)
    div = (acc * (alpha / size) + k) ** beta
    return input / div


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim``."""
    from cgrad.ops.norms import vector_norm
    _checks.check_tensor(input, "normalize")
    denom = vector_norm(input, p, dim, keepdim=True).clamp_min(eps)
    res = input / denom.expand_as(input)
    if out is not None:
        out.copy_(res.detach())
        return out
    return res
