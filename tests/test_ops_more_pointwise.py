"""Elementwise ops of cgrad/ops/special.py (issue 17), driven by one table (OPS), against torch.

For every row, in float32 and float64: forward values, dtype, requires_grad and
vector-Jacobian products equal torch's; the node name is torch's (column `node`, itself
checked against torch); gradcheck and gradgradcheck pass in float64 (torch's
cgrad.autograd.gradcheck); the second-order gradient equals torch's; no graph is recorded
under no_grad. Then: dtype rules (integer, boolean and mixed inputs), special values (inf,
nan, the edges of the domains) for values and gradients, torch's errors, the in-place forms,
aliases and methods.

Callables take the tensor module first (`cgrad` or `torch`); adding an op is one row.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import cgrad


@dataclass
class Case:
    name: str
    fn: Callable                    # fn(m, *tensors)
    shapes: tuple                   # one shape per tensor input
    domain: Any = "real"            # see DOMAINS; one for all inputs or one per input
    node: str | None = None         # torch's node name of the output

    def __str__(self):
        return self.name


DOMAINS = {
    "real": (-1.5, 1.5),
    "wide": (-4.0, 4.0),
    "unit": (-0.9, 0.9),
    "prob": (0.05, 0.95),
    "above1": (1.2, 3.0),
    "positive": (0.5, 2.0),
    "nonzero": None,                # +-(0.5, 2)
}
S = (3, 4)


def un(name, domain="real", node=None, method=True, **kw):
    """A unary op in function form and method form (with keyword arguments)."""
    tag = "" if not kw else "_" + "_".join(f"{k}{v}" for k, v in kw.items())
    rows = [Case(name + tag, lambda m, x: getattr(m, name)(x, **kw), (S,), domain, node)]
    if method:
        rows.append(Case(name + tag + "_method", lambda m, x: getattr(x, name)(**kw), (S,),
                         domain, node))
    return rows


OPS = [
    *un("acos", "unit", "AcosBackward0"), *un("arccos", "unit", "AcosBackward0"),
    *un("asin", "unit", "AsinBackward0"), *un("arcsin", "unit", "AsinBackward0"),
    *un("atan", "wide", "AtanBackward0"), *un("arctan", "wide", "AtanBackward0"),
    *un("sinh", "wide", "SinhBackward0"), *un("cosh", "wide", "CoshBackward0"),
    *un("asinh", "wide", "AsinhBackward0"), *un("arcsinh", "wide", "AsinhBackward0"),
    *un("acosh", "above1", "AcoshBackward0"), *un("arccosh", "above1", "AcoshBackward0"),
    *un("atanh", "unit", "AtanhBackward0"), *un("arctanh", "unit", "AtanhBackward0"),
    *un("erf", "wide", "ErfBackward0"), *un("erfc", "wide", "ErfcBackward0"),
    *un("erfinv", "unit", "ErfinvBackward0"),
    *un("logit", "prob", "LogitBackward0"),
    *un("logit", "real", "LogitBackward0", eps=0.2),
    *un("sinc", "wide", "SincBackward0"),
    *un("deg2rad", "wide", "Deg2RadBackward0"), *un("rad2deg", "wide", "Rad2DegBackward0"),
    *un("frac", "wide", "FracBackward0"),
    Case("erf_0d", lambda m, x: m.erf(x), ((),), "real", "ErfBackward0"),
    Case("acos_3d", lambda m, x: m.acos(x), ((2, 3, 2),), "unit", "AcosBackward0"),
    # -- binary ------------------------------------------------------------------------
    Case("atan2", lambda m, x, y: m.atan2(x, y), (S, S), "real", "Atan2Backward0"),
    Case("atan2_bcast", lambda m, x, y: x.atan2(y), (S, (4,)), "real", "Atan2Backward0"),
    Case("arctan2", lambda m, x, y: m.arctan2(x, y), ((3, 1), (4,)), "real",
         "Atan2Backward0"),
    Case("arctan2_method", lambda m, x, y: x.arctan2(y), (S, ()), "real", "Atan2Backward0"),
    Case("hypot", lambda m, x, y: m.hypot(x, y), (S, S), "nonzero", "HypotBackward0"),
    Case("hypot_bcast", lambda m, x, y: x.hypot(y), ((3, 1), (4,)), "nonzero",
         "HypotBackward0"),
    Case("logaddexp", lambda m, x, y: m.logaddexp(x, y), (S, S), "wide",
         "LogaddexpBackward0"),
    Case("logaddexp_bcast", lambda m, x, y: x.logaddexp(y), (S, (4,)), "wide",
         "LogaddexpBackward0"),
    Case("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), (S, (3, 1)), "wide",
         "Logaddexp2Backward0"),
    Case("logaddexp2_method", lambda m, x, y: x.logaddexp2(y), (S, S), "wide",
         "Logaddexp2Backward0"),
    Case("xlogy", lambda m, x, y: m.xlogy(x, y), (S, S), ("real", "positive"),
         "XlogyBackward0"),
    Case("xlogy_bcast", lambda m, x, y: x.xlogy(y), (S, (4,)), ("real", "positive"),
         "XlogyBackward0"),
    Case("xlogy_scalar_other", lambda m, x: m.xlogy(x, 2.5), (S,), "real", "XlogyBackward2"),
    Case("xlogy_scalar_self", lambda m, y: m.xlogy(2.5, y), (S,), "positive",
         "XlogyBackward1"),
    Case("copysign", lambda m, x, y: m.copysign(x, y), (S, S), "nonzero",
         "CopysignBackward0"),
    Case("copysign_bcast", lambda m, x, y: x.copysign(y), (S, (4,)), "nonzero",
         "CopysignBackward0"),
    Case("copysign_scalar", lambda m, x: m.copysign(x, -1.0), (S,), "nonzero",
         "CopysignBackward1"),
    Case("copysign_scalar_method", lambda m, x: x.copysign(2), (S,), "nonzero",
         "CopysignBackward1"),
    Case("float_power", lambda m, x, y: m.float_power(x, y), (S, S), ("positive", "real"),
         "PowBackward1"),
    Case("float_power_scalar", lambda m, x: m.float_power(x, 3), (S,), "real",
         "PowBackward0"),
    Case("float_power_scalar_method", lambda m, x: x.float_power(0.5), (S,), "positive",
         "PowBackward0"),
    Case("float_power_rscalar", lambda m, y: m.float_power(2.5, y), (S,), "real",
         "PowBackward2"),
    Case("lerp_scalar", lambda m, x, y: m.lerp(x, y, 0.3), (S, S), "real", "LerpBackward0"),
    Case("lerp_scalar_big", lambda m, x, y: x.lerp(y, 0.75), (S, (4,)), "real",
         "LerpBackward0"),
    Case("lerp_tensor", lambda m, x, y, w: m.lerp(x, y, w), (S, S, S), "real",
         "LerpBackward1"),
    Case("lerp_tensor_bcast", lambda m, x, y, w: x.lerp(y, w), ((4,), (3, 1), S), "real",
         "LerpBackward1"),
    Case("lerp_tensor_0d_weight", lambda m, x, y, w: m.lerp(x, y, w), (S, S, ()), "real",
         "LerpBackward1"),
    # -- compositions ------------------------------------------------------------------
    Case("composite", lambda m, x, y: m.atan2(m.sinh(x), m.cosh(y)).erf() * m.hypot(x, y),
         (S, (4,)), "nonzero", "MulBackward0"),
]
IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS)


def arrays_for(case, dtype=np.float64):
    rng = np.random.default_rng(sum(map(ord, case.name)))
    doms = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(case.shapes)
    out = []
    for shape, dom in zip(case.shapes, doms):
        if dom == "nonzero":
            a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            a = rng.uniform(*DOMAINS[dom], shape)
        out.append(np.asarray(a, dtype=dtype))
    return out


def node_name(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


def cg(arrays, rg=True):
    return [cgrad.tensor(a, requires_grad=rg) for a in arrays]


def th(torch, arrays, rg=True):
    return [torch.tensor(a, requires_grad=rg) for a in arrays]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_matches_torch(case, dtype, torch):
    arrays = arrays_for(case, dtype)
    xc, xt = cg(arrays), th(torch, arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yc = case.fn(cgrad, *xc)
    yt = case.fn(torch, *xt)
    assert tuple(yc.shape) == tuple(yt.shape)
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(yc.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
    assert yc.requires_grad == yt.requires_grad
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(yc.dtype)
    gc = cgrad.autograd.grad(yc, xc, cgrad.tensor(v), allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(v), allow_unused=True)
    for a, b in zip(gc, gt):
        assert (a is None) == (b is None)
        if b is not None:
            assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)[6:]
            np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL[dtype])


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_second_order_matches_torch(case, torch):
    """The gradient of <grad, w> (double backward) equals torch's."""
    arrays = arrays_for(case)
    res = []
    for m in (cgrad, torch):
        xs = cg(arrays) if m is cgrad else th(torch, arrays)
        y = case.fn(m, *xs)
        v = m.tensor(np.random.default_rng(2).standard_normal(tuple(y.shape)))
        gs = m.autograd.grad(y, xs, v, create_graph=True)
        w = [m.tensor(np.random.default_rng(3 + i).standard_normal(tuple(g.shape)))
             for i, g in enumerate(gs)]
        s = sum((g * wi).sum() for g, wi in zip(gs, w) if g.requires_grad)
        if not isinstance(s, m.Tensor):
            res.append(None)
            continue
        hs = m.autograd.grad(s, xs, allow_unused=True)
        res.append([None if h is None else h.detach().numpy() for h in hs])
    if res[1] is None:
        assert res[0] is None
        return
    for a, b in zip(*res):
        if b is None:
            assert a is None or not a.any()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradcheck(case):
    xs = cg(arrays_for(case))
    assert cgrad.autograd.gradcheck(lambda *a: case.fn(cgrad, *a), xs)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradgradcheck(case):
    xs = cg(arrays_for(case))
    assert cgrad.autograd.gradgradcheck(lambda *a: case.fn(cgrad, *a), xs)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_node_name(case, torch):
    arrays = arrays_for(case)
    assert node_name(case.fn(cgrad, *cg(arrays))) == case.node
    assert node_name(case.fn(torch, *th(torch, arrays))) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad(case):
    xs = cg(arrays_for(case))
    with cgrad.no_grad():
        y = case.fn(cgrad, *xs)
    assert y.grad_fn is None and not y.requires_grad
    y = case.fn(cgrad, *cg(arrays_for(case), rg=False))
    assert y.grad_fn is None and not y.requires_grad


# ----------------------------------------------------------------------------------------
# dtypes
# ----------------------------------------------------------------------------------------
UNARY = ["acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
         "erfinv", "logit", "sinc", "deg2rad", "rad2deg", "frac", "arccos", "arcsinh"]
BINARY = ["atan2", "hypot", "logaddexp", "logaddexp2", "xlogy", "copysign", "heaviside",
          "float_power"]
DT_INPUTS = {
    "i64": lambda m: m.tensor([1, 0, 2]), "i32": lambda m: m.tensor([1, 0, 2], dtype=m.int32),
    "u8": lambda m: m.tensor([1, 0, 2], dtype=m.uint8),
    "bool": lambda m: m.tensor([True, False, True]),
    "f16": lambda m: m.tensor([0.1, 0.2, -0.3], dtype=m.float16),
    "f32": lambda m: m.tensor([0.1, 0.2, -0.3]),
    "f64": lambda m: m.tensor([0.1, 0.2, -0.3], dtype=m.float64),
}
PAIRS = {
    "i64,i64": ("i64", "i64"), "i64,f32": ("i64", "f32"), "f32,f64": ("f32", "f64"),
    "bool,bool": ("bool", "bool"), "f16,f16": ("f16", "f16"), "u8,i32": ("u8", "i32"),
    "f32,2": ("f32", 2), "f32,2.5": ("f32", 2.5), "i64,2.5": ("i64", 2.5),
    "2.5,f32": (2.5, "f32"), "f32,0d64": ("f32", "0d64"), "0d64,f32": ("0d64", "f32"),
}


def _outcome(f):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f()
    except Exception as e:          # noqa: BLE001
        return type(e).__name__, str(e).split("\n")[0]
    return (str(out.dtype).replace("torch.", "").replace("cgrad.", ""),
            out.detach().double().numpy())


def _same(a, b):
    assert a[0] == b[0], (a, b)
    if isinstance(a[1], str):
        assert a[1] == b[1].replace("torch.", "cgrad."), (a, b)
    else:
        np.testing.assert_allclose(a[1], b[1], rtol=1e-3, atol=1e-3)


def _arg(m, k):
    if isinstance(k, str):
        if k == "0d64":
            return m.tensor(2.0, dtype=m.float64)
        return DT_INPUTS[k](m)
    return k


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dt", list(DT_INPUTS))
def test_unary_dtypes_match_torch(name, dt, torch):
    res = [_outcome(lambda m=m: getattr(m, name)(DT_INPUTS[dt](m))) for m in (cgrad, torch)]
    _same(*res)


@pytest.mark.parametrize("name", UNARY + ["logaddexp", "atan2", "hypot", "xlogy", "copysign",
                                  "lerp", "float_power"])
def test_zero_dim_inputs_match_torch(name, torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(1.25 if "cosh" in name else 0.25, dtype=m.float64, requires_grad=True)
        y = m.tensor(0.75, dtype=m.float64, requires_grad=True)
        args = (x,) if name in UNARY else (x, y, 0.5) if name == "lerp" else (x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = getattr(m, name)(*args)
            gs = m.autograd.grad(out, [x, y], allow_unused=True)
        res.append((tuple(out.shape), out.item(), [None if g is None else g.item() for g in gs]))
    assert res[0][0] == res[1][0] == ()
    assert res[0][1] == pytest.approx(res[1][1], rel=1e-12)
    for a, b in zip(res[0][2], res[1][2]):
        assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("pair", list(PAIRS))
def test_binary_dtypes_and_argument_errors_match_torch(name, pair, torch):
    a, b = PAIRS[pair]
    res = [_outcome(lambda m=m: getattr(m, name)(_arg(m, a), _arg(m, b)))
           for m in (cgrad, torch)]
    _same(*res)


LERP_CALLS = {
    "f32_f64_end": lambda m: m.lerp(m.ones(3), m.ones(3, dtype=m.float64), 0.5),
    "f64_f32_end": lambda m: m.lerp(m.ones(3, dtype=m.float64), m.ones(3), 0.5),
    "weight_dtype": lambda m: m.lerp(m.ones(3), m.ones(3), m.ones(3, dtype=m.float64)),
    "weight_0d_f64": lambda m: m.lerp(m.ones(3), m.zeros(3), m.tensor(0.3, dtype=m.float64)),
    "weight_0d_int": lambda m: m.lerp(m.ones(3), m.zeros(3), m.tensor(1)),
    "int_scalar": lambda m: m.lerp(m.ones(3, dtype=m.int64), m.ones(3, dtype=m.int64), 0.5),
    "int_tensor": lambda m: m.lerp(m.ones(3, dtype=m.int64), m.ones(3, dtype=m.int64),
                                   m.ones(3, dtype=m.int64)),
    "bcast": lambda m: m.lerp(m.ones(3), m.ones(4), 0.5),
    "bcast_weight": lambda m: m.lerp(m.ones(3), m.ones(3), m.ones(2)),
    "end_scalar": lambda m: m.lerp(m.ones(3), 1.0, 0.5),
    "weight_int": lambda m: m.lerp(m.ones(3), m.zeros(3), 1),
    "f16": lambda m: m.lerp(m.ones(3, dtype=m.float16), m.zeros(3, dtype=m.float16), 0.25),
    "big_weight": lambda m: m.lerp(m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0]), 2.5),
    "logit_eps_str": lambda m: m.logit(m.ones(3), eps="a"),
    "logit_int_eps": lambda m: m.logit(m.tensor([0, 1]), eps=0.1),
    "atan2_number": lambda m: m.atan2(m.ones(3), 2.0),
    "atan2_list": lambda m: m.atan2([1.0], m.ones(3)),
    "hypot_bcast": lambda m: m.hypot(m.ones(3), m.ones(4)),
    "xlogy_two_numbers": lambda m: m.xlogy(2.0, 3.0),
    "xlogy_string": lambda m: m.xlogy(m.ones(2), "a"),
    "heaviside_scalar": lambda m: m.heaviside(m.ones(2), 0.5),
    "heaviside_dtypes": lambda m: m.heaviside(m.ones(2), m.ones(2, dtype=m.float64)),
    "float_power_numbers": lambda m: m.float_power(2.0, 3.0),
    "copysign_number_first": lambda m: m.copysign(2.0, m.ones(2)),
}


@pytest.mark.parametrize("key", list(LERP_CALLS))
def test_calls_and_errors_match_torch(key, torch):
    _same(*[_outcome(lambda m=m: LERP_CALLS[key](m)) for m in (cgrad, torch)])


# ----------------------------------------------------------------------------------------
# special values: values and gradients (torch's, without NumPy warnings)
# ----------------------------------------------------------------------------------------
SPECIAL = [-math.inf, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 30.0, 1000.0, math.inf,
           math.nan]
# fn(m, x, y): x holds SPECIAL, y SPECIAL reversed (two leaves: no gradient is summed)
SPECIAL_FNS = {n: (lambda m, x, y, n=n: getattr(m, n)(x)) for n in UNARY}
SPECIAL_FNS.update({
    "logit_eps": lambda m, x, y: m.logit(x, 0.25),
    "atan2": lambda m, x, y: m.atan2(x, y),
    "atan2_zero": lambda m, x, y: m.atan2(x, m.zeros_like(x)),
    "hypot": lambda m, x, y: m.hypot(x, y),
    "hypot_zero": lambda m, x, y: m.hypot(x, m.zeros_like(x)),
    "logaddexp": lambda m, x, y: m.logaddexp(x, y),
    "logaddexp_same": lambda m, x, y: m.logaddexp(x, x.detach()),
    "logaddexp2": lambda m, x, y: m.logaddexp2(x, y),
    "xlogy": lambda m, x, y: m.xlogy(x, y),
    "xlogy_zero": lambda m, x, y: m.xlogy(m.zeros_like(x), y),
    "xlogy_scalar_neg": lambda m, x, y: m.xlogy(x, -1.0),
    "xlogy_scalar_zero": lambda m, x, y: m.xlogy(x, 0.0),
    "xlogy_scalar_self": lambda m, x, y: m.xlogy(0.0, x),
    "copysign": lambda m, x, y: m.copysign(x, y),
    "copysign_scalar": lambda m, x, y: m.copysign(x, -0.0),
    "float_power": lambda m, x, y: m.float_power(x, y),
    "float_power_half": lambda m, x, y: m.float_power(x, 0.5),
    "float_power_rscalar": lambda m, x, y: m.float_power(-2.0, x),
    "lerp": lambda m, x, y: m.lerp(x, y, 0.3),
    "lerp_tensor": lambda m, x, y: m.lerp(x, y, m.tensor(0.75, dtype=m.float64)),
})


@pytest.mark.parametrize("name", list(SPECIAL_FNS))
def test_special_values_match_torch(name, torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(SPECIAL, dtype=m.float64, requires_grad=True)
        y = m.tensor(SPECIAL[::-1], dtype=m.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = SPECIAL_FNS[name](m, x, y)
            gs = m.autograd.grad(out, [x, y], m.ones_like(out), allow_unused=True)
        res.append([out.detach().numpy()] + [None if g is None else g.numpy() for g in gs])
    for a, b in zip(*res):
        if b is None:
            assert a is None or not a.any()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


def test_documented_conventions():
    x = cgrad.tensor([0.0, 0.0, 1.0], dtype=cgrad.float64, requires_grad=True)
    y = cgrad.tensor([-1.0, 2.0, 0.5], dtype=cgrad.float64, requires_grad=True)
    gx, gy = cgrad.autograd.grad(cgrad.xlogy(x, y).sum(), [x, y])
    assert gx.tolist()[0] == 0.0 and gy.tolist()[:2] == [0.0, 0.0]
    (g,) = cgrad.autograd.grad(cgrad.sinc(x).sum(), [x])
    assert g.tolist()[:2] == [0.0, 0.0]
    (g,) = cgrad.autograd.grad(cgrad.copysign(x, y).sum(), [x])
    assert g.tolist()[:2] == [0.0, 0.0]


# ----------------------------------------------------------------------------------------
# heaviside and the in-place forms
# ----------------------------------------------------------------------------------------
def test_heaviside_has_no_derivative_as_torch(torch):
    for m in (cgrad, torch):
        x = m.tensor([-1.0, 0.0, 2.0, math.nan], requires_grad=True)
        y = m.heaviside(x, m.tensor([0.5]))
        assert y.requires_grad and node_name(y) == "NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not "
                                               "implemented"):
            y.sum().backward()
    a = cgrad.heaviside(cgrad.tensor([-1.0, 0.0, 2.0, math.nan]), cgrad.tensor([0.5]))
    b = torch.heaviside(torch.tensor([-1.0, 0.0, 2.0, math.nan]), torch.tensor([0.5]))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


INPLACE = {
    **{n: (lambda t, n=n: getattr(t, n + "_")(), d) for n, d in [
        ("acos", "unit"), ("arccos", "unit"), ("asin", "unit"), ("arcsin", "unit"),
        ("atan", "wide"), ("arctan", "wide"), ("sinh", "wide"), ("cosh", "wide"),
        ("erf", "wide"), ("erfc", "wide"), ("erfinv", "unit"), ("logit", "prob"),
        ("sinc", "wide"), ("deg2rad", "wide"), ("rad2deg", "wide"), ("frac", "wide")]},
    "logit_eps": (lambda t: t.logit_(0.2), "real"),
    "atan2": (lambda t: t.atan2_(t.detach() * 0.5 + 1), "real"),
    "arctan2": (lambda t: t.arctan2_(t.detach() * 0.5 + 1), "real"),
    "hypot": (lambda t: t.hypot_(t.detach() * 0.5 + 1), "nonzero"),
    "xlogy": (lambda t: t.xlogy_(t.detach().abs() + 1), "real"),
    "xlogy_scalar": (lambda t: t.xlogy_(2.0), "real"),
    "copysign": (lambda t: t.copysign_(-1.0), "nonzero"),
    "lerp": (lambda t: t.lerp_(t.detach() * 2, 0.3), "real"),
    "lerp_tensor": (lambda t: t.lerp_(t.detach() * 2, t.detach().sigmoid()), "real"),
    "float_power": (lambda t: t.float_power_(2), "real"),
    "float_power_tensor": (lambda t: t.float_power_(t.detach().abs()), "positive"),
}


@pytest.mark.parametrize("key", list(INPLACE))
def test_inplace_matches_torch(key, torch):
    fn, dom = INPLACE[key]
    arr = arrays_for(Case(key, None, (S,), dom))[0]
    res = []
    for m in (cgrad, torch):
        x = m.tensor(arr, requires_grad=True)
        y = x * 1
        out = fn(y)
        assert out is y
        name = node_name(y)
        (g,) = m.autograd.grad(y, [x], m.ones_like(y))
        z = m.tensor(arr)
        fn(z)                                  # no autograd: written in place
        res.append((y.detach().numpy(), g.numpy(), name, z.numpy()))
    (yc, gc, nc, zc), (yt, gt, nt, zt) = res
    assert nc == nt
    np.testing.assert_allclose(yc, yt, rtol=1e-12)
    np.testing.assert_allclose(gc, gt, rtol=1e-12)
    np.testing.assert_allclose(zc, zt, rtol=1e-12)


@pytest.mark.parametrize("name", ["acosh", "arccosh", "asinh", "arcsinh", "atanh",
                                  "arctanh"])
def test_inplace_inverse_hyperbolic_backward_not_implemented_as_torch(name, torch):
    for m in (cgrad, torch):
        x = m.tensor([1.5, 2.0], dtype=m.float64, requires_grad=True)
        y = x * (0.25 if "tanh" in name else 1.0)
        getattr(y, name + "_")()
        base = name.replace("arc", "a")
        assert node_name(y) == base.capitalize() + "Backward1"
        with pytest.raises(NotImplementedError, match=f"the derivative for 'inplace version "
                                                      f"of {base}' is not implemented"):
            y.sum().backward()
    vals = [1.5, 2.0] if "cosh" in name else [0.25, 0.5]
    z = cgrad.tensor(vals)
    getattr(z, name + "_")()
    ref = getattr(np, name if name.startswith("arc") else "arc" + name[1:])
    np.testing.assert_allclose(z.numpy(), ref(np.array(vals, dtype=np.float32)))


INPLACE_ERRORS = {
    "erf_int": lambda m: m.tensor([1, 2]).erf_(),
    "frac_int": lambda m: m.tensor([1, 2]).frac_(),
    "atan2_int": lambda m: m.tensor([1, 2]).atan2_(m.tensor([1, 2])),
    "float_power_f32": lambda m: m.ones(3).float_power_(2),
    "float_power_int": lambda m: m.ones(3, dtype=m.int64).float_power_(2),
    "float_power_bcast": lambda m: m.ones(3, dtype=m.float64).float_power_(
        m.ones(2, 3, dtype=m.float64)),
    "lerp_bcast": lambda m: m.ones(3).lerp_(m.ones(2, 3), 0.5),
    "hypot_f64_into_f32": lambda m: m.ones(3).hypot_(m.ones(3, dtype=m.float64)),
    "leaf": lambda m: m.ones(3, requires_grad=True).erf_(),
}


@pytest.mark.parametrize("key", list(INPLACE_ERRORS))
def test_inplace_errors_match_torch(key, torch):
    _same(*[_outcome(lambda m=m: INPLACE_ERRORS[key](m)) for m in (cgrad, torch)])


def test_aliases_share_implementations():
    for a, b in [("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"),
                 ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh")]:
        assert getattr(cgrad, a).__wrapped__ is getattr(cgrad, b).__wrapped__


MULTI = [c for c in OPS if len(c.shapes) >= 2]


@pytest.mark.parametrize("case", MULTI, ids=[c.name for c in MULTI])
def test_saves_only_what_the_needed_gradients_use(case, torch):
    """With only input k requiring grad, modifying input j in place after the op makes
    backward raise exactly when torch's node saved input j."""
    arrays = arrays_for(case)
    n = len(arrays)
    for k in range(n):
        for j in range(n):
            if j == k:
                continue
            res = []
            for m in (cgrad, torch):
                xs = [m.tensor(a, requires_grad=(i == k)) for i, a in enumerate(arrays)]
                out = case.fn(m, *xs)
                with m.no_grad():
                    xs[j].mul_(1.0)
                try:
                    m.autograd.grad(out.sum(), [xs[k]])
                    res.append("ok")
                except RuntimeError as e:
                    res.append("modified" if "modified by an inplace" in str(e) else str(e))
            assert res[0] == res[1], (k, j, res)
