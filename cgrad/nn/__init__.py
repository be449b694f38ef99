"""cgrad.nn: neural-network building blocks."""
from cgrad.nn import functional  # noqa: F401
