"""cgrad.accelerator: torch.accelerator as a build of torch without any accelerator has it.

torch's tutorials pick their device with ``torch.accelerator.current_accelerator().type if
torch.accelerator.is_available() else "cpu"``; cgrad runs on the CPU only, so
``is_available()`` is False, ``current_accelerator()`` None and ``device_count()`` 0, and the
functions that need a device raise what torch raises without one
(``RuntimeError("Cannot access accelerator device when none is available.")``).
"""
from __future__ import annotations

from typing import Any, NoReturn

from cgrad import _device, _warn

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "current_device_idx", "set_device_index", "set_device_idx", "device_index",
           "synchronize", "empty_cache", "empty_host_cache", "get_device_capability",
           "get_memory_info", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "memory_stats", "reset_peak_memory_stats",
           "reset_accumulated_memory_stats"]


def _none() -> RuntimeError:
    return RuntimeError(_device.NO_ACCELERATOR)


def is_available() -> bool:
    """False: cgrad has no accelerator."""
    return False


def current_accelerator(check_available: bool = False) -> _device.device | None:
    """None: cgrad is built for no accelerator."""
    return None


def device_count() -> int:
    """0: no accelerator device."""
    return 0


def current_device_index() -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def current_device_idx() -> NoReturn:
    """Deprecated alias of current_device_index (warns, as torch's)."""
    _warn.warn("Use `current_device_index` instead.", FutureWarning)
    raise _none()


def set_device_index(device: Any, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def set_device_idx(device: Any, /) -> NoReturn:
    """Deprecated alias of set_device_index (warns, as torch's)."""
    _warn.warn("Use `set_device_index` instead.", FutureWarning)
    raise _none()


class device_index:
    """Context manager for the current accelerator's device index: None is a no-op; an index
    raises on entry (there is no accelerator)."""

    def __init__(self, device: int | None, /) -> None:
        self.idx = device
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx is not None:
            raise _none()

    def __exit__(self, *exc_info: object) -> None:
        return None


def synchronize(device: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def empty_cache() -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def empty_host_cache() -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def get_device_capability(device: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def get_memory_info(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def memory_allocated(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def max_memory_allocated(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def memory_reserved(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def max_memory_reserved(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def memory_stats(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def reset_peak_memory_stats(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()


def reset_accumulated_memory_stats(device_index: Any = None, /) -> NoReturn:
    """Raises: there is no accelerator."""
    raise _none()
