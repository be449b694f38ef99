"""The operator fast path in cgrad._C: Note [Binop slots] (every Tensor subclass gets the
C number slots unless it overrides them) and Note [Scalar cache] (Python scalars become cached
0-d arrays of the tensor's dtype for the NumPy kernel, with results identical to NumPy's
own weak-scalar arithmetic)."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import cgrad
from cgrad import nn

OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]


class Sub(cgrad.Tensor):
    __slots__ = ()


def _as(cls, arr):
    out = cgrad.Tensor.__new__(cls)
    out.data = cgrad.tensor(arr)
    return out


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("kind", ["tensor", "parameter", "subclass"])
def test_subclasses_use_the_operators(op, kind):
    a = np.array([1.5, 2.0, 3.0], np.float32)
    b = np.array([0.5, 4.0, 2.0], np.float32)
    if kind == "tensor":
        x = cgrad.tensor(a, requires_grad=True)
    elif kind == "parameter":
        x = nn.Parameter(cgrad.tensor(a))
    else:
        x = _as(Sub, a).requires_grad_()
        assert type(x) is Sub
    y = cgrad.tensor(b)
    for got, want in [(op(x, y), op(a, b)), (op(y, x), op(b, a)),
                      (op(x, 2.0), op(a, np.float32(2.0))),
                      (op(2.0, x), op(np.float32(2.0), a))]:
        assert isinstance(got, cgrad.Tensor)
        assert got.dtype == cgrad.float32
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-6)
        assert got.requires_grad
        got.sum().backward()
    assert x.grad is not None


def test_subclass_overrides_win():
    class Mine(cgrad.Tensor):
        __slots__ = ()

        def __mul__(self, other):
            return "mul"

        def __rtruediv__(self, other):
            return "rtruediv"

    m = _as(Mine, [1.0])
    assert m * 2 == "mul"
    assert 2 / m == "rtruediv"
    # the slots it does not override are still cgrad's
    assert isinstance(m + 1, cgrad.Tensor)
    assert isinstance(2 * m, cgrad.Tensor)       # __rmul__ is inherited, not __mul__
    # assigning an operator after the class exists takes effect (CPython's update_slot)
    Mine.__add__ = lambda self, other: "add"
    assert m + 1 == "add"


def test_operator_lookup_does_not_bind_methods():
    # `a * b` on cgrad.Tensor must not go through a Python-level `__mul__` lookup: replacing
    # the method object that Cython exposes on TensorBase would otherwise be seen.
    x = cgrad.tensor([2.0])
    assert type(x).__mul__ is cgrad._C.TensorBase.__mul__
    assert (x * x).tolist() == [4.0]


SCALARS = [0.1, 1.0001, 0.5, 2, 3, -7, 1e-45, 1e-320, 3.4e38, 3.5e38, 1e300, 10**40,
           -(2**63), 2**64, math.pi, -0.0, 0.0, float("inf"), float("-inf"), float("nan"),
           True, False]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", OPS[:4], ids=lambda o: o.__name__)
def test_scalar_results_match_numpy_bitwise(dtype, op):
    a = np.array([1.5, -2.25, 0.0, 3e-39, 7.0], dtype)
    x = cgrad.tensor(a)
    with np.errstate(all="ignore"):
        for _ in range(2):            # second round: cache hits
            for s in SCALARS:
                for got, want in [(op(x, s), op(a, s)), (op(s, x), op(s, a))]:
                    want = np.asarray(want)
                    assert got.dtype == cgrad.tensor(want).dtype, (op, s)
                    g = got.numpy()
                    assert g.dtype == want.dtype
                    np.testing.assert_array_equal(np.signbit(g), np.signbit(want))
                    np.testing.assert_array_equal(g, want)


def test_negative_zero_keeps_its_sign_after_zero():
    x = cgrad.tensor([1.0, 2.0])
    assert not np.signbit((x * 0.0).numpy()).any()
    assert np.signbit((x * -0.0).numpy()).all()
    assert not np.signbit((x * 0.0).numpy()).any()
    assert np.signbit((x + -0.0 - 1.0 - (-0.0) - 1.0 - 1.0).numpy()[0]) == np.signbit(-1.0)


def test_integer_tensors_with_scalars_follow_torch_promotion():
    x = cgrad.tensor([1, 2, 3])
    assert (x * 2).dtype == cgrad.int64
    assert (x * 0.5).dtype == cgrad.float32
    assert (x / 2).dtype == cgrad.float32
    assert (x * 0.5).tolist() == [0.5, 1.0, 1.5]


def test_node_keeps_the_python_scalar():
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    for y in (x * 0.25, x / 0.25, 0.25 / x):
        assert type(y.grad_fn._aux) in (float, type(None))
    y = x * 0.25
    (g,) = cgrad.autograd.grad(y.sum(), x, create_graph=True)
    assert g.tolist() == [0.25, 0.25]
    z = x * x * 3.0
    (g,) = cgrad.autograd.grad(z.sum(), x, create_graph=True)
    (h,) = cgrad.autograd.grad(g.sum(), x)
    assert h.tolist() == [6.0, 6.0]


def test_many_distinct_scalars_stay_correct():
    a = np.linspace(-3, 3, 7).astype(np.float32)
    x = cgrad.tensor(a)
    for i in range(1000):       # beyond the cache bound
        s = 1.0 + i / 997.0
        np.testing.assert_array_equal((x * s).numpy(), a * s)
        np.testing.assert_array_equal((s - x).numpy(), s - a)


def test_numpy_scalars_and_0d_arrays():
    a = np.array([1.0, 2.0], np.float32)
    x = cgrad.tensor(a, requires_grad=True)
    y = x * np.float32(3.0)
    assert y.dtype == cgrad.float32 and y.grad_fn.name() == "MulBackward0"
    y = x * np.float64(3.0)          # a NumPy scalar is weak, as a Python scalar
    assert y.dtype == cgrad.float32
    y = x * np.array(3.0)            # a 0-d array is a tensor operand: float64 0-d tensor
    assert y.dtype == cgrad.float32
    np.testing.assert_array_equal(y.detach().numpy(), a * 3)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
def test_scalar_ops_match_torch(op):
    torch = pytest.importorskip("torch")
    a = np.array([1.5, -2.25, 0.5, 7.0], np.float32)
    for s in (0.1, 2, 0.0, -0.0, 1e-45, 3.5e38):
        for left in (True, False):
            x = cgrad.tensor(a, requires_grad=True)
            tx = torch.tensor(a, requires_grad=True)
            with np.errstate(all="ignore"):
                y = op(x, s) if left else op(s, x)
            ty = op(tx, s) if left else op(s, tx)
            assert str(y.dtype).split(".")[-1] == str(ty.dtype).split(".")[-1]
            np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
            if math.isfinite(s) and s != 0 or op is not operator.truediv:
                with np.errstate(all="ignore"):
                    y.sum().backward()
                ty.sum().backward()
                np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5,
                                           equal_nan=True)
