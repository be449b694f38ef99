"""Flatten and Unflatten."""
from __future__ import annotations

from cgrad.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


def _flatten(x, start_dim, end_dim):
    shape = tuple(x.shape)
    nd = len(shape)
    if nd == 0:
        return x.reshape(1)
    s = start_dim + nd if start_dim < 0 else start_dim
    e = end_dim + nd if end_dim < 0 else end_dim
    if not (0 <= s < nd):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}]"
                         f", but got {start_dim})")
    if not (0 <= e < nd):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}]"
                         f", but got {end_dim})")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return x.reshape(shape[:s] + (n,) + shape[e + 1:])


class Flatten(Module):
    """Flatten dims ``start_dim`` .. ``end_dim`` into one (a view where possible)."""

    __constants__ = ["start_dim", "end_dim"]

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return _flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim ``dim`` into ``unflattened_size`` (which may contain one -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(unflattened_size, (tuple, list)):
            for idx, elem in enumerate(unflattened_size):
                if not isinstance(elem, int):
                    raise TypeError("unflattened_size must be tuple of ints, but found element "
                                    f"of type {type(elem).__name__} at pos {idx}")
        else:
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        shape = tuple(input.shape)
        nd = len(shape)
        d = self.dim + nd if self.dim < 0 else self.dim
        if not (0 <= d < nd):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {self.dim})")
        sizes = tuple(self.unflattened_size)
        known = 1
        for s in sizes:
            if s != -1:
                known *= s
        if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) or \
                (-1 in sizes and (known == 0 or shape[d] % known)):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to "
                               f"the size of dim {self.dim} ({shape[d]}) in the input tensor")
        return input.reshape(shape[:d] + sizes + shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
