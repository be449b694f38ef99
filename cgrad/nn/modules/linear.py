"""Identity, Linear and Bilinear."""
from __future__ import annotations

import math

from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.modules.module import Module
from cgrad.nn.parameter import Parameter

__all__ = ["Identity", "Linear", "Bilinear", "bilinear"]


def _empty(shape, dtype, device=None):
    """cgrad.empty(shape): torch's errors for a bad size, dtype or device."""
    from cgrad._creation import empty
    return empty(tuple(shape), dtype=dtype, device=device)


class Identity(Module):
    """Returns its input; any constructor arguments are ignored."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b with W of shape (out_features, in_features), initialised as torch does
    (kaiming_uniform_ with a=sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)), and the same bound for
    the bias)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_empty((out_features, in_features), dtype, device))
        if bias:
            self.bias = Parameter(_empty((out_features,), dtype, device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def bilinear(input1, input2, weight, bias=None):
    """y[..., k] = x1 A_k x2^T + b_k with A = weight of shape (out, in1, in2) (torch's
    F.bilinear), computed as one matmul: (x1 @ A viewed as (in1, out*in2)) * x2, summed."""
    out, in1, in2 = weight.shape
    s1, s2 = input1.shape, input2.shape
    if s1[:-1] != s2[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(s1[:-1])} and {list(s2[:-1])}")
    if s1[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {s1[-1]} "
                           f"but expected {in1}")
    if s2[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {s2[-1]} "
                           f"but expected {in2}")
    lead = tuple(s1[:-1])
    a = input1.reshape(-1, in1)
    c = input2.reshape(-1, in2)
    n = a.shape[0]
    t = a.matmul(weight.permute(1, 0, 2).reshape(in1, out * in2))
    y = (t.reshape(n, out, in2) * c.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (out,))


class Bilinear(Module):
    """y = x1^T A x2 + b for each output feature; weight (out, in1, in2) and bias drawn from
    U(-1/sqrt(in1), 1/sqrt(in1)) as torch does."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_empty((out_features, in1_features, in2_features), dtype,
                                       device))
        if bias:
            self.bias = Parameter(_empty((out_features,), dtype, device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
