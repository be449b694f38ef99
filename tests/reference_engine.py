"""A small pure-Python reference engine: a test oracle for cgrad's compiled engine.

It walks ``grad_fn`` / ``next_functions`` of cgrad tensors iteratively (no recursion), counts
dependencies, runs each node's ``_forward_cls.backward(node, *grads)`` in topological order
(most recently created ready node first, as torch), sums gradients per (node, input_nr)
out of place, reduces broadcast gradients with ``cgrad.ops.reductions.sum_to``, and returns
``{id(leaf): ndarray}`` for every leaf reached through an AccumulateGrad node.

It never releases saved tensors (retain_graph semantics) and never touches ``.grad``, so
the compiled engine can then be run on the same graph with ``retain_graph=True``.

Python cannot read a node's output shapes, so the oracle learns them from the tensors of the
graph: pass the intermediate tensors in ``tensors``, or keep them alive and tracked by the
cycle collector (such a tensor is found through ``gc.get_referrers``; most graph tensors are
not tracked, see Note [Untracked graphs] in cgrad/_C_untracked.pxi, so passing them is the rule).
"""
from __future__ import annotations

import gc
import heapq

import numpy as np

import cgrad
from cgrad import _C
from cgrad.ops.reductions import sum_to


def _is_acc(node):
    return isinstance(node, _C.AccumulateGrad)


def _arr(g):
    return g._data if isinstance(g, cgrad.Tensor) else np.asarray(g)


def reference_grad(outputs, grad_outputs=None, tensors=(), order=None):
    """Gradients of `outputs` (seeded with `grad_outputs`, ones for scalars) w.r.t. every
    leaf reached. Returns ``{id(leaf): ndarray}``. If `order` is a list, the names of the
    executed nodes are appended to it."""
    if isinstance(outputs, cgrad.Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, (cgrad.Tensor, np.ndarray)):
        grad_outputs = [grad_outputs]
    shapes = {}   # (id(node), nr) -> shape of that output of node
    for t in list(tensors) + outputs:
        if t.grad_fn is not None:
            shapes[(id(t.grad_fn), t.output_nr)] = tuple(t.shape)
    buffers = {}  # (id(node), nr) -> ndarray (summed out of place)
    n_outs = {}   # id(node) -> number of outputs seen (max input_nr + 1)
    for (nid, nr) in shapes:
        n_outs[nid] = max(n_outs.get(nid, 0), nr + 1)
    roots = []
    for o, g in zip(outputs, grad_outputs):
        if not o.requires_grad:
            raise RuntimeError("reference: output does not require grad")
        node, nr = (o.grad_fn, o.output_nr) if o.grad_fn is not None else (o._accumulator(), 0)
        g = np.ones_like(o._data) if g is None else _arr(g)
        if g.shape != o._data.shape:
            raise RuntimeError("reference: grad_output shape mismatch")
        _add(buffers, (id(node), nr), g)
        n_outs[id(node)] = max(n_outs.get(id(node), 0), nr + 1)
        roots.append(node)

    # 1. dependency counting (iterative DFS)
    deps = {id(n): 0 for n in roots}
    stack = list({id(n): n for n in roots}.values())
    seen = {id(n) for n in stack}
    while stack:
        node = stack.pop()
        for nxt, nr in node.next_functions:
            if nxt is None:
                continue
            deps[id(nxt)] = deps.get(id(nxt), 0) + 1
            n_outs[id(nxt)] = max(n_outs.get(id(nxt), 0), nr + 1)
            if id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append(nxt)
            if _is_acc(nxt):
                shapes[(id(nxt), 0)] = tuple(nxt.variable.shape)

    # 2. run in topological order (ready heap: higher sequence number first)
    def prio(n):
        return float("inf") if _is_acc(n) else n._sequence_nr()

    heap = [(-prio(n), i, n) for i, n in enumerate({id(n): n for n in roots}.values())
            if deps[id(n)] == 0]
    heapq.heapify(heap)
    tick = len(heap)
    result = {}
    while heap:
        _, _, node = heapq.heappop(heap)
        if order is not None:
            order.append(type(node).__name__)
        if _is_acc(node):
            g = buffers.pop((id(node), 0), None)
            if g is not None:
                v = node.variable
                result[id(v)] = result[id(v)] + g if id(v) in result else g
            continue
        grads = [buffers.pop((id(node), i), None) for i in range(n_outs[id(node)])]
        if any(g is not None for g in grads):
            grads = [g if g is not None else np.zeros(_shape_of(node, i, shapes))
                     for i, g in enumerate(grads)]
            with cgrad.no_grad():
                res = type(node)._forward_cls.backward(node, *[cgrad.tensor(g) for g in grads])
            if not isinstance(res, tuple):
                res = (res,)
            _deliver(node, res, buffers, shapes)
        for nxt, _nr in node.next_functions:
            if nxt is None:
                continue
            deps[id(nxt)] -= 1
            if deps[id(nxt)] == 0:
                heapq.heappush(heap, (-prio(nxt), tick, nxt))
                tick += 1
    return result


def _deliver(node, res, buffers, shapes):
    """Map the per-argument gradients `res` onto node's edges and add them to buffers."""
    needs = node.needs_input_grad
    positions = [i for i, b in enumerate(needs) if b]
    edges = [e for e in node.next_functions if e[0] is not None]
    assert len(positions) == len(edges), (type(node).__name__, needs, node.next_functions)
    if len(res) < len(needs) or any(r is not None for r in res[len(needs):]):
        raise RuntimeError(f"reference: {type(node).__name__} returned {len(res)} gradients "
                           f"for {len(needs)} inputs")
    for pos, (nxt, nr) in zip(positions, edges):
        g = res[pos]
        if g is None:
            continue
        want = _shape_of(nxt, nr, shapes)
        if tuple(g.shape) != want:
            got = tuple(g.shape)
            if len(want) > len(got) or any(w != s and w != 1 for w, s in
                                           zip(want[::-1], got[::-1])):
                raise RuntimeError(f"reference: invalid gradient shape {got} for {want}")
            with cgrad.no_grad():
                g = sum_to(g, want)
        _add(buffers, (id(nxt), nr), _arr(g))


def _shape_of(node, nr, shapes):
    """Shape of output `nr` of `node`: from the known tensors, else from a live tensor that
    refers to the node (found through the garbage collector's referrers)."""
    key = (id(node), nr)
    if key not in shapes:
        for t in gc.get_referrers(node):
            if isinstance(t, cgrad.Tensor) and t.grad_fn is node and t.output_nr == nr:
                shapes[key] = tuple(t.shape)
                break
        else:
            raise KeyError(f"reference: unknown shape of output {nr} of {type(node).__name__}; "
                           "keep the intermediate tensors alive or pass them in `tensors`")
    return shapes[key]


def _add(buffers, key, g):
    buffers[key] = buffers[key] + g if key in buffers else np.array(g, copy=True)
