"""Dropout."""
from __future__ import annotations

from cgrad.nn import functional as F
from cgrad.nn.modules.module import Module

__all__ = ["Dropout"]


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training mode, zero each element with probability ``p`` and scale the others by
    1/(1-p) (mask from cgrad's generator); in eval mode, return the input unchanged."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)
