"""cgrad.autograd.Function: custom differentiable operations, torch's API.

The node created by ``apply`` is the ``ctx`` (``y.grad_fn is ctx``); its class is generated
per Function subclass and named ``<ClassName>Backward``.
"""
from __future__ import annotations

import warnings

from cgrad import _C

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]

BackwardCFunction = _C.Node
FunctionCtx = _C.Node

_NO_BACKWARD = ("You must implement either the backward or vjp method for your custom "
                "autograd.Function to use it with backward mode AD.")


class Function(_C.FunctionBase):
    r"""Base class for custom differentiable operations.

    Subclasses define ``forward(ctx, *args, **kwargs)`` and ``backward(ctx, *grad_outputs)``
    as static methods (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``)
    and are called through ``apply``::

        >>> import cgrad
        >>> class Double(cgrad.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * 2
        >>> x = cgrad.tensor([1.0], requires_grad=True)
        >>> Double.apply(x).sum().backward(); x.grad
        tensor([2.])
    """

    # Built-in ops set this to torch's node name (e.g. "MulBackward0").
    _node_name: str | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        d = cls.__dict__
        if "vjp" in d and "backward" not in d:
            cls.backward = d["vjp"]
        split = cls.setup_context is not Function.setup_context
        name = cls.__dict__.get("_node_name") or (cls.__name__ + "Backward")
        builtin = cls.__dict__.get("_node_name") is not None
        ns = {
            "_forward_cls": cls,
            "__module__": "builtins" if builtin else "cgrad.autograd.function",
            "__qualname__": name,
        }
        if builtin:
            # as torch's C++ nodes: no instance dict (ops keep private data in ctx._aux),
            # so the node is smaller and cheaper for the cycle collector to walk
            ns["__slots__"] = ()
        node_cls = type(name, (BackwardCFunction,), ns)
        cls._backward_cls = node_cls
        _C._register_function(cls, node_cls, split, builtin)

    def __init__(self, *args, **kwargs):
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are "
            "all static, so you should invoke them on the class itself. Instantiating an "
            "autograd function will raise an error in a future version of cgrad.",
            DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(_NO_BACKWARD)

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD.")

    vjp = backward


class _DelayedError(Function):
    """Identity in forward; its backward raises (torch's DelayedError node)."""

    @staticmethod
    def forward(ctx, msg, n_out, *args):
        ctx._msg = msg
        return tuple(a.detach() for a in args[len(args) - n_out:])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(ctx._msg)


_ONCE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn):
    """Decorator for a Function's backward that is not itself differentiable.

    backward runs under no_grad; when the caller asked for a graph (create_graph=True) and a
    gradient it received requires grad, the results are attached to a node whose backward
    raises ``RuntimeError: trying to differentiate twice a function that was marked with
    @once_differentiable`` (torch's behaviour)."""
    import functools

    from cgrad import _C
    from cgrad.autograd.grad_mode import no_grad

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not _C.is_grad_enabled():
            return outputs
        inputs = [a for a in args if isinstance(a, _C.TensorBase) and a.requires_grad]
        if not inputs:
            return outputs
        tup = outputs if isinstance(outputs, tuple) else (outputs,)
        idx = [i for i, o in enumerate(tup) if isinstance(o, _C.TensorBase)
               and o.dtype.kind == "f"]
        if not idx:
            return outputs
        # As torch, the error node hangs off detached copies that require grad, not off the
        # real graph: a backward() through the results reaches it and raises, but grad()
        # w.r.t. the real inputs never runs it (its inputs are on no path to them)
        fakes = [tup[i].detach().requires_grad_() for i in idx]
        delayed = _DelayedError.apply(_ONCE_MSG, len(idx), *fakes)
        if not isinstance(delayed, tuple):
            delayed = (delayed,)
        res = list(tup)
        for k, i in enumerate(idx):
            res[i] = delayed[k]
        return tuple(res) if isinstance(outputs, tuple) else res[0]
    return wrapper
