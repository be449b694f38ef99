"""Activation checkpointing: ``torch.utils.checkpoint``'s API.

``checkpoint(function, *args, use_reentrant=...)`` runs ``function`` without keeping its
intermediate activations: only the inputs are saved, and ``function`` runs again during
backward (with the random generator state of the forward when ``preserve_rng_state``) to
rebuild them. Gradients equal those of a plain call.

Two variants, as in torch:

* ``use_reentrant=True`` (torch's ``CheckpointFunction``): forward runs under ``no_grad``;
  the node's backward recomputes on detached inputs and calls ``cgrad.autograd.backward``
  on the recomputed outputs (a backward inside the backward), which also accumulates into
  the ``.grad`` of parameters the function uses from its closure. Like torch, it only
  supports ``.backward()`` (not ``autograd.grad``), positional tensor arguments, and needs
  an input that requires grad.
* ``use_reentrant=False`` (recommended): the forward is run once with grad mode on, on
  detached copies of the tensor arguments (also those inside lists, tuples and dicts, and
  keyword arguments), to find the leaf tensors requiring grad that the function reaches
  without receiving them as arguments (parameters captured by a closure); then its graph is
  dropped: activations are freed when ``checkpoint`` returns. A single node
  (``CheckpointBackward``) stands for the whole function, with an edge to every tensor
  argument and every such leaf, so ``autograd.grad`` and ``backward(inputs=...)`` work for
  parameters too. Its backward recomputes on detached inputs and differentiates the result
  w.r.t. those inputs and leaves. ``create_graph=True`` (double backward) through the
  checkpoint works.

  Tensors that the function captures from the enclosing graph and that are not leaves
  (say ``h = W @ x`` computed outside and used inside through a closure) are supported by
  sending their gradient on to the leaves behind them; ``autograd.grad`` w.r.t. such a
  non-leaf itself then misses the contribution of the checkpointed function.

Calling ``checkpoint`` without ``use_reentrant`` warns and uses the reentrant variant, as
torch 2.13 does.
"""
from __future__ import annotations

import contextlib
import copy

from cgrad._warn import warn as _warn
from cgrad import _C
from cgrad.autograd.function import Function
from cgrad.autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction",
           "check_backward_validity", "detach_variable", "noop_context_fn",
           "set_checkpoint_early_stop", "set_checkpoint_debug_enabled"]


class CheckpointError(RuntimeError):
    """Raised when the recomputation does not reproduce the forward."""


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def detach_variable(inputs):
    """Detach every tensor of the tuple ``inputs``, keeping its ``requires_grad``."""
    if isinstance(inputs, tuple):
        out = []
        for inp in inputs:
            if not _is_tensor(inp):
                out.append(inp)
                continue
            x = inp.detach()
            x.requires_grad = inp.requires_grad
            out.append(x)
        return tuple(out)
    raise RuntimeError(
        "Only tuple of tensors is supported. Got Unsupported input type: "
        f"{type(inputs).__name__}")


def check_backward_validity(inputs):
    """Warn when no tensor of ``inputs`` requires grad."""
    if not any(inp.requires_grad for inp in inputs if _is_tensor(inp)):
        _warn("None of the inputs have requires_grad=True. Gradients will be None")


def noop_context_fn():
    """The default ``context_fn``: no context around the forward and the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


_early_stop_enabled = None
_checkpoint_debug_enabled = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Accepted for torch compatibility: cgrad always recomputes the whole function."""
    global _early_stop_enabled
    prev, _early_stop_enabled = _early_stop_enabled, enable
    try:
        yield
    finally:
        _early_stop_enabled = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Accepted for torch compatibility (cgrad's checkpoint has no operator log)."""
    global _checkpoint_debug_enabled
    prev, _checkpoint_debug_enabled = _checkpoint_debug_enabled, enabled
    try:
        yield
    finally:
        _checkpoint_debug_enabled = prev


# ------------------------------------------------------------------------------------------
# RNG state: cgrad's global generator (cgrad.manual_seed, rand, randn, dropout)
# ------------------------------------------------------------------------------------------
def _rng_snapshot():
    """The default generator's state at this point."""
    from cgrad import _generator
    return _generator.get_rng_state()


@contextlib.contextmanager
def _fork_rng(snapshot, enabled):
    """Run the block with the default generator in the state `snapshot`, then put the
    surrounding state back untouched (torch.random.fork_rng + set_rng_state)."""
    if not enabled or snapshot is None:
        yield
        return
    from cgrad import _generator
    saved = _generator.get_rng_state()
    _generator.set_rng_state(snapshot)
    try:
        yield
    finally:
        _generator.set_rng_state(saved)


# ------------------------------------------------------------------------------------------
# use_reentrant=True: torch's CheckpointFunction
# ------------------------------------------------------------------------------------------
class CheckpointFunction(Function):
    """Reentrant checkpoint: no_grad forward, recompute + nested backward in backward."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.fwd_rng = _rng_snapshot() if preserve_rng_state else None
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if _is_tensor(arg):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        with no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        from cgrad.autograd import backward as _backward
        inputs = list(ctx.inputs)
        tensors = ctx.saved_tensors
        for i, idx in enumerate(ctx.tensor_indices):
            inputs[idx] = tensors[i]
        with _fork_rng(ctx.fwd_rng, ctx.preserve_rng_state):
            detached_inputs = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached_inputs)
        if _is_tensor(outputs):
            outputs = (outputs,)
        outputs_with_grad = []
        args_with_grad = []
        for i in range(len(outputs)):
            if _is_tensor(outputs[i]) and outputs[i].requires_grad:
                outputs_with_grad.append(outputs[i])
                args_with_grad.append(args[i])
        if len(outputs_with_grad) == 0:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward(outputs_with_grad, args_with_grad)
        grads = tuple(inp.grad if _is_tensor(inp) else None for inp in detached_inputs)
        return (None, None) + grads


# ------------------------------------------------------------------------------------------
# use_reentrant=False
# ------------------------------------------------------------------------------------------
def _flatten(obj, out):
    """Flatten tuples/lists/dicts of tensors; returns a spec to rebuild `obj`."""
    if _is_tensor(obj):
        out.append(obj)
        return None
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_flatten(o, out) for o in obj])
    if isinstance(obj, dict):
        return (dict, [(k, _flatten(v, out)) for k, v in obj.items()])
    return ("leaf", obj)


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, payload = spec
    if kind == "leaf":
        return payload
    if kind is dict:
        return {k: _unflatten(s, it) for k, s in payload}
    items = [_unflatten(s, it) for s in payload]
    if kind is tuple or kind is list:
        return kind(items)
    try:                     # namedtuple
        return kind(*items)
    except TypeError:
        return kind(items)


def _detach_like(t):
    d = t.detach()
    if t.requires_grad:
        d.requires_grad_(True)
    return d


def _meta(t):
    return {"shape": t.size(), "dtype": f"cgrad.{t._data.dtype}", "device": "cpu"}


class _State:
    """What the checkpoint node needs to recompute (no activations)."""
    __slots__ = ("function", "in_spec", "n_explicit", "fwd_rng", "preserve", "recompute_ctx",
                 "determinism_check", "out_meta", "has_outer", "pending", "__weakref__")

    def call(self, tensors):
        args, kwargs = _unflatten(self.in_spec, iter(tensors))
        return self.function(*args, **kwargs)


def _grad(outputs, inputs, grad_outputs, **kw):
    from cgrad.autograd import grad
    return grad(outputs, inputs, grad_outputs, **kw)


class _TransplantState:
    __slots__ = ("ys", "placeholders")


class _Transplant(Function):
    """Outputs with the values of `state.ys` (computed from placeholder leaves) whose graph
    edges go to the real tensors the placeholders stand for. Used to keep higher-order
    gradients through a checkpoint connected to the real inputs."""

    @staticmethod
    def forward(ctx, state, *reals):
        ctx.state = state
        ctx.save_for_backward(*reals)
        return tuple(y._data for y in state.ys)

    @staticmethod
    def backward(ctx, *grads):
        st = ctx.state
        return (None,) + tuple(_vjp(st.ys, grads, st.placeholders, ctx.saved_tensors, True))


def _vjp(ys, gys, placeholders, reals, retain):
    """Gradients of `ys` (cotangents `gys`) w.r.t. the leaves `placeholders`, each standing
    for `reals[i]`. Under grad mode (create_graph), the results are differentiable w.r.t.
    `reals` and `gys` (transplanted); otherwise plain tensors."""
    pairs = [(y, g) for y, g in zip(ys, gys)
             if _is_tensor(y) and y.requires_grad and g is not None]
    n = len(placeholders)
    if not pairs or n == 0:
        return [None] * n
    if not _C.is_grad_enabled():
        return list(_grad([y for y, _ in pairs], list(placeholders), [g for _, g in pairs],
                          allow_unused=True, retain_graph=retain))
    gys_det = [_detach_like(g) for _, g in pairs]
    gs = list(_grad([y for y, _ in pairs], list(placeholders), gys_det, allow_unused=True,
                    create_graph=True, retain_graph=True))
    live = [i for i, g in enumerate(gs) if g is not None and g.requires_grad]
    if not live:
        return gs
    ph = list(placeholders) + [d for d in gys_det if d.requires_grad]
    rl = list(reals) + [g for (_, g), d in zip(pairs, gys_det) if d.requires_grad]
    st = _TransplantState()
    st.ys = [gs[i] for i in live]
    st.placeholders = ph
    outs = _Transplant.apply(st, *rl)
    if _is_tensor(outs):
        outs = (outs,)
    for i, o in zip(live, outs):
        gs[i] = o
    return gs


class Checkpoint(Function):
    """The node standing for a non-reentrant checkpointed function (CheckpointBackward)."""

    @staticmethod
    def forward(ctx, state, *tensors):
        outs = state.pending
        state.pending = None
        ctx.state = state
        ctx.save_for_backward(*tensors)
        nondiff = [o for o in outs if not o.requires_grad]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        st = ctx.state
        saved = ctx.saved_tensors
        explicit, leaves = saved[:st.n_explicit], saved[st.n_explicit:]
        det = [_detach_like(t) for t in explicit]
        with _fork_rng(st.fwd_rng, st.preserve):
            with enable_grad(), st.recompute_ctx:
                out = st.call(det)
        flat = []
        _flatten(out, flat)
        if st.determinism_check == "default":
            _check_determinism(st.out_meta, flat)
        targets = [d for d in det if d.requires_grad] + list(leaves)
        where = [i for i, d in enumerate(det) if d.requires_grad]
        reals = [explicit[i] for i in where] + list(leaves)
        gs = _vjp(flat, grad_outputs, targets, reals, retain=st.has_outer)
        res = [None] * len(saved)
        for k, i in enumerate(where):
            res[i] = gs[k]
        for k in range(len(leaves)):
            res[st.n_explicit + k] = gs[len(where) + k]
        return (None,) + tuple(res)


_CheckpointBackward = Checkpoint._backward_cls


def _check_determinism(out_meta, flat):
    if len(out_meta) != len(flat):
        raise CheckpointError(
            "cgrad.utils.checkpoint: A different number of tensors was saved "
            "during the original forward and recomputation.\n"
            f"Number of tensors saved during forward: {len(out_meta)}\n"
            f"Number of tensors saved during recomputation: {len(flat)}.\n")
    bad = ""
    for idx, (m, t) in enumerate(zip(out_meta, flat)):
        r = _meta(t)
        if m != r:
            bad += f"tensor at position {idx}:\nsaved metadata: {m}\nrecomputed metadata: {r}\n"
    if bad:
        raise CheckpointError(
            "cgrad.utils.checkpoint: Recomputed values for the following tensors "
            f"have different metadata than during the forward pass.\n{bad}.\n")


def _walk(out_tensors, det, start):
    """Leaves that require grad reached from `out_tensors`, other than the placeholders
    `det`, and whether the function captured non-leaf tensors of the enclosing graph (nodes
    created before `start`); the walk then goes on through that graph to its leaves."""
    det_ids = {id(d) for d in det}
    leaves, leaf_ids = [], set()
    has_outer = False
    stack = []
    for o in out_tensors:
        if o.grad_fn is not None:
            stack.append(o.grad_fn)
        elif o.requires_grad and id(o) not in det_ids and id(o) not in leaf_ids:
            leaf_ids.add(id(o))
            leaves.append(o)
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, _C.AccumulateGrad):
            v = node.variable
            if id(v) not in det_ids and id(v) not in leaf_ids and v.requires_grad:
                leaf_ids.add(id(v))
                leaves.append(v)
            continue
        if node._sequence_nr() < start:
            has_outer = True        # keep walking: the leaves behind it become inputs
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return leaves, has_outer


_DETERMINISM_CHECKS = ("default", "none")


def _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check, debug,
                                  early_stop, args, kwargs):
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(
            f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, "
            f"but got {determinism_check}")
    forward_ctx, recompute_ctx = context_fn()
    if not _C.is_grad_enabled():
        with forward_ctx:
            return function(*args, **kwargs)
    st = _State()
    st.function = function
    explicit = []           # every tensor in args and kwargs, also inside lists/tuples/dicts
    st.in_spec = _flatten((list(args), dict(kwargs)), explicit)
    st.n_explicit = len(explicit)
    st.preserve = preserve
    st.fwd_rng = _rng_snapshot() if preserve else None
    st.recompute_ctx = recompute_ctx
    st.determinism_check = determinism_check
    det = [_detach_like(t) for t in explicit]
    start = _C.Node()._sequence_nr()
    with forward_ctx:
        out = st.call(det)
    flat = []
    spec = _flatten(out, flat)
    del out
    leaves, st.has_outer = _walk(flat, det, start)
    if not any(t.requires_grad for t in explicit) and not leaves:
        return _unflatten(spec, iter(flat))      # nothing to differentiate: no node
    st.out_meta = [_meta(t) for t in flat]
    st.pending = flat
    del flat
    res = Checkpoint.apply(st, *explicit, *leaves)
    if _is_tensor(res):
        res = (res,)
    return _unflatten(spec, iter(res))


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------
def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, early_stop=True, **kwargs):
    r"""Checkpoint a model or part of the model: run ``function(*args, **kwargs)`` without
    keeping its activations, and run it again during backward.

    Same signature and defaults as ``torch.utils.checkpoint.checkpoint``;
    ``preserve_rng_state=True`` (a keyword argument) makes the recomputation draw the same
    random numbers as the forward (dropout masks). ``use_reentrant`` should be passed
    explicitly; ``use_reentrant=False`` is recommended.

        >>> import cgrad
        >>> from cgrad.utils.checkpoint import checkpoint
        >>> x = cgrad.tensor([1.0, 2.0], requires_grad=True)
        >>> y = checkpoint(lambda t: (t * t).exp(), x, use_reentrant=False)
        >>> y.sum().backward()
    """
    if use_reentrant is None:
        _warn(
            "cgrad.utils.checkpoint: the use_reentrant parameter should be "
            "passed explicitly. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.")
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check,
                                         debug, early_stop, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    r"""Checkpoint a sequential model: split ``functions`` (a list of callables or an
    ``nn.Sequential``) into ``segments`` chunks and checkpoint every chunk but the last.

    Same signature and defaults as ``torch.utils.checkpoint.checkpoint_sequential``.
    """
    if use_reentrant is None:
        _warn(
            "cgrad.utils.checkpoint.checkpoint_sequential: the use_reentrant "
            "parameter should be passed explicitly. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.")
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start, end, functions):
        def forward(input):
            for j in range(start, end + 1):
                input = functions[j](input)
            return input
        return forward

    from cgrad import nn
    seq = getattr(nn, "Sequential", None)
    if seq is not None and isinstance(functions, seq):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
