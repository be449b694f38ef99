"""Elementwise ops (cgrad/ops/pointwise.py, cgrad/ops/comparison.py, cgrad/ops/arithmetic.py), driven by one table (OPS).

For every row:
* the forward equals a NumPy/SciPy reference, in float32 and float64, with the input's dtype;
* gradcheck and gradgradcheck pass (finite differences, float64);
* the gradient computed with create_graph=True equals the plain one;
* forward values, dtypes, requires_grad and vector-Jacobian products equal torch's (when torch
  is importable); every gradient has its input's shape and dtype;
* the node name equals torch's (column `node`, itself checked against torch);
* no graph is recorded under cgrad.no_grad().

Random inputs stay away from kinks (0 for relu/abs, clamp bounds, ties of maximum, integers
for floor...) with probability 1; the kinks themselves are tested against torch separately
(test_derivatives_at_kinks_match_torch), as are special values (inf, nan, huge), integer and
boolean inputs, errors, operators, in-place forms and higher derivatives.

Callables take the tensor module first (`cgrad` or `torch`); `th` overrides for torch where
its spelling differs (torch.nn.functional.gelu vs cgrad.gelu). `ref` takes NumPy arrays.
Adding an op means adding one row.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from scipy import special

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402
from test_ops_core import cg_inputs, node_name, np_of, th_inputs, torch  # noqa: E402,F401


# ----------------------------------------------------------------------------------------
# the op table
# ----------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    cg: Callable                       # cg(module, *tensors)
    ref: Callable | None               # ref(*ndarrays) (None: compared with torch only)
    shapes: tuple                      # one shape per tensor input
    domain: Any = "real"               # see DOMAINS; one per input or one for all
    node: str | None = None            # torch's node name for the output
    th: Callable | None = None         # torch callable when it differs from cg
    tags: tuple = field(default=())

    def __str__(self):
        return self.name


DOMAINS = {
    "real": (-1.5, 1.5),
    "wide": (-4.0, 4.0),
    "unit": (-0.9, 0.9),
    "positive": (0.5, 2.0),
    "nonzero": None,                   # +-(0.5, 2)
}

S34 = (3, 4)
SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
MASK34 = np.array([[True, False, True, False],
                   [False, False, True, True],
                   [True, True, False, False]])
MASK31 = np.array([[True], [False], [True]])


def F(name):
    """cgrad.<name> for cgrad; torch.<name>, else torch.nn.functional.<name>, for torch."""
    def get(m):
        if m is cgrad:
            return getattr(cgrad, name)
        return getattr(m, name, None) or getattr(m.nn.functional, name)
    return get


def unary(name, ref, domain="real", node=None, shapes=(S34,), method=False, **kw):
    """Rows for a unary op: function form (and method form), with keyword arguments."""
    rows = [Case(name + ("" if not kw else "_" + "_".join(f"{k}{v}" for k, v in kw.items())),
                 lambda m, x: F(name)(m)(x, **kw), ref, shapes, domain, node)]
    if method:
        rows.append(Case(rows[0].name + "_method", lambda m, x: getattr(x, name)(**kw), ref,
                         shapes, domain, node))
    return rows


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(x) - 1.0))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _clip(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


OPS = [
    # -- abs / sign / rounding -------------------------------------------------------
    *unary("abs", np.abs, node="AbsBackward0", method=True),
    Case("abs_builtin", lambda m, x: abs(x), np.abs, ((2, 3, 4),), node="AbsBackward0"),
    Case("abs_0d", lambda m, x: m.abs(x), np.abs, ((),), node="AbsBackward0"),
    *unary("absolute", np.abs, node="AbsBackward0"),
    *unary("sign", np.sign, node="SignBackward0", method=True),
    *unary("sgn", np.sign, node="SgnBackward0"),
    *unary("floor", np.floor, "wide", node="FloorBackward0", method=True),
    *unary("ceil", np.ceil, "wide", node="CeilBackward0", method=True),
    *unary("round", np.round, "wide", node="RoundBackward0", method=True),
    *unary("round", lambda x: np.round(x, 1), "wide", node="RoundBackward1", decimals=1),
    *unary("trunc", np.trunc, "wide", node="TruncBackward0", method=True),
    *unary("fix", np.trunc, "wide", node="TruncBackward0"),
    # -- powers, exponentials, logarithms, trigonometry --------------------------------
    *unary("sqrt", np.sqrt, "positive", node="SqrtBackward0", method=True),
    Case("sqrt_0d", lambda m, x: x.sqrt(), np.sqrt, ((),), "positive", node="SqrtBackward0"),
    *unary("rsqrt", lambda x: 1 / np.sqrt(x), "positive", node="RsqrtBackward0", method=True),
    *unary("reciprocal", lambda x: 1 / x, "nonzero", node="ReciprocalBackward0",
           method=True),
    *unary("square", np.square, node="PowBackward0", method=True),
    *unary("expm1", np.expm1, node="Expm1Backward0", method=True),
    *unary("exp2", np.exp2, node="Exp2Backward0", method=True),
    *unary("log1p", np.log1p, "unit", node="Log1PBackward0", method=True),
    *unary("log2", np.log2, "positive", node="Log2Backward0", method=True),
    *unary("log10", np.log10, "positive", node="Log10Backward0", method=True),
    *unary("sin", np.sin, "wide", node="SinBackward0", method=True),
    *unary("cos", np.cos, "wide", node="CosBackward0", method=True),
    *unary("tan", np.tan, "unit", node="TanBackward0", method=True),
    *unary("nan_to_num", lambda x: x, node="NanToNumBackward0", method=True),
    *unary("negative", np.negative, node="NegBackward0", method=True),
    # -- activations -------------------------------------------------------------------
    *unary("tanh", np.tanh, "wide", node="TanhBackward0", method=True),
    Case("tanh_0d", lambda m, x: m.tanh(x), np.tanh, ((),), node="TanhBackward0"),
    Case("tanh_3d", lambda m, x: m.tanh(x), np.tanh, ((2, 3, 4),), "wide",
         node="TanhBackward0"),
    *unary("sigmoid", _sigmoid, "wide", node="SigmoidBackward0", method=True),
    Case("sigmoid_0d", lambda m, x: m.sigmoid(x), _sigmoid, ((),), node="SigmoidBackward0"),
    *unary("relu", lambda x: np.maximum(x, 0), node="ReluBackward0", method=True),
    Case("relu_0d", lambda m, x: m.relu(x), lambda x: np.maximum(x, 0), ((),),
         node="ReluBackward0"),
    Case("relu_3d", lambda m, x: m.relu(x), lambda x: np.maximum(x, 0), ((2, 3, 4),),
         node="ReluBackward0"),
    *unary("leaky_relu", lambda x: np.where(x > 0, x, 0.01 * x), node="LeakyReluBackward0"),
    *unary("leaky_relu", lambda x: np.where(x > 0, x, 0.2 * x), node="LeakyReluBackward0",
           negative_slope=0.2),
    *unary("leaky_relu", lambda x: np.where(x > 0, x, -0.5 * x), node="LeakyReluBackward0",
           negative_slope=-0.5),
    *unary("elu", _elu, "wide", node="EluBackward0"),
    *unary("elu", lambda x: _elu(x, 0.5), "wide", node="EluBackward0", alpha=0.5),
    Case("elu_0d", lambda m, x: F("elu")(m)(x), _elu, ((),), node="EluBackward0"),
    *unary("selu", lambda x: SELU_S * _elu(x, SELU_A), "wide", node="EluBackward0"),
    *unary("gelu", _gelu, "wide", node="GeluBackward0"),
    *unary("gelu", _gelu_tanh, "wide", node="GeluBackward0", approximate="tanh"),
    Case("gelu_0d", lambda m, x: F("gelu")(m)(x), _gelu, ((),), node="GeluBackward0"),
    *unary("silu", lambda x: x * _sigmoid(x), "wide", node="SiluBackward0"),
    *unary("softplus", _softplus, "wide", node="SoftplusBackward0"),
    *unary("softplus", lambda x: _softplus(x, 2.0, 1.0), "wide", node="SoftplusBackward0",
           beta=2.0, threshold=1.0),
    *unary("softplus", lambda x: _softplus(x, 0.5), "wide", node="SoftplusBackward0",
           beta=0.5),
    Case("softplus_0d", lambda m, x: F("softplus")(m)(x, 2.0), lambda x: _softplus(x, 2.0),
         ((),), node="SoftplusBackward0"),
    Case("silu_0d", lambda m, x: F("silu")(m)(x), lambda x: x * _sigmoid(x), ((),),
         node="SiluBackward0"),
    Case("leaky_relu_0d", lambda m, x: F("leaky_relu")(m)(x, 0.2),
         lambda x: np.where(x > 0, x, 0.2 * x), ((),), node="LeakyReluBackward0"),
    # -- clamp -------------------------------------------------------------------------
    Case("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
         (S34,), node="ClampBackward1"),
    Case("clamp_method", lambda m, x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
         (S34,), node="ClampBackward1"),
    Case("clamp_min_kw", lambda m, x: x.clamp(min=0.2), lambda x: np.maximum(x, 0.2),
         (S34,), node="ClampBackward1"),
    Case("clamp_max_kw", lambda m, x: m.clamp(x, max=0.2), lambda x: np.minimum(x, 0.2),
         (S34,), node="ClampBackward1"),
    Case("clamp_int_bounds", lambda m, x: x.clamp(-1, 1), lambda x: np.clip(x, -1, 1),
         (S34,), "wide", node="ClampBackward1"),
    Case("clamp_lo_gt_hi", lambda m, x: x.clamp(0.5, -0.5), lambda x: _clip(x, 0.5, -0.5),
         (S34,), node="ClampBackward1"),
    Case("clip", lambda m, x: m.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), (S34,),
         node="ClampBackward1"),
    Case("clip_method", lambda m, x: x.clip(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
         (S34,), node="ClampBackward1"),
    Case("clamp_min_fn", lambda m, x: m.clamp_min(x, 0.2), lambda x: np.maximum(x, 0.2),
         (S34,), node="ClampMinBackward0"),
    Case("clamp_max_method", lambda m, x: x.clamp_max(0.2), lambda x: np.minimum(x, 0.2),
         (S34,), node="ClampMaxBackward0"),
    Case("clamp_0d", lambda m, x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), ((),),
         node="ClampBackward1"),
    Case("clamp_tensors", lambda m, x, lo, hi: m.clamp(x, lo, hi), _clip, (S34, S34, S34),
         node="ClampBackward0"),
    Case("clamp_tensors_bcast", lambda m, x, lo, hi: x.clamp(lo, hi), _clip,
         (S34, (4,), (3, 1)), node="ClampBackward0"),
    Case("clamp_tensor_min_only", lambda m, x, lo: x.clamp(min=lo), np.maximum, (S34, (4,)),
         node="ClampBackward0"),
    Case("clamp_tensor_max_only", lambda m, x, hi: m.clamp(x, max=hi), np.minimum,
         (S34, ()), node="ClampBackward0"),
    Case("clamp_min_tensor", lambda m, x, lo: m.clamp_min(x, lo), np.maximum, (S34, (3, 1)),
         node="ClampMinBackward1"),
    Case("clamp_max_tensor", lambda m, x, hi: x.clamp_max(hi), np.minimum, ((4,), S34),
         node="ClampMaxBackward1"),
    # -- maximum / minimum -------------------------------------------------------------
    Case("maximum", lambda m, x, y: m.maximum(x, y), np.maximum, (S34, S34),
         node="MaximumBackward0"),
    Case("maximum_bcast", lambda m, x, y: x.maximum(y), np.maximum, ((3, 1), (4,)),
         node="MaximumBackward0"),
    Case("maximum_0d", lambda m, x, y: m.maximum(x, y), np.maximum, (S34, ()),
         node="MaximumBackward0"),
    Case("minimum", lambda m, x, y: m.minimum(x, y), np.minimum, (S34, S34),
         node="MinimumBackward0"),
    Case("minimum_bcast", lambda m, x, y: x.minimum(y), np.minimum, ((2, 3, 4), (3, 1)),
         node="MinimumBackward0"),
    # -- where -------------------------------------------------------------------------
    Case("where", lambda m, x, y: m.where(m.tensor(MASK34), x, y),
         lambda x, y: np.where(MASK34, x, y), (S34, S34), node="WhereBackward0"),
    Case("where_bcast", lambda m, x, y: m.where(m.tensor(MASK31), x, y),
         lambda x, y: np.where(MASK31, x, y), ((4,), (2, 1, 1)), node="WhereBackward0"),
    Case("where_scalar_other", lambda m, x: m.where(m.tensor(MASK34), x, 0.5),
         lambda x: np.where(MASK34, x, 0.5), (S34,), node="WhereBackward0"),
    Case("where_scalar_input", lambda m, y: m.where(m.tensor(MASK34), -1.0, y),
         lambda y: np.where(MASK34, -1.0, y), ((4,),), node="WhereBackward0"),
    Case("where_cond_from_input", lambda m, x, y: m.where(x > 0, x, y),
         lambda x, y: np.where(x > 0, x, y), (S34, (4,)), node="WhereBackward0"),
    Case("where_method", lambda m, x, y: x.where(m.tensor(MASK34), y),
         lambda x, y: np.where(MASK34, x, y), (S34, ()), node="WhereBackward0"),
    # -- remainder / fmod / division modes -----------------------------------------------
    Case("remainder", lambda m, x, y: m.remainder(x, y), np.remainder, (S34, S34),
         ("wide", "nonzero"), node="RemainderBackward1"),
    Case("remainder_bcast", lambda m, x, y: x.remainder(y), np.remainder, (S34, (4,)),
         ("wide", "nonzero"), node="RemainderBackward1"),
    Case("remainder_scalar", lambda m, x: m.remainder(x, 0.75), lambda x: np.remainder(x, .75),
         (S34,), "wide", node="RemainderBackward0"),
    Case("mod_operator", lambda m, x, y: x % y, np.remainder, (S34, (4,)), ("wide", "nonzero"),
         node="RemainderBackward1"),
    Case("mod_operator_scalar", lambda m, x: x % -0.75, lambda x: np.remainder(x, -0.75),
         (S34,), "wide", node="RemainderBackward0"),
    Case("fmod", lambda m, x, y: m.fmod(x, y), np.fmod, (S34, S34), ("wide", "nonzero"),
         node="FmodBackward1"),
    Case("fmod_scalar", lambda m, x: x.fmod(0.75), lambda x: np.fmod(x, 0.75), (S34,), "wide",
         node="FmodBackward0"),
    Case("div_trunc", lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
         lambda x, y: np.trunc(x / y), (S34, (4,)), ("wide", "nonzero"), node="DivBackward2"),
    Case("div_floor", lambda m, x, y: x.div(y, rounding_mode="floor"), np.floor_divide,
         (S34, S34), ("wide", "nonzero"), node="DivBackward2"),
    Case("div_floor_scalar", lambda m, x: m.div(x, 0.3, rounding_mode="floor"),
         lambda x: np.floor_divide(x, 0.3), (S34,), "wide", node="DivBackward2"),
    Case("div_none", lambda m, x, y: m.div(x, y), lambda x, y: x / y, (S34, (4,)),
         ("real", "nonzero"), node="DivBackward0"),
    Case("divide", lambda m, x, y: m.divide(x, y), lambda x, y: x / y,
         (S34, S34), ("real", "nonzero"), node="DivBackward0"),
    Case("true_divide", lambda m, x, y: m.true_divide(x, y), lambda x, y: x / y, (S34, S34),
         ("real", "nonzero"), node="DivBackward0"),
    Case("div_method_scalar", lambda m, x: x.div(4.0), lambda x: x / 4.0, (S34,),
         node="DivBackward0"),
    Case("multiply", lambda m, x, y: m.multiply(x, y), np.multiply, (S34, (4,)),
         node="MulBackward0"),
    Case("subtract", lambda m, x, y: m.subtract(x, y), np.subtract, (S34, (4,)),
         node="SubBackward0"),
    Case("subtract_alpha", lambda m, x, y: m.subtract(x, y, alpha=2), lambda x, y: x - 2 * y,
         (S34, (4,)), node="SubBackward0"),
    # -- compositions ------------------------------------------------------------------
    Case("mlp_like", lambda m, x, w: m.tanh(x @ w).sigmoid() * m.relu(x @ w).sqrt(),
         lambda x, w: _sigmoid(np.tanh(x @ w)) * np.sqrt(np.maximum(x @ w, 0)),
         ((3, 2), (2, 4)), ("positive", "positive"), node="MulBackward0"),
    Case("clamp_of_where", lambda m, x, y: m.where(x > y, x, y).clamp(-0.5, 0.5).abs(),
         lambda x, y: np.abs(np.clip(np.where(x > y, x, y), -0.5, 0.5)), (S34, (4,)),
         node="AbsBackward0"),
]

IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS), "duplicate case names"


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def _seed(case):
    return sum(map(ord, case.name)) % 2 ** 32


def make_arrays(case, dtype=np.float64):
    rng = np.random.default_rng(_seed(case))
    doms = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(case.shapes)
    out = []
    for shape, dom in zip(case.shapes, doms):
        if dom == "nonzero":
            a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            lo, hi = DOMAINS[dom]
            a = rng.uniform(lo, hi, shape)
        out.append(np.asarray(a, dtype=dtype))
    return out


def run_cg(case, *xs):
    return case.cg(cgrad, *xs)


def run_th(case, torch, *xs):
    return (case.th or case.cg)(torch, *xs)


TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


# ----------------------------------------------------------------------------------------
# per-row tests
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", [c for c in OPS if c.ref is not None],
                         ids=[c.name for c in OPS if c.ref is not None])
def test_forward_matches_reference(case, dtype):
    arrays = make_arrays(case, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run_cg(case, *cg_inputs(arrays))
    expected = np.asarray(case.ref(*arrays))
    assert isinstance(out, cgrad.Tensor)
    assert tuple(out.shape) == expected.shape
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(np_of(out), expected, **TOL[dtype])


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradcheck(lambda *a: run_cg(case, *a), xs)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradgradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradgradcheck(lambda *a: run_cg(case, *a), xs)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_create_graph_gradient_equals_plain_gradient(case):
    """The first gradient built for double backward has the same value as the plain one (the
    first-order fast paths and the differentiable formulas agree)."""
    xs = cg_inputs(make_arrays(case))
    v = cgrad.tensor(np.random.default_rng(3).standard_normal(run_cg(case, *xs).shape))
    plain = cgrad.autograd.grad(run_cg(case, *xs), xs, v)
    graph = cgrad.autograd.grad(run_cg(case, *xs), xs, v, create_graph=True)
    for a, b in zip(plain, graph):
        np.testing.assert_allclose(np_of(b), np_of(a), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_grad_shape_dtype(case, dtype):
    xs = cg_inputs(make_arrays(case, dtype))
    out = run_cg(case, *xs)
    gs = cgrad.autograd.grad(out, xs, cgrad.ones_like(out), allow_unused=True)
    for x, g in zip(xs, gs):
        assert isinstance(g, cgrad.Tensor)
        assert tuple(g.shape) == tuple(x.shape)
        assert g.dtype == x.dtype
    out = run_cg(case, *xs)
    out.backward(cgrad.ones_like(out))
    for x, g in zip(xs, gs):
        assert x.grad is not None and x.grad.dtype == x.dtype
        np.testing.assert_array_equal(np_of(x.grad), np_of(g))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_matches_torch(case, dtype, torch):
    arrays = make_arrays(case, dtype)
    xc, xt = cg_inputs(arrays), th_inputs(torch, arrays)
    yc, yt = run_cg(case, *xc), run_th(case, torch, *xt)
    tol = TOL[dtype]
    assert tuple(yc.shape) == tuple(yt.shape)
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), **tol)
    assert yc.requires_grad == yt.requires_grad
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(dtype)
    gc = cgrad.autograd.grad(yc, xc, cgrad.tensor(v), allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(v), allow_unused=True)
    for i, (a, b) in enumerate(zip(gc, gt)):
        if b is None:      # torch: unused input; cgrad must then give None or zeros
            assert a is None or not np_of(a).any(), f"input {i}"
            continue
        assert a is not None, f"input {i}"
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype) == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(np_of(a), b.numpy(force=True), **tol, err_msg=f"input {i}")


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name(case):
    y = run_cg(case, *cg_inputs(make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name_table_agrees_with_torch(case, torch):
    y = run_th(case, torch, *th_inputs(torch, make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad_records_no_graph(case):
    xs = cg_inputs(make_arrays(case))
    with cgrad.no_grad():
        y = run_cg(case, *xs)
    assert y.grad_fn is None and not y.requires_grad and y.is_leaf
    y = run_cg(case, *xs)
    assert y.requires_grad and y.grad_fn is not None


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_inputs_without_grad_give_leaf(case):
    y = run_cg(case, *cg_inputs(make_arrays(case), requires_grad=False))
    assert not y.requires_grad and y.grad_fn is None


# ----------------------------------------------------------------------------------------
# derivatives at kinks and ties (torch's conventions)
# ----------------------------------------------------------------------------------------
KINK_X = [-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]
KINKS = [
    ("abs", lambda m, x: m.abs(x)),
    ("relu", lambda m, x: m.relu(x)),
    ("leaky_relu", lambda m, x: F("leaky_relu")(m)(x, 0.1)),
    ("elu", lambda m, x: F("elu")(m)(x, 0.7)),
    ("selu", lambda m, x: F("selu")(m)(x)),
    ("softplus_threshold", lambda m, x: F("softplus")(m)(x, 2.0, 1.0)),
    ("clamp_scalar", lambda m, x: x.clamp(-0.5, 0.5)),
    ("clamp_min_scalar", lambda m, x: x.clamp_min(0.0)),
    ("clamp_max_scalar", lambda m, x: x.clamp_max(1.0)),
    ("clamp_equal_bounds", lambda m, x: x.clamp(0.5, 0.5)),
    ("clamp_lo_gt_hi", lambda m, x: x.clamp(1.0, -1.0)),
    ("sign", lambda m, x: m.sign(x)),
    ("floor", lambda m, x: m.floor(x)),
    ("round_half", lambda m, x: m.round(x * 0.5 + 0.25)),
    ("sqrt_at_0", lambda m, x: m.sqrt(x.abs())),
    ("maximum_ties", lambda m, x: m.maximum(x, x.detach().clamp(0.0, 0.5))),
    ("minimum_ties", lambda m, x: m.minimum(x.detach().clamp(0.0, 0.5), x)),
    ("maximum_self", lambda m, x: m.maximum(x, x)),
    ("where_same", lambda m, x: m.where(x > 0, x, x * 2)),
]


@pytest.mark.parametrize("name,fn", KINKS, ids=[k[0] for k in KINKS])
def test_derivatives_at_kinks_match_torch(name, fn, torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(KINK_X, dtype=m.float64, requires_grad=True)
        y = fn(m, x)
        (g,) = (cgrad if m is cgrad else torch).autograd.grad(y.sum(), [x])
        res.append((y.detach().numpy(), g.detach().numpy()))
    (yc, gc), (yt, gt) = res
    np.testing.assert_allclose(yc, yt, rtol=1e-12)
    np.testing.assert_allclose(gc, gt, rtol=1e-12)


def test_documented_kink_values():
    x = cgrad.tensor([0.0], dtype=cgrad.float64, requires_grad=True)

    def d(f):
        (g,) = cgrad.autograd.grad(f(x).sum(), [x])
        return float(g)
    assert d(cgrad.relu) == 0.0
    assert d(cgrad.abs) == 0.0
    assert d(lambda t: cgrad.leaky_relu(t, 0.3)) == pytest.approx(0.3)
    assert d(lambda t: cgrad.elu(t, 0.7)) == pytest.approx(0.7)
    assert d(cgrad.selu) == pytest.approx(SELU_A * SELU_S)
    assert d(lambda t: t.clamp(0.0, 1.0)) == 1.0            # inclusive bounds
    assert d(lambda t: t.clamp(-1.0, 0.0)) == 1.0
    assert d(lambda t: cgrad.maximum(t, cgrad.zeros(1, dtype=cgrad.float64))) == 0.5


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_tie_gradient_split_for_both_inputs(op, torch):
    res = []
    for m in (cgrad, torch):
        a = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([1.0, 5.0, 0.0], dtype=m.float64, requires_grad=True)
        y = getattr(m, op)(a, b)
        y.backward(m.tensor([2.0, 4.0, 8.0], dtype=m.float64))
        res.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])


CLAMP_TENSOR_CASES = {
    # x, lo, hi: ties with the bounds, lo > hi, lo == hi
    "ties": ([0.0, 0.5, 1.0, -1.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]),
    "lo_gt_hi": ([0.0, 0.5, 1.0, 3.0, -3.0], [1.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0,
                                                                         0.0]),
    "lo_eq_hi": ([0.0, 0.5, 1.0, 3.0, -3.0], [0.5] * 5, [0.5] * 5),
}


@pytest.mark.parametrize("which", ["both", "min", "max"])
@pytest.mark.parametrize("key", list(CLAMP_TENSOR_CASES))
def test_clamp_tensor_bounds_gradients_match_torch(key, which, torch):
    xs, los, his = CLAMP_TENSOR_CASES[key]
    res = []
    for m in (cgrad, torch):
        x, lo, hi = (m.tensor(v, dtype=m.float64, requires_grad=True) for v in (xs, los, his))
        if which == "both":
            y = m.clamp(x, lo, hi)
        elif which == "min":
            y = m.clamp(x, min=lo)
        else:
            y = m.clamp(x, max=hi)
        y.backward(m.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=m.float64))
        res.append([y.detach().numpy()] + [None if t.grad is None else t.grad.numpy()
                                           for t in (x, lo, hi)])
    for a, b in zip(*res):
        if b is None:
            assert a is None or not a.any()
        else:
            np.testing.assert_array_equal(a, b)


def test_masked_gradients_do_not_leak_nan(torch):
    """relu/clamp/where/maximum gradients are 'where', not 'multiply by a mask': an inf
    cotangent gives 0 (not nan) in the masked positions, as torch."""
    fns = [lambda m, x: m.relu(x), lambda m, x: x.clamp(-0.5, 0.5),
           lambda m, x: m.where(x > 0, x, 0.0),
           lambda m, x: m.maximum(x, m.zeros(3, dtype=m.float64))]
    for fn in fns:
        res = []
        for m in (cgrad, torch):
            x = m.tensor([-1.0, 0.25, 1.0], dtype=m.float64, requires_grad=True)
            (g,) = m.autograd.grad(fn(m, x), [x], m.tensor([math.inf] * 3, dtype=m.float64))
            res.append(g.detach().numpy())
        np.testing.assert_array_equal(res[0], res[1])


# ----------------------------------------------------------------------------------------
# special values: torch's results without NumPy RuntimeWarnings
# ----------------------------------------------------------------------------------------
SPECIAL = [-math.inf, -1000.0, -30.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 30.0, 1000.0,
           math.inf, math.nan]
SPECIAL_UNARY = [
    ("abs", lambda m, x: m.abs(x)), ("sign", lambda m, x: m.sign(x)),
    ("sqrt", lambda m, x: m.sqrt(x)), ("rsqrt", lambda m, x: m.rsqrt(x)),
    ("reciprocal", lambda m, x: m.reciprocal(x)), ("square", lambda m, x: m.square(x)),
    ("expm1", lambda m, x: m.expm1(x)), ("exp2", lambda m, x: m.exp2(x)),
    ("log1p", lambda m, x: m.log1p(x)), ("log2", lambda m, x: m.log2(x)),
    ("log10", lambda m, x: m.log10(x)), ("sin", lambda m, x: m.sin(x)),
    ("cos", lambda m, x: m.cos(x)), ("tan", lambda m, x: m.tan(x)),
    ("tanh", lambda m, x: m.tanh(x)), ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("relu", lambda m, x: m.relu(x)), ("leaky_relu", lambda m, x: F("leaky_relu")(m)(x)),
    ("elu", lambda m, x: F("elu")(m)(x)), ("selu", lambda m, x: F("selu")(m)(x)),
    ("gelu", lambda m, x: F("gelu")(m)(x)),
    ("gelu_tanh", lambda m, x: F("gelu")(m)(x, approximate="tanh")),
    ("silu", lambda m, x: F("silu")(m)(x)), ("softplus", lambda m, x: F("softplus")(m)(x)),
    ("softplus_beta", lambda m, x: F("softplus")(m)(x, beta=0.5, threshold=5.0)),
    ("clamp", lambda m, x: x.clamp(-1.0, 1.0)), ("floor", lambda m, x: m.floor(x)),
    ("ceil", lambda m, x: m.ceil(x)), ("round", lambda m, x: m.round(x)),
    ("trunc", lambda m, x: m.trunc(x)), ("nan_to_num", lambda m, x: m.nan_to_num(x)),
    ("nan_to_num_args", lambda m, x: m.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0)),
]
# gradients that legitimately differ at special values (documented): none so far
SPECIAL_GRAD_SKIP: set = set()
# torch 2.13's vectorised float32 gelu returns nan at +inf (float64 gives inf, the limit);
# cgrad returns the limit in both dtypes, so +inf is left out of that one comparison
SPECIAL_TORCH_QUIRK_POSINF = {("gelu", "float32")}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn", SPECIAL_UNARY, ids=[s[0] for s in SPECIAL_UNARY])
def test_special_values_match_torch_without_warnings(name, fn, dtype, torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(SPECIAL, dtype=getattr(m, dtype), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = fn(m, x)
            (g,) = m.autograd.grad(y, [x], m.ones_like(y))
        res.append((y.detach().numpy(), g.detach().numpy()))
    (yc, gc), (yt, gt) = res
    if (name, dtype) in SPECIAL_TORCH_QUIRK_POSINF:
        keep = np.array(SPECIAL) != math.inf
        assert yc[~keep][0] == math.inf
        yc, gc, yt, gt = yc[keep], gc[keep], yt[keep], gt[keep]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(yc, yt, equal_nan=True, **tol)
    if name not in SPECIAL_GRAD_SKIP:
        np.testing.assert_allclose(gc, gt, equal_nan=True, **tol)


def test_stable_extremes_are_exact():
    x = cgrad.tensor([-1000.0, 1000.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(np_of(cgrad.sigmoid(x)), [0.0, 1.0])
        np.testing.assert_array_equal(np_of(cgrad.softplus(x)), [0.0, 1000.0])
        np.testing.assert_array_equal(np_of(cgrad.softplus(x, threshold=1e6)), [0.0, 1000.0])
        np.testing.assert_array_equal(np_of(cgrad.silu(x)), [0.0, 1000.0])
        (g,) = cgrad.autograd.grad(cgrad.softplus(x, threshold=1e6).sum(), [x])
        np.testing.assert_array_equal(np_of(g), [0.0, 1.0])
    small = cgrad.tensor([1e-10], dtype=cgrad.float64)
    assert float(cgrad.expm1(small)) == pytest.approx(1e-10, rel=1e-12)
    assert float(cgrad.log1p(small)) == pytest.approx(1e-10, rel=1e-12)


SPECIAL_BINARY = [
    ("maximum", lambda m, x, y: m.maximum(x, y)), ("minimum", lambda m, x, y: m.minimum(x, y)),
    ("remainder", lambda m, x, y: m.remainder(x, y)), ("fmod", lambda m, x, y: m.fmod(x, y)),
    ("floor_divide", lambda m, x, y: x // y),
    ("div_trunc", lambda m, x, y: m.div(x, y, rounding_mode="trunc")),
    ("div_floor", lambda m, x, y: m.div(x, y, rounding_mode="floor")),
    ("clamp_tensor", lambda m, x, y: m.clamp(x, min=y)),
    ("where", lambda m, x, y: m.where(x > y, x, y)),
]
SPECIAL_B = [-math.inf, -2.5, -0.0, 0.0, 2.5, math.inf, math.nan]


@pytest.mark.parametrize("name,fn", SPECIAL_BINARY, ids=[s[0] for s in SPECIAL_BINARY])
def test_special_values_binary_match_torch_without_warnings(name, fn, torch):
    a, b = np.meshgrid(SPECIAL_B, SPECIAL_B)
    res = []
    for m in (cgrad, torch):
        x, y = m.tensor(a.ravel()), m.tensor(b.ravel())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res.append(fn(m, x, y).numpy())
    np.testing.assert_allclose(res[0], res[1], equal_nan=True)


# ----------------------------------------------------------------------------------------
# integer and boolean inputs: dtypes and values as torch
# ----------------------------------------------------------------------------------------
INT_OPS = [
    ("abs", lambda m, x: m.abs(x)), ("sign", lambda m, x: m.sign(x)),
    ("sqrt", lambda m, x: m.sqrt(x)), ("rsqrt", lambda m, x: m.rsqrt(x)),
    ("expm1", lambda m, x: m.expm1(x)), ("log1p", lambda m, x: m.log1p(x)),
    ("log2", lambda m, x: m.log2(x)), ("log10", lambda m, x: m.log10(x)),
    ("sin", lambda m, x: m.sin(x)), ("cos", lambda m, x: m.cos(x)),
    ("tan", lambda m, x: m.tan(x)), ("tanh", lambda m, x: m.tanh(x)),
    ("sigmoid", lambda m, x: m.sigmoid(x)), ("relu", lambda m, x: m.relu(x)),
    ("reciprocal", lambda m, x: m.reciprocal(x)), ("square", lambda m, x: m.square(x)),
    ("floor", lambda m, x: m.floor(x)), ("ceil", lambda m, x: m.ceil(x)),
    ("round", lambda m, x: m.round(x)), ("trunc", lambda m, x: m.trunc(x)),
    ("nan_to_num", lambda m, x: m.nan_to_num(x)),
    ("clamp_int", lambda m, x: m.clamp(x, -1, 1)),
    ("clamp_float", lambda m, x: m.clamp(x, -1.5, 1.5)),
    ("clamp_min_float", lambda m, x: m.clamp_min(x, 0.5)),
    ("floordiv_int", lambda m, x: x // 2), ("floordiv_float", lambda m, x: x // 2.5),
    ("rfloordiv", lambda m, x: 7 // (x * x + 1)), ("mod_int", lambda m, x: x % 2),
    ("mod_neg", lambda m, x: x % -3), ("rmod", lambda m, x: 7 % (x * x + 1)),
    ("mod_float", lambda m, x: x % 2.5), ("fmod_int", lambda m, x: m.fmod(x, -3)),
    ("div_trunc", lambda m, x: m.div(x, -3, rounding_mode="trunc")),
    ("div_floor", lambda m, x: m.div(x, -3, rounding_mode="floor")),
    ("div_floor_float", lambda m, x: m.div(x, 2.0, rounding_mode="floor")),
    ("div_true", lambda m, x: m.div(x, 2)),
    ("true_divide", lambda m, x: m.true_divide(x, x * x + 1)),
    ("floor_divide_tensors", lambda m, x: m.floor_divide(x * 7, x * x + 1)),
    ("maximum_0d_float", lambda m, x: m.maximum(x, m.tensor(1.0))),
    ("minimum_int32", lambda m, x: m.minimum(x, m.tensor([1, 2, 3, 4, 5], dtype=m.int32))),
    ("where_int_scalar", lambda m, x: m.where(x > 0, x, 0)),
    ("where_float_scalar", lambda m, x: m.where(x > 0, x, 0.5)),
    ("where_scalars_int", lambda m, x: m.where(x > 0, 1, 0)),
    ("where_scalars_float", lambda m, x: m.where(x > 0, 1.0, 0)),
    ("isnan", lambda m, x: m.isnan(x)), ("isfinite", lambda m, x: m.isfinite(x)),
    ("logical_not", lambda m, x: m.logical_not(x)),
    ("bitwise_not", lambda m, x: ~x), ("and", lambda m, x: x & 6), ("or", lambda m, x: 1 | x),
    ("xor", lambda m, x: x ^ x), ("bitwise_and_fn", lambda m, x: m.bitwise_and(x, 3)),
]


@pytest.mark.parametrize("kind", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name,fn", INT_OPS, ids=[o[0] for o in INT_OPS])
def test_integer_and_bool_inputs_match_torch(name, fn, kind, torch):
    data = [-2, 0, 3, 7, -5] if kind != "bool" else [True, False, True, True, False]
    res = []
    for m in (cgrad, torch):
        x = m.tensor(data, dtype=getattr(m, kind))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                y = fn(m, x)
            res.append((str(y.dtype).replace("torch.", ""), y.numpy(), y.requires_grad))
        except Exception as e:  # noqa: BLE001 - compared below
            res.append(type(e).__name__)
    if isinstance(res[1], str):
        assert res[0] == res[1], f"torch raised {res[1]}, cgrad gave {res[0]}"
        return
    assert not isinstance(res[0], str), f"cgrad raised {res[0]}"
    assert res[0][0] == res[1][0]
    np.testing.assert_allclose(res[0][1].astype(np.float64), res[1][1].astype(np.float64),
                               rtol=1e-6, equal_nan=True)
    assert res[0][2] is False


UNARY_NAMES = ["relu", "leaky_relu", "elu", "selu", "gelu", "silu", "softplus", "sigmoid",
               "tanh", "abs", "sign", "sgn", "sqrt", "rsqrt", "reciprocal", "square", "expm1",
               "exp2", "log1p", "log2", "log10", "sin", "cos", "tan", "floor", "ceil", "round",
               "trunc", "nan_to_num", "negative"]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_keeps_0d_shape_and_float_dtype(name, dtype):
    x = cgrad.tensor(0.3, dtype=getattr(cgrad, dtype), requires_grad=dtype != "float16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = getattr(cgrad, name)(x)
        assert y.shape == () and y.dtype == x.dtype
        if x.requires_grad:
            (g,) = cgrad.autograd.grad(y, [x])
            assert g.shape == () and g.dtype == x.dtype
    y = getattr(cgrad, name)(cgrad.tensor(np.zeros((2, 0, 3), dtype=dtype)))
    assert y.shape == (2, 0, 3) and y.dtype == np.dtype(dtype)


def test_integer_results_never_require_grad():
    x = cgrad.tensor([1.5, -2.0, 3.0], requires_grad=True)
    for y in (x.long().abs(), x.long() // 2, x.long() % 2, cgrad.sign(x.long()),
              x.long().clamp(0, 1), cgrad.where(x > 0, x.long(), 0), x > 0, cgrad.isnan(x),
              cgrad.maximum(x.long(), x.long())):
        assert y.dtype.kind in "iub"
        assert not y.requires_grad and y.grad_fn is None


# ----------------------------------------------------------------------------------------
# type promotion of mixed operands
# ----------------------------------------------------------------------------------------
def _t(m, dt, shape=(2,)):
    return m.tensor(np.full(shape, 1.5 if dt.startswith("f") else 1).astype(dt))


PROMOTION = [
    ("maximum_f32_f64", lambda m: m.maximum(_t(m, "float32"), _t(m, "float64"))),
    ("maximum_f32_f64_0d", lambda m: m.maximum(_t(m, "float32"), _t(m, "float64", ()))),
    ("maximum_i64_f32_0d", lambda m: m.maximum(_t(m, "int64"), _t(m, "float32", ()))),
    ("minimum_i32_i64", lambda m: m.minimum(_t(m, "int32"), _t(m, "int64"))),
    ("where_f32_f64", lambda m: m.where(_t(m, "bool"), _t(m, "float32"), _t(m, "float64"))),
    ("where_f32_f64_0d", lambda m: m.where(_t(m, "bool"), _t(m, "float32"),
                                           _t(m, "float64", ()))),
    ("where_i32_scalar_f", lambda m: m.where(_t(m, "bool"), _t(m, "int32"), 2.5)),
    ("where_f64_scalar_i", lambda m: m.where(_t(m, "bool"), _t(m, "float64"), 2)),
    ("clamp_f32_tensor_f64", lambda m: m.clamp(_t(m, "float32"), _t(m, "float64"))),
    ("clamp_i64_tensor_f32_0d", lambda m: m.clamp(_t(m, "int64"), _t(m, "float32", ()))),
    ("clamp_f16", lambda m: m.clamp(_t(m, "float16"), -1.0, 1.0)),
    ("remainder_f32_f64", lambda m: m.remainder(_t(m, "float32"), _t(m, "float64"))),
    ("fmod_i32_f", lambda m: m.fmod(_t(m, "int32"), 0.5)),
    ("floordiv_i32_i64", lambda m: _t(m, "int32") // _t(m, "int64")),
    ("div_floor_i64_f32", lambda m: m.div(_t(m, "int64"), _t(m, "float32"),
                                          rounding_mode="floor")),
    ("sigmoid_f16", lambda m: m.sigmoid(_t(m, "float16"))),
    ("relu_f16", lambda m: m.relu(_t(m, "float16"))),
    ("gelu_f16", lambda m: F("gelu")(m)(_t(m, "float16"))),
    ("silu_f16", lambda m: F("silu")(m)(_t(m, "float16"))),
    ("sqrt_i16", lambda m: m.sqrt(_t(m, "int16"))),
    ("logical_and_f_i", lambda m: m.logical_and(_t(m, "float32"), _t(m, "int64"))),
]


@pytest.mark.parametrize("name,fn", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_promotion_matches_torch(name, fn, torch):
    yc, yt = fn(cgrad), fn(torch)
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(np_of(yc).astype(np.float64), yt.numpy().astype(np.float64),
                               rtol=1e-3)


def test_default_dtype_float64_for_int_inputs():
    cgrad.set_default_dtype(cgrad.float64)
    try:
        assert cgrad.sqrt(cgrad.tensor([4])).dtype == np.float64
        assert cgrad.where(cgrad.tensor([True]), 1.0, 0).dtype == np.float64
        assert cgrad.clamp(cgrad.tensor([4]), 0.5).dtype == np.float64
    finally:
        cgrad.set_default_dtype(cgrad.float32)


@pytest.mark.parametrize("op", ["maximum", "where", "clamp", "remainder"])
def test_mixed_precision_gradients_keep_each_input_dtype(op):
    a = cgrad.tensor([0.5, 1.5, 2.5], dtype=cgrad.float32, requires_grad=True)
    b = cgrad.tensor([1.0, 1.0, 1.0], dtype=cgrad.float64, requires_grad=True)
    y = {"maximum": lambda: cgrad.maximum(a, b), "where": lambda: cgrad.where(a > 1, a, b),
         "clamp": lambda: cgrad.clamp(a, min=b), "remainder": lambda: cgrad.remainder(a, b)}[op]()
    assert y.dtype == np.float64
    y.sum().backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64


# ----------------------------------------------------------------------------------------
# no-derivative ops, comparisons, logical and bitwise ops
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr", ["x // y", "x // 2.0", "3.0 // x", "3.0 % x",
                                  "torch_or_cgrad.floor_divide(x, y)"])
def test_ops_without_derivative_raise_in_backward_as_torch(expr, torch):
    msgs = []
    for m in (cgrad, torch):
        x = m.tensor([1.5, -2.5, 3.0], requires_grad=True)
        y = m.tensor([0.5, 2.0, -4.0], requires_grad=True)
        out = eval(expr, {"x": x, "y": y, "torch_or_cgrad": m})
        assert out.requires_grad
        assert node_name(out) == "NotImplemented"
        with pytest.raises(RuntimeError, match="is not implemented") as e:
            out.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] in msgs[1]


CMP = [
    ("eq", lambda m, x, y: m.eq(x, y)), ("ne", lambda m, x, y: m.ne(x, y)),
    ("lt", lambda m, x, y: m.lt(x, y)), ("le", lambda m, x, y: m.le(x, y)),
    ("gt", lambda m, x, y: m.gt(x, y)), ("ge", lambda m, x, y: m.ge(x, y)),
    ("greater", lambda m, x, y: m.greater(x, y)), ("less_equal", lambda m, x, y: x.less_equal(y)),
    ("not_equal", lambda m, x, y: m.not_equal(x, y)), ("eq_scalar", lambda m, x, y: m.eq(x, 1.0)),
    ("gt_scalar", lambda m, x, y: x.gt(0)),
    ("logical_and", lambda m, x, y: m.logical_and(x, y)),
    ("logical_or", lambda m, x, y: x.logical_or(y)),
    ("logical_xor", lambda m, x, y: m.logical_xor(x, y)),
    ("logical_not", lambda m, x, y: m.logical_not(x)),
    ("isnan", lambda m, x, y: m.isnan(x * y)), ("isinf", lambda m, x, y: (x / y).isinf()),
    ("isfinite", lambda m, x, y: m.isfinite(x / y)),
    ("isposinf", lambda m, x, y: m.isposinf(x / y)),
    ("isneginf", lambda m, x, y: m.isneginf(x / y)),
    ("isclose", lambda m, x, y: m.isclose(x, y + 1e-9)),
    ("isclose_nan", lambda m, x, y: m.isclose(x / y, x / y, equal_nan=True)),
    ("and_bool", lambda m, x, y: (x > 0) & (y > 0)), ("or_bool", lambda m, x, y: (x > 0) | True),
    ("xor_bool", lambda m, x, y: (x > 0) ^ (y > 0)), ("invert_bool", lambda m, x, y: ~(x > 0)),
]


@pytest.mark.parametrize("name,fn", CMP, ids=[c[0] for c in CMP])
def test_comparisons_and_logical_ops_match_torch(name, fn, torch):
    xs = [1.0, 0.0, -2.0, 1.0, math.inf, 0.0]
    ys = [1.0, 0.0, 3.0, 2.0, 1.0, -1.0]
    res = []
    for m in (cgrad, torch):
        x = m.tensor(xs, requires_grad=True)
        y = m.tensor(ys, requires_grad=True)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "divide by zero", RuntimeWarning)
            warnings.filterwarnings("ignore", "invalid value", RuntimeWarning)
            out = fn(m, x, y)
        res.append(out)
    c, t = res
    assert str(c.dtype) == str(t.dtype).replace("torch.", "") == "bool"
    np.testing.assert_array_equal(np_of(c), t.numpy())
    assert not c.requires_grad and c.grad_fn is None


def test_allclose_and_equal():
    a = cgrad.tensor([1.0, 2.0])
    assert cgrad.allclose(a, a + 1e-9) and not cgrad.allclose(a, a + 1e-3)
    assert cgrad.equal(a, a.clone()) and not cgrad.equal(a, a[:1])
    assert a.allclose(a) is True


# ----------------------------------------------------------------------------------------
# errors (torch's exception types and key phrases)
# ----------------------------------------------------------------------------------------
ERRORS = [
    ("where_float_cond", lambda m: m.where(m.tensor([1.0]), m.tensor([1.0]), m.tensor([2.0])),
     RuntimeError, "where expected condition to be a boolean tensor"),
    ("clamp_no_bounds", lambda m: m.clamp(m.tensor([1.0])), RuntimeError,
     "At least one of 'min' or 'max' must not be None"),
    ("maximum_scalar", lambda m: m.maximum(m.tensor([1.0]), 2.0), TypeError,
     "must be Tensor"),
    ("int_floordiv_zero", lambda m: m.tensor([1, 2]) // m.tensor([1, 0]), RuntimeError,
     "ZeroDivisionError"),
    ("int_mod_zero", lambda m: m.tensor([1, 2]) % 0, RuntimeError, "ZeroDivisionError"),
    ("int_div_trunc_zero", lambda m: m.div(m.tensor([1]), 0, rounding_mode="trunc"),
     RuntimeError, "ZeroDivisionError"),
    ("div_bad_mode", lambda m: m.div(m.tensor([1.0]), 2, rounding_mode="round"),
     RuntimeError, "rounding_mode to be one of None, 'trunc', or 'floor'"),
    ("relu_bool", lambda m: m.relu(m.tensor([True])), RuntimeError,
     "Boolean inputs not supported for relu"),
    ("leaky_relu_int", lambda m: F("leaky_relu")(m)(m.tensor([1])), NotImplementedError,
     "\"leaky_relu_cpu\" not implemented for 'Long'"),
    ("gelu_int", lambda m: F("gelu")(m)(m.tensor([1])), NotImplementedError,
     "not implemented for 'Long'"),
    ("abs_bool", lambda m: m.abs(m.tensor([True])), NotImplementedError,
     "\"abs_cpu\" not implemented for 'Bool'"),
    ("floor_bool", lambda m: m.floor(m.tensor([True])), NotImplementedError,
     "not implemented for 'Bool'"),
    ("round_decimals_int", lambda m: m.round(m.tensor([1]), decimals=1), NotImplementedError,
     "\"round_cpu\" not implemented for 'Long'"),
    ("bitwise_float", lambda m: m.tensor([1.0]) & m.tensor([1.0]), NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    ("invert_float", lambda m: ~m.tensor([1.0]), TypeError,
     "only implemented on integer and Boolean-type tensors"),
    ("fmod_scalar_input", lambda m: m.fmod(2, m.tensor([1.0])), TypeError, "fmod()"),
    ("shape_mismatch", lambda m: m.maximum(m.ones(3), m.ones(5)), (RuntimeError, ValueError),
     ""),
]


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, msg):
    with pytest.raises(exc, match=None if not msg else msg.replace("(", r"\(").replace(
            ")", r"\)")):
        fn(cgrad)


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_table_agrees_with_torch(name, fn, exc, msg, torch):
    with pytest.raises(exc) as e:
        fn(torch)
    assert msg in str(e.value)


# ----------------------------------------------------------------------------------------
# API surface: functions, methods, operators, in-place forms
# ----------------------------------------------------------------------------------------
FUNCTION_NAMES = [
    "abs", "absolute", "sign", "sgn", "sqrt", "rsqrt", "expm1", "exp2", "log1p", "log2",
    "log10", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "selu", "clamp", "clip",
    "clamp_min", "clamp_max", "maximum", "minimum", "where", "reciprocal", "square",
    "floor_divide", "remainder", "fmod", "floor", "ceil", "round", "trunc", "fix", "eq", "ne",
    "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor",
    "isnan", "isinf", "isfinite", "nan_to_num", "div", "divide", "true_divide", "multiply",
    "subtract", "negative", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "isclose", "allclose", "equal",
]
METHOD_NAMES = [n for n in FUNCTION_NAMES if n != "selu"] + [
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__abs__", "__invert__",
    "__and__", "__or__", "__xor__", "abs_", "clamp_", "clamp_min_", "relu_", "sigmoid_",
    "tanh_", "sqrt_", "floor_", "nan_to_num_"]


def test_functions_and_methods_exist(torch):
    for n in FUNCTION_NAMES:
        assert callable(getattr(cgrad, n)), n
        assert hasattr(torch, n), n
    for n in ("leaky_relu", "elu", "gelu", "silu", "softplus"):
        assert callable(getattr(cgrad, n)), n
    for n in METHOD_NAMES:
        assert callable(getattr(cgrad.Tensor, n, None)), n
        assert hasattr(torch.Tensor, n), n


def test_signatures_and_keywords_match_torch(torch):
    x = [-1.0, 0.5, 2.0]
    for fn in [lambda m, t: F("leaky_relu")(m)(t, negative_slope=0.3),
               lambda m, t: F("elu")(m)(t, alpha=0.4),
               lambda m, t: F("softplus")(m)(t, beta=3, threshold=2),
               lambda m, t: F("gelu")(m)(t, approximate="tanh"),
               lambda m, t: m.clamp(t, min=0.0, max=1.0),
               lambda m, t: m.clamp(t, max=m.tensor(0.0)),
               lambda m, t: m.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-2.0),
               lambda m, t: m.round(t, decimals=1), lambda m, t: t.round(decimals=0),
               lambda m, t: m.div(t, 2, rounding_mode="trunc"),
               lambda m, t: m.where(t > 0, input=t, other=t * 2) if m is cgrad else
               m.where(t > 0, t, t * 2),
               lambda m, t: m.subtract(t, t, alpha=3)]:
        yc = fn(cgrad, cgrad.tensor(x))
        yt = fn(torch, torch.tensor(x))
        np.testing.assert_allclose(np_of(yc), yt.numpy(), rtol=1e-6)


OPERATORS = [
    ("floordiv", lambda x, y: x // y), ("floordiv_scalar", lambda x, y: x // -1.5),
    ("rfloordiv", lambda x, y: 5 // y), ("mod", lambda x, y: x % y),
    ("mod_scalar", lambda x, y: x % 1.5), ("rmod", lambda x, y: 5.0 % y),
    ("abs", lambda x, y: abs(x)), ("np_scalar_floordiv", lambda x, y: np.float64(5) // y),
]


@pytest.mark.parametrize("name,fn", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operators_match_torch(name, fn, torch):
    xs, ys = [-3.5, 2.0, 7.25], [2.0, -1.5, 3.0]
    yc = fn(cgrad.tensor(xs), cgrad.tensor(ys))
    yt = fn(torch.tensor(xs), torch.tensor(ys))
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(np_of(yc), yt.numpy())


def test_inplace_methods_under_no_grad():
    x = cgrad.tensor([-1.0, 0.25, 2.0])
    v = x._version
    assert x.clamp_(-0.5, 0.5) is x
    np.testing.assert_array_equal(np_of(x), [-0.5, 0.25, 0.5])
    assert x._version > v
    x.relu_()
    np.testing.assert_array_equal(np_of(x), [0.0, 0.25, 0.5])
    w = cgrad.tensor([4.0, 9.0], requires_grad=True)
    with cgrad.no_grad():
        w.sqrt_()
    np.testing.assert_array_equal(np_of(w), [2.0, 3.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.clamp_(0, 1)
    i = cgrad.tensor([4, 9])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.sqrt_()


def test_inplace_flag_of_activations():
    x = cgrad.tensor([-1.0, 2.0])
    assert cgrad.relu(x, inplace=True) is x
    np.testing.assert_array_equal(np_of(x), [0.0, 2.0])
    y = cgrad.tensor([-1.0, 2.0])
    assert cgrad.leaky_relu(y, 0.5, inplace=True) is y
    np.testing.assert_array_equal(np_of(y), [-0.5, 2.0])
    leaf = cgrad.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        cgrad.relu(leaf, inplace=True)
    # a non-leaf gets the out-of-place result, with a correct gradient
    h = leaf * 2
    out = cgrad.elu(h, inplace=True)
    out.sum().backward()
    np.testing.assert_allclose(np_of(leaf.grad), [2 * math.exp(-2.0), 2.0])


def test_where_single_argument_is_nonzero(torch):
    c = [[True, False], [True, True]]
    rc = cgrad.where(cgrad.tensor(c))
    rt = torch.where(torch.tensor(c))
    assert len(rc) == len(rt) == 2
    for a, b in zip(rc, rt):
        assert a.dtype == np.int64
        np.testing.assert_array_equal(np_of(a), b.numpy())


# ----------------------------------------------------------------------------------------
# structure: one node per activation, higher derivatives
# ----------------------------------------------------------------------------------------
ACTIVATIONS = [
    ("relu", lambda m, x: m.relu(x)), ("leaky_relu", lambda m, x: F("leaky_relu")(m)(x)),
    ("elu", lambda m, x: F("elu")(m)(x)), ("selu", lambda m, x: F("selu")(m)(x)),
    ("gelu", lambda m, x: F("gelu")(m)(x)),
    ("gelu_tanh", lambda m, x: F("gelu")(m)(x, approximate="tanh")),
    ("silu", lambda m, x: F("silu")(m)(x)), ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("tanh", lambda m, x: m.tanh(x)), ("softplus", lambda m, x: F("softplus")(m)(x)),
    ("softplus_beta", lambda m, x: F("softplus")(m)(x, beta=2.0, threshold=3.0)),
    ("sqrt", lambda m, x: m.sqrt(m.abs(x) + 0.5)),
    ("sin", lambda m, x: m.sin(x)), ("tan", lambda m, x: m.tan(x * 0.5)),
    ("log1p", lambda m, x: m.log1p(x * 0.3)), ("rsqrt", lambda m, x: m.rsqrt(x * x + 1)),
    ("expm1", lambda m, x: m.expm1(x)), ("reciprocal", lambda m, x: m.reciprocal(x + 3)),
    ("clamp", lambda m, x: x.clamp(-0.9, 0.9) ** 3),
    ("maximum", lambda m, x: m.maximum(x ** 3, x * 0.5)),
    ("where", lambda m, x: m.where(x > 0, x ** 3, m.sin(x))),
    ("softplus_sigmoid", lambda m, x: m.sigmoid(F("softplus")(m)(x)) * m.tanh(x)),
]
PIECEWISE_LINEAR = [
    ("relu", lambda m, x: m.relu(x)), ("leaky_relu", lambda m, x: F("leaky_relu")(m)(x)),
    ("abs", lambda m, x: m.abs(x)),
]


@pytest.mark.parametrize("name,fn", PIECEWISE_LINEAR, ids=[a[0] for a in PIECEWISE_LINEAR])
def test_second_derivative_of_piecewise_linear_is_zero_as_torch(name, fn, torch):
    """torch returns zeros (not 'unused input') for d2/dx2 of relu, leaky_relu, abs."""
    for m in (cgrad, torch):
        x = m.tensor([-1.7, 0.4], dtype=m.float64, requires_grad=True)
        (g1,) = m.autograd.grad(fn(m, x).sum(), [x], create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), [x])
        np.testing.assert_array_equal(g2.detach().numpy(**({} if m is cgrad else {"force": True})),
                                      [0.0, 0.0])


@pytest.mark.parametrize("name,fn", ACTIVATIONS[:11], ids=[a[0] for a in ACTIVATIONS[:11]])
def test_activation_is_one_node(name, fn):
    x = cgrad.tensor([-1.0, 2.0], requires_grad=True)
    y = fn(cgrad, x)
    nxt = y.grad_fn.next_functions
    assert len(nxt) >= 1 and type(nxt[0][0]).__name__ == "AccumulateGrad"


SMOOTH = [a for a in ACTIVATIONS if a[0] not in ("relu", "leaky_relu")]


@pytest.mark.parametrize("name,fn", SMOOTH, ids=[a[0] for a in SMOOTH])
def test_third_derivative_matches_torch(name, fn, torch):
    """d^3/dx^3 through three nested create_graph gradients."""
    xs = [-1.7, -0.3, 0.4, 1.3]
    res = []
    for m in (cgrad, torch):
        x = m.tensor(xs, dtype=m.float64, requires_grad=True)
        y = fn(m, x).sum()
        for _ in range(3):
            (y,) = m.autograd.grad(y, [x], create_graph=True)
            y = y.sum()
        res.append(float(y.detach()))
    assert res[0] == pytest.approx(res[1], rel=1e-9, abs=1e-12)


def test_saved_output_version_check():
    """sigmoid/tanh/relu save their output: modifying it in place is detected at backward,
    as in torch."""
    for f in (cgrad.sigmoid, cgrad.tanh, cgrad.relu, cgrad.sqrt):
        x = cgrad.tensor([0.5, 1.5], requires_grad=True)
        y = f(x)
        with cgrad.no_grad():
            y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("e", [2, 3, -2, -0.5, -1, 3.0, -2.0])
def test_pow_scalar_kernels_are_bitwise_torch(dtype, e):
    """pow(t, e) for the exponents torch computes by products or reciprocals: the same bits
    as torch (np.power differs in the last bit for 3 and -2), special values included.
    (0.5: torch 2.13's pow(t, 0.5) differs from a correctly rounded sqrt in the last bit for
    about 1 value in 10; cgrad's is np.sqrt's.)"""
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(5).standard_normal(4000) * 10).astype(dtype)
    x[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -3.0]
    got = cgrad.pow(cgrad.from_numpy(x), e).numpy()
    want = torch.pow(torch.from_numpy(x), e).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("e", [3, -2])
def test_pow_product_kernels_gradients(e):
    x = cgrad.tensor([0.7, -1.3, 2.1], dtype=cgrad.float64, requires_grad=True)
    assert cgrad.autograd.gradcheck(lambda t: t ** e, (x,))
    assert cgrad.autograd.gradgradcheck(lambda t: t ** e, (x,))


# GELU (approximate='none') keeps Phi(x) from its forward for its backward (one erf per
# forward+backward pair); the double backward recomputes it. Values and gradients of both
# paths against a float64 reference and torch.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_backward_reuses_forward_cdf(dtype):
    from scipy.special import erf
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((7, 33)) * 4).astype(dtype)
    x[0, :4] = [0.0, -0.0, 40.0, -40.0]
    a = cgrad.tensor(x, requires_grad=True)
    y = cgrad.nn.functional.gelu(a)
    ref = x * 0.5 * (1.0 + erf(x * np.sqrt(0.5)))       # the old formula, same rounding
    if dtype == np.float64:     # float32: Note [GELU in float32], tested below
        assert y.detach().numpy().tobytes() == (x * ((erf(x * np.sqrt(0.5)) + 1.0) * 0.5)
                                                ).astype(dtype).tobytes()
    g = rng.standard_normal(x.shape).astype(dtype)
    y.backward(cgrad.tensor(g))
    ta = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(ta).backward(torch.tensor(g))
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=tol, atol=tol)
    # second order, and the in-place check on the saved input
    a64 = cgrad.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    assert cgrad.autograd.gradgradcheck(lambda t: cgrad.nn.functional.gelu(t), (a64,))
    b = a64.detach().clone().requires_grad_()
    c = b * 1.0
    out = cgrad.nn.functional.gelu(c)
    c.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def _ulps32(got, ref):
    """|got - ref| in units of the float32 spacing at ref (ref float64, nonzero)."""
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))


# Note [GELU in float32]: Phi from an erfc fit in float32 NumPy passes. Pinned: the accuracy
# the Note states against float64 x * ndtr(x) over a dense grid, the special values, that
# the tail keeps its relative accuracy (where torch's 1 + erf cancels), the gradient, and that
# the forward's Phi and a recomputed one (double backward path) are the same function.
@pytest.fixture(params=["compiled", "numpy"])
def gelu_path(request, monkeypatch):
    """Both float32 paths of GELU and ELU: cgrad._fused's passes and the NumPy passes."""
    from cgrad.ops import pointwise
    if request.param == "compiled" and pointwise._fused_ext is None:
        pytest.skip("cgrad._fused not built")
    monkeypatch.setattr(pointwise, "_F32_EXT", request.param == "compiled")
    return request.param


def test_gelu_float32_accuracy_and_specials(gelu_path):
    from scipy.special import ndtr
    x = np.concatenate([np.linspace(-14, 9, 400_001), np.linspace(-1e-3, 1e-3, 2001),
                        [1e-30, -1e-30, 1e-40, 3e38, -3e38]]).astype(np.float32)
    y = cgrad.nn.functional.gelu(cgrad.from_numpy(x)).numpy()
    assert y.dtype == np.float32
    x64 = x.astype(np.float64)
    ref = x64 * ndtr(x64)
    nz = ref != 0
    u = _ulps32(y[nz], ref[nz])
    xs = x[nz]
    assert u[xs > -1].max() <= 8
    assert u[xs > -5].max() <= 24
    assert u.max() <= 160
    assert u[xs > -1].mean() < 0.6
    # where the exact value underflows float32 we give zero of the right sign
    assert np.all(np.abs(y[~nz]) == 0)
    sp = cgrad.nn.functional.gelu(cgrad.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, -40.0, 40.0],
                                               dtype=cgrad.float32)).numpy()
    assert sp[0] == 0 and sp[1] == 0 and sp[2] == np.inf and np.isnan(sp[3]) and np.isnan(sp[4])
    assert sp[5] == 0 and np.signbit(sp[5]) and sp[6] == 40.0
    # the gradient Phi(x) + x phi(x), from the forward's Phi, against float64
    a = cgrad.tensor(x[:400_001:97], requires_grad=True)
    cgrad.nn.functional.gelu(a).sum().backward()
    xg = x[:400_001:97].astype(np.float64)
    dref = ndtr(xg) + xg * np.exp(-0.5 * xg * xg) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(a.grad.numpy(), dref, rtol=2e-6, atol=3e-7)
    # GeluBackward without the forward's Phi (the double backward path) computes the same
    from cgrad.ops.pointwise import GeluBackward
    g = cgrad.ones(a.shape)
    again = GeluBackward.apply(g, a.detach(), "none").numpy()
    assert again.tobytes() == a.grad.numpy().tobytes()
    # a broadcast incoming gradient takes the NumPy product (the kernel wants equal shapes)
    b = cgrad.tensor(x[:1000], requires_grad=True)
    gb = GeluBackward.apply(cgrad.ones(()), b.detach(), "none").numpy()
    np.testing.assert_array_equal(gb, GeluBackward.apply(cgrad.ones(1000), b.detach(),
                                                         "none").numpy())


def test_gelu_paths_agree_to_rounding():
    """The compiled pass and the NumPy passes: the same formulas, a few ulp apart."""
    from cgrad.ops import pointwise
    if pointwise._fused_ext is None:
        pytest.skip("cgrad._fused not built")
    x = np.random.default_rng(4).standard_normal((300, 301)).astype(np.float32) * 4
    y, cdf = pointwise._fused_ext.gelu_f32(x)
    cdf_np = pointwise._gelu_cdf(x)
    assert np.abs(cdf - cdf_np).max() <= 4 * np.spacing(np.float32(1))
    # in the left tail Phi's relative error is the exponent's absolute error (the exponent is
    # ~ -x^2 / 2): the AVX-512 kernel rounds it once (FMA), NumPy twice, so they part by up
    # to a few float32 ulp of x^2 / 2 there (both within test_gelu_float32_accuracy's bounds)
    np.testing.assert_allclose(y, x * cdf_np, rtol=1e-5, atol=1e-30)
    g = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
    d = pointwise._fused_ext.gelu_bwd_f32(x, cdf, g)
    ref = (np.exp(x.astype(np.float64) ** 2 * -0.5) * pointwise._INV_SQRT_2PI * x + cdf) * g
    np.testing.assert_allclose(d, ref, rtol=3e-6, atol=1e-7)
    with pytest.raises(ValueError, match="one shape"):
        pointwise._fused_ext.gelu_bwd_f32(x, cdf, g[:1])
    with pytest.raises(TypeError, match="float32 ndarray"):
        pointwise._fused_ext.gelu_f32(x.astype(np.float64))
    with pytest.raises(ValueError, match="cdf must have"):
        pointwise._fused_ext.gelu_bwd_f32(x, cdf[:1], g)


# Note [ELU in C]: float32 elu/selu and their derivative in one compiled pass each, expm1
# and exp within 1 ulp (the NumPy passes: 2). Pinned on both paths (the gelu_path fixture switches every float32
# kernel of cgrad.ops.pointwise): the ulp bound over dense grids, special values, selu's
# constants, the gradient and the double-backward path, non-contiguous input.
def _ulp_diff32(a, b):
    a = a.view(np.int32).astype(np.int64)
    b = b.view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7fffffff), a)
    b = np.where(b < 0, -(b & 0x7fffffff), b)
    return np.abs(a - b)


def test_elu_float32_within_one_ulp(gelu_path):
    F = cgrad.nn.functional
    x = np.concatenate([np.linspace(-120, 8, 1_000_001), np.linspace(-1e-3, 1e-3, 20_001),
                        -np.logspace(-44, 2, 100_001)]).astype(np.float32)
    y = F.elu(cgrad.from_numpy(x)).numpy()
    x64 = x.astype(np.float64)
    ref = np.where(x64 > 0, x64, np.expm1(x64)).astype(np.float32)
    assert y.dtype == np.float32
    bound = 1 if gelu_path == "compiled" else 2     # NumPy's float32 expm1: 2 ulp near -0.01
    assert _ulp_diff32(y, ref).max() <= bound
    # alpha: one float32 product after expm1, as NumPy's expm1(x) * alpha
    y2 = F.elu(cgrad.from_numpy(x), alpha=0.5).numpy()
    ref2 = np.where(x > 0, x, np.expm1(x64).astype(np.float32) * np.float32(0.5))
    assert _ulp_diff32(y2, ref2).max() <= bound
    # the derivative: exp(x) on the left, 1 on the right (and at nan, as torch's x <= 0 test)
    a = cgrad.tensor(x[::7], requires_grad=True)
    F.elu(a).backward(cgrad.ones(a.shape))
    dref = np.where(x64[::7] > 0, 1.0, np.exp(x64[::7])).astype(np.float32)
    assert _ulp_diff32(a.grad.numpy(), dref).max() <= bound
    sp = cgrad.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, -200.0, -1e-45, 1e-45],
                      dtype=cgrad.float32, requires_grad=True)
    out = F.elu(sp)
    o = out.detach().numpy()
    assert o[0] == 0 and o[1] == 0 and o[2] == np.inf and o[3] == -1 and np.isnan(o[4])
    assert o[5] == -1 and o[6] == np.float32(-1e-45) and o[7] == np.float32(1e-45)
    out.backward(cgrad.ones(8))
    gs = sp.grad.numpy()
    assert gs[0] == 1 and gs[1] == 1 and gs[2] == 1 and gs[3] == 0 and gs[4] == 1
    assert gs[5] == 0 and gs[6] == 1 and gs[7] == 1


def test_selu_float32_and_second_derivative(gelu_path):
    F = cgrad.nn.functional
    from cgrad.ops.pointwise import SELU_ALPHA, SELU_SCALE
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((257, 130)) * 4).astype(np.float32)[:, ::3]   # a view
    a = cgrad.tensor(x, requires_grad=True)
    y = F.selu(a)
    x64 = x.astype(np.float64)
    ref = np.where(x64 > 0, x64 * SELU_SCALE, np.expm1(x64) * SELU_ALPHA * SELU_SCALE)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=3e-7, atol=1e-30)
    g = cgrad.tensor(rng.standard_normal(x.shape).astype(np.float32), requires_grad=True)
    (gx,) = cgrad.autograd.grad(y, a, g, create_graph=True)
    dref = g.detach().numpy() * np.where(x64 > 0, SELU_SCALE, np.exp(x64) * SELU_ALPHA * SELU_SCALE)
    np.testing.assert_allclose(gx.detach().numpy(), dref, rtol=3e-7, atol=1e-30)
    gx.sum().backward()                 # through EluBackward: the second derivative
    d2 = g.detach().numpy() * np.where(x64 < 0, np.exp(x64) * SELU_ALPHA * SELU_SCALE, 0.0)
    np.testing.assert_allclose(a.grad.numpy(), d2, rtol=3e-6, atol=1e-30)


def test_elu_float32_matches_torch(gelu_path):
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(7).standard_normal((64, 100)) * 5).astype(np.float32)
    for fn, kw in (("elu", {}), ("elu", {"alpha": 0.3}), ("selu", {})):
        a = cgrad.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        y = getattr(cgrad.nn.functional, fn)(a, **kw)
        ty = getattr(torch.nn.functional, fn)(t, **kw)
        y.sum().backward()
        ty.sum().backward()
        assert _ulp_diff32(y.detach().numpy(), ty.detach().numpy()).max() <= 2
        # torch: grad * negiptcoef * negcoef * exp(x), three float32 roundings
        assert _ulp_diff32(a.grad.numpy(), t.grad.numpy()).max() <= 4


def test_elu_kernel_input_checks():
    from cgrad.ops import pointwise
    if pointwise._fused_ext is None:
        pytest.skip("cgrad._fused not built")
    x = np.zeros(10, np.float32)
    with pytest.raises(TypeError, match="float32 ndarray"):
        pointwise._fused_ext.elu_f32(x.astype(np.float64), 1.0, 1.0)
    with pytest.raises(ValueError, match="one shape"):
        pointwise._fused_ext.elu_bwd_f32(x, x[:3], 1.0, 1.0)
    with pytest.raises(TypeError, match="float32 ndarray"):
        pointwise._fused_ext.elu_bwd_f32(x, [1.0] * 10, 1.0, 1.0)
    # a broadcast incoming gradient takes the NumPy product (to rounding the same values)
    from cgrad.ops.pointwise import EluBackward
    b = cgrad.tensor(np.linspace(-3, 3, 50, dtype=np.float32))
    np.testing.assert_allclose(EluBackward.apply(cgrad.ones(()), b, 1.0, 1.0).numpy(),
                               EluBackward.apply(cgrad.ones(50), b, 1.0, 1.0).numpy(),
                               rtol=3e-7)


def test_gelu_float32_matches_torch_where_torch_is_accurate(gelu_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 257)) * 3).astype(np.float32)
    x = x[:, ::2]                                       # non-contiguous input
    y = cgrad.nn.functional.gelu(cgrad.from_numpy(x)).numpy()
    t = torch.nn.functional.gelu(torch.from_numpy(np.ascontiguousarray(x))).numpy()
    m = x > -1                  # below, torch's own float32 GELU (1 + erf) loses digits
    np.testing.assert_allclose(y[m], t[m], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(y[~m], t[~m], rtol=0, atol=1e-6)
