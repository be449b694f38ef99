"""Elementwise unary ops and activations (see cgrad/ops/__init__.py for the conventions).

Integer and boolean inputs of floating-point functions (sqrt, sin, sigmoid, ...) compute in the
default float dtype, as torch. Values torch produces silently (inf, nan) are produced without
NumPy RuntimeWarnings: np.errstate is used locally where a division, log or overflow can
occur.

Activations (relu, leaky_relu, elu/selu, gelu, silu, sigmoid, tanh, softplus) are one node
each, saving the input or the output as torch does. Their first-order backward is a single
fused NumPy expression inside a second Function (torch's ``tanh_backward`` & co., named
``TanhBackwardBackward0`` etc. for the node it records under create_graph=True), whose own
backward is written with cgrad ops: any order of differentiation works, and plain
backward() pays for one NumPy expression per activation.

Derivatives at the kinks are torch's: relu'(0) = 0, leaky_relu'(0) = negative_slope,
elu'(0) = alpha * scale, abs'(0) = 0; floor/ceil/round/trunc/sign have zero gradients.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad import _dtype
from cgrad._C import _wrap, is_grad_enabled
from cgrad.autograd.function import Function
from cgrad.ops import comparison as _comparison
from cgrad.ops.comparison import ClampScalar, _mask_mul, mask_fill, mask_where
from cgrad.ops.arithmetic import _zeros_for
from cgrad.ops.promotion import torch_type_name
from cgrad.ops.arithmetic import PowScalar

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


from cgrad.ops.promotion import _errstate  # noqa: E402


def _fin(x):
    """The array a floating-point function computes on: integers and booleans are converted
    to the default float dtype (torch: sqrt(int tensor) is float32)."""
    if x.dtype.kind in "fc":
        return x
    return x.astype(_dtype.get_default_dtype())


def _only_float(x, kernel):
    if x.dtype.kind not in "fc":
        raise NotImplementedError(
            f"\"{kernel}\" not implemented for '{torch_type_name(x.dtype)}'")


def _no_bool(x, kernel):
    if x.dtype.kind == "b":
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _save_out(ctx, out):
    """Save an output for backward (wrapped so the engine stores it without a cycle)."""
    out = _wrap(out)
    ctx.save_for_backward(out)
    return out


def _times(d, g):
    """d * g for a fresh array d: in place when the shapes and dtypes allow it."""
    gd = g._data
    if type(d) is np.ndarray and d.shape == gd.shape and d.dtype == gd.dtype:
        d *= gd
        return d
    return d * gd


def _sign_array(x):
    if x.dtype.kind == "b":
        return x.copy()
    out = np.sign(x)
    if x.dtype.kind == "f":
        nan = np.isnan(out)
        if nan.any():                       # torch: sign(nan) = 0
            out = np.where(nan, 0, out).astype(x.dtype, copy=False)
    return out


# ----------------------------------------------------------------------------------------
# sign, abs, rounding (zero or piecewise-constant derivatives)
# ----------------------------------------------------------------------------------------
class Abs(Function):
    """|a|.  d/da = g * sign(a) (0 at 0)."""
    _node_name = "AbsBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        _no_bool(x, "abs_cpu")
        if ctx is not None:
            ctx.save_for_backward(a)
        return np.abs(x)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with _errstate():            # inf * 0 -> nan, as torch
            return g * Sgn.apply(a)  # as torch: grad * sgn(self), so d2/da2 = 0 (not unused)


class Sign(Function):
    """sign(a) (sign(nan) = 0, booleans stay booleans).  d/da = 0."""
    _node_name = "SignBackward0"

    @staticmethod
    def forward(ctx, a):
        return _sign_array(a._data)

    @staticmethod
    def backward(ctx, g):
        return _zeros_for(g)


class Sgn(Sign):
    """sgn(a): sign for real tensors."""
    _node_name = "SgnBackward0"
    _cg_saves = True      # torch saves self and result (Note [Freed saved values])


def _rounding(name, npfn, node):
    kernel = f"{name}_vml_cpu"

    def forward(ctx, a):
        x = a._data
        _no_bool(x, kernel)
        if x.dtype.kind in "iu":
            return x.copy()
        return npfn(x)

    def backward(ctx, g):
        return _zeros_for(g)

    return type(name.capitalize(), (Function,), {
        "__doc__": f"{name}(a).  d/da = 0.", "_node_name": node,
        "forward": staticmethod(forward), "backward": staticmethod(backward)})


Floor = _rounding("floor", np.floor, "FloorBackward0")
Ceil = _rounding("ceil", np.ceil, "CeilBackward0")
Round = _rounding("round", np.round, "RoundBackward0")      # half to even, as torch
Trunc = _rounding("trunc", np.trunc, "TruncBackward0")


class RoundDecimals(Function):
    """round(a, decimals=d) (half to even at the scaled value, as torch).  d/da = 0."""
    _node_name = "RoundBackward1"

    @staticmethod
    def forward(ctx, a, decimals):
        x = a._data
        _only_float(x, "round_cpu")
        return np.round(x, decimals)

    @staticmethod
    def backward(ctx, g):
        return _zeros_for(g), None


# ----------------------------------------------------------------------------------------
# powers, exponentials, logarithms, trigonometry
# ----------------------------------------------------------------------------------------
class Sqrt(Function):
    """sqrt(a).  d/da = g / (2 sqrt(a))."""
    _node_name = "SqrtBackward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.sqrt(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return g / (out * 2.0)


class Rsqrt(Function):
    """1 / sqrt(a).  d/da = -g * rsqrt(a)**3 / 2."""
    _node_name = "RsqrtBackward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.reciprocal(np.sqrt(_fin(a._data)))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return g * PowScalar.apply(out, 3) * -0.5


class Reciprocal(Function):
    """1 / a.  d/da = -g / a**2 = -g * out**2."""
    _node_name = "ReciprocalBackward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.reciprocal(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return -g * (out * out)


class Expm1(Function):
    """exp(a) - 1 (accurate near 0).  d/da = g * (out + 1)."""
    _node_name = "Expm1Backward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.expm1(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return g * (out + 1.0)


class Exp2(Function):
    """2 ** a.  d/da = g * out * ln 2."""
    _node_name = "Exp2Backward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.exp2(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return g * (out * _LN2)


def _log_op(name, npfn, node, scale):
    """log1p / log2 / log10: d/da = g / ((a + shift) * scale)."""
    shift = 1.0 if name == "log1p" else 0.0

    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        with _errstate():
            return npfn(_fin(a._data))

    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with _errstate():
            d = a + shift if shift else a
            return g / (d * scale) if scale != 1.0 else g / d

    return type(name.capitalize(), (Function,), {
        "__doc__": f"{name}(a).", "_node_name": node,
        "forward": staticmethod(forward), "backward": staticmethod(backward)})


Log1p = _log_op("log1p", np.log1p, "Log1PBackward0", 1.0)
Log2 = _log_op("log2", np.log2, "Log2Backward0", _LN2)
Log10 = _log_op("log10", np.log10, "Log10Backward0", _LN10)


class Sin(Function):
    """sin(a).  d/da = g * cos(a)."""
    _node_name = "SinBackward0"

    @staticmethod
    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        with _errstate():
            return np.sin(_fin(a._data))

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * Cos.apply(a)


class Cos(Function):
    """cos(a).  d/da = -g * sin(a)."""
    _node_name = "CosBackward0"

    @staticmethod
    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        with _errstate():
            return np.cos(_fin(a._data))

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * -Sin.apply(a)


class Tan(Function):
    """tan(a).  d/da = g * (1 + out**2)."""
    _node_name = "TanBackward0"

    @staticmethod
    def forward(ctx, a):
        with _errstate():
            out = np.tan(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        with _errstate():
            return g * (out * out + 1.0)


class NanToNum(Function):
    """nan_to_num(a, nan, posinf, neginf).  d/da = g where a is finite, else 0."""
    _node_name = "NanToNumBackward0"

    @staticmethod
    def forward(ctx, a, nan, posinf, neginf):
        x = a._data
        if x.dtype.kind not in "fc":
            return x.copy()
        if ctx is not None:
            ctx.save_for_backward(a)
        return np.nan_to_num(x, copy=True, nan=nan, posinf=posinf, neginf=neginf)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return mask_fill(g, ~np.isfinite(a._data)), None, None, None


# ----------------------------------------------------------------------------------------
# activations: forward node + a backward Function (fast first order, any order)
# ----------------------------------------------------------------------------------------
class Tanh(Function):
    """tanh(a).  d/da = g * (1 - out**2)."""
    _node_name = "TanhBackward0"

    @staticmethod
    def forward(ctx, a):
        out = np.tanh(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return TanhBackward.apply(g, out)


class TanhBackward(Function):
    """tanh_backward(g, out) = g * (1 - out**2)."""
    _node_name = "TanhBackwardBackward0"

    @staticmethod
    def forward(ctx, g, out):
        if ctx is not None:
            ctx.save_for_backward(g, out)
        y = out._data
        return _times(1.0 - y * y, g)

    @staticmethod
    def backward(ctx, gg):
        g, out = ctx.saved_tensors
        ng, no = ctx.needs_input_grad
        return (TanhBackward.apply(gg, out) if ng else None,
                gg * g * out * -2.0 if no else None)


def _keep_dtype(out, x):
    """SciPy's ufuncs have no float16 loops: cast their result back to x's dtype."""
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _sigmoid_array(x):
    """1 / (1 + exp(-x)) (torch's formula): exp(-x) overflows to inf for very negative x,
    giving exactly 0; NumPy's exp is vectorised, unlike scipy.special.expit."""
    with np.errstate(over="ignore"):
        return _sigmoid_raw(x)


def _sigmoid_raw(x):
    """_sigmoid_array for callers that already ignore overflow (np.errstate)."""
    e = np.exp(np.negative(x))
    if type(e) is not np.ndarray:             # 0-d input: NumPy returns a scalar
        return np.asarray(1.0 / (1.0 + e), dtype=x.dtype)
    e += 1.0
    np.reciprocal(e, out=e)
    return e


def _erf(x):
    from scipy.special import erf     # lazy: scipy.special costs ~0.2 s to import
    return _keep_dtype(erf(x), x)


# Note [GELU in float32]: the exact GELU is x Phi(x); scipy.special.erf is a scalar loop
# (~15 ns per element, 2 ms for a (512, 256) activation) while a NumPy pass over float32 costs
# ~0.1 ns per element. For float32 arrays Phi(x) is computed from the complementary error
# function in the form of Numerical Recipes' erfcc (Chebyshev fit, fractional error < 1.2e-7):
# E = erfc(|x| / sqrt 2) = t exp(-x^2 / 2 + P(t)), t = 1 / (1 + |x| / (2 sqrt 2)), then
# Phi(x) = E / 2 for x < 0 (no cancellation: the tail keeps its relative accuracy) and
# 1 - E / 2 for x > 0, selected arithmetically (masked NumPy calls are 50x slower than a pass).
# About 34 float32 passes, 4.5x faster than scipy's erf. Measured over 2M points against
# float64 x * ndtr(x): GELU within 7 ulp for x > -1 (mean 0.4), 21 ulp for x > -5 and
# 130 ulp in the far tail (x < -12, values below 1e-30); torch's float32 GELU, which forms
# 1 + erf(x / sqrt 2), loses all relative accuracy below x = -5 (millions of ulp). inf, -inf
# and nan behave as torch's (inf, nan, nan). Other dtypes keep scipy's erf.
_ERFC_C = tuple(np.float32(c) for c in (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
    1.48851587, -0.82215223, 0.17087277))
_ERFC_K = np.float32(0.5 * _SQRT1_2)

# The same formulas in one compiled pass (cgrad._fused, csrc/cg_fused.c): the forward's 34
# NumPy passes and the backward's 5 become one loop each, with the kernels' own float32 exp
# (<= 1 ulp; NumPy's <= 2.5), so results differ from the NumPy passes by rounding (the
# accuracy bounds above hold for both: tests run both). CGRAD_NO_FUSED_EXT=1 at import (or
# _F32_EXT = False, which also gates ELU's pass) selects the NumPy passes.
from cgrad._fused_switch import FUSED as _fused_ext, ON as _F32_EXT  # noqa: E402


def _ext_f32_ok(x):
    return _F32_EXT and type(x) is np.ndarray and x.dtype == np.float32 and x.ndim > 0


def _gelu_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, a new array (Note [GELU in float32])."""
    if type(x) is not np.ndarray or x.dtype != np.float32 or x.ndim == 0:
        cdf = _erf(x * _SQRT1_2)
        cdf += 1.0
        cdf *= 0.5
        return cdf
    c = _ERFC_C
    one = np.float32(1.0)
    half = np.float32(0.5)
    t = np.abs(x)
    t *= _ERFC_K
    t += one
    np.reciprocal(t, out=t)
    e = t * c[9]
    for k in range(8, 0, -1):
        e += c[k]
        e *= t
    e += c[0]
    q = np.multiply(x, x)
    q *= half
    e -= q
    np.exp(e, out=e)
    e *= t                                  # E = erfc(|x| / sqrt 2) = 2 Phi(-|x|)
    s = np.sign(x, out=q)
    s += one                                # 0 for x < 0, 1 at 0, 2 for x > 0 (nan: nan)
    w = np.subtract(one, e, out=t)
    w *= s
    w += e
    w *= half                               # E / 2 exactly where x < 0
    return w


class Sigmoid(Function):
    """1 / (1 + exp(-a)).  d/da = g * out * (1 - out)."""
    _node_name = "SigmoidBackward0"

    @staticmethod
    def forward(ctx, a):
        out = _sigmoid_array(_fin(a._data))
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return SigmoidBackward.apply(g, out)


class SigmoidBackward(Function):
    """sigmoid_backward(g, out) = g * out * (1 - out)."""
    _node_name = "SigmoidBackwardBackward0"

    @staticmethod
    def forward(ctx, g, out):
        if ctx is not None:
            ctx.save_for_backward(g, out)
        y = out._data
        d = 1.0 - y
        d *= y
        return _times(d, g)

    @staticmethod
    def backward(ctx, gg):
        g, out = ctx.saved_tensors
        ng, no = ctx.needs_input_grad
        return (SigmoidBackward.apply(gg, out) if ng else None,
                gg * g * (1.0 - out * 2.0) if no else None)


class Relu(Function):
    """max(a, 0) (NaN propagates).  d/da = g where out > 0 (relu'(0) = 0)."""
    _node_name = "ReluBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        if x.dtype.kind == "b":
            raise RuntimeError("Boolean inputs not supported for relu")
        out = np.maximum(x, 0)
        return _save_out(ctx, out) if ctx is not None else out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return ThresholdBackward.apply(g, out)


class ThresholdBackward(Function):
    """threshold_backward(g, out, 0): g, zeroed where out <= 0 (relu's gradient)."""
    _node_name = "ThresholdBackwardBackward0"

    @staticmethod
    def forward(ctx, g, out):
        if ctx is not None:
            ctx.save_for_backward(out)
        # torch: where(out <= 0, 0, g); out = max(x, 0) >= 0, so "out != 0" (True for nan)
        return _mask_mul(g._data, out._data != 0)

    @staticmethod
    def backward(ctx, gg):
        (out,) = ctx.saved_tensors
        return (ThresholdBackward.apply(gg, out),
                _zeros_for(gg) if ctx.needs_input_grad[1] else None)


class LeakyRelu(Function):
    """a if a > 0 else negative_slope * a.  d/da = g if a > 0 else g * negative_slope."""
    _node_name = "LeakyReluBackward0"

    @staticmethod
    def forward(ctx, a, negative_slope):
        x = a._data
        _only_float(x, "leaky_relu_cpu")
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = negative_slope
        if 0 <= negative_slope <= 1:
            return np.maximum(x, x * negative_slope)      # nan propagates
        neg = np.minimum(x, 0)
        neg *= negative_slope
        neg += np.maximum(x, 0)
        return neg

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return LeakyReluBackward.apply(g, a, ctx._aux), None


class LeakyReluBackward(Function):
    """leaky_relu_backward(g, a, slope)."""
    _node_name = "LeakyReluBackwardBackward0"

    @staticmethod
    def forward(ctx, g, a, slope):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = slope
        x = a._data
        d = (x > 0).astype(x.dtype)         # torch: x > 0 ? g : g * slope
        d *= 1.0 - slope
        d += slope
        return _times(d, g)

    @staticmethod
    def backward(ctx, gg):
        (a,) = ctx.saved_tensors
        return (LeakyReluBackward.apply(gg, a, ctx._aux),
                _zeros_for(gg) if ctx.needs_input_grad[1] else None, None)


# Note [ELU in C]: for float32 arrays elu/selu and their first derivative are one compiled
# pass each (cgrad._fused elu_f32 / elu_bwd_f32, csrc/cg_fused.c): expm1 and exp of x <= 0 by
# Cody-Waite reduction and a degree-8 Taylor polynomial in float32, within 1 ulp of the
# correctly rounded values (NumPy's float32 expm1, within 2 ulp, runs a scalar loop: ~13 ns
# an element against ~0.7; torch's Sleef expm1f is also a 1-ulp function). The NumPy
# passes below serve other dtypes, and all of them under CGRAD_NO_FUSED_EXT=1.
class Elu(Function):
    """scale * (a if a > 0 else alpha * (exp(a) - 1)) (elu; selu with torch's constants).
    d/da = g * scale if a > 0 else g * scale * alpha * exp(a) (the left branch at 0)."""
    _node_name = "EluBackward0"

    @staticmethod
    def forward(ctx, a, alpha, scale):
        x = a._data
        _only_float(x, "elu_cpu")
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = (alpha, scale)
        if _ext_f32_ok(x):                 # float32: one compiled pass (Note [ELU in C])
            return _fused_ext.elu_f32(x, alpha * scale, scale)
        # max(x, 0) * scale + expm1(min(x, 0)) * alpha * scale: one term is 0 on each side
        neg = np.expm1(np.minimum(x, 0))
        neg *= alpha * scale
        pos = np.maximum(x, 0)
        if scale != 1.0:
            pos *= scale
        neg += pos
        return neg

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        alpha, scale = ctx._aux
        return EluBackward.apply(g, a, alpha, scale), None, None


class EluBackward(Function):
    """elu_backward(g, a, alpha, scale)."""
    _node_name = "EluBackwardBackward0"

    @staticmethod
    def forward(ctx, g, a, alpha, scale):
        x = a._data
        if ctx is not None:
            ctx.save_for_backward(g, a)
            ctx._aux = (alpha, scale)
        gd = g._data
        if (_ext_f32_ok(x) and type(gd) is np.ndarray and gd.dtype == np.float32
                and gd.shape == x.shape):
            return _fused_ext.elu_bwd_f32(x, gd, alpha * scale, scale)
        # torch: x <= 0 ? g * alpha * scale * exp(x) : g * scale
        d = np.exp(np.fmin(x, 0))           # 1 where x > 0 or nan
        d *= alpha * scale
        if alpha != 1.0:
            d += (~(x <= 0)) * (scale - alpha * scale)
        return _times(d, g)

    @staticmethod
    def backward(ctx, gg):
        g, a = ctx.saved_tensors
        alpha, scale = ctx._aux
        ng, na = ctx.needs_input_grad[:2]
        ga = None
        if na:
            # d/da of g * scale * alpha * exp(a) on the left branch; 0 on the right, and at
            # a == 0 itself, as torch's elu_double_backward (mask a < 0, although the first
            # derivative takes the left branch at 0)
            e = ClampScalar.apply(a, None, 0.0).exp() * (alpha * scale)
            ga = mask_where(a._data < 0, gg * g * e)
        return (EluBackward.apply(gg, a, alpha, scale) if ng else None), ga, None, None


def _gelu_tanh_parts(x):
    """(t, u') for the tanh approximation: t = tanh(k (x + c x^3)), u' = k (1 + 3 c x^2)."""
    x2 = x * x
    t = np.tanh(_GELU_K * (x + _GELU_C * x2 * x))
    du = _GELU_K * (1.0 + 3.0 * _GELU_C * x2)
    return t, du


class Gelu(Function):
    """x * Phi(x) (approximate='none', erf) or 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
    (approximate='tanh')."""
    _node_name = "GeluBackward0"

    @staticmethod
    def forward(ctx, a, approximate):
        x = a._data
        _only_float(x, "GeluKernelImpl")
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = approximate
        with _errstate():                   # inf inputs: inf * 0 -> nan, as torch
            if approximate == "tanh":
                t = np.tanh(_GELU_K * (x + _GELU_C * (x * x * x)))
                t += 1.0
                t *= x
                t *= 0.5
                return t
            # Phi(x), kept for the backward: it is the costly part of both passes
            if _ext_f32_ok(x):
                y, cdf = _fused_ext.gelu_f32(x)
            else:
                cdf = _gelu_cdf(x)
                y = x * cdf
            if ctx is not None:
                ctx._aux = (approximate, cdf)
            return y

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        aux = ctx._aux
        if type(aux) is tuple:
            return GeluBackward.apply(g, a, aux[0], aux[1]), None
        return GeluBackward.apply(g, a, aux), None


class GeluBackward(Function):
    """gelu_backward(g, a, approximate)."""
    _node_name = "GeluBackwardBackward0"

    @staticmethod
    def forward(ctx, g, a, approximate, cdf=None):
        """cdf: Phi(a) from Gelu's forward (approximate='none'), or None to compute it."""
        x = a._data
        if ctx is not None:
            ctx.save_for_backward(g, a)
            ctx._aux = approximate
        with _errstate():
            if approximate == "tanh":
                t, du = _gelu_tanh_parts(x)
                d = (1.0 - t * t) * du
                d *= x
                d += 1.0 + t
                d *= 0.5
            else:
                gd = g._data
                if (_ext_f32_ok(x) and type(gd) is np.ndarray and gd.dtype == np.float32
                        and gd.shape == x.shape and (cdf is None or cdf.shape == x.shape)):
                    return _fused_ext.gelu_bwd_f32(x, cdf, gd)
                d = np.exp(x * x * -0.5)
                d *= _INV_SQRT_2PI
                d *= x
                if cdf is None:
                    cdf = _gelu_cdf(x)
                d += cdf
            return _times(d, g)

    @staticmethod
    def backward(ctx, gg):
        g, a = ctx.saved_tensors
        ng, na = ctx.needs_input_grad[:2]
        approximate = ctx._aux
        ga = None
        if na:
            if approximate == "tanh":
                # (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), u'' = 6 k c x
                x2 = a * a
                t = Tanh.apply((a + x2 * a * _GELU_C) * _GELU_K)
                du = (x2 * (3.0 * _GELU_C) + 1.0) * _GELU_K
                d2 = (1.0 - t * t) * (du + a * (a * (6.0 * _GELU_K * _GELU_C)
                                                 - t * du * du * 2.0) * 0.5)
            else:
                # phi(x) (2 - x^2)
                x2 = a * a
                d2 = (x2 * -0.5).exp() * _INV_SQRT_2PI * (2.0 - x2)
            ga = gg * g * d2
        return (GeluBackward.apply(gg, a, approximate) if ng else None), ga, None, None


class Silu(Function):
    """a * sigmoid(a).  d/da = g * s * (1 + a * (1 - s)), s = sigmoid(a)."""
    _node_name = "SiluBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        _only_float(x, "silu_cpu")
        if ctx is not None:
            ctx.save_for_backward(a)
        with _errstate():                   # -inf * 0 -> nan, as torch
            return x * _sigmoid_raw(x)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return SiluBackward.apply(g, a)


class SiluBackward(Function):
    """silu_backward(g, a)."""
    _node_name = "SiluBackwardBackward0"

    @staticmethod
    def forward(ctx, g, a):
        x = a._data
        if ctx is not None:
            ctx.save_for_backward(g, a)
        with _errstate():
            s = _sigmoid_raw(x)
            d = 1.0 - s
            d *= x
            d += 1.0
            d *= s
            return _times(d, g)

    @staticmethod
    def backward(ctx, gg):
        g, a = ctx.saved_tensors
        ng, na = ctx.needs_input_grad
        ga = None
        if na:
            s = Sigmoid.apply(a)
            ga = gg * g * (s * (1.0 - s) * (2.0 + a * (1.0 - s * 2.0)))
        return (SiluBackward.apply(gg, a) if ng else None), ga


class Softplus(Function):
    """log(1 + exp(beta a)) / beta, or a where beta * a > threshold.
    d/da = g * sigmoid(beta a), or g above the threshold."""
    _node_name = "SoftplusBackward0"

    @staticmethod
    def forward(ctx, a, beta, threshold):
        x = a._data
        _only_float(x, "softplus_cpu")
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = (beta, threshold)
        z = x * beta if beta != 1 else x
        # log1p(exp(z)) = max(z, 0) + log1p(exp(-|z|)): no overflow, no warnings
        out = np.empty_like(z)              # an array even for 0-d input
        np.abs(z, out=out)
        np.negative(out, out=out)
        np.exp(out, out=out)
        np.log1p(out, out=out)
        out += np.maximum(z, 0)
        if beta != 1:
            out /= beta
        above = z > threshold
        if above.any():
            np.copyto(out, x, where=above)
        return out

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        beta, threshold = ctx._aux
        return SoftplusBackward.apply(g, a, beta, threshold), None, None


class SoftplusBackward(Function):
    """softplus_backward(g, a, beta, threshold)."""
    _node_name = "SoftplusBackwardBackward0"

    @staticmethod
    def forward(ctx, g, a, beta, threshold):
        x = a._data
        if ctx is not None:
            ctx.save_for_backward(g, a)
            ctx._aux = (beta, threshold)
        z = x * beta if beta != 1 else x
        # sigmoid(z) <= 1, so max(sigmoid(z), z > threshold) is 1 above the threshold
        return _times(np.maximum(_sigmoid_array(z), z > threshold), g)

    @staticmethod
    def backward(ctx, gg):
        g, a = ctx.saved_tensors
        beta, threshold = ctx._aux
        ng, na = ctx.needs_input_grad[:2]
        ga = None
        if na:
            s = Sigmoid.apply(a * beta if beta != 1 else a)
            d2 = s * (1.0 - s) * beta if beta != 1 else s * (1.0 - s)
            z = a._data * beta if beta != 1 else a._data
            ga = mask_fill(gg * g * d2, z > threshold)
        return ((SoftplusBackward.apply(gg, a, beta, threshold) if ng else None), ga,
                None, None)


# ----------------------------------------------------------------------------------------
# functional forms (torch's signatures); nn.functional reuses these
# ----------------------------------------------------------------------------------------
def _inplace(input, out):
    """torch's inplace=True: write the result into input. Under autograd, in-place history
    is not supported: a leaf that requires grad raises as torch; a non-leaf gets the
    out-of-place result (the values are the same; input itself is left unchanged)."""
    if input.requires_grad and is_grad_enabled():
        if input.is_leaf:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation.")
        return out
    from cgrad.ops import inplace as _inplace
    _inplace.check_overlap(input)           # Note [Expanded memory] in ops/inplace.py
    np.copyto(input._data, out._data, casting="same_kind")
    input._bump_version()
    return input


def relu(input, inplace=False):
    """max(input, 0). relu'(0) = 0."""
    out = Relu.apply(input)
    return _inplace(input, out) if inplace else out


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """input where input > 0, else negative_slope * input."""
    out = LeakyRelu.apply(input, negative_slope)
    return _inplace(input, out) if inplace else out


def elu(input, alpha=1.0, inplace=False):
    """input where input > 0, else alpha * (exp(input) - 1)."""
    out = Elu.apply(input, alpha, 1.0)
    return _inplace(input, out) if inplace else out


def selu(input, inplace=False):
    """scale * elu(input, alpha) with torch's fixed alpha and scale."""
    out = Elu.apply(input, SELU_ALPHA, SELU_SCALE)
    return _inplace(input, out) if inplace else out


def gelu(input, approximate="none"):
    """input * Phi(input); approximate='tanh' uses torch's tanh formula."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return Gelu.apply(input, approximate)


def silu(input, inplace=False):
    """input * sigmoid(input)."""
    out = Silu.apply(input)
    return _inplace(input, out) if inplace else out


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * input)) / beta; input itself where beta * input > threshold."""
    return Softplus.apply(input, beta, threshold)


def sigmoid(input):
    """1 / (1 + exp(-input)), without overflow."""
    return Sigmoid.apply(input)


def tanh(input):
    """Hyperbolic tangent."""
    return Tanh.apply(input)


def abs(input):
    """|input|; abs'(0) = 0."""
    return Abs.apply(input)


def sign(input):
    """-1, 0 or 1 (0 for nan); zero gradient."""
    return Sign.apply(input)


def sgn(input):
    """sign for real tensors (SgnBackward0)."""
    return Sgn.apply(input)


def sqrt(input):
    return Sqrt.apply(input)


def rsqrt(input):
    return Rsqrt.apply(input)


def reciprocal(input):
    return Reciprocal.apply(input)


def square(input):
    """input ** 2 (PowBackward0, as torch); booleans give int64."""
    if input._data.dtype.kind == "b":
        input = _wrap(input._data.astype(np.int64))
    return PowScalar.apply(input, 2)


def expm1(input):
    return Expm1.apply(input)


def exp2(input):
    return Exp2.apply(input)


def log1p(input):
    return Log1p.apply(input)


def log2(input):
    return Log2.apply(input)


def log10(input):
    return Log10.apply(input)


def sin(input):
    return Sin.apply(input)


def cos(input):
    return Cos.apply(input)


def tan(input):
    return Tan.apply(input)


def floor(input):
    return Floor.apply(input)


def ceil(input):
    return Ceil.apply(input)


def round(input, *, decimals=0):
    """Round half to even; with decimals, at that many decimal places."""
    if type(decimals) is not int:
        from cgrad._checks import check_int
        decimals = check_int(decimals, "round", "decimals", 2)
    if decimals == 0:
        return Round.apply(input)
    return RoundDecimals.apply(input, decimals)


def trunc(input):
    return Trunc.apply(input)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan -> nan, +inf -> posinf (default: the dtype's max), -inf -> neginf (its min)."""
    for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not isinstance(v, (int, float, np.number)):
            from cgrad._checks import type_name
            raise TypeError(f"nan_to_num(): argument '{name}' must be float, not "
                            f"{type_name(v)}")
    return NanToNum.apply(input, nan, posinf, neginf)


def negative(input):
    """-input."""
    return -input


def _bool_fn(npfn, name):
    def fn(input):
        return _wrap(npfn(input._data))
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (a boolean tensor, no gradient)."
    return fn


isnan = _bool_fn(np.isnan, "isnan")
isinf = _bool_fn(np.isinf, "isinf")
isfinite = _bool_fn(np.isfinite, "isfinite")
isposinf = _bool_fn(np.isposinf, "isposinf")
isneginf = _bool_fn(np.isneginf, "isneginf")


def _inplace_method(fn, saves_self=True, name=None):
    """Tensor.<op>_: recorded and rebased when autograd needs it (cgrad/ops/inplace.py);
    `name`: the op's name when it is not fn's."""
    from cgrad.ops import inplace as _inplace

    def method(self, *args, **kwargs):
        _inplace.check_partial_overlap(self, *args, *kwargs.values())
        if _inplace.needs_record(self, *args, *kwargs.values()):
            return _inplace.record(self, lambda src: fn(src, *args, **kwargs), saves_self)
        _inplace.check_overlap(self)
        out = fn(self, *args, **kwargs)
        _inplace.check_cast(self, out._data.dtype)
        if out._data.shape != self._data.shape:
            raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the "
                               f"broadcast shape {list(out._data.shape)}")
        np.copyto(self._data, out._data, casting="unsafe")
        self._bump_version()
        return self
    method.__name__ = (name or fn.__name__) + "_"
    return method


FUNCTIONS: dict = {
    "abs": abs, "absolute": abs, "sign": sign, "sgn": sgn, "sqrt": sqrt, "rsqrt": rsqrt,
    "reciprocal": reciprocal, "square": square, "expm1": expm1, "exp2": exp2,
    "log1p": log1p, "log2": log2, "log10": log10, "sin": sin, "cos": cos, "tan": tan,
    "tanh": tanh, "sigmoid": sigmoid, "relu": relu, "leaky_relu": leaky_relu, "elu": elu,
    "selu": selu, "gelu": gelu, "silu": silu, "softplus": softplus,
    "floor": floor, "ceil": ceil, "round": round, "trunc": trunc, "fix": trunc,
    "nan_to_num": nan_to_num, "negative": negative,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "isposinf": isposinf,
    "isneginf": isneginf,
}

TENSOR_METHODS: dict = {
    "abs": abs, "absolute": abs, "__abs__": abs, "sign": sign, "sgn": sgn, "sqrt": sqrt,
    "rsqrt": rsqrt, "reciprocal": reciprocal, "square": square, "expm1": expm1,
    "exp2": exp2, "log1p": log1p, "log2": log2, "log10": log10, "sin": sin, "cos": cos,
    "tan": tan, "tanh": tanh, "sigmoid": sigmoid, "relu": relu,
    "floor": floor, "ceil": ceil, "round": round, "trunc": trunc, "fix": trunc,
    "nan_to_num": nan_to_num, "negative": negative,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "isposinf": isposinf,
    "isneginf": isneginf,
}

for _name in ("abs", "sign", "sqrt", "rsqrt", "reciprocal", "square", "expm1", "exp2", "log1p",
              "log2", "log10", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "floor", "ceil",
              "round", "trunc", "nan_to_num", "negative"):
    TENSOR_METHODS[_name + "_"] = _inplace_method(FUNCTIONS[_name])
for _name in ("clamp", "clip", "clamp_min", "clamp_max"):
    TENSOR_METHODS[_name + "_"] = _inplace_method(_comparison.FUNCTIONS[_name])
del _name
