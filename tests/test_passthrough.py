"""Note [Pass-through backward] (cgrad/_C_engine.pxi): the engine does not call the backward of
Add, AddScalar and SubScalar; it sends the incoming gradient along every edge, validated as a
returned tuple would be. Everything observable must be as if the backward had run."""
import numpy as np
import pytest

import cgrad
from cgrad.ops import arithmetic


def test_gradients_broadcast_and_cast_as_the_backward_would():
    x = cgrad.ones(2, 3, requires_grad=True)
    y = cgrad.ones(3, requires_grad=True)
    w = cgrad.ones(1, 1, requires_grad=True, dtype=cgrad.float64)
    z = ((x + y) + 2.0 - 0.5 + w) * cgrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    z.sum().backward()
    assert x.grad.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert y.grad.tolist() == [5.0, 7.0, 9.0] and y.grad.dtype == cgrad.float32
    assert w.grad.tolist() == [[21.0]] and w.grad.dtype == cgrad.float64
    assert x.grad.dtype == cgrad.float32


def test_node_names_and_next_functions_unchanged():
    x = cgrad.ones(3, requires_grad=True)
    y = cgrad.ones(3, requires_grad=True)
    z = (x + y) - 1.0
    assert type(z.grad_fn).__name__ == "SubBackward0"
    add = z.grad_fn.next_functions[0][0]
    assert type(add).__name__ == "AddBackward0"
    assert [type(n).__name__ for n, _ in add.next_functions] == ["AccumulateGrad"] * 2


def test_a_patched_backward_runs_as_written(monkeypatch):
    monkeypatch.setattr(arithmetic.Add, "backward",
                        staticmethod(lambda ctx, g: (g * 2.0, g * 3.0)))
    x = cgrad.ones(2, requires_grad=True)
    y = cgrad.ones(2, requires_grad=True)
    (x + y).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0] and y.grad.tolist() == [3.0, 3.0]


def test_pass_through_is_back_after_unpatching():
    x = cgrad.ones(2, requires_grad=True)
    y = cgrad.ones(2, requires_grad=True)
    (x + y).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and y.grad.tolist() == [1.0, 1.0]


def test_hooks_pruning_anomaly_and_double_backward():
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = cgrad.tensor([3.0, 4.0], requires_grad=True)
    z = x + y
    seen = []
    z.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
    z.grad_fn.register_prehook(lambda go: (go[0] * 10.0,))
    z.sum().backward()
    assert x.grad.tolist() == [10.0, 10.0] and y.grad.tolist() == [10.0, 10.0]
    assert len(seen) == 1 and len(seen[0][0]) == 2
    x.grad = None
    z = x + y
    z.grad_fn.register_prehook(lambda go: (go[0] * 5.0,))      # pre-hook only: fast path
    z.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]
    a = x + 1.0
    (gx,) = cgrad.autograd.grad((a * a).sum(), [x], create_graph=True)   # pruned run
    assert gx.tolist() == [4.0, 6.0]
    (hx,) = cgrad.autograd.grad(gx.sum(), [x])
    assert hx.tolist() == [2.0, 2.0]
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"), \
            cgrad.autograd.detect_anomaly():
        (gy,) = cgrad.autograd.grad((x - 2.0 + y).sum(), [y])
    assert gy.tolist() == [1.0, 1.0]


def test_missing_gradient_sends_nothing():
    x = cgrad.ones(2, requires_grad=True)
    a, b = (x + 1.0), (x * 2.0)
    (b.sum()).backward(inputs=[x])
    assert x.grad.tolist() == [2.0, 2.0]
    del a


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xa, ya = rng.standard_normal((3, 4)), rng.standard_normal(4)
    res = []
    for lib in (cgrad, torch):
        x = lib.tensor(xa, requires_grad=True)
        y = lib.tensor(ya, requires_grad=True)
        ((x + y - 0.5 + 2.0) * (x + 1.0)).sum().backward()
        res.append((x.grad.numpy(), y.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)
