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

from cgrad import _C
from cgrad._C import Node, RemovableHandle  # noqa: F401

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node",
           "get_gradient_edge", "GradientEdge"]


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
    """Within this context, registering saved-tensor hooks raises RuntimeError(error_message)."""
    prev = _C._set_hooks_disabled(error_message)
    try:
        yield
    finally:
        _C._set_hooks_disabled(prev)


class GradientEdge(tuple):
    """(node, output_nr): where a tensor's gradient enters the graph."""

    def __new__(cls, node, output_nr):
        return super().__new__(cls, (node, output_nr))

    @property
    def node(self):
        return self[0]

    @property
    def output_nr(self):
        return self[1]


def get_gradient_edge(tensor):
    """The GradientEdge of a tensor (its grad_fn, or its AccumulateGrad for a leaf)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor.output_nr)
    return GradientEdge(tensor._accumulator(), 0)
