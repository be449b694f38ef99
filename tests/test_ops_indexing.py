"""Indexing ops: a[idx] with torch's semantics (cgrad/ops/indexing.py) and the index-tensor ops
of cgrad/ops/gather_scatter.py and indexing.py (index_select, gather, take_along_dim, scatter, scatter_add,
index_add, masked_fill, masked_select, take, select), driven by one table (OPS) and the
harness of tests/test_ops_shape.py: forward vs NumPy, gradcheck + gradgradcheck (float64),
values and vector-Jacobian products vs torch, node names vs torch, views vs torch, gradient
shape/dtype, no graph under no_grad. Index constants are built inside the callables with
`m.tensor(...)`, so both libraries get the same indices.

Beyond the table: torch's rules where they differ from NumPy's (an int next to an index
array, Python bools, 0-d index tensors, lists holding tensors), accumulation of repeated
indices (including the large-row fast path of shape.accumulate_along), the helper nodes of
double backward, and errors (type and key phrase, checked in both libraries).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from test_ops_core import cg_inputs, node_name, np_of, th_inputs, torch  # noqa: E402,F401
from test_ops_shape import Case, check_errors, table_tests  # noqa: E402

S34, S234 = (3, 4), (2, 3, 4)
MASK34 = np.array([[True, False, True, False],
                   [False, False, True, True],
                   [True, True, False, False]])
MASK23 = np.array([[True, False, True], [False, True, True]])
I31 = np.array([[0], [1], [2]])
IDUP = np.array([[0, 0, 3], [1, 1, 1], [2, 0, 2]])


def T(a):
    """An index constant for module m (cgrad.tensor / torch.tensor of a NumPy array)."""
    return lambda m: m.tensor(np.asarray(a))


def _take_along(x, idx, axis):
    return np.take_along_axis(x, idx, axis)


def _scatter(x, idx, src, axis):
    out = x.copy()
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    out[tuple(grid)] = src[tuple(slice(0, s) for s in idx.shape)]
    return out


def _scatter_add(x, idx, src, axis):
    out = x.copy()
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    np.add.at(out, tuple(grid), src[tuple(slice(0, s) for s in idx.shape)])
    return out


def _index_add(x, axis, idx, src, alpha=1):
    out = x.copy()
    np.add.at(out, (slice(None),) * axis + (idx,), alpha * src)
    return out


def _masked_fill(x, mask, v):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    return np.where(np.broadcast_to(mask, shape), v, np.broadcast_to(x, shape))


IX = "IndexBackward0"

OPS = [
    # -- a[idx]: torch's rules where they differ from NumPy's ------------------------------
    Case("getitem_int_slice_list", lambda m, x: x[1, :, [0, 1]], lambda x: x[1][:, [0, 1]],
         (S234,), IX, False),
    Case("getitem_list_slice_list", lambda m, x: x[[0, 1], :, [1, 2]],
         lambda x: x[[0, 1], :, [1, 2]], (S234,), IX, False),
    Case("getitem_true", lambda m, x: x[True], lambda x: x[None], (S234,), IX, False),
    Case("getitem_false", lambda m, x: x[False], lambda x: x[None][:0], (S234,), IX, False),
    Case("getitem_int_slice_true", lambda m, x: x[1, :, True], lambda x: x[1][:, None],
         (S234,), IX, False),
    Case("getitem_0d_tensor", lambda m, x: x[m.tensor(1)], lambda x: x[1], (S234,),
         "SelectBackward0", True),
    Case("getitem_0d_tensor_slice_list", lambda m, x: x[m.tensor(1), :, [0, 2]],
         lambda x: x[1][:, [0, 2]], (S234,), IX, False),
    Case("getitem_none_list_none_int", lambda m, x: x[None, [0, 1], None, 1],
         lambda x: x[:, 1][None, :, None][:, [0, 1]], (S234,), IX, False),
    Case("getitem_numpy_int", lambda m, x: x[np.int64(2), 1:], lambda x: x[2, 1:], (S34,),
         "SliceBackward0", True),
    # -- a[idx]: advanced indices --------------------------------------------------------
    Case("getitem_int_tensor_2d", lambda m, x: x[m.tensor(np.array([[0, 1], [2, 2]]))],
         lambda x: x[np.array([[0, 1], [2, 2]])], (S34,), IX, False),
    Case("getitem_ndarray", lambda m, x: x[np.array([2, 0, 2])], lambda x: x[[2, 0, 2]],
         (S34,), IX, False),
    Case("getitem_int32_tensor", lambda m, x: x[m.tensor(np.array([1, 1], np.int32))],
         lambda x: x[[1, 1]], (S34,), IX, False),
    Case("getitem_bool_list", lambda m, x: x[[True, False, True]], lambda x: x[[0, 2]],
         (S34,), IX, False),
    Case("getitem_empty_list", lambda m, x: x[[]], lambda x: x[:0], (S34,), IX, False),
    Case("getitem_mask", lambda m, x: x[m.tensor(MASK34)], lambda x: x[MASK34], (S34,), IX,
         False),
    Case("getitem_mask_from_data", lambda m, x: x[x > 0], lambda x: x[x > 0], (S34,), IX,
         False),
    Case("getitem_mask2d_then_list", lambda m, x: x[m.tensor(MASK23), [0, 1, 3, 3]],
         lambda x: x[MASK23, [0, 1, 3, 3]], (S234,), IX, False),
    Case("getitem_slice_mask", lambda m, x: x[:, m.tensor(MASK34)],
         lambda x: x[:, MASK34], (S234,), IX, False),
    Case("getitem_pairs_repeat", lambda m, x: x[[0, 0, 2], [1, 1, 3]],
         lambda x: x[[0, 0, 2], [1, 1, 3]], (S34,), IX, False),
    Case("getitem_broadcast_arrays", lambda m, x: x[[[0], [1]], [0, 2]],
         lambda x: x[np.array([[0], [1]]), [0, 2]], (S234,), IX, False),
    Case("getitem_slice_list_repeat", lambda m, x: x[1:, [2, 0, 2]],
         lambda x: x[1:, [2, 0, 2]], (S234,), IX, False),
    Case("getitem_ellipsis_list", lambda m, x: x[..., [0, 0]], lambda x: x[..., [0, 0]],
         (S234,), IX, False),
    Case("getitem_step_list", lambda m, x: x[::2, None, [1, 1, 0]],
         lambda x: x[::2, None, [1, 1, 0]], (S34,), IX, False),
    Case("getitem_negative_list", lambda m, x: x[[-1, 0, -1]], lambda x: x[[-1, 0, -1]],
         (S34,), IX, False),
    # -- a[idx]: basic indices (views, node named after the last effective step) ----------
    Case("getitem_full_slice", lambda m, x: x[:], lambda x: x, (S34,), "SliceBackward0",
         True),
    Case("getitem_full_slices_tuple", lambda m, x: x[:, 0:4], lambda x: x, (S34,),
         "AliasBackward0", True),
    Case("getitem_int_none", lambda m, x: x[1, None], lambda x: x[1, None], (S34,),
         "UnsqueezeBackward0", True),
    Case("getitem_none_int", lambda m, x: x[None, 1], lambda x: x[None, 1], (S34,),
         "SelectBackward0", True),
    Case("getitem_slice_then_full", lambda m, x: x[1:, :], lambda x: x[1:], (S34,),
         "SliceBackward0", True),
    Case("getitem_empty_tuple", lambda m, x: x[()], lambda x: x, (S34,), "AliasBackward0",
         True),
    Case("getitem_0d_none", lambda m, x: x[None], lambda x: x[None], ((),),
         "UnsqueezeBackward0", True),
    Case("getitem_chain", lambda m, x: x[1:][:, [0, 0]][0], lambda x: x[1:][:, [0, 0]][0],
         (S34,), "SelectBackward0", False),
    # -- index_select ----------------------------------------------------------------------
    Case("index_select", lambda m, x: x.index_select(0, m.tensor([2, 0, 2])),
         lambda x: x[[2, 0, 2]], (S34,), "IndexSelectBackward0", False),
    Case("index_select_fn_dim1", lambda m, x: m.index_select(x, -1, m.tensor([3, 3])),
         lambda x: x[..., [3, 3]], (S234,), "IndexSelectBackward0", False),
    Case("index_select_0d_index", lambda m, x: x.index_select(1, m.tensor(2)),
         lambda x: x[:, [2]], (S34,), "IndexSelectBackward0", False),
    Case("index_select_int32", lambda m, x: x.index_select(0, m.tensor(np.array([1], np.int32))),
         lambda x: x[[1]], (S34,), "IndexSelectBackward0", False),
    Case("index_select_list", lambda m, x: x.index_select(1, [0, 0, 1]),
         lambda x: x[:, [0, 0, 1]], (S34,), "IndexSelectBackward0", False,
         th=lambda m, x: x.index_select(1, m.tensor([0, 0, 1]))),
    Case("index_select_0d_input", lambda m, x: x.index_select(0, m.tensor([0])), lambda x: x,
         ((),), "IndexSelectBackward0", False),
    # -- gather / take_along_dim -------------------------------------------------------------
    Case("gather", lambda m, x: x.gather(1, m.tensor(I31)), lambda x: _take_along(x, I31, 1),
         (S34,), "GatherBackward0", False),
    Case("gather_dups", lambda m, x: m.gather(x, 1, m.tensor(IDUP)),
         lambda x: _take_along(x, IDUP, 1), (S34,), "GatherBackward0", False),
    Case("gather_dim0_smaller", lambda m, x: x.gather(0, m.tensor([[2, 0]])),
         lambda x: _take_along(x[:, :2], np.array([[2, 0]]), 0), (S34,), "GatherBackward0",
         False),
    Case("gather_longer_along_dim", lambda m, x: x.gather(0, m.tensor([[2], [0], [2], [1]])),
         lambda x: _take_along(x[:, :1], np.array([[2], [0], [2], [1]]), 0), (S34,),
         "GatherBackward0", False),
    Case("gather_3d_neg_dim", lambda m, x: x.gather(-2, m.tensor(np.array([[[1, 0, 2, 2]]]))),
         lambda x: _take_along(x[:1], np.array([[[1, 0, 2, 2]]]), 1), (S234,),
         "GatherBackward0", False),
    Case("gather_0d", lambda m, x: x.gather(0, m.tensor(0)), lambda x: x, ((),),
         "GatherBackward0", False),
    Case("take_along_dim", lambda m, x: m.take_along_dim(x, m.tensor([[0, 3]]), 1),
         lambda x: _take_along(x, np.array([[0, 3]] * 3), 1), (S34,), "GatherBackward0",
         False),
    Case("take_along_dim_flat", lambda m, x: m.take_along_dim(x, m.tensor([0, 11, 5, 5])),
         lambda x: x.reshape(-1)[[0, 11, 5, 5]], (S34,), "GatherBackward0", False),
    # -- scatter / scatter_add -------------------------------------------------------------
    Case("scatter_src", lambda m, x, s: x.scatter(1, m.tensor(I31), s),
         lambda x, s: _scatter(x, I31, s, 1), (S34, (3, 1)), "ScatterBackward0", False),
    Case("scatter_src_dim0", lambda m, x, s: m.scatter(x, 0, m.tensor([[1, 2, 0, 1]]), s),
         lambda x, s: _scatter(x, np.array([[1, 2, 0, 1]]), s, 0), (S34, (1, 4)),
         "ScatterBackward0", False),
    Case("scatter_value", lambda m, x: x.scatter(1, m.tensor(IDUP), 2.5),
         lambda x: _scatter(x, IDUP, np.full(IDUP.shape, 2.5), 1), (S34,),
         "ScatterBackward1", False),
    Case("scatter_value_kw", lambda m, x: m.scatter(x, 0, m.tensor([[0, 2]]), value=-1),
         lambda x: _scatter(x, np.array([[0, 2]]), np.full((1, 2), -1.0), 0), (S34,),
         "ScatterBackward1", False),
    Case("scatter_add", lambda m, x, s: x.scatter_add(1, m.tensor(IDUP), s),
         lambda x, s: _scatter_add(x, IDUP, s, 1), (S34, (3, 3)), "ScatterAddBackward0",
         False),
    Case("scatter_add_fn_smaller", lambda m, x, s: m.scatter_add(x, 0, m.tensor([[2, 2]]), s),
         lambda x, s: _scatter_add(x, np.array([[2, 2]]), s, 0), (S34, (1, 2)),
         "ScatterAddBackward0", False),
    # -- index_add -------------------------------------------------------------------------
    Case("index_add", lambda m, x, s: x.index_add(0, m.tensor([0, 2, 0]), s),
         lambda x, s: _index_add(x, 0, [0, 2, 0], s), (S34, S34), "IndexAddBackward0", False),
    Case("index_add_alpha_dim_neg", lambda m, x, s: m.index_add(x, -1, m.tensor([3, 3]), s,
                                                                 alpha=2.0),
         lambda x, s: _index_add(x, 2, [3, 3], s, 2.0), (S234, (2, 3, 2)),
         "IndexAddBackward0", False),
    Case("index_add_0d_index", lambda m, x, s: x.index_add(0, m.tensor(1), s),
         lambda x, s: _index_add(x, 0, [1], s), (S34, (1, 4)), "IndexAddBackward0", False),
    # -- masked_fill / masked_select ---------------------------------------------------------
    Case("masked_fill", lambda m, x: x.masked_fill(m.tensor(MASK34), 0.5),
         lambda x: _masked_fill(x, MASK34, 0.5), (S34,), "MaskedFillBackward0", False),
    Case("masked_fill_fn_int_value", lambda m, x: m.masked_fill(x, m.tensor(MASK34), -2),
         lambda x: _masked_fill(x, MASK34, -2.0), (S34,), "MaskedFillBackward0", False),
    Case("masked_fill_mask_from_data", lambda m, x: x.masked_fill(x < 0, 0.0),
         lambda x: np.where(x < 0, 0.0, x), (S34,), "MaskedFillBackward0", False),
    Case("masked_fill_bcast_mask", lambda m, x: x.masked_fill(m.tensor(MASK34[0]), 1.0),
         lambda x: _masked_fill(x, MASK34[0], 1.0), (S234,), "MaskedFillBackward0", False),
    Case("masked_fill_bigger_mask", lambda m, x: x.masked_fill(m.tensor(MASK34), 1.0),
         lambda x: _masked_fill(x, MASK34, 1.0), ((4,),), "MaskedFillBackward0", False),
    Case("masked_fill_tensor_value", lambda m, x, v: x.masked_fill(m.tensor(MASK34), v),
         lambda x, v: _masked_fill(x, MASK34, v), (S34, ()), "MaskedFillBackward1", False),
    Case("masked_fill_tensor_value_bcast",
         lambda m, x, v: m.masked_fill(x, m.tensor(MASK23[:, :, None]), v),
         lambda x, v: _masked_fill(x, MASK23[:, :, None], v), ((3, 1), ()),
         "MaskedFillBackward1", False),
    Case("masked_select", lambda m, x: x.masked_select(m.tensor(MASK34)),
         lambda x: x[MASK34], (S34,), "MaskedSelectBackward0", False),
    Case("masked_select_fn_bcast", lambda m, x: m.masked_select(x, m.tensor(MASK34[1])),
         lambda x: x[:, MASK34[1]].reshape(-1), (S34,), "MaskedSelectBackward0", False),
    Case("masked_select_bigger_mask", lambda m, x: x.masked_select(m.tensor(MASK34)),
         lambda x: np.broadcast_to(x, (3, 4))[MASK34], ((3, 1),), "MaskedSelectBackward0",
         False),
    # -- take / select -------------------------------------------------------------------
    Case("take", lambda m, x: x.take(m.tensor([[0, -1], [5, 5]])),
         lambda x: x.reshape(-1)[np.array([[0, -1], [5, 5]])], (S34,), "TakeBackward0",
         False),
    Case("take_fn_noncontig", lambda m, x: m.take(x.t(), m.tensor([1, 2, 1])),
         lambda x: x.T.reshape(-1)[[1, 2, 1]], (S34,), "TakeBackward0", False),
    Case("select", lambda m, x: m.select(x, 1, -1), lambda x: x[:, -1], (S34,),
         "SelectBackward0", True),
    Case("select_method", lambda m, x: x.select(0, 2), lambda x: x[2], (S34,),
         "SelectBackward0", True),
    # -- compositions --------------------------------------------------------------------
    Case("composite", lambda m, x, s: x.index_select(0, m.tensor([1, 1]))
         .scatter_add(1, m.tensor([[0, 0], [3, 3]]), s).gather(1, m.tensor([[0], [3]])),
         lambda x, s: _take_along(_scatter_add(x[[1, 1]], np.array([[0, 0], [3, 3]]), s, 1),
                                  np.array([[0], [3]]), 1), (S34, (2, 2)),
         "GatherBackward0"),
]

globals().update(table_tests(OPS))


# ----------------------------------------------------------------------------------------
# indexing semantics beyond the table
# ----------------------------------------------------------------------------------------
def test_list_holding_tensors_is_a_tuple_index_as_torch(torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = x[[m.tensor(2), m.tensor(1)]]
        res.append((y.detach().numpy(), node_name(y)))
    assert res[0][0] == res[1][0] == 9.0
    assert res[0][1] == res[1][1] == "SelectBackward0"


def test_uint8_index_is_a_mask_with_a_warning():
    x = cgrad.tensor(np.arange(12.0).reshape(3, 4))
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        y = x[cgrad.tensor(np.array([1, 0, 1], np.uint8))]
    np.testing.assert_array_equal(np_of(y), np.arange(12.0).reshape(3, 4)[[0, 2]])


def test_repeated_indices_accumulate(torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        y = x[[0, 0, 2], [1, 1, 1]].sum() + x[m.tensor([1, 1, 1])].sum() * 2 \
            + x.gather(1, m.tensor(IDUP)).sum() + x.take(m.tensor([0, 0, -1])).sum() \
            + x.index_select(1, m.tensor([2, 2])).sum()
        y.backward()
        res.append(x.grad.numpy())
    np.testing.assert_array_equal(res[0], res[1])


@pytest.mark.parametrize("layout", ["rows", "middle", "int32", "float32_small"])
def test_large_repeated_index_gradients_match_torch(layout, torch):
    """The sparse selection-matrix path of accumulate_along (large rows) and the linear-index
    path agree with torch, including repeated and negative indices."""
    rng = np.random.default_rng(7)
    if layout == "rows":
        shape, dim, n = (50, 64), 0, 3000
    elif layout == "middle":
        shape, dim, n = (3, 40, 32), 1, 2000
    elif layout == "int32":
        shape, dim, n = (20, 8), 0, 9000
    else:
        shape, dim, n = (6, 5), 1, 40
    dt = np.float64 if layout != "float32_small" else np.float32
    data = rng.standard_normal(shape).astype(dt)
    idx = rng.integers(-shape[dim], shape[dim], n)
    idx_sel = np.where(idx < 0, idx + shape[dim], idx)
    if layout == "int32":
        idx = idx.astype(np.int32)
        idx_sel = idx_sel.astype(np.int32)
    vshape = shape[:dim] + (n,) + shape[dim + 1:]
    vdata = rng.standard_normal(vshape).astype(dt)
    res = []
    for m in (cgrad, torch):
        x = m.tensor(data, requires_grad=True)
        y = x[(slice(None),) * dim + (m.tensor(idx),)]
        (g1,) = m.autograd.grad(y, [x], m.tensor(vdata))
        z = x.index_select(dim, m.tensor(idx_sel))
        (g2,) = m.autograd.grad(z, [x], m.tensor(vdata))
        res.append((g1.numpy(), g2.numpy()))
    tol = dict(rtol=1e-10, atol=1e-10) if dt == np.float64 else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(res[0][0], res[1][0], **tol)
    np.testing.assert_allclose(res[0][1], res[1][1], **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,n", [((28, 64), 0, 512), ((65, 64), 0, 512),
                                          ((3, 40, 32), 1, 300), ((7, 3), 0, 20),
                                          ((400, 1), 0, 20000), ((4, 300, 16), 1, 5000)])
@pytest.mark.parametrize("compiled", [True, False])
def test_scatter_add_paths_are_bitwise_equal(shape, axis, n, dtype, compiled):
    """Note [Scatter-add order]: accumulate_along (CSR product or linear add.at, by size) sums
    in the order of np.add.at into zeros (sequential in index order), bitwise, with signed
    zeros, infinities and NaNs among the rows; the CSR product by cgrad._sparse's compiled
    kernels and by scipy alike."""
    from cgrad.ops import indexing
    if compiled and indexing._sparse_ext is None:
        pytest.skip("cgrad._sparse not built")
    prev = indexing._SELECT_EXT
    indexing._SELECT_EXT = compiled
    try:
        _scatter_add_case(indexing.accumulate_along, shape, axis, n, dtype)
    finally:
        indexing._SELECT_EXT = prev


def _scatter_add_case(accumulate_along, shape, axis, n, dtype):
    rng = np.random.default_rng(5)
    m = shape[axis]
    idx = rng.integers(0, m, n)
    src = (rng.standard_normal(shape[:axis] + (n,) + shape[axis + 1:]) * 1e3).astype(dtype)
    flat = src.reshape(-1)
    flat[:7] = [-0.0, np.inf, -np.inf, np.nan, -0.0, 1e30, -1e30]
    got = accumulate_along(np.zeros(shape, dtype), axis, idx, src)
    ref = np.zeros(shape, dtype)
    np.add.at(ref, (slice(None),) * axis + (idx,), src)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref)
    assert np.array_equal(np.signbit(got), np.signbit(ref))


def test_index_backward_of_int_after_slice_places_gradient(torch):
    """Torch's two-step order: the int is applied first, then the list."""
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
        y = x[1, 1:, [0, 3, 3]]
        y.backward(m.tensor(np.arange(1.0, 7.0).reshape(tuple(y.shape))))
        res.append((tuple(y.shape), x.grad.numpy()))
    assert res[0][0] == res[1][0] == (2, 3)
    np.testing.assert_array_equal(res[0][1], res[1][1])


def test_scatter_src_larger_than_index_gets_zero_padded_gradient():
    """torch's backward fails here (it returns a gradient shaped as index); cgrad pads it."""
    x = cgrad.zeros(3, 4, dtype=cgrad.float64, requires_grad=True)
    s = cgrad.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    for fn in (lambda: x.scatter(1, cgrad.tensor(I31), s),
               lambda: x.scatter_add(1, cgrad.tensor(I31), s)):
        (gs,) = cgrad.autograd.grad(fn(), [s], cgrad.ones(3, 4, dtype=cgrad.float64))
        np.testing.assert_array_equal(np_of(gs), [[1, 0], [1, 0], [1, 0]])


def test_scatter_reduce_forward_and_missing_derivative(torch):
    for reduce, src in (("add", True), ("multiply", False)):
        res = []
        for m in (cgrad, torch):
            x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
            val = m.tensor(np.full((3, 3), 2.0), requires_grad=True) if src else 3.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = x.scatter(1, m.tensor(IDUP), val, reduce=reduce)
            res.append((y.detach().numpy(), node_name(y)))
            with pytest.raises(RuntimeError, match="derivative for aten::scatter is not "
                                                   "implemented"):
                y.sum().backward()
        np.testing.assert_array_equal(res[0][0], res[1][0])
        assert res[0][1] == res[1][1] == "NotImplemented"


DOUBLE_BACKWARD_NODES = [
    ("index", lambda m, x: x[[0, 0, 2]], "IndexPutImplBackward0"),
    ("select", lambda m, x: x[1], "SelectBackwardBackward0"),
    ("slice", lambda m, x: x[1:3], "SliceBackwardBackward0"),
    ("gather", lambda m, x: x.gather(1, m.tensor(I31)), "ScatterAddBackward0"),
    ("index_select", lambda m, x: x.index_select(0, m.tensor([0, 0])), "IndexAddBackward0"),
    ("masked_fill", lambda m, x: x.masked_fill(m.tensor(MASK34), 1.0), "MaskedFillBackward0"),
    ("take", lambda m, x: x.take(m.tensor([1, 1])), "PutBackward0"),
]


@pytest.mark.parametrize("name,fn,node", DOUBLE_BACKWARD_NODES,
                         ids=[d[0] for d in DOUBLE_BACKWARD_NODES])
def test_gradient_nodes_named_as_torch(name, fn, node, torch):
    for m in (cgrad, torch):
        x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        y = fn(m, x)
        v = m.ones(tuple(y.shape), dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad(y, [x], v, create_graph=True)
        assert node_name(g) == node, m.__name__


# ----------------------------------------------------------------------------------------
# errors (type and key phrase, checked in both libraries)
# ----------------------------------------------------------------------------------------
def _x(m):
    return m.zeros(3, 4)


def _i(m, a, dt=None):
    return m.tensor(np.asarray(a, dtype=dt))


ERRORS = [
    ("getitem_int_oob", lambda m: _x(m)[5], IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    ("getitem_neg_int_oob", lambda m: _x(m)[0, -5], IndexError,
     "index -5 is out of bounds for dimension 1 with size 4"),
    ("getitem_list_oob", lambda m: _x(m)[[0, 5]], IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    ("getitem_tensor_oob", lambda m: _x(m)[_i(m, [-4])], IndexError,
     "index -4 is out of bounds for dimension 0 with size 3"),
    ("getitem_list_oob_dim1", lambda m: _x(m)[:, [0, 5]], IndexError,
     "index 5 is out of bounds for dimension"),
    ("getitem_too_many", lambda m: _x(m)[0, 0, 0], IndexError,
     "too many indices for tensor of dimension 2"),
    ("getitem_0d_int", lambda m: m.tensor(1.0)[0], IndexError,
     "invalid index of a 0-dim tensor. Use `tensor.item()` in Python"),
    ("getitem_0d_slice", lambda m: m.tensor(1.0)[0:1], IndexError,
     "slice() cannot be applied to a 0-dim tensor."),
    ("getitem_0d_list", lambda m: m.tensor(1.0)[[0]], IndexError,
     "too many indices for tensor of dimension 0"),
    ("getitem_float_tensor", lambda m: _x(m)[m.tensor([0.0, 1.0])], IndexError,
     "tensors used as indices must be long, int, byte or bool tensors"),
    ("getitem_float", lambda m: _x(m)[1.0], IndexError,
     "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
     "valid indices (got float)"),
    ("getitem_mask_shape", lambda m: _x(m)[_i(m, [True, False])], IndexError,
     "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
     "[3, 4] at index 0"),
    ("index_select_float", lambda m: _x(m).index_select(0, m.tensor([0.0])), RuntimeError,
     "index_select(): Expected dtype int32 or int64 for index"),
    ("index_select_2d", lambda m: _x(m).index_select(0, _i(m, [[0]])), IndexError,
     "index_select(): Index is supposed to be a vector"),
    ("index_select_oob", lambda m: _x(m).index_select(0, _i(m, [0, 3])), IndexError,
     "index out of range in self"),
    ("index_select_negative", lambda m: _x(m).index_select(0, _i(m, [-1])), IndexError,
     "index out of range in self"),
    ("index_select_0d_many", lambda m: m.tensor(1.0).index_select(0, _i(m, [0, 0])),
     RuntimeError, "index_select(): Index to scalar can have only 1 value, got 2 value(s)"),
    ("gather_float", lambda m: _x(m).gather(1, m.tensor([[0.0]])), RuntimeError,
     "gather(): Expected dtype int32/int64 for index"),
    ("gather_oob", lambda m: _x(m).gather(1, _i(m, [[0], [1], [5]])), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    ("gather_negative", lambda m: _x(m).gather(1, _i(m, [[-1]])), RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 4"),
    ("gather_ndim", lambda m: _x(m).gather(1, _i(m, [0, 1])), RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    ("gather_size", lambda m: _x(m).gather(1, _i(m, [[0]] * 4)), RuntimeError,
     "Size does not match at dimension 0 expected index [4, 1] to be no larger than self "
     "[3, 4] apart from dimension 1"),
    ("scatter_oob", lambda m: _x(m).scatter(1, _i(m, I31 * 5), 1.0), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    ("scatter_float_index", lambda m: _x(m).scatter(1, m.tensor([[0.0]]), 1.0), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_src_dtype", lambda m: _x(m).scatter(1, _i(m, I31), m.ones(3, 1,
                                                                         dtype=m.float64)),
     RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter_ndim", lambda m: _x(m).scatter(1, _i(m, [0]), 1.0), RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
    ("scatter_src_small", lambda m: _x(m).scatter(1, _i(m, [[0, 1]]), m.ones(1, 1)),
     RuntimeError, "Expected index [1, 2] to be no larger than self [3, 4] apart from "
                   "dimension 1 and to be no larger size than src [1, 1]"),
    ("scatter_reduce_name", lambda m: _x(m).scatter(1, _i(m, I31), 1.0, reduce="max"),
     RuntimeError, "reduce argument must be either add or multiply."),
    ("scatter_add_oob", lambda m: _x(m).scatter_add(0, _i(m, [[3]]), m.ones(1, 1)),
     RuntimeError, "index 3 is out of bounds for dimension 0 with size 3"),
    ("scatter_add_dtype", lambda m: _x(m).scatter_add(1, _i(m, I31), m.ones(3, 1,
                                                                             dtype=m.float64)),
     RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("index_add_oob", lambda m: _x(m).index_add(0, _i(m, [0, 5]), m.ones(2, 4)),
     RuntimeError, "index 5 is out of bounds for dimension 0 with size 3"),
    ("index_add_count", lambda m: _x(m).index_add(0, _i(m, [0, 1]), m.ones(3, 4)),
     RuntimeError, "index_add_(): Number of indices (2) should be equal to source.size(dim): "
                   "(3), for dim: 0"),
    ("index_add_shape", lambda m: _x(m).index_add(0, _i(m, [0]), m.ones(1, 3)), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension. "
     "Got self.shape = [3, 4] source.shape = [1, 3]"),
    ("index_add_dtype", lambda m: _x(m).index_add(0, _i(m, [0]), m.ones(1, 4,
                                                                        dtype=m.float64)),
     RuntimeError, "index_add_(): self (Float) and source (Double) must have the same scalar "
                   "type"),
    ("index_add_float_index", lambda m: _x(m).index_add(0, m.tensor([0.0]), m.ones(1, 4)),
     RuntimeError, "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    ("index_add_2d_index", lambda m: _x(m).index_add(0, _i(m, [[0]]), m.ones(1, 4)),
     IndexError, "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: "
                 "Long and size: [1, 1]"),
    ("masked_fill_float_mask", lambda m: _x(m).masked_fill(m.ones(3, 4), 1.0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype float"),
    ("masked_fill_long_mask", lambda m: _x(m).masked_fill(_i(m, [1, 0, 0, 1]), 1.0),
     RuntimeError, "masked_fill_ only supports boolean masks, but got mask with dtype long int"),
    ("masked_fill_uint8_mask", lambda m: _x(m).masked_fill(_i(m, [1, 0, 0, 1], np.uint8), 1.0),
     RuntimeError, "but got mask with dtype unsigned char"),
    ("masked_fill_value_1d", lambda m: _x(m).masked_fill(_i(m, MASK34), m.ones(1)),
     RuntimeError, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                   "with 1 dimension(s)."),
    ("masked_fill_bcast", lambda m: _x(m).masked_fill(_i(m, [True, False, True]), 1.0),
     RuntimeError, "The size of tensor a (3) must match the size of tensor b (4) at "
                   "non-singleton dimension 1"),
    ("masked_select_bcast", lambda m: _x(m).masked_select(_i(m, [True, False, True])),
     RuntimeError, "The size of tensor a (3) must match the size of tensor b (4) at "
                   "non-singleton dimension 1"),
    ("masked_select_float_mask", lambda m: _x(m).masked_select(m.ones(3, 4)), RuntimeError,
     "masked_select: expected BoolTensor for mask"),
    ("take_oob", lambda m: _x(m).take(_i(m, [12])), IndexError,
     "out of range: tried to access index 12 on a tensor of 12 elements."),
    ("take_negative_oob", lambda m: _x(m).take(_i(m, [-13])), IndexError,
     "out of range: tried to access index -13 on a tensor of 12 elements."),
    ("take_int32", lambda m: _x(m).take(_i(m, [1], np.int32)), RuntimeError,
     "take(): Expected a long tensor for index, but got Int"),
    ("select_oob", lambda m: _x(m).select(1, 4), IndexError,
     "select(): index 4 out of range for tensor of size [3, 4] at dimension 1"),
    ("select_dim", lambda m: _x(m).select(2, 0), IndexError, "Dimension out of range"),
]


@pytest.mark.parametrize("name,fn,exc,phrase", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn, exc, phrase, torch):
    check_errors(ERRORS, name, fn, exc, phrase, torch)
