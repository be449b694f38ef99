"""Sorting and selection (cgrad/ops/sorting.py): sort, argsort, msort, topk, kthvalue,
median, nanmedian, mode, quantile, nanquantile; driven by one op table (OPS), as
tests/test_ops_reduce.py, whose per-row tests and inputs this file shares.

For every row of OPS (the differentiable output: the values):
* the forward equals a NumPy reference, in float32 and float64;
* gradcheck and gradgradcheck (float64) pass, except rows tagged "nondiff" (ties);
* values, vector-Jacobian products and second-order products equal torch's, ties included
  (the index torch returns among equal elements is reproduced: Note [Tie order]);
* the node name equals torch's; no graph is recorded under no_grad.

Then: the indices (against torch, on many random inputs with ties and NaNs, short and long
slices), the return types, dtypes, quantile's interpolation modes and q gradients, torch's
errors, and the fallback past the tie-order budget.
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
L20 = (2, 20)          # slices longer than 16: torch's unstable sorts differ from stable ones
ND = ("nondiff",)


def C(name, cg, ref, shapes, domain="real", node=None, tags=()):
    return Case(name, cg, ref, shapes, domain, node, None, tuple(tags))


# ----------------------------------------------------------------------------------------
# NumPy references
# ----------------------------------------------------------------------------------------
def _sorted(x, axis=-1, descending=False):
    s = np.sort(x, axis=axis)
    return np.flip(s, axis) if descending else s


def _topk(x, k, axis=-1, largest=True):
    s = _sorted(x, axis, largest)
    return np.take(s, np.arange(k), axis=axis)


def _lower_median(x, axis=None, keepdims=False):
    if axis is None:
        s = np.sort(x.reshape(-1))
        return s[(s.size - 1) // 2]
    s = np.sort(x, axis=axis)
    out = np.take(s, [(x.shape[axis] - 1) // 2], axis=axis)
    return out if keepdims else np.squeeze(out, axis)


def _mode_distinct(x, axis=-1):
    return np.min(x, axis=axis)      # all values distinct: each is as frequent, the smallest


def _q(m, x, values):
    return m.tensor(values, dtype=x.dtype)


# ----------------------------------------------------------------------------------------
# the op table
# ----------------------------------------------------------------------------------------
OPS = [
    # -- sort / msort ------------------------------------------------------------------
    C("sort_last", lambda m, x: x.sort().values, lambda x: _sorted(x), (S34,), "real",
      "SortBackward0"),
    C("sort_dim0_fn", lambda m, x: m.sort(x, 0)[0], lambda x: _sorted(x, 0), (S34,), "real",
      "SortBackward0"),
    C("sort_desc_3d", lambda m, x: x.sort(1, descending=True).values,
      lambda x: _sorted(x, 1, True), (T234,), "real", "SortBackward0"),
    C("sort_stable", lambda m, x: m.sort(x, dim=-1, stable=True).values, lambda x: _sorted(x),
      (S34,), "real", "SortBackward1"),
    C("sort_stable_desc", lambda m, x: x.sort(descending=True, stable=False).values,
      lambda x: _sorted(x, -1, True), (S34,), "real", "SortBackward1"),
    C("sort_ties", lambda m, x: x.sort(1).values, lambda x: _sorted(x, 1), (S34,), "ties",
      "SortBackward0", ND),
    C("sort_ties_long", lambda m, x: x.sort(-1).values, lambda x: _sorted(x), (L20,), "ties",
      "SortBackward0", ND),
    C("sort_ties_long_desc", lambda m, x: x.sort(-1, True).values,
      lambda x: _sorted(x, -1, True), (L20,), "ties", "SortBackward0", ND),
    C("sort_ties_long_stable", lambda m, x: x.sort(stable=True).values, lambda x: _sorted(x),
      (L20,), "ties", "SortBackward1", ND),
    C("sort_0d", lambda m, x: x.sort().values, lambda x: x, ((),), "real", "SortBackward0"),
    C("sort_times_values", lambda m, x: x.sort(0).values * x, lambda x: _sorted(x, 0) * x,
      (S34,), "real", "MulBackward0"),
    C("msort", lambda m, x: m.msort(x), lambda x: _sorted(x, 0), (S34,), "real",
      "SortBackward0"),
    C("msort_method", lambda m, x: x.msort(), lambda x: _sorted(x, 0), (T234,), "real",
      "SortBackward0"),
    # -- topk --------------------------------------------------------------------------
    C("topk", lambda m, x: x.topk(2).values, lambda x: _topk(x, 2), (S34,), "real",
      "TopkBackward0"),
    C("topk_dim0_smallest", lambda m, x: m.topk(x, 2, 0, largest=False).values,
      lambda x: _topk(x, 2, 0, False), (S34,), "real", "TopkBackward0"),
    C("topk_3d_all", lambda m, x: x.topk(3, dim=1).values, lambda x: _topk(x, 3, 1), (T234,),
      "real", "TopkBackward0"),
    C("topk_k0", lambda m, x: x.topk(0).values, lambda x: _topk(x, 0), (S34,), "real",
      "TopkBackward0"),
    C("topk_ties", lambda m, x: x.topk(3).values, lambda x: _topk(x, 3), (S34,), "ties",
      "TopkBackward0", ND),
    C("topk_ties_long", lambda m, x: x.topk(7).values, lambda x: _topk(x, 7), (L20,), "ties",
      "TopkBackward0", ND),
    C("topk_ties_long_smallest", lambda m, x: x.topk(12, largest=False).values,
      lambda x: _topk(x, 12, -1, False), (L20,), "ties", "TopkBackward0", ND),
    C("topk_0d", lambda m, x: x.topk(1).values, lambda x: x, ((),), "real", "TopkBackward0"),
    # -- kthvalue ----------------------------------------------------------------------
    C("kthvalue", lambda m, x: x.kthvalue(2).values, lambda x: _sorted(x)[:, 1], (S34,),
      "real", "KthvalueBackward0"),
    C("kthvalue_dim0_keepdim", lambda m, x: m.kthvalue(x, 3, 0, True)[0],
      lambda x: _sorted(x, 0)[2:3], (S34,), "real", "KthvalueBackward0"),
    C("kthvalue_ties_long", lambda m, x: x.kthvalue(9).values, lambda x: _sorted(x)[:, 8],
      (L20,), "ties", "KthvalueBackward0", ND),
    C("kthvalue_0d", lambda m, x: x.kthvalue(1).values, lambda x: x, ((),), "real",
      "KthvalueBackward0"),
    # -- median / nanmedian ------------------------------------------------------------
    C("median_all", lambda m, x: x.median(), _lower_median, (S34,), "real",
      "MedianBackward0"),
    C("median_all_fn", lambda m, x: m.median(x), _lower_median, (T234,), "real",
      "MedianBackward0"),
    C("median_all_ties", lambda m, x: x.median(), _lower_median, (S34,), "ties",
      "MedianBackward0", ND),
    C("median_dim", lambda m, x: x.median(1).values, lambda x: _lower_median(x, 1), (S34,),
      "real", "MedianBackward1"),
    C("median_dim_keepdim", lambda m, x: m.median(x, 0, keepdim=True).values,
      lambda x: _lower_median(x, 0, True), (T234,), "real", "MedianBackward1"),
    C("median_dim_ties", lambda m, x: x.median(-1).values, lambda x: _lower_median(x, -1),
      (L20,), "ties", "MedianBackward1", ND),
    C("median_0d", lambda m, x: x.median(), lambda x: x, ((),), "real", "MedianBackward0"),
    C("nanmedian_all", lambda m, x: x.nanmedian(), lambda x: _lower_median(x[~np.isnan(x)]),
      (S34,), "nan", "NanmedianBackward0"),
    C("nanmedian_dim", lambda m, x: x.nanmedian(0).values, lambda x: _lower_median(x, 0),
      (S34,), "real", "NanmedianBackward1"),
    C("nanmedian_dim_nan", lambda m, x: x.nanmedian(1).values,
      lambda x: np.array([_lower_median(r[~np.isnan(r)]) for r in x]), (S34,), "nan",
      "NanmedianBackward1"),
    C("median_all_nan", lambda m, x: x.median(), lambda x: np.float64(np.nan), (S34,), "nan",
      "MedianBackward0", ND),
    # -- mode --------------------------------------------------------------------------
    C("mode_distinct", lambda m, x: x.mode().values, _mode_distinct, (S34,), "real",
      "ModeBackward0"),
    C("mode_dim0_keepdim", lambda m, x: m.mode(x, 0, keepdim=True).values,
      lambda x: np.min(x, 0, keepdims=True), (S34,), "real", "ModeBackward0"),
    C("mode_ties", lambda m, x: x.mode(1).values,
      lambda x: np.array([_np_mode(r) for r in x]), (S34,), "ties", "ModeBackward0", ND),
    C("mode_ties_long", lambda m, x: x.mode().values,
      lambda x: np.array([_np_mode(r) for r in x]), (L20,), "ties", "ModeBackward0", ND),
    # -- quantile / nanquantile --------------------------------------------------------
    C("quantile_all", lambda m, x: x.quantile(0.3), lambda x: np.quantile(x, 0.3), (S34,),
      "real", "SqueezeBackward4"),
    C("quantile_dim", lambda m, x: m.quantile(x, 0.75, dim=1),
      lambda x: np.quantile(x, 0.75, axis=1), (S34,), "real", "SqueezeBackward4"),
    C("quantile_q_tensor_keepdim", lambda m, x: x.quantile(_q(m, x, [0.2, 0.5, 0.9]), 0, True),
      lambda x: np.quantile(x, [0.2, 0.5, 0.9], axis=0, keepdims=True), (T234,), "real",
      "SqueezeBackward4"),
    C("quantile_q_tensor_all", lambda m, x: m.quantile(x, _q(m, x, [0.1, 1.0])),
      lambda x: np.quantile(x, [0.1, 1.0]), (S34,), "real", "SqueezeBackward4"),
    C("quantile_all_keepdim", lambda m, x: x.quantile(0.4, keepdim=True),
      lambda x: np.quantile(x, 0.4, keepdims=True), (S34,), "real", "SqueezeBackward4"),
    C("quantile_0d_q", lambda m, x: x.quantile(_q(m, x, 0.6), dim=-1),
      lambda x: np.quantile(x, 0.6, axis=-1), (S34,), "real", "SqueezeBackward4"),
    C("quantile_lower", lambda m, x: x.quantile(0.4, 1, interpolation="lower"),
      lambda x: np.quantile(x, 0.4, axis=1, method="lower"), (S34,), "real",
      "SqueezeBackward4"),
    C("quantile_higher", lambda m, x: x.quantile(0.4, 1, interpolation="higher"),
      lambda x: np.quantile(x, 0.4, axis=1, method="higher"), (S34,), "real",
      "SqueezeBackward4"),
    C("quantile_midpoint", lambda m, x: x.quantile(_q(m, x, [0.3, 0.5]), interpolation="midpoint"),
      lambda x: np.quantile(x, [0.3, 0.5], method="midpoint"), (S34,), "real",
      "SqueezeBackward4"),
    C("quantile_nearest", lambda m, x: x.quantile(_q(m, x, [0.25, 0.5]), 1,
                                                  interpolation="nearest"),
      lambda x: np.quantile(x, [0.25, 0.5], axis=1, method="nearest"), (S34,), "real",
      "SqueezeBackward4"),
    C("quantile_ties", lambda m, x: x.quantile(0.5, 1), lambda x: np.quantile(x, 0.5, 1),
      (L20,), "ties", "SqueezeBackward4", ND),
    C("quantile_0d", lambda m, x: x.quantile(0.5), lambda x: x, ((),), "real",
      "SqueezeBackward4"),
    C("nanquantile", lambda m, x: x.nanquantile(0.3, 1), lambda x: np.nanquantile(x, 0.3, 1),
      (S34,), "nan", "SqueezeBackward4"),
    C("nanquantile_all_q_tensor", lambda m, x: m.nanquantile(x, _q(m, x, [0.5, 0.8])),
      lambda x: np.nanquantile(x, [0.5, 0.8]), (T234,), "nan", "SqueezeBackward4"),
    C("nanquantile_no_nan", lambda m, x: x.nanquantile(0.9, 0),
      lambda x: np.quantile(x, 0.9, 0), (S34,), "real", "SqueezeBackward4"),
    C("quantile_nan", lambda m, x: x.quantile(0.3, 1), lambda x: np.quantile(x, 0.3, 1),
      (S34,), "nan", "SqueezeBackward4", ND),
]


def _np_mode(r):
    vals, counts = np.unique(r, return_counts=True)
    return vals[np.argmax(counts)]


IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS), "duplicate case names"
DIFF = [c for c in OPS if "nondiff" not in c.tags and c.domain != "nan"]
DIFF_IDS = [c.name for c in DIFF]


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
    for a, b in zip(gc, gt):
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)[6:]
        _close(np_of(a), b.numpy(), dtype)


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
    y = run(case, cgrad, *cg_inputs(make_arrays(case)))
    assert node_name(y) == case.node
    assert node_name(run(case, torch, *th_inputs(torch, make_arrays(case)))) == case.node


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad_records_no_graph(case):
    xs = cg_inputs(make_arrays(case))
    with cgrad.no_grad():
        y = run(case, cgrad, *xs)
    assert y.grad_fn is None and not y.requires_grad
    y = run(case, cgrad, *cg_inputs(make_arrays(case), requires_grad=False))
    assert not y.requires_grad and y.grad_fn is None


# ----------------------------------------------------------------------------------------
# indices and values against torch: ties, NaNs, short and long slices
# ----------------------------------------------------------------------------------------
def _random_input(rng, trial):
    nd = int(rng.integers(1, 4))
    shape = [int(s) for s in rng.integers(1, 9, nd)]
    shape[-1] = int(rng.integers(17, 70)) if trial % 3 == 0 else int(rng.integers(1, 17))
    a = rng.integers(0, int(rng.integers(1, 6)), shape).astype(np.float64)
    if trial % 4 == 0:
        a.reshape(-1)[rng.integers(0, a.size, size=3)] = np.nan
    return a, int(rng.integers(-nd, nd))


SELECTIONS = {
    "sort": lambda m, x, d, k: x.sort(d),
    "sort_desc": lambda m, x, d, k: x.sort(d, descending=True),
    "sort_stable": lambda m, x, d, k: m.sort(x, dim=d, stable=True),
    "sort_stable_desc": lambda m, x, d, k: x.sort(dim=d, descending=True, stable=True),
    "argsort": lambda m, x, d, k: (x.argsort(d),),
    "argsort_desc_stable": lambda m, x, d, k: (m.argsort(x, dim=d, descending=True, stable=True),),
    "msort": lambda m, x, d, k: (m.msort(x),),
    "topk": lambda m, x, d, k: x.topk(k, d),
    "topk_smallest": lambda m, x, d, k: x.topk(k, d, largest=False),
    "topk_unsorted": lambda m, x, d, k: x.topk(k, d, sorted=False),
    "topk_smallest_unsorted": lambda m, x, d, k: x.topk(k, d, False, False),
    "kthvalue": lambda m, x, d, k: x.kthvalue(k, d),
    "kthvalue_keepdim": lambda m, x, d, k: x.kthvalue(k, d, True),
    "median": lambda m, x, d, k: (x.median(),),
    "median_dim": lambda m, x, d, k: x.median(d),
    "nanmedian": lambda m, x, d, k: (x.nanmedian(),),
    "nanmedian_dim": lambda m, x, d, k: x.nanmedian(d, keepdim=True),
    "mode": lambda m, x, d, k: x.mode(d),
    "quantile": lambda m, x, d, k: (x.quantile(0.35, d),),
    "nanquantile": lambda m, x, d, k: (x.nanquantile(0.35),),
}


def _same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_values_indices_and_gradients_match_torch_with_ties(name, torch):
    """Many random inputs with few distinct values (and NaNs): values, indices, node and
    gradient equal torch's, whichever of the equal elements torch picks."""
    fn = SELECTIONS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    for trial in range(60):
        a, d = _random_input(rng, trial)
        k = int(rng.integers(1, a.shape[d] + 1))
        xc, xt = cgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        rc, rt = fn(cgrad, xc, d, k), fn(torch, xt, d, k)
        assert type(rc).__name__ == type(rt).__name__
        for p, q in zip(rc, rt):
            assert str(p.dtype) == str(q.dtype)[6:]
            assert _same(np_of(p), q.detach().numpy()), (name, a.tolist(), d, k)
        if rc[0].requires_grad:
            assert node_name(rc[0]) == node_name(rt[0])
            v = rng.standard_normal(tuple(rt[0].shape))
            (gc,) = cgrad.autograd.grad(rc[0], xc, cgrad.tensor(v))
            (gt,) = torch.autograd.grad(rt[0], xt, torch.tensor(v))
            np.testing.assert_allclose(np_of(gc), gt.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64",
                                   "float16", "float32", "float64"])
def test_dtypes_match_torch(dtype, torch):
    a = np.array([[3, 1, 2, 2, 1], [0, 5, 5, 1, 5]])
    x = {cgrad: cgrad.tensor(a.astype(dtype)), torch: torch.tensor(a.astype(dtype))}
    for fn in (lambda m, x: x.sort(), lambda m, x: x.sort(dim=0, descending=True, stable=True),
               lambda m, x: (x.argsort(),), lambda m, x: (m.msort(x),),
               lambda m, x: x.topk(2), lambda m, x: x.kthvalue(2), lambda m, x: (x.median(),),
               lambda m, x: x.median(1), lambda m, x: (x.nanmedian(),),
               lambda m, x: x.nanmedian(0), lambda m, x: x.mode(),
               lambda m, x: (x.quantile(0.5),), lambda m, x: (x.nanquantile(0.5, dim=0),)):
        out = []
        for m in (cgrad, torch):
            try:
                out.append([(str(t.dtype).split(".")[-1], t.tolist()) for t in fn(m, x[m])])
            except (RuntimeError, NotImplementedError) as e:
                out.append((type(e).__name__, str(e)))
        assert out[0] == out[1]


def test_long_slices_and_many_ties(torch):
    """std::sort / nth_element / partial_sort paths of torch's kernels on long slices."""
    rng = np.random.default_rng(3)
    for n in (17, 100, 2000):
        a = rng.integers(0, 7, (3, n)).astype(np.float32)
        xc, xt = cgrad.tensor(a), torch.tensor(a)
        for desc in (False, True):
            assert np.array_equal(xc.sort(1, desc).indices.numpy(),
                                  xt.sort(1, desc).indices.numpy())
        for k in {1, 3, max(n // 64, 1), n // 2, n}:
            for largest in (True, False):
                for srt in (True, False):
                    assert np.array_equal(xc.topk(k, 1, largest, srt).indices.numpy(),
                                          xt.topk(k, 1, largest, srt).indices.numpy())
            assert np.array_equal(xc.kthvalue(k, 1).indices.numpy(),
                                  xt.kthvalue(k, 1).indices.numpy())
        assert np.array_equal(xc.mode(1).indices.numpy(), xt.mode(1).indices.numpy())


def test_past_the_budget_the_order_is_stable(monkeypatch):
    """Beyond _tie_order.BUDGET the ports are not run: equal elements keep their order (a
    valid order for torch's unstable sort, topk and kthvalue), values are unchanged."""
    from cgrad.ops import _tie_order
    a = np.random.default_rng(0).integers(0, 3, (4, 40)).astype(np.float64)
    ported = cgrad.tensor(a).sort(1)
    monkeypatch.setattr(_tie_order, "BUDGET", 10)
    plain = cgrad.tensor(a).sort(1)
    np.testing.assert_array_equal(plain.values.numpy(), ported.values.numpy())
    np.testing.assert_array_equal(plain.indices.numpy(), np.argsort(a, 1, kind="stable"))
    top = cgrad.tensor(a).topk(5, 1, sorted=False)
    np.testing.assert_array_equal(np.take_along_axis(a, top.indices.numpy(), 1),
                                  top.values.numpy())
    assert (top.values.numpy() == 2).all()


def test_tie_order_port_leaving_its_slice_falls_back(monkeypatch):
    from cgrad.ops import _tie_order, sorting

    def boom(values):
        raise _tie_order.Unguarded
    monkeypatch.setattr(_tie_order, "mode_of", boom)
    a = np.array([[1.0, np.nan, 1.0, 2.0]])
    r = sorting.mode(cgrad.tensor(a))
    assert r.values.item() == 1.0 and a[0, r.indices.item()] == 1.0


# ----------------------------------------------------------------------------------------
# return types and specific values
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,call", [
    ("sort", lambda x: x.sort()), ("topk", lambda x: x.topk(1)),
    ("kthvalue", lambda x: x.kthvalue(1)), ("median", lambda x: x.median(0)),
    ("nanmedian", lambda x: x.nanmedian(0)), ("mode", lambda x: x.mode()),
])
def test_named_tuples(name, call, torch):
    x = cgrad.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], requires_grad=True)
    r = call(x)
    assert type(r) is getattr(cgrad.return_types, name)
    assert type(r).__module__ == "cgrad.return_types" and type(r).__name__ == name
    assert r.values is r[0] and r.indices is r[1] and len(r) == 2
    assert r.indices.dtype == np.int64 and not r.indices.requires_grad
    assert repr(r).startswith(f"cgrad.return_types.{name}(\nvalues=tensor(")
    t = call(torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]]))
    assert type(t).__name__ == name and t._fields if hasattr(t, "_fields") else True
    np.testing.assert_array_equal(r.indices.numpy(), t.indices.numpy())


def test_median_is_the_lower_median_and_nan_wins():
    x = cgrad.tensor([4.0, 1.0, 3.0, 2.0])
    assert x.median().item() == 2.0
    y = cgrad.tensor([[1.0, np.nan, 3.0, np.nan], [1.0, 2.0, 3.0, 4.0]])
    r = y.median(1)
    assert np.isnan(r.values[0].item()) and r.indices.tolist() == [1, 1]
    assert cgrad.nanmedian(y, 1).values.tolist() == [1.0, 2.0]
    assert np.isnan(y.median().item()) and y.nanmedian().item() == 2.0
    assert np.isnan(cgrad.tensor([]).median().item())


def test_median_ties_share_the_gradient():
    x = cgrad.tensor([2.0, 1.0, 2.0, 3.0, 2.0], requires_grad=True)
    x.median().backward()
    np.testing.assert_allclose(np_of(x.grad), [1 / 3, 0, 1 / 3, 0, 1 / 3])
    x.grad = None
    x.median(0).values.backward()           # with a dim: the returned index only (the
    np.testing.assert_array_equal(np_of(x.grad), [0, 0, 1, 0, 0])    # stable order's)


def test_quantile_q_tensor_gradient(torch):
    """A q that requires grad gets torch's gradient (through the lerp weights)."""
    rng = np.random.default_rng(4)
    a, q = rng.standard_normal((3, 5)), np.array([0.1, 0.55, 0.9])
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        for fn in ("quantile", "nanquantile"):
            xc, qc = cgrad.tensor(a, requires_grad=True), cgrad.tensor(q, requires_grad=True)
            f = (lambda x, qq, fn=fn, kw=kw: getattr(x, fn)(qq, **kw))
            assert gradcheck(f, [xc, qc])
            assert gradgradcheck(f, [xc, qc])
            xt, qt = torch.tensor(a, requires_grad=True), torch.tensor(q, requires_grad=True)
            yc, yt = getattr(xc, fn)(qc, **kw), getattr(xt, fn)(qt, **kw)
            v = rng.standard_normal(tuple(yt.shape))
            gc = cgrad.autograd.grad(yc, [xc, qc], cgrad.tensor(v))
            gt = torch.autograd.grad(yt, [xt, qt], torch.tensor(v))
            for g1, g2 in zip(gc, gt):
                np.testing.assert_allclose(np_of(g1), g2.numpy(), rtol=1e-12, atol=1e-12)


def test_quantile_modes_match_torch_with_ties_and_nans(torch):
    rng = np.random.default_rng(5)
    for trial in range(30):
        a = rng.integers(0, 4, (3, int(rng.integers(1, 30)))).astype(np.float32)
        if trial % 3 == 0:
            a[rng.integers(0, 3), 0] = np.nan
        q = np.sort(rng.uniform(0, 1, 4)).astype(np.float32)
        for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
            for fn in ("quantile", "nanquantile"):
                for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
                    yc = getattr(cgrad.tensor(a), fn)(cgrad.tensor(q), interpolation=mode,
                                                      **kw)
                    yt = getattr(torch.tensor(a), fn)(torch.tensor(q), interpolation=mode,
                                                      **kw)
                    np.testing.assert_allclose(yc.numpy(), yt.numpy(), rtol=1e-6,
                                               equal_nan=True)


def test_sort_gradient_is_a_scatter_with_double_backward():
    x = cgrad.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    v, _ = x.sort(1)
    (g,) = cgrad.autograd.grad((v * v * cgrad.tensor([[1.0, 10.0, 100.0]])).sum(), x,
                               create_graph=True)
    np.testing.assert_array_equal(np_of(g), [[600.0, 2.0, 40.0]])
    assert node_name(g) == "ScatterBackward0"
    (h,) = cgrad.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(np_of(h), [[200.0, 2.0, 20.0]])


# ----------------------------------------------------------------------------------------
# errors (torch's exception types and key phrases)
# ----------------------------------------------------------------------------------------
ERRORS = [
    ("topk_k_big", lambda m, x: x.topk(4), RuntimeError, "selected index k out of range"),
    ("topk_k_neg", lambda m, x: x.topk(-1), RuntimeError, "selected index k out of range"),
    ("topk_dim", lambda m, x: x.topk(1, dim=2), IndexError, "Dimension out of range"),
    ("topk_0d_k2", lambda m, x: x[0, 0].topk(2), RuntimeError,
     "selected index k out of range"),
    ("topk_bool", lambda m, x: (x > 0).topk(1), RuntimeError,
     "topk does not support bool dtypes on CPU"),
    ("topk_float_k", lambda m, x: x.topk(1.5), TypeError,
     r"topk\(\): argument 'k' \(position \d\) must be int, not float"),
    ("sort_dim", lambda m, x: x.sort(3), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)"),
    ("argsort_dim", lambda m, x: x.argsort(-3), IndexError, "Dimension out of range"),
    ("kthvalue_big", lambda m, x: x.kthvalue(4), RuntimeError,
     r"kthvalue\(\): selected number k out of range for dimension 1"),
    ("kthvalue_zero", lambda m, x: x.kthvalue(0, 0), RuntimeError,
     "selected number k out of range for dimension 0"),
    ("kthvalue_empty", lambda m, x: x[:0].kthvalue(1, 0), IndexError,
     r"kthvalue\(\): Expected reduction dim 0 to have non-zero size"),
    ("median_empty_dim", lambda m, x: x[:0].median(0), IndexError,
     r"median\(\): Expected reduction dim 0 to have non-zero size"),
    ("nanmedian_empty_dim", lambda m, x: x[:0].nanmedian(0), IndexError,
     r"median\(\): Expected reduction dim 0 to have non-zero size"),
    ("median_bool", lambda m, x: (x > 0).median(), NotImplementedError,
     "\"median_cpu\" not implemented for 'Bool'"),
    ("mode_empty", lambda m, x: x[:0].mode(0), IndexError,
     r"mode\(\): Expected reduction dim 0 to have non-zero size"),
    ("mode_dim", lambda m, x: x.mode(2), IndexError, "Dimension out of range"),
    ("quantile_int", lambda m, x: x.long().quantile(0.5), RuntimeError,
     r"quantile\(\) input tensor must be either float or double dtype"),
    ("quantile_q_out", lambda m, x: x.quantile(1.5), RuntimeError,
     r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"),
    ("quantile_q_values", lambda m, x: x.quantile(m.tensor([-0.1, 0.5], dtype=x.dtype)),
     RuntimeError, r"quantile\(\) q values must be in the range \[0, 1\]"),
    ("quantile_q_dtype", lambda m, x: x.quantile(m.tensor([0.1], dtype=m.float32)),
     RuntimeError, r"quantile\(\) q tensor must be same dtype as the input tensor"),
    ("quantile_q_2d", lambda m, x: x.quantile(m.tensor([[0.1]], dtype=x.dtype)),
     RuntimeError, r"quantile\(\) q must be a scalar or 1D tensor"),
    ("quantile_interpolation", lambda m, x: x.quantile(0.5, interpolation="foo"),
     RuntimeError, "interpolation must be one of linear, lower, higher, midpoint or "
                   "nearest, but got foo"),
    ("quantile_empty", lambda m, x: x[:0].quantile(0.5), RuntimeError,
     r"quantile\(\) input tensor must be non-empty"),
    ("quantile_dim", lambda m, x: x.quantile(0.5, dim=3), IndexError,
     "Dimension out of range"),
    ("nanquantile_q_out", lambda m, x: x.nanquantile(-0.5), RuntimeError,
     r"quantile\(\) q must be in the range \[0, 1\] but got -0.5"),
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


def test_empty_inputs_match_torch(torch):
    for fn in (lambda m, x: x.sort(0), lambda m, x: x.sort(1), lambda m, x: x.topk(0, 0),
               lambda m, x: x.median(1), lambda m, x: x.mode(1), lambda m, x: x.kthvalue(1, 1),
               lambda m, x: (x.argsort(0),), lambda m, x: (m.msort(x),)):
        rc, rt = fn(cgrad, cgrad.zeros(0, 3)), fn(torch, torch.zeros(0, 3))
        for p, q in zip(rc, rt):
            assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
