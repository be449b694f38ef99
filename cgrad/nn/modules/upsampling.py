"""UpsamplingNearest2d and UpsamplingBilinear2d: Upsample with a fixed mode (bilinear with
align_corners=True), as torch."""
from __future__ import annotations

from cgrad.nn import functional as F
from cgrad.nn.modules.pooling import Upsample

__all__ = ["UpsamplingBilinear2d", "UpsamplingNearest2d"]


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour 2-D upsampling (``Upsample(mode='nearest')``)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)
