"""Padding modules over F.pad: ZeroPad1d/2d, ConstantPad1d/2d, ReflectionPad1d/2d,
ReplicationPad1d/2d, CircularPad1d/2d, with torch's attributes and repr."""
from __future__ import annotations

import numbers

from cgrad.nn import functional as F
from cgrad.nn.modules.module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "ConstantPad1d", "ConstantPad2d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "ZeroPad1d", "ZeroPad2d"]


def _pads(padding, n):
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * (2 * n)
    return tuple(padding)


class _ConstantPadNd(Module):
    _n = 1

    def __init__(self, padding, value):
        super().__init__()
        self.value = value
        self.padding = _pads(padding, self._n)

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with a constant ``value``."""
    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with a constant ``value``."""
    _n = 2


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    _n = 1
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _pads(padding, self._n)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim by reflection."""
    _n, _mode = 1, "reflect"


class ReflectionPad2d(_ModePadNd):
    """Pad the last two dims by reflection."""
    _n, _mode = 2, "reflect"


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim by repeating the edge."""
    _n, _mode = 1, "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last two dims by repeating the edge."""
    _n, _mode = 2, "replicate"


class CircularPad1d(_ModePadNd):
    """Pad the last dim circularly."""
    _n, _mode = 1, "circular"


class CircularPad2d(_ModePadNd):
    """Pad the last two dims circularly."""
    _n, _mode = 2, "circular"
