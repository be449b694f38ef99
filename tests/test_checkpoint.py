"""cgrad.utils.checkpoint (checkpoint, checkpoint_sequential), both variants.

Checks that would fail without real checkpointing: the function runs again during backward
(call counts, as in torch), activations created inside it are freed when checkpoint returns
(weakrefs), and gradients equal those of the plain run: w.r.t. the arguments, parameters
captured by closures, keyword arguments, tensors captured from the enclosing graph, through
dropout (RNG state preserved), double backward, and checkpoint_sequential over nn.Sequential.
Errors and warnings follow torch's ("torch." -> "cgrad.").
"""
from __future__ import annotations

import contextlib
import gc
import warnings
import weakref

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as NF
from cgrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

VARIANTS = [False, True]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def t64(mod, arr, requires_grad=False):
    return mod.tensor(np.asarray(arr, dtype=np.float64), requires_grad=requires_grad)


RNG = np.random.default_rng(3)
WA = RNG.standard_normal((4, 4)) * 0.5
BA = RNG.standard_normal(4)
XA = RNG.standard_normal((2, 4))


class Model:
    """A closure-captured parameter set; `calls` counts runs of `block`."""

    def __init__(self, mod):
        self.mod = mod
        self.W = t64(mod, WA, True)
        self.b = t64(mod, BA, True)
        self.calls = 0
        self.refs = []

    def block(self, x, y, scale=1.0, *, shift=0.0):
        self.calls += 1
        h = (x @ self.W + self.b).tanh()
        self.refs.append(weakref.ref(h))
        return (h * y).exp() * scale + shift

    def params(self):
        return [self.W, self.b]


def grads(tensors):
    return [None if t.grad is None else t.grad.detach().numpy().copy() for t in tensors]


def assert_grads_equal(a, b):
    assert len(a) == len(b)
    for g, h in zip(a, b):
        assert (g is None) == (h is None)
        if g is not None:
            np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------
# gradients equal the plain run; recomputation; activations freed
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_gradients_equal_plain_run_and_forward_runs_again(reentrant):
    def run(ck):
        m = Model(cgrad)
        x0, y = t64(cgrad, XA, True), t64(cgrad, BA, True)
        x = x0 * 2                                      # a non-leaf argument
        out = (checkpoint(m.block, x, y, 3.0, use_reentrant=reentrant) if ck
               else m.block(x, y, 3.0))
        calls_after_forward = m.calls
        (out * out).sum().backward()
        return out.detach().numpy(), grads(m.params() + [x0, y]), calls_after_forward, m
    ref_out, ref_grads, _, _ = run(False)
    out, g, calls_fwd, m = run(True)
    np.testing.assert_allclose(out, ref_out, rtol=1e-14)
    assert_grads_equal(g, ref_grads)
    assert calls_fwd == 1 and m.calls == 2


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_activations_are_not_kept(reentrant):
    m = Model(cgrad)
    x, y = t64(cgrad, XA, True), t64(cgrad, BA)
    out = checkpoint(m.block, x, y, use_reentrant=reentrant)
    gc.collect()
    assert m.refs[0]() is None            # the intermediate `h` died with the forward
    node = out.grad_fn
    assert type(node).__name__ == ("CheckpointFunctionBackward" if reentrant
                                   else "CheckpointBackward")
    # only the inputs are saved (and, non-reentrant, the parameters the function uses)
    expected = [x, y] if reentrant else [x, y, m.W, m.b]
    saved = node.saved_tensors
    assert len(saved) == len(expected)
    assert {id(s._data) for s in saved} == {id(t._data) for t in expected}
    out.sum().backward()
    assert m.calls == 2
    gc.collect()
    assert all(r() is None for r in m.refs)


def test_torch_also_recomputes_once(torch):
    """The call counts above are torch's."""
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    for reentrant in VARIANTS:
        m = Model(torch)
        out = tcheckpoint(m.block, t64(torch, XA, True), t64(torch, BA), use_reentrant=reentrant)
        assert m.calls == 1
        out.sum().backward()
        assert m.calls == 2


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_gradients_equal_torch_checkpoint(torch, reentrant):
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    res = []
    for mod, ck in ((cgrad, checkpoint), (torch, tcheckpoint)):
        m = Model(mod)
        x, y = t64(mod, XA, True), t64(mod, BA, True)
        ck(m.block, x, y, 0.5, use_reentrant=reentrant).sum().backward()
        res.append(grads(m.params() + [x, y]))
    assert_grads_equal(*res)


def test_non_reentrant_supports_autograd_grad_kwargs_and_params_only():
    m = Model(cgrad)
    x, y = t64(cgrad, XA), t64(cgrad, BA)        # no argument requires grad
    out = checkpoint(m.block, x, y, scale=2.0, shift=1.0, use_reentrant=False)
    assert out.requires_grad
    gW, gb = cgrad.autograd.grad((out * out).sum(), m.params())
    m2 = Model(cgrad)
    ref = cgrad.autograd.grad((m2.block(x, y, scale=2.0, shift=1.0) ** 2).sum(), m2.params())
    assert_grads_equal([gW.numpy(), gb.numpy()], [r.numpy() for r in ref])
    assert m.W.grad is None                      # autograd.grad does not touch .grad
    # backward(inputs=...) restricted to one parameter
    out = checkpoint(m.block, x, y, use_reentrant=False)
    out.sum().backward(inputs=[m.b])
    assert m.W.grad is None and m.b.grad is not None


def test_non_reentrant_tensors_inside_containers_are_arguments():
    x0, W = t64(cgrad, [1.0, 2.0], True), t64(cgrad, [[1.0, 2.0], [3.0, 4.0]], True)

    def f(pair, d, k=None):
        return (pair[0] @ W) * pair[1] + d["z"] * k

    res = []
    for ck in (True, False):
        a, b = x0 * 2, x0.exp()
        args = ([a, b], {"z": a})
        y = checkpoint(f, *args, k=3.0, use_reentrant=False) if ck else f(*args, k=3.0)
        res.append([g.numpy() for g in cgrad.autograd.grad(y.sum(), [a, b, W, x0])])
    assert_grads_equal(*res)


def test_non_reentrant_double_backward_shared_weights_and_outer_closure():
    """create_graph through the checkpoint; W is used inside, upstream of the argument and
    upstream of a non-leaf tensor captured from the enclosing graph."""
    W, x0 = t64(cgrad, WA, True), t64(cgrad, XA[0], True)

    def run(ck):
        h_outer = (W @ x0).sin()
        x1 = W @ x0

        def f(x):
            return (W @ x).tanh() * h_outer + x.exp()
        y = checkpoint(f, x1, use_reentrant=False) if ck else f(x1)
        loss = (y * y).sum() + h_outer.sum()
        g = cgrad.autograd.grad(loss, [W, x0], create_graph=True)
        gg = cgrad.autograd.grad((g[0] ** 2).sum() + (g[1] ** 3).sum(), [W, x0])
        return [t.detach().numpy() for t in g + gg]
    assert_grads_equal(run(True), run(False))


@pytest.mark.parametrize("reentrant", VARIANTS)
def test_multiple_outputs_non_tensor_outputs_and_nesting(reentrant):
    W = t64(cgrad, WA, True)

    def f(x, tag):
        z = x @ W
        return z.sin(), tag, z.argmax(), [z.exp(), {"k": z * 2}] if not reentrant else z.exp()

    x = t64(cgrad, XA, True)
    out = checkpoint(f, x, "tag", use_reentrant=reentrant)
    ref = f(x, "tag")
    assert out[1] == "tag" and not out[2].requires_grad
    np.testing.assert_array_equal(out[2].numpy(), ref[2].numpy())
    if reentrant:
        loss = lambda o: o[0].sum() + (o[3] ** 2).sum()                  # noqa: E731
    else:
        assert isinstance(out[3], list) and isinstance(out[3][1], dict)
        loss = lambda o: o[0].sum() + (o[3][0] ** 2).sum() + o[3][1]["k"].sum()  # noqa: E731
    loss(out).backward()
    g = grads([x, W])
    x.grad = W.grad = None
    loss(ref).backward()
    assert_grads_equal(g, grads([x, W]))


# ------------------------------------------------------------------------------------------
# random state
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_dropout_recomputes_the_same_mask(reentrant):
    x = t64(cgrad, RNG.standard_normal(64), True)

    def f(t):
        return NF.dropout(t.exp(), 0.5) * 3

    def run(ck, preserve=True):
        x.grad = None
        cgrad.manual_seed(11)
        y = checkpoint(f, x, use_reentrant=reentrant, preserve_rng_state=preserve) if ck \
            else f(x)
        a = cgrad.rand(3).numpy()
        (y * y).sum().backward()
        b = cgrad.rand(3).numpy()
        return y.detach().numpy(), x.grad.numpy().copy(), a, b
    ref = run(False)
    got = run(True)
    for r, g in zip(ref, got):       # same output, same gradient, same outer RNG stream
        np.testing.assert_array_equal(r, g)
    _, g_nopreserve, _, _ = run(True, preserve=False)
    assert not np.array_equal(g_nopreserve, ref[1])


# ------------------------------------------------------------------------------------------
# modes, warnings and errors
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reentrant", VARIANTS)
def test_under_no_grad_no_graph(reentrant):
    m = Model(cgrad)
    with cgrad.no_grad():
        out = checkpoint(m.block, t64(cgrad, XA, True), t64(cgrad, BA), use_reentrant=reentrant)
    assert not out.requires_grad and out.grad_fn is None and m.calls == 1


def test_missing_use_reentrant_warns_and_uses_reentrant(torch):
    from torch.utils.checkpoint import checkpoint as tcheckpoint
    msgs = []
    for ck, mod in ((checkpoint, cgrad), (tcheckpoint, torch)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = ck(lambda t: t * 2, t64(mod, [1.0], True))
        msgs.append([str(i.message) for i in w])
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"
    ours, theirs = msgs
    assert len(ours) == len(theirs) == 1
    for phrase in ("utils.checkpoint: the use_reentrant parameter should be passed explicitly",
                   "use_reentrant=False is recommended"):
        assert phrase in ours[0] and phrase in theirs[0]


@pytest.mark.parametrize("case", ["kwargs_reentrant", "context_fn_reentrant",
                                  "bad_determinism_check", "no_input_requires_grad",
                                  "sequential_kwargs"])
def test_errors_and_warnings_like_torch(torch, case):
    import torch.utils.checkpoint as tck
    res = []
    for mod, ck, seq in ((cgrad, checkpoint, checkpoint_sequential),
                         (torch, tck.checkpoint, tck.checkpoint_sequential)):
        x = t64(mod, [1.0, 2.0], True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                if case == "kwargs_reentrant":
                    ck(lambda t, s: t * s, x, s=2, use_reentrant=True)
                elif case == "context_fn_reentrant":
                    ck(lambda t: t, x, use_reentrant=True, context_fn=lambda: (None, None))
                elif case == "bad_determinism_check":
                    ck(lambda t: t * 2, x, use_reentrant=False, determinism_check="foo")
                elif case == "no_input_requires_grad":
                    y = ck(lambda t: t * 2, x.detach(), use_reentrant=True)
                    assert not y.requires_grad
                else:
                    seq([lambda t: t * 2], 1, x, use_reentrant=False, foo=1)
                r = "ok"
            except Exception as e:        # noqa: BLE001
                r = (type(e).__name__, str(e).replace("torch.", "cgrad."))
        res.append((r, [str(i.message) for i in w]))
    assert res[0] == res[1]


def test_determinism_check_detects_different_recomputation():
    n = [0]

    def f(t):
        n[0] += 1
        return t * 2 if n[0] == 1 else (t * 2)[:1]
    y = checkpoint(f, t64(cgrad, [1.0, 2.0], True), use_reentrant=False)
    with pytest.raises(CheckpointError, match="Recomputed values for the following tensors "
                       "have different metadata than during the forward pass"):
        y.sum().backward()
    assert issubclass(CheckpointError, RuntimeError)


def test_inplace_modified_argument_is_detected():
    x0 = t64(cgrad, [1.0, 2.0], True)
    a = x0 * 2
    y = checkpoint(lambda t: (t * t).sum(), a, use_reentrant=False)
    with cgrad.no_grad():
        a.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_context_fn_wraps_forward_and_recomputation():
    log = []

    @contextlib.contextmanager
    def tag(name):
        log.append(name + "+")
        yield
        log.append(name + "-")
    y = checkpoint(lambda t: t.exp(), t64(cgrad, [1.0], True), use_reentrant=False,
                   context_fn=lambda: (tag("fwd"), tag("recompute")))
    assert log == ["fwd+", "fwd-"]
    y.backward()
    assert log == ["fwd+", "fwd-", "recompute+", "recompute-"]


# ------------------------------------------------------------------------------------------
# checkpoint_sequential
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reentrant", VARIANTS)
@pytest.mark.parametrize("as_list", [False, True])
def test_checkpoint_sequential_equals_plain(reentrant, as_list):
    cgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(),
                          nn.Linear(6, 3))
    x = cgrad.randn(5, 4, requires_grad=True)
    fns = list(model.children()) if as_list else model
    out = checkpoint_sequential(fns, 3, x, use_reentrant=reentrant)
    out.sum().backward()
    g = grads(list(model.parameters()) + [x])
    model.zero_grad()
    x.grad = None
    ref = model(x)
    ref.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    assert_grads_equal(g, grads(list(model.parameters()) + [x]))


def test_checkpoint_sequential_warns_without_use_reentrant():
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        checkpoint_sequential([lambda t: t * 2, lambda t: t + 1], 2,
                              t64(cgrad, [1.0], True))


def test_module_layout():
    import cgrad.utils
    assert cgrad.utils.checkpoint.checkpoint is checkpoint
    from cgrad.utils.checkpoint import (CheckpointFunction, check_backward_validity,  # noqa
                                        detach_variable, noop_context_fn)
    d = detach_variable((t64(cgrad, [1.0], True), 3))
    assert d[0].requires_grad and d[0].is_leaf and d[1] == 3
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported"):
        detach_variable([t64(cgrad, [1.0])])
