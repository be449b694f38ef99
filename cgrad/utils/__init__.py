"""cgrad.utils: helpers with torch.utils' names (``cgrad.utils.checkpoint``,
``cgrad.utils.data``)."""
from cgrad.utils import checkpoint  # noqa: F401
from cgrad.utils import data  # noqa: F401

__all__ = ["checkpoint", "data"]
