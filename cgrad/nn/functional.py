"""cgrad.nn.functional: torch.nn.functional's names on cgrad ops."""
from __future__ import annotations

__all__: list = []
