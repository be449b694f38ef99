"""Grad-mode context managers (thread-local state lives in the C extension)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar, overload

import numpy as np

from cgrad import _C
from cgrad._warn import warn as _warn

# the user-facing methods are annotated: `with cgrad.no_grad():` and `@cgrad.no_grad()` are
# checked by mypy --strict in users' programs (tests/typing/user_program.py)
_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]

is_grad_enabled = _C.is_grad_enabled


_CLASS_DECORATED = (
    "Decorating classes is deprecated and will be disabled in future versions. You should "
    "only decorate functions or methods. To preserve the current behavior of class "
    "decoration, you can directly decorate the `__init__` method and nothing else.")


def _wrap_generator(factory, func):
    """A generator function whose every step (the first one, each send, throw and close)
    runs inside a fresh context manager from `factory`, while the caller's code between two
    steps runs in the caller's own mode."""

    @functools.wraps(func)
    def generator(*args, **kwargs):
        inner = func(*args, **kwargs)
        try:
            with factory():
                value = inner.send(None)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    with factory():
                        inner.close()
                    raise
                except BaseException as exc:        # thrown in by the caller: pass it on
                    with factory():
                        value = inner.throw(exc)
                else:
                    with factory():
                        value = inner.send(sent)
        except StopIteration as stop:
            return stop.value

    return generator


class _DecoratorContextManager:
    """A context manager that is also a decorator (as torch's): a decorated function runs
    inside a fresh copy of it (``clone``) on each call; a generator function runs each of its
    steps inside one. A coroutine function is wrapped as a plain function (only the call that
    creates the coroutine is inside, as in torch). Decorating a class is deprecated, as in
    torch: it warns, and constructing an instance runs inside."""

    def __call__(self, func: _F) -> _F:
        if inspect.isclass(func):
            _warn(_CLASS_DECORATED, FutureWarning)
            cls = func
            func = lambda *args, **kwargs: cls(*args, **kwargs)  # noqa: E731
        factory = self.clone
        if inspect.isgeneratorfunction(func):
            return _wrap_generator(factory, func)  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with factory():
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    def clone(self):
        return self.__class__()


_M = TypeVar("_M", bound="_NoParamDecoratorContextManager")


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Usable as a decorator without parentheses too: ``@no_grad`` as ``@no_grad()``."""

    @overload
    def __new__(cls: type[_M], orig_func: None = None) -> _M: ...

    @overload
    def __new__(cls, orig_func: _F) -> _F: ...  # type: ignore[misc]

    def __new__(cls, orig_func=None):  # type: ignore[no-untyped-def]
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):
    """Disable gradient recording in this thread (context manager or decorator).

    >>> import cgrad
    >>> x = cgrad.tensor([1.0], requires_grad=True)
    >>> with cgrad.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def __enter__(self) -> None:
        self.prev = _C._set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        _C._set_grad_enabled(self.prev)


class enable_grad(_NoParamDecoratorContextManager):
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
    """Like no_grad (cgrad has no separate inference tensors yet). Also a decorator, with or
    without parentheses."""

    @overload
    def __new__(cls, mode: bool = True) -> inference_mode: ...

    @overload
    def __new__(cls, mode: _F) -> _F: ...  # type: ignore[misc]

    def __new__(cls, mode=True):  # type: ignore[no-untyped-def]
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

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
