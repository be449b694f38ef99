"""Lifetimes: saved tensors are freed by backward, graphs are freed by reference counting
alone (the cycle collector is disabled in every test here unless a test calls it), leaves
keep stable reference counts, and million-node graphs are built, run and freed without
recursion."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import cgrad
from cgrad.autograd import Function


@pytest.fixture(autouse=True)
def _no_gc():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _t(data, requires_grad=False):
    return cgrad.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


# ======================================================================================
# Saved tensors

def test_saved_intermediate_of_custom_function_freed_by_backward():
    refs = []

    class SaveTmp(Function):
        @staticmethod
        def forward(ctx, x):
            tmp = x * 2                         # an intermediate, neither input nor output
            refs.append(weakref.ref(tmp))
            refs.append(weakref.ref(tmp._data))
            ctx.save_for_backward(tmp)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (tmp,) = ctx.saved_tensors
            assert tmp.shape == g.shape
            return g * 3

    x = _t([1.0, 2.0], True)
    y = SaveTmp.apply(x)
    loss = y.sum()
    assert all(r() is not None for r in refs)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    assert y.grad_fn is not None                # the node itself is still referenced
    assert all(r() is None for r in refs)       # ... but its saved tensors are gone


def test_saved_intermediate_of_builtin_ops_freed_by_backward():
    x = _t([1.0, 2.0], True)
    h = x.exp()
    y = h * h                                   # MulBackward0 saves h
    loss = y.sum()
    rh, rd = weakref.ref(h), weakref.ref(h._data)
    del h
    assert rh() is not None
    loss.backward()
    assert rh() is None and rd() is None
    assert y.grad_fn is not None
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([2.0, 4.0]))


def test_autograd_grad_frees_saved_tensors_and_retain_graph_keeps_them():
    x = _t([1.0, 2.0], True)
    h = x.exp()
    loss = (h * h).sum()
    rh = weakref.ref(h)
    del h
    cgrad.autograd.grad(loss, x, retain_graph=True)
    assert rh() is not None                     # retained
    cgrad.autograd.grad(loss, x)
    assert rh() is None                         # freed by the second, non-retaining run


def test_saved_tensors_freed_when_graph_deleted_after_retain_graph():
    x = _t([1.0, 2.0], True)
    h = x.exp()
    loss = (h * h).sum()
    rh, rn = weakref.ref(h), weakref.ref(loss.grad_fn)
    del h
    loss.backward(retain_graph=True)
    assert rh() is not None
    del loss
    assert rh() is None and rn() is None


# ======================================================================================
# Graphs

def test_del_loss_without_backward_frees_whole_graph():
    x = _t([1.0, 2.0], True)
    w = _t([3.0, 4.0], True)
    h = x.exp()
    y = h * w
    z = y.reshape(2, 1) @ w.reshape(1, 2)
    loss = z.sum() + y.mean()
    refs = [weakref.ref(t) for t in (h, y, z, loss)]
    refs += [weakref.ref(t.grad_fn) for t in (h, y, z, loss)]
    refs += [weakref.ref(t._data) for t in (h, y)]
    acc = y.grad_fn.next_functions[1][0]                 # w's AccumulateGrad
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is w
    refs.append(weakref.ref(acc))
    del acc
    before_x, before_w = sys.getrefcount(x), sys.getrefcount(w)
    del h, y, z, loss
    assert [r() for r in refs] == [None] * len(refs)
    assert sys.getrefcount(x) < before_x and sys.getrefcount(w) < before_w


def test_graph_freed_after_backward_and_after_failed_backward():
    class Fail(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("nope")

    x = _t([1.0, 2.0], True)
    y = Fail.apply(x.exp()) * x
    loss = y.sum()
    refs = [weakref.ref(y.grad_fn), weakref.ref(loss.grad_fn),
            weakref.ref(y.grad_fn.next_functions[0][0])]
    with pytest.raises(ValueError, match="nope"):
        loss.backward()
    del y, loss
    assert [r() for r in refs] == [None] * len(refs)

    y = (x * x).exp()
    loss = y.sum()
    refs = [weakref.ref(y.grad_fn), weakref.ref(loss.grad_fn)]
    loss.backward()
    del y, loss
    assert [r() for r in refs] == [None] * len(refs)


def test_ctx_saving_output_does_not_leak():
    class SaveOut(Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out, x)
            return out

        @staticmethod
        def backward(ctx, g):
            out, _x = ctx.saved_tensors
            return g * out

    x = _t([0.0, 1.0], True)
    y = SaveOut.apply(x)
    r_ctx, r_data = weakref.ref(y.grad_fn), weakref.ref(y._data)
    del y
    assert r_ctx() is None and r_data() is None

    y = SaveOut.apply(x)
    assert y.grad_fn.saved_tensors[0].grad_fn is y.grad_fn
    y.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]))
    r_ctx = weakref.ref(y.grad_fn)
    del y
    assert r_ctx() is None

    y = x.exp()                                 # the built-in op saves its output too
    r_ctx = weakref.ref(y.grad_fn)
    del y
    assert r_ctx() is None


def test_ctx_attribute_holding_output_is_collectable():
    """torch #25340: ctx.y = y makes a ctx <-> output cycle; gc.collect() must free it."""
    class Leaky(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.y = y
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = _t([1.0, 2.0], True)
    y = Leaky.apply(x)
    r_ctx, r_y = weakref.ref(y.grad_fn), weakref.ref(y)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    del y
    gc.collect()
    assert r_ctx() is None and r_y() is None


@pytest.mark.parametrize("how", ["pre_hook", "post_hook", "tensor_hook", "metadata",
                                 "retain_grad"])
def test_cycles_through_rarely_used_node_state_are_collectable(how):
    """Hooks and metadata live in a record the node allocates on first use (Note [Compact
    node]); a cycle output -> node -> record -> closure/dict -> output must still be found
    by the cycle collector."""
    x = _t([1.0, 2.0], True)
    y = x * 3.0
    node = y.grad_fn
    if how == "pre_hook":
        node.register_prehook(lambda g, y=y: None)
    elif how == "post_hook":
        node.register_hook(lambda gi, go, y=y: None)
    elif how == "tensor_hook":
        y.register_hook(lambda g, y=y: None)
    elif how == "metadata":
        node.metadata["out"] = y
    else:
        y.retain_grad()
        node.metadata["out"] = y
    r_node, r_y = weakref.ref(node), weakref.ref(y)
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    del y, node
    assert r_y() is not None        # kept alive by the cycle alone
    gc.collect()
    assert r_node() is None and r_y() is None


# ======================================================================================
# Leaves

def test_leaf_refcounts_stable_over_many_steps():
    x = _t(np.linspace(-1, 1, 4))
    w = _t(np.full(4, 0.5), True)
    b = _t([0.1], True)

    def step():
        loss = (x * w + b).sum()
        loss.backward()
        w.grad.zero_()
        b.grad.zero_()

    step()
    g_w, g_b = w.grad, b.grad
    counts = [sys.getrefcount(o) for o in (x, w, b, x._data, w._data, b._data, g_w, g_b)]
    n_objects = len(gc.get_objects())
    for _ in range(10_000):
        step()
    assert w.grad is g_w and b.grad is g_b
    assert [sys.getrefcount(o) for o in (x, w, b, x._data, w._data, b._data, g_w, g_b)] \
        == counts
    assert len(gc.get_objects()) - n_objects < 50
    (x * w + b).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy())
    np.testing.assert_allclose(b.grad.numpy(), [4.0])


# ======================================================================================
# Million-node graphs (no recursion when running or freeing them)

class _Id(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class _SaveInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


N_DEEP = 1_000_000


def test_million_node_chain_backward_and_free():
    x = _t([1.0, 2.0], True)
    y = _Id.apply(x)
    r_first = weakref.ref(y.grad_fn)
    for _ in range(N_DEEP - 1):
        y = _Id.apply(y)
    r_last = weakref.ref(y.grad_fn)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    assert r_first() is not None
    del y
    assert r_first() is None and r_last() is None


def test_million_node_chain_freed_without_backward():
    x = _t([1.0, 2.0], True)
    y = _SaveInput.apply(x)      # node -> saved input -> its node -> ...: one long chain
    r_first = weakref.ref(y.grad_fn)
    for _ in range(N_DEEP - 1):
        y = _SaveInput.apply(y)
    r_last = weakref.ref(y.grad_fn)
    del y
    assert r_first() is None and r_last() is None


def test_deep_chain_of_builtin_ops():
    x = _t([1.0, 2.0], True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    r = weakref.ref(y.grad_fn)
    y.sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    del y
    assert r() is None

    y = x
    for _ in range(100_000):
        y = y + 0.0
    r = weakref.ref(y.grad_fn)
    del y
    assert r() is None


# ------------------------------------------------------------------------------------------
# Note [Grad buffer ownership]: a fresh gradient nobody else holds becomes .grad without a
# copy; one that somebody holds is copied.
# ------------------------------------------------------------------------------------------
def _fresh_grad_fn(ids, keep=None):
    class Twice(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            out = g * 2
            ids.append(id(out._data))
            if keep is not None:
                keep.append(out)
            return out
    return Twice


def test_fresh_gradient_is_stolen_not_copied():
    ids = []
    x = cgrad.tensor(np.ones(1000), requires_grad=True)
    _fresh_grad_fn(ids).apply(x).backward(cgrad.ones(1000, dtype=cgrad.float64))
    assert id(x.grad._data) == ids[0]           # the very array backward returned


def test_gradient_held_elsewhere_is_copied():
    ids, keep = [], []
    x = cgrad.tensor(np.ones(1000), requires_grad=True)
    _fresh_grad_fn(ids, keep).apply(x).backward(cgrad.ones(1000, dtype=cgrad.float64))
    assert x.grad._data is not keep[0]._data
    with cgrad.no_grad():
        x.grad.add_(1.0)
    assert keep[0]._data[0] == 2.0              # the held tensor is untouched


def test_hook_result_held_by_user_is_copied_and_not_mutated_later():
    held = []
    x = cgrad.tensor(np.ones(4), requires_grad=True)

    def hook(g):
        r = g * 3
        held.append(r)
        return r
    x.register_hook(hook)
    (x * 2).sum().backward()
    (x * 2).sum().backward()                    # accumulates in place into x.grad
    assert held[0].tolist() == [6.0] * 4
    assert x.grad.tolist() == [12.0] * 4


def test_hook_result_nobody_holds_is_stolen():
    ids = []
    x = cgrad.tensor(np.ones(1000), requires_grad=True)

    def hook(g):
        r = g * 3
        ids.append(id(r._data))
        return r
    x.register_hook(hook)
    (x * 2).sum().backward()
    assert id(x.grad._data) == ids[0]
