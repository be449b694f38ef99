"""Scans with an index or in log space (cgrad/ops/scans.py): cummax, cummin, logcumsumexp,
driven by one op table (OPS) as tests/test_ops_reduce.py, whose inputs and helpers it shares.

For every row: the forward equals a NumPy reference (float32, float64); gradcheck and
gradgradcheck pass (float64) except rows tagged "nondiff"; values, vector-Jacobian and
second-order products equal torch's (ties and NaNs included); the node name is torch's.
Then: indices against torch on random inputs with ties and NaNs, return types, dtypes,
errors, and logcumsumexp's gradient where the incoming gradient is 0 (exact, to any order).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402
from test_ops_core import Case, cg_inputs, node_name, np_of, th_inputs  # noqa: E402
from test_ops_reduce import _close, _second_order, make_arrays  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


S34 = (3, 4)
T234 = (2, 3, 4)
ND = ("nondiff",)


def C(name, cg, ref, shapes, domain="real", node=None, tags=()):
    return Case(name, cg, ref, shapes, domain, node, None, tuple(tags))


def _lcse(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


OPS = [
    C("cummax", lambda m, x: x.cummax(1).values, lambda x: np.maximum.accumulate(x, 1), (S34,),
      "real", "CummaxBackward0"),
    C("cummax_fn_dim0", lambda m, x: m.cummax(x, 0)[0], lambda x: np.maximum.accumulate(x, 0),
      (S34,), "real", "CummaxBackward0"),
    C("cummax_neg_3d", lambda m, x: x.cummax(dim=-2).values,
      lambda x: np.maximum.accumulate(x, -2), (T234,), "real", "CummaxBackward0"),
    C("cummax_ties", lambda m, x: x.cummax(1).values, lambda x: np.maximum.accumulate(x, 1),
      (S34,), "ties", "CummaxBackward0", ND),
    C("cummax_0d", lambda m, x: x.cummax(0).values, lambda x: x, ((),), "real",
      "CummaxBackward0"),
    C("cummin", lambda m, x: x.cummin(1).values, lambda x: np.minimum.accumulate(x, 1), (S34,),
      "real", "CumminBackward0"),
    C("cummin_fn_3d", lambda m, x: m.cummin(x, 2).values,
      lambda x: np.minimum.accumulate(x, 2), (T234,), "real", "CumminBackward0"),
    C("cummin_ties", lambda m, x: x.cummin(0).values, lambda x: np.minimum.accumulate(x, 0),
      (S34,), "ties", "CumminBackward0", ND),
    C("cummax_nan", lambda m, x: x.cummax(1).values, lambda x: np.maximum.accumulate(x, 1),
      (S34,), "nan", "CummaxBackward0", ND),
    C("cummin_nan", lambda m, x: x.cummin(0).values, lambda x: np.minimum.accumulate(x, 0),
      (S34,), "nan", "CumminBackward0", ND),
    C("cummax_times_x", lambda m, x: x.cummax(1).values * x,
      lambda x: np.maximum.accumulate(x, 1) * x, (S34,), "real", "MulBackward0"),
    C("logcumsumexp", lambda m, x: x.logcumsumexp(1), lambda x: _lcse(x, 1), (S34,), "real",
      "LogcumsumexpBackward0"),
    C("logcumsumexp_fn_dim0", lambda m, x: m.logcumsumexp(x, 0), lambda x: _lcse(x, 0),
      (S34,), "real", "LogcumsumexpBackward0"),
    C("logcumsumexp_neg_3d", lambda m, x: x.logcumsumexp(dim=-1), lambda x: _lcse(x, -1),
      (T234,), "real", "LogcumsumexpBackward0"),
    C("logcumsumexp_large", lambda m, x: x.logcumsumexp(1), lambda x: _lcse(x, 1), (S34,),
      "large", "LogcumsumexpBackward0"),
    C("logcumsumexp_ties", lambda m, x: x.logcumsumexp(0), lambda x: _lcse(x, 0), (S34,),
      "ties", "LogcumsumexpBackward0"),
    C("logcumsumexp_0d", lambda m, x: x.logcumsumexp(0), lambda x: x, ((),), "real",
      "LogcumsumexpBackward0"),
    C("logcumsumexp_squared", lambda m, x: x.logcumsumexp(1) ** 2, lambda x: _lcse(x, 1) ** 2,
      (S34,), "real", "PowBackward0"),
]
IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS)
DIFF = [c for c in OPS if "nondiff" not in c.tags]


def run(case, m, *xs):
    return case.cg(m, *xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_forward_matches_numpy(case, dtype):
    arrays = make_arrays(case, dtype)
    out = run(case, cgrad, *cg_inputs(arrays))
    expected = np.asarray(case.ref(*[a.astype(np.float64) for a in arrays]))
    assert tuple(out.shape) == expected.shape and out.dtype == np.dtype(dtype)
    tol = {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(np_of(out), expected, **tol)


@pytest.mark.parametrize("case", DIFF, ids=[c.name for c in DIFF])
def test_gradcheck(case):
    assert gradcheck(lambda *a: run(case, cgrad, *a), cg_inputs(make_arrays(case)))


@pytest.mark.parametrize("case", DIFF, ids=[c.name for c in DIFF])
def test_gradgradcheck(case):
    assert gradgradcheck(lambda *a: run(case, cgrad, *a), cg_inputs(make_arrays(case)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_matches_torch(case, dtype, torch):
    arrays = make_arrays(case, dtype)
    xc, xt = cg_inputs(arrays), th_inputs(torch, arrays)
    yc, yt = run(case, cgrad, *xc), run(case, torch, *xt)
    assert tuple(yc.shape) == tuple(yt.shape) and str(yc.dtype) == str(yt.dtype)[6:]
    _close(np_of(yc), yt.detach().numpy(), dtype)
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(dtype)
    (gc,) = cgrad.autograd.grad(yc, xc, cgrad.tensor(v))
    (gt,) = torch.autograd.grad(yt, xt, torch.tensor(v))
    assert str(gc.dtype) == str(gt.dtype)[6:]
    _close(np_of(gc), gt.numpy(), dtype)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_double_backward_matches_torch(case, torch):
    arrays = make_arrays(case)
    rng = np.random.default_rng(2)
    with torch.no_grad():
        shape = tuple(run(case, torch, *[torch.tensor(a) for a in arrays]).shape)
    v = rng.standard_normal(shape)
    w = [rng.standard_normal(a.shape) for a in arrays]
    for a, b in zip(_second_order(cgrad, case, arrays, v, w),
                    _second_order(torch, case, arrays, v, w)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name(case, torch):
    assert node_name(run(case, cgrad, *cg_inputs(make_arrays(case)))) == case.node
    assert node_name(run(case, torch, *th_inputs(torch, make_arrays(case)))) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad_records_no_graph(case):
    with cgrad.no_grad():
        y = run(case, cgrad, *cg_inputs(make_arrays(case)))
    assert y.grad_fn is None and not y.requires_grad


# ----------------------------------------------------------------------------------------
# indices, ties and NaNs against torch
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cummax", "cummin", "logcumsumexp"])
def test_random_inputs_with_ties_nans_and_infinities(name, torch):
    rng = np.random.default_rng(sum(map(ord, name)))
    for trial in range(80):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 7, nd))
        a = rng.integers(0, 4, shape).astype(np.float64)
        if trial % 3 == 0:
            a.reshape(-1)[rng.integers(0, a.size, size=2)] = np.nan
        if trial % 5 == 1:
            a.reshape(-1)[rng.integers(0, a.size)] = -np.inf
        if trial % 7 == 1:
            a.reshape(-1)[rng.integers(0, a.size)] = np.inf
        d = int(rng.integers(-nd, nd))
        xc, xt = cgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        rc, rt = getattr(xc, name)(d), getattr(xt, name)(d)
        rcs, rts = (rc, rt) if isinstance(rc, tuple) else ((rc,), (rt,))
        for p, q in zip(rcs, rts):
            assert str(p.dtype) == str(q.dtype)[6:]
            np.testing.assert_allclose(np_of(p), q.detach().numpy(), rtol=1e-13)
        g = rng.standard_normal(tuple(rts[0].shape))
        (gc,) = cgrad.autograd.grad(rcs[0], xc, cgrad.tensor(g))
        (gt,) = torch.autograd.grad(rts[0], xt, torch.tensor(g))
        np.testing.assert_allclose(np_of(gc), gt.numpy(), rtol=1e-10, atol=1e-12)


def test_cummax_ties_take_the_last_index_and_nan_stays():
    x = cgrad.tensor([1.0, 3.0, 3.0, 2.0, 5.0, 5.0])
    r = x.cummax(0)
    assert type(r) is cgrad.return_types.cummax
    assert r.values.tolist() == [1, 3, 3, 3, 5, 5] and r.indices.tolist() == [0, 1, 2, 2, 4, 5]
    r = cgrad.tensor([1.0, np.nan, 3.0, np.nan, 5.0]).cummax(0)
    assert r.indices.tolist() == [0, 1, 1, 3, 3] and np.isnan(r.values.numpy()[1:]).all()
    r = cgrad.cummin(cgrad.tensor([5.0, 1.0, 1.0, np.nan, 0.0]), 0)
    assert type(r) is cgrad.return_types.cummin and r.indices.tolist() == [0, 1, 2, 3, 3]
    assert repr(r).startswith("cgrad.return_types.cummin(\nvalues=tensor(")


def test_cummax_gradient_adds_up_at_shared_indices():
    x = cgrad.tensor([1.0, 3.0, 2.0, 2.5, 4.0], requires_grad=True)
    x.cummax(0).values.backward(cgrad.tensor([1.0, 10.0, 100.0, 1000.0, 10000.0]))
    np.testing.assert_array_equal(np_of(x.grad), [1, 1110, 0, 0, 10000])


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16",
                                   "float32", "float64"])
def test_dtypes_match_torch(dtype, torch):
    a = np.array([[3, 1, 2, 2, 1], [0, 5, 5, 1, 5]]).astype(dtype)
    for name in ("cummax", "cummin", "logcumsumexp"):
        out = []
        for m in (cgrad, torch):
            try:
                r = getattr(m.tensor(a), name)(1)
                r = r if isinstance(r, tuple) else (r,)
                out.append([(str(t.dtype).split(".")[-1],
                             np.asarray(t.tolist(), dtype=np.float64).round(2).tolist())
                            for t in r])
            except NotImplementedError as e:
                out.append(str(e))
        assert out[0] == out[1], name


def test_empty_and_0d(torch):
    for fn in (lambda m, x: x.cummax(0), lambda m, x: x.cummin(1),
               lambda m, x: (x.logcumsumexp(0),)):
        for shape in ((0, 3), (3, 0)):
            rc, rt = fn(cgrad, cgrad.zeros(*shape)), fn(torch, torch.zeros(*shape))
            for p, q in zip(rc, rt):
                assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
    x = cgrad.tensor(2.0, requires_grad=True)
    v, i = x.cummax(0)
    assert v.item() == 2.0 and i.item() == 0 and i.dtype == np.int64
    v.backward()
    assert x.grad.item() == 1.0


# ----------------------------------------------------------------------------------------
# logcumsumexp: stability, and its gradient where the incoming gradient is 0
# ----------------------------------------------------------------------------------------
def test_logcumsumexp_is_stable(torch):
    a = np.array([[1000.0, 1000.0, -1000.0, 1e4], [-np.inf, -np.inf, 0.0, np.inf]])
    yc = cgrad.tensor(a, requires_grad=True)
    yt = torch.tensor(a, requires_grad=True)
    np.testing.assert_allclose(yc.logcumsumexp(1).detach().numpy(),
                               yt.logcumsumexp(1).detach().numpy())
    (gc,) = cgrad.autograd.grad(yc.logcumsumexp(1), yc, cgrad.ones(2, 4))
    (gt,) = torch.autograd.grad(yt.logcumsumexp(1), yt, torch.ones(2, 4))
    np.testing.assert_allclose(np_of(gc), gt.numpy(), equal_nan=True)


def test_logcumsumexp_higher_order_with_zero_cotangents():
    """The gradient is linear in the incoming gradient: its derivatives are exact where that
    gradient is 0 (torch's formula, through log|g|, gives NaN there), up to third order."""
    x = cgrad.tensor([[1.0, -2.0, 3.0], [0.5, -1.0, 2.0]], dtype=cgrad.float64,
                     requires_grad=True)
    v = cgrad.tensor([[1.0, 0.0, -3.0], [0.5, 0.0, 2.0]], dtype=cgrad.float64,
                     requires_grad=True)

    def first(t, g):
        return cgrad.autograd.grad(t.logcumsumexp(1), t, g, create_graph=True)[0]

    assert gradcheck(first, [x, v])
    assert gradgradcheck(first, [x, v])
    (dv,) = cgrad.autograd.grad(first(x, v).sum(), v)
    np.testing.assert_allclose(np_of(dv), np.ones((2, 3)))   # sum_j d gx_j / d g_i = 1


ERRORS = [
    ("cummax_dim", lambda m, x: x.cummax(3), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)"),
    ("cummin_dim", lambda m, x: m.cummin(x, -3), IndexError, "Dimension out of range"),
    ("logcumsumexp_dim", lambda m, x: x.logcumsumexp(2), IndexError, "Dimension out of range"),
    ("logcumsumexp_int", lambda m, x: x.long().logcumsumexp(0), NotImplementedError,
     "\"logcumsumexp_out_cpu\" not implemented for 'Long'"),
    ("logcumsumexp_bool", lambda m, x: (x > 0).logcumsumexp(0), NotImplementedError,
     "not implemented for 'Bool'"),
    ("cummax_needs_dim", lambda m, x: x.cummax(), TypeError, "dim"),
    ("logcumsumexp_needs_dim", lambda m, x: m.logcumsumexp(x), TypeError, "dim"),
]


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(cgrad, cgrad.tensor(np.ones((2, 3)), requires_grad=True))


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_agree_with_torch(name, fn, exc, msg, torch):
    with pytest.raises(exc, match=msg):
        fn(torch, torch.ones(2, 3, dtype=torch.float64, requires_grad=True))
