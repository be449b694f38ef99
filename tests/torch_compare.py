"""Run one snippet against cgrad and against torch and compare what each did.

A case is (code, phrase): `code` is Python with the module bound to `T` (and numpy to `np`)
that sets `r` (or raises); `phrase` is the key phrase of the expected error message (None
for a case that must succeed). `outcome(T, code)` returns a plain, comparable description
of what happened: ("ok", value) with tensors, dtypes, devices, layouts and the legacy type
names reduced to plain Python values, or ("raised", exception type name, message).
torch's own warnings are silenced (the suite turns warnings into errors).
"""
from __future__ import annotations

import math
import warnings

import numpy as np


def _dtype_name(dt):
    return str(dt).replace("torch.", "")


def plain(v, T):
    """A comparable stand-in for a result of cgrad or torch."""
    if isinstance(v, T.Tensor):
        if v.is_sparse:
            return ("sparse", _dtype_name(v.dtype), tuple(v.shape),
                    plain(v.to_dense(), T))
        a = v.detach().numpy()
        vals = a.tolist()
        return ("tensor", _dtype_name(v.dtype), tuple(v.shape), vals, bool(v.requires_grad),
                type(v.grad_fn).__name__ if v.grad_fn is not None else None)
    if isinstance(v, T.device):
        return ("device", v.type, v.index, str(v), repr(v), hash(v))
    if isinstance(v, T.dtype if hasattr(T, "dtype") and isinstance(T.dtype, type) else
                  np.dtype):
        return ("dtype", _dtype_name(v))
    if isinstance(v, np.dtype):
        return ("dtype", str(v))
    if isinstance(v, str):
        return v.replace("torch.", "cgrad.")
    if isinstance(v, (tuple, list)):
        if type(v).__name__ == "Size":
            return ("size", tuple(v))
        return type(v)(plain(x, T) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if type(v).__name__ in ("layout", "memory_format"):
        return ("enum", str(v).replace("torch.", "cgrad."))
    return v


def outcome(T, code, extra=None):
    env = {"T": T, "np": np, "math": math}
    env.update(extra or {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(code, env)
        except Exception as e:      # noqa: BLE001 - the outcome is the point
            return ("raised", type(e).__name__, str(e))
    return ("ok", plain(env.get("r"), T))


def same_kind(exc_name, other):
    """cgrad's error classes that are two of Python's at once (NotATensorError is a TypeError
    and an AttributeError) count as either."""
    return exc_name == other or {exc_name, other} <= {"TypeError", "NotATensorError"}


def check(cg, th, phrase):
    """cgrad's outcome `cg` is torch's `th`: the same value, or the same exception type with
    `phrase` in both messages (phrase None: no error expected)."""
    if phrase is None:
        assert cg[0] == "ok", cg
        assert th[0] == "ok", th
        assert cg == th, (cg, th)
        return
    assert cg[0] == "raised", cg
    assert th[0] == "raised", th
    assert same_kind(cg[1], th[1]), (cg, th)
    assert phrase in cg[2], (phrase, cg)
    assert phrase in th[2].replace("torch.", "cgrad.").replace("Torch", "cgrad"), (phrase, th)
