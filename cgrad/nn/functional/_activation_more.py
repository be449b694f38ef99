"""More activations of cgrad.nn.functional (hardtanh, relu6, hardswish, hardsigmoid, mish,
softsign, tanhshrink, threshold, glu, prelu, logsigmoid, softmin, hardshrink, softshrink,
celu, rrelu) and the distances cosine_similarity / pairwise_distance.

Each is a composition of cgrad ops, so its backward is differentiable to any order. Where
torch's derivative is zero outside an open interval (hardtanh, hardsigmoid, threshold) the
selected branch is chosen with ``where`` on a strict mask, so the gradient at the interval's
ends is torch's. ``inplace=True`` writes the result into the input (recorded, as torch)."""
from __future__ import annotations

import numpy as np

from cgrad import _C, _checks
from cgrad._C import _wrap
from cgrad.nn.functional._utils import _inplace_apply
from cgrad.ops.comparison import where as _where
from cgrad.ops.joining import broadcast_tensors as _broadcast_tensors
from cgrad.ops.norms import vector_norm as _vector_norm
from cgrad.ops.pointwise import expm1 as _expm1
from cgrad.ops.pointwise import softplus as _softplus
from cgrad.ops.pointwise import tanh as _tanh


def _rand(shape, dtype):
    """Uniform [0, 1) samples from cgrad's generator."""
    from cgrad._creation import _rng
    return _wrap(_rng().random(shape).astype(dtype, copy=False))


def _maybe_inplace(input, inplace, fn):
    if inplace:
        return _inplace_apply(input, fn)
    return fn(input)


def _const_like(x, value):
    return _wrap(np.asarray(value, dtype=x._data.dtype))


def _hardtanh(x, lo, hi):
    inside = (x > lo) & (x < hi)
    return _where(inside, x, x.detach().clamp(lo, hi))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val); gradient 1 strictly inside, 0 elsewhere."""
    _checks.check_tensor(input, "hardtanh")
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(input, inplace, lambda x: _hardtanh(x, min_val, max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place hardtanh."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def _hardsigmoid(x):
    return _hardtanh(x + 3.0, 0.0, 6.0) / 6.0


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    _checks.check_tensor(input, "hardsigmoid")
    return _maybe_inplace(input, inplace, _hardsigmoid)


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    _checks.check_tensor(input, "hardswish")
    return _maybe_inplace(input, inplace, lambda x: x * _hardsigmoid(x))


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    _checks.check_tensor(input, "mish")
    return _maybe_inplace(input, inplace, lambda x: x * _tanh(_softplus(x)))


def softsign(input):
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, value elsewhere."""
    _checks.check_tensor(input, "threshold")
    return _maybe_inplace(input, inplace,
                          lambda x: _where(x > threshold, x, _const_like(x, value)))


def threshold_(input, threshold, value):
    """In-place threshold."""
    return globals()["threshold"](input, threshold, value, inplace=True)


def glu(input, dim=-1):
    """a * sigmoid(b) with (a, b) the two halves of ``input`` along ``dim``."""
    _checks.check_tensor(input, "glu")
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    nd = input.dim()
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {dim})")
    d = dim % nd
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a = input.narrow(d, 0, n // 2)
    b = input.narrow(d, n // 2, n // 2)
    return a * b.sigmoid()


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), ``weight`` one slope or one per channel (dim 1)."""
    _checks.check_tensor(input, "prelu")
    nw = weight.numel()
    if nw != 1:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        C = input.shape[1] if input.dim() >= 2 else input.shape[0]
        if nw != C:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {nw} and channel size = {C}.")
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    if nw == 1:
        w = weight.reshape(())
    elif input.dim() >= 2:
        w = weight.reshape((1, nw) + (1,) * (input.dim() - 2))
    else:
        w = weight
    return _where(input > 0, input, w * input)


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x) (stable for large |x|)."""
    _checks.check_tensor(input, "logsigmoid")
    return -_softplus(-input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x, dim)."""
    from cgrad.nn.functional._activation import _softmax_common
    from cgrad.ops.reductions import Softmax
    _checks.check_tensor(input, "softmin")
    if dtype is not None:
        input = input.to(dtype)
    return _softmax_common(Softmax, "softmin", -input, dim, _stacklevel, None)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, 0 elsewhere."""
    _checks.check_tensor(input, "hardshrink")
    return _where(input.abs() > lambd, input, _const_like(input, 0.0))


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _checks.check_tensor(input, "softshrink")
    if lambd < 0:
        from cgrad.nn.functional._utils import _tname
        dt = input._data.dtype
        hi = float(np.finfo(dt).max) if dt.kind == "f" else float("inf")
        raise RuntimeError(f"lambda must be in range [0, {hi:g}] for input dtype "
                           f"{_tname(input.dtype)}, but found {lambd:g}")
    zero = _const_like(input, 0.0)
    return _where(input > lambd, input - lambd,
                    _where(input < -lambd, input + lambd, zero))


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    _checks.check_tensor(input, "celu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")

    def f(x):
        neg = _expm1(x.clamp_max(0.0) / alpha) * alpha
        return _where(x > 0, x, neg)
    return _maybe_inplace(input, inplace, f)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomised leaky ReLU: in training a slope drawn uniformly from [lower, upper] per
    negative element (cgrad's generator, so not torch's random stream); in eval the fixed
    slope (lower + upper) / 2."""
    _checks.check_tensor(input, "rrelu")
    if not training:
        slope = (lower + upper) / 2.0
        return _maybe_inplace(input, inplace,
                              lambda x: _where(x >= 0, x, x * slope))
    noise = _rand(tuple(input.shape), input._data.dtype) * (upper - lower) + lower
    return _maybe_inplace(input, inplace, lambda x: _where(x >= 0, x, x * noise))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps)) after broadcasting."""
    if not isinstance(x1, _C.TensorBase) or not isinstance(x2, _C.TensorBase):
        bad, pos, name = (x1, 1, "x1") if not isinstance(x1, _C.TensorBase) else (x2, 2, "x2")
        raise TypeError(f"cosine_similarity(): argument '{name}' (position {pos}) must be "
                        f"Tensor, not {_checks.type_name(bad)}")
    a, b = _broadcast_tensors(x1, x2)
    nd = a.dim()
    n = max(nd, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, "
                         f"{n - 1}], but got {dim})")
    n1 = _vector_norm(a, 2, dim, keepdim=True).clamp_min(eps)
    n2 = _vector_norm(b, 2, dim, keepdim=True).clamp_min(eps)
    return ((a / n1) * (b / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (0-d/1-d inputs as torch)."""
    if not isinstance(x1, _C.TensorBase) or not isinstance(x2, _C.TensorBase):
        bad, pos, name = (x1, 1, "x1") if not isinstance(x1, _C.TensorBase) else (x2, 2, "x2")
        raise TypeError(f"pairwise_distance(): argument '{name}' (position {pos}) must be "
                        f"Tensor, not {_checks.type_name(bad)}")
    d = max(x1.dim(), x2.dim())
    diff = x1 - x2 + eps
    if d == 0:
        return (diff.abs() if p != 0 else (diff != 0).to(diff.dtype))
    return _vector_norm(diff, p, -1, keepdim=keepdim)
