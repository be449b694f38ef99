"""Top-level tensor functions (cgrad.matmul, cgrad.exp, ...)."""
from __future__ import annotations

from cgrad import ops as _ops

__all__ = ["matmul", "mm", "mv", "dot", "t", "transpose", "exp", "log", "sum", "mean",
           "reshape", "neg", "add", "sub", "mul", "div", "pow"]


def matmul(a, b):
    """Matrix product with torch.matmul's broadcasting rules."""
    return _ops.matmul(a, b)


def mm(a, b):
    return _ops.Mm.apply(a, b)


def mv(a, b):
    return _ops.Mv.apply(a, b)


def dot(a, b):
    return _ops.Dot.apply(a, b)


def t(a):
    return a.t()


def transpose(a, dim0, dim1):
    return a.transpose(dim0, dim1)


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
    return a + (b * alpha if alpha != 1 else b)


def sub(a, b, alpha=1):
    return a - (b * alpha if alpha != 1 else b)


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def pow(a, b):
    return a ** b
