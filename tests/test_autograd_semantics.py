"""torch.autograd semantics beyond the core (issue 6): in-place ops and version counters,
hooks, once_differentiable, anomaly mode, saved-tensor hooks, exact needs_input_grad.

Each behaviour is checked against torch when it is installed (same code, module swapped) and
on its own otherwise.
"""
from __future__ import annotations

import gc
import re
import threading
import warnings
import weakref

import numpy as np
import pytest

import cgrad

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

MODULES = [cgrad] + ([torch] if torch is not None else [])
both = pytest.mark.parametrize("m", MODULES, ids=lambda m: m.__name__)


def arr(t):
    return np.asarray(t.detach().numpy())


def name(node):
    return type(node).__name__


# ------------------------------------------------------------------------------------------
# in-place ops on tensors with history
# ------------------------------------------------------------------------------------------
INPLACE = [
    ("add_", lambda a, y: a.add_(y), "AddBackward0"),
    ("add_alpha", lambda a, y: a.add_(y, alpha=2.0), "AddBackward0"),
    ("sub_", lambda a, y: a.sub_(y), "SubBackward0"),
    ("mul_", lambda a, y: a.mul_(y), "MulBackward0"),
    ("div_", lambda a, y: a.div_(y), "DivBackward0"),
    ("mul_scalar", lambda a, y: a.mul_(3.0), "MulBackward0"),
    ("pow_", lambda a, y: a.pow_(2), "PowBackward0"),
    ("neg_", lambda a, y: a.neg_(), "NegBackward0"),
    ("exp_", lambda a, y: a.exp_(), "ExpBackward0"),
    ("clamp_", lambda a, y: a.clamp_(0.5, 1.5), "ClampBackward1"),
    ("zero_", lambda a, y: a.zero_(), "ZeroBackward0"),
    ("fill_", lambda a, y: a.fill_(2.0), "FillBackward2"),
    ("fill_tensor", lambda a, y: a.fill_(y[0]), "FillBackward3"),
    ("copy_", lambda a, y: a.copy_(y), "CopyBackwards"),
    ("masked_fill_", lambda a, y: a.masked_fill_(a > 1.0, 0.0), "MaskedFillBackward0"),
    ("iadd", lambda a, y: a.__iadd__(y), "AddBackward0"),
    ("imul", lambda a, y: a.__imul__(y), "MulBackward0"),
    ("isub", lambda a, y: a.__isub__(y), "SubBackward0"),
    ("itruediv", lambda a, y: a.__itruediv__(y), "DivBackward0"),
    ("setitem_basic", lambda a, y: a.__setitem__(slice(0, 2), y[1:3] * 2), "CopySlices"),
    ("setitem_int", lambda a, y: a.__setitem__(1, 5.0), "CopySlices"),
    ("setitem_mask", lambda a, y: a.__setitem__(a > 1.0, 0.0), "IndexPutBackward0"),
    ("setitem_adv", lambda a, y: a.__setitem__([0, 3], y[:2]), "IndexPutBackward0"),
]


@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_on_nonleaf_matches_torch(case):
    tr = pytest.importorskip("torch")
    _, op, node = case
    res = []
    for m in (cgrad, tr):
        x = m.tensor([0.3, 1.2, 0.8, 1.7], dtype=m.float64, requires_grad=True)
        y = m.tensor([1.5, -0.5, 2.0, 0.7], dtype=m.float64, requires_grad=True)
        a = x * 1.0
        v0 = a._version
        r = op(a, y)
        assert r is a or r is None          # __setitem__ returns None
        assert a._version > v0
        assert name(a.grad_fn) == node
        (a * m.arange(1, 5, dtype=m.float64)).sum().backward()
        res.append((arr(a), arr(x.grad), None if y.grad is None else arr(y.grad)))
    (ac, gxc, gyc), (at, gxt, gyt) = res
    np.testing.assert_allclose(ac, at, rtol=1e-12)
    np.testing.assert_allclose(gxc, gxt, rtol=1e-12)
    if gyt is None:
        assert gyc is None or not np.any(gyc)
    else:
        np.testing.assert_allclose(gyc, gyt, rtol=1e-12)


def test_inplace_chain_gradients_are_correct():
    x = cgrad.tensor([0.3, 1.2], dtype=cgrad.float64, requires_grad=True)
    y = cgrad.tensor([1.5, -0.5], dtype=cgrad.float64, requires_grad=True)
    a = x * 1.0
    a.mul_(y)
    a.add_(x)
    a.pow_(2)
    a.sum().backward()
    xv, yv = x.detach().numpy(), y.detach().numpy()
    inner = xv * yv + xv
    np.testing.assert_allclose(x.grad.numpy(), 2 * inner * (yv + 1))
    np.testing.assert_allclose(y.grad.numpy(), 2 * inner * xv)


def test_inplace_with_grad_arg_makes_plain_tensor_nonleaf():
    y = cgrad.tensor([1.0, 2.0], requires_grad=True)
    a = cgrad.zeros(2)
    a.add_(y * 3)
    assert a.requires_grad and not a.is_leaf
    a.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])


@both
def test_leaf_inplace_raises_under_grad_and_is_allowed_under_no_grad(m):
    p = m.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation"):
        p.add_(1.0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        p[0] = 3.0
    with m.no_grad():
        p.add_(1.0)
        p.mul_(2.0)
        p[0] = 7.0
    assert p.is_leaf and p.requires_grad
    np.testing.assert_array_equal(arr(p), [7.0, 6.0])
    assert p._version == 3


@both
def test_saved_tensor_modified_in_place_raises(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    b = a * a           # saves a
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient "
                                           r"computation has been modified by an inplace "
                                           r"operation: .* is at version 1; expected version "
                                           r"0 instead"):
        b.sum().backward()


@both
def test_saved_output_modified_in_place_raises(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    b = x.exp()          # saves its output
    with m.no_grad():
        b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


@both
def test_views_share_the_version_counter(m):
    x = m.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = x[0]
    w = x.view(4)
    d = x.detach()
    x.add_(1)
    assert v._version == w._version == d._version == x._version == 1
    v.mul_(2)
    assert x._version == 2
    np.testing.assert_array_equal(arr(x), [[4.0, 6.0], [4.0, 5.0]])


def test_saved_view_modified_through_base_raises():
    x = cgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = cgrad.tensor([1.0, 2.0, 3.0])
    v = base[1:]
    y = (x[1:] * v).sum()       # saves v
    base.add_(1)                # bumps the shared counter
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def _views_program(m):
    x = m.tensor([[0.3, 1.2, 0.8], [1.7, -0.4, 2.0]], dtype=m.float64, requires_grad=True)
    y = m.tensor([1.5, -0.5, 2.0], dtype=m.float64, requires_grad=True)
    a = x * 1.0
    v = a[0]
    v.mul_(y)                      # rebases a through CopySlices
    a[:, 1].add_(3.0)
    a[1, 0:2] = y[1:] * 4          # setitem on a view of a
    a.t()[2].exp_()
    names = [name(a.grad_fn), name(v.grad_fn), a._version, v._version]
    (a * m.arange(1, 7, dtype=m.float64).reshape(2, 3)).sum().backward()
    return names, arr(a), arr(v), arr(x.grad), arr(y.grad)


def test_inplace_on_views_rebases_the_base_like_torch():
    tr = pytest.importorskip("torch")
    c, t = _views_program(cgrad), _views_program(tr)
    assert c[0] == t[0] == ["CopySlices", "AsStridedBackward0", 4, 4]
    for u, w in zip(c[1:], t[1:]):
        np.testing.assert_allclose(u, w, rtol=1e-12)


def test_inplace_on_view_gradcheck():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from gradcheck_util import gradcheck, gradgradcheck

    def f(x, y):
        a = x * 1.0
        a[1].mul_(y)
        a[:, 0].sub_(y[:2] ** 2)
        return a
    rng = np.random.default_rng(0)
    x = cgrad.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = cgrad.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(f, (x, y))
    assert gradgradcheck(f, (x, y))


@both
def test_inplace_view_errors(m):
    p = m.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation"):
        p[0:2].mul_(2)
    q = m.ones(1, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        q.expand(3).mul_(2)
    with m.no_grad():
        p[0:2].mul_(2)             # allowed without grad mode
    assert arr(p).tolist() == [2.0, 2.0, 1.0]


@both
def test_inplace_dtype_rule(m):
    i = m.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        i.add_(1.5)
    i.add_(2)
    assert arr(i).tolist() == [3, 4]


def _setitem_plain(m):
    x = m.zeros(3, 4)
    x[1] = 1.0
    x[:, 2] = m.tensor([5.0, 6.0, 7.0])
    x[x > 5.5] = -1.0
    x[[0, 2], [0, 0]] = m.tensor([8.0, 9.0])
    assert x._version == 4
    return arr(x)


def test_setitem_plain():
    x = _setitem_plain(cgrad)
    assert x[1].tolist() == [1.0, 1.0, -1.0, 1.0]      # 6 > 5.5 was overwritten


def test_setitem_plain_matches_torch():
    pytest.importorskip("torch")
    np.testing.assert_array_equal(_setitem_plain(cgrad), _setitem_plain(torch))


@both
def test_mark_dirty_returns_input_with_rebased_history(m):
    class Double(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = m.tensor([1.0, 3.0], requires_grad=True)
    a = x * 1
    y = Double.apply(a)
    assert y is a
    assert "Double" in name(a.grad_fn)
    assert a._version == 2          # mul_ and mark_dirty each bump it, as in torch
    y.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 2.0])


# ------------------------------------------------------------------------------------------
# hooks
# ------------------------------------------------------------------------------------------
@both
def test_tensor_hook_order_and_retain_grad_last(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    calls = []
    y.retain_grad()                          # registered first, must still run last
    y.register_hook(lambda g: calls.append("h1") or g * 10)
    y.register_hook(lambda g: calls.append("h2") or None)
    y.sum().backward()
    assert calls == ["h1", "h2"]
    np.testing.assert_array_equal(arr(y.grad), [10.0, 10.0])
    np.testing.assert_array_equal(arr(x.grad), [20.0, 20.0])


@both
def test_leaf_hook_runs_before_accumulation_and_post_accumulate_hook(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: g * 3)
    x.register_post_accumulate_grad_hook(lambda p: seen.append(arr(p.grad).copy()))
    (x * 2).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [6.0, 6.0])
    np.testing.assert_array_equal(seen[0], [6.0, 6.0])


@both
def test_handle_remove(m):
    x = m.tensor([1.0], requires_grad=True)
    y = x * 2
    h = y.register_hook(lambda g: g * 100)
    h.remove()
    y.backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0])


@both
def test_node_hooks(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = {}

    def pre(grad_outputs):
        seen["pre"] = arr(grad_outputs[0]).copy()
        return (grad_outputs[0] * 3,)

    def post(grad_inputs, grad_outputs):
        seen["post"] = arr(grad_inputs[0]).copy()

    h1 = y.grad_fn.register_prehook(pre)
    h2 = y.grad_fn.register_hook(post)
    y.sum().backward()
    np.testing.assert_array_equal(seen["pre"], [1.0, 1.0])
    np.testing.assert_array_equal(seen["post"], [6.0, 6.0])
    np.testing.assert_array_equal(arr(x.grad), [6.0, 6.0])
    h1.remove()
    h2.remove()


@both
def test_hook_errors(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        m.tensor([1.0]).register_hook(lambda g: g)
    y = x * 2
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="hook .* has changed the size of value"):
        y.sum().backward()


@both
def test_nonleaf_grad_access_warns(m):
    x = m.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert y.grad is None


# ------------------------------------------------------------------------------------------
# once_differentiable
# ------------------------------------------------------------------------------------------
def _once_fn(m):
    from importlib import import_module
    once = import_module(m.__name__ + ".autograd.function").once_differentiable

    class Sq(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once
        def backward(ctx, g):
            x, = ctx.saved_tensors
            assert not m.is_grad_enabled()
            return 2 * x * g
    return Sq


@both
def test_once_differentiable_first_order_and_error_on_second(m):
    Sq = _once_fn(m)
    x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    y = Sq.apply(x)
    y.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 4.0])
    g, = m.autograd.grad((Sq.apply(x) ** 2).sum(), x, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that "
                                           "was marked with @once_differentiable"):
        g.sum().backward()


# ------------------------------------------------------------------------------------------
# anomaly mode
# ------------------------------------------------------------------------------------------
def _nan_fn(m):
    class Bad(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    return Bad


@both
def test_detect_anomaly_nan(m):
    Bad = _nan_fn(m)
    x = m.tensor([1.0], requires_grad=True)
    Bad.apply(x).sum().backward()             # no check outside anomaly mode
    assert np.isnan(arr(x.grad)).all()
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctxm = m.autograd.detect_anomaly()
    with ctxm:
        assert m.is_anomaly_enabled() if hasattr(m, "is_anomaly_enabled") else True
        y = Bad.apply(x).sum()
        with pytest.raises(RuntimeError, match="Function 'BadBackward' returned nan values "
                                               "in its 0th output."), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y.backward()
    assert not m.autograd.anomaly_mode.is_anomaly_enabled() if m is cgrad else True


@both
def test_set_detect_anomaly_check_nan_false(m):
    Bad = _nan_fn(m)
    x = m.tensor([1.0], requires_grad=True)
    with m.autograd.set_detect_anomaly(True, check_nan=False):
        Bad.apply(x).sum().backward()
    assert np.isnan(arr(x.grad)).all()


def test_detect_anomaly_shows_forward_traceback():
    class Fails(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = cgrad.tensor([1.0], requires_grad=True)

    def make_the_node():
        return Fails.apply(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anomaly = cgrad.autograd.detect_anomaly()
    with anomaly:
        y = make_the_node()
        with pytest.warns(UserWarning, match="Error detected in FailsBackward") as rec, \
                pytest.raises(ValueError, match="boom"):
            y.sum().backward()
    msg = str(rec[0].message)
    assert "Traceback of forward call that caused the error" in msg
    assert "make_the_node" in msg


def test_anomaly_off_records_nothing():
    x = cgrad.tensor([1.0], requires_grad=True)
    y = x * 2
    assert "traceback_" not in y.grad_fn.metadata


# ------------------------------------------------------------------------------------------
# saved-tensor hooks
# ------------------------------------------------------------------------------------------
@both
def test_saved_tensors_hooks_pack_unpack(m):
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return arr(t).copy()

    def unpack(a):
        unpacked.append(a.shape)
        return m.from_numpy(a)

    x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x * x).exp().sum()     # mul saves x twice, exp saves its output
    assert len(packed) == 3
    y.backward()
    assert len(unpacked) == 3
    xv = np.array([1.0, 2.0])
    np.testing.assert_allclose(arr(x.grad), np.exp(xv * xv) * 2 * xv)


@both
def test_saved_tensors_hooks_custom_function(m):
    log = []

    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            log.append("unpacked")
            return g * 3

    x = m.tensor([1.0], requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t,
                                              lambda t: t):
        y = F.apply(x)
    y.backward()
    assert log == ["pack", "unpacked"]


def test_saved_tensors_hooks_are_thread_local_and_nest():
    outer, inner, other = [], [], []
    x = cgrad.tensor([1.0], requires_grad=True)

    def worker():
        y = x * x
        other.append(y)

    with cgrad.autograd.graph.saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with cgrad.autograd.graph.saved_tensors_hooks(lambda t: inner.append(1) or t,
                                                      lambda t: t):
            _ = x * x
        _ = x * x
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    assert len(inner) == 2 and len(outer) == 2
    _ = x * x
    assert len(outer) == 2


@both
def test_disable_saved_tensors_hooks(m):
    with m.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass


def test_unpack_must_return_tensor():
    x = cgrad.tensor([1.0], requires_grad=True)
    with cgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = x * x
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()


def test_packed_tensors_are_freed_with_the_graph():
    x = cgrad.tensor(np.ones(10), requires_grad=True)
    holder = []

    class Box:
        pass

    def pack(t):
        b = Box()
        b.t = t
        holder.append(weakref.ref(b))
        return b

    with cgrad.autograd.graph.saved_tensors_hooks(pack, lambda b: b.t):
        y = (x * x).exp().sum()
    assert all(r() is not None for r in holder)
    del y
    gc.collect()
    assert all(r() is None for r in holder)


# ------------------------------------------------------------------------------------------
# needs_input_grad exact per backward call
# ------------------------------------------------------------------------------------------
def _recording_fn():
    seen = []

    class Prod(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen.append(tuple(ctx.needs_input_grad))
            a, b = ctx.saved_tensors
            ga = g * b if ctx.needs_input_grad[0] else None
            gb = g * a if ctx.needs_input_grad[1] else None
            return ga, gb
    return Prod, seen


def test_needs_input_grad_exact_for_grad_wrt_one_input():
    Prod, seen = _recording_fn()
    a = cgrad.tensor([2.0], requires_grad=True)
    b = cgrad.tensor([3.0], requires_grad=True)
    y = Prod.apply(a, b)
    assert y.grad_fn.needs_input_grad == (True, True)
    ga, = cgrad.autograd.grad(y, a, retain_graph=True)
    assert seen[-1] == (True, False)
    assert ga.item() == 3.0
    gb, = cgrad.autograd.grad(y, b, retain_graph=True)
    assert seen[-1] == (False, True)
    y.backward(inputs=[a], retain_graph=True)
    assert seen[-1] == (True, False)
    assert b.grad is None
    y.backward()
    assert seen[-1] == (True, True)


def test_needs_input_grad_exact_through_a_chain():
    Prod, seen = _recording_fn()
    a = cgrad.tensor([2.0], requires_grad=True)
    b = cgrad.tensor([3.0], requires_grad=True)
    c = cgrad.tensor([5.0], requires_grad=True)
    h = a * c                      # a path to c goes through input 0 of Prod
    y = Prod.apply(h, b)
    gc_, = cgrad.autograd.grad(y, c)
    assert seen[-1] == (True, False)
    assert gc_.item() == 2.0 * 3.0


def test_needs_input_grad_ignored_backward_still_correct():
    class Full(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = cgrad.tensor([2.0], requires_grad=True)
    b = cgrad.tensor([3.0], requires_grad=True)
    ga, = cgrad.autograd.grad(Full.apply(a, b), a)
    assert ga.item() == 3.0
    assert b.grad is None


# ------------------------------------------------------------------------------------------
# broadcasting errors: torch's RuntimeError, from operators and from ops
# ------------------------------------------------------------------------------------------
BCAST = [
    ("add", lambda m: m.ones(3, 4) + m.ones(3), "a (4) must match the size of tensor b (3) "
                                                "at non-singleton dimension 1"),
    ("mul", lambda m: m.ones(3, 4, requires_grad=True) * m.ones(3, 3),
     "a (4) must match the size of tensor b (3) at non-singleton dimension 1"),
    ("sub3d", lambda m: m.ones(2, 3, 4) - m.ones(5, 1, 4),
     "a (2) must match the size of tensor b (5) at non-singleton dimension 0"),
    ("maximum", lambda m: m.maximum(m.ones(3, 4), m.ones(3)),
     "a (4) must match the size of tensor b (3) at non-singleton dimension 1"),
]


@both
@pytest.mark.parametrize("case", BCAST, ids=[c[0] for c in BCAST])
def test_broadcast_errors_match_torch(m, case):
    _, fn, phrase = case
    with pytest.raises(RuntimeError, match=r"The size of tensor " + re.escape(phrase)):
        fn(m)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [10, 10000])
def test_add_sub_alpha_in_place(dtype, n):
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a, b = cgrad.tensor(a0), cgrad.tensor(b0)
    buf = a._data
    a.add_(b, alpha=-0.5)
    a.sub_(b, alpha=0.25)
    assert a._data is buf and a._version == 2
    np.testing.assert_allclose(a.numpy(), a0 - 0.75 * b0, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b.numpy(), b0)


def _stale_views_program(m):
    x = m.tensor([[0.3, 1.2, 0.8], [1.7, -0.4, 2.0]], dtype=m.float64, requires_grad=True)
    y = m.tensor([1.5, -0.5, 2.0], dtype=m.float64, requires_grad=True)
    a = x * 1.0
    col = a[:, 0]          # views made before the in-place ops
    row = a[0]
    row.mul_(y)            # also changes col[0]
    a.add_(1.0)            # in place on the base: both views are stale
    out = (col * m.tensor([2.0, 3.0], dtype=m.float64)).sum() + (row * 5).sum()
    names = [name(col.grad_fn), name(row.grad_fn)]
    out.backward()
    return names, arr(x.grad), arr(y.grad)


def test_stale_views_are_regenerated_like_torch():
    tr = pytest.importorskip("torch")
    c, t = _stale_views_program(cgrad), _stale_views_program(tr)
    assert c[0] == t[0] == ["AsStridedBackward0", "AsStridedBackward0"]
    np.testing.assert_allclose(c[1], t[1], rtol=1e-12)
    np.testing.assert_allclose(c[2], t[2], rtol=1e-12)


# ------------------------------------------------------------------------------------------
# autograd.grad(is_grads_batched=True): one vector-Jacobian product per row of grad_outputs
# ------------------------------------------------------------------------------------------
def _batched_setup(m):
    x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    w = m.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], dtype=m.float64, requires_grad=True)
    y = (w @ x.exp()).tanh()                       # (2,), depends on x and w
    return x, w, y


@both
def test_grads_batched_equals_one_grad_per_row(m):
    x, w, y = _batched_setup(m)
    v = m.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, -2.0]], dtype=m.float64)
    gx, gw = m.autograd.grad(y, [x, w], v, retain_graph=True, is_grads_batched=True)
    assert tuple(gx.shape) == (3, 3) and tuple(gw.shape) == (3, 2, 3)
    assert gx.grad_fn is None and not gx.requires_grad
    for b in range(3):
        rx, rw = m.autograd.grad(y, [x, w], v[b], retain_graph=True)
        np.testing.assert_allclose(arr(gx[b]), arr(rx), rtol=1e-12)
        np.testing.assert_allclose(arr(gw[b]), arr(rw), rtol=1e-12)
    # the full Jacobian, rows against finite differences
    jac = arr(m.autograd.grad(y, x, m.eye(2, dtype=m.float64), is_grads_batched=True)[0])
    x0, w0 = arr(x), arr(w)
    f = lambda xx: np.tanh(w0 @ np.exp(xx))   # noqa: E731
    fd = np.stack([(f(x0 + e) - f(x0 - e)) / 2e-6 for e in np.eye(3) * 1e-6], axis=1)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-9)


@both
def test_grads_batched_several_outputs_unused_inputs_and_casts(m):
    x = m.tensor([1.0, 2.0], requires_grad=True)
    z = m.tensor([1.0], requires_grad=True)
    a, b = x * 2, (x * x).sum()
    ga, = m.autograd.grad([a, b], x, [m.ones(4, 2), m.arange(4.0)], retain_graph=True,
                          is_grads_batched=True)
    np.testing.assert_allclose(arr(ga), 2.0 + np.arange(4.0)[:, None] * 2 * arr(x))
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        m.autograd.grad(a, [x, z], m.eye(2), retain_graph=True, is_grads_batched=True)
    gx, gz = m.autograd.grad(a, [x, z], m.eye(2), retain_graph=True, is_grads_batched=True,
                             allow_unused=True)
    assert gz is None
    gx, gz = m.autograd.grad(a, [x, z], m.eye(2), retain_graph=True, is_grads_batched=True,
                             materialize_grads=True)
    assert tuple(gz.shape) == (1,) and not gz.requires_grad    # the input's shape, unbatched
    g64, = m.autograd.grad(a, x, m.eye(2, dtype=m.float64), retain_graph=True,
                           is_grads_batched=True)
    assert g64.dtype == m.float32                                # the seed is cast


@both
def test_grads_batched_create_graph_and_retain_graph(m):
    x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    y = x ** 3
    h, = m.autograd.grad(y, x, m.eye(3, dtype=m.float64), create_graph=True,
                         is_grads_batched=True)
    assert h.requires_grad and h.grad_fn is not None
    g2, = m.autograd.grad(h.sum(), x)                            # d/dx sum_i 3 x_i^2
    np.testing.assert_allclose(arr(g2), 6 * arr(x))
    _, gz = m.autograd.grad(y.sum(), [x, m.ones(1, requires_grad=True)], create_graph=True,
                            materialize_grads=True)
    assert gz.requires_grad                                      # zeros_like(requires_grad=)
    y = x * x
    m.autograd.grad(y, x, m.eye(3, dtype=m.float64), is_grads_batched=True)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        m.autograd.grad(y, x, m.eye(3, dtype=m.float64), is_grads_batched=True)


@both
def test_grads_batched_errors(m):
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=re.escape(
            "If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
            "as the batch dimension. The sizes of the remaining dimensions are expected to "
            "match the shape of corresponding output, but a mismatch was detected: "
            f"grad_output[0] has a shape of {m.__name__}.Size([]) and output[0] has a shape "
            f"of {m.__name__}.Size([3]).")):
        m.autograd.grad(y, x, m.ones(3, 2), retain_graph=True, is_grads_batched=True)
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the "
                                         r"mapped dimension, got sizes \[3, 2\]"):
        m.autograd.grad([y, y * 3], x, [m.ones(3, 3), m.ones(2, 3)], retain_graph=True,
                        is_grads_batched=True)
    with pytest.raises(IndexError, match="index 0 is out of bounds for dimension 0 with size 0"):
        m.autograd.grad(y, x, m.ones(0, 3), retain_graph=True, is_grads_batched=True)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        m.autograd.grad(y.sum(), x, m.tensor(1.0), retain_graph=True, is_grads_batched=True)
    with pytest.raises(ValueError, match="Got in_dim=0 for some input, but that input is a "
                                         "Tensor of dimensionality 0"):
        m.autograd.grad(y.sum(), x, retain_graph=True, is_grads_batched=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "invalid gradient at index 0 - got [] but expected shape compatible with [1]")):
        m.autograd.grad(y.sum().reshape(1), x, retain_graph=True, is_grads_batched=True)
