"""Note [Untracked graphs] (cgrad/_C_untracked.pxi): graph objects that cannot be on a reference
cycle are kept out of CPython's cycle collector, and every mutation that could close a cycle
through them tracks them all again first.

Two things are tested: that the common graphs really are untracked (else the collector's
cost per node comes back, bench/scaling.py), and that no way of closing a cycle leaks: each
case builds a cycle through objects that were untracked, drops it and requires
gc.collect() to free it. A seeded random mix of all of them does the same at the end.
"""
import gc
import random
import weakref

import numpy as np
import pytest
from thread_util import run_threads

import cgrad
from cgrad import _C
from cgrad.autograd import Function


# Module-level Functions: a module holds them, so their nodes can be untracked.
class SaveInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2


class SaveOutput(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class WithAttrs(Function):
    """ctx attributes of the GAT kind (numbers, shapes, arrays) and, on request, others."""

    @staticmethod
    def forward(ctx, x, extra):
        ctx.N = x.shape[0]
        ctx.shape = (x.shape, (1, 2))
        ctx.arr = np.arange(3)
        ctx.dt = np.dtype(np.float32)
        if extra is not None:
            ctx.extra = extra
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3, None


class Dirty(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _leaf(n=4):
    return cgrad.tensor(np.linspace(0.5, 1.5, n), requires_grad=True)


def _untracked(*objs):
    return not any(gc.is_tracked(o) for o in objs)


def _freed_by_collector(refs):
    gc.collect()
    return [r for r in refs if r() is not None] == []


# ======================================================================================
# What is untracked

def test_chain_of_builtin_ops_is_untracked_and_freed_without_the_collector():
    x = _leaf()
    y = x
    nodes = []
    for _ in range(50):
        y = y * 0.9
        y = y + 0.1
        y = y.exp().log()
        nodes.append(weakref.ref(y.grad_fn))
    assert _untracked(x, y, y.grad_fn)
    assert all(_untracked(r()) for r in nodes)
    assert _C._untracked_count() >= len(nodes)
    gc.disable()
    try:
        del y
        assert [r for r in nodes if r() is not None] == []     # refcounting alone
    finally:
        gc.enable()


def test_backward_through_untracked_graph_matches_tracked_graph():
    def run():
        x = _leaf()
        y = SaveOutput.apply(SaveInput.apply(x) * x) / (x + 2)
        z = WithAttrs.apply(y, None).sum()
        z.backward()
        return x.grad.numpy().copy(), gc.is_tracked(z.grad_fn)

    g1, tracked1 = run()
    prev = _C._set_untracking(False)
    try:
        g2, tracked2 = run()
    finally:
        _C._set_untracking(prev)
    assert not tracked1 and tracked2
    np.testing.assert_array_equal(g1, g2)


def test_leaf_with_gradient_stays_untracked():
    x = _leaf()
    for _ in range(3):
        (x * x).sum().backward()
    assert _untracked(x, x.grad)
    y = x * 2
    assert _untracked(y.grad_fn)


@pytest.mark.parametrize("extra, untracked", [
    (None, True),
    (7, True),
    ("name", True),
    ((1, (2.0, None)), True),
    (slice(0, 3), True),
    (np.float32(2.0), True),
    ([1, 2], False),                 # a list can change without cgrad seeing it
    ({"a": 1}, False),
    (object(), False),
    (np.array([None], dtype=object), False),
    (np.dtype(np.float64, metadata={"a": []}), False),
    (((1, (2, [3])),), False),
])
def test_ctx_attributes_decide_whether_the_node_is_untracked(extra, untracked):
    x = _leaf()
    y = WithAttrs.apply(x * 1, extra)
    assert _untracked(y.grad_fn) is untracked
    assert _untracked(y) is untracked


def test_ctx_attribute_holding_an_untracked_tensor():
    x = _leaf()
    a = x * 2
    y = WithAttrs.apply(x * 1, a)
    assert _untracked(y.grad_fn, a)


def _local_function():
    """A Function class that only this call's frame holds."""
    class Local(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Local


def test_function_defined_in_a_function_is_tracked():
    Local = _local_function()
    assert not _C._fn_rooted(Local)
    assert _C._fn_rooted(SaveInput)
    y = Local.apply(_leaf())
    assert gc.is_tracked(y.grad_fn) and gc.is_tracked(y)


def test_every_builtin_function_is_rooted():
    seen, stack = [], [Function]
    while stack:
        for k in stack.pop().__subclasses__():
            stack.append(k)
            # (classes made inside a function, such as autograd.functional's cached
            # helpers, are tracked: a lookup cannot prove a module holds them)
            if k.__module__.startswith("cgrad.") and "<locals>" not in k.__qualname__:
                seen.append(k)
    assert len(seen) > 100
    assert [k.__qualname__ for k in seen if not _C._fn_rooted(k)] == []


def test_saved_tensor_hooks_and_views_are_tracked():
    x = _leaf()
    with cgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x * x
    assert gc.is_tracked(y.grad_fn)
    v = (x * 1)[1:3]
    assert gc.is_tracked(v)


def test_disabling_tracks_everything_registered():
    x = _leaf()
    y = x * 2 + 1
    assert _untracked(y, y.grad_fn)
    prev = _C._set_untracking(False)
    try:
        assert gc.is_tracked(y) and gc.is_tracked(y.grad_fn)
        z = y * 3
        assert gc.is_tracked(z.grad_fn)
    finally:
        _C._set_untracking(prev)
    assert gc.is_tracked((x * 5).grad_fn)       # x's accumulator was tracked by then
    w = _leaf() * 5
    assert _untracked(w, w.grad_fn)


# ======================================================================================
# Every way of closing a cycle through untracked objects is seen

def _close_cycle(how):
    """Build a graph, check it is untracked, close a cycle through it in one way, and
    return weak references to its objects (the caller drops the strong ones)."""
    x = _leaf()
    a = SaveInput.apply(x * 1.5)
    y = (a * a + 1).exp()
    assert _untracked(x, a, y, y.grad_fn, a.grad_fn)
    keep = []
    if how == "leaf_hook":
        x.register_hook(lambda g, y=y: g)
    elif how == "nonleaf_hook":
        a.register_hook(lambda g, y=y: g)
    elif how == "node_hook":
        a.grad_fn.register_hook(lambda gi, go, y=y: None)
    elif how == "node_prehook":
        a.grad_fn.register_prehook(lambda go, y=y: None)
    elif how == "metadata":
        a.grad_fn.metadata["y"] = y
    elif how == "setattr":
        a.grad_fn.keep = y
    elif how == "ctx_container":
        box = []
        z = WithAttrs.apply(y, box)
        box.append(z)
        y = z
    elif how == "grad_assign":
        x.grad = y
    elif how == "grad_self":
        (x * x).sum().backward()        # x holds an untracked .grad: x is registered
        with pytest.raises(RuntimeError, match="own grad"):
            x.grad = x                  # a cycle of one object: torch refuses it
        x.grad.grad = x                 # the shortest cycle through .grad left: x -> x.grad
    elif how == "grad_of_grad":
        x.grad = cgrad.zeros(4, dtype=cgrad.float64)
        x.grad.grad = y
    elif how == "create_graph":
        y.sum().backward(create_graph=True)
    elif how == "retain_grad_create_graph":
        a.retain_grad()
        y.sum().backward(create_graph=True)
    elif how == "inplace":
        a.add_(y)
    elif how == "mark_dirty":
        b = a * 1
        c = b * b
        Dirty.apply(b)
        keep.append(c)
    elif how == "post_accumulate_hook":
        x.register_post_accumulate_grad_hook(lambda p, y=y: None)
    elif how == "save_after_forward":
        a.grad_fn.save_for_backward(y)
    else:
        raise AssertionError(how)
    refs = [weakref.ref(o) for o in (x, a, y, y.grad_fn, a.grad_fn)]
    return refs


CYCLES = ["leaf_hook", "nonleaf_hook", "node_hook", "node_prehook", "metadata", "setattr",
          "ctx_container", "grad_assign", "grad_self", "grad_of_grad", "create_graph",
          "retain_grad_create_graph", "inplace", "mark_dirty", "post_accumulate_hook",
          "save_after_forward"]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("how", CYCLES)
def test_cycle_closed_through_untracked_objects_is_collected(how):
    refs = _close_cycle(how)
    assert _freed_by_collector(refs)


def test_cycle_through_a_class_defined_in_a_function_is_collected():
    Local = _local_function()
    y = Local.apply(_leaf() * 1)
    Local.out = y
    refs = [weakref.ref(y), weakref.ref(y.grad_fn), weakref.ref(Local)]
    del y, Local
    assert _freed_by_collector(refs)


def test_cycle_through_saved_tensor_hook_result_is_collected():
    box = []
    x = _leaf()
    with cgrad.autograd.graph.saved_tensors_hooks(lambda t: box, lambda b: x):
        y = (x * 1) * x
    box.append(y)
    refs = [weakref.ref(y), weakref.ref(y.grad_fn)]
    del y, box, x
    assert _freed_by_collector(refs)


# A random mix of graph building and of every mutation above, on a pool of tensors; at the
# end everything is dropped and the collector must free all of it.

def _random_program(rng, n_ops=60, create_graph=True):
    leaves = [_leaf() for _ in range(3)]
    pool = list(leaves)
    boxes = []
    refs = []
    seen_untracked = 0

    def pick():
        return rng.choice(pool)

    for _ in range(n_ops):
        op = rng.randrange(16)
        t = pick()
        try:
            if op < 4:
                u = pick()
                r = [t + u, t - u, t * u, t / (u * u + 1)][op]
            elif op == 4:
                r = SaveInput.apply(t)
            elif op == 5:
                r = SaveOutput.apply(t * 0.1)
            elif op == 6:
                box = []
                boxes.append(box)
                r = WithAttrs.apply(t, box if rng.random() < 0.5 else 3)
                box.append(pick())
            elif op == 7:
                r = t * rng.choice([0.5, 2.0, -1.0]) + 1.0
            elif op == 8 and t.requires_grad:
                u = pick()
                t.register_hook(lambda g, u=u: g)
                r = None
            elif op == 9 and t.grad_fn is not None:
                t.grad_fn.metadata[len(pool)] = pick()
                r = None
            elif op == 10 and t.grad_fn is not None:
                u = pick()
                t.grad_fn.register_prehook(lambda go, u=u: None)
                r = None
            elif op == 11 and t.is_leaf:
                u = pick()
                t.grad = u.detach() if rng.random() < 0.5 else u
                r = None
            elif op == 12 and not t.is_leaf:
                t.add_(pick() * 0.01)
                r = t
            elif op == 13:
                pick().sum().backward(create_graph=create_graph and rng.random() < 0.5,
                                     retain_graph=True)
                r = None
            elif op == 14 and not t.is_leaf:
                t.retain_grad()
                r = None
            elif op == 15 and t.grad_fn is not None:
                t.grad_fn.keep = pick()
                r = None
            else:
                r = None
        except (RuntimeError, AttributeError):     # in-place on a leaf, built-in nodes' slots
            r = None
        if r is not None:
            pool.append(r)
            if r.grad_fn is not None:
                refs.append(weakref.ref(r.grad_fn))
                seen_untracked += not gc.is_tracked(r.grad_fn)
            refs.append(weakref.ref(r))
    refs += [weakref.ref(t) for t in leaves]
    return refs, seen_untracked


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_random_mix_of_graphs_and_mutations_leaks_nothing():
    total_untracked = 0
    all_refs = {}
    for seed in range(120):
        rng = random.Random(seed)
        all_refs[seed], n = _random_program(rng)
        total_untracked += n
    gc.collect()        # once: in a full test run each collection walks the whole heap
    for seed, refs in all_refs.items():
        alive = [r() for r in refs if r() is not None]
        assert alive == [], f"seed {seed}: {len(alive)} objects leaked: {alive[:3]}"
    assert total_untracked > 300       # the programs did exercise untracked nodes


def test_registry_empties_when_graphs_are_dropped():
    gc.collect()
    before = _C._untracked_count()
    x = _leaf()
    ys = [SaveInput.apply(x * float(i)) for i in range(100)]
    assert _C._untracked_count() >= before + 200
    del ys
    assert _C._untracked_count() <= before + 2     # x (with its accumulator) may remain


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_registry_gives_its_memory_back():
    x = _leaf()
    y = x
    for _ in range(100_000):
        y = y * 1.0
    assert _C._untracked_count(capacity=True) >= 100_000
    del y
    assert _C._untracked_count(capacity=True) <= 8192 + 4 * _C._untracked_count()


def test_threads_building_and_flushing_concurrently():

    def work(seed):
        rng = random.Random(seed)
        for _ in range(30):
            refs, _n = _random_program(rng, n_ops=30, create_graph=False)

    run_threads(work, [(s,) for s in range(4)])
    gc.collect()


def test_deep_untracked_chain_frees_without_recursion():
    x = _leaf()
    y = x
    for _ in range(200_000):
        y = y * 1.0
    assert _untracked(y.grad_fn)
    r = weakref.ref(y.grad_fn)
    del y
    assert r() is None
