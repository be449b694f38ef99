"""Op library module (see cgrad/ops/__init__.py for the conventions)."""
from __future__ import annotations

# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {}
