"""Core ops, driven by one table (OPS): arithmetic with broadcasting and Python scalars,
matmul in every arity, transposes, reductions, exp/log, reshape/view/expand and indexing.

For every row:
* the forward equals a NumPy reference, in float32 and float64, with the input's dtype;
* gradcheck and gradgradcheck (finite differences, float64) pass;
* forward values and vector-Jacobian products equal torch's for the same inputs
  (when torch is importable), and every gradient has its input's shape and dtype;
* no graph is recorded under cgrad.no_grad();
* the node name equals torch's where cgrad claims to mirror it (column `node`); the
  remaining name differences are collected by test_node_names_vs_torch_report.

Callables take the tensor module first (`cgrad` or `torch`), then the input tensors, so one
lambda usually serves both libraries; `th` overrides it for torch where torch's spelling
differs (negative slice steps). `ref` takes NumPy arrays.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


# ----------------------------------------------------------------------------------------
# the op table
# ----------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    cg: Callable                       # cg(module, *tensors)
    ref: Callable                      # ref(*ndarrays)
    shapes: tuple                      # one shape per tensor input
    domain: Any = "real"               # "real" | "positive" | "nonzero", or one per input
    node: str | None = None            # node name asserted (torch's, where cgrad mirrors it)
    th: Callable | None = None         # torch callable when it differs from cg
    tags: tuple = field(default=())

    def __str__(self):
        return self.name


MASK1 = np.array([True, False, True, True])
MASK2 = np.array([[True, False, True, False],
                  [False, False, True, True],
                  [True, True, False, False]])
ROWMASK = np.array([True, False, True])

S34 = (3, 4)

OPS = [
    # -- add ---------------------------------------------------------------------------
    Case("add", lambda m, x, y: x + y, lambda x, y: x + y, (S34, S34), node="AddBackward0"),
    Case("add_bcast_31_4", lambda m, x, y: x + y, lambda x, y: x + y, ((3, 1), (4,)),
         node="AddBackward0"),
    Case("add_bcast_234_4", lambda m, x, y: x + y, lambda x, y: x + y, ((2, 3, 4), (4,)),
         node="AddBackward0"),
    Case("add_0d_tensor", lambda m, x, y: x + y, lambda x, y: x + y, (S34, ()),
         node="AddBackward0"),
    Case("add_0d_0d", lambda m, x, y: x + y, lambda x, y: x + y, ((), ()),
         node="AddBackward0"),
    Case("add_scalar_right", lambda m, x: x + 2.5, lambda x: x + 2.5, (S34,),
         node="AddBackward0"),
    Case("add_scalar_left", lambda m, x: 2.5 + x, lambda x: 2.5 + x, (S34,),
         node="AddBackward0"),
    Case("add_int_scalar", lambda m, x: x + 3, lambda x: x + 3, (S34,), node="AddBackward0"),
    Case("add_fn", lambda m, x, y: m.add(x, y), lambda x, y: x + y, ((3, 1), (4,)),
         node="AddBackward0"),
    Case("add_fn_alpha", lambda m, x, y: m.add(x, y, alpha=2), lambda x, y: x + 2 * y,
         (S34, (4,))),
    # -- sub ---------------------------------------------------------------------------
    Case("sub", lambda m, x, y: x - y, lambda x, y: x - y, (S34, S34), node="SubBackward0"),
    Case("sub_bcast_31_4", lambda m, x, y: x - y, lambda x, y: x - y, ((3, 1), (4,)),
         node="SubBackward0"),
    Case("sub_bcast_4_234", lambda m, x, y: x - y, lambda x, y: x - y, ((4,), (2, 3, 4)),
         node="SubBackward0"),
    Case("sub_0d_tensor", lambda m, x, y: x - y, lambda x, y: x - y, ((), S34),
         node="SubBackward0"),
    Case("sub_scalar_right", lambda m, x: x - 2.5, lambda x: x - 2.5, (S34,),
         node="SubBackward0"),
    Case("sub_scalar_left", lambda m, x: 2.5 - x, lambda x: 2.5 - x, (S34,)),  # RsubBackward1
    # -- mul ---------------------------------------------------------------------------
    Case("mul", lambda m, x, y: x * y, lambda x, y: x * y, (S34, S34), node="MulBackward0"),
    Case("mul_bcast_31_4", lambda m, x, y: x * y, lambda x, y: x * y, ((3, 1), (4,)),
         node="MulBackward0"),
    Case("mul_bcast_234_4", lambda m, x, y: x * y, lambda x, y: x * y, ((2, 3, 4), (4,)),
         node="MulBackward0"),
    Case("mul_0d_tensor", lambda m, x, y: x * y, lambda x, y: x * y, (S34, ()),
         node="MulBackward0"),
    Case("mul_self", lambda m, x: x * x, lambda x: x * x, (S34,), node="MulBackward0"),
    Case("mul_scalar_right", lambda m, x: x * 2.5, lambda x: x * 2.5, (S34,),
         node="MulBackward0"),
    Case("mul_scalar_left", lambda m, x: 2.5 * x, lambda x: 2.5 * x, (S34,),
         node="MulBackward0"),
    Case("mul_0d_scalar", lambda m, x: x * 2.5, lambda x: x * 2.5, ((),), node="MulBackward0"),
    # -- div ---------------------------------------------------------------------------
    Case("div", lambda m, x, y: x / y, lambda x, y: x / y, (S34, S34),
         ("real", "nonzero"), node="DivBackward0"),
    Case("div_bcast_31_4", lambda m, x, y: x / y, lambda x, y: x / y, ((3, 1), (4,)),
         ("real", "nonzero"), node="DivBackward0"),
    Case("div_bcast_4_234", lambda m, x, y: x / y, lambda x, y: x / y, ((4,), (2, 3, 4)),
         ("real", "nonzero"), node="DivBackward0"),
    Case("div_0d_tensor", lambda m, x, y: x / y, lambda x, y: x / y, (S34, ()),
         ("real", "nonzero"), node="DivBackward0"),
    Case("div_scalar_right", lambda m, x: x / 2.5, lambda x: x / 2.5, (S34,),
         node="DivBackward0"),
    Case("div_scalar_left", lambda m, x: 2.5 / x, lambda x: 2.5 / x, (S34,), "nonzero"),
    # -- pow ---------------------------------------------------------------------------
    Case("pow_tensor_tensor", lambda m, x, y: x ** y, lambda x, y: x ** y, (S34, S34),
         ("positive", "real")),                                          # PowBackward1
    Case("pow_tensor_bcast", lambda m, x, y: x ** y, lambda x, y: x ** y, ((3, 1), (4,)),
         ("positive", "real")),
    Case("pow_0d_exponent", lambda m, x, y: x ** y, lambda x, y: x ** y, (S34, ()),
         ("positive", "real")),
    Case("pow_scalar_2", lambda m, x: x ** 2, lambda x: x ** 2, (S34,), node="PowBackward0"),
    Case("pow_scalar_3", lambda m, x: x ** 3, lambda x: x ** 3, (S34,), node="PowBackward0"),
    Case("pow_scalar_2.0", lambda m, x: x ** 2.0, lambda x: x ** 2.0, (S34,),
         node="PowBackward0"),
    Case("pow_scalar_0.5", lambda m, x: x ** 0.5, lambda x: x ** 0.5, (S34,), "positive",
         node="PowBackward0"),
    Case("pow_scalar_neg1.5", lambda m, x: x ** -1.5, lambda x: x ** -1.5, (S34,), "positive",
         node="PowBackward0"),
    Case("pow_scalar_0", lambda m, x: x ** 0, lambda x: x ** 0, (S34,), node="PowBackward0"),
    Case("pow_scalar_1", lambda m, x: x ** 1, lambda x: x ** 1, (S34,), node="PowBackward0"),
    Case("pow_fn", lambda m, x: m.pow(x, 2.0), lambda x: x ** 2.0, (S34,),
         node="PowBackward0"),
    Case("rpow_2", lambda m, x: 2 ** x, lambda x: 2 ** x, (S34,)),       # PowBackward2
    Case("rpow_2.5", lambda m, x: 2.5 ** x, lambda x: 2.5 ** x, (S34,)),
    Case("rpow_0d", lambda m, x: 2.5 ** x, lambda x: 2.5 ** x, ((),)),
    # -- neg ---------------------------------------------------------------------------
    Case("neg", lambda m, x: -x, lambda x: -x, (S34,), node="NegBackward0"),
    Case("neg_method", lambda m, x: x.neg(), lambda x: -x, ((2, 3, 4),), node="NegBackward0"),
    Case("neg_0d", lambda m, x: m.neg(x), lambda x: -x, ((),), node="NegBackward0"),
    # -- exp / log ---------------------------------------------------------------------
    Case("exp", lambda m, x: x.exp(), np.exp, (S34,), node="ExpBackward0"),
    Case("exp_fn_0d", lambda m, x: m.exp(x), np.exp, ((),), node="ExpBackward0"),
    Case("log", lambda m, x: x.log(), np.log, (S34,), "positive", node="LogBackward0"),
    Case("log_fn", lambda m, x: m.log(x), np.log, ((2, 3, 4),), "positive",
         node="LogBackward0"),
    Case("composite", lambda m, x, y: ((x * y).exp() + y.log() / x) ** 2,
         lambda x, y: (np.exp(x * y) + np.log(y) / x) ** 2, ((3, 1), (4,)),
         ("nonzero", "positive"), node="PowBackward0"),
    # -- matmul ------------------------------------------------------------------------
    Case("matmul_1d_1d", lambda m, x, y: x @ y, np.matmul, ((3,), (3,))),  # DotBackward0
    Case("matmul_2d_1d", lambda m, x, y: x @ y, np.matmul, ((2, 3), (3,))),  # MvBackward0
    Case("matmul_1d_2d", lambda m, x, y: x @ y, np.matmul, ((3,), (3, 2))),
    Case("matmul_2d_2d", lambda m, x, y: x @ y, np.matmul, ((2, 3), (3, 4)),
         node="MmBackward0"),
    Case("matmul_fn_2d_2d", lambda m, x, y: m.matmul(x, y), np.matmul, ((2, 3), (3, 4)),
         node="MmBackward0"),
    Case("matmul_3d_3d", lambda m, x, y: x @ y, np.matmul, ((2, 2, 3), (2, 3, 4))),
    Case("matmul_bcast_batch", lambda m, x, y: x @ y, np.matmul, ((2, 1, 3, 4), (5, 4, 2))),
    Case("matmul_3d_1d", lambda m, x, y: x @ y, np.matmul, ((2, 3, 4), (4,))),
    Case("matmul_1d_3d", lambda m, x, y: x @ y, np.matmul, ((3,), (2, 3, 4))),
    Case("matmul_3d_2d", lambda m, x, y: x.matmul(y), np.matmul, ((2, 3, 4), (4, 2))),
    Case("matmul_self", lambda m, x: x @ x, lambda x: x @ x, ((3, 3),), node="MmBackward0"),
    Case("mm", lambda m, x, y: m.mm(x, y), np.matmul, ((2, 3), (3, 4)), node="MmBackward0"),
    Case("mm_method", lambda m, x, y: x.mm(y), np.matmul, ((3, 1), (1, 2)),
         node="MmBackward0"),
    Case("mv", lambda m, x, y: m.mv(x, y), np.matmul, ((2, 3), (3,))),
    Case("mv_method", lambda m, x, y: x.mv(y), np.matmul, ((4, 3), (3,))),
    Case("dot", lambda m, x, y: m.dot(x, y), np.dot, ((5,), (5,))),
    Case("dot_method", lambda m, x, y: x.dot(y), np.dot, ((3,), (3,))),
    # -- transposes --------------------------------------------------------------------
    Case("t_2d", lambda m, x: x.t(), lambda x: x.T, (S34,), node="TBackward0"),
    Case("t_1d", lambda m, x: x.t(), lambda x: x.T, ((4,),), node="TBackward0"),
    Case("t_fn", lambda m, x: m.t(x), lambda x: x.T, ((2, 3),), node="TBackward0"),
    Case("transpose_01", lambda m, x: x.transpose(0, 1), lambda x: x.swapaxes(0, 1), (S34,)),
    Case("transpose_3d_neg", lambda m, x: x.transpose(-1, 0), lambda x: x.swapaxes(-1, 0),
         ((2, 3, 4),)),
    Case("transpose_fn_same", lambda m, x: m.transpose(x, 1, 1), lambda x: x, ((2, 3),)),
    Case("t_then_mm", lambda m, x, y: x.t() @ y, lambda x, y: x.T @ y, ((3, 2), (3, 4)),
         node="MmBackward0"),
    # -- sum ---------------------------------------------------------------------------
    Case("sum_all", lambda m, x: x.sum(), np.sum, ((2, 3, 4),), node="SumBackward0"),
    Case("sum_all_fn", lambda m, x: m.sum(x), np.sum, (S34,), node="SumBackward0"),
    Case("sum_0d", lambda m, x: x.sum(), np.sum, ((),), node="SumBackward0"),
    Case("sum_dim0", lambda m, x: x.sum(0), lambda x: x.sum(0), ((2, 3, 4),)),  # SumBackward1
    Case("sum_dim_neg", lambda m, x: x.sum(-1), lambda x: x.sum(-1), ((2, 3, 4),)),
    Case("sum_keepdim", lambda m, x: x.sum(1, keepdim=True),
         lambda x: x.sum(1, keepdims=True), ((2, 3, 4),)),
    Case("sum_dims_tuple", lambda m, x: x.sum((0, 2)), lambda x: x.sum((0, 2)), ((2, 3, 4),)),
    Case("sum_dims_tuple_neg_keepdim", lambda m, x: x.sum((-1, 0), keepdim=True),
         lambda x: x.sum((-1, 0), keepdims=True), ((2, 3, 4),)),
    Case("sum_dim_kw", lambda m, x: m.sum(x, dim=1), lambda x: x.sum(1), (S34,)),
    Case("sum_0d_dim0", lambda m, x: x.sum(0), lambda x: x, ((),)),
    Case("sum_1d_dim0", lambda m, x: x.sum(0), lambda x: x.sum(0), ((4,),)),
    Case("sum_of_square", lambda m, x: (x * x).sum(), lambda x: (x * x).sum(), (S34,),
         node="SumBackward0"),
    # -- mean --------------------------------------------------------------------------
    Case("mean_all", lambda m, x: x.mean(), np.mean, ((2, 3, 4),), node="MeanBackward0"),
    Case("mean_all_fn", lambda m, x: m.mean(x), np.mean, (S34,), node="MeanBackward0"),
    Case("mean_0d", lambda m, x: x.mean(), np.mean, ((),), node="MeanBackward0"),
    Case("mean_dim0", lambda m, x: x.mean(0), lambda x: x.mean(0), ((2, 3, 4),),
         node="MeanBackward1"),
    Case("mean_dim_neg", lambda m, x: x.mean(-1), lambda x: x.mean(-1), ((2, 3, 4),),
         node="MeanBackward1"),
    Case("mean_keepdim", lambda m, x: x.mean(1, keepdim=True),
         lambda x: x.mean(1, keepdims=True), ((2, 3, 4),), node="MeanBackward1"),
    Case("mean_dims_tuple", lambda m, x: x.mean((0, 2)), lambda x: x.mean((0, 2)),
         ((2, 3, 4),), node="MeanBackward1"),
    Case("mean_dims_tuple_neg_keepdim", lambda m, x: x.mean((-1, -3), keepdim=True),
         lambda x: x.mean((-1, -3), keepdims=True), ((2, 3, 4),), node="MeanBackward1"),
    # -- reshape / view / expand -------------------------------------------------------
    Case("reshape_flat", lambda m, x: x.reshape(-1), lambda x: x.reshape(-1), (S34,)),
    Case("reshape_infer", lambda m, x: x.reshape(2, -1), lambda x: x.reshape(2, -1),
         ((2, 3, 4),)),
    Case("reshape_tuple", lambda m, x: x.reshape((4, 3)), lambda x: x.reshape(4, 3), (S34,)),
    Case("reshape_fn", lambda m, x: m.reshape(x, (6, 2)), lambda x: x.reshape(6, 2), (S34,)),
    Case("reshape_0d", lambda m, x: x.reshape(1, 1), lambda x: x.reshape(1, 1), ((),)),
    Case("reshape_to_0d", lambda m, x: x.reshape(()), lambda x: x.reshape(()), ((1,),)),
    Case("reshape_noncontig", lambda m, x: x.t().reshape(-1), lambda x: x.T.reshape(-1),
         (S34,)),
    Case("view_flat", lambda m, x: x.view(-1), lambda x: x.reshape(-1), (S34,),
         node="ViewBackward0"),
    Case("view_infer", lambda m, x: x.view(3, -1, 2), lambda x: x.reshape(3, -1, 2),
         ((2, 3, 4),), node="ViewBackward0"),
    Case("view_tuple", lambda m, x: x.view((2, 6)), lambda x: x.reshape(2, 6), (S34,),
         node="ViewBackward0"),
    Case("expand_31", lambda m, x: x.expand(3, 4), lambda x: np.broadcast_to(x, (3, 4)),
         ((3, 1),)),
    Case("expand_new_dims", lambda m, x: x.expand(2, 3, 4),
         lambda x: np.broadcast_to(x, (2, 3, 4)), ((4,),)),
    Case("expand_minus1", lambda m, x: x.expand(2, -1, 4),
         lambda x: np.broadcast_to(x, (2, 3, 4)), ((3, 1),)),
    Case("expand_0d", lambda m, x: x.expand(3), lambda x: np.broadcast_to(x, (3,)), ((),)),
    Case("expand_as_mul", lambda m, x, y: x.expand_as(y) * y, lambda x, y: x * y,
         ((3, 1), S34), node="MulBackward0"),
    # -- indexing ----------------------------------------------------------------------
    Case("getitem_int", lambda m, x: x[1], lambda x: x[1], (S34,)),
    Case("getitem_neg_int", lambda m, x: x[-1], lambda x: x[-1], (S34,)),
    Case("getitem_int_int", lambda m, x: x[1, -2], lambda x: x[1, -2], (S34,)),
    Case("getitem_slice", lambda m, x: x[1:3], lambda x: x[1:3], (S34,)),
    Case("getitem_slice_step", lambda m, x: x[:, ::2], lambda x: x[:, ::2], (S34,)),
    Case("getitem_slice_col", lambda m, x: x[:, 1], lambda x: x[:, 1], (S34,)),
    Case("getitem_ellipsis", lambda m, x: x[..., 0], lambda x: x[..., 0], ((2, 3, 4),)),
    Case("getitem_ellipsis_mid", lambda m, x: x[1, ..., 1:], lambda x: x[1, ..., 1:],
         ((2, 3, 4),)),
    Case("getitem_none", lambda m, x: x[None], lambda x: x[None], (S34,)),
    Case("getitem_none_combo", lambda m, x: x[:, None, 1:], lambda x: x[:, None, 1:], (S34,)),
    Case("getitem_0d_none", lambda m, x: x[None], lambda x: x[None], ((),)),
    Case("getitem_0d_ellipsis", lambda m, x: x[...], lambda x: x[...], ((),)),
    Case("getitem_neg_step", lambda m, x: x[::-1], lambda x: x[::-1], (S34,),
         th=lambda m, x: x.flip(0)),
    Case("getitem_neg_step2", lambda m, x: x[1, ::-2], lambda x: x[1, ::-2], (S34,),
         th=lambda m, x: x[1].flip(0)[::2]),
    Case("getitem_neg_step_then_op", lambda m, x: x[:, ::-1] * x, lambda x: x[:, ::-1] * x,
         (S34,), th=lambda m, x: x.flip(1) * x, node="MulBackward0"),
    Case("getitem_intlist_repeat", lambda m, x: x[[0, 0, 2]], lambda x: x[[0, 0, 2]], (S34,)),
    Case("getitem_inttensor_repeat", lambda m, x: x[m.tensor([2, 0, 2, 2])],
         lambda x: x[[2, 0, 2, 2]], (S34,)),
    Case("getitem_int2d_tensor", lambda m, x: x[m.tensor(np.array([[0, 1], [1, 1]]))],
         lambda x: x[np.array([[0, 1], [1, 1]])], (S34,)),
    Case("getitem_pairs_repeat", lambda m, x: x[[0, 0, 1], [3, 3, 0]],
         lambda x: x[[0, 0, 1], [3, 3, 0]], (S34,)),
    Case("getitem_negative_indices", lambda m, x: x[[-1, 0, -1]], lambda x: x[[-1, 0, -1]],
         (S34,)),
    Case("getitem_mask_1d", lambda m, x: x[m.tensor(MASK1)], lambda x: x[MASK1], ((4,),)),
    Case("getitem_mask_2d", lambda m, x: x[m.tensor(MASK2)], lambda x: x[MASK2], (S34,)),
    Case("getitem_mask_rows", lambda m, x: x[m.tensor(ROWMASK)], lambda x: x[ROWMASK],
         (S34,)),
    Case("getitem_mask_slice", lambda m, x: x[m.tensor(ROWMASK), 1:],
         lambda x: x[ROWMASK, 1:], (S34,)),
    Case("getitem_slice_intlist", lambda m, x: x[1:, [0, 2, 2]], lambda x: x[1:, [0, 2, 2]],
         (S34,)),
    Case("getitem_ellipsis_intlist", lambda m, x: x[..., [1, 1]], lambda x: x[..., [1, 1]],
         ((2, 3, 4),)),
    Case("getitem_int_intlist", lambda m, x: x[1, [0, 0, 3]], lambda x: x[1, [0, 0, 3]],
         (S34,)),
    Case("getitem_none_intlist", lambda m, x: x[None, [0, 0]], lambda x: x[None, [0, 0]],
         (S34,)),
    Case("getitem_chain", lambda m, x: x[1:][:, [0, 0]][::2], lambda x: x[1:][:, [0, 0]][::2],
         ((4, 3),)),
    Case("getitem_sum_repeat", lambda m, x: (x[[0, 0, 0, 1]] * 2).sum(),
         lambda x: (x[[0, 0, 0, 1]] * 2).sum(), ((3,),), node="SumBackward0"),
]

IDS = [c.name for c in OPS]
assert len(set(IDS)) == len(IDS), "duplicate case names"

# Node names that cgrad claims to mirror (see the module docstring and the `node` column).
CLAIMED_NAMES = {"AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0",
                 "PowBackward0", "NegBackward0", "ExpBackward0", "LogBackward0",
                 "SumBackward0", "MeanBackward0", "MeanBackward1", "MmBackward0",
                 "TBackward0", "ViewBackward0"}


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
        if dom == "real":
            a = rng.uniform(-1.5, 1.5, shape)
        elif dom == "positive":
            a = rng.uniform(0.5, 2.0, shape)
        elif dom == "nonzero":
            a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            raise ValueError(dom)
        out.append(np.asarray(a, dtype=dtype))
    return out


def cg_inputs(arrays, requires_grad=True):
    return [cgrad.tensor(a, requires_grad=requires_grad) for a in arrays]


def th_inputs(torch, arrays, requires_grad=True):
    return [torch.tensor(a, requires_grad=requires_grad) for a in arrays]


def run_cg(case, *xs):
    return case.cg(cgrad, *xs)


def run_th(case, torch, *xs):
    return (case.th or case.cg)(torch, *xs)


def node_name(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


def np_of(t):
    return t.detach().numpy()


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# ----------------------------------------------------------------------------------------
# per-row tests
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_forward_matches_numpy(case, dtype):
    arrays = make_arrays(case, dtype)
    out = run_cg(case, *cg_inputs(arrays))
    expected = np.asarray(case.ref(*arrays))
    assert isinstance(out, cgrad.Tensor)
    assert tuple(out.shape) == expected.shape
    assert out.dtype == np.dtype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np_of(out), expected, **tol)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradcheck(lambda *a: run_cg(case, *a), xs)


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_gradgradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradgradcheck(lambda *a: run_cg(case, *a), xs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_grad_shape_dtype(case, dtype):
    xs = cg_inputs(make_arrays(case, dtype))
    out = run_cg(case, *xs)
    gs = cgrad.autograd.grad(out, xs, cgrad.ones_like(out), allow_unused=True)
    for x, g in zip(xs, gs):
        assert g is not None
        assert isinstance(g, cgrad.Tensor)
        assert tuple(g.shape) == tuple(x.shape)
        assert g.dtype == x.dtype
    # .backward() on a fresh graph fills .grad of every leaf with the same values
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
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    assert tuple(yc.shape) == tuple(yt.shape)
    assert str(yc.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), **tol)
    assert yc.requires_grad == yt.requires_grad
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(dtype)
    gc = cgrad.autograd.grad(yc, xc, cgrad.tensor(v), allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(v), allow_unused=True)
    for i, (a, b) in enumerate(zip(gc, gt)):
        assert (a is None) == (b is None), f"input {i}"
        if b is not None:
            assert tuple(a.shape) == tuple(b.shape)
            assert str(a.dtype) == str(b.dtype).replace("torch.", "")
            np.testing.assert_allclose(np_of(a), b.numpy(), **tol, err_msg=f"input {i}")


@pytest.mark.parametrize("case", [c for c in OPS if c.node], ids=[c.name for c in OPS if c.node])
def test_node_name(case):
    y = run_cg(case, *cg_inputs(make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", [c for c in OPS if c.node], ids=[c.name for c in OPS if c.node])
def test_node_name_table_agrees_with_torch(case, torch):
    """Sanity check of the `node` column itself."""
    y = run_th(case, torch, *th_inputs(torch, make_arrays(case)))
    assert node_name(y) == case.node


def test_node_names_vs_torch_report(torch):
    """Collect (not assert) every row where cgrad's outermost node name differs from torch's
    and the row makes no claim; emitted as one warning so it shows in pytest's summary."""
    diffs = []
    for case in OPS:
        arrays = make_arrays(case)
        a = node_name(run_cg(case, *cg_inputs(arrays)))
        b = node_name(run_th(case, torch, *th_inputs(torch, arrays)))
        if a != b and not case.node and case.th is None:
            diffs.append(f"{case.name}: cgrad {a} vs torch {b}")
    if diffs:
        warnings.warn("node names differing from torch (unclaimed):\n  " + "\n  ".join(diffs))


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_no_grad_records_no_graph(case):
    xs = cg_inputs(make_arrays(case))
    with cgrad.no_grad():
        y = run_cg(case, *xs)
    assert y.grad_fn is None
    assert not y.requires_grad
    assert y.is_leaf
    # and the same call outside no_grad does record one
    y = run_cg(case, *xs)
    assert y.requires_grad and y.grad_fn is not None


@pytest.mark.parametrize("case", OPS, ids=IDS)
def test_inputs_without_grad_give_leaf(case):
    y = run_cg(case, *cg_inputs(make_arrays(case), requires_grad=False))
    assert not y.requires_grad and y.grad_fn is None


# ----------------------------------------------------------------------------------------
# gradients: repeated indices add up, partial requires_grad
# ----------------------------------------------------------------------------------------
def test_repeated_index_gradients_accumulate():
    x = cgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    x[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), [3.0, 0.0, 1.0, 0.0])
    y = cgrad.tensor(np.ones((2, 3)), requires_grad=True)
    (y[[1, 1], [2, 2]] * cgrad.tensor([1.0, 10.0], dtype=cgrad.float64)).sum().backward()
    np.testing.assert_array_equal(np_of(y.grad), [[0, 0, 0], [0, 0, 11.0]])


def test_mixed_requires_grad_only_one_input():
    x = cgrad.tensor(np.ones((3, 1)), requires_grad=True)
    y = cgrad.tensor(np.arange(4.0))
    (x * y).sum().backward()
    assert y.grad is None
    np.testing.assert_array_equal(np_of(x.grad), np.full((3, 1), 6.0))


# ----------------------------------------------------------------------------------------
# dtype promotion (torch semantics); integer results never require grad
# ----------------------------------------------------------------------------------------
def _f32(m, s=(2,), rg=False):
    return m.tensor(np.full(s, 1.5, np.float32), requires_grad=rg)


def _f64(m, s=(2,), rg=False):
    return m.tensor(np.full(s, 1.5, np.float64), requires_grad=rg)


def _i64(m, s=(2,)):
    return m.tensor(np.full(s, 3, np.int64))


PROMOTION = [
    ("f32+f64", lambda m: _f32(m) + _f64(m), "float64"),
    ("f64+f32", lambda m: _f64(m) + _f32(m), "float64"),
    ("f32*f64", lambda m: _f32(m) * _f64(m), "float64"),
    ("f32/f64", lambda m: _f32(m) / _f64(m), "float64"),
    ("f32**f64", lambda m: _f32(m) ** _f64(m), "float64"),
    ("f32@f64_0d_both", lambda m: _f32(m, ()) + _f64(m, ()), "float64"),
    ("i64*2.5", lambda m: _i64(m) * 2.5, "float32"),
    ("2.5*i64", lambda m: 2.5 * _i64(m), "float32"),
    ("i64+2.5", lambda m: _i64(m) + 2.5, "float32"),
    ("2.5-i64", lambda m: 2.5 - _i64(m), "float32"),
    ("i64/2", lambda m: _i64(m) / 2, "float32"),
    ("i64/i64", lambda m: _i64(m) / _i64(m), "float32"),
    ("1/i64", lambda m: 1 / _i64(m), "float32"),
    ("i64**2.5", lambda m: _i64(m) ** 2.5, "float32"),
    ("2.5**i64", lambda m: 2.5 ** _i64(m), "float32"),
    ("2**i64", lambda m: 2 ** _i64(m), "int64"),
    ("i64**2", lambda m: _i64(m) ** 2, "int64"),
    ("i64+1", lambda m: _i64(m) + 1, "int64"),
    ("i64*True", lambda m: _i64(m) * True, "int64"),
    ("f32*2.5", lambda m: _f32(m) * 2.5, "float32"),
    ("2.5*f32", lambda m: 2.5 * _f32(m), "float32"),
    ("f32/3", lambda m: _f32(m) / 3, "float32"),
    ("f32**2.5", lambda m: _f32(m) ** 2.5, "float32"),
    ("2.5**f32", lambda m: 2.5 ** _f32(m), "float32"),
    ("f32-1e10", lambda m: _f32(m) - 1e10, "float32"),
    ("f64*2.5", lambda m: _f64(m) * 2.5, "float64"),
    # a 0-d tensor of the same category does not promote a dimensioned tensor
    ("f32*f64_0d", lambda m: _f32(m) * _f64(m, ()), "float32"),
    ("f64_0d*f32", lambda m: _f64(m, ()) * _f32(m), "float32"),
    ("f32-f64_0d", lambda m: _f32(m) - _f64(m, ()), "float32"),
    ("f32/f64_0d", lambda m: _f32(m) / _f64(m, ()), "float32"),
    ("f32**f64_0d", lambda m: _f32(m) ** _f64(m, ()), "float32"),
    # ... but a higher category does, keeping the 0-d tensor's dtype
    ("i64+f64_0d", lambda m: _i64(m) + _f64(m, ()), "float64"),
    ("i64+f32", lambda m: _i64(m) + _f32(m), "float32"),
    ("f32*i64", lambda m: _f32(m) * _i64(m), "float32"),
    ("mean_f32", lambda m: _f32(m).mean(), "float32"),
    ("sum_i64", lambda m: _i64(m).sum(), "int64"),
]


@pytest.mark.parametrize("name,fn,expected", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_dtype_promotion(name, fn, expected):
    assert str(fn(cgrad).dtype) == expected


@pytest.mark.parametrize("name,fn,expected", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_dtype_promotion_table_agrees_with_torch(name, fn, expected, torch):
    assert str(fn(torch).dtype).replace("torch.", "") == expected


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_mixed_precision_gradients_keep_each_input_dtype(op):
    import operator
    f = getattr(operator, {"div": "truediv"}.get(op, op))
    a, b = _f32(cgrad, rg=True), _f64(cgrad, rg=True)
    y = f(a, b)
    assert y.dtype == np.float64
    y.sum().backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    assert a.grad.shape == a.shape and b.grad.shape == b.shape


def test_mixed_precision_gradients_match_torch(torch):
    arrs = [np.array([0.5, 1.5, 2.0], np.float32), np.array([1.25, 0.75, 3.0], np.float64)]
    res = []
    for m in (cgrad, torch):
        a, b = (m.tensor(x, requires_grad=True) for x in arrs)
        ((a * b + a / b) ** 2).sum().backward()
        res.append((a.grad.detach().numpy(), b.grad.detach().numpy()))
    (ca, cb), (ta, tb) = res
    assert ca.dtype == ta.dtype == np.float32 and cb.dtype == tb.dtype == np.float64
    np.testing.assert_allclose(ca, ta, rtol=1e-6)
    np.testing.assert_allclose(cb, tb, rtol=1e-12)


INT_RESULTS = [
    ("long", lambda m, x: x.long()),
    ("to_int64", lambda m, x: x.to(m.int64)),
    ("int", lambda m, x: x.int()),
    ("long_then_mul", lambda m, x: x.long() * 2),
    ("long_then_sum", lambda m, x: x.long().sum()),
    ("long_then_index", lambda m, x: (x * 2).long()[[0, 0]]),
    ("compare", lambda m, x: x > 0),
    ("eq", lambda m, x: x == x),
]


@pytest.mark.parametrize("name,fn", INT_RESULTS, ids=[p[0] for p in INT_RESULTS])
def test_integer_results_never_require_grad(name, fn):
    x = cgrad.tensor([1.5, -2.0, 3.0], requires_grad=True)
    y = fn(cgrad, x)
    assert y.dtype.kind in "iub"
    assert not y.requires_grad
    assert y.grad_fn is None


@pytest.mark.parametrize("name,fn", INT_RESULTS, ids=[p[0] for p in INT_RESULTS])
def test_integer_results_agree_with_torch(name, fn, torch):
    x = torch.tensor([1.5, -2.0, 3.0], requires_grad=True)
    y = fn(torch, x)
    assert not y.requires_grad and y.grad_fn is None


def test_integer_input_cannot_require_grad():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        cgrad.tensor([1, 2]).requires_grad_()


# ----------------------------------------------------------------------------------------
# semantic edge cases against torch
# ----------------------------------------------------------------------------------------
def test_view_of_noncontiguous_raises():
    x = cgrad.tensor(np.ones((3, 4)))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(-1)


def test_matmul_0d_raises():
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        cgrad.tensor(2.0) @ cgrad.tensor([1.0])


def test_mm_shape_mismatch_message():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 "
                                           r"and 2x3\)"):
        cgrad.mm(cgrad.ones(2, 3), cgrad.ones(2, 3))


def test_sum_dim_out_of_range():
    with pytest.raises(IndexError, match="Dimension out of range"):
        cgrad.ones(2, 3).sum(2)


def test_basic_index_gradient_is_dense_zeros_elsewhere():
    x = cgrad.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    (x[1:, ::-2] * 3).sum().backward()
    expect = np.zeros((3, 4))
    expect[1:, ::-2] = 3
    np.testing.assert_array_equal(np_of(x.grad), expect)


def test_getitem_int_result_is_0d():
    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x[1]
    assert tuple(y.shape) == () and y.requires_grad


def test_scalar_sum_backward_default_gradient():
    x = cgrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x.mean().backward()
    np.testing.assert_allclose(np_of(x.grad), np.full((2, 3), 1 / 6))
