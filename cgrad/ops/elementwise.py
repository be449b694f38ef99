"""Elementwise arithmetic.

Binary ops return unreduced gradients: the engine sums them back to each input's shape
(broadcasting), see cgrad/ops/reduce.py::sum_to. Each binary op has a tensor-tensor class and
tensor-scalar classes (as torch's mul.Tensor / mul.Scalar); both name their node as torch does.

NOTE: built-in ops receive ``ctx=None`` when no graph is recorded (the fast path of apply), so
every forward guards its ctx writes with ``if ctx is not None``.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad import _dtype
from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function

_f64 = np.dtype("float64")


def _cat(dt):
    return 0 if dt.kind == "b" else (1 if dt.kind in "iu" else 2)


def result_dtype(x, y):
    """torch's type promotion for x (ndarray) with y (ndarray or Python scalar): categories
    bool < integer < float; a Python scalar or a 0-d tensor only raises the category."""
    cx = _cat(x.dtype)
    if not isinstance(y, np.ndarray):
        cy = 0 if isinstance(y, (bool, np.bool_)) else (1 if isinstance(y, (int, np.integer))
                                                       else 2)
        if cy > cx:
            return _dtype.get_default_dtype() if cy == 2 else np.dtype(np.int64)
        return x.dtype
    cy = _cat(y.dtype)
    if (x.ndim > 0) == (y.ndim > 0):
        if cx == cy:
            return np.promote_types(x.dtype, y.dtype)
        return x.dtype if cx > cy else y.dtype
    d, z = (x, y) if x.ndim > 0 else (y, x)
    if _cat(z.dtype) > _cat(d.dtype):
        return z.dtype
    return d.dtype


def promote(out, x, y):
    """Cast NumPy's result to torch's result dtype (called only when they may differ)."""
    dt = result_dtype(x, y)
    if out.dtype != dt:
        return np.asarray(out).astype(dt)
    return out


def _promote_scalar(out, arr, s=1.0):
    return out if out.dtype is arr.dtype else promote(out, arr, s)


def _promote(out, a, b):
    return promote(out, a, b)


def _promote_div(out, x, y):
    """True division always gives a float: integer inputs give the default float dtype."""
    dt = result_dtype(x, y)
    if dt.kind != "f":
        dt = _dtype.get_default_dtype()
    return out if out.dtype == dt else np.asarray(out).astype(dt)


def promote_any(code, out, x, y):
    """The fast path's promotion hook (cgrad._C._binop); code 3 is true division."""
    if code == 3:
        return _promote_div(out, x, y)
    return promote(out, x, y)


class Add(Function):
    """a + b.  d/da = g, d/db = g."""
    _node_name = "AddBackward0"
    _cg_passthrough = True      # Note [Pass-through backward] (cgrad/_C_engine.pxi)

    @staticmethod
    def forward(ctx, a, b):
        x, y = a._data, b._data
        out = x + y
        return out if out.dtype is x.dtype and out.dtype is y.dtype else promote(out, x, y)

    @staticmethod
    def backward(ctx, g):
        return g, g


class AddScalar(Function):
    """a + s.  d/da = g."""
    _node_name = "AddBackward0"
    _cg_passthrough = True      # Note [Pass-through backward] (cgrad/_C_engine.pxi)

    @staticmethod
    def forward(ctx, a, s):
        x = a._data
        out = x + s
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        return g, None


class Sub(Function):
    """a - b.  d/da = g, d/db = -g."""
    _node_name = "SubBackward0"

    @staticmethod
    def forward(ctx, a, b):
        x, y = a._data, b._data
        out = x - y
        return out if out.dtype is x.dtype and out.dtype is y.dtype else promote(out, x, y)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return g if na else None, -g if nb else None


class SubScalar(Function):
    """a - s.  d/da = g."""
    _node_name = "SubBackward0"
    _cg_passthrough = True      # Note [Pass-through backward] (cgrad/_C_engine.pxi)

    @staticmethod
    def forward(ctx, a, s):
        x = a._data
        out = x - s
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        return g, None


class RSubScalar(Function):
    """s - a.  d/da = -g."""
    _node_name = "RsubBackward1"

    @staticmethod
    def forward(ctx, a, s):
        x = a._data
        out = s - x
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        return -g, None


class Mul(Function):
    """a * b.  d/da = g * b, d/db = g * a."""
    _node_name = "MulBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:          # as torch: b for a's gradient, a for b's
            na, nb = ctx.needs_input_grad
            ctx.save_for_backward(a if nb else None, b if na else None)
        x, y = a._data, b._data
        out = x * y
        return out if out.dtype is x.dtype and out.dtype is y.dtype else promote(out, x, y)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return g * b if na else None, g * a if nb else None


class MulScalar(Function):
    """a * s.  d/da = g * s."""
    _node_name = "MulBackward0"
    _cg_saves = True      # torch saves the scalar, wrapped (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx._aux = s
        x = a._data
        out = x * s
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        return g * ctx._aux, None


class Div(Function):
    """a / b.  d/da = g / b, d/db = -g * a / b**2."""
    _node_name = "DivBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:          # as torch: b always, a only for b's gradient
            ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        x, y = a._data, b._data
        out = x / y
        if out.dtype is not x.dtype or out.dtype is not y.dtype:
            out = _promote_div(out, x, y)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return g / b if na else None, -g * a / (b * b) if nb else None


class DivScalar(Function):
    """a / s.  d/da = g / s."""
    _node_name = "DivBackward0"
    _cg_saves = True      # torch saves the scalar, wrapped (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx._aux = s
        x = a._data
        out = x / s
        return out if out.dtype is x.dtype else _promote_div(out, x, s)

    @staticmethod
    def backward(ctx, g):
        return g / ctx._aux, None


class RDivScalar(Function):
    """s / a.  d/da = -g * s / a**2.  (torch computes it as reciprocal * s: MulBackward0)"""
    _node_name = "MulBackward0"

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = s
        x = a._data
        out = s / x
        return out if out.dtype is x.dtype else _promote_div(out, x, s)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return -g * ctx._aux / (a * a), None


class AddAlpha(Function):
    """a + alpha * b for a tensor b (torch's add with alpha: one node, which saves nothing).
    d/da = g, d/db = alpha * g."""
    _node_name = "AddBackward0"

    @staticmethod
    def forward(ctx, a, b, alpha):
        if ctx is not None:
            ctx._aux = alpha
        x, y = a._data, MulScalar.forward(None, b, alpha)
        out = x + y
        return out if out.dtype is x.dtype and out.dtype is y.dtype else promote(out, x, y)

    @staticmethod
    def backward(ctx, g):
        return g, (g * ctx._aux if ctx.needs_input_grad[1] else None), None


class SubAlpha(Function):
    """a - alpha * b for a tensor b (torch's sub with alpha).  d/da = g, d/db = -alpha * g."""
    _node_name = "SubBackward0"

    @staticmethod
    def forward(ctx, a, b, alpha):
        if ctx is not None:
            ctx._aux = alpha
        x, y = a._data, MulScalar.forward(None, b, alpha)
        out = x - y
        return out if out.dtype is x.dtype and out.dtype is y.dtype else promote(out, x, y)

    @staticmethod
    def backward(ctx, g):
        return g, (g * -ctx._aux if ctx.needs_input_grad[1] else None), None


def add_alpha(input, other, alpha, subtract=False):
    """input + alpha * other (input - alpha * other when subtract), recorded as torch records
    add/sub with alpha: one AddBackward0/SubBackward0 node that saves nothing."""
    if alpha == 1:
        return input - other if subtract else input + other
    if isinstance(input, TensorBase) and isinstance(other, TensorBase):
        return (SubAlpha if subtract else AddAlpha).apply(input, other, alpha)
    return input - other * alpha if subtract else input + other * alpha


_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
_INT_POW = "Integers to negative integer powers are not allowed."


def _power(x, y):
    """np.power with torch's RuntimeError for integers to negative integer powers."""
    try:
        return np.power(x, y)
    except ValueError as e:
        if str(e).startswith(_INT_POW):
            raise RuntimeError(_INT_POW) from None
        raise


class Neg(Function):
    """-a.  d/da = -g."""
    _node_name = "NegBackward0"

    @staticmethod
    def forward(ctx, a):
        try:
            return np.negative(a._data)
        except TypeError:
            if a._data.dtype == np.bool_:
                raise RuntimeError(_NEG_BOOL) from None
            raise

    @staticmethod
    def backward(ctx, g):
        return -g


class Pow(Function):
    """a ** b (tensors).  d/da = g * b * a**(b-1), d/db = g * out * log(a).

    As torch's PowBackward1, it saves the result too, so an in-place op on the result makes
    backward raise."""
    _node_name = "PowBackward1"

    @staticmethod
    def forward(ctx, a, b):
        x, y = a._data, b._data
        out = _power(x, y)
        if out.dtype is not x.dtype or out.dtype is not y.dtype:
            out = promote(out, x, y)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = g * b * a ** (b - 1) if na else None
        gb = None
        if nb:
            # torch: the gradient w.r.t. the exponent is 0 where the base is 0 and b >= 0
            gb = g * out * _safe_log(a, b)
        return ga, gb


def _safe_log(a, b):
    out = a.log()
    mask = (a._data == 0) & (b._data >= 0)
    if mask.any():
        from cgrad.ops.shape import MaskedFillConst
        out = MaskedFillConst.apply(out, np.broadcast_to(mask, out._data.shape), 0.0)
    return out


class PowScalar(Function):
    """a ** s.  d/da = g * s * a**(s-1)."""
    _node_name = "PowBackward0"

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = s
        x = a._data
        if s == 2:
            out = np.square(x)
        else:
            out = _power(x, s)
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        s = ctx._aux
        if s == 0:
            return g * 0.0, None
        if s == 1:
            return g, None
        if s == 2:
            return g * (a * 2.0), None
        return g * (a ** (s - 1) * s), None


class RPow(Function):
    """s ** a for a scalar base s.  d/da = g * s**a * log(s)."""
    _node_name = "PowBackward2"

    @staticmethod
    def forward(ctx, a, s):
        x = a._data
        if s == 0:
            with np.errstate(divide="ignore"):     # 0 ** -1 = inf, silently as torch
                out = np.power(s, x)
        else:
            out = np.power(s, x)
        if out.dtype is not x.dtype:
            out = promote(out, x, s)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(out, a)      # torch's PowBackward2 saves both
            ctx._aux = s
        return out

    @staticmethod
    def backward(ctx, g):
        s = ctx._aux
        out, a = ctx.saved_tensors
        if s == 0:
            # torch: grad * where(exponent >= 0, 0, result * log(base)) for a zero base (of
            # either sign), so 0 ** a has gradient 0, not 0 * -inf = nan, where a >= 0
            from cgrad.ops.shape import MaskedFillConst
            with np.errstate(invalid="ignore"):
                factor = out * -math.inf
            return g * MaskedFillConst.apply(factor, a._data >= 0, 0.0), None
        return g * out * float(np.log(s)), None


class Exp(Function):
    """exp(a).  d/da = g * exp(a)."""
    _node_name = "ExpBackward0"

    @staticmethod
    def forward(ctx, a):
        out = np.exp(a._data)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(out)   # saving an output: stored without a ctx<->out cycle
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


class Log(Function):
    """log(a).  d/da = g / a."""
    _node_name = "LogBackward0"

    @staticmethod
    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        return np.log(a._data)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / a


class ToCopy(Function):
    """a.to(dtype).  d/da = g.to(a.dtype)."""
    _node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, a, dtype):
        if ctx is not None:
            ctx._aux = a._data.dtype
        return a._data.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return ToCopy.apply(g, ctx._aux), None


BINOPS = {
    # name: (tensor-tensor, tensor-scalar, scalar-tensor (reflected; called as (tensor, s)))
    "add": (Add, AddScalar, AddScalar),
    "sub": (Sub, SubScalar, RSubScalar),
    "mul": (Mul, MulScalar, MulScalar),
    "div": (Div, DivScalar, RDivScalar),
    "pow": (Pow, PowScalar, RPow),
}
