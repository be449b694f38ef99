"""Top-level tensor functions (cgrad.matmul, cgrad.exp, ...)."""
from __future__ import annotations

from cgrad import ops as _ops

# matmul, mm, mv, dot, t, transpose and div are installed from cgrad/ops (linalg_ext, binary)
__all__ = ["exp", "log", "sum", "mean", "reshape", "neg", "add", "sub", "mul", "pow"]


def exp(a):
    return a.exp()


def log(a):
    return a.log()


def sum(a, dim=None, keepdim=False, dtype=None):
    return a.sum(dim, keepdim, dtype)


def mean(a, dim=None, keepdim=False, dtype=None):
    return a.mean(dim, keepdim, dtype)


def reshape(a, shape):
    return a.reshape(shape)


def neg(a):
    return -a


def add(a, b, alpha=1):
    return _ops.elementwise.add_alpha(a, b, alpha)


def sub(a, b, alpha=1):
    return _ops.elementwise.add_alpha(a, b, alpha, True)


def mul(a, b):
    return a * b


def pow(a, b):
    return a ** b
