"""Top-level tensor functions (cgrad.matmul, cgrad.exp, ...)."""
from __future__ import annotations

from cgrad import ops as _ops

# matmul, mm, mv, dot, t, transpose and div are installed from cgrad/ops (linalg, arithmetic)
__all__ = ["exp", "log", "sum", "mean", "reshape", "neg", "add", "sub", "mul", "pow"]


def exp(input):
    return input.exp()


def log(input):
    return input.log()


def sum(input, dim=None, keepdim=False, *, dtype=None):
    return input.sum(dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    return input.mean(dim, keepdim, dtype=dtype)


def reshape(input, shape):
    return input.reshape(shape)


def neg(input):
    return -input


def add(input, other, *, alpha=1):
    return _ops.arithmetic.add_alpha(input, other, alpha)


def sub(input, other, *, alpha=1):
    return _ops.arithmetic.add_alpha(input, other, alpha, True)


def mul(input, other):
    return input * other


def pow(input, exponent):
    return input ** exponent
