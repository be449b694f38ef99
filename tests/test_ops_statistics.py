"""Statistics and counts (cgrad/ops/statistics.py): var_mean, std_mean, aminmax (one node,
two outputs, as torch's), histc, histogram, bincount; against torch.

* var_mean/std_mean/aminmax: both outputs, alone and together, equal torch's values,
  gradients (ties included) and second-order products; gradcheck/gradgradcheck; node names;
  only the outputs that receive a gradient contribute.
* histc/histogram/bincount: values and dtypes against torch on random data and on the edge
  cases of their kernels (elements on edges, outside the range, NaN, constant data, empty
  input, given edges, weights, density); no gradient (histc) or torch's NotImplemented node.
* torch's errors.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def np_of(t):
    return t.detach().numpy()


A34 = np.random.default_rng(0).standard_normal((3, 4))
TIES = np.array([[1.0, 3.0, 3.0, 1.0], [2.0, 2.0, 2.0, 0.0], [5.0, -1.0, 5.0, -1.0]])

MOMENTS = {
    "var_mean_all": lambda m, x: m.var_mean(x),
    "var_mean_dim": lambda m, x: m.var_mean(x, 1),
    "var_mean_dims_keepdim": lambda m, x: m.var_mean(x, (0, 1), keepdim=True),
    "var_mean_correction0": lambda m, x: m.var_mean(x, dim=0, correction=0),
    "var_mean_correction2": lambda m, x: m.var_mean(x, 1, correction=2),
    "var_mean_unbiased_positional": lambda m, x: m.var_mean(x, 1, False, True),
    "var_mean_bool_overload": lambda m, x: m.var_mean(x, False),
    "std_mean_all": lambda m, x: m.std_mean(x),
    "std_mean_dim_keepdim": lambda m, x: m.std_mean(x, -1, keepdim=True),
    "std_mean_correction0": lambda m, x: m.std_mean(x, correction=0),
    "aminmax_all": lambda m, x: m.aminmax(x),
    "aminmax_dim": lambda m, x: m.aminmax(x, dim=1),
    "aminmax_dim_keepdim": lambda m, x: x.aminmax(dim=0, keepdim=True),
    "aminmax_keepdim_no_dim": lambda m, x: x.aminmax(keepdim=True),
}
NODES = {"var": "VarMeanBackward0", "std": "StdMeanBackward0", "ami": "AminmaxBackward0"}


@pytest.mark.parametrize("name", sorted(MOMENTS))
@pytest.mark.parametrize("data", ["random", "ties"])
@pytest.mark.parametrize("which", ["first", "second", "both"])
def test_two_outputs_match_torch(name, data, which, torch):
    fn = MOMENTS[name]
    a = A34 if data == "random" else TIES
    rng = np.random.default_rng(len(name))
    xc, xt = cgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    rc, rt = fn(cgrad, xc), fn(torch, xt)
    assert type(rc).__name__ == type(rt).__name__ and len(rc) == 2
    for p, q in zip(rc, rt):
        assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
        np.testing.assert_allclose(np_of(p), q.detach().numpy(), rtol=1e-12, atol=1e-14)
        assert type(p.grad_fn).__name__ == NODES[name[:3]] == type(q.grad_fn).__name__
    picks = {"first": [0], "second": [1], "both": [0, 1]}[which]
    vs = [rng.standard_normal(tuple(rt[i].shape)) for i in picks]
    lc = sum((rc[i] * cgrad.tensor(v)).sum() for i, v in zip(picks, vs))
    lt = sum((rt[i] * torch.tensor(v)).sum() for i, v in zip(picks, vs))
    (gc,) = cgrad.autograd.grad(lc, xc, create_graph=True)
    (gt,) = torch.autograd.grad(lt, xt, create_graph=True)
    np.testing.assert_allclose(np_of(gc), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    if gt.requires_grad:
        w = torch.tensor(rng.standard_normal(a.shape))
        (hc,) = cgrad.autograd.grad((gc * cgrad.tensor(w.numpy())).sum(), xc)
        (ht,) = torch.autograd.grad((gt * w).sum(), xt)
        np.testing.assert_allclose(np_of(hc), ht.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_gradcheck(name):
    x = cgrad.tensor(A34, requires_grad=True)
    assert gradcheck(lambda t: MOMENTS[name](cgrad, t), [x])
    assert gradgradcheck(lambda t: MOMENTS[name](cgrad, t), [x])


def test_var_mean_is_a_plain_tuple_and_aminmax_a_named_one():
    x = cgrad.tensor(TIES, requires_grad=True)
    r = cgrad.var_mean(x, 1)
    assert type(r) is tuple and r[0].grad_fn is r[1].grad_fn
    a = x.aminmax(dim=1)
    assert type(a) is cgrad.return_types.aminmax and a.min is a[0] and a.max is a[1]
    assert repr(a).startswith("cgrad.return_types.aminmax(\nmin=tensor(")
    np.testing.assert_array_equal(np_of(a.min), [1, 0, -1])
    with cgrad.no_grad():
        assert cgrad.std_mean(x)[0].grad_fn is None


def test_aminmax_splits_ties_and_nan_as_torch(torch):
    for a in (TIES, np.array([1.0, np.nan, np.nan]), np.array([[2, 7, 7], [1, 1, 0]])):
        xc, xt = cgrad.tensor(a), torch.tensor(a)
        for kw in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}):
            for p, q in zip(xc.aminmax(**kw), xt.aminmax(**kw)):
                assert str(p.dtype) == str(q.dtype)[6:]
                np.testing.assert_array_equal(np_of(p), q.numpy())
    x = cgrad.tensor([1.0, np.nan, 2.0], requires_grad=True)
    lo, hi = x.aminmax()
    (lo + hi).backward()
    assert np.isnan(np_of(x.grad)).all()        # torch's too (no element equals NaN)


def test_moments_dtypes_and_warnings_match_torch(torch):
    for dt in ("float16", "float32", "float64"):
        a = A34.astype(dt)
        for fn in (lambda m, x: m.var_mean(x, 1), lambda m, x: m.std_mean(x)):
            for p, q in zip(fn(cgrad, cgrad.tensor(a)), fn(torch, torch.tensor(a))):
                assert str(p.dtype) == str(q.dtype)[6:]
                np.testing.assert_allclose(np_of(p).astype(float), q.numpy().astype(float),
                                           rtol=2e-3)
    for name in ("var_mean", "std_mean"):
        msgs = []
        for m in (cgrad, torch):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = getattr(m, name)(m.tensor([1.0, 2.0]), correction=5)
            msgs.append([str(x.message).split(" (Triggered")[0] for x in w])
            assert np.isinf(r[0].item())
        assert msgs[0] == msgs[1] and msgs[0][0].startswith(f"{name}(): degrees of freedom")


# ----------------------------------------------------------------------------------------
# histc / histogram / bincount
# ----------------------------------------------------------------------------------------
def _same(rc, rt, exact=True):
    rc = rc if isinstance(rc, tuple) else (rc,)
    rt = rt if isinstance(rt, tuple) else (rt,)
    assert type(rc).__name__ == type(rt).__name__ or len(rc) == 1
    for p, q in zip(rc, rt):
        assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
        if exact:
            np.testing.assert_array_equal(np_of(p), q.detach().numpy())
        else:
            np.testing.assert_allclose(np_of(p), q.detach().numpy(), rtol=2e-6, atol=1e-6)


def _data(dt, n=300, seed=0):
    d = (np.random.default_rng(seed).standard_normal(n) * 3).astype(dt)
    d[:6] = [0, 1, 2, -1, 1.5, 3]                     # on edges of the integer ranges
    return d


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@pytest.mark.parametrize("args", [(), (10,), (7, -1, 1), (4, 0, 0), (5, 2, 2), (3, 1.5, 1.5),
                                  (6, 0, 3), (3, -5.0, 10.0)])
def test_histc_matches_torch(dt, args, torch):
    d = _data(dt)
    _same(cgrad.histc(cgrad.tensor(d), *args), torch.histc(torch.tensor(d), *args))
    _same(cgrad.tensor(d).histc(*args), torch.tensor(d).histc(*args))


HISTOGRAMS = [
    ("default", (), {}), ("bins", (10,), {}), ("range", (7,), {"range": (-1.0, 1.0)}),
    ("density", (4,), {"density": True}), ("weight", (6,), {"weight": "w"}),
    ("weight_density", (6,), {"weight": "w", "density": True}),
    ("edges", ("edges",), {}), ("edges_weight_density", ("edges",), {"density": True,
                                                                      "weight": "w"}),
    ("range_int", (5,), {"range": (0, 3)}),
]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name,args,kw", HISTOGRAMS, ids=[h[0] for h in HISTOGRAMS])
def test_histogram_matches_torch(dt, name, args, kw, torch):
    d = _data(dt, seed=len(name))
    res = []
    for m in (cgrad, torch):
        kw2 = dict(kw)
        if kw2.get("weight") == "w":
            kw2["weight"] = m.tensor(np.abs(d))
        a = args
        if a and a[0] == "edges":
            a = (m.tensor(np.array([-2.0, -0.5, 0.0, 0.7, 3.0]).astype(dt)),)
        res.append(m.histogram(m.tensor(d), *a, **kw2))
    assert type(res[0]) is cgrad.return_types.histogram
    assert res[0].hist is res[0][0] and res[0].bin_edges is res[0][1]
    # bin edges from a number of bins may differ from torch's in the last bit (torch's
    # linspace is vectorized); the counts do not on these data
    np.testing.assert_allclose(np_of(res[0].bin_edges), res[1].bin_edges.numpy(), rtol=1e-6,
                               atol=1e-6)
    # weighted sums: torch's accumulation order may differ in the last bit
    _same(res[0].hist, res[1].hist, exact=not kw.get("density") and "weight" not in kw)


EDGE_CASES = [
    ("histc_on_edges", lambda m: m.histc(m.tensor([0.0, 1.0, 2.0, 3.0, 0.1, 2.9999999]), 3, 0,
                                         3)),
    ("histc_nan_and_outside", lambda m: m.histc(m.tensor([1.0, np.nan, 2.0, 7.0, -1.0]), 2, 0,
                                                3)),
    ("histc_empty", lambda m: m.histc(m.zeros(0), 4)),
    ("histc_constant", lambda m: m.histc(m.tensor([2.0, 2.0]), 4)),
    ("histc_0d", lambda m: m.histc(m.tensor(2.0), 2)),
    ("histc_tensor_bounds", lambda m: m.histc(m.tensor([1.0, 2.0]), 2, m.tensor(0.0),
                                              m.tensor(4.0))),
    ("histogram_empty", lambda m: m.histogram(m.zeros(0), 3)),
    ("histogram_constant", lambda m: m.histogram(m.tensor([1.0, 1.0]), 2)),
    ("histogram_degenerate_range", lambda m: m.histogram(m.tensor([1.0, 1.0]), 2,
                                                         range=(1.0, 1.0))),
    ("histogram_2d_weight", lambda m: m.histogram(m.tensor([[1.0, 2.0], [3.0, 4.0]]), 2,
                                                  weight=m.ones(2, 2))),
    ("histogram_0d", lambda m: m.histogram(m.tensor(1.5), 2)),
    ("histogram_nan_edges", lambda m: m.histogram(m.tensor([1.0, 2.0]),
                                                  m.tensor([1.0, np.nan, 2.0]))),
    ("histogram_decreasing_edges", lambda m: m.histogram(m.tensor([1.0, 2.0]),
                                                         m.tensor([2.0, 1.0, 0.0]))),
    ("histogram_half_range", lambda m: m.histogram(m.tensor([0.5, 0.2], dtype=m.float16), 3,
                                                   range=(0.0, 1.0))),
    ("histogram_zero_density", lambda m: m.histogram(m.tensor([0.0, 0.0]), 2, density=True)),
    ("bincount", lambda m: m.bincount(m.tensor([1, 3, 3, 0]))),
    ("bincount_minlength", lambda m: m.bincount(m.tensor([1, 2]), minlength=6)),
    ("bincount_f64_weights", lambda m: m.bincount(m.tensor([1, 3]), m.tensor([0.5, 2.0],
                                                                             dtype=m.float64))),
    ("bincount_f32_weights", lambda m: m.tensor([1, 3, 3]).bincount(m.tensor([1.0, 2, 3]))),
    ("bincount_int_weights", lambda m: m.bincount(m.tensor([1, 3]), m.tensor([1, 2]))),
    ("bincount_half_weights", lambda m: m.bincount(m.tensor([1, 3]),
                                                   m.tensor([1.0, 2.0], dtype=m.float16))),
    ("bincount_empty", lambda m: m.bincount(m.tensor([], dtype=m.int64), minlength=3)),
    ("bincount_empty_weights", lambda m: m.bincount(m.tensor([], dtype=m.int64),
                                                    m.tensor([], dtype=m.float64))),
    ("bincount_int8", lambda m: m.bincount(m.tensor([1, 4], dtype=m.int8), None, 2)),
]


@pytest.mark.parametrize("name,fn", EDGE_CASES, ids=[e[0] for e in EDGE_CASES])
def test_edge_cases_match_torch(name, fn, torch):
    _same(fn(cgrad), fn(torch), exact="density" not in name)


def test_no_gradient_or_torchs_not_implemented_node():
    x = cgrad.tensor([1.0, 2.0, 2.5], requires_grad=True)
    assert not cgrad.histc(x, 3).requires_grad
    h = x.histogram(2)
    assert h.hist.requires_grad and h.bin_edges.requires_grad
    assert type(h.hist.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::histogram is not implemented"):
        h.hist.sum().backward()
    b = cgrad.bincount(cgrad.tensor([0, 2, 2]), x)
    np.testing.assert_array_equal(np_of(b), [1.0, 0.0, 4.5])
    with pytest.raises(RuntimeError, match="derivative for aten::bincount is not implemented"):
        b.sum().backward()
    assert not cgrad.bincount(cgrad.tensor([0, 2, 2])).requires_grad
    with cgrad.no_grad():
        assert x.histogram(2).hist.grad_fn is None


ERRORS = [
    ("var_mean_int", lambda m: m.var_mean(m.tensor([1, 2])), RuntimeError,
     "var_mean only support floating point and complex dtypes"),
    ("std_mean_int", lambda m: m.std_mean(m.tensor([1, 2])), RuntimeError,
     "std_mean only support floating point and complex dtypes"),
    ("var_mean_dim", lambda m: m.var_mean(m.ones(2, 3), 2), IndexError,
     "Dimension out of range"),
    ("aminmax_empty", lambda m: m.zeros(0).aminmax(), RuntimeError,
     r"aminmax\(\): cannot compute aminmax over an empty dimension as the operation has no "
     r"identity"),
    ("aminmax_empty_dim", lambda m: m.zeros(0, 3).aminmax(dim=0), IndexError,
     "aminmax: Expected reduction dim 0 to have non-zero size"),
    ("aminmax_dim_range", lambda m: m.zeros(2).aminmax(dim=1), IndexError,
     "Dimension out of range"),
    ("histc_int", lambda m: m.histc(m.tensor([1, 2])), NotImplementedError,
     "\"histogram_cpu\" not implemented for 'Long'"),
    ("histc_min_max", lambda m: m.histc(m.ones(2), min=2, max=1), RuntimeError,
     "histc: max must be larger than min"),
    ("histc_bins", lambda m: m.histc(m.ones(2), bins=0), RuntimeError,
     r"histogram\(\): bins must be > 0, but got 0 for dimension 0"),
    ("histc_float_bins", lambda m: m.histc(m.ones(2), 2.5), TypeError,
     r"histc\(\): argument 'bins' \(position 2\) must be int, not float"),
    ("histc_inf", lambda m: m.histc(m.tensor([1.0, float("inf")])), RuntimeError,
     r"histc: range of \[1, inf\] is not finite"),
    ("histc_nan", lambda m: m.histc(m.tensor([1.0, float("nan")])), RuntimeError,
     "is not finite"),
    ("histogram_int", lambda m: m.histogram(m.tensor([1, 2])), NotImplementedError,
     "\"histogramdd\" not implemented for 'Long'"),
    ("histogram_half", lambda m: m.histogram(m.ones(2, dtype=m.float16)), NotImplementedError,
     "\"histogramdd\" not implemented for 'Half'"),
    ("histogram_bins0", lambda m: m.histogram(m.ones(2), 0), RuntimeError,
     r"histogram\(\): bins must be > 0, but got 0 for dimension 0"),
    ("histogram_one_edge", lambda m: m.histogram(m.ones(2), m.ones(1)), RuntimeError,
     "bins must be > 0, but got 0 for dimension 0"),
    ("histogram_no_edges", lambda m: m.histogram(m.ones(2), m.ones(0)), RuntimeError,
     "bins tensor should have at least 1 element, but got 0 elements"),
    ("histogram_edges_2d", lambda m: m.histogram(m.ones(2), m.ones(2, 2)), RuntimeError,
     "bins tensor should have one dimension, but got 2 dimensions"),
    ("histogram_edges_dtype", lambda m: m.histogram(m.ones(2, dtype=m.float64), m.ones(2)),
     RuntimeError, "input tensor and bins tensors should have the same dtype, but got input "
                   "with dtype double and bins for dimension 0 with dtype float"),
    ("histogram_weight_dtype", lambda m: m.histogram(m.ones(2, dtype=m.float64), 2,
                                                     weight=m.ones(2)),
     RuntimeError, r"input tensor and weight tensor should have the same dtype, but got "
                   r"input\(double\), and weight\(float\)"),
    ("histogram_weight_shape", lambda m: m.histogram(m.ones(2), 2, weight=m.ones(3)),
     RuntimeError, r"should have the same shape as the input tensor excluding its innermost "
                   r"dimension, but got input with shape \[2, 1\] and weight with shape \[3\]"),
    ("histogram_range_len", lambda m: m.histogram(m.ones(2), 2, range=(0, 1, 2)), RuntimeError,
     "for a 1-dimensional histogram range should have 2 elements, but got 3"),
    ("histogram_range_order", lambda m: m.histogram(m.ones(2), 2, range=(2.0, 1.0)),
     RuntimeError, "min should not exceed max, but got min 2 max 1 for dimension 0"),
    ("histogram_range_inf", lambda m: m.histogram(m.ones(2), 2, range=(0.0, float("inf"))),
     RuntimeError, r"dimension 0's range \[0, inf\] is not finite"),
    ("bincount_2d", lambda m: m.bincount(m.ones(2, 2, dtype=m.int64)), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs"),
    ("bincount_negative", lambda m: m.bincount(m.tensor([-1, 2])), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs"),
    ("bincount_0d", lambda m: m.bincount(m.tensor(1)), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs"),
    ("bincount_float", lambda m: m.bincount(m.tensor([1.0, 2.0])), NotImplementedError,
     "\"bincount_cpu\" not implemented for 'Float'"),
    ("bincount_bool", lambda m: m.bincount(m.tensor([True])), NotImplementedError,
     "\"bincount_cpu\" not implemented for 'Bool'"),
    ("bincount_weights", lambda m: m.bincount(m.tensor([1, 2]), m.tensor([1.0])),
     RuntimeError, "weights should be 1-d and have the same length as input"),
    ("bincount_minlength", lambda m: m.bincount(m.tensor([1, 2]), minlength=-1), RuntimeError,
     "minlength should be >= 0"),
    ("bincount_minlength_type", lambda m: m.bincount(m.tensor([1, 2]), minlength=2.5),
     TypeError, r"bincount\(\): argument 'minlength' must be int, not float"),
]


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(cgrad)


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_agree_with_torch(name, fn, exc, msg, torch):
    with pytest.raises(exc, match=msg):
        fn(torch)
