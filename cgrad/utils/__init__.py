"""cgrad.utils: helpers with torch.utils' names (``cgrad.utils.checkpoint``)."""
from cgrad.utils import checkpoint  # noqa: F401

__all__ = ["checkpoint"]
