"""Arithmetic (see cgrad/ops/__init__.py for the conventions): + - * / ** and unary -
(the classes behind the operator slots, BINOPS), exp and log, dtype conversion (ToCopy),
add/sub with alpha, and floor division, remainder, fmod, div with rounding_mode.

Binary ops return unreduced gradients: the engine sums them back to each input's shape
(broadcasting), see cgrad/ops/reductions.py::sum_to. Each binary op has a tensor-tensor class
and tensor-scalar classes (as torch's mul.Tensor / mul.Scalar); both name their node as torch
does. Result dtypes follow cgrad/ops/promotion.py.

NOTE: built-in ops receive ``ctx=None`` when no graph is recorded (the fast path of apply), so
every forward guards its ctx writes with ``if ctx is not None``.
"""
from __future__ import annotations

import math

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops._util import contiguous_result
from cgrad.ops.promotion import (_Number, _as_result, _cast, _errstate, _operand, _promote_div,
                                 _raw, _to_tensor, promote, result_type)
from cgrad.ops.promotion import _scalar_tensor


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
        with _errstate():           # nan/inf silently, as torch ((-1) ** 0.5, 0 ** -1)
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
        ga = gb = None
        if na:
            # torch's pow_backward_self: 0 where the exponent is 0 (so 0 ** 0 has gradient 0,
            # not 0 * 0 ** -1 = nan)
            ga = g * _zero_where(b * a ** (b - 1), b._data == 0)
        if nb:
            # torch's pow_backward_exponent: 0 where the base is 0 and the exponent >= 0
            gb = g * _zero_where(out * a.log(), (a._data == 0) & (b._data >= 0))
        return ga, gb


def _zero_where(t, mask):
    """t with zeros where mask (broadcast to t's shape) holds, differentiably."""
    if not mask.any():
        return t
    from cgrad.ops.comparison import MaskedFillConst
    return MaskedFillConst.apply(t, np.broadcast_to(mask, t._data.shape), 0.0)


# torch's pow(tensor, scalar) runs these kernels for float32/float64 (their values differ
# from pow's at -0.0 and -inf: sqrt(-inf) = nan, rsqrt(-0.0) = -inf). 3 and -2 are products,
# as torch's: bitwise torch's values (np.power's differ in the last bit) and about 25x faster
# than np.power (makemore's GELU computes x ** 3.0 on every activation).
_POW_KERNELS = {0.5: np.sqrt, -0.5: lambda x: np.reciprocal(np.sqrt(x)), -1: np.reciprocal,
                3: lambda x: np.multiply(np.multiply(x, x), x),
                -2: lambda x: np.reciprocal(np.multiply(x, x))}


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
            with _errstate():
                out = np.square(x)
        elif x.dtype.kind == "f" and x.dtype.itemsize >= 4 and s in _POW_KERNELS:
            with _errstate():       # torch's sqrt/rsqrt/reciprocal kernels for these
                out = _POW_KERNELS[s](x)
        else:
            out = _power(x, s)
        return out if out.dtype is x.dtype else promote(out, x, s)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        s = ctx._aux
        if s == 0:
            # torch's pow_backward: zeros_like(self), not g * 0 (no NaN from g, and no path
            # from the gradient to g: a double backward does not reach g's hooks)
            return _wrap(np.zeros(a._data.shape, a._data.dtype)), None
        if s == 1:
            return g, None
        if s == 2:
            return g * (a * 2.0), None
        with _errstate():
            return g * (a ** (s - 1) * s), None


class RPow(Function):
    """s ** a for a scalar base s.  d/da = g * s**a * log(s)."""
    _node_name = "PowBackward2"

    @staticmethod
    def forward(ctx, a, s):
        x = a._data
        with _errstate():       # 0 ** -1 = inf, (-2) ** 0.5 = nan, silently as torch
            out = np.power(s, x)
        if out.dtype is not x.dtype:
            out = promote(out, x, s)
        out = contiguous_result(out, x)        # torch's result is C-contiguous here
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
            from cgrad.ops.comparison import MaskedFillConst
            with np.errstate(invalid="ignore"):
                factor = out * -math.inf
            return g * MaskedFillConst.apply(factor, a._data >= 0, 0.0), None
        with _errstate():
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


# ----------------------------------------------------------------------------------------
# floor division, remainder, fmod, div(rounding_mode)
# ----------------------------------------------------------------------------------------
def _check_int_zero(y, dt):
    if dt.kind in "iub":
        if (np.any(y == 0) if isinstance(y, np.ndarray) else y == 0):
            raise RuntimeError("ZeroDivisionError")


def _div_trunc(x, y, dt):
    if dt.kind == "f":
        with _errstate():
            return np.trunc(np.true_divide(x, y))
    _check_int_zero(y, dt)
    q = np.floor_divide(x, y)
    fix = (np.remainder(x, y) != 0) & ((np.asarray(x) < 0) != (np.asarray(y) < 0))
    if np.any(fix):
        q = q + fix
    return q


def _div_floor(x, y, dt):
    if dt.kind == "f":
        with _errstate():
            return np.floor_divide(x, y)
    _check_int_zero(y, dt)
    return np.floor_divide(x, y)


def _remainder(x, y, dt):
    if dt.kind == "f":
        with _errstate():
            return np.remainder(x, y)
    _check_int_zero(y, dt)
    return np.remainder(x, y)


def _fmod(x, y, dt):
    if dt.kind == "f":
        with _errstate():
            return np.fmod(x, y)
    _check_int_zero(y, dt)
    return np.fmod(x, y)


def _binary_compute(fn, x, y):
    dt = result_type(x, y)
    return _as_result(fn(_cast(x, dt), _cast(y, dt), dt), dt)


def _zeros_for(g):
    """A zero gradient like g (a read-only broadcast view: no memory)."""
    d = g._data
    return _wrap(np.broadcast_to(np.zeros((), d.dtype), d.shape))


class _NotDifferentiable(Function):
    """An op without a derivative in torch: its output requires grad (as torch's), and
    backward raises "derivative for aten::<name> is not implemented" (name in ctx._aux)."""
    _node_name = "NotImplemented"

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(f"derivative for aten::{ctx._aux} is not implemented")


class FloorDivide(_NotDifferentiable):
    """a // b (torch.floor_divide: rounds toward -inf; no derivative, as torch)."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx._aux = "floor_divide"
        return _binary_compute(_div_floor, _raw(a), _raw(b))


class RFloorDivide(_NotDifferentiable):
    """s // a for a Python number s (no derivative)."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx._aux = "floor_divide"
        return _binary_compute(_div_floor, s, a._data)


class RRemainder(_NotDifferentiable):
    """s % a for a Python number s (torch's remainder.Scalar_Tensor has no derivative)."""
    _node_name = "NotImplemented"

    @staticmethod
    def forward(ctx, a, s):
        if ctx is not None:
            ctx._aux = "remainder"
        return _binary_compute(_remainder, s, a._data)


class Remainder(Function):
    """remainder(a, b) (Python's %: the sign of b).
    d/da = g, d/db = -g * floor(a / b)."""
    _node_name = "RemainderBackward1"
    _round = staticmethod(_div_floor)
    _op = staticmethod(_remainder)

    @classmethod
    def _forward(cls, ctx, a, b):
        x, y = a._data, b._data
        if ctx is not None and ctx.needs_input_grad[1]:
            ctx.save_for_backward(a, b)     # as torch: only for the divisor's gradient
        return _binary_compute(cls._op, x, y)

    @staticmethod
    def forward(ctx, a, b):
        return Remainder._forward(ctx, a, b)

    @classmethod
    def _backward(cls, ctx, g):
        na, nb = ctx.needs_input_grad
        gb = None
        if nb:
            a, b = ctx.saved_tensors
            x, y = a._data, b._data
            dt = result_type(x, y)
            q = _as_result(cls._round(_cast(x, dt), _cast(y, dt), dt), dt)
            gb = g * _wrap(np.negative(q))
        return g if na else None, gb

    @staticmethod
    def backward(ctx, g):
        return Remainder._backward(ctx, g)


class Fmod(Remainder):
    """fmod(a, b) (C's fmod: the sign of a).  d/da = g, d/db = -g * trunc(a / b)."""
    _node_name = "FmodBackward1"
    _round = staticmethod(_div_trunc)
    _op = staticmethod(_fmod)

    @staticmethod
    def forward(ctx, a, b):
        return Fmod._forward(ctx, a, b)

    @staticmethod
    def backward(ctx, g):
        return Fmod._backward(ctx, g)


class RemainderScalar(Function):
    """remainder(a, s) for a Python number s.  d/da = g."""
    _node_name = "RemainderBackward0"

    @staticmethod
    def forward(ctx, a, s):
        return _binary_compute(_remainder, a._data, s)

    @staticmethod
    def backward(ctx, g):
        return g, None


class FmodScalar(Function):
    """fmod(a, s) for a Python number s.  d/da = g."""
    _node_name = "FmodBackward0"

    @staticmethod
    def forward(ctx, a, s):
        return _binary_compute(_fmod, a._data, s)

    @staticmethod
    def backward(ctx, g):
        return g, None


class DivMode(Function):
    """div(a, b, rounding_mode='trunc'|'floor'): the gradient is zero (as torch).

    torch's DivBackward2 still saves what its true-division formulas name: a tensor divisor
    always, the dividend when the divisor requires grad; so an in-place op on them makes
    backward raise, as in torch."""
    _node_name = "DivBackward2"

    @staticmethod
    def forward(ctx, a, b, mode):
        if ctx is not None and isinstance(b, TensorBase):
            ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        fn = _div_trunc if mode == "trunc" else _div_floor
        return _binary_compute(fn, _raw(a), _raw(b))

    @staticmethod
    def backward(ctx, g):
        ctx.saved_tensors           # the version check of torch's node
        na, nb, _ = ctx.needs_input_grad
        z = _zeros_for(g)
        return z if na else None, z if nb else None, None


def _number(x):
    if isinstance(x, np.generic):
        return x.item()
    return x


def floor_divide(input, other):
    """input // other, rounding toward -inf (no derivative, as torch)."""
    other = _number(_to_tensor(other))
    input = _number(_to_tensor(input))
    if not isinstance(input, TensorBase):
        if not isinstance(other, TensorBase):
            raise TypeError("floor_divide(): argument 'input' must be Tensor")
        return RFloorDivide.apply(other, input)
    return FloorDivide.apply(input, other)


def remainder(input, other):
    """Python-style remainder (the sign of the divisor); d/dinput = g,
    d/dother = -g * floor(input / other)."""
    other = _number(_operand("remainder", "other", 2, other))
    input = _number(_to_tensor(input))
    if not isinstance(input, TensorBase):
        if not isinstance(other, TensorBase):
            raise TypeError("remainder(): argument 'input' must be Tensor")
        return RRemainder.apply(other, input)
    if isinstance(other, TensorBase):
        return Remainder.apply(input, other)
    return RemainderScalar.apply(input, other)


def fmod(input, other):
    """C-style remainder (the sign of the dividend); d/dinput = g,
    d/dother = -g * trunc(input / other)."""
    other = _number(_to_tensor(other))
    if not isinstance(input, TensorBase):
        raise TypeError(f"fmod(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(other, TensorBase):
        return Fmod.apply(input, other)
    return FmodScalar.apply(input, other)


def div(input, other, *, rounding_mode=None):
    """input / other. rounding_mode=None: true division (integers give the default float
    dtype); 'trunc': rounds toward zero; 'floor': rounds toward -inf (both keep integer
    dtypes and have a zero gradient, as torch)."""
    input = _to_tensor(input)
    if not isinstance(input, TensorBase):
        input = _scalar_tensor(_number(input))      # div(2, x)
    if rounding_mode is None:
        return input / other
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return DivMode.apply(input, _number(_to_tensor(other)), rounding_mode)


def true_divide(input, other):
    """input / other (true division)."""
    return div(input, other)


divide = div


def multiply(input, other):
    """input * other."""
    return input * other


def subtract(input, other, *, alpha=1):
    """input - alpha * other."""
    return add_alpha(input, other, alpha, True)


def _floordiv(self, other):
    other = _to_tensor(other)
    if not isinstance(other, (TensorBase,) + _Number):
        return NotImplemented
    return FloorDivide.apply(self, _number(other))


def _rfloordiv(self, other):
    if not isinstance(other, _Number):
        return NotImplemented
    return RFloorDivide.apply(self, _number(other))


def _mod(self, other):
    other = _to_tensor(other)
    if not isinstance(other, (TensorBase,) + _Number):
        return NotImplemented
    return remainder(self, other)


def _rmod(self, other):
    if not isinstance(other, _Number):
        return NotImplemented
    return RRemainder.apply(self, _number(other))


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
def _div_method(self, other, *, rounding_mode=None):
    return div(self, other, rounding_mode=rounding_mode)


# ----------------------------------------------------------------------------------------
# registration (the operators + - * / ** and unary - are C slots: BINOPS, cgrad/ops/__init__.py)
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "floor_divide": floor_divide, "remainder": remainder, "fmod": fmod,
    "div": _div_method, "divide": _div_method, "true_divide": true_divide,
    "multiply": multiply, "subtract": subtract,
    "__floordiv__": _floordiv, "__rfloordiv__": _rfloordiv, "__mod__": _mod, "__rmod__": _rmod,
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "floor_divide": floor_divide, "remainder": remainder, "fmod": fmod, "div": div,
    "divide": divide, "true_divide": true_divide, "multiply": multiply, "subtract": subtract,
}
