"""Comparison and selection (see cgrad/ops/__init__.py for the conventions): where,
maximum/minimum, clamp with scalar or tensor bounds, comparisons, logical and bitwise ops,
isclose/allclose/equal. Type promotion (``result_type``) lives in cgrad/ops/promotion.py.

Gradients that are "g where mask, else 0" are written with ``Where`` (never ``g * mask``), so a
NaN or inf in g does not leak into the masked-out positions, as in torch.
"""
from __future__ import annotations

import builtins

import numpy as np

from cgrad.ops.promotion import _tensor_arg
from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops.promotion import (_Number, _as_result, _cast, _operand, _raw, _scalar_dtype,
                                 _to_tensor, result_type, torch_type_name)
from cgrad.ops.promotion import _scalar_tensor


# ----------------------------------------------------------------------------------------
# where
# ----------------------------------------------------------------------------------------
def _mask_mul(g, mask):
    """g where mask, else 0 (torch's where(mask, g, 0)) as a multiplication, which NumPy
    vectorises (np.where branches per element: ~10x slower on random masks). g * 0 is
    nan where g is inf or nan: only such a g takes the exact np.where."""
    if g.dtype.kind == "f" and not np.isfinite(g).all():
        return np.where(mask, g, 0).astype(g.dtype, copy=False)
    return g * mask


def _is_zero(v):
    return type(v) is float and v == 0.0


class Where(Function):
    """where(cond, a, b) with a, b Tensors or Python scalars.
    d/da = where(cond, g, 0), d/db = where(cond, 0, g)."""
    _node_name = "WhereBackward0"

    @staticmethod
    def forward(ctx, cond, a, b):
        x, y = _raw(a), _raw(b)
        c = cond._data
        if _is_zero(y) and type(x) is np.ndarray and x.dtype.kind == "f":
            out = _mask_mul(x, c)          # where(c, g, 0), as in most backward formulas
        elif _is_zero(x) and type(y) is np.ndarray and y.dtype.kind == "f":
            out = _mask_mul(y, ~c)
        else:
            dt = result_type(x, y)
            out = np.where(c, x, y)
            if out.dtype != dt:
                out = np.asarray(out).astype(dt)
        if ctx is not None:
            ctx.save_for_backward(cond)
        return out

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        return (None, Where.apply(cond, g, 0.0) if na else None,
                Where.apply(cond, 0.0, g) if nb else None)


def mask_where(mask, g, other=0.0):
    """where(mask, g, other) for an ndarray mask (no gradient): differentiable in g."""
    return Where.apply(_wrap(mask), g, other)


def mask_fill(g, mask, value=0.0):
    """g with value where mask (an ndarray): differentiable in g; g itself if nothing masked."""
    if not mask.any():
        return g
    return Where.apply(_wrap(mask), value, g)


def _check_cond(c):
    if c.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {torch_type_name(c.dtype)}")


def where(condition, input=None, other=None):
    """where(condition, input, other): elements of input where condition, else of other
    (either may be a Python scalar). where(condition) is nonzero(condition, as_tuple=True)."""
    condition = _to_tensor(condition)
    if input is None and other is None:
        return tuple(_wrap(i.astype(np.int64, copy=False))
                     for i in np.nonzero(np.atleast_1d(condition._data)))
    if input is None or other is None:
        raise TypeError("where() missing required argument 'input' or 'other'")
    _check_cond(condition._data)
    return Where.apply(condition, _operand("where", "input", 2, input),
                       _operand("where", "other", 3, other))


def _where_method(self, condition, other):
    """Tensor.where(condition, other) == where(condition, self, other)."""
    return where(condition, self, other)


# ----------------------------------------------------------------------------------------
# maximum / minimum (ties split the gradient in half, as torch)
# ----------------------------------------------------------------------------------------
def _tie_split(g, x, y):
    eq = x == y
    if eq.any():
        return Where.apply(_wrap(eq), g * 0.5, g)
    return g


def _extremum_forward(ctx, a, b, ufunc):
    x, y = a._data, b._data
    dt = result_type(x, y)
    if ctx is not None:
        ctx.save_for_backward(a, b)
    return _as_result(ufunc(_cast(x, dt), _cast(y, dt)), dt)


def _extremum_backward(ctx, g, loses):
    """g to the winner, split on ties; `loses(x, y)` marks where input a is not selected."""
    a, b = ctx.saved_tensors
    x, y = a._data, b._data
    na, nb = ctx.needs_input_grad
    h = _tie_split(g, x, y)
    return (mask_fill(h, loses(x, y)) if na else None,
            mask_fill(h, loses(y, x)) if nb else None)


class Maximum(Function):
    """maximum(a, b) (NaN propagates).  d/da = g where a > b, g/2 where a == b, else 0."""
    _node_name = "MaximumBackward0"

    @staticmethod
    def forward(ctx, a, b):
        return _extremum_forward(ctx, a, b, np.maximum)

    @staticmethod
    def backward(ctx, g):
        return _extremum_backward(ctx, g, np.less)


class Minimum(Function):
    """minimum(a, b) (NaN propagates).  d/da = g where a < b, g/2 where a == b, else 0."""
    _node_name = "MinimumBackward0"

    @staticmethod
    def forward(ctx, a, b):
        return _extremum_forward(ctx, a, b, np.minimum)

    @staticmethod
    def backward(ctx, g):
        return _extremum_backward(ctx, g, np.greater)


def maximum(input, other):
    """Elementwise maximum of two tensors (broadcasting; NaN propagates)."""
    return Maximum.apply(_tensor_arg(input, "maximum", 1, "input"),
                         _tensor_arg(other, "maximum", 2))


def minimum(input, other):
    """Elementwise minimum of two tensors (broadcasting; NaN propagates)."""
    return Minimum.apply(_tensor_arg(input, "minimum", 1, "input"),
                         _tensor_arg(other, "minimum", 2))


# ----------------------------------------------------------------------------------------
# clamp
# ----------------------------------------------------------------------------------------
def _clamp_arrays(x, lo, hi, dt):
    x = _cast(x, dt)
    if lo is not None and hi is not None:
        if isinstance(lo, np.ndarray) or isinstance(hi, np.ndarray):
            # min(max(x, lo), hi): where lo > hi the result is hi, as torch
            return np.minimum(np.maximum(x, _cast(lo, dt)), _cast(hi, dt))
        return np.clip(x, lo, hi)
    if lo is not None:
        return np.maximum(x, _cast(lo, dt))
    return np.minimum(x, _cast(hi, dt))


class ClampScalar(Function):
    """clamp(a, min, max) with scalar (or None) bounds.
    d/da = g where min <= a <= max (inclusive, as torch), else 0."""
    _node_name = "ClampBackward1"

    @staticmethod
    def forward(ctx, a, lo, hi):
        x = a._data
        dt = result_type(x, lo, hi)
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = (lo, hi)
        return _as_result(_clamp_arrays(x, lo, hi, dt), dt)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        lo, hi = ctx._aux
        x = a._data
        if lo is not None and hi is not None:
            mask = (x >= lo) & (x <= hi)
        elif lo is not None:
            mask = x >= lo
        else:
            mask = x <= hi
        return mask_where(mask, g), None, None


class ClampMinScalar(ClampScalar):
    """clamp_min(a, min) with a scalar bound."""
    _node_name = "ClampMinBackward0"


class ClampMaxScalar(ClampScalar):
    """clamp_max(a, max) with a scalar bound."""
    _node_name = "ClampMaxBackward0"


class ClampTensor(Function):
    """clamp(a, min, max) with Tensor (or None) bounds (torch's clamp_backward_min_max):
    d/da = g where min <= a <= max; d/dmin = g where a < min and min < max;
    d/dmax = g where a > max or max < min."""
    _node_name = "ClampBackward0"

    @staticmethod
    def forward(ctx, a, lo, hi):
        x, l, h = a._data, _raw(lo), _raw(hi)
        dt = result_type(x, l, h)
        if ctx is not None:
            ctx.save_for_backward(a, lo, hi)
        return _as_result(_clamp_arrays(x, l, h, dt), dt)

    @staticmethod
    def backward(ctx, g):
        a, lo, hi = ctx.saved_tensors
        na, nl, nh = ctx.needs_input_grad
        x = a._data
        l = None if lo is None else lo._data
        h = None if hi is None else hi._data
        ga = gl = gh = None
        if l is not None and h is not None:
            if na:
                ga = mask_where((x >= l) & (x <= h), g)
            if nl:
                gl = mask_where((x < l) & (l < h), g)
            if nh:
                gh = mask_where((x > h) | (h < l), g)
        elif l is not None:
            if na:
                ga = mask_where(x >= l, g)
            if nl:
                gl = mask_where(x < l, g)
        else:
            if na:
                ga = mask_where(x <= h, g)
            if nh:
                gh = mask_where(x > h, g)
        return ga, gl, gh


class ClampMinTensor(ClampTensor):
    """clamp_min(a, min) with a Tensor bound."""
    _node_name = "ClampMinBackward1"


class ClampMaxTensor(ClampTensor):
    """clamp_max(a, max) with a Tensor bound."""
    _node_name = "ClampMaxBackward1"


def _bound(v):
    if v is None or isinstance(v, TensorBase):
        return v
    if isinstance(v, np.ndarray):
        return _wrap(v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, _Number):
        return v
    raise TypeError(f"clamp(): min and max must be numbers or Tensors, not {type(v).__name__}")


def clamp(input, min=None, max=None):
    """Clamp input into [min, max]; min/max are Python numbers or Tensors (broadcasting).
    Where min > max the result is max. The gradient passes where min <= input <= max."""
    lo, hi = _bound(min), _bound(max)
    if lo is None and hi is None:
        raise RuntimeError("cgrad.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(lo, TensorBase) or isinstance(hi, TensorBase):
        if lo is not None and not isinstance(lo, TensorBase):
            lo = _scalar_tensor(lo)
        if hi is not None and not isinstance(hi, TensorBase):
            hi = _scalar_tensor(hi)
        return ClampTensor.apply(input, lo, hi)
    return ClampScalar.apply(input, lo, hi)


def clamp_min(input, min):
    """max(input, min) elementwise (min a number or a Tensor)."""
    lo = _bound(min)
    if isinstance(lo, TensorBase):
        return ClampMinTensor.apply(input, lo, None)
    return ClampMinScalar.apply(input, lo, None)


def clamp_max(input, max):
    """min(input, max) elementwise (max a number or a Tensor)."""
    hi = _bound(max)
    if isinstance(hi, TensorBase):
        return ClampMaxTensor.apply(input, None, hi)
    return ClampMaxScalar.apply(input, None, hi)


clip = clamp


# ----------------------------------------------------------------------------------------
# comparisons, logical and bitwise ops (no gradient: boolean / integer results)
# ----------------------------------------------------------------------------------------
def _cmp_fn(npfn, name):
    def fn(input, other):
        x = _to_tensor(input)
        if not isinstance(x, TensorBase):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}")
        o = _to_tensor(other)
        if not isinstance(o, (TensorBase,) + _Number):
            from cgrad._checks import type_name
            raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not "
                            f"{type_name(other)}")
        try:
            return _wrap(npfn(x._data, _raw(o)))
        except ValueError as e:
            from cgrad._C import _raise_if_broadcast
            _raise_if_broadcast(e)
            raise
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} (a boolean tensor; broadcasting; no gradient)."
    return fn


eq = _cmp_fn(np.equal, "eq")
ne = _cmp_fn(np.not_equal, "ne")
lt = _cmp_fn(np.less, "lt")
le = _cmp_fn(np.less_equal, "le")
gt = _cmp_fn(np.greater, "gt")
ge = _cmp_fn(np.greater_equal, "ge")
logical_and = _cmp_fn(np.logical_and, "logical_and")
logical_or = _cmp_fn(np.logical_or, "logical_or")
logical_xor = _cmp_fn(np.logical_xor, "logical_xor")


def logical_not(input):
    """Elementwise not (boolean tensor)."""
    return _wrap(np.logical_not(input._data))


def _bitwise_fn(npfn, name):
    def fn(input, other):
        x, y = _to_tensor(input), _to_tensor(other)
        if not isinstance(x, TensorBase):
            x, y = y, x
        xd, y = x._data, _raw(y)
        for d in (xd, y):
            dt = d.dtype if isinstance(d, np.ndarray) else _scalar_dtype(d)
            if dt.kind not in "biu":
                raise NotImplementedError(
                    f'"{name}_cpu" not implemented for \'{torch_type_name(result_type(xd, y))}\'')
        dt = result_type(xd, y)
        return _wrap(_as_result(npfn(_cast(xd, dt), _cast(y, dt)), dt))
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} of integer or boolean tensors."
    return fn


bitwise_and = _bitwise_fn(np.bitwise_and, "bitwise_and")
bitwise_or = _bitwise_fn(np.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise_fn(np.bitwise_xor, "bitwise_xor")


def bitwise_not(input):
    """~input for integer or boolean tensors (logical not for booleans)."""
    x = input._data
    if x.dtype.kind not in "biu":
        raise NotImplementedError(
            f'"bitwise_not_cpu" not implemented for \'{torch_type_name(x.dtype)}\'')
    return _wrap(np.invert(x))


def _invert(self):
    if self._data.dtype.kind not in "biu":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return _wrap(np.invert(self._data))


def _op(fn):
    """&, |, ^ (and their reflections: the ops are commutative)."""
    def method(self, other):
        if not isinstance(other, (TensorBase, np.ndarray, list, tuple) + _Number):
            return NotImplemented
        return fn(self, other)
    return method


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (a boolean tensor)."""
    o = _raw(_to_tensor(other))
    if isinstance(o, np.ndarray) and o.dtype != input._data.dtype:
        raise RuntimeError(f"{torch_type_name(input._data.dtype)} did not match "
                           f"{torch_type_name(o.dtype)}")
    try:
        return _wrap(np.isclose(input._data, o, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError as e:
        from cgrad._C import _raise_if_broadcast
        _raise_if_broadcast(e)
        raise


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if isclose everywhere."""
    return builtins.bool(np.all(isclose(input, other, rtol, atol, equal_nan)._data))


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    return builtins.bool(input._data.shape == other._data.shape
                         and np.array_equal(input._data, other._data))


FUNCTIONS: dict = {
    "where": where, "maximum": maximum, "minimum": minimum, "clamp": clamp, "clip": clip,
    "clamp_min": clamp_min, "clamp_max": clamp_max,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "greater": gt, "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "isclose": isclose, "allclose": allclose, "equal": equal,
}

TENSOR_METHODS: dict = {
    "where": _where_method, "maximum": maximum, "minimum": minimum, "clamp": clamp,
    "clip": clip, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "greater": gt, "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not,
    "isclose": isclose, "allclose": allclose, "equal": equal,
    "__and__": _op(bitwise_and), "__rand__": _op(bitwise_and),
    "__or__": _op(bitwise_or), "__ror__": _op(bitwise_or),
    "__xor__": _op(bitwise_xor), "__rxor__": _op(bitwise_xor),
    "__invert__": _invert,
}


class MaskedFillConst(Function):
    """a with a constant where mask (an ndarray).  d/da = g with zeros where mask."""
    _node_name = "MaskedFillBackward0"
    _cg_saves = True      # torch saves the mask (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, mask, value):
        if ctx is not None:
            ctx._aux = mask
        out = a._data.copy()
        out[mask] = value
        return out

    @staticmethod
    def backward(ctx, g):
        return MaskedFillConst.apply(g, ctx._aux, 0.0), None, None
