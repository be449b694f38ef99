"""The compiled fused kernels: ``FUSED`` is cgrad._fused (csrc/cg_fused.c, cg_gemm.c,
cg_attn.c), or None when the extension is not built; ``ON`` is False when it is missing or
``CGRAD_NO_FUSED_EXT=1`` was set at import (the NumPy paths then run everywhere: the
recurrent layers, GELU, layer_norm, attention, the float32 GEMM). The modules that use a
kernel keep their own flag (``_FUSED``, ``_F32_EXT``, ...) taken from ``ON``, which tests
switch one at a time."""
from __future__ import annotations

import os

try:
    from cgrad import _fused as FUSED
except ImportError:                       # built without the extension: NumPy only
    FUSED = None

ON = FUSED is not None and os.environ.get("CGRAD_NO_FUSED_EXT", "") in ("", "0")
