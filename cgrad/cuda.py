"""cgrad.cuda: torch.cuda as a build of torch without CUDA has it.

cgrad runs on the CPU only, so code written for torch that asks about CUDA takes its CPU
branch: ``is_available()`` is False, ``device_count()`` 0, the seeding and cache functions
are no-ops, and the functions that need a device raise what torch built without CUDA raises
(``AssertionError("... not compiled with CUDA enabled")``).
"""
from __future__ import annotations

import builtins
from typing import Any, NoReturn

from cgrad import _device

__all__ = ["is_available", "device_count", "is_initialized", "init", "current_device",
           "set_device", "get_device_name", "get_device_capability", "get_device_properties",
           "synchronize", "empty_cache", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
           "set_rng_state_all", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_stats", "mem_get_info", "is_bf16_supported",
           "get_arch_list", "ipc_collect"]


def _no_cuda() -> AssertionError:
    return AssertionError(_device.NO_CUDA)


def is_available() -> bool:
    """False: cgrad has no CUDA support."""
    return False


def device_count() -> int:
    """0: no CUDA device."""
    return 0


def is_initialized() -> bool:
    """False: CUDA is never initialised."""
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: no CUDA device."""
    return False


def get_arch_list() -> list[str]:
    """[]: cgrad is built for no CUDA architecture."""
    return []


def init() -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def current_device() -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def set_device(device: Any) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA (a non-CUDA device is a ValueError)."""
    d = _device.parse(device, "set_device") if not isinstance(device, builtins.int) else None
    if d is not None and d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    raise _no_cuda()


def get_device_name(device: Any = None) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def get_device_capability(device: Any = None) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def get_device_properties(device: Any = None) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def synchronize(device: Any = None) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def ipc_collect() -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def mem_get_info(device: Any = None) -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def empty_cache() -> None:
    """A no-op: there is no CUDA cache."""


def manual_seed(seed: Any) -> None:
    """A no-op (torch seeds CUDA lazily, when there is one); the seed is checked as int()."""
    builtins.int(seed)


def manual_seed_all(seed: Any) -> None:
    """A no-op (no CUDA device); the seed is checked as int()."""
    builtins.int(seed)


def seed() -> None:
    """A no-op (no CUDA device)."""


def seed_all() -> None:
    """A no-op (no CUDA device)."""


def initial_seed() -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def get_rng_state(device: Any = "cuda") -> NoReturn:
    """Raises: cgrad is not compiled with CUDA."""
    raise _no_cuda()


def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    """A no-op (torch defers it until CUDA is initialised, which never happens)."""


def get_rng_state_all() -> list[Any]:
    """[]: no CUDA device."""
    return []


def set_rng_state_all(new_states: Any) -> None:
    """A no-op (no CUDA device)."""


def memory_allocated(device: Any = None) -> int:
    """0: no CUDA memory."""
    return 0


def max_memory_allocated(device: Any = None) -> int:
    """0: no CUDA memory."""
    return 0


def memory_reserved(device: Any = None) -> int:
    """0: no CUDA memory."""
    return 0


def max_memory_reserved(device: Any = None) -> int:
    """0: no CUDA memory."""
    return 0


def memory_stats(device: Any = None) -> dict[str, Any]:
    """{}: no CUDA memory."""
    return {}
