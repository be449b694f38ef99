"""Type promotion, as torch's: ``result_type`` and the helpers that cast operands
(torch_type_name for messages), and the fast result-dtype rules of the arithmetic operators
(result_dtype / promote / promote_any, called by the C operator slots).

Dimensioned tensors take precedence over 0-d tensors, which take precedence over Python
scalars; an operand of a lower priority only matters when it raises the category
(bool < integer < float < complex).
"""
from __future__ import annotations
import builtins
import numpy as np
from cgrad import _dtype
from cgrad._dtype import _TORCH_NAMES, torch_type_name  # noqa: F401  (re-exported)
from cgrad._C import TensorBase, _wrap


_Number = (builtins.bool, builtins.int, builtins.float, np.number, np.bool_)


# ----------------------------------------------------------------------------------------
# type promotion
# ----------------------------------------------------------------------------------------
def _cat(dt):
    return 0 if dt.kind == "b" else (1 if dt.kind in "iu" else (2 if dt.kind == "f" else 3))


def _promote2(a, b):
    """torch.promote_types: the higher category wins outright (int64 + float32 -> float32);
    within a category NumPy's promotion (int32 + int64 -> int64, float16 + float32 -> ...)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    ca, cb = _cat(a), _cat(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def _scalar_dtype(s):
    if isinstance(s, (builtins.bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(s, (builtins.int, np.integer)):
        return np.dtype(np.int64)
    if isinstance(s, (builtins.float, np.floating)):
        return _dtype.get_default_dtype()
    if isinstance(s, (builtins.complex, np.complexfloating)):
        return np.dtype(np.complex64 if _dtype.get_default_dtype() == np.float32
                        else np.complex128)
    from cgrad._checks import type_name
    raise TypeError(f"expected a Tensor or a Number, not {type_name(s)}")


def _operand(fn, name, pos, v):
    """A Tensor or Number argument (lists and arrays are converted by _to_tensor)."""
    v = _to_tensor(v)
    if not isinstance(v, (TensorBase, builtins.complex) + _Number):
        from cgrad._checks import type_name
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor or Number, "
                        f"not {type_name(v)}")
    return v


def _combine(higher, lower):
    """torch's combine_categories(higher, lower) (c10/core/ScalarType + TensorIterator)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _cat(higher) >= 2:
        return higher
    if higher.kind == "b" or _cat(lower) >= 2:
        return _promote2(higher, lower)
    return higher


def result_type(*operands):
    """torch.result_type over ndarrays / Tensors (dimensioned or 0-d) and Python scalars;
    None operands are skipped."""
    dim = zero = wrapped = None
    for o in operands:
        if o is None:
            continue
        if isinstance(o, TensorBase):
            o = o._data
        if isinstance(o, np.ndarray):
            if o.ndim:
                dim = _promote2(dim, o.dtype)
            else:
                zero = _promote2(zero, o.dtype)
        else:
            wrapped = _promote2(wrapped, _scalar_dtype(o))
    return _combine(dim, _combine(zero, wrapped))


def _raw(x):
    return x._data if isinstance(x, TensorBase) else x


def _cast(x, dt):
    """x (ndarray or scalar) as dtype dt: arrays are cast (no copy when already dt), Python
    scalars stay Python scalars (NumPy then keeps dt)."""
    if isinstance(x, np.ndarray):
        return x if x.dtype == dt else x.astype(dt)
    if isinstance(x, np.generic):
        x = x.item()
    if dt.kind in "iub" and isinstance(x, builtins.float):
        return x        # float scalar with an integer result type: cannot happen (promoted)
    return x


def _as_result(out, dt):
    out = np.asarray(out)
    return out if out.dtype == dt else out.astype(dt)


def _tensor_arg(x, fn, pos, name="other"):
    """torch's argument check for ops that take Tensors only (maximum, ...)."""
    if isinstance(x, TensorBase):
        return x
    if isinstance(x, np.ndarray):
        return _wrap(x)
    raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                    f"{type(x).__name__}")


def _to_tensor(x):
    """Tensors pass; arrays are wrapped; lists/tuples go through cgrad.tensor."""
    if isinstance(x, TensorBase):
        return x
    if isinstance(x, np.ndarray):
        return _wrap(x)
    if isinstance(x, (list, tuple)):
        from cgrad._creation import tensor
        return tensor(x)
    return x


def _errstate():
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


_f64 = np.dtype("float64")


def _real_cat(dt):
    return 0 if dt.kind == "b" else (1 if dt.kind in "iu" else 2)


def result_dtype(x, y):
    """torch's type promotion for x (ndarray) with y (ndarray or Python scalar): categories
    bool < integer < float; a Python scalar or a 0-d tensor only raises the category."""
    cx = _real_cat(x.dtype)
    if not isinstance(y, np.ndarray):
        cy = 0 if isinstance(y, (bool, np.bool_)) else (1 if isinstance(y, (int, np.integer))
                                                       else 2)
        if cy > cx:
            return _dtype.get_default_dtype() if cy == 2 else np.dtype(np.int64)
        return x.dtype
    cy = _real_cat(y.dtype)
    if (x.ndim > 0) == (y.ndim > 0):
        if cx == cy:
            return np.promote_types(x.dtype, y.dtype)
        return x.dtype if cx > cy else y.dtype
    d, z = (x, y) if x.ndim > 0 else (y, x)
    if _real_cat(z.dtype) > _real_cat(d.dtype):
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


def _scalar_tensor(s):
    return _wrap(np.asarray(s, dtype=_scalar_dtype(s)))
