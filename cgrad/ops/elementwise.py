"""Elementwise arithmetic. Binary ops return unreduced gradients: the engine sums them back
to each input's shape (broadcasting), see cgrad/ops/reduce.py::sum_to."""
from __future__ import annotations

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops._util import float_result, raw


class Add(Function):
    """a + b.  d/da = g, d/db = g."""
    _node_name = "AddBackward0"

    @staticmethod
    def forward(ctx, a, b):
        return float_result(np.add(raw(a), raw(b)), a, b)

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    """a - b.  d/da = g, d/db = -g."""
    _node_name = "SubBackward0"

    @staticmethod
    def forward(ctx, a, b):
        return float_result(np.subtract(raw(a), raw(b)), a, b)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return g if na else None, -g if nb else None


class Mul(Function):
    """a * b.  d/da = g * b, d/db = g * a."""
    _node_name = "MulBackward0"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if isinstance(a, TensorBase) else None,
                              b if isinstance(b, TensorBase) else None)
        if not isinstance(a, TensorBase):
            ctx.a = a
        if not isinstance(b, TensorBase):
            ctx.b = b
        return float_result(np.multiply(raw(a), raw(b)), a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = g * (b if b is not None else ctx.b) if na else None
        gb = g * (a if a is not None else ctx.a) if nb else None
        return ga, gb


class Div(Function):
    """a / b.  d/da = g / b, d/db = -g * a / b**2."""
    _node_name = "DivBackward0"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if isinstance(a, TensorBase) else None,
                              b if isinstance(b, TensorBase) else None)
        if not isinstance(a, TensorBase):
            ctx.a = a
        if not isinstance(b, TensorBase):
            ctx.b = b
        out = np.true_divide(raw(a), raw(b))
        if out.dtype == np.float64 and not any(
                isinstance(x, TensorBase) and x._data.dtype == np.float64 for x in (a, b)):
            from cgrad._dtype import get_default_dtype
            out = out.astype(get_default_dtype())
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        bb = b if b is not None else ctx.b
        ga = g / bb if na else None
        gb = None
        if nb:
            aa = a if a is not None else ctx.a
            gb = -g * aa / (bb * bb)
        return ga, gb


class Neg(Function):
    """-a.  d/da = -g."""
    _node_name = "NegBackward0"

    @staticmethod
    def forward(ctx, a):
        return np.negative(a._data)

    @staticmethod
    def backward(ctx, g):
        return -g


class Pow(Function):
    """a ** b for a tensor base.  d/da = g * b * a**(b-1), d/db = g * a**b * log(a)."""
    _node_name = "PowBackward0"

    @staticmethod
    def forward(ctx, a, b):
        out = float_result(np.power(raw(a), raw(b)), a, b)
        if isinstance(b, TensorBase):
            ctx.save_for_backward(a, b, None)
            ctx.out = None
        else:
            ctx.save_for_backward(a, None, None)
            ctx.b = b
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, _ = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if b is None:
            e = ctx.b
            if na:
                ga = g * e * a ** (e - 1) if e != 0 else g * 0
            return ga, None
        if na:
            ga = g * b * a ** (b - 1)
        if nb:
            gb = g * (a ** b) * a.log()
        return ga, gb


class RPow(Function):
    """s ** b for a scalar base s.  d/db = g * s**b * log(s)."""
    _node_name = "PowBackward1"

    @staticmethod
    def forward(ctx, s, b):
        out = np.power(s, b._data)
        ctx.save_for_backward(b)
        ctx.s = s
        return float_result(out, b, s)

    @staticmethod
    def backward(ctx, g):
        (b,) = ctx.saved_tensors
        return None, g * (ctx.s ** b) * float(np.log(ctx.s))


class Exp(Function):
    """exp(a).  d/da = g * exp(a)."""
    _node_name = "ExpBackward0"

    @staticmethod
    def forward(ctx, a):
        out = _wrap(np.exp(a._data))
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
        ctx.dtype = a._data.dtype
        return a._data.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return ToCopy.apply(g, ctx.dtype), None
