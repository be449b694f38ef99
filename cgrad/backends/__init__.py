"""cgrad.backends: the switches programs written for torch set (``cudnn.deterministic``,
``cudnn.benchmark``, ``cuda.matmul.allow_tf32``, ...) and the availability queries
(``mps.is_available()``), as a build of torch without CUDA or MPS has them. cgrad computes
with NumPy on the CPU: the switches are recorded and have no effect."""
from __future__ import annotations

import builtins
import sys
import types

__all__ = ["cudnn", "cuda", "mps", "mkldnn", "openmp"]


class _Flags(types.ModuleType):
    """A module whose boolean switches are checked on assignment, as torch's are."""

    _SWITCHES: dict = {}

    def __setattr__(self, name, value):
        setter = self._SWITCHES.get(name)
        if setter is not None and not isinstance(value, builtins.bool):
            raise RuntimeError(f"{setter} expects a bool, but got {type(value).__name__}")
        super().__setattr__(name, value)


def _module(name, cls=types.ModuleType, doc=""):
    m = cls(f"{__name__}.{name}", doc)
    sys.modules[m.__name__] = m
    return m


class _CudnnModule(_Flags):
    _SWITCHES = {"deterministic": "set_deterministic_cudnn", "benchmark": "set_benchmark_cudnn",
                 "enabled": "set_enabled_cudnn", "allow_tf32": "set_allow_tf32_cudnn"}


cudnn = _module("cudnn", _CudnnModule, "cuDNN switches (no effect: cgrad has no cuDNN).")
cudnn.enabled = True
cudnn.benchmark = False
cudnn.deterministic = False
cudnn.allow_tf32 = True
cudnn.benchmark_limit = 10
cudnn.is_available = lambda: False
cudnn.is_available.__doc__ = "False: cgrad has no cuDNN."
cudnn.version = lambda: None
cudnn.version.__doc__ = "None: cgrad has no cuDNN."

cuda = _module("cuda", doc="CUDA switches (no effect: cgrad has no CUDA).")
cuda.matmul = types.SimpleNamespace(allow_tf32=False,
                                    allow_fp16_reduced_precision_reduction=True,
                                    allow_bf16_reduced_precision_reduction=True)
cuda.is_built = lambda: False
cuda.is_built.__doc__ = "False: cgrad is not built with CUDA."

mps = _module("mps", doc="Apple MPS queries (cgrad has no MPS backend).")
mps.is_available = lambda: False
mps.is_available.__doc__ = "False: cgrad has no MPS backend."
mps.is_built = lambda: False
mps.is_built.__doc__ = "False: cgrad is not built with MPS."

mkldnn = _module("mkldnn", doc="oneDNN switches (no effect: cgrad does not use oneDNN).")
mkldnn.enabled = True
mkldnn.is_available = lambda: False
mkldnn.is_available.__doc__ = "False: cgrad does not use oneDNN."

openmp = _module("openmp", doc="OpenMP query.")
openmp.is_available = lambda: False
openmp.is_available.__doc__ = "False: cgrad's kernels use POSIX threads, not OpenMP."
