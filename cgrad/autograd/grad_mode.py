"""Grad-mode context managers (thread-local state lives in the C extension)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

import numpy as np

from cgrad import _C

# the user-facing methods are annotated: `with cgrad.no_grad():` and `@cgrad.no_grad()` are
# checked by mypy --strict in users' programs (tests/typing/user_program.py)
_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]

is_grad_enabled = _C.is_grad_enabled


class _DecoratorContextManager:
    """Context manager usable as a decorator (also on generator functions)."""

    def __call__(self, func: _F) -> _F:
        if inspect.isclass(func):
            raise RuntimeError("grad-mode decorators cannot decorate classes")
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def gen(*args, **kwargs):
                g = func(*args, **kwargs)
                with self.clone():
                    try:
                        resp = g.send(None)
                    except StopIteration as e:
                        return e.value
                while True:
                    try:
                        req = yield resp
                    except GeneratorExit:
                        with self.clone():
                            g.close()
                        raise
                    with self.clone():
                        try:
                            resp = g.send(req)
                        except StopIteration as e:
                            return e.value
            return gen  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Disable gradient recording in this thread (context manager or decorator).

    >>> import cgrad
    >>> x = cgrad.tensor([1.0], requires_grad=True)
    >>> with cgrad.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _C._set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self.prev)


class enable_grad(_DecoratorContextManager):
    """Enable gradient recording in this thread (context manager or decorator)."""

    def __enter__(self) -> None:
        self.prev = _C._set_grad_enabled(True)

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode; works as a function call, a context manager and a decorator."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError("set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self.mode = bool(mode)
        self.prev = _C._set_grad_enabled(self.mode)

    def __call__(self, func: _F) -> _F:
        _C._set_grad_enabled(self.prev)
        return super().__call__(func)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self.prev)

    def clone(self):
        return self.__class__(self.mode)


_inference_depth = __import__("threading").local()


def is_inference_mode_enabled() -> bool:
    return getattr(_inference_depth, "n", 0) > 0


class inference_mode(_DecoratorContextManager):
    """Like no_grad (cgrad has no separate inference tensors yet)."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        self.prev = _C._set_grad_enabled(not self.mode and _C.is_grad_enabled())
        if self.mode:
            _inference_depth.n = getattr(_inference_depth, "n", 0) + 1

    def __exit__(self, *exc: object) -> None:
        if self.mode:
            _inference_depth.n -= 1
        _C._set_grad_enabled(self.prev)

    def clone(self):
        return self.__class__(self.mode)
