"""Elementwise math beyond cgrad/ops/pointwise.py (see cgrad/ops/__init__.py for the
conventions): inverse trigonometric and hyperbolic functions (acos, asin, atan, sinh, cosh,
asinh, acosh, atanh, with NumPy's arc* aliases), the error function family (erf, erfc,
erfinv), logit, sinc, frac, deg2rad/rad2deg, and the binary ones: atan2, hypot, logaddexp,
logaddexp2, xlogy, copysign, heaviside, float_power and lerp.

Dtypes are torch's: integer and boolean inputs of the floating-point functions compute in the
default float dtype (frac, hypot, logaddexp and lerp refuse them with torch's kernel error,
heaviside keeps the common dtype and wants equal dtypes, float_power computes in float64);
binary ops promote and broadcast as torch's. Values torch produces silently (nan, inf) are
produced without NumPy RuntimeWarnings.

Derivatives are torch's formulas (derivatives.yaml), written with cgrad ops so that any order
works: xlogy's gradient is 0 at x == 0 where y <= 0, copysign's is 0 at 0 (and zeros for
`other`), sinc's is 0 at 0, logit's is nan outside [0, 1] (0 outside [eps, 1 - eps] with eps),
heaviside has none (its backward raises, as torch's), and the in-place acosh_, asinh_ and
atanh_ record a node whose backward raises NotImplementedError, as torch's.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad import _dtype
from cgrad._C import TensorBase, _raise_if_broadcast, _wrap, is_grad_enabled
from cgrad.autograd.function import Function
from cgrad.ops.arithmetic import PowScalar, RPow, _NotDifferentiable, _zeros_for
from cgrad.ops.comparison import mask_fill, mask_where
from cgrad.ops.linalg import _c10, _infer_size
from cgrad.ops.pointwise import Rsqrt, _fin, _inplace_method, _keep_dtype
from cgrad.ops.promotion import (_Number, _cast, _errstate, _to_tensor, result_type,
                                 torch_type_name)

_PI = math.pi
_PI_180 = math.pi / 180.0
_180_PI = 180.0 / math.pi
_TWO_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)


def _float_dt(*operands):
    """torch's result dtype of a floating-point function: integers and booleans give the
    default float dtype."""
    dt = result_type(*operands)
    return dt if dt.kind in "fc" else _dtype.get_default_dtype()


def _tensor(x, fn, pos, name):
    """torch's check of an argument that must be a Tensor (arrays are wrapped)."""
    x = _to_tensor(x) if isinstance(x, np.ndarray) else x
    if not isinstance(x, TensorBase):
        from cgrad._checks import type_name
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type_name(x)}")
    return x


def _number(x):
    return x.item() if isinstance(x, np.generic) else x


def _broadcast(fn, *arrays):
    """fn(*arrays) with NumPy's broadcasting ValueError turned into torch's RuntimeError."""
    try:
        with _errstate():
            return fn(*arrays)
    except ValueError as e:
        _raise_if_broadcast(e)
        raise


def _kernel_error(kernel, dt):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{torch_type_name(dt)}'")


# ----------------------------------------------------------------------------------------
# unary functions: one node that saves its input, derivative g * f'(a) in cgrad ops
# ----------------------------------------------------------------------------------------
def _erf(x):
    from scipy.special import erf         # lazy: scipy.special costs ~0.2 s to import
    return _keep_dtype(erf(x), x)


def _erfc(x):
    from scipy.special import erfc
    return _keep_dtype(erfc(x), x)


def _erfinv(x):
    from scipy.special import erfinv
    return _keep_dtype(erfinv(x), x)


def _unary(cls_name, node, compute, derivative, doc):
    """A unary op that saves its input: forward compute(x) on the (float) array, backward
    derivative(a, g) with cgrad ops."""
    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        with _errstate():
            return compute(_fin(a._data))

    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with _errstate():
            return derivative(a, g)

    return type(cls_name, (Function,), {
        "__doc__": doc, "_node_name": node,
        "forward": staticmethod(forward), "backward": staticmethod(backward)})


Acos = _unary("Acos", "AcosBackward0", np.arccos,
              lambda a, g: g * -Rsqrt.apply(-a * a + 1.0),
              "acos(a).  d/da = -g / sqrt(1 - a**2).")
Asin = _unary("Asin", "AsinBackward0", np.arcsin,
              lambda a, g: g * Rsqrt.apply(-a * a + 1.0),
              "asin(a).  d/da = g / sqrt(1 - a**2).")
Atan = _unary("Atan", "AtanBackward0", np.arctan,
              lambda a, g: g / (a * a + 1.0),
              "atan(a).  d/da = g / (1 + a**2).")
Sinh = _unary("Sinh", "SinhBackward0", np.sinh,
              lambda a, g: g * Cosh.apply(a),
              "sinh(a).  d/da = g * cosh(a).")
Cosh = _unary("Cosh", "CoshBackward0", np.cosh,
              lambda a, g: g * Sinh.apply(a),
              "cosh(a).  d/da = g * sinh(a).")
Asinh = _unary("Asinh", "AsinhBackward0", np.arcsinh,
               lambda a, g: g * Rsqrt.apply(PowScalar.apply(a, 2) + 1.0),
               "asinh(a).  d/da = g / sqrt(a**2 + 1).")
Acosh = _unary("Acosh", "AcoshBackward0", np.arccosh,
               lambda a, g: g * Rsqrt.apply(a * a - 1.0),
               "acosh(a).  d/da = g / sqrt(a**2 - 1).")
Atanh = _unary("Atanh", "AtanhBackward0", np.arctanh,
               lambda a, g: g / (1.0 - PowScalar.apply(a, 2)),
               "atanh(a).  d/da = g / (1 - a**2).")
Erf = _unary("Erf", "ErfBackward0", _erf,
             lambda a, g: (-PowScalar.apply(a, 2)).exp() * _TWO_SQRT_PI * g,
             "erf(a).  d/da = 2 / sqrt(pi) * exp(-a**2) * g.")
Erfc = _unary("Erfc", "ErfcBackward0", _erfc,
              lambda a, g: (-PowScalar.apply(a, 2)).exp() * -_TWO_SQRT_PI * g,
              "erfc(a).  d/da = -2 / sqrt(pi) * exp(-a**2) * g.")
Erfinv = _unary("Erfinv", "ErfinvBackward0", _erfinv,
                lambda a, g: PowScalar.apply(Erfinv.apply(a), 2).exp() * _HALF_SQRT_PI * g,
                "erfinv(a).  d/da = sqrt(pi) / 2 * exp(erfinv(a)**2) * g.")


def _sinc(x):
    y = x * _PI
    out = np.asarray(np.sin(y) / y)    # 0 / 0 = nan at 0: replaced by 1, as torch
    out[x == 0] = 1
    return out


def _sinc_derivative(a, g):
    """torch's sinc_backward: g * (pi a cos(pi a) - sin(pi a)) / (pi a**2), 0 at 0."""
    api = a * _PI
    d = g * (api * api.cos() - api.sin()) / (a * a * _PI)
    return mask_where(a._data != 0, d)


Sinc = _unary("Sinc", "SincBackward0", _sinc, _sinc_derivative,
              "sin(pi a) / (pi a), 1 at 0.  d/da: torch's sinc_backward (0 at 0).")


class _Inplace(Function):
    """The node torch records for acosh_/asinh_/atanh_ (``<Name>Backward1``), whose backward
    is not implemented: the in-place op itself runs (ctx._aux: the op's name)."""
    _node_name = "NotImplemented"

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError(
            f"the derivative for 'inplace version of {ctx._aux}' is not implemented.")


def _inplace_node(base, name):
    def forward(ctx, a):
        if ctx is not None:
            ctx._aux = name
        return base.forward(None, a)
    return type(base.__name__ + "Inplace", (_Inplace,), {
        "__doc__": f"{name}_ (in place): backward not implemented, as torch.",
        "_node_name": base._node_name[:-1] + "1", "forward": staticmethod(forward)})


AcoshInplace = _inplace_node(Acosh, "acosh")
AsinhInplace = _inplace_node(Asinh, "asinh")
AtanhInplace = _inplace_node(Atanh, "atanh")


class Frac(Function):
    """a - trunc(a) (floating-point inputs only).  d/da = g."""
    _node_name = "FracBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        if x.dtype.kind not in "fc":
            raise _kernel_error("frac_cpu", x.dtype)
        with _errstate():
            return x - np.trunc(x)

    @staticmethod
    def backward(ctx, g):
        return g


class Deg2Rad(Function):
    """a * pi / 180.  d/da = g * pi / 180."""
    _node_name = "Deg2RadBackward0"
    _factor = _PI_180

    @classmethod
    def _forward(cls, a):
        x = _fin(a._data)
        with _errstate():
            return x * x.dtype.type(cls._factor)

    @staticmethod
    def forward(ctx, a):
        return Deg2Rad._forward(a)

    @staticmethod
    def backward(ctx, g):
        return g * _PI_180


class Rad2Deg(Deg2Rad):
    """a * 180 / pi.  d/da = g * 180 / pi."""
    _node_name = "Rad2DegBackward0"
    _factor = _180_PI

    @staticmethod
    def forward(ctx, a):
        return Rad2Deg._forward(a)

    @staticmethod
    def backward(ctx, g):
        return g * _180_PI


class Logit(Function):
    """log(a / (1 - a)), a clamped to [eps, 1 - eps] when eps is given.
    d/da = g / (a (1 - a)) in [0, 1] (in [eps, 1 - eps] with eps), else nan (0 with eps)."""
    _node_name = "LogitBackward0"

    @staticmethod
    def forward(ctx, a, eps):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = eps
        x = _fin(a._data)
        with _errstate():
            if eps is not None:
                x = np.clip(x, eps, 1.0 - eps)       # nan stays nan
            return np.log(x / (1.0 - x))

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        eps = ctx._aux
        x = a._data
        if not is_grad_enabled():
            return _wrap(_logit_backward_kernel(g._data, x, eps)), None
        # torch's infinitely_differentiable_logit_backward (under create_graph=True)
        with _errstate():
            d = g / (a * (1.0 - a))
            if eps is None:
                return mask_where((x >= 0.0) & (x <= 1.0), d, math.nan), None
            return mask_where((x >= eps) & (x <= 1.0 - eps), d), None


def _logit_backward_kernel(dy, x, eps):
    """torch's logit_backward kernel (plain backward): dy * inf at 0 and 1, nan outside
    [0, 1] (0 outside [eps, 1 - eps] with eps)."""
    with _errstate():
        out = dy / (x * (1.0 - x))
        edge = (x == 0) | (x == 1)
        if edge.any():
            out = np.where(edge, dy * math.inf, out)
        if eps is None:
            outside = (x < 0) | (x > 1)
            fill = math.nan
        else:
            outside = (x < eps) | (x > 1.0 - eps)
            fill = 0.0
        if outside.any():
            out = np.where(outside, fill, out)
    return np.asarray(out, dtype=dy.dtype)


# ----------------------------------------------------------------------------------------
# binary functions
# ----------------------------------------------------------------------------------------
def _binary_float(x, y, fn, kernel=None):
    """fn on x and y cast to their floating result dtype (a kernel error for integers when
    `kernel` is given, as torch's hypot/logaddexp)."""
    dt = result_type(x, y)
    if dt.kind not in "fc":
        if kernel is not None:
            raise _kernel_error(kernel, dt)
        dt = _dtype.get_default_dtype()
    out = _broadcast(fn, _cast(x, dt), _cast(y, dt))
    return np.asarray(out, dtype=dt) if np.ndim(out) == 0 or out.dtype != dt else out


class Atan2(Function):
    """atan2(a, b).  d/da = g * b / (a**2 + b**2), d/db = -g * a / (a**2 + b**2)."""
    _node_name = "Atan2Backward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return _binary_float(a._data, b._data, np.arctan2)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            sq = a * a + b * b
            # 0 at (0, 0), where 1 / (a**2 + b**2) is infinite, as torch
            recip = mask_fill(sq.reciprocal(), sq._data == 0)
            return (g * b * recip if na else None), (g * -a * recip if nb else None)


class Hypot(Function):
    """sqrt(a**2 + b**2).  d/da = g * a / out, d/db = g * b / out."""
    _node_name = "HypotBackward0"

    @staticmethod
    def forward(ctx, a, b):
        out = _binary_float(a._data, b._data, np.hypot, "hypot_cpu")
        if ctx is not None:              # as torch: each input only for its own gradient
            na, nb = ctx.needs_input_grad
            out = _wrap(out)
            ctx.save_for_backward(a if na else None, b if nb else None, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            return (g * a / out if na else None), (g * b / out if nb else None)


class Logaddexp(Function):
    """log(exp(a) + exp(b)).  d/da = g / (1 + exp(b - a)), d/db = g / (1 + exp(a - b))."""
    _node_name = "LogaddexpBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return _binary_float(a._data, b._data, np.logaddexp, "logaddexp_cpu")

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            return ((g / ((b - a).exp() + 1.0) if na else None),
                    (g / ((a - b).exp() + 1.0) if nb else None))


class Logaddexp2(Function):
    """log2(2**a + 2**b).  d/da = g / (1 + 2**(b - a)), d/db = g / (1 + 2**(a - b))."""
    _node_name = "Logaddexp2Backward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return _binary_float(a._data, b._data, np.logaddexp2, "logaddexp2_cpu")

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            return ((g / (RPow.apply(b - a, 2.0) + 1.0) if na else None),
                    (g / (RPow.apply(a - b, 2.0) + 1.0) if nb else None))


def _xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is nan), as torch."""
    out = x * np.log(y)
    zero = (x == 0) & ~np.isnan(y)
    if np.any(zero):
        out = np.where(zero, 0, out).astype(out.dtype, copy=False)
    return out


class Xlogy(Function):
    """xlogy(a, b) for tensors.  d/da = xlogy(g, b), 0 where a == 0 and b <= 0;
    d/db = g * a / b."""
    _node_name = "XlogyBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx.save_for_backward(a, b)
        return _binary_float(a._data, b._data, _xlogy)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = gb = None
        with _errstate():
            if na:
                ga = Xlogy.apply(g, b)
                mask = (a._data == 0) & (b._data <= 0)
                ga = mask_fill(ga, np.broadcast_to(mask, ga._data.shape))
            if nb:
                gb = g * a / b
        return ga, gb


class XlogyScalarSelf(Function):
    """xlogy(s, b) for a Python number s (called as (b, s)).  d/db = g * s / b."""
    _node_name = "XlogyBackward1"

    @staticmethod
    def forward(ctx, b, s):
        if ctx is not None:
            ctx.save_for_backward(b)
            ctx._aux = s
        return _binary_float(s, b._data, _xlogy)

    @staticmethod
    def backward(ctx, g):
        (b,) = ctx.saved_tensors
        with _errstate():
            return g * ctx._aux / b, None


class XlogyScalarOther(Function):
    """xlogy(a, s) for a Python number s.  d/da = xlogy(g, s) (0 where a == 0 if s <= 0)."""
    _node_name = "XlogyBackward2"

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = s
        return _binary_float(a._data, s, _xlogy)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        s = ctx._aux
        with _errstate():
            ga = XlogyScalarOther.apply(g, s)
            if not s > 0:
                ga = mask_fill(ga, a._data == 0)
        return ga, None


class Copysign(Function):
    """|a| with the sign of b.  d/da = g * out / a (0 where a == 0); d/db = 0."""
    _node_name = "CopysignBackward0"

    @staticmethod
    def forward(ctx, a, b):
        out = _binary_float(a._data, b._data if isinstance(b, TensorBase) else b,
                            np.copysign)
        if ctx is not None:         # as torch, also when only other needs a gradient
            out = _wrap(out)
            ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        ga = None
        if ctx.needs_input_grad[0]:
            a, out = ctx.saved_tensors
            with _errstate():
                ratio = mask_fill(out / a, np.broadcast_to(a._data == 0, out._data.shape))
            ga = g * ratio
        return ga, (_zeros_for(g) if ctx.needs_input_grad[1] else None)


class CopysignScalar(Copysign):
    """copysign(a, s) for a Python number s."""
    _node_name = "CopysignBackward1"


class Heaviside(_NotDifferentiable):
    """heaviside(a, values): 0 where a < 0, values where a == 0, 1 where a > 0 (no
    derivative, as torch)."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, a, b):
        x, y = a._data, b._data
        if x.dtype != y.dtype:
            raise RuntimeError(
                "heaviside is not yet implemented for tensors with different dtypes.")
        if ctx is not None:
            ctx._aux = "heaviside"
        out = _broadcast(np.where, x == 0, y, x > 0)
        return np.asarray(out).astype(x.dtype, copy=False)


def _lerp(x, y, w):
    """torch's lerp: x + w (y - x) for |w| < 0.5, else y - (y - x)(1 - w)."""
    d = y - x
    if isinstance(w, np.ndarray):
        return np.where(np.abs(w) < 0.5, x + w * d, y - d * (1 - w))
    return x + w * d if abs(w) < 0.5 else y - d * (1 - w)


def _lerp_checks(x, y, w, kernel):
    shape = _infer_size(x.shape, y.shape)             # torch's order of the size checks
    if w is not None:
        _infer_size(shape, w.shape)
    if y.dtype != x.dtype:
        raise RuntimeError(f"expected dtype {_c10(x.dtype)} for `end` but "
                           f"got dtype {_c10(y.dtype)}")
    if w is not None and w.ndim and w.dtype != x.dtype:
        raise RuntimeError(f"expected dtype {_c10(x.dtype)} for `weight` "
                           f"but got dtype {_c10(w.dtype)}")
    if x.dtype.kind not in "fc":
        raise _kernel_error(kernel, x.dtype)


class Lerp(Function):
    """lerp(a, b, w) = a + w (b - a) for a number w.  d/da = g (1 - w), d/db = g w."""
    _node_name = "LerpBackward0"

    @staticmethod
    def forward(ctx, a, b, w):
        x, y = a._data, b._data
        _lerp_checks(x, y, None, "lerp_kernel_scalar")
        if ctx is not None:
            ctx._aux = w
        out = _broadcast(_lerp, x, y, x.dtype.type(w))
        return np.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        w = ctx._aux
        na, nb, _ = ctx.needs_input_grad
        return (g * (1.0 - w) if na else None), (g * w if nb else None), None


class LerpTensor(Function):
    """lerp(a, b, w) for a tensor w.  d/da = g (1 - w), d/db = g w, d/dw = g (b - a)."""
    _node_name = "LerpBackward1"

    @staticmethod
    def forward(ctx, a, b, w):
        x, y, wd = a._data, b._data, w._data
        _lerp_checks(x, y, wd, "lerp_kernel_tensor")
        if ctx is not None:
            na, nb, nw = ctx.needs_input_grad
            ctx.save_for_backward(a if nw else None, b if nw else None,
                                  w if na or nb else None)
        out = _broadcast(_lerp, x, y, wd.astype(x.dtype, copy=False))
        return np.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        a, b, w = ctx.saved_tensors
        na, nb, nw = ctx.needs_input_grad
        return ((g * (1.0 - w) if na else None), (g * w if nb else None),
                (g * (b - a) if nw else None))


# ----------------------------------------------------------------------------------------
# functional forms (torch's signatures)
# ----------------------------------------------------------------------------------------
def _fn(cls, name, doc):
    def fn(input):
        return cls.apply(input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


acos = _fn(Acos, "acos", "Computes the inverse cosine of each element of input.")
asin = _fn(Asin, "asin", "Computes the inverse sine of each element of input.")
atan = _fn(Atan, "atan", "Computes the inverse tangent of each element of input.")
sinh = _fn(Sinh, "sinh", "Computes the hyperbolic sine of each element of input.")
cosh = _fn(Cosh, "cosh", "Computes the hyperbolic cosine of each element of input.")
asinh = _fn(Asinh, "asinh", "Computes the inverse hyperbolic sine of each element of input.")
acosh = _fn(Acosh, "acosh",
            "Computes the inverse hyperbolic cosine of each element of input.")
atanh = _fn(Atanh, "atanh",
            "Computes the inverse hyperbolic tangent of each element of input.")
erf = _fn(Erf, "erf", "Computes the error function of each element of input.")
erfc = _fn(Erfc, "erfc",
           "Computes the complementary error function 1 - erf(input) of each element.")
erfinv = _fn(Erfinv, "erfinv",
             "Computes the inverse error function of each element of input (in (-1, 1)).")
sinc = _fn(Sinc, "sinc",
           "Computes the normalized sinc function sin(pi x) / (pi x) of each element (1 at "
           "0).")
frac = _fn(Frac, "frac", "Computes the fractional portion input - trunc(input) of each "
           "element.")
deg2rad = _fn(Deg2Rad, "deg2rad", "Converts each element of input from degrees to radians.")
rad2deg = _fn(Rad2Deg, "rad2deg", "Converts each element of input from radians to degrees.")


def logit(input, eps=None):
    """Computes the logit log(p / (1 - p)) of each element of input, clamped to [eps, 1 -
    eps] first when eps is given."""
    if eps is not None and (isinstance(eps, (bool, np.bool_))
                            or not isinstance(eps, (int, float, np.number))):
        from cgrad._checks import type_name
        raise TypeError(f"logit(): argument 'eps' must be float, not {type_name(eps)}")
    return Logit.apply(input, None if eps is None else float(eps))


def _tensors(fn, input, other, name="other"):
    return _tensor(input, fn, 1, "input"), _tensor(other, fn, 2, name)


def atan2(input, other):
    """Computes the elementwise arctangent of input / other, with the quadrant of the
    point (other, input)."""
    return Atan2.apply(*_tensors("atan2", input, other))


def arctan2(input, other):
    """Alias for :func:`cgrad.atan2`."""
    return Atan2.apply(*_tensors("arctan2", input, other))


def hypot(input, other):
    """Computes the hypotenuse sqrt(input**2 + other**2) of the right triangles with legs
    input and other."""
    return Hypot.apply(*_tensors("hypot", input, other))


def logaddexp(input, other):
    """Computes log(exp(input) + exp(other)) without overflow."""
    return Logaddexp.apply(*_tensors("logaddexp", input, other))


def logaddexp2(input, other):
    """Computes log2(2**input + 2**other) without overflow."""
    return Logaddexp2.apply(*_tensors("logaddexp2", input, other))


def _invalid(fn, args, overloads):
    """torch's TypeError when no overload of fn takes these arguments."""
    from cgrad._checks import type_name
    got = ", ".join(type_name(a) for a in args)
    lines = "".join(f" * ({o}, *, Tensor out = None)\n" for o in overloads)
    return TypeError(f"{fn}() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{lines}")


def _operand(x):
    """A Tensor (arrays and lists converted), a Python number, or None for anything else."""
    x = _to_tensor(x)
    if isinstance(x, TensorBase):
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, _Number):
        return _number(x)
    return None


_XLOGY = ("Tensor input, Tensor other", "Number self, Tensor other", "Tensor input, Number other")
_POW = ("Tensor input, Tensor exponent", "Number self, Tensor exponent",
        "Tensor input, Number exponent")
_COPYSIGN = ("Tensor input, Tensor other", "Tensor input, Number other")
_LERP = ("Tensor input, Tensor end, Tensor weight", "Tensor input, Tensor end, Number weight")


def _scalar_or_tensor(fn, input, other, overloads):
    """(x, y) for the overloads (Tensor, Tensor), (Number, Tensor), (Tensor, Number)."""
    x, y = _operand(input), _operand(other)
    if x is None or y is None or not (isinstance(x, TensorBase) or isinstance(y, TensorBase)):
        raise _invalid(fn, (input, other), overloads)
    return x, y


def xlogy(input, other):
    """Computes input * log(other), with 0 where input is 0 (unless other is nan)."""
    x, y = _scalar_or_tensor("xlogy", input, other, _XLOGY)
    if isinstance(x, TensorBase):
        if isinstance(y, TensorBase):
            return Xlogy.apply(x, y)
        return XlogyScalarOther.apply(x, y)
    return XlogyScalarSelf.apply(y, x)


def copysign(input, other):
    """Returns |input| with the sign of other (elementwise; other a Tensor or a Number)."""
    x, y = _operand(input), _operand(other)
    if not isinstance(x, TensorBase) or y is None:
        raise _invalid("copysign", (input, other), _COPYSIGN)
    if isinstance(y, TensorBase):
        return Copysign.apply(x, y)
    return CopysignScalar.apply(x, y)


def heaviside(input, values):
    """Computes the Heaviside step function: 0 where input < 0, values where input == 0, 1
    where input > 0 (not differentiable)."""
    return Heaviside.apply(*_tensors("heaviside", input, values, "values"))


def _to64(x):
    return x if x._data.dtype == np.float64 else x.to(np.float64)


def float_power(input, exponent):
    """Raises input to the power exponent, elementwise, in double precision (float64)."""
    x, e = _scalar_or_tensor("float_power", input, exponent, _POW)
    if isinstance(x, TensorBase):
        if isinstance(e, TensorBase):
            return _to64(x) ** _to64(e)
        return PowScalar.apply(_to64(x), float(e))
    return RPow.apply(_to64(e), float(x))


def lerp(input, end, weight):
    """Linear interpolation input + weight * (end - input) (weight a Number or a Tensor)."""
    x, y, w = _operand(input), _operand(end), _operand(weight)
    if not isinstance(x, TensorBase) or not isinstance(y, TensorBase) or w is None:
        raise _invalid("lerp", (input, end, weight), _LERP)
    if isinstance(w, TensorBase):
        return LerpTensor.apply(x, y, w)
    return Lerp.apply(x, y, w)


# ----------------------------------------------------------------------------------------
# in-place forms
# ----------------------------------------------------------------------------------------
def _not_implemented_inplace(name, cls):
    """acosh_/asinh_/atanh_: the node torch records raises in backward."""
    return _inplace_method(lambda input: cls.apply(input), saves_self=False, name=name)


def _float_power_(self, exponent):
    """float_power_: self must be float64 (torch's check), then pow_."""
    dt = self._data.dtype
    if dt != np.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {torch_type_name(dt)} "
                           "but the operation's result requires dtype Double")
    e = _operand(exponent)
    if e is None:
        raise _invalid("float_power_", (self, exponent), _POW[::2])
    return self.pow_(_to64(e) if isinstance(e, TensorBase) else float(e))


FUNCTIONS: dict = {
    "acos": acos, "arccos": acos, "asin": asin, "arcsin": asin, "atan": atan,
    "arctan": atan, "sinh": sinh, "cosh": cosh, "asinh": asinh, "arcsinh": asinh,
    "acosh": acosh, "arccosh": acosh, "atanh": atanh, "arctanh": atanh,
    "erf": erf, "erfc": erfc, "erfinv": erfinv, "logit": logit, "sinc": sinc, "frac": frac,
    "deg2rad": deg2rad, "rad2deg": rad2deg,
    "atan2": atan2, "arctan2": arctan2, "hypot": hypot, "logaddexp": logaddexp,
    "logaddexp2": logaddexp2, "xlogy": xlogy, "copysign": copysign, "heaviside": heaviside,
    "float_power": float_power, "lerp": lerp,
}

TENSOR_METHODS: dict = dict(FUNCTIONS)
TENSOR_METHODS["float_power_"] = _float_power_

for _name in ("acos", "arccos", "asin", "arcsin", "atan", "arctan", "sinh", "cosh", "erf",
              "erfc", "erfinv", "logit", "sinc", "atan2", "arctan2", "hypot", "xlogy",
              "copysign", "heaviside", "lerp"):
    TENSOR_METHODS[_name + "_"] = _inplace_method(FUNCTIONS[_name], name=_name)
for _name in ("frac", "deg2rad", "rad2deg"):        # their backward does not read self
    TENSOR_METHODS[_name + "_"] = _inplace_method(FUNCTIONS[_name], saves_self=False,
                                                  name=_name)
for _name, _cls in (("acosh", AcoshInplace), ("asinh", AsinhInplace), ("atanh", AtanhInplace)):
    TENSOR_METHODS[_name + "_"] = _not_implemented_inplace(_name, _cls)
    TENSOR_METHODS["arc" + _name[1:] + "_"] = _not_implemented_inplace("arc" + _name[1:], _cls)
del _name, _cls
