"""Reductions, scans and softmax (cgrad/ops/reductions.py), driven by one op table (OPS).

For every row of OPS:
* the forward equals a NumPy reference, in float32 and float64, with the input's dtype;
* gradcheck and gradgradcheck (finite differences, float64) pass, except rows tagged
  "nondiff" (inputs at non-differentiable points: ties, a constant slice for std, the zero
  vector for norm), which are compared with torch only;
* forward values, vector-Jacobian products and second-order products equal torch's;
* every gradient has its input's shape and dtype; the node name equals torch's;
* no graph is recorded under cgrad.no_grad().
Integer/bool-valued reductions (argmax, all, any, count_nonzero, max indices) have their own
table (INT_OPS). Adding an op means adding one row.

Domains beyond test_ops_core's ("real", "positive", "nonzero"): "ties" (small integers, many
equal values), "zeros" (zeros at flat positions 1, 5, 6: a (3, 4) input then has a row with
one zero, a row with two, a column with two ...), "onezero" (one zero at position 5),
"const" (every row constant), "zerovec" (all zeros), "nan" (NaN at positions 2 and 7),
"large" (around 1000: softmax/logsumexp stability).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck
from test_ops_core import Case, cg_inputs, node_name, np_of, th_inputs


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


S34 = (3, 4)
T234 = (2, 3, 4)
INF = float("inf")


# ----------------------------------------------------------------------------------------
# NumPy references
# ----------------------------------------------------------------------------------------
def _lse(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    return x - _lse(x, axis, keepdims=True)


def _vnorm(x, p, axis=None, keepdims=False):
    a = np.abs(x)
    if p == INF:
        return a.max(axis=axis, keepdims=keepdims)
    if p == -INF:
        return a.min(axis=axis, keepdims=keepdims)
    if p == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _unpacked_square(result):
    values, _indices = result          # max(dim) results unpack like torch's
    return values * values


# ----------------------------------------------------------------------------------------
# the op table
# ----------------------------------------------------------------------------------------
def C(name, cg, ref, shapes, domain="real", node=None, tags=()):
    return Case(name, cg, ref, shapes, domain, node, None, tuple(tags))


ND = ("nondiff",)

OPS = [
    # -- prod --------------------------------------------------------------------------
    C("prod_all", lambda m, x: x.prod(), np.prod, (S34,), "nonzero", "ProdBackward0"),
    C("prod_all_fn", lambda m, x: m.prod(x), np.prod, (T234,), "nonzero", "ProdBackward0"),
    C("prod_all_onezero", lambda m, x: x.prod(), np.prod, (S34,), "onezero", "ProdBackward0"),
    C("prod_all_twozeros", lambda m, x: x.prod(), np.prod, (S34,), "zeros", "ProdBackward0"),
    C("prod_dim1", lambda m, x: x.prod(1), lambda x: x.prod(1), (S34,), "real",
      "ProdBackward1"),
    C("prod_dim_neg_keepdim", lambda m, x: x.prod(-1, keepdim=True),
      lambda x: x.prod(-1, keepdims=True), (T234,), "real", "ProdBackward1"),
    C("prod_dim1_zeros", lambda m, x: x.prod(1), lambda x: x.prod(1), (S34,), "zeros",
      "ProdBackward1"),
    C("prod_dim0_zeros", lambda m, x: m.prod(x, dim=0), lambda x: x.prod(0), (S34,), "zeros",
      "ProdBackward1"),
    C("prod_0d", lambda m, x: x.prod(), np.prod, ((),), "real", "ProdBackward0"),
    C("prod_0d_dim", lambda m, x: x.prod(0), lambda x: x, ((),), "real", "ProdBackward1"),
    C("prod_size1_dim", lambda m, x: x.prod(1), lambda x: x.prod(1), ((3, 1),), "real",
      "ProdBackward1"),
    # -- max / min ---------------------------------------------------------------------
    C("max_all", lambda m, x: x.max(), np.max, (S34,), "real", "MaxBackward1"),
    C("max_all_fn", lambda m, x: m.max(x), np.max, (T234,), "real", "MaxBackward1"),
    C("max_all_ties", lambda m, x: x.max(), np.max, (S34,), "ties", "MaxBackward1", ND),
    C("min_all", lambda m, x: x.min(), np.min, (S34,), "real", "MinBackward1"),
    C("min_all_ties", lambda m, x: m.min(x), np.min, (T234,), "ties", "MinBackward1", ND),
    C("max_0d", lambda m, x: x.max(), np.max, ((),), "real", "MaxBackward1"),
    C("max_dim1", lambda m, x: x.max(1).values, lambda x: x.max(1), (S34,), "real",
      "MaxBackward0"),
    C("max_dim0_keepdim", lambda m, x: x.max(0, keepdim=True)[0],
      lambda x: x.max(0, keepdims=True), (S34,), "real", "MaxBackward0"),
    C("max_dim_neg_fn", lambda m, x: m.max(x, -2).values, lambda x: x.max(-2), (T234,),
      "real", "MaxBackward0"),
    C("max_dim_kw", lambda m, x: m.max(x, dim=2, keepdim=True).values,
      lambda x: x.max(2, keepdims=True), (T234,), "real", "MaxBackward0"),
    C("max_dim_ties", lambda m, x: x.max(1).values, lambda x: x.max(1), (S34,), "ties",
      "MaxBackward0", ND),
    C("max_dim0_ties", lambda m, x: x.max(0).values, lambda x: x.max(0), (S34,), "ties",
      "MaxBackward0", ND),
    C("min_dim1", lambda m, x: x.min(1).values, lambda x: x.min(1), (S34,), "real",
      "MinBackward0"),
    C("min_dim_ties_keepdim", lambda m, x: x.min(-1, True).values,
      lambda x: x.min(-1, keepdims=True), (T234,), "ties", "MinBackward0", ND),
    C("max_0d_dim", lambda m, x: x.max(0).values, lambda x: x, ((),), "real",
      "MaxBackward0"),
    C("min_0d_dim_keepdim", lambda m, x: x.min(-1, keepdim=True).values, lambda x: x, ((),),
      "real", "MinBackward0"),
    C("max_unpacked_times_values", lambda m, x: _unpacked_square(x.max(1)),
      lambda x: x.max(1) ** 2, (S34,), "real", "MulBackward0"),
    # -- amax / amin -------------------------------------------------------------------
    C("amax_all", lambda m, x: x.amax(), np.max, (S34,), "real", "AmaxBackward0"),
    C("amax_dim1", lambda m, x: x.amax(1), lambda x: x.max(1), (S34,), "real",
      "AmaxBackward0"),
    C("amax_tuple_keepdim", lambda m, x: m.amax(x, (0, -1), keepdim=True),
      lambda x: x.max((0, 2), keepdims=True), (T234,), "real", "AmaxBackward0"),
    C("amax_ties_all", lambda m, x: x.amax(), np.max, (S34,), "ties", "AmaxBackward0", ND),
    C("amax_ties_dim", lambda m, x: x.amax(dim=1), lambda x: x.max(1), (S34,), "ties",
      "AmaxBackward0", ND),
    C("amax_ties_tuple", lambda m, x: x.amax((0, 1)), lambda x: x.max((0, 1)), (T234,),
      "ties", "AmaxBackward0", ND),
    C("amin_dim0", lambda m, x: x.amin(0), lambda x: x.min(0), (S34,), "real",
      "AminBackward0"),
    C("amin_ties_dim", lambda m, x: m.amin(x, -1), lambda x: x.min(-1), (T234,), "ties",
      "AminBackward0", ND),
    C("amax_0d", lambda m, x: x.amax(), lambda x: x, ((),), "real", "AmaxBackward0"),
    C("amin_0d_dim", lambda m, x: x.amin(0), lambda x: x, ((),), "real", "AminBackward0"),
    # -- var / std ---------------------------------------------------------------------
    C("var_all", lambda m, x: x.var(), lambda x: x.var(ddof=1), (S34,), "real",
      "VarBackward0"),
    C("var_dim1", lambda m, x: x.var(1), lambda x: x.var(1, ddof=1), (S34,), "real",
      "VarBackward0"),
    C("var_tuple_keepdim", lambda m, x: m.var(x, (0, 2), keepdim=True),
      lambda x: x.var((0, 2), ddof=1, keepdims=True), (T234,), "real", "VarBackward0"),
    C("var_unbiased_false", lambda m, x: x.var(1, unbiased=False), lambda x: x.var(1),
      (S34,), "real", "VarBackward0"),
    C("var_positional_unbiased", lambda m, x: x.var(0, False, True),
      lambda x: x.var(0, keepdims=True), (S34,), "real", "VarBackward0"),
    C("var_bool_overload", lambda m, x: x.var(False), lambda x: x.var(), (S34,), "real",
      "VarBackward0"),
    C("var_correction0", lambda m, x: x.var(-1, correction=0), lambda x: x.var(-1),
      (T234,), "real", "VarBackward0"),
    C("var_correction2", lambda m, x: x.var(dim=1, correction=2),
      lambda x: x.var(1, ddof=2), (S34,), "real", "VarBackward0"),
    C("var_0d_correction0", lambda m, x: x.var(correction=0), lambda x: x.var(), ((),),
      "real", "VarBackward0"),
    C("std_all", lambda m, x: x.std(), lambda x: x.std(ddof=1), (S34,), "real",
      "StdBackward0"),
    C("std_dim", lambda m, x: m.std(x, 1), lambda x: x.std(1, ddof=1), (S34,), "real",
      "StdBackward0"),
    C("std_tuple_keepdim", lambda m, x: x.std((1, 2), keepdim=True),
      lambda x: x.std((1, 2), ddof=1, keepdims=True), (T234,), "real", "StdBackward0"),
    C("std_unbiased_false", lambda m, x: x.std(0, unbiased=False), lambda x: x.std(0),
      (S34,), "real", "StdBackward0"),
    C("std_correction0", lambda m, x: x.std(correction=0), lambda x: x.std(), (S34,), "real",
      "StdBackward0"),
    C("std_const_rows", lambda m, x: x.std(1), lambda x: x.std(1, ddof=1), (S34,), "const",
      "StdBackward0", ND),
    C("std_0d_correction0", lambda m, x: x.std(correction=0), lambda x: x.std(), ((),),
      "real", "StdBackward0", ND),
    # -- norm --------------------------------------------------------------------------
    C("norm_default", lambda m, x: x.norm(), lambda x: np.sqrt((x * x).sum()), (S34,),
      "real", "LinalgVectorNormBackward0"),
    C("norm_fn_fro", lambda m, x: m.norm(x, "fro"), lambda x: np.sqrt((x * x).sum()),
      (T234,), "real", "LinalgVectorNormBackward0"),
    C("norm_p1", lambda m, x: x.norm(1), lambda x: _vnorm(x, 1), (S34,), "real",
      "LinalgVectorNormBackward0"),
    C("norm_p2_dim", lambda m, x: x.norm(dim=1), lambda x: _vnorm(x, 2, 1), (S34,), "real",
      "LinalgVectorNormBackward0"),
    C("norm_p3_dim_keepdim", lambda m, x: x.norm(3, dim=-1, keepdim=True),
      lambda x: _vnorm(x, 3, -1, True), (T234,), "real", "LinalgVectorNormBackward0"),
    C("norm_fro_tuple", lambda m, x: m.norm(x, p="fro", dim=(0, 1)),
      lambda x: _vnorm(x, 2, (0, 1)), (T234,), "real", "LinalgVectorNormBackward0"),
    C("norm_inf", lambda m, x: x.norm(INF), lambda x: _vnorm(x, INF), (S34,), "real",
      "LinalgVectorNormBackward0"),
    C("norm_inf_dim", lambda m, x: x.norm(INF, 1), lambda x: _vnorm(x, INF, 1), (S34,),
      "real", "LinalgVectorNormBackward0"),
    C("norm_inf_ties", lambda m, x: x.norm(INF), lambda x: _vnorm(x, INF), (S34,), "ties",
      "LinalgVectorNormBackward0", ND),
    C("norm_neginf_dim", lambda m, x: x.norm(-INF, 0), lambda x: _vnorm(x, -INF, 0), (S34,),
      "real", "LinalgVectorNormBackward0"),
    C("norm_p0", lambda m, x: x.norm(0), lambda x: _vnorm(x, 0), (S34,), "zeros",
      "LinalgVectorNormBackward0"),
    C("norm_p0.5", lambda m, x: x.norm(0.5, 1), lambda x: _vnorm(x, 0.5, 1), (S34,),
      "nonzero", "LinalgVectorNormBackward0"),
    C("norm_p1.5", lambda m, x: x.norm(1.5), lambda x: _vnorm(x, 1.5), (S34,), "nonzero",
      "LinalgVectorNormBackward0"),
    C("norm_p_neg1", lambda m, x: x.norm(-1, 1), lambda x: _vnorm(x, -1, 1), (S34,),
      "nonzero", "LinalgVectorNormBackward0"),
    C("norm_p3_zeros", lambda m, x: x.norm(3, 1), lambda x: _vnorm(x, 3, 1), (S34,),
      "zeros", "LinalgVectorNormBackward0"),
    C("norm_0d", lambda m, x: x.norm(), np.abs, ((),), "nonzero",
      "LinalgVectorNormBackward0"),
    C("norm_zero_vector_p2", lambda m, x: x.norm(), lambda x: _vnorm(x, 2), (S34,),
      "zerovec", "LinalgVectorNormBackward0", ND),
    C("norm_zero_vector_p3", lambda m, x: x.norm(3, 1), lambda x: _vnorm(x, 3, 1), (S34,),
      "zerovec", "LinalgVectorNormBackward0", ND),
    C("norm_zero_vector_p1.5", lambda m, x: x.norm(1.5), lambda x: _vnorm(x, 1.5), (S34,),
      "zerovec", "LinalgVectorNormBackward0", ND),
    C("norm_zero_vector_p0.5", lambda m, x: x.norm(0.5), lambda x: _vnorm(x, 0.5), (S34,),
      "zerovec", "LinalgVectorNormBackward0", ND),
    C("norm_zero_vector_inf", lambda m, x: x.norm(INF), lambda x: _vnorm(x, INF), (S34,),
      "zerovec", "LinalgVectorNormBackward0", ND),
    # -- logsumexp ---------------------------------------------------------------------
    C("logsumexp_dim1", lambda m, x: x.logsumexp(1), lambda x: _lse(x, 1), (S34,), "real",
      "LogsumexpBackward0"),
    C("logsumexp_tuple_keepdim", lambda m, x: m.logsumexp(x, (0, 2), keepdim=True),
      lambda x: _lse(x, (0, 2), True), (T234,), "real", "LogsumexpBackward0"),
    C("logsumexp_neg", lambda m, x: m.logsumexp(x, dim=-1), lambda x: _lse(x, -1), (T234,),
      "real", "LogsumexpBackward0"),
    C("logsumexp_large", lambda m, x: x.logsumexp(0), lambda x: _lse(x, 0), (S34,), "large",
      "LogsumexpBackward0"),
    C("logsumexp_0d", lambda m, x: x.logsumexp(0), lambda x: x, ((),), "real",
      "LogsumexpBackward0"),
    # -- softmax / log_softmax ---------------------------------------------------------
    C("softmax_dim1", lambda m, x: x.softmax(1), lambda x: _softmax(x, 1), (S34,), "real",
      "SoftmaxBackward0"),
    C("softmax_dim0_fn", lambda m, x: m.softmax(x, 0), lambda x: _softmax(x, 0), (S34,),
      "real", "SoftmaxBackward0"),
    C("softmax_3d_mid", lambda m, x: m.softmax(x, dim=1), lambda x: _softmax(x, 1), (T234,),
      "real", "SoftmaxBackward0"),
    C("softmax_neg", lambda m, x: x.softmax(-1), lambda x: _softmax(x, -1), (T234,), "real",
      "SoftmaxBackward0"),
    C("softmax_large", lambda m, x: x.softmax(1), lambda x: _softmax(x, 1), (S34,), "large",
      "SoftmaxBackward0"),
    C("softmax_0d", lambda m, x: x.softmax(0), lambda x: np.ones_like(x), ((),), "real",
      "SoftmaxBackward0"),
    C("softmax_weighted", lambda m, x: x.softmax(1) * x, lambda x: _softmax(x, 1) * x, (S34,),
      "real", "MulBackward0"),
    C("log_softmax_dim1", lambda m, x: x.log_softmax(1), lambda x: _log_softmax(x, 1), (S34,),
      "real", "LogSoftmaxBackward0"),
    C("log_softmax_dim0_fn", lambda m, x: m.log_softmax(x, 0), lambda x: _log_softmax(x, 0),
      (S34,), "real", "LogSoftmaxBackward0"),
    C("log_softmax_3d_neg", lambda m, x: x.log_softmax(dim=-2),
      lambda x: _log_softmax(x, -2), (T234,), "real", "LogSoftmaxBackward0"),
    C("log_softmax_large", lambda m, x: x.log_softmax(1), lambda x: _log_softmax(x, 1),
      (S34,), "large", "LogSoftmaxBackward0"),
    C("log_softmax_0d", lambda m, x: x.log_softmax(0), lambda x: np.zeros_like(x), ((),),
      "real", "LogSoftmaxBackward0"),
    # -- cumsum / cumprod --------------------------------------------------------------
    C("cumsum_dim1", lambda m, x: x.cumsum(1), lambda x: x.cumsum(1), (S34,), "real",
      "CumsumBackward0"),
    C("cumsum_dim0_fn", lambda m, x: m.cumsum(x, 0), lambda x: x.cumsum(0), (S34,), "real",
      "CumsumBackward0"),
    C("cumsum_neg_3d", lambda m, x: x.cumsum(dim=-2), lambda x: x.cumsum(-2), (T234,), "real",
      "CumsumBackward0"),
    C("cumsum_0d", lambda m, x: x.cumsum(0), lambda x: x, ((),), "real", "CumsumBackward0"),
    C("cumprod_dim1", lambda m, x: x.cumprod(1), lambda x: x.cumprod(1), (S34,), "real",
      "CumprodBackward0"),
    C("cumprod_dim0_fn", lambda m, x: m.cumprod(x, 0), lambda x: x.cumprod(0), (S34,), "real",
      "CumprodBackward0"),
    C("cumprod_zeros_dim1", lambda m, x: x.cumprod(1), lambda x: x.cumprod(1), (S34,),
      "zeros", "CumprodBackward0"),
    C("cumprod_zeros_dim0", lambda m, x: x.cumprod(0), lambda x: x.cumprod(0), (S34,),
      "zeros", "CumprodBackward0"),
    C("cumprod_onezero_3d", lambda m, x: x.cumprod(-1), lambda x: x.cumprod(-1), (T234,),
      "onezero", "CumprodBackward0"),
    C("cumprod_zeros_1d", lambda m, x: x.cumprod(0), lambda x: x.cumprod(0), ((8,),),
      "zeros", "CumprodBackward0"),
    C("cumprod_0d", lambda m, x: x.cumprod(0), lambda x: x, ((),), "real",
      "CumprodBackward0"),
    # -- nansum / nanmean --------------------------------------------------------------
    C("nansum_all", lambda m, x: x.nansum(), np.nansum, (S34,), "nan", "NansumBackward0"),
    C("nansum_dim_keepdim", lambda m, x: m.nansum(x, 1, keepdim=True),
      lambda x: np.nansum(x, 1, keepdims=True), (S34,), "nan", "NansumBackward0"),
    C("nanmean_dim", lambda m, x: x.nanmean(0), lambda x: np.nanmean(x, 0), (S34,), "nan",
      "DivBackward0"),
    C("nanmean_all_fn", lambda m, x: m.nanmean(x), np.nanmean, (T234,), "nan",
      "DivBackward0"),
]

IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS), "duplicate case names"
DIFF = [c for c in OPS if "nondiff" not in c.tags]
DIFF_IDS = [c.name for c in DIFF]


# ----------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------
def _seed(case):
    return sum(map(ord, case.name)) % 2 ** 32


def _array(rng, shape, dom):
    n = int(np.prod(shape))
    if dom == "real":
        return rng.uniform(-1.5, 1.5, shape)
    if dom == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if dom == "nonzero":
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if dom == "ties":
        return rng.integers(-2, 3, shape).astype(np.float64)
    if dom in ("zeros", "onezero", "nan"):
        a = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).reshape(-1)
        pos = {"zeros": [1, 5, 6], "onezero": [5], "nan": [2, 7]}[dom]
        a[[p for p in pos if p < n]] = np.nan if dom == "nan" else 0.0
        return a.reshape(shape)
    if dom == "const":
        return np.broadcast_to(rng.uniform(-1.5, 1.5, shape[:-1] + (1,)), shape).copy()
    if dom == "zerovec":
        return np.zeros(shape)
    if dom == "large":
        return rng.uniform(-5.0, 5.0, shape) + 1000.0
    raise ValueError(dom)


def make_arrays(case, dtype=np.float64):
    rng = np.random.default_rng(_seed(case))
    doms = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(case.shapes)
    return [np.asarray(_array(rng, s, d), dtype=dtype) for s, d in zip(case.shapes, doms)]


def run(case, m, *xs):
    return case.cg(m, *xs)


# ----------------------------------------------------------------------------------------
# per-row tests
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_forward_matches_numpy(case, dtype):
    arrays = make_arrays(case, dtype)
    out = run(case, cgrad, *cg_inputs(arrays))
    with np.errstate(all="ignore"):
        expected = np.asarray(case.ref(*[a.astype(np.float64) for a in arrays]))
    assert isinstance(out, cgrad.Tensor)
    assert tuple(out.shape) == expected.shape
    assert out.dtype == np.dtype(dtype)
    tol = {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(np_of(out), expected, **tol)


@pytest.mark.parametrize("case", DIFF, ids=DIFF_IDS)
def test_gradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradcheck(lambda *a: run(case, cgrad, *a), xs)


@pytest.mark.parametrize("case", DIFF, ids=DIFF_IDS)
def test_gradgradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradgradcheck(lambda *a: run(case, cgrad, *a), xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_grad_shape_dtype(case, dtype):
    xs = cg_inputs(make_arrays(case, dtype))
    out = run(case, cgrad, *xs)
    gs = cgrad.autograd.grad(out, xs, cgrad.ones_like(out), allow_unused=True)
    for x, g in zip(xs, gs):
        if g is None:           # torch gives no gradient for norm(p=0)
            assert case.name == "norm_p0"
            continue
        assert isinstance(g, cgrad.Tensor)
        assert tuple(g.shape) == tuple(x.shape)
        assert g.dtype == x.dtype


def _close(a, b, dtype, err=""):
    tol = {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-11}
    np.testing.assert_allclose(a, b, **tol, err_msg=err)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_matches_torch(case, dtype, torch):
    arrays = make_arrays(case, dtype)
    xc, xt = cg_inputs(arrays), th_inputs(torch, arrays)
    yc, yt = run(case, cgrad, *xc), run(case, torch, *xt)
    assert tuple(yc.shape) == tuple(yt.shape)
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    _close(np_of(yc), yt.detach().numpy(), dtype)
    assert yc.requires_grad == yt.requires_grad
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(dtype)
    gc = cgrad.autograd.grad(yc, xc, cgrad.tensor(v), allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(v), allow_unused=True)
    for i, (a, b) in enumerate(zip(gc, gt)):
        assert (a is None) == (b is None), f"input {i}"
        if b is not None:
            assert tuple(a.shape) == tuple(b.shape)
            assert str(a.dtype) == str(b.dtype).replace("torch.", "")
            _close(np_of(a), b.numpy(), dtype, f"input {i}")


def _second_order(m, case, arrays, v, w):
    """d/dx <grad_x <f(x), v>, w> (zeros where the first gradient does not depend on x)."""
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    y = run(case, m, *xs)
    gs = m.autograd.grad(y, xs, m.tensor(v), create_graph=True, allow_unused=True)
    out = []
    for x, g, wi in zip(xs, gs, w):
        if g is None or not g.requires_grad:
            out.append(np.zeros(x.shape))
            continue
        (gg,) = m.autograd.grad((g * m.tensor(wi)).sum(), [x], allow_unused=True)
        if gg is None:
            out.append(np.zeros(x.shape))
        elif m is cgrad:
            out.append(np_of(gg))
        else:
            out.append(gg.detach().numpy(force=True))     # torch may give a ZeroTensor
    return out


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_double_backward_matches_torch(case, torch):
    arrays = make_arrays(case)
    rng = np.random.default_rng(2)
    with torch.no_grad():
        shape = tuple(run(case, torch, *[torch.tensor(a) for a in arrays]).shape)
    v = rng.standard_normal(shape)
    w = [rng.standard_normal(a.shape) for a in arrays]
    with warnings.catch_warnings():
        # torch's double backward of norm at the zero vector and of std where it is 0 is NaN
        # (0 * inf inside its masked formula), and cgrad's is too (the same formula); NumPy
        # warns where the second backward divides by that zero
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = _second_order(cgrad, case, arrays, v, w)
    theirs = _second_order(torch, case, arrays, v, w)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name(case):
    y = run(case, cgrad, *cg_inputs(make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name_table_agrees_with_torch(case, torch):
    y = run(case, torch, *th_inputs(torch, make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad_records_no_graph(case):
    xs = cg_inputs(make_arrays(case))
    with cgrad.no_grad():
        y = run(case, cgrad, *xs)
    assert y.grad_fn is None and not y.requires_grad and y.is_leaf
    y = run(case, cgrad, *xs)
    assert y.requires_grad and y.grad_fn is not None


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_inputs_without_grad_give_leaf(case):
    y = run(case, cgrad, *cg_inputs(make_arrays(case), requires_grad=False))
    assert not y.requires_grad and y.grad_fn is None


# ----------------------------------------------------------------------------------------
# integer / bool valued reductions (no gradient)
# ----------------------------------------------------------------------------------------
INT_OPS = [
    # name, fn(module, x), numpy reference, shape, domain
    ("argmax_all", lambda m, x: x.argmax(), lambda x: np.argmax(x), S34, "real"),
    ("argmax_all_keepdim", lambda m, x: x.argmax(keepdim=True),
     lambda x: np.argmax(x).reshape(1, 1), S34, "real"),
    ("argmax_dim1", lambda m, x: x.argmax(1), lambda x: np.argmax(x, 1), S34, "real"),
    ("argmax_dim_ties", lambda m, x: m.argmax(x, dim=0), lambda x: np.argmax(x, 0), S34,
     "ties"),
    ("argmax_all_ties", lambda m, x: m.argmax(x), lambda x: np.argmax(x), T234, "ties"),
    ("argmax_keepdim_neg", lambda m, x: x.argmax(-1, keepdim=True),
     lambda x: np.argmax(x, -1, keepdims=True), T234, "real"),
    ("argmax_nan", lambda m, x: x.argmax(1), lambda x: np.argmax(x, 1), S34, "nan"),
    ("argmax_0d", lambda m, x: x.argmax(), lambda x: np.argmax(x), (), "real"),
    ("argmax_0d_dim", lambda m, x: x.argmax(0), lambda x: np.int64(0), (), "real"),
    ("argmin_all", lambda m, x: x.argmin(), lambda x: np.argmin(x), S34, "real"),
    ("argmin_dim_ties", lambda m, x: x.argmin(1), lambda x: np.argmin(x, 1), S34, "ties"),
    ("argmin_nan", lambda m, x: m.argmin(x, 0), lambda x: np.argmin(x, 0), S34, "nan"),
    ("max_indices", lambda m, x: x.max(1).indices, lambda x: np.argmax(x, 1), S34, "real"),
    ("max_indices_ties", lambda m, x: x.max(0)[1], lambda x: np.argmax(x, 0), S34, "ties"),
    ("max_indices_nan", lambda m, x: x.max(1)[1], lambda x: np.argmax(x, 1), S34, "nan"),
    ("min_indices_ties_keepdim", lambda m, x: x.min(2, keepdim=True).indices,
     lambda x: np.argmin(x, 2, keepdims=True), T234, "ties"),
    ("max_indices_0d", lambda m, x: x.max(0).indices, lambda x: np.int64(0), (), "real"),
    ("all", lambda m, x: x.all(), np.all, S34, "zeros"),
    ("all_dim", lambda m, x: x.all(1), lambda x: np.all(x, 1), S34, "zeros"),
    ("all_tuple_keepdim", lambda m, x: m.all(x, dim=(0, 1), keepdim=True),
     lambda x: np.all(x, (0, 1), keepdims=True), T234, "zeros"),
    ("all_keepdim_nodim", lambda m, x: x.all(keepdim=True),
     lambda x: np.all(x, keepdims=True), S34, "real"),
    ("any", lambda m, x: x.any(), np.any, S34, "zerovec"),
    ("any_dim_neg", lambda m, x: m.any(x, -1), lambda x: np.any(x, -1), S34, "zeros"),
    ("any_0d", lambda m, x: x.any(), np.any, (), "real"),
    ("count_nonzero", lambda m, x: x.count_nonzero(), np.count_nonzero, S34, "zeros"),
    ("count_nonzero_dim", lambda m, x: m.count_nonzero(x, 0),
     lambda x: np.count_nonzero(x, 0), S34, "zeros"),
    ("count_nonzero_tuple", lambda m, x: x.count_nonzero(dim=(0, 2)),
     lambda x: np.count_nonzero(x, (0, 2)), T234, "zeros"),
]
INT_IDS = [r[0] for r in INT_OPS]


def _int_case(row):
    return Case(row[0], None, row[2], (row[3],), row[4])


@pytest.mark.parametrize("name,fn,ref,shape,dom", INT_OPS, ids=INT_IDS)
def test_int_reductions(name, fn, ref, shape, dom):
    (a,) = make_arrays(_int_case((name, fn, ref, shape, dom)))
    x = cgrad.tensor(a, requires_grad=True)
    y = fn(cgrad, x)
    expected = np.asarray(ref(a))
    assert isinstance(y, cgrad.Tensor)
    assert tuple(y.shape) == expected.shape
    assert y.dtype == (np.dtype(np.bool_) if expected.dtype == np.bool_ else np.int64)
    np.testing.assert_array_equal(np_of(y), expected)
    assert not y.requires_grad and y.grad_fn is None


@pytest.mark.parametrize("name,fn,ref,shape,dom", INT_OPS, ids=INT_IDS)
def test_int_reductions_match_torch(name, fn, ref, shape, dom, torch):
    (a,) = make_arrays(_int_case((name, fn, ref, shape, dom)))
    yc = fn(cgrad, cgrad.tensor(a, requires_grad=True))
    yt = fn(torch, torch.tensor(a, requires_grad=True))
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    assert tuple(yc.shape) == tuple(yt.shape)
    np.testing.assert_array_equal(np_of(yc), yt.numpy())


# ----------------------------------------------------------------------------------------
# max/min return types
# ----------------------------------------------------------------------------------------
def test_max_dim_returns_named_tuple():
    x = cgrad.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], requires_grad=True)
    r = x.max(1)
    assert isinstance(r, tuple) and len(r) == 2
    assert type(r) is cgrad.return_types.max
    assert type(r).__name__ == "max" and type(r).__module__ == "cgrad.return_types"
    v, i = r
    assert v is r.values and i is r.indices and r[0] is v and r[1] is i
    np.testing.assert_array_equal(np_of(v), [5.0, 7.0])
    np.testing.assert_array_equal(np_of(i), [1, 0])
    assert i.dtype == np.int64 and not i.requires_grad and i.grad_fn is None
    assert v.grad_fn is not None and type(v.grad_fn).__name__ == "MaxBackward0"
    assert repr(r).startswith("cgrad.return_types.max(\nvalues=tensor(")
    assert "\nindices=tensor([1, 0]))" in repr(r)
    assert type(cgrad.min(x, 0)) is cgrad.return_types.min
    import cgrad.return_types as rt
    assert rt.max is cgrad.return_types.max


def test_max_dim_gradient_goes_to_selected_index():
    x = cgrad.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0]], requires_grad=True)
    v, _ = x.max(1)
    (v * cgrad.tensor([10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), [[0, 10, 0, 0], [100, 0, 0, 0]])
    x.grad = None
    x.min(0).values.sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), [[1, 0, 0, 0], [0, 1, 1, 1]])


def test_full_max_and_amax_split_ties_evenly():
    # values from torch 2.x (evenly_distribute_backward / amax backward)
    x = cgrad.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0]], requires_grad=True)
    x.max().backward()
    np.testing.assert_allclose(np_of(x.grad), [[0, 0.5, 0.5, 0], [0, 0, 0, 0]])
    x.grad = None
    x.amax(1).sum().backward()
    np.testing.assert_allclose(np_of(x.grad), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])
    x.grad = None
    x.amin(0).sum().backward()
    np.testing.assert_allclose(np_of(x.grad), [[1, 0, 0, 0], [0, 1, 1, 1]])


def test_max_with_nan_matches_torch(torch):
    a = np.array([1.0, np.nan, 3.0, np.nan])
    for fn in (lambda m, x: x.max(), lambda m, x: x.min(), lambda m, x: x.max(0).values,
               lambda m, x: x.min(0)[0], lambda m, x: x.amax()):
        res = []
        for m in (cgrad, torch):
            x = m.tensor(a, requires_grad=True)
            y = fn(m, x)
            y.backward()
            res.append((y.detach().numpy(), x.grad.numpy()))
        np.testing.assert_array_equal(res[0][0], res[1][0])
        np.testing.assert_array_equal(res[0][1], res[1][1])


def test_max_of_two_tensors_dispatches_to_maximum():
    if not hasattr(cgrad, "maximum"):
        pytest.skip("cgrad.maximum not available yet")
    a, b = cgrad.tensor([1.0, 5.0]), cgrad.tensor([3.0, 2.0])
    np.testing.assert_array_equal(np_of(cgrad.max(a, b)), [3.0, 5.0])
    np.testing.assert_array_equal(np_of(a.min(b)), [1.0, 2.0])


def test_int_max_min_amax_keep_dtype(torch):
    a = np.array([[3, -1, 7], [2, 2, 0]], np.int32)
    for fn in (lambda m, x: x.max(), lambda m, x: x.min(1).values, lambda m, x: x.amax(0),
               lambda m, x: x.amin()):
        yc, yt = fn(cgrad, cgrad.tensor(a)), fn(torch, torch.tensor(a))
        assert str(yc.dtype) == str(yt.dtype).replace("torch.", "") == "int32"
        np.testing.assert_array_equal(np_of(yc), yt.numpy())


# ----------------------------------------------------------------------------------------
# prod / cumprod with zeros, norm at zero, std at zero: exact values
# ----------------------------------------------------------------------------------------
def test_prod_gradient_with_zeros():
    x = cgrad.tensor([2.0, 0.0, 3.0, 4.0], requires_grad=True)
    x.prod().backward()
    np.testing.assert_array_equal(np_of(x.grad), [0.0, 24.0, 0.0, 0.0])
    y = cgrad.tensor([[2.0, 0.0, 0.0], [1.0, 2.0, 3.0]], requires_grad=True)
    y.prod(1).sum().backward()
    np.testing.assert_array_equal(np_of(y.grad), [[0, 0, 0], [6, 3, 2]])


def test_prod_second_derivative_with_two_zeros():
    # d2/dx1 dx2 prod(x) = prod of the others = 2*3 even though the gradient itself is 0
    x = cgrad.tensor([2.0, 0.0, 0.0, 3.0], requires_grad=True)
    (g,) = cgrad.autograd.grad(x.prod(), x, create_graph=True)
    np.testing.assert_array_equal(np_of(g), [0, 0, 0, 0])
    (h,) = cgrad.autograd.grad(g[1], x)
    np.testing.assert_array_equal(np_of(h), [0, 0, 6, 0])


def test_cumprod_gradient_with_zeros():
    x = cgrad.tensor([2.0, 0.0, 3.0, 0.0, 5.0], requires_grad=True)
    x.cumprod(0).sum().backward()
    # d/dx0 = 1; d/dx1 = 2 + 2*3 + 0 + 0 = 8; after the first zero: 0
    np.testing.assert_array_equal(np_of(x.grad), [1.0, 8.0, 0.0, 0.0, 0.0])


def test_norm_gradient_at_zero_is_zero_no_nan():
    for p in (2, 1, 3, 0.5, 1.5, -1, INF, -INF, "fro"):
        x = cgrad.zeros(3, requires_grad=True)
        x.norm(p).backward()
        g = np_of(x.grad)
        assert np.all(np.isfinite(g)) and np.all(g == 0), p
    x = cgrad.zeros(3, requires_grad=True)
    x.norm(0).backward()
    assert x.grad is None           # torch: no gradient for p=0


def test_norm_double_backward_at_a_zero_element_as_torch():
    # torch's norm_backward: |x| ** (p - 1) has an infinite derivative at x = 0 for p < 2,
    # which the double backward multiplies by sgn(0) = 0: NaN there, finite elsewhere; so is
    # x * |x| ** (p - 2) for 2 < p < 3; p = 3 is smooth at 0 (tests/test_fuzz_regressions.py)
    x = cgrad.tensor([0.0, 1.0, -2.0], requires_grad=True)
    for p in (0.5, 1.5, 3):
        (g,) = cgrad.autograd.grad(x.norm(p), x, create_graph=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            (h,) = cgrad.autograd.grad(g.sum(), x)
        h = np_of(h)
        assert np.isnan(h[0]) == (p < 2) and np.all(np.isfinite(h[1:])), p


def test_std_gradient_where_std_is_zero():
    x = cgrad.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]], requires_grad=True)
    x.std(1).sum().backward()
    np.testing.assert_allclose(np_of(x.grad), [[0, 0, 0], [-0.5, 0, 0.5]])


# ----------------------------------------------------------------------------------------
# numerical stability, softmax double backward
# ----------------------------------------------------------------------------------------
def test_softmax_logsumexp_stable_for_extreme_inputs():
    x = cgrad.tensor([[1000.0, 1000.0, -1000.0], [-1e4, -1e4 + 1, -1e4 + 2]],
                     requires_grad=True)
    s, ls, lse = x.softmax(1), x.log_softmax(1), x.logsumexp(1)
    for t in (s, ls, lse):
        assert np.all(np.isfinite(np_of(t)))
    np.testing.assert_allclose(np_of(s)[0], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(np_of(lse)[0], 1000.0 + np.log(2.0))
    (s[:, 0].sum() + ls.sum() + lse.sum()).backward()
    assert np.all(np.isfinite(np_of(x.grad)))
    inf = cgrad.tensor([-INF, 0.0, -INF])
    np.testing.assert_allclose(np_of(inf.softmax(0)), [0.0, 1.0, 0.0])
    assert np_of(cgrad.tensor([INF, 1.0]).logsumexp(0)) == INF
    assert np_of(cgrad.tensor([-INF, -INF]).logsumexp(0)) == -INF


def test_softmax_is_a_single_node():
    x = cgrad.tensor(np.ones((2, 3)), requires_grad=True)
    for y, name in ((x.softmax(1), "SoftmaxBackward0"),
                    (x.log_softmax(1), "LogSoftmaxBackward0")):
        assert type(y.grad_fn).__name__ == name
        nxt = y.grad_fn.next_functions
        assert len(nxt) == 1 and type(nxt[0][0]).__name__ == "AccumulateGrad"


# ----------------------------------------------------------------------------------------
# dtypes and keyword arguments
# ----------------------------------------------------------------------------------------
DTYPE_CASES = [
    ("prod_int32", lambda m, x: x.prod(), "i32", "int64"),
    ("prod_bool", lambda m, x: (x > 0).prod(), "i32", "int64"),
    ("prod_dim_int32", lambda m, x: x.prod(0), "i32", "int64"),
    ("prod_dtype", lambda m, x: x.prod(1, dtype=m.float32), "f64", "float32"),
    ("cumsum_int32", lambda m, x: x.cumsum(0), "i32", "int64"),
    ("cumsum_bool", lambda m, x: (x > 0).cumsum(1), "i32", "int64"),
    ("cumprod_int32", lambda m, x: x.cumprod(1), "i32", "int64"),
    ("cumsum_dtype", lambda m, x: x.cumsum(1, dtype=m.float64), "i32", "float64"),
    ("cumsum_dtype_f32", lambda m, x: m.cumsum(x, 1, dtype=m.float32), "f64", "float32"),
    ("softmax_dtype", lambda m, x: x.softmax(1, dtype=m.float64), "f32", "float64"),
    ("log_softmax_dtype", lambda m, x: m.log_softmax(x, 0, dtype=m.float32), "f64",
     "float32"),
    ("logsumexp_int", lambda m, x: m.logsumexp(x, 1), "i64", "float32"),
    ("amax_int32", lambda m, x: x.amax(1), "i32", "int32"),
    ("max_f32", lambda m, x: x.max(), "f32", "float32"),
    ("var_f32", lambda m, x: x.var(1), "f32", "float32"),
    ("norm_dtype_widen", lambda m, x: m.norm(x, dim=1, dtype=m.float64), "f32", "float64"),
    ("nansum_int32", lambda m, x: m.nansum(x), "i32", "int64"),
    ("all_uint8", lambda m, x: x.to(m.uint8).all(), "i32", "uint8"),
    ("any_int", lambda m, x: x.any(1), "i64", "bool"),
    ("count_nonzero_f32", lambda m, x: m.count_nonzero(x), "f32", "int64"),
]
_DT = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}


def _dtype_input(m, kind):
    return m.tensor(np.array([[1, -2, 0], [3, 1, 2]]).astype(_DT[kind]))


@pytest.mark.parametrize("name,fn,kind,expected", DTYPE_CASES, ids=[d[0] for d in DTYPE_CASES])
def test_result_dtypes(name, fn, kind, expected):
    assert str(fn(cgrad, _dtype_input(cgrad, kind)).dtype) == expected


@pytest.mark.parametrize("name,fn,kind,expected", DTYPE_CASES, ids=[d[0] for d in DTYPE_CASES])
def test_result_dtypes_agree_with_torch(name, fn, kind, expected, torch):
    yc, yt = fn(cgrad, _dtype_input(cgrad, kind)), fn(torch, _dtype_input(torch, kind))
    assert str(yt.dtype).replace("torch.", "") == expected
    np.testing.assert_allclose(np_of(yc).astype(np.float64),
                               yt.numpy().astype(np.float64), rtol=1e-6)


def test_dtype_argument_gradient_keeps_input_dtype():
    x = cgrad.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    y = x.softmax(1, dtype=cgrad.float32)
    assert y.dtype == np.float32 and type(y.grad_fn).__name__ == "SoftmaxBackward0"
    (y[:, 0].sum() + x.cumsum(0, dtype=cgrad.float32).sum()).backward()
    assert x.grad.dtype == np.float64


# ----------------------------------------------------------------------------------------
# errors (torch's exception types and key phrases)
# ----------------------------------------------------------------------------------------
ERRORS = [
    ("max_dim_range", lambda m, x: x.max(2), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ("amax_dim_range", lambda m, x: x.amax(-3), IndexError, "Dimension out of range"),
    ("softmax_dim_range", lambda m, x: x.softmax(5), IndexError, "Dimension out of range"),
    ("cumsum_dim_range", lambda m, x: x.cumsum(2), IndexError, "Dimension out of range"),
    ("var_dim_range", lambda m, x: x.var(3), IndexError, "Dimension out of range"),
    ("argmax_dim_range", lambda m, x: x.argmax(2), IndexError, "Dimension out of range"),
    ("amax_dup", lambda m, x: x.amax((0, 0)), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
    ("var_dup", lambda m, x: x.var((1, -1)), RuntimeError, "appears multiple times"),
    ("var_int", lambda m, x: x.long().var(), RuntimeError,
     "std and var only support floating point and complex dtypes"),
    ("std_int", lambda m, x: x.long().std(1), RuntimeError, "std and var only support"),
    ("norm_int", lambda m, x: x.long().norm(), RuntimeError,
     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"),
    ("norm_narrowing_dtype", lambda m, x: m.norm(x, dim=1, dtype=m.float32), RuntimeError,
     "should be convertible without narrowing"),
    ("norm_bad_order", lambda m, x: x.norm("abc"), RuntimeError, "Order abc not supported"),
    ("softmax_int", lambda m, x: x.long().softmax(0), RuntimeError, "not implemented for 'Long'"),
    ("nanmean_int", lambda m, x: m.nanmean(x.long()), RuntimeError,
     "nanmean\\(\\): expected input to have floating point"),
    ("max_empty", lambda m, x: x[:0].max(), RuntimeError,
     "Expected reduction dim to be specified for input.numel\\(\\) == 0"),
    ("amax_empty", lambda m, x: x[:0].amax(), RuntimeError,
     "Expected reduction dim to be specified"),
    ("max_empty_dim", lambda m, x: x[:0].max(0), IndexError,
     "Expected reduction dim 0 to have non-zero size"),
    ("argmax_empty", lambda m, x: x[:0].argmax(), IndexError,
     "Expected reduction dim to be specified"),
    ("logsumexp_needs_dim", lambda m, x: m.logsumexp(x), TypeError, "dim"),
    ("softmax_needs_dim", lambda m, x: x.softmax(), TypeError, "dim"),
]


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, msg):
    x = cgrad.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(exc, match=msg):
        fn(cgrad, x)


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_agree_with_torch(name, fn, exc, msg, torch):
    x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(exc, match=msg):
        fn(torch, x)


def test_empty_reductions_along_nonempty_dim(torch):
    a = np.ones((0, 3))
    for fn in (lambda m, x: x.max(1).values, lambda m, x: x.logsumexp(0),
               lambda m, x: x.prod(), lambda m, x: x.softmax(1), lambda m, x: x.cumsum(0)):
        yc, yt = fn(cgrad, cgrad.tensor(a)), fn(torch, torch.tensor(a))
        assert tuple(yc.shape) == tuple(yt.shape)
        np.testing.assert_array_equal(np_of(yc), yt.numpy())


def test_var_degenerate_corrections_match_torch(torch):
    import warnings
    for a, kw in ((np.array([1.0, 2.0]), {"correction": 5}), (np.array([1.0]), {})):
        with warnings.catch_warnings(record=True) as wt:
            warnings.simplefilter("always")
            yt = torch.tensor(a).var(**kw)
        with warnings.catch_warnings(record=True) as wc:     # torch's warning, as torch
            warnings.simplefilter("always")
            yc = cgrad.tensor(a).var(**kw)
        np.testing.assert_array_equal(np_of(yc), yt.numpy())
        assert [str(w.message) for w in wc] == \
            [str(w.message).split(" (Triggered internally")[0] for w in wt]


# Note [Batch axis first]: sums over several axes that include 0 (not all of them) reduce the
# batch axis first for float32/float64 C-contiguous arrays; other cases keep np.sum.
@pytest.mark.parametrize("dims", [(0, 2, 3), (0, 2), (3, 0), (0, 1), (0, 1, 3), (1, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
@pytest.mark.parametrize("layout", ["c", "transposed", "batch1"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_multi_axis_sum_batch_axis_first(dims, dtype, layout, keepdim):
    from cgrad.ops.reductions import _sum_axes
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1 if layout == "batch1" else 7, 5, 4, 6)) * 10
    a = a.astype(dtype)
    if layout == "transposed":
        a = a.transpose(0, 1, 3, 2)
    want = np.sum(a.astype(np.float64), axis=dims, keepdims=keepdim)
    got = _sum_axes(a, dims, keepdim)
    assert got.shape == want.shape and got.dtype == np.sum(a, axis=dims).dtype
    tol = {np.float16: 5e-2, np.float32: 1e-4}.get(dtype, 1e-12)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 100)
    t = cgrad.tensor(a, requires_grad=a.dtype.kind == "f")
    s = t.sum(dims, keepdim=keepdim)
    np.testing.assert_array_equal(s.detach().numpy(), got)
    if a.dtype.kind == "f":
        s.sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), np.ones_like(a))


def test_broadcast_gradient_sums_batch_axis_first_like_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 8, 5, 5)).astype(np.float32)
    b = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    g = rng.standard_normal((16, 8, 5, 5)).astype(np.float32)
    grads = []
    for m in (torch, cgrad):
        tb = m.tensor(b, requires_grad=True)
        (m.tensor(x) * tb).backward(m.tensor(g))
        grads.append(tb.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-4)
