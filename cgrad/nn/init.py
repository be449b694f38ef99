"""cgrad.nn.init: torch.nn.init's initialisers.

Every function fills its tensor in place (no graph is recorded, as under torch's no_grad),
bumps its version counter and returns it. Random draws come from cgrad's default generator
(``cgrad.manual_seed``) unless ``generator`` (a ``cgrad.Generator``, or a
``numpy.random.Generator``) is given, so results are reproducible. Values are drawn in
float64 and cast to the tensor's dtype.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad._warn import warn as _warn
from cgrad.ops import inplace as _inplace

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d")


def _gen(generator):
    from cgrad._generator import numpy_generator
    return numpy_generator(generator, "init")


def _write(tensor, values):
    """Copy values into the tensor's storage (casting to its dtype) and bump its version; an
    expanded tensor raises torch's overlap error (Note [Expanded memory], ops/inplace.py)."""
    _inplace.check_overlap(tensor)
    np.copyto(tensor._data, values, casting="unsafe")
    tensor._bump_version()
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table): 1 for linear/conv/sigmoid,
    5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope
    ``param``, default 0.01), 3/4 for selu.

    >>> calculate_gain("leaky_relu", 0.2)
    1.3867504905630728
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check_range(a, b):
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > "
                           f"to={b}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    _check_range(a, b)
    return _write(tensor, _gen(generator).uniform(a, b, size=tensor._data.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _write(tensor, _gen(generator).normal(mean, std, size=tensor._data.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (torch's samplers: redraw outside [a, b]
    when that is likely, else uniform proposals on [a, b] accepted with the normal density)."""
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    _check_range(a, b)      # torch draws uniform_(a, b) proposals: its error
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        _warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
              "The distribution of values may be incorrect.")
    g = _gen(generator)
    shape = tensor._data.shape
    lo, hi = tensor._data.dtype.type(a), tensor._data.dtype.type(b)
    p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
    if p > 0.3:
        out = g.normal(mean, std, size=shape).astype(tensor._data.dtype)
        bad = (out < lo) | (out > hi)
        while bad.any():
            out[bad] = g.normal(mean, std, size=int(bad.sum()))
            bad = (out < lo) | (out > hi)
    else:
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        out = np.empty(shape, dtype=np.float64)
        pending = np.ones(shape, dtype=bool)
        while pending.any():
            n = int(pending.sum())
            cand = g.uniform(a, b, size=n)
            accept = np.log(g.uniform(size=n)) <= -0.5 * ((cand - mean) / std) ** 2 - log_peak
            idx = np.flatnonzero(pending)[accept]
            out.reshape(-1)[idx] = cand[accept]
            pending.reshape(-1)[idx] = False
    return _write(tensor, out)


def constant_(tensor, val):
    """Fill with ``val``."""
    from cgrad._checks import type_name
    if not isinstance(val, (int, float, complex, np.number, np.bool_)):
        raise TypeError(f"fill_(): argument 'value' (position 1) must be Number or Tensor, not "
                        f"{type_name(val)}")
    tensor._data.fill(val)
    tensor._bump_version()
    return tensor


def ones_(tensor):
    """Fill with 1."""
    return constant_(tensor, 1)


def zeros_(tensor):
    """Fill with 0."""
    return constant_(tensor, 0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor._data.shape))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D (convolution weight) tensor with the Dirac delta, preserving the
    identity of the inputs in each group."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    arr = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for gi in range(groups):
        for d in range(min_dim):
            arr[(gi * out_per_group + d, d) + centre] = 1
    return _write(tensor, arr)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan_mode)."""
    if tensor.numel() == 0:
        _warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan_mode)."""
    if tensor.numel() == 0:
        _warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (QR of a Gaussian matrix, signs fixed so the
    distribution is uniform), scaled by ``gain``; dims after the first are flattened."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _gen(generator).normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tensor._data.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std^2) and zero a fraction ``sparsity`` of each column."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    g = _gen(generator)
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    arr = g.normal(0.0, std, size=(rows, cols))
    for c in range(cols):
        arr[g.permutation(rows)[:num_zeros], c] = 0
    return _write(tensor, arr)
