"""Shape ops (cgrad/ops/shape.py, cgrad/ops/joining.py), driven by one table (OPS).

For every row (the harness, table_tests, is shared with tests/test_ops_indexing.py):
* the forward equals a NumPy reference, in float32 and float64, with the input's dtype
  (ops with several outputs -- split, chunk, unbind -- compare every output);
* gradcheck and gradgradcheck pass (finite differences, float64);
* forward values, dtypes, requires_grad and vector-Jacobian products equal torch's; every
  gradient has its input's shape and dtype;
* the node name of every output equals torch's (column `node`, itself checked against torch);
* the output shares memory with the first input exactly when torch's output is a view of it
  (column `view`, itself checked against torch): views stay views, copies stay copies;
* no graph is recorded under cgrad.no_grad(), none when no input requires grad.

Errors are checked against torch too (ERRORS: same exception type, and a key phrase found in
both messages). Callables take the tensor module first (`cgrad` or `torch`); `th` overrides
the callable for torch where its spelling differs; `ref` takes NumPy arrays.
"""
from __future__ import annotations

import os
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402
from test_ops_core import cg_inputs, node_name, np_of, th_inputs, torch  # noqa: E402,F401


# ----------------------------------------------------------------------------------------
# the harness (also used by tests/test_ops_indexing.py)
# ----------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    cg: Callable                       # cg(module, *tensors) -> tensor or tuple of tensors
    ref: Callable | None               # ref(*ndarrays) -> array or tuple (None: torch only)
    shapes: tuple                      # one shape per (float) tensor input
    node: Any = None                   # torch's node name of the output(s) (a str for all)
    view: bool | None = None           # torch's output is a view of input 0
    th: Callable | None = None         # torch callable when it differs from cg

    def __str__(self):
        return self.name


def _outs(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def _seed(case):
    return sum(map(ord, case.name)) % 2 ** 32


def make_arrays(case, dtype=np.float64):
    rng = np.random.default_rng(_seed(case))
    return [np.asarray(rng.uniform(-1.5, 1.5, s), dtype=dtype) for s in case.shapes]


def run_cg(case, *xs):
    return case.cg(cgrad, *xs)


def run_th(case, torch, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (case.th or case.cg)(torch, *xs)


TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _names(case, y):
    names = [node_name(o) for o in _outs(y)]
    return names[0] if isinstance(case.node, str) and len(set(names)) == 1 else names


def _expected_names(case, y):
    if isinstance(case.node, str):
        return case.node
    return list(case.node)


def _is_view_th(y, x):
    return y is x or y._base is x or (x._base is not None and y._base is x._base)


def _root(a):
    while a.base is not None:
        a = a.base
    return a


def _is_view_cg(y, x):
    if y is x or np.shares_memory(y._data, x._data):
        return True
    return y._data.size == 0 and _root(y._data) is _root(x._data)    # empty views


def table_tests(OPS):
    """The per-row tests for an op table, as a dict to merge into a test module's globals."""
    IDS = [c.name for c in OPS]
    assert len(set(IDS)) == len(IDS), "duplicate case names"
    with_ref = [c for c in OPS if c.ref is not None]
    with_view = [c for c in OPS if c.view is not None]
    dtypes = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
    rows = pytest.mark.parametrize("case", OPS, ids=IDS)

    @dtypes
    @pytest.mark.parametrize("case", with_ref, ids=[c.name for c in with_ref])
    def test_forward_matches_reference(case, dtype):
        arrays = make_arrays(case, dtype)
        outs = _outs(run_cg(case, *cg_inputs(arrays)))
        refs = case.ref(*arrays)
        refs = tuple(refs) if isinstance(refs, (tuple, list)) else (refs,)
        assert len(outs) == len(refs)
        for out, ref in zip(outs, refs):
            ref = np.asarray(ref)
            assert isinstance(out, cgrad.Tensor)
            assert tuple(out.shape) == ref.shape
            assert out.dtype == np.dtype(dtype)
            np.testing.assert_allclose(np_of(out), ref, **TOL[dtype])

    @rows
    def test_gradcheck(case):
        xs = cg_inputs(make_arrays(case))
        assert gradcheck(lambda *a: run_cg(case, *a), xs)

    @rows
    def test_gradgradcheck(case):
        xs = cg_inputs(make_arrays(case))
        assert gradgradcheck(lambda *a: run_cg(case, *a), xs)

    @dtypes
    @rows
    def test_grad_shape_dtype(case, dtype):
        xs = cg_inputs(make_arrays(case, dtype))
        outs = _outs(run_cg(case, *xs))
        gs = cgrad.autograd.grad(list(outs), xs, [cgrad.ones_like(o) for o in outs],
                                 allow_unused=True)
        for x, g in zip(xs, gs):
            assert isinstance(g, cgrad.Tensor)
            assert tuple(g.shape) == tuple(x.shape) and g.dtype == x.dtype
        outs = _outs(run_cg(case, *xs))
        cgrad.autograd.backward(list(outs), [cgrad.ones_like(o) for o in outs])
        for x, g in zip(xs, gs):
            assert x.grad is not None and x.grad.dtype == x.dtype
            np.testing.assert_array_equal(np_of(x.grad), np_of(g))

    @dtypes
    @rows
    def test_matches_torch(case, dtype, torch):
        arrays = make_arrays(case, dtype)
        xc, xt = cg_inputs(arrays), th_inputs(torch, arrays)
        yc, yt = _outs(run_cg(case, *xc)), _outs(run_th(case, torch, *xt))
        assert len(yc) == len(yt)
        rng = np.random.default_rng(1)
        vs = []
        for a, b in zip(yc, yt):
            assert tuple(a.shape) == tuple(b.shape)
            assert str(a.dtype) == str(b.dtype).replace("torch.", "")
            np.testing.assert_allclose(np_of(a), b.detach().numpy(), **TOL[dtype])
            assert a.requires_grad == b.requires_grad
            vs.append(rng.standard_normal(tuple(b.shape)).astype(dtype))
        gc = cgrad.autograd.grad(list(yc), xc, [cgrad.tensor(v) for v in vs], allow_unused=True)
        gt = torch.autograd.grad(list(yt), xt, [torch.tensor(v) for v in vs], allow_unused=True)
        for i, (a, b) in enumerate(zip(gc, gt)):
            if b is None:
                assert a is None or not np_of(a).any(), f"input {i}"
                continue
            assert a is not None and tuple(a.shape) == tuple(b.shape), f"input {i}"
            assert str(a.dtype) == str(b.dtype).replace("torch.", "")
            np.testing.assert_allclose(np_of(a), b.numpy(), **TOL[dtype], err_msg=f"input {i}")

    named = [c for c in OPS if c.node is not None]

    @pytest.mark.parametrize("case", named, ids=[c.name for c in named])
    def test_node_name(case):
        y = run_cg(case, *cg_inputs(make_arrays(case)))
        assert _names(case, y) == _expected_names(case, y)

    @pytest.mark.parametrize("case", named, ids=[c.name for c in named])
    def test_node_name_table_agrees_with_torch(case, torch):
        y = run_th(case, torch, *th_inputs(torch, make_arrays(case)))
        assert _names(case, y) == _expected_names(case, y)

    @pytest.mark.parametrize("case", with_view, ids=[c.name for c in with_view])
    def test_view_or_copy(case):
        """The output aliases input 0 exactly where torch returns a view (column `view`)."""
        xs = cg_inputs(make_arrays(case))
        for y in _outs(run_cg(case, *xs)):
            assert _is_view_cg(y, xs[0]) == case.view

    @pytest.mark.parametrize("case", with_view, ids=[c.name for c in with_view])
    def test_view_column_agrees_with_torch(case, torch):
        xs = th_inputs(torch, make_arrays(case))
        for y in _outs(run_th(case, torch, *xs)):
            assert _is_view_th(y, xs[0]) == case.view

    @rows
    def test_no_grad_records_no_graph(case):
        xs = cg_inputs(make_arrays(case))
        with cgrad.no_grad():
            ys = _outs(run_cg(case, *xs))
        assert all(y.grad_fn is None and not y.requires_grad for y in ys)
        ys = _outs(run_cg(case, *xs))
        assert all(y.requires_grad and y.grad_fn is not None for y in ys)
        ys = _outs(run_cg(case, *cg_inputs(make_arrays(case), requires_grad=False)))
        assert all(y.grad_fn is None and not y.requires_grad for y in ys)

    return {f.__name__: f for f in (
        test_forward_matches_reference, test_gradcheck, test_gradgradcheck,
        test_grad_shape_dtype, test_matches_torch, test_node_name,
        test_node_name_table_agrees_with_torch, test_view_or_copy,
        test_view_column_agrees_with_torch, test_no_grad_records_no_graph)}


def check_errors(ERRORS, name, fn, exc, phrase, torch):
    """fn raises exc (whose message holds phrase) in cgrad and in torch."""
    for m in (cgrad, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(exc) as info:
                fn(m)
        assert phrase in str(info.value), f"{m.__name__}: {info.value}"


# ----------------------------------------------------------------------------------------
# the op table
# ----------------------------------------------------------------------------------------
S34, S234 = (3, 4), (2, 3, 4)
V = "ViewBackward0"


def _split(x, sizes, axis):
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _unbind(x, axis):
    return tuple(np.moveaxis(x, axis, 0))


def _movedim(x, s, d):
    return np.moveaxis(x, s, d)


OPS = [
    # -- reshape / view / flatten / unflatten / ravel ------------------------------------
    Case("reshape", lambda m, x: x.reshape(4, 3), lambda x: x.reshape(4, 3), (S34,), V, True),
    Case("reshape_fn", lambda m, x: m.reshape(x, (2, -1)), lambda x: x.reshape(2, -1), (S234,),
         V, True),
    Case("reshape_copy", lambda m, x: x.t().reshape(-1), lambda x: x.T.reshape(-1), (S34,),
         "UnsafeViewBackward0", False),
    Case("reshape_strided_view", lambda m, x: x[::2].reshape(2, 2, 2),
         lambda x: x[::2].reshape(2, 2, 2), ((4, 4),), "ReshapeAliasBackward0", True),
    Case("view", lambda m, x: x.view(2, 6), lambda x: x.reshape(2, 6), (S34,), V, True),
    Case("view_as", lambda m, x: x.view_as(m.zeros(12)), lambda x: x.reshape(12), (S34,), V,
         True),
    Case("reshape_as", lambda m, x: x.reshape_as(m.zeros(2, 2, 3)),
         lambda x: x.reshape(2, 2, 3), (S34,), V, True),
    Case("flatten", lambda m, x: x.flatten(), lambda x: x.reshape(-1), (S234,), V, True),
    Case("flatten_start", lambda m, x: x.flatten(1), lambda x: x.reshape(2, 12), (S234,), V,
         True),
    Case("flatten_range", lambda m, x: m.flatten(x, 0, -2), lambda x: x.reshape(6, 4),
         (S234,), V, True),
    Case("flatten_noncontig", lambda m, x: x.t().flatten(), lambda x: x.T.reshape(-1), (S34,),
         "UnsafeViewBackward0", False),
    Case("flatten_0d", lambda m, x: x.flatten(), lambda x: x.reshape(1), ((),), V, True),
    Case("unflatten", lambda m, x: x.unflatten(1, (2, 2)), lambda x: x.reshape(3, 2, 2),
         (S34,), V, True),
    Case("unflatten_infer", lambda m, x: m.unflatten(x, -1, (2, -1)),
         lambda x: x.reshape(2, 3, 2, 2), (S234,), V, True),
    Case("unflatten_noncontig", lambda m, x: x.t().unflatten(0, (2, 2)),
         lambda x: x.T.reshape(2, 2, 3), (S34,), V, True),
    Case("ravel", lambda m, x: x.ravel(), lambda x: x.reshape(-1), (S34,), V, True),
    Case("ravel_noncontig", lambda m, x: m.ravel(x.t()), lambda x: x.T.reshape(-1), (S34,), V,
         False),
    # -- squeeze / unsqueeze -----------------------------------------------------------
    Case("squeeze", lambda m, x: x.squeeze(), lambda x: x.squeeze(), ((1, 3, 1, 4),),
         "SqueezeBackward0", True),
    Case("squeeze_dim", lambda m, x: x.squeeze(0), lambda x: x.squeeze(0), ((1, 3, 1, 4),),
         "SqueezeBackward1", True),
    Case("squeeze_neg_dim", lambda m, x: m.squeeze(x, -2), lambda x: x.squeeze(-2),
         ((1, 3, 1, 4),), "SqueezeBackward1", True),
    Case("squeeze_dim_not_1", lambda m, x: x.squeeze(1), lambda x: x, ((1, 3, 1, 4),),
         "SqueezeBackward1", True),
    Case("squeeze_dims", lambda m, x: x.squeeze((0, 2)), lambda x: x.squeeze((0, 2)),
         ((1, 3, 1, 4),), "SqueezeBackward2", True),
    Case("squeeze_dims_list_mixed", lambda m, x: m.squeeze(x, [1, -2]),
         lambda x: x.squeeze(2), ((1, 3, 1, 4),), "SqueezeBackward2", True),
    Case("squeeze_0d", lambda m, x: x.squeeze(), lambda x: x, ((),), "SqueezeBackward0", True),
    Case("squeeze_0d_dim", lambda m, x: x.squeeze(-1), lambda x: x, ((),), "SqueezeBackward1",
         True),
    Case("unsqueeze", lambda m, x: x.unsqueeze(1), lambda x: x[:, None], (S34,),
         "UnsqueezeBackward0", True),
    Case("unsqueeze_fn_neg", lambda m, x: m.unsqueeze(x, -1), lambda x: x[..., None], (S34,),
         "UnsqueezeBackward0", True),
    Case("unsqueeze_0d", lambda m, x: m.unsqueeze(x, 0), lambda x: x.reshape(1), ((),),
         "UnsqueezeBackward0", True),
    # -- expand / repeat / tile --------------------------------------------------------
    Case("expand", lambda m, x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)),
         ((3, 1),), "ExpandBackward0", True),
    Case("expand_as", lambda m, x: x.expand_as(m.zeros(2, 3, 4)),
         lambda x: np.broadcast_to(x, (2, 3, 4)), ((4,),), "ExpandBackward0", True),
    Case("expand_minus1", lambda m, x: x.expand(-1, 5), lambda x: np.broadcast_to(x, (3, 5)),
         ((3, 1),), "ExpandBackward0", True),
    Case("repeat", lambda m, x: x.repeat(2, 1), lambda x: np.tile(x, (2, 1)), (S34,),
         "RepeatBackward0", False),
    Case("repeat_new_dims", lambda m, x: x.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3)),
         (S34,), "RepeatBackward0", False),
    Case("repeat_list", lambda m, x: x.repeat([1, 2]), lambda x: np.tile(x, (1, 2)), ((2, 3),),
         "RepeatBackward0", False),
    Case("repeat_0d", lambda m, x: x.repeat(3), lambda x: np.tile(x, 3), ((),),
         "RepeatBackward0", False),
    Case("repeat_zero", lambda m, x: x.repeat(0, 2), lambda x: np.tile(x, (0, 2)), ((2, 3),),
         "RepeatBackward0", False),
    Case("tile", lambda m, x: m.tile(x, (2,)), lambda x: np.tile(x, 2), (S34,),
         "RepeatBackward0", False),
    Case("tile_method_more_dims", lambda m, x: x.tile(2, 1, 2), lambda x: np.tile(x, (2, 1, 2)),
         (S34,), "RepeatBackward0", False),
    # -- cat / stack -------------------------------------------------------------------
    Case("cat", lambda m, x, y: m.cat([x, y]), lambda x, y: np.concatenate([x, y]),
         (S34, (2, 4)), "CatBackward0", False),
    Case("cat_dim1_tuple", lambda m, x, y: m.cat((x, y), dim=1),
         lambda x, y: np.concatenate([x, y], 1), (S34, (3, 2)), "CatBackward0", False),
    Case("cat_neg_dim_three", lambda m, x, y, z: m.cat([x, y, x, z], -1),
         lambda x, y, z: np.concatenate([x, y, x, z], -1), (S234, (2, 3, 1), (2, 3, 2)),
         "CatBackward0", False),
    Case("concat", lambda m, x, y: m.concat([x, y], 0), lambda x, y: np.concatenate([x, y]),
         ((2,), (3,)), "CatBackward0", False),
    Case("concatenate", lambda m, x, y: m.concatenate([y, x], 1),
         lambda x, y: np.concatenate([y, x], 1), (S34, (3, 1)), "CatBackward0", False),
    Case("cat_single", lambda m, x: m.cat([x]), lambda x: x.copy(), (S34,), "CatBackward0",
         False),
    Case("cat_legacy_empty", lambda m, x: m.cat([x, m.zeros(0, dtype=x.dtype)]),
         lambda x: x.copy(), (S34,), "CatBackward0", False),
    Case("cat_with_int", lambda m, x: m.cat([x, m.ones(1, 4, dtype=m.int64)]),
         lambda x: np.concatenate([x, np.ones((1, 4), x.dtype)]), (S34,), "CatBackward0",
         False),
    Case("stack", lambda m, x, y: m.stack([x, y]), lambda x, y: np.stack([x, y]), (S34, S34),
         "StackBackward0", False),
    Case("stack_dim1", lambda m, x, y: m.stack((x, y, x), 1), lambda x, y: np.stack([x, y, x], 1),
         (S34, S34), "StackBackward0", False),
    Case("stack_neg_dim", lambda m, x, y: m.stack([x, y], dim=-1),
         lambda x, y: np.stack([x, y], -1), (S34, S34), "StackBackward0", False),
    Case("stack_0d", lambda m, x, y: m.stack([x, y]), lambda x, y: np.stack([x, y]), ((), ()),
         "StackBackward0", False),
    Case("hstack_1d", lambda m, x, y: m.hstack([x, y]), lambda x, y: np.hstack([x, y]),
         ((3,), (2,)), "CatBackward0", False),
    Case("hstack_2d", lambda m, x, y: m.hstack([x, y]), lambda x, y: np.hstack([x, y]),
         (S34, (3, 2)), "CatBackward0", False),
    Case("vstack", lambda m, x, y: m.vstack([x, y]), lambda x, y: np.vstack([x, y]),
         ((4,), S34), "CatBackward0", False),
    # -- split / chunk / unbind ----------------------------------------------------------
    Case("split", lambda m, x: x.split(2), lambda x: _split(x, [2, 2, 1], 0), ((5, 4),),
         "SplitBackward0", True),
    Case("split_fn_dim", lambda m, x: m.split(x, 3, dim=-1), lambda x: _split(x, [3, 1], 1),
         (S34,), "SplitBackward0", True),
    Case("split_single", lambda m, x: x.split(5), lambda x: (x,), (S34,), "SplitBackward0",
         True),
    Case("split_sizes", lambda m, x: x.split([1, 3], 1), lambda x: _split(x, [1, 3], 1),
         (S34,), "SplitWithSizesBackward0", True),
    Case("split_sizes_empty_piece", lambda m, x: m.split(x, [0, 2, 1]),
         lambda x: _split(x, [0, 2, 1], 0), (S34,), "SplitWithSizesBackward0", True),
    Case("split_partial_use", lambda m, x: x.split(2)[1] * 2, lambda x: x[2:4] * 2, ((5, 3),),
         "MulBackward0"),
    Case("chunk", lambda m, x: x.chunk(2), lambda x: _split(x, [2, 1], 0), (S34,),
         "SplitBackward0", True),
    Case("chunk_dim", lambda m, x: m.chunk(x, 3, 1), lambda x: _split(x, [2, 2], 1), (S34,),
         "SplitBackward0", True),
    Case("chunk_more_than_size", lambda m, x: x.chunk(5), lambda x: _split(x, [1, 1, 1], 0),
         (S34,), "SplitBackward0", True),
    Case("unbind", lambda m, x: x.unbind(), lambda x: _unbind(x, 0), (S34,),
         "UnbindBackward0", True),
    Case("unbind_dim", lambda m, x: m.unbind(x, 1), lambda x: _unbind(x, 1), (S234,),
         "UnbindBackward0", True),
    Case("unbind_neg_dim", lambda m, x: x.unbind(-1), lambda x: _unbind(x, -1), ((2, 3),),
         "UnbindBackward0", True),
    Case("unbind_partial_use", lambda m, x: x.unbind(1)[2] + x.unbind(1)[0],
         lambda x: x[:, 2] + x[:, 0], (S34,), "AddBackward0"),
    # -- flip / roll / narrow ----------------------------------------------------------
    Case("flip", lambda m, x: x.flip(0), lambda x: x[::-1], (S34,), "FlipBackward0", False),
    Case("flip_fn_two", lambda m, x: m.flip(x, (0, 2)), lambda x: x[::-1, :, ::-1], (S234,),
         "FlipBackward0", False),
    Case("flip_varargs_neg", lambda m, x: x.flip(-1, 0), lambda x: x[::-1, ::-1], (S34,),
         "FlipBackward0", False),
    Case("flip_list", lambda m, x: x.flip([1]), lambda x: x[:, ::-1], (S34,), "FlipBackward0",
         False),
    Case("roll_flat", lambda m, x: x.roll(1), lambda x: np.roll(x, 1), (S34,), "RollBackward0",
         False),
    Case("roll_dim", lambda m, x: x.roll(-1, 1), lambda x: np.roll(x, -1, 1), (S34,),
         "RollBackward0", False),
    Case("roll_dims", lambda m, x: m.roll(x, (1, 5), (0, -1)),
         lambda x: np.roll(x, (1, 5), (0, -1)), (S234,), "RollBackward0", False),
    Case("roll_0d", lambda m, x: x.roll(2), lambda x: x, ((),), "RollBackward0", False),
    Case("narrow", lambda m, x: x.narrow(1, 1, 2), lambda x: x[:, 1:3], (S34,),
         "SliceBackward0", True),
    Case("narrow_fn_neg_start", lambda m, x: m.narrow(x, 0, -2, 2), lambda x: x[1:3], (S34,),
         "SliceBackward0", True),
    Case("narrow_full", lambda m, x: x.narrow(0, 0, 3), lambda x: x, (S34,), "SliceBackward0",
         True),
    Case("narrow_tensor_start", lambda m, x: x.narrow(-1, m.tensor(1), 2),
         lambda x: x[..., 1:3], (S234,), "SliceBackward0", True),
    # -- movedim (permute / transpose are tested with linalg) ---------------------------
    Case("movedim", lambda m, x: x.movedim(0, 2), lambda x: _movedim(x, 0, 2), (S234,),
         "PermuteBackward0", True),
    Case("movedim_tuples", lambda m, x: m.movedim(x, (0, 1), (2, 0)),
         lambda x: _movedim(x, (0, 1), (2, 0)), (S234,), "PermuteBackward0", True),
    Case("moveaxis_neg", lambda m, x: m.moveaxis(x, -1, 0), lambda x: _movedim(x, -1, 0),
         (S234,), "PermuteBackward0", True),
    # -- clone / contiguous --------------------------------------------------------------
    Case("clone_fn", lambda m, x: m.clone(x), lambda x: x.copy(), (S34,), "CloneBackward0",
         False),
    Case("contiguous", lambda m, x: x.t().contiguous(), lambda x: x.T.copy(), (S34,),
         "CloneBackward0", False),
    # -- compositions --------------------------------------------------------------------
    Case("composite", lambda m, x: m.cat([x.split(2)[1], x.flip(0)]).roll(1).unbind(1)[1],
         lambda x: np.roll(np.concatenate([x[2:4], x[::-1]]), 1)[:, 1], ((4, 3),),
         "UnbindBackward0"),
    Case("composite_stack_permute", lambda m, x, y: m.stack([x, y]).permute(1, 2, 0)
         .flatten(1).chunk(2, 1)[0],
         lambda x, y: np.stack([x, y]).transpose(1, 2, 0).reshape(3, 8)[:, :4],
         (S34, S34), "SplitBackward0"),
]

globals().update(table_tests(OPS))


# ----------------------------------------------------------------------------------------
# identities, aliasing and gradients beyond the table
# ----------------------------------------------------------------------------------------
def test_noop_forms_return_the_input_as_torch():
    x = cgrad.randn(4, requires_grad=True)
    y = cgrad.randn(3, 4)
    assert x.flatten() is x                      # start_dim == end_dim: the input itself
    assert y.t().contiguous() is not y.t()
    assert y.contiguous() is y


def test_views_write_through_and_copies_do_not():
    base = cgrad.zeros(3, 4)
    base.narrow(1, 1, 2).add_(1.0)
    base.unbind(0)[2].add_(2.0)
    base.split(1)[0].mul_(0.0)
    np.testing.assert_array_equal(np_of(base), [[0, 0, 0, 0], [0, 1, 1, 0], [2, 3, 3, 2]])
    copy = base.flip(0)
    copy.add_(100.0)
    base.repeat(1, 1).add_(100.0)
    base.roll(1).add_(100.0)
    cgrad.cat([base]).add_(100.0)
    assert np_of(base).max() == 3.0


def test_split_and_unbind_unused_outputs_get_zero_gradient(torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
        a, b = x.split([1, 3])
        (b * b).sum().backward()
        u = x.unbind(1)
        (u[1] * 3).sum().backward()
        res.append(x.grad.numpy())
    np.testing.assert_array_equal(res[0], res[1])


def test_cat_int_and_float_promotion_and_gradients(torch):
    for m in (cgrad, torch):
        x = m.ones(2, 2, dtype=m.float32, requires_grad=True)
        d = m.ones(1, 2, dtype=m.float64, requires_grad=True)
        i = m.ones(1, 2, dtype=m.int64)
        out = m.cat([x, d, i])
        assert str(out.dtype).endswith("float64")
        out.sum().backward()
        assert str(x.grad.dtype).endswith("float32") and str(d.grad.dtype).endswith("float64")
        s = m.stack([x[0], i[0]])
        assert str(s.dtype).endswith("float32")


def _with_torch():
    try:
        import torch as th
    except ImportError:  # pragma: no cover
        return [cgrad]
    return [cgrad, th]


@pytest.mark.parametrize("m", _with_torch(), ids=lambda m: m.__name__)
def test_cat_and_stack_out(m):
    """out=: written in place and returned, resized (warning when it had elements), cast to
    out's dtype, refused when autograd would have to record it or when it overlaps an input."""
    a, b = m.tensor([1.0, 2.0]), m.tensor([3.0])
    o = m.empty(0)
    assert m.cat([a, b], out=o) is o and o.tolist() == [1.0, 2.0, 3.0]
    v = o._version
    m.cat([b, a], out=o)
    assert o.tolist() == [3.0, 1.0, 2.0] and o._version > v
    o = m.empty(2)
    with pytest.warns(UserWarning, match=r"An output with one or more elements was resized "
                                         r"since it had shape \[2\], which does not match the "
                                         r"required output shape \[3\]"):
        m.cat([a, b], out=o)
    assert o.tolist() == [1.0, 2.0, 3.0]
    o = m.empty(3, dtype=m.float64)
    m.cat([a, b], out=o)
    assert o.dtype == m.float64 and o.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="input types can't be cast to the desired output type "
                                        "Long"):
        m.cat([a, b], out=m.empty(3, dtype=m.int64))
    s = m.empty(2, 2)
    assert m.stack([a, a * 2], dim=1, out=s) is s and s.tolist() == [[1.0, 2.0], [2.0, 4.0]]
    r = m.tensor([1.0, 2.0], requires_grad=True)
    msg = ("functions with out=... arguments don't support automatic differentiation, but one "
           "of the arguments requires grad.")
    with pytest.raises(RuntimeError, match=re.escape("cat(): " + msg)):
        m.cat([r, b], out=m.empty(3))
    with pytest.raises(RuntimeError, match=re.escape("stack(): " + msg)):
        m.stack([a, a], out=m.empty(2, 2, requires_grad=True))
    with m.no_grad():
        o = m.empty(3)
        m.cat([r, b], out=o)
    assert not o.requires_grad and o.tolist() == [1.0, 2.0, 3.0]
    x = m.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the "
                                           "written-to tensor refer to a single memory location"):
        m.cat([x[:2], b], out=x[1:])


def test_repeat_gradient_sums_copies():
    x = cgrad.tensor([[1.0, 2.0]], requires_grad=True)
    x.repeat(3, 2).sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), [[6.0, 6.0]])


def test_double_backward_through_shape_ops(torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
        y = m.cat([x.flip(1), x.roll(1, 0)]).permute(1, 0).split(2)[1]
        (g,) = m.autograd.grad((y ** 3).sum(), [x], create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), [x])
        res.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


# ----------------------------------------------------------------------------------------
# errors (type and key phrase, checked in both libraries)
# ----------------------------------------------------------------------------------------
def _x(m):
    return m.zeros(3, 4)


ERRORS = [
    ("cat_sizes", lambda m: m.cat([_x(m), m.zeros(3, 5)]), RuntimeError,
     "Sizes of tensors must match except in dimension 0. Expected size 4 but got size 5 for "
     "tensor number 1 in the list"),
    ("cat_ndim", lambda m: m.cat([_x(m), m.zeros(3)]), RuntimeError,
     "Tensors must have same number of dimensions: got 2 and 1"),
    ("cat_empty", lambda m: m.cat([]), ValueError, "expected a non-empty list of Tensors"),
    ("cat_0d", lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]), RuntimeError,
     "zero-dimensional tensor (at position 0) cannot be concatenated"),
    ("cat_dim", lambda m: m.cat([_x(m), _x(m)], 2), IndexError, "Dimension out of range"),
    ("cat_not_tensor", lambda m: m.cat([_x(m), [1.0]]), TypeError,
     "expected Tensor as element 1 in argument 0, but got list"),
    ("stack_sizes", lambda m: m.stack([_x(m), m.zeros(3, 5)]), RuntimeError,
     "stack expects each tensor to be equal size, but got [3, 4] at entry 0 and [3, 5] at "
     "entry 1"),
    ("stack_empty", lambda m: m.stack([]), RuntimeError, "stack expects a non-empty TensorList"),
    ("stack_dim", lambda m: m.stack([_x(m)], 3), IndexError, "Dimension out of range"),
    ("split_zero", lambda m: _x(m).split(0), RuntimeError,
     "split_size can only be 0 if dimension size is 0"),
    ("split_negative", lambda m: _x(m).split(-1), RuntimeError,
     "split expects split_size be non-negative"),
    ("split_sizes_sum", lambda m: _x(m).split([1, 1]), RuntimeError,
     "split_with_sizes expects split_sizes to sum exactly to 3"),
    ("split_0d", lambda m: m.tensor(1.0).split(1), RuntimeError,
     "split expects at least a 1-dimensional tensor"),
    ("chunk_zero", lambda m: _x(m).chunk(0), RuntimeError,
     "chunk expects `chunks` to be greater than 0, got: 0"),
    ("unbind_0d", lambda m: m.tensor(1.0).unbind(), IndexError,
     "Dimension specified as 0 but tensor has no dimensions"),
    ("unbind_dim", lambda m: _x(m).unbind(2), IndexError, "Dimension out of range"),
    ("narrow_length", lambda m: _x(m).narrow(0, 2, 2), RuntimeError,
     "start (2) + length (2) exceeds dimension size (3)."),
    ("narrow_negative_length", lambda m: _x(m).narrow(0, 0, -1), RuntimeError,
     "narrow(): length must be non-negative."),
    ("narrow_dim", lambda m: _x(m).narrow(3, 0, 1), IndexError, "Dimension out of range"),
    ("squeeze_dim", lambda m: _x(m).squeeze(3), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 3)"),
    ("squeeze_dup", lambda m: _x(m)[None].squeeze((0, 0)), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
    ("unsqueeze_dim", lambda m: _x(m).unsqueeze(3), IndexError, "Dimension out of range"),
    ("repeat_fewer", lambda m: _x(m).repeat(2), RuntimeError,
     "Number of dimensions of repeat dims can not be smaller than number of dimensions of "
     "tensor"),
    ("repeat_negative", lambda m: _x(m).repeat(-1, 1), RuntimeError,
     "Trying to create tensor with negative dimension -3: [-3, 4]"),
    ("flip_dup", lambda m: _x(m).flip(0, 0), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
    ("flip_dim", lambda m: _x(m).flip(2), IndexError, "Dimension out of range"),
    ("roll_align", lambda m: _x(m).roll((1, 2), 0), RuntimeError,
     "shifts and dimensions must align. shifts: 2, dims:1"),
    ("roll_align_no_dims", lambda m: _x(m).roll((1, 2)), RuntimeError,
     "shifts and dimensions must align. shifts: 2, dims:0"),
    ("unflatten_sizes", lambda m: _x(m).unflatten(1, (3, 2)), RuntimeError,
     "unflatten: Provided sizes [3, 2] don't multiply up to the size of dim 1 (4) in the "
     "input tensor"),
    ("flatten_order", lambda m: m.zeros(2, 3, 4).flatten(2, 1), RuntimeError,
     "flatten() has invalid args: start_dim cannot come after end_dim"),
    ("flatten_dim", lambda m: _x(m).flatten(3), IndexError, "Dimension out of range"),
    ("movedim_repeated", lambda m: m.zeros(2, 3, 4).movedim((0, 1), (1, 1)), RuntimeError,
     "movedim: repeated dim in `destination` ([1, 1])"),
    ("movedim_dim", lambda m: _x(m).movedim(2, 0), IndexError, "Dimension out of range"),
    ("expand_size", lambda m: _x(m).expand(3, 5), RuntimeError,
     "The expanded size of the tensor (5) must match the existing size (4) at non-singleton "
     "dimension 1.  Target sizes: [3, 5].  Tensor sizes: [3, 4]"),
    ("expand_fewer", lambda m: _x(m).expand(4), RuntimeError,
     "the number of sizes provided (1) must be greater or equal to the number of dimensions "
     "in the tensor (2)"),
    ("expand_leading_minus1", lambda m: _x(m).expand(-1, 3, 4), RuntimeError,
     "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
     "dimension 0"),
    ("view_size", lambda m: _x(m).view(5), RuntimeError,
     "shape '[5]' is invalid for input of size 12"),
    ("view_noncontig", lambda m: _x(m).t().view(12), RuntimeError,
     "view size is not compatible with input tensor's size and stride"),
]


@pytest.mark.parametrize("name,fn,exc,phrase", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn, exc, phrase, torch):
    check_errors(ERRORS, name, fn, exc, phrase, torch)
