"""Identity, Linear and Bilinear (over F.linear and F.bilinear)."""
from __future__ import annotations

import math

from cgrad.nn import functional as F
from cgrad.nn.functional._linear import bilinear  # re-exported: it was defined here
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
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
