"""Conv1d and Conv2d (over F.conv1d / F.conv2d), with torch's parameters, init and repr;
Unfold and Fold (over F.unfold / F.fold)."""
from __future__ import annotations

import math
import numbers

from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.modules.module import Module
from cgrad.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Fold", "Unfold"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(v, n):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    return tuple(v)


class _ConvNd(Module):
    """The shared part of Conv1d/Conv2d: weight ``(out, in/groups, *kernel_size)`` drawn by
    kaiming_uniform_(a=sqrt(5)), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as torch."""
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        n = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{valid_strings}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode={padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = False
        self.output_padding = (0,) * n
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            rev = [0, 0] * n
            if padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size, range(n - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    rev[2 * i] = left
                    rev[2 * i + 1] = total - left
        else:
            rev = [p for p in reversed(self.padding) for _ in range(2)]
        self._reversed_padding_repeated_twice = rev
        from cgrad._creation import empty
        self.weight = Parameter(empty((out_channels, in_channels // groups) + self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty((out_channels,), dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        n = self._nd
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_forward(self, input, weight, bias):
        fn = F.conv1d if self._nd == 1 else F.conv2d
        if self.padding_mode != "zeros":
            return fn(F.pad(input, self._reversed_padding_repeated_twice,
                            mode=self.padding_mode),
                      weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C_in, L)``: weight ``(C_out, C_in/groups, k)``."""
    _nd = 1


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, C_in, H, W)``: weight ``(C_out, C_in/groups, kh, kw)``."""
    _nd = 2


class Unfold(Module):
    """Sliding blocks of ``(N, C, H, W)`` as columns ``(N, C * kh * kw, L)`` (F.unfold)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Columns ``(N, C * kh * kw, L)`` summed back into ``(N, C, *output_size)`` (F.fold)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
