"""Structural and product ops of issue 17 (cgrad/ops/triangular.py, cgrad/ops/products.py,
cartesian_prod/rot90/diff in cgrad/ops/joining.py), driven by one table (OPS), against torch.

For every row, in float32 and float64: forward values, dtype, requires_grad and
vector-Jacobian products equal torch's; the node name is torch's (column `node`, itself
checked against torch); gradcheck and gradgradcheck pass in float64 (cgrad.autograd's) where
torch's op is twice differentiable, and the second-order gradient equals torch's (or raises
as torch's does); no graph is recorded under no_grad. Then: torch's errors for bad inputs
(type and message), dtype rules, views (diagonal), the in-place forms, tril_indices /
triu_indices, cdist's two paths (the matrix-product one for more than 25 rows) and its
gradient at zero distance, and cross's deprecated default dim.

Callables take the tensor module first (`cgrad` or `torch`); adding an op is one row.
"""
from __future__ import annotations

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
    node: str | None = None         # torch's node name of the output
    domain: Any = "real"            # "real" | "nonzero" | "positive", or one per input
    twice: bool = True              # torch's op is twice differentiable

    def __str__(self):
        return self.name


def _cross_dim1(m, x, y):
    return m.cross(x, y, dim=1)


OPS = [
    # -- triangles and diagonals -------------------------------------------------------
    Case("tril", lambda m, x: m.tril(x), ((3, 4),), "TrilBackward0"),
    Case("tril_pos", lambda m, x: x.tril(1), ((4, 3),), "TrilBackward0"),
    Case("tril_neg_batched", lambda m, x: m.tril(x, diagonal=-1), ((2, 3, 4),),
         "TrilBackward0"),
    Case("triu", lambda m, x: m.triu(x), ((3, 4),), "TriuBackward0"),
    Case("triu_batched", lambda m, x: x.triu(-1), ((2, 2, 3, 3),), "TriuBackward0"),
    Case("triu_big", lambda m, x: m.triu(x, 5), ((3, 4),), "TriuBackward0"),
    Case("diagonal", lambda m, x: m.diagonal(x), ((3, 4),), "DiagonalBackward0"),
    Case("diagonal_offset", lambda m, x: x.diagonal(1), ((3, 4),), "DiagonalBackward0"),
    Case("diagonal_neg_offset", lambda m, x: x.diagonal(-1), ((4, 3),), "DiagonalBackward0"),
    Case("diagonal_dims", lambda m, x: m.diagonal(x, 0, 2, 0), ((3, 2, 4),),
         "DiagonalBackward0"),
    Case("diagonal_dims_kw", lambda m, x: x.diagonal(offset=1, dim1=-1, dim2=1),
         ((2, 3, 4),), "DiagonalBackward0"),
    Case("diagonal_then_op", lambda m, x: m.diagonal(x, 0, -2, -1) * 2, ((2, 3, 3),),
         "MulBackward0"),
    Case("diag_vector", lambda m, x: m.diag(x), ((4,),), "DiagEmbedBackward0"),
    Case("diag_vector_offset", lambda m, x: x.diag(2), ((3,),), "DiagEmbedBackward0"),
    Case("diag_vector_neg", lambda m, x: m.diag(x, -1), ((3,),), "DiagEmbedBackward0"),
    Case("diag_matrix", lambda m, x: m.diag(x), ((3, 4),), "DiagonalBackward0_copy"),
    Case("diag_matrix_offset", lambda m, x: x.diag(-2), ((4, 3),), "DiagonalBackward0_copy"),
    Case("diag_embed", lambda m, x: m.diag_embed(x), ((2, 3),), "DiagEmbedBackward0"),
    Case("diag_embed_offset_dims", lambda m, x: x.diag_embed(1, 0, 2), ((2, 3),),
         "DiagEmbedBackward0"),
    Case("diag_embed_neg", lambda m, x: m.diag_embed(x, offset=-2, dim1=-1, dim2=0),
         ((2, 2, 3),), "DiagEmbedBackward0"),
    Case("trace", lambda m, x: m.trace(x), ((3, 4),), "TraceBackward0"),
    Case("trace_method", lambda m, x: x.trace(), ((4, 3),), "TraceBackward0"),
    # -- cross, cdist, cartesian_prod, rot90, diff --------------------------------------
    Case("cross", _cross_dim1, ((4, 3), (4, 3)), "LinalgCrossBackward0"),
    Case("cross_dim0", lambda m, x, y: x.cross(y, 0), ((3, 2), (3, 2)),
         "LinalgCrossBackward0"),
    Case("linalg_cross", lambda m, x, y: m.linalg.cross(x, y), ((2, 3), (2, 3)),
         "LinalgCrossBackward0"),
    Case("linalg_cross_bcast", lambda m, x, y: m.linalg.cross(x, y, dim=-1),
         ((2, 1, 3), (1, 4, 3)), "LinalgCrossBackward0"),
    Case("cdist", lambda m, x, y: m.cdist(x, y), ((3, 4), (5, 4)), "CdistBackward0",
         twice=False),
    Case("cdist_p1", lambda m, x, y: m.cdist(x, y, p=1), ((3, 4), (2, 4)), "CdistBackward0",
         twice=False),
    Case("cdist_p0.5", lambda m, x, y: m.cdist(x, y, 0.5), ((3, 4), (2, 4)),
         "CdistBackward0", twice=False),
    Case("cdist_p1.5", lambda m, x, y: m.cdist(x, y, 1.5), ((3, 4), (2, 4)),
         "CdistBackward0", twice=False),
    Case("cdist_p3", lambda m, x, y: m.cdist(x, y, 3.0), ((3, 4), (2, 4)), "CdistBackward0",
         twice=False),
    Case("cdist_pinf", lambda m, x, y: m.cdist(x, y, float("inf")), ((3, 4), (2, 4)),
         "CdistBackward0", twice=False),
    Case("cdist_p0", lambda m, x, y: m.cdist(x, y, 0), ((3, 4), (2, 4)), "CdistBackward0",
         twice=False),
    Case("cdist_batched", lambda m, x, y: m.cdist(x, y), ((2, 1, 3, 4), (5, 2, 4)),
         "CdistBackward0", twice=False),
    Case("cdist_no_mm_large", lambda m, x, y: m.cdist(
        x, y, compute_mode="donot_use_mm_for_euclid_dist"), ((27, 3), (2, 3)),
        "CdistBackward0", twice=False),
    Case("cdist_mm_large", lambda m, x, y: m.cdist(x, y), ((27, 3), (4, 3)),
         "ViewBackward0"),
    Case("cdist_mm_large_x2", lambda m, x, y: m.cdist(x, y), ((2, 3), (26, 3)),
         "ViewBackward0"),
    Case("cdist_mm_forced", lambda m, x, y: m.cdist(x, y,
                                                    compute_mode="use_mm_for_euclid_dist"),
         ((3, 4), (5, 4)), "ViewBackward0"),
    Case("cdist_mm_batched", lambda m, x, y: m.cdist(x, y), ((2, 26, 3), (1, 4, 3)),
         "ViewBackward0"),
    Case("cartesian_prod", lambda m, x, y: m.cartesian_prod(x, y), ((3,), (2,)),
         "StackBackward0"),
    Case("cartesian_prod_3", lambda m, x, y, z: m.cartesian_prod(x, y, z),
         ((2,), (3,), (2,)), "StackBackward0"),
    Case("rot90", lambda m, x: m.rot90(x), ((3, 4),), "Rot90Backward0"),
    Case("rot90_k2", lambda m, x: x.rot90(2), ((3, 4),), "Rot90Backward0"),
    Case("rot90_k3_dims", lambda m, x: m.rot90(x, 3, [2, 0]), ((2, 3, 4),), "Rot90Backward0"),
    Case("rot90_neg", lambda m, x: m.rot90(x, -1, (1, 2)), ((2, 3, 4),), "Rot90Backward0"),
    Case("rot90_k0", lambda m, x: m.rot90(x, 4), ((3, 4),), "Rot90Backward0"),
    Case("rot90_then_view", lambda m, x: m.rot90(x, 2).view(-1), ((3, 4),), "ViewBackward0"),
    Case("diff", lambda m, x: m.diff(x), ((3, 5),), "SubBackward0"),
    Case("diff_n2_dim0", lambda m, x: x.diff(2, 0), ((5, 3),), "SubBackward0"),
    Case("diff_prepend_append", lambda m, x, p, a: m.diff(x, 1, -1, p, a),
         ((3, 4), (3, 1), (3, 2)), "SubBackward0"),
    Case("diff_append_kw", lambda m, x, a: x.diff(n=3, dim=0, append=a), ((3, 2), (2, 2)),
         "SubBackward0"),
    Case("diff_n0", lambda m, x: m.diff(x, n=0), ((3, 4),), "CopyBackwards"),
    Case("diff_big_n", lambda m, x: m.diff(x, n=9), ((3, 4),), "SubBackward0"),
    # -- the add* family ---------------------------------------------------------------
    Case("addmm", lambda m, i, a, b: m.addmm(i, a, b), ((3, 4), (3, 2), (2, 4)),
         "AddmmBackward0"),
    Case("addmm_bcast_beta_alpha", lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=-2),
         ((4,), (3, 2), (2, 4)), "AddmmBackward0"),
    Case("addmm_beta0", lambda m, i, a, b: i.addmm(a, b, beta=0), ((3, 1), (3, 2), (2, 4)),
         "AddmmBackward0"),
    Case("addmm_0d", lambda m, i, a, b: m.addmm(i, a, b, alpha=3), ((), (3, 2), (2, 4)),
         "AddmmBackward0"),
    Case("addmv", lambda m, i, a, v: m.addmv(i, a, v), ((3,), (3, 2), (2,)),
         "AddmvBackward0"),
    Case("addmv_beta_alpha", lambda m, i, a, v: i.addmv(a, v, beta=2, alpha=0.5),
         ((1,), (3, 2), (2,)), "AddmvBackward0"),
    Case("addr", lambda m, i, a, b: m.addr(i, a, b), ((3, 4), (3,), (4,)), "AddrBackward0"),
    Case("addr_bcast_beta_alpha", lambda m, i, a, b: i.addr(a, b, beta=-1, alpha=2.5),
         ((4,), (3,), (4,)), "AddrBackward0"),
    Case("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b), ((2, 3, 4), (2, 3, 2), (2, 2, 4)),
         "BaddbmmBackward0"),
    Case("baddbmm_bcast", lambda m, i, a, b: i.baddbmm(a, b, beta=0.5, alpha=2),
         ((3, 1), (2, 3, 2), (2, 2, 4)), "BaddbmmBackward0"),
    Case("addbmm", lambda m, i, a, b: m.addbmm(i, a, b), ((3, 4), (2, 3, 2), (2, 2, 4)),
         "AddbmmBackward0"),
    Case("addbmm_bcast", lambda m, i, a, b: i.addbmm(a, b, beta=2, alpha=-1),
         ((4,), (3, 3, 2), (3, 2, 4)), "AddbmmBackward0"),
    Case("addcmul", lambda m, i, a, b: m.addcmul(i, a, b), ((3, 4), (3, 4), (3, 4)),
         "AddcmulBackward0"),
    Case("addcmul_bcast_value", lambda m, i, a, b: i.addcmul(a, b, value=-0.5),
         ((4,), (3, 1), (2, 1, 4)), "AddcmulBackward0"),
    Case("addcdiv", lambda m, i, a, b: m.addcdiv(i, a, b), ((3, 4), (3, 4), (3, 4)),
         "AddcdivBackward0", ("real", "real", "nonzero")),
    Case("addcdiv_bcast_value", lambda m, i, a, b: i.addcdiv(a, b, value=2),
         ((3, 1), (4,), (3, 4)), "AddcdivBackward0", ("real", "real", "nonzero")),
    # -- compositions ------------------------------------------------------------------
    Case("composite", lambda m, x, y: m.trace(m.addmm(x.tril(), x, y.diag_embed()[0])),
         ((3, 3), (2, 3)), "TraceBackward0"),
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
        elif dom == "positive":
            a = rng.uniform(0.5, 2.0, shape)
        else:
            a = rng.uniform(-1.5, 1.5, shape)
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


TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


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
        if b is None:
            assert a is None or not a.numpy().any()
            continue
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)[6:]
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL[dtype])


def _second_order(m, case, arrays):
    """The gradient of <grad(y, xs, v), w> w.r.t. xs (None entries for unused), or the
    exception the double backward raises."""
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    y = case.fn(m, *xs)
    v = m.tensor(np.random.default_rng(2).standard_normal(tuple(y.shape)))
    gs = m.autograd.grad(y, xs, v, create_graph=True, allow_unused=True)
    pairs = [(g, m.tensor(np.random.default_rng(3 + i).standard_normal(tuple(g.shape))))
             for i, g in enumerate(gs) if g is not None and g.requires_grad]
    if not pairs:
        return None
    s = sum((g * w).sum() for g, w in pairs)
    try:
        hs = m.autograd.grad(s, xs, allow_unused=True)
    except Exception as e:           # noqa: BLE001
        return (type(e).__name__, str(e))
    return [None if h is None else h.detach().numpy() for h in hs]


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_second_order_matches_torch(case, torch):
    arrays = arrays_for(case)
    got, want = _second_order(cgrad, case, arrays), _second_order(torch, case, arrays)
    if want is None or isinstance(want, tuple):
        assert got == want
        assert isinstance(want, tuple) == (not case.twice)
        return
    for a, b in zip(got, want):
        if b is None:
            assert a is None or not a.any()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradcheck(case):
    xs = cg(arrays_for(case))
    assert cgrad.autograd.gradcheck(lambda *a: case.fn(cgrad, *a), xs)


TWICE = [c for c in OPS if c.twice and c.name != "diff_big_n"]     # (an empty output)


@pytest.mark.parametrize("case", TWICE, ids=[c.name for c in TWICE])
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
# errors, dtypes and odd inputs (torch's outcome: the value and dtype, or the error's type
# and first line)
# ----------------------------------------------------------------------------------------
def _outcome(f):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f()
    except Exception as e:          # noqa: BLE001
        return type(e).__name__, str(e).split("\n")[0]
    if isinstance(out, (tuple, list)):
        return "seq", [_outcome(lambda o=o: o) for o in out]
    return (str(out.dtype).replace("torch.", "").replace("cgrad.", ""),
            out.detach().double().numpy())


def _same(a, b):
    assert a[0] == b[0], (a, b)
    if isinstance(a[1], str):
        assert a[1] == b[1].replace("torch.", "cgrad."), (a, b)
    elif a[0] == "seq":
        assert len(a[1]) == len(b[1])
        for p, q in zip(a[1], b[1]):
            _same(p, q)
    else:
        assert a[1].shape == b[1].shape, (a, b)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-6)


def O(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype or m.float32)


F64 = "float64"
CALLS = {
    # tril / triu
    "tril_1d": lambda m: m.tril(O(m, 3)),
    "tril_0d": lambda m: m.tril(m.tensor(1.0)),
    "tril_float_diagonal": lambda m: m.tril(O(m, 3, 4), 1.5),
    "tril_bool": lambda m: m.tril(O(m, 3, 4).bool()),
    "triu_int": lambda m: m.triu(m.arange(12).reshape(3, 4), -1),
    "triu_list": lambda m: m.triu([[1.0]]),
    # indices
    "tril_indices": lambda m: m.tril_indices(3, 4, 1),
    "triu_indices": lambda m: m.triu_indices(3, 4, -1),
    "tril_indices_default": lambda m: m.tril_indices(4, 3),
    "triu_indices_empty": lambda m: m.triu_indices(0, 3),
    "tril_indices_i32": lambda m: m.tril_indices(3, 3, dtype=m.int32),
    "tril_indices_float_dtype": lambda m: m.tril_indices(3, 3, dtype=m.float32),
    "tril_indices_i16": lambda m: m.tril_indices(3, 3, dtype=m.int16),
    "tril_indices_neg_row": lambda m: m.tril_indices(-1, 3),
    "triu_indices_neg_col": lambda m: m.triu_indices(2, -3),
    "tril_indices_float_row": lambda m: m.tril_indices(3.0, 3),
    "tril_indices_requires_grad": lambda m: m.tril_indices(3, 3, requires_grad=True),
    "triu_indices_big_offset": lambda m: m.triu_indices(3, 3, 5),
    "tril_indices_cpu": lambda m: m.tril_indices(2, 2, device="cpu"),
    "tril_indices_strided": lambda m: m.tril_indices(2, 2, layout=m.strided),
    "tril_indices_pinned": lambda m: m.tril_indices(2, 2, pin_memory=True),
    # diagonal / diag / diag_embed / trace
    "diagonal_1d": lambda m: m.diagonal(O(m, 3)),
    "diagonal_0d": lambda m: m.diagonal(m.tensor(1.0)),
    "diagonal_same_dims": lambda m: m.diagonal(O(m, 3, 4), 0, 1, 1),
    "diagonal_same_neg": lambda m: m.diagonal(O(m, 3, 4), 0, 1, -1),
    "diagonal_dim_oob": lambda m: m.diagonal(O(m, 3, 4), 0, 0, 2),
    "diagonal_offset_big": lambda m: m.diagonal(O(m, 3, 4), 10),
    "diagonal_int": lambda m: m.diagonal(m.arange(12).reshape(3, 4), -1),
    "diag_3d": lambda m: m.diag(O(m, 2, 3, 4)),
    "diag_0d": lambda m: m.diag(m.tensor(1.0)),
    "diag_offset_big": lambda m: m.diag(O(m, 3, 4), 10),
    "diag_bool": lambda m: m.diag(m.tensor([True, False])),
    "diag_embed_same": lambda m: m.diag_embed(O(m, 3, 4), 0, 1, 1),
    "diag_embed_0d": lambda m: m.diag_embed(m.tensor(1.0)),
    "diag_embed_oob": lambda m: m.diag_embed(O(m, 3, 4), 0, 0, 3),
    "diag_embed_int": lambda m: m.diag_embed(m.arange(6).reshape(2, 3), 1),
    "trace_3d": lambda m: m.trace(O(m, 2, 3, 4)),
    "trace_1d": lambda m: m.trace(O(m, 3)),
    "trace_int": lambda m: m.trace(m.arange(12).reshape(3, 4)),
    "trace_i32": lambda m: m.trace(m.arange(12, dtype=m.int32).reshape(3, 4)),
    "trace_bool": lambda m: m.trace(O(m, 3, 3).bool()),
    "trace_f16": lambda m: m.trace(O(m, 3, 3, dtype=m.float16)),
    "trace_empty": lambda m: m.trace(O(m, 0, 3)),
    # cross
    "cross_dtype": lambda m: m.linalg.cross(O(m, 3), O(m, 3, dtype=m.float64)),
    "cross_ndim": lambda m: m.linalg.cross(O(m, 3), O(m, 2, 3)),
    "cross_len": lambda m: m.linalg.cross(O(m, 4), O(m, 4)),
    "cross_len_dim0": lambda m: m.linalg.cross(O(m, 2, 3), O(m, 2, 3), dim=0),
    "cross_bcast_bad": lambda m: m.linalg.cross(O(m, 2, 3), O(m, 4, 3)),
    "cross_int": lambda m: m.linalg.cross(m.tensor([1, 2, 3]), m.tensor([4, 5, 7])),
    "cross_bool": lambda m: m.linalg.cross(O(m, 3).bool(), O(m, 3).bool()),
    "cross_dim_oob": lambda m: m.linalg.cross(O(m, 3), O(m, 3), dim=1),
    "cross_default_dim": lambda m: m.cross(m.arange(9.0).reshape(3, 3),
                                           m.arange(9.0).reshape(3, 3).flip(0)),
    "cross_default_dim_2x3": lambda m: m.cross(m.arange(6.0).reshape(2, 3),
                                               m.arange(6.0).reshape(2, 3).flip(1)),
    "cross_default_no3": lambda m: m.cross(O(m, 2, 4), O(m, 2, 4)),
    "cross_list": lambda m: m.cross([1.0, 2.0, 3.0], O(m, 3)),
    # cdist
    "cdist_1d": lambda m: m.cdist(O(m, 3), O(m, 3)),
    "cdist_cols": lambda m: m.cdist(O(m, 2, 3), O(m, 2, 4)),
    "cdist_neg_p": lambda m: m.cdist(O(m, 2, 3), O(m, 2, 3), p=-1),
    "cdist_int": lambda m: m.cdist(O(m, 2, 3, dtype=m.int64), O(m, 2, 3, dtype=m.int64)),
    "cdist_dtype": lambda m: m.cdist(O(m, 2, 3), O(m, 2, 3, dtype=m.float64)),
    "cdist_mode": lambda m: m.cdist(O(m, 2, 3), O(m, 2, 3), compute_mode="x"),
    "cdist_batch": lambda m: m.cdist(m.arange(24.0).reshape(2, 1, 3, 4),
                                     m.arange(40.0).reshape(5, 2, 4)),
    "cdist_batch_bad": lambda m: m.cdist(O(m, 2, 3, 4), O(m, 3, 2, 4)),
    "cdist_empty": lambda m: m.cdist(O(m, 0, 3), O(m, 2, 3)),
    "cdist_no_columns": lambda m: m.cdist(O(m, 2, 0), O(m, 3, 0)),
    "cdist_f16": lambda m: m.cdist(O(m, 2, 3, dtype=m.float16), O(m, 2, 3, dtype=m.float16)),
    "cdist_same_points_mm": lambda m: m.cdist(m.arange(90.0).reshape(30, 3) / 7,
                                              m.arange(90.0).reshape(30, 3) / 7),
    # cartesian_prod / rot90 / diff
    "cartesian_prod_2d": lambda m: m.cartesian_prod(O(m, 2, 2)),
    "cartesian_prod_dtype": lambda m: m.cartesian_prod(O(m, 2), O(m, 2, dtype=m.float64)),
    "cartesian_prod_none": lambda m: m.cartesian_prod(),
    "cartesian_prod_int": lambda m: m.cartesian_prod(m.arange(2), m.arange(3)),
    "rot90_one_dim": lambda m: m.rot90(O(m, 3, 4), 1, [0]),
    "rot90_1d": lambda m: m.rot90(O(m, 3)),
    "rot90_same": lambda m: m.rot90(O(m, 3, 4), 1, [1, -1]),
    "rot90_oob": lambda m: m.rot90(O(m, 3, 4), 1, [0, 2]),
    "rot90_int": lambda m: m.rot90(m.arange(6).reshape(2, 3), 3),
    "diff_neg_n": lambda m: m.diff(O(m, 3, 4), n=-1),
    "diff_0d": lambda m: m.diff(m.tensor(1.0)),
    "diff_prepend_dims": lambda m: m.diff(O(m, 3, 4), prepend=O(m, 4)),
    "diff_prepend_shape": lambda m: m.diff(O(m, 3, 4), dim=1, prepend=O(m, 2, 4)),
    "diff_prepend_scalar": lambda m: m.diff(O(m, 3, 4), prepend=1.0),
    "diff_bool": lambda m: m.diff(m.tensor([True, False, False, True])),
    "diff_int": lambda m: m.diff(m.tensor([1, 4, 9, 16]), 2),
    "diff_prepend_dtype": lambda m: m.diff(O(m, 3, 4), prepend=O(m, 3, 1, dtype=m.float64)),
    "diff_dim_oob": lambda m: m.diff(O(m, 3, 4), dim=2),
    "diff_n0_prepend": lambda m: m.diff(O(m, 3, 4), n=0, prepend=O(m, 3, 4)),
    # add* family
    "addmm_bcast_bad": lambda m: m.addmm(O(m, 3), O(m, 3, 2), O(m, 2, 4)),
    "addmm_mats_bad": lambda m: m.addmm(O(m, 4), O(m, 3, 2), O(m, 3, 4)),
    "addmm_dtype_mat2": lambda m: m.addmm(O(m, 4), O(m, 3, 2), O(m, 2, 4, dtype=m.float64)),
    "addmm_dtype_self": lambda m: m.addmm(O(m, 4, dtype=m.float64), O(m, 3, 2), O(m, 2, 4)),
    "addmm_dtype_mat1": lambda m: m.addmm(O(m, 4), O(m, 3, 2, dtype=m.float64), O(m, 2, 4)),
    "addmm_1d": lambda m: m.addmm(O(m, 4), O(m, 2), O(m, 2, 4)),
    "addmm_3d": lambda m: m.addmm(O(m, 4), O(m, 1, 3, 2), O(m, 2, 4)),
    "addmm_int": lambda m: m.addmm(O(m, 4, dtype=m.int64), O(m, 3, 2, dtype=m.int64),
                                   O(m, 2, 4, dtype=m.int64), alpha=2),
    "addmm_int_float_alpha": lambda m: m.addmm(O(m, 4, dtype=m.int64),
                                               O(m, 3, 2, dtype=m.int64),
                                               O(m, 2, 4, dtype=m.int64), alpha=2.5, beta=0.5),
    "addmm_bool": lambda m: m.addmm(O(m, 4).bool(), O(m, 3, 2).bool(), O(m, 2, 4).bool()),
    "addmm_beta0_nan": lambda m: m.addmm(m.full((4,), float("nan")), O(m, 3, 2), O(m, 2, 4),
                                         beta=0),
    "addmm_bool_alpha": lambda m: m.addmm(O(m, 4), O(m, 3, 2), O(m, 2, 4), alpha=True),
    "addmm_tensor_alpha": lambda m: m.addmm(O(m, 4), O(m, 3, 2), O(m, 2, 4),
                                            alpha=m.tensor(2.0)),
    "addmm_list": lambda m: m.addmm([1.0], O(m, 3, 2), O(m, 2, 4)),
    "addmv_bad": lambda m: m.addmv(O(m, 2), O(m, 3, 2), O(m, 2)),
    "addmv_vec_bad": lambda m: m.addmv(O(m, 3), O(m, 3, 2), O(m, 3)),
    "addmv_2d_vec": lambda m: m.addmv(O(m, 3), O(m, 3, 2), O(m, 2, 1)),
    "addmv_2d_self": lambda m: m.addmv(O(m, 3, 1), O(m, 3, 2), O(m, 2)),
    "addmv_dtype": lambda m: m.addmv(O(m, 3), O(m, 3, 2), O(m, 2, dtype=m.float64)),
    "addmv_self_dtype": lambda m: m.addmv(O(m, 3, dtype=m.float64), O(m, 3, 2), O(m, 2)),
    "addmv_beta0_nan": lambda m: m.addmv(m.full((3,), float("nan")), O(m, 3, 2), O(m, 2),
                                         beta=0),
    "addmv_int": lambda m: m.addmv(O(m, 3, dtype=m.int64), O(m, 3, 2, dtype=m.int64),
                                   O(m, 2, dtype=m.int64), beta=2),
    "addr_bad": lambda m: m.addr(O(m, 3, 5), O(m, 3), O(m, 4)),
    "addr_2d": lambda m: m.addr(O(m, 3, 4), O(m, 3, 1), O(m, 4)),
    "addr_dtype": lambda m: m.addr(O(m, 3, 4), O(m, 3), O(m, 4, dtype=m.float64)),
    "addr_self_dtype": lambda m: m.addr(O(m, 3, 4, dtype=m.float64), O(m, 3), O(m, 4)),
    "addr_bool": lambda m: m.addr(O(m, 3, 4).bool(), m.tensor([True, False, True]),
                                  m.tensor([False, True, True, False]), beta=False),
    "addr_int": lambda m: m.addr(O(m, 3, 4, dtype=m.int64), O(m, 3, dtype=m.int64),
                                 O(m, 4, dtype=m.int64), alpha=3),
    "addr_int_float_alpha": lambda m: m.addr(O(m, 3, 4, dtype=m.int64), O(m, 3, dtype=m.int64),
                                             O(m, 4, dtype=m.int64), alpha=2.5),
    "addr_float_bool_alpha": lambda m: m.addr(O(m, 3, 4), O(m, 3), O(m, 4), alpha=True),
    "addr_beta0_nan": lambda m: m.addr(m.full((3, 4), float("nan")), O(m, 3), O(m, 4), beta=0),
    "baddbmm_bad": lambda m: m.baddbmm(O(m, 5), O(m, 2, 3, 2), O(m, 2, 2, 4)),
    "baddbmm_batch_bad": lambda m: m.baddbmm(O(m, 4), O(m, 2, 3, 2), O(m, 3, 2, 4)),
    "baddbmm_inner_bad": lambda m: m.baddbmm(O(m, 4), O(m, 2, 3, 2), O(m, 2, 3, 4)),
    "baddbmm_2d": lambda m: m.baddbmm(O(m, 4), O(m, 3, 2), O(m, 2, 4)),
    "baddbmm_1d": lambda m: m.baddbmm(O(m, 4), O(m, 3), O(m, 2, 4)),
    "baddbmm_dtype": lambda m: m.baddbmm(O(m, 4), O(m, 2, 3, 2), O(m, 2, 2, 4, dtype=m.float64)),
    "baddbmm_self_dtype": lambda m: m.baddbmm(O(m, 4, dtype=m.float64), O(m, 2, 3, 2),
                                              O(m, 2, 2, 4)),
    "baddbmm_beta0_nan": lambda m: m.baddbmm(m.full((4,), float("nan")), O(m, 2, 3, 2),
                                             O(m, 2, 2, 4), beta=0),
    "addbmm_bad": lambda m: m.addbmm(O(m, 5), O(m, 2, 3, 2), O(m, 2, 2, 4)),
    "addbmm_2d": lambda m: m.addbmm(O(m, 4), O(m, 3, 2), O(m, 2, 4)),
    "addbmm_batch_bad": lambda m: m.addbmm(O(m, 4), O(m, 2, 3, 2), O(m, 3, 2, 4)),
    "addbmm_inner_bad": lambda m: m.addbmm(O(m, 4), O(m, 2, 3, 2), O(m, 2, 3, 4)),
    "addbmm_dtype": lambda m: m.addbmm(O(m, 4), O(m, 2, 3, 2), O(m, 2, 2, 4, dtype=m.float64)),
    "addbmm_self_dtype": lambda m: m.addbmm(O(m, 4, dtype=m.float64), O(m, 2, 3, 2),
                                            O(m, 2, 2, 4)),
    "addbmm_mat1_dtype": lambda m: m.addbmm(O(m, 4), O(m, 2, 3, 2, dtype=m.float64),
                                            O(m, 2, 2, 4)),
    "addbmm_beta0_nan": lambda m: m.addbmm(m.full((4,), float("nan")), O(m, 2, 3, 2),
                                           O(m, 2, 2, 4), beta=0),
    "addbmm_empty_batch": lambda m: m.addbmm(O(m, 3, 4), O(m, 0, 3, 2), O(m, 0, 2, 4)),
    "addcmul_promote": lambda m: m.addcmul(O(m, 3), O(m, 3, dtype=m.float64),
                                           O(m, 3, dtype=m.int64)),
    "addcmul_int": lambda m: m.addcmul(O(m, 3, dtype=m.int64), O(m, 3, dtype=m.int64),
                                       O(m, 3, dtype=m.int64), value=2),
    "addcmul_int_float_value": lambda m: m.addcmul(O(m, 3, dtype=m.int64),
                                                   O(m, 3, dtype=m.int64),
                                                   O(m, 3, dtype=m.int64), value=2.5),
    "addcmul_bool": lambda m: m.addcmul(O(m, 3).bool(), O(m, 3).bool(), O(m, 3).bool()),
    "addcmul_bcast": lambda m: m.addcmul(O(m, 3), O(m, 4), O(m, 3)),
    "addcmul_scalar": lambda m: m.addcmul(O(m, 3), O(m, 3), 2.0),
    "addcmul_0d": lambda m: m.addcmul(m.tensor(1.0), O(m, 3), O(m, 3, dtype=m.float64)),
    "addcmul_f16": lambda m: m.addcmul(O(m, 3, dtype=m.float16), O(m, 3), O(m, 3)),
    "addcmul_bool_value": lambda m: m.addcmul(O(m, 3), O(m, 3), O(m, 3), value=True),
    "addcdiv_int": lambda m: m.addcdiv(O(m, 3, dtype=m.int64), O(m, 3, dtype=m.int64),
                                       O(m, 3, dtype=m.int64)),
    "addcdiv_int_tensors": lambda m: m.addcdiv(O(m, 3), O(m, 3, dtype=m.int64),
                                               O(m, 3, dtype=m.int64)),
    "addcdiv_int_self": lambda m: m.addcdiv(O(m, 3, dtype=m.int64), O(m, 3), O(m, 3)),
    "addcdiv_value": lambda m: m.addcdiv(O(m, 3), O(m, 3), m.full((3,), 4.0), value=-2),
    "addcdiv_zero": lambda m: m.addcdiv(O(m, 3), O(m, 3), m.zeros(3)),
}


@pytest.mark.parametrize("key", list(CALLS))
def test_calls_and_errors_match_torch(key, torch):
    _same(*[_outcome(lambda m=m: CALLS[key](m)) for m in (cgrad, torch)])


# ----------------------------------------------------------------------------------------
# in-place forms
# ----------------------------------------------------------------------------------------
INPLACE = {
    "tril_": ((3, 4), lambda m, t: t.tril_()),
    "tril_k": ((2, 3, 4), lambda m, t: t.tril_(-1)),
    "triu_": ((3, 4), lambda m, t: t.triu_(diagonal=1)),
    "addmm_": ((3, 4), lambda m, t: t.addmm_(m.ones(3, 2), m.full((2, 4), 0.5), beta=2,
                                             alpha=0.5)),
    "addmm_kw": ((3, 4), lambda m, t: t.addmm_(mat1=m.ones(3, 2), mat2=m.ones(2, 4))),
    "addmv_": ((3,), lambda m, t: t.addmv_(m.ones(3, 2), m.ones(2), alpha=3)),
    "addr_": ((3, 4), lambda m, t: t.addr_(m.ones(3), m.full((4,), 2.0))),
    "baddbmm_": ((2, 3, 4), lambda m, t: t.baddbmm_(m.ones(2, 3, 2), m.ones(2, 2, 4))),
    "addbmm_": ((3, 4), lambda m, t: t.addbmm_(m.ones(2, 3, 2), m.ones(2, 2, 4), beta=0)),
    "addcmul_": ((3, 4), lambda m, t: t.addcmul_(m.ones(4), m.full((3, 1), 2.0), value=3)),
    "addcdiv_": ((3, 4), lambda m, t: t.addcdiv_(m.ones(4), m.full((3, 1), 2.0))),
}


def _inplace_run(m, shape, fn, requires_grad):
    arr = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7
    x = m.tensor(arr, requires_grad=requires_grad)
    y = x * 1 if requires_grad else x
    out = fn(m, y)
    assert out is y
    if not requires_grad:
        return y.numpy(), None, None
    (g,) = m.autograd.grad(y, [x], m.ones_like(y))
    return y.detach().numpy(), g.numpy(), node_name(y)


@pytest.mark.parametrize("key", list(INPLACE))
def test_inplace_matches_torch(key, torch):
    shape, fn = INPLACE[key]
    for rg in (False, True):
        a = _inplace_run(cgrad, shape, fn, rg)
        b = _inplace_run(torch, shape, fn, rg)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
        if rg:
            np.testing.assert_allclose(a[1], b[1], rtol=1e-6)
            assert a[2] == b[2]


INPLACE_ERRORS = {
    "addmm_shape": lambda m: m.ones(4).addmm_(m.ones(3, 2), m.ones(2, 4)),
    "addmv_shape": lambda m: m.ones(1).addmv_(m.ones(3, 2), m.ones(2)),
    "addmm_shape_row": lambda m: m.ones(1, 4).addmm_(m.ones(3, 2), m.ones(2, 4)),
    "addr_1d": lambda m: m.ones(4).addr_(m.ones(3), m.ones(4)),
    "addr_shape": lambda m: m.ones(3, 5).addr_(m.ones(3), m.ones(4)),
    "baddbmm_shape": lambda m: m.ones(3, 4).baddbmm_(m.ones(2, 3, 2), m.ones(2, 2, 4)),
    "baddbmm_shape_1d": lambda m: m.ones(4).baddbmm_(m.ones(2, 3, 2), m.ones(2, 2, 4)),
    "addcmul_bcast": lambda m: m.ones(3).addcmul_(m.ones(2, 3), m.ones(3)),
    "addcdiv_dtype": lambda m: m.ones(3).addcdiv_(m.ones(3, dtype=m.float64), m.ones(3)),
    "addcmul_int_into_float": lambda m: m.ones(3, dtype=m.int64).addcmul_(m.ones(3),
                                                                          m.ones(3)),
    "tril_1d": lambda m: m.ones(3).tril_(),
    "triu_leaf": lambda m: m.ones(3, 3, requires_grad=True).triu_(),
}


@pytest.mark.parametrize("key", list(INPLACE_ERRORS))
def test_inplace_errors_match_torch(key, torch):
    _same(*[_outcome(lambda m=m: INPLACE_ERRORS[key](m)) for m in (cgrad, torch)])


# ----------------------------------------------------------------------------------------
# diagonal is a view; cdist's paths; cross's default dim
# ----------------------------------------------------------------------------------------
def test_diagonal_is_a_view(torch):
    for m in (cgrad, torch):
        base = m.arange(12.0).reshape(3, 4)
        d = base.diagonal(1)
        assert d._base is base._base            # the root (base is a view of arange)
        base.add_(1.0)
        assert d.tolist() == [2.0, 7.0, 12.0]
        d.mul_(10.0)                                     # written through to the base
        assert base[0, 1].item() == 20.0
    x = cgrad.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = x * 1
    y.diagonal().mul_(3.0)                               # in place on a view: CopySlices
    assert node_name(y) == "CopySlices"
    (g,) = cgrad.autograd.grad(y.sum(), [x])
    assert g.numpy().tolist() == [[3, 1, 1, 1], [1, 3, 1, 1], [1, 1, 3, 1]]


def test_diagonal_of_a_broadcast_tensor(torch):
    """Its elements are distinct: writable, into the expanded tensor's storage (as torch);
    a diagonal whose elements overlap is refused, as torch."""
    for m in (cgrad, torch):
        o = m.ones(3)
        o.expand(3, 3).diagonal().add_(1.0)
        assert o.tolist() == [2.0, 2.0, 2.0]
        d = m.ones(1).expand(3, 3).diagonal()
        with pytest.raises(RuntimeError, match="more than one element of the written-to "
                                               "tensor refers to a single memory location"):
            d.add_(1.0)


def test_diag_of_a_matrix_is_a_copy():
    base = cgrad.arange(9.0).reshape(3, 3)
    d = cgrad.diag(base)
    d.add_(1.0)
    assert base.diagonal().tolist() == [0.0, 4.0, 8.0]


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_gradient_at_zero_distance_and_ties_matches_torch(p, torch):
    a = np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [0.5, -1.0, 2.0]])
    b = np.array([[0.0, 1.0, 2.0], [1.0, 2.0, 0.0]])            # a[0] == b[0], ties
    res = []
    for m in (cgrad, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        out = m.cdist(x, y, p=p)
        gs = m.autograd.grad(out, [x, y], m.tensor(np.arange(6.0).reshape(3, 2) - 2))
        res.append([out.detach().numpy()] + [g.numpy() for g in gs])
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_cdist_matrix_product_path_matches_torch_at_zero_distance(torch):
    """More than 25 rows: the product formula, with a zero subgradient where a distance is
    exactly 0, first and second order. (Small integers: the product is exact, so both
    libraries give exactly 0 for equal points; with other values the product's rounding
    depends on the BLAS library.)"""
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (30, 3)).astype(np.float64)
    b = np.concatenate([a[:3], rng.integers(-3, 4, (2, 3)) + 0.5])
    res = []
    for m in (cgrad, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        out = m.cdist(x, y)
        assert node_name(out) == "ViewBackward0"
        assert type(out.grad_fn.next_functions[0][0]).__name__ == "EuclideanDistBackward0"
        w = m.tensor(np.random.default_rng(2).standard_normal((30, 5)))
        gx, gy = m.autograd.grad(out, [x, y], w, create_graph=True)
        hx, hy = m.autograd.grad((gx * gx).sum() + gy.sum(), [x, y])
        res.append([t.detach().numpy() for t in (out, gx, gy, hx, hy)])
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-7, atol=1e-7)


def test_cdist_double_backward_raises_as_torch(torch):
    for m in (cgrad, torch):
        x = m.tensor(np.ones((3, 2)) * [[1.0], [2.0], [3.0]], requires_grad=True)
        y = m.tensor(np.zeros((2, 2)), requires_grad=True)
        (g,) = m.autograd.grad(m.cdist(x, y, p=3.0).sum(), [x], create_graph=True)
        assert node_name(g) == "CdistBackwardBackward0"
        with pytest.raises(NotImplementedError, match="the derivative for '_cdist_backward' "
                                                      "is not implemented"):
            g.sum().backward()


def test_cross_without_dim_warns_as_torch():
    """torch's message (torch warns once per process, TORCH_WARN_ONCE; cgrad warns through
    Python's filters, by default once per calling line)."""
    with pytest.warns(UserWarning) as rec:
        cgrad.cross(cgrad.ones(3, 3), cgrad.ones(3, 3))
    assert str(rec[0].message) == (
        "Using cgrad.cross without specifying the dim arg is deprecated.\n"
        "Please either pass the dim explicitly or simply use cgrad.linalg.cross.\n"
        "The default value of dim will change to agree with that of linalg.cross in a future "
        "release.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cgrad.cross(cgrad.ones(3, 3), cgrad.ones(3, 3), dim=1)


def test_cartesian_prod_of_one_tensor_is_that_tensor(torch):
    for m in (cgrad, torch):
        v = m.tensor([1.0, 2.0], requires_grad=True)
        assert m.cartesian_prod(v) is v


def test_rot90_layout_as_torch(torch):
    """An odd k gives a transposed (non-contiguous) result in torch: view() fails on it."""
    for m in (cgrad, torch):
        r = m.rot90(m.arange(12.0).reshape(3, 4))
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            r.view(-1)
        assert m.rot90(m.arange(12.0).reshape(3, 4), 2).view(-1).shape == (12,)


def test_linalg_cross_is_in_the_namespace():
    assert "cross" in cgrad.linalg.__all__
    out = cgrad.linalg.cross(cgrad.tensor([1.0, 0.0, 0.0]), cgrad.tensor([0.0, 1.0, 0.0]))
    assert out.tolist() == [0.0, 0.0, 1.0]


MULTI = [c for c in OPS if len(c.shapes) >= 2]


@pytest.mark.parametrize("case", MULTI, ids=[c.name for c in MULTI])
def test_saves_only_what_the_needed_gradients_use(case, torch):
    """With only input k requiring grad, modifying input j in place after the op makes
    backward raise exactly when torch's node saved input j (torch saves an input only for the
    gradients that need it)."""
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
                    xs[j].mul_(1.0)                 # a version bump, values unchanged
                try:
                    m.autograd.grad(out.sum(), [xs[k]])
                    res.append("ok")
                except RuntimeError as e:
                    res.append("modified" if "modified by an inplace" in str(e) else str(e))
            assert res[0] == res[1], (k, j, res)


@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_in_row_blocks_matches_torch(p, torch, monkeypatch):
    """Large inputs are computed in blocks of rows (bounded memory): same values and
    gradients."""
    from cgrad.ops import products
    monkeypatch.setattr(products, "_CHUNK", 50)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 7, 3)), rng.standard_normal((5, 3))
    res = []
    for m in (cgrad, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        out = m.cdist(x, y, p=p, compute_mode="donot_use_mm_for_euclid_dist")
        gs = m.autograd.grad(out.sum(), [x, y])
        res.append([out.detach().numpy()] + [g.numpy() for g in gs])
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)
