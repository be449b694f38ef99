"""Conv1d and Conv2d (over F.conv1d / F.conv2d), with torch's parameters, init and repr;
Unfold and Fold (over F.unfold / F.fold)."""
from __future__ import annotations

import math
import numbers

from cgrad.nn import functional as F
from cgrad.nn import init
from cgrad.nn.modules.module import Module
from cgrad.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Fold", "Unfold"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(v, n):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    return tuple(v)


class _ConvNd(Module):
    """The shared part of Conv1d/Conv2d: weight ``(out, in/groups, *kernel_size)`` drawn by
    kaiming_uniform_(a=sqrt(5)), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as torch
    (ConvTranspose1d/2d: weight ``(in, out/groups, *kernel_size)``)."""
    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
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
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n)
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
        wshape = ((in_channels, out_channels // groups) if self._transposed
                  else (out_channels, in_channels // groups))
        self.weight = Parameter(empty(wshape + self.kernel_size, dtype=dtype, device=device))
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


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d/2d (over F.conv_transpose1d/2d): only padding_mode='zeros', and
    ``forward(input, output_size=None)`` picks the output_padding that gives output_size."""
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{self.__class__.__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size, stride, padding, kernel_size,
                        num_spatial_dims, dilation=None):
        if output_size is None:
            return self.output_padding
        has_batch = input.dim() == num_spatial_dims + 2
        output_size = list(output_size)
        if len(output_size) == num_spatial_dims + 2 or (
                len(output_size) == num_spatial_dims + 1 and not has_batch):
            output_size = output_size[-num_spatial_dims:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, "
                             f"output_size must have {num_spatial_dims} or "
                             f"{num_spatial_dims + 2} elements (got {len(output_size)})")
        spatial = input.shape[-num_spatial_dims:]
        lo, hi = [], []
        for d in range(num_spatial_dims):
            dil = 1 if dilation is None else dilation[d]
            m = ((spatial[d] - 1) * stride[d] - 2 * padding[d] + dil * (kernel_size[d] - 1)
                 + 1)
            lo.append(m)
            hi.append(m + stride[d] - 1)
        for d in range(num_spatial_dims):
            if not lo[d] <= output_size[d] <= hi[d]:
                raise ValueError(f"requested an output size of {tuple(output_size)}, but valid "
                                 f"sizes range from {lo} to {hi} (for an input of "
                                 f"{spatial})")
        return tuple(output_size[d] - lo[d] for d in range(num_spatial_dims))

    def forward(self, input, output_size=None):
        n = self._nd
        op = self._output_padding(input, output_size, self.stride, self.padding,
                                  self.kernel_size, n, self.dilation)
        fn = F.conv_transpose1d if n == 1 else F.conv_transpose2d
        return fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                  self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over ``(N, C_in, L)``: weight ``(C_in, C_out/groups, k)``."""
    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over ``(N, C_in, H, W)``: weight
    ``(C_in, C_out/groups, kh, kw)``."""
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
