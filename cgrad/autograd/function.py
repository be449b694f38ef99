"""cgrad.autograd.Function: custom differentiable operations, torch's API.

The node created by ``apply`` is the ``ctx`` (``y.grad_fn is ctx``); its class is generated
per Function subclass and named ``<ClassName>Backward``.
"""
from __future__ import annotations


from cgrad._warn import warn as _warn
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

    def __init_subclass__(cls, **kwargs: object) -> None:   # typed: users' subclasses are
        super().__init_subclass__(**kwargs)                     # checked by mypy --strict
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
        else:
            # ctx.__dict__ / vars(ctx) flush first (Note [Untracked graphs] in _C_untracked.pxi)
            ns["__dict__"] = _C._node_dict
        node_cls = type(name, (BackwardCFunction,), ns)
        cls._backward_cls = node_cls
        _C._register_function(cls, node_cls, split, builtin)

    def __init__(self, *args, **kwargs):
        _warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are "
            "all static, so you should invoke them on the class itself. Instantiating an "
            "autograd function will raise an error in a future version of cgrad.",
            DeprecationWarning)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "help(cgrad.autograd.Function))")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Define the forward of the custom autograd Function (override it).

        Either ``forward(ctx, *args, **kwargs)``, with the context first, or
        ``forward(*args, **kwargs)`` together with :meth:`setup_context`. It can take any
        Python objects, runs with grad mode off, and returns a Tensor, an ndarray or a tuple
        of them. Tensors needed by backward are saved with ``ctx.save_for_backward``; other
        objects can be stored as attributes of ctx (``ctx.dim = dim``)."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Fill ctx after a ``forward(*args)`` that takes no ctx (override it to use that
        form).

        Args:
            ctx: the context (the node), as received by backward.
            inputs (tuple): the arguments forward was called with.
            output: what forward returned."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Define the gradient formula for reverse-mode differentiation (override it).

        Receives ctx, then one gradient per output of forward (w.r.t. that output), and
        returns one gradient per argument of forward (w.r.t. that argument): a Tensor, or
        None for an argument that is not a tensor or needs no gradient
        (``ctx.needs_input_grad``). It runs with grad mode equal to ``create_graph``, so a
        backward written with cgrad ops can itself be differentiated."""
        raise NotImplementedError(_NO_BACKWARD)

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Define the formula for forward-mode differentiation (not supported by cgrad's
        engine: forward-mode AD is not implemented)."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD.")

    vjp = backward

    # The context API, as torch's Function shows it (it inherits FunctionCtx): these are the
    # methods of the ctx (a cgrad._C.Node) that forward, setup_context and backward receive.
    save_for_backward = _C.Node.save_for_backward
    saved_tensors = _C.Node.saved_tensors
    needs_input_grad = _C.Node.needs_input_grad
    mark_dirty = _C.Node.mark_dirty
    mark_non_differentiable = _C.Node.mark_non_differentiable
    set_materialize_grads = _C.Node.set_materialize_grads


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
