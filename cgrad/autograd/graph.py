"""cgrad.autograd.graph: saved-tensor hooks (torch.autograd.graph's API).

``saved_tensors_hooks(pack_hook, unpack_hook)``: while active (in this thread), every tensor a
Function saves for backward, custom or built-in, input or output, is passed to ``pack_hook``
at save time and only its result is kept; ``unpack_hook(packed)`` must give back a Tensor when
backward (or ``ctx.saved_tensors``) needs it. Contexts nest; the innermost one applies.
Version checks still apply: a tensor modified in place after it was packed raises torch's
error when unpacked.

``disable_saved_tensors_hooks(error_message)``: while active, entering saved_tensors_hooks
raises ``RuntimeError(error_message)``.

When no hooks are active, saving costs nothing extra: the engine tests one thread-local C
counter.
"""
from __future__ import annotations

import contextlib
from typing import NamedTuple

from cgrad import _C
from cgrad._C import Node, RemovableHandle  # noqa: F401

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node",
           "get_gradient_edge", "GradientEdge", "increment_version"]


class saved_tensors_hooks:
    """Context manager installing pack/unpack hooks for saved tensors (thread-local)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._push_saved_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *args):
        _C._pop_saved_hooks()


class save_on_cpu(saved_tensors_hooks):
    """torch's offloading hooks; on a CPU-only library the tensors are simply kept."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t, lambda t: t)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Within this context, registering saved-tensor hooks raises RuntimeError(error_message).
    Entering it while saved-tensor hooks are active raises that error too (torch)."""
    if _C._current_saved_hooks() is not None:
        raise RuntimeError(error_message)
    prev = _C._set_hooks_disabled(error_message)
    try:
        yield
    finally:
        _C._set_hooks_disabled(prev)


class GradientEdge(NamedTuple):
    """Where a tensor's gradient enters the graph: input ``output_nr`` of ``node``.

    ``autograd.grad`` and ``autograd.backward`` accept it wherever they accept a tensor (as
    an output, or as an input, whose gradient is then the gradient flowing into that
    edge). An edge taken before an in-place op keeps pointing at the history the tensor had
    then. ``ownership_token`` is torch's way to keep a graph alive; a cgrad node keeps its
    graph alive itself, so it is None here."""

    node: Node
    output_nr: int
    ownership_token: Node | None = None


def get_gradient_edge(tensor):
    """The GradientEdge of a tensor: its grad_fn and output_nr, or the AccumulateGrad node of
    a leaf (output_nr 0). ``autograd.grad(loss, get_gradient_edge(t))`` equals
    ``autograd.grad(loss, t)``."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor.output_nr)
    return GradientEdge(tensor._accumulator(), 0)


def increment_version(tensor):
    """Record an in-place modification of `tensor` (or of each tensor of an iterable) made
    behind autograd's back (through ``.numpy()``, say): a backward that saved it then raises
    torch's "modified by an inplace operation" error instead of using the new values."""
    if isinstance(tensor, _C.TensorBase):
        tensor = (tensor,)
    try:
        items = list(tensor)
    except TypeError:
        raise RuntimeError("increment_version expect a Iterable[Tensor] as input") from None
    for t in items:
        if not isinstance(t, _C.TensorBase):
            raise RuntimeError(
                "increment_version expects each element of the iterable to be a tensor")
    for t in items:
        t._bump_version()
