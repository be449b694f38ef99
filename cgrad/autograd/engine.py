"""autograd.backward and autograd.grad: their argument checks (torch's errors), the gradient
seeds (_make_grads), batched gradients (is_grads_batched), and the call into the compiled
engine (_C._run_engine, csrc/cg_engine.c). Re-exported by cgrad.autograd."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cgrad import _C
from cgrad._warn import warn as _warn
from cgrad._checks import type_name
from cgrad.autograd.graph import GradientEdge


class _NotATensor(AssertionError, TypeError):
    """torch asserts that each output is a Tensor (AssertionError); it is also a TypeError."""


def _tensors(x, what):
    """The tensors (and GradientEdges) given as `what` ("tensors", "outputs", "inputs")."""
    from cgrad.tensor import Tensor
    if isinstance(x, (Tensor, GradientEdge)):
        return [x]
    if isinstance(x, Sequence):
        out = list(x)
        for i, t in enumerate(out):
            if not isinstance(t, (Tensor, GradientEdge)):
                if what == "inputs":
                    raise RuntimeError("all inputs have to be Tensors or GradientEdges, but got "
                                       f"{type_name(t)}")
                raise _NotATensor(f"Expected output to be a Tensor, but {what}[{i}] is "
                                  f"{type_name(t)}")
        return out
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type_name(x)}")


def _size_str(shape):
    return "cgrad.Size([" + ", ".join(str(s) for s in shape) + "])"


def _make_grads(outputs, grads, is_grads_batched=False):
    from cgrad.tensor import Tensor
    if grads is None:
        grads = [None] * len(outputs)
    elif isinstance(grads, Tensor):
        grads = [grads]
    else:
        grads = list(grads)
        for g in grads:
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(
                    f"gradients can be either Tensors or None, but got {type_name(g)}")
    if len(grads) != len(outputs):
        raise RuntimeError(
            f"grad can be implicitly created only for scalar outputs"
            if not grads else
            f"Mismatch in number of gradients: {len(grads)} gradients for {len(outputs)} outputs")
    out = []
    for i, (o, g) in enumerate(zip(outputs, grads)):
        if isinstance(o, GradientEdge):
            if is_grads_batched:
                raise RuntimeError("Batched grads are not supported with GradientEdge")
            meta = _C._edge_meta(o)
            if meta is None:
                raise RuntimeError(f"output[{i}] is a GradientEdge whose node recorded no "
                                   "metadata for that input")
            shape, dtype = meta
            requires_grad = True
        else:
            shape, dtype, requires_grad = o._data.shape, o._data.dtype, o.requires_grad
        if g is None:
            if requires_grad:
                if any(d != 1 for d in shape):
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if dtype.kind not in "fc":
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs but got "
                        f"{dtype}")
                if is_grads_batched:
                    _implicit_batched(o, i)
                g = _C._wrap(np.ones(shape, dtype))
            else:
                out.append(None)
                continue
        else:
            if is_grads_batched:
                _check_batched(g, o, i)
            elif g._data.shape != shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of "
                    f"{_size_str(g._data.shape)} and output[{i}] has a shape of "
                    f"{_size_str(shape)}.")
            if g._data.dtype != dtype and dtype.kind in "fc":
                if g._data.dtype.kind not in "fcbiu":
                    raise RuntimeError(
                        f"Mismatch in dtype: grad_output[{i}] has a dtype of "
                        f"{g._data.dtype} and output[{i}] has a dtype of {dtype}.")
                g = _C._wrap(g._data.astype(dtype))   # torch casts the seed
        out.append(g)
    return out


def _check_batched(g, o, i):
    """grad_output g of output o (index i) with a leading batch dimension, as torch checks it
    (torch reports the shape of g[0] without its first dimension)."""
    shape = g._data.shape
    if len(shape) == 0:
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    if shape[0] == 0:
        raise IndexError("index 0 is out of bounds for dimension 0 with size 0")
    if shape[1:] != o._data.shape:
        raise RuntimeError(
            "If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
            "as the batch dimension. The sizes of the remaining dimensions are expected to "
            "match the shape of corresponding output, but a mismatch was detected: "
            f"grad_output[{i}] has a shape of {_size_str(shape[2:])} and output[{i}] has a "
            f"shape of {_size_str(o._data.shape)}. If you only want some tensors in "
            "`grad_output` to be considered batched, consider using vmap.")


def _implicit_batched(o, i):
    """torch maps its vjp over the first dimension of the implicit ones_like(o) seed: a
    scalar has no such dimension, and a row of any other (size-1) seed has the wrong shape."""
    if o._data.ndim == 0:
        raise ValueError(
            "vmap(vjp, in_dims=0, ...)(<inputs>): Got in_dim=0 for some input, but that input "
            "is a Tensor of dimensionality 0 so expected in_dim to satisfy 0 <= in_dim < 0.")
    raise RuntimeError(f"invalid gradient at index {i} - got {list(o._data.shape[1:])} but "
                       f"expected shape compatible with {list(o._data.shape)}")


def _run_batched(outputs, grads, retain_graph, create_graph, inputs):
    """is_grads_batched: one vector-Jacobian product per row of the grad_outputs, stacked.

    torch runs one backward under vmap; cgrad has no vmap and runs the engine once per row
    (the graph is kept until the last row), which gives the same values and is linear in
    the batch size."""
    from cgrad.ops.joining import stack
    batch = [g._data.shape[0] for g in grads if g is not None]   # _make_grads checked them
    if len(set(batch)) > 1:
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {batch} for the mapped dimension")
    n = batch[0]        # some output requires grad, so some grad is given
    rows = []
    for b in range(n):
        row = [None if g is None else g[b] for g in grads]
        keep = bool(retain_graph) or b < n - 1
        rows.append(_C._run_engine(outputs, row, keep, bool(create_graph), inputs))
    out = []
    for k, t in enumerate(inputs):
        col = [r[k] for r in rows]
        if all(g is None for g in col):
            out.append(None)
            continue
        if isinstance(t, GradientEdge):
            shape, dtype = _C._edge_meta(t)
        else:
            shape, dtype = t._data.shape, t._data.dtype
        out.append(stack([g if g is not None else _C._wrap(np.zeros(shape, dtype))
                          for g in col]))
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulate the gradients of `tensors` w.r.t. graph leaves into their ``.grad``.

    Same signature and semantics as ``torch.autograd.backward``.
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    tensors = _tensors(tensors, "tensors")
    if inputs is not None:
        inputs = _tensors(inputs, "inputs")
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    if type(grad_tensors) in (list, tuple) and _C._roots_ready(tensors, list(grad_tensors)):
        grads = list(grad_tensors)      # many roots: checked in one C loop
    else:
        for i, t in enumerate(tensors):
            if not isinstance(t, GradientEdge) and not t.requires_grad:
                raise RuntimeError(
                    f"element {i} of tensors does not require grad and does not have a grad_fn")
        grads = _make_grads(tensors, grad_tensors)
    if create_graph:
        _warn(
            "Using backward() with create_graph=True will create a reference cycle between the "
            "parameter and its gradient which can cause a memory leak. We recommend using "
            "autograd.grad when creating the graph to avoid this. If you have to use this "
            "function, make sure to reset the .grad fields of your parameters to None after "
            "use to break the cycle and avoid the leak.", UserWarning)
    if inputs is not None:
        # as torch: the engine accumulates into the inputs when it reaches them (so a fault
        # later in the run keeps what was accumulated before it), a non-leaf input through
        # retain_grad(), which it keeps afterwards
        for t in inputs:
            if not isinstance(t, GradientEdge) and t.grad_fn is not None:
                t.retain_grad()
    _C._run_engine(tensors, grads, bool(retain_graph), bool(create_graph), inputs,
                   inputs is not None)
    return None


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of `outputs` w.r.t. `inputs` without touching ``.grad``.

    Same signature and semantics as ``torch.autograd.grad``; `inputs` may be a dict, and the
    result is then a dict with the same keys.
    """
    keys = None
    if isinstance(inputs, dict):
        keys = list(inputs.keys())
        inputs = list(inputs.values())
    single_input = not isinstance(inputs, (list, tuple))
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif not isinstance(allow_unused, (bool, np.bool_)):
        raise TypeError(f"grad(): argument 'allow_unused' must be bool, not "
                        f"{type_name(allow_unused)}")
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if retain_graph is None:
        retain_graph = create_graph
    for i, t in enumerate(outputs):
        if not isinstance(t, GradientEdge) and not t.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
    grads = _make_grads(outputs, grad_outputs, is_grads_batched)
    if is_grads_batched:
        captured = _run_batched(outputs, grads, retain_graph, create_graph, inputs)
    else:
        captured = _C._run_engine(outputs, grads, bool(retain_graph), bool(create_graph),
                                  inputs)
    for i, g in enumerate(captured):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"The differentiated Tensor at index {i} appears to not have been used in "
                "the graph. Set allow_unused=True if this is the desired behavior.")
    result = []
    for t, g in zip(inputs, captured):
        if g is None and materialize_grads:
            if isinstance(t, GradientEdge):
                raise RuntimeError("materialize_grads cannot be used when the given input is "
                                   "a GradientEdge")
            g = _C._wrap(np.zeros_like(t._data))
            if create_graph:
                g.requires_grad_()      # torch: zeros_like(input, requires_grad=create_graph)
        result.append(g)
    if keys is not None:
        return dict(zip(keys, result))
    return tuple(result)
