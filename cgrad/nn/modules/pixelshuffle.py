"""PixelShuffle, PixelUnshuffle and ChannelShuffle (over F.pixel_shuffle, F.pixel_unshuffle,
F.channel_shuffle)."""
from __future__ import annotations

from cgrad.nn import functional as F
from cgrad.nn.modules.module import Module

__all__ = ["ChannelShuffle", "PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)``."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """The channels of ``(N, C, *)`` read as ``(groups, C / groups)`` and transposed."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
