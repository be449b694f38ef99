"""Silent wrong answers and gaps found by adversarial testing (part A).

1. spmm's cached sparse structure follows every way an index tensor's data can change
   (NumPy writes to a from_numpy array, t.numpy()[...] =, t.data =, in-place cgrad ops, a
   read-only view of a writeable array, new objects in a dead one's memory), and an index
   edited out of range is reported (Note [Index cache] in cgrad/sparse/_pattern.py).
2. Reductions over tensors with zero elements (amax/amin with dim= raised AttributeError:
   the ops module's own ``any`` hid Python's), and a machine check that no module of cgrad
   uses a builtin's name that one of its own module-level names hides.
3. Reference cycles that cgrad cannot see (Note [Untracked graphs] in cgrad/_C.pyx) are
   still collected: a ctx attribute holding a NumPy scalar subclass instance with a
   __dict__, writes into vars(ctx), and every other way to add a reference to an
   untracked node or tensor.
4. Tensor attributes, ``x[..., ...]``, ``x[None, ..., None]``, float-list indices, and
   cgrad.linalg inv / det / slogdet / solve / cholesky / qr / eigh (values and gradients
   against finite differences and torch).
"""
from __future__ import annotations

import gc
import os
import sys
import weakref

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402,F401


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# ========================================================================================
# 1. spmm: the structure cache never serves stale indices
# ========================================================================================
def _dense(idx, vals, shape):
    a = np.zeros(shape)
    np.add.at(a, (idx[0], idx[1]), vals)
    return a


def _check_spmm(idx_obj, idx_now, vals, shape, B):
    """spmm with the index object equals the product with its current indices."""
    out = cgrad.spmm(idx_obj, cgrad.tensor(vals), shape, cgrad.tensor(B))
    np.testing.assert_allclose(out.numpy(), _dense(idx_now, vals, shape) @ B, rtol=1e-12)


def _base():
    return (np.array([[0, 1], [1, 0]], dtype=np.int64), np.array([1.0, 2.0]),
            np.array([[1.0], [10.0]]))


def test_spmm_sees_numpy_writes_to_a_from_numpy_tensor():
    a, vals, _ = _base()
    B = np.ones((2, 1))
    idx = cgrad.from_numpy(a)
    out = cgrad.spmm(idx, cgrad.tensor(vals), (2, 2), cgrad.tensor(B))
    assert out.flatten().tolist() == [1.0, 2.0]
    a[0, :] = [1, 1]                                    # behind cgrad's back
    out = cgrad.spmm(idx, cgrad.tensor(vals), (2, 2), cgrad.tensor(B))
    assert out.flatten().tolist() == [0.0, 3.0]         # was [1, 2] (stale structure)


def test_spmm_sees_writes_through_numpy_view_of_tensor():
    a, vals, B = _base()
    idx = cgrad.tensor(a)
    _check_spmm(idx, a, vals, (2, 2), B)
    idx.numpy()[1, 0] = 0
    _check_spmm(idx, idx.numpy(), vals, (2, 2), B)
    view = idx.numpy()[:, 1]                            # a strided view of the tensor
    view[:] = [0, 0]
    _check_spmm(idx, idx.numpy(), vals, (2, 2), B)


def test_spmm_sees_data_reassignment_and_inplace_ops():
    a, vals, B = _base()
    idx = cgrad.tensor(a)
    _check_spmm(idx, a, vals, (2, 2), B)
    idx.data = cgrad.tensor([[1, 1], [0, 1]])
    _check_spmm(idx, np.array([[1, 1], [0, 1]]), vals, (2, 2), B)
    idx[0, 0] = 0
    _check_spmm(idx, np.array([[0, 1], [0, 1]]), vals, (2, 2), B)
    idx.sub_(idx)
    _check_spmm(idx, np.zeros((2, 2), dtype=np.int64), vals, (2, 2), B)
    idx.copy_(cgrad.tensor([[1, 0], [1, 1]]))
    _check_spmm(idx, np.array([[1, 0], [1, 1]]), vals, (2, 2), B)


def test_spmm_sees_writes_to_the_writeable_base_of_a_read_only_view():
    a, vals, B = _base()
    ro = a.view()
    ro.flags.writeable = False                          # cached: read-only arrays are keys
    _check_spmm(ro, a, vals, (2, 2), B)
    a[1, :] = [1, 1]
    _check_spmm(ro, a, vals, (2, 2), B)


def test_spmm_sees_other_index_dtypes_and_layouts_change():
    a, vals, B = _base()
    a32 = a.astype(np.int32)
    idx = cgrad.from_numpy(a32)                         # converted copy inside cgrad
    _check_spmm(idx, a, vals, (2, 2), B)
    a32[0, 0] = 1
    _check_spmm(idx, a32, vals, (2, 2), B)
    at = np.asfortranarray(a)                           # non-contiguous rows
    idx = cgrad.from_numpy(at)
    _check_spmm(idx, at, vals, (2, 2), B)
    at[1, 1] = 1
    _check_spmm(idx, at, vals, (2, 2), B)


def test_spmm_new_tensors_in_dead_ones_memory_are_not_confused():
    # ids and addresses of dead tensors are reused at once by CPython: every fresh index
    # tensor must get its own structure
    rng = np.random.default_rng(0)
    B = rng.standard_normal((5, 3))
    vals = rng.standard_normal(7)
    buf = np.empty((2, 7), dtype=np.int64)
    ids = set()
    for _ in range(30):
        buf[...] = rng.integers(0, 5, (2, 7))
        idx = cgrad.from_numpy(buf)                     # same memory, a new tensor each time
        ids.add(id(idx))
        _check_spmm(idx, buf, vals, (5, 5), B)
        del idx
        idx = cgrad.tensor(rng.integers(0, 5, (2, 7)))
        _check_spmm(idx, idx.numpy(), vals, (5, 5), B)
        del idx
    assert len(ids) < 30                                # the test did exercise id reuse


def test_spmm_index_edited_out_of_range_is_reported(torch):
    a, vals, B = _base()
    idx = cgrad.from_numpy(a)
    _check_spmm(idx, a, vals, (2, 2), B)
    a[0, 1] = 10 ** 9
    msg = "size is inconsistent with indices: for dim 0, size is 2 but found index 1000000000"
    with pytest.raises(RuntimeError, match=msg):
        cgrad.spmm(idx, cgrad.tensor(vals), (2, 2), cgrad.tensor(B))
    # torch's message for the same indices (the check torch runs with invariant checks on)
    with pytest.raises(RuntimeError, match=msg):
        torch.sparse_coo_tensor(torch.from_numpy(a), torch.tensor(vals), (2, 2),
                                check_invariants=True)
    a[0, 1] = -1
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        cgrad.spmm(idx, cgrad.tensor(vals), (2, 2), cgrad.tensor(B))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        torch.sparse_coo_tensor(torch.from_numpy(a), torch.tensor(vals), (2, 2),
                                check_invariants=True)
    a[0, 1] = 1                                         # valid again: works again
    _check_spmm(idx, a, vals, (2, 2), B)


def test_spmm_after_edits_matches_torch(torch):
    rng = np.random.default_rng(3)
    N, nnz, F = 6, 15, 4
    a = rng.integers(0, N, (2, nnz))
    idx = cgrad.from_numpy(a)
    vals = rng.standard_normal(nnz)
    B = rng.standard_normal((N, F))
    G = rng.standard_normal((N, F))
    for step in range(5):
        v = cgrad.tensor(vals, requires_grad=True)
        b = cgrad.tensor(B, requires_grad=True)
        cgrad.spmm(idx, v, (N, N), b).backward(cgrad.tensor(G))
        tv = torch.tensor(vals, requires_grad=True)
        tb = torch.tensor(B, requires_grad=True)
        ts = torch.sparse_coo_tensor(torch.tensor(a), tv, (N, N), check_invariants=True)
        torch.sparse.mm(ts, tb).backward(torch.tensor(G))
        np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)
        a[:, step] = rng.integers(0, N, 2)              # NumPy write between steps


def test_backward_uses_the_structure_of_its_forward():
    # the structure saved for backward is the Pattern's own copy: an edit between forward
    # and backward cannot mix two structures in one gradient
    a, vals, B = _base()
    idx = cgrad.from_numpy(a)
    v = cgrad.tensor(vals, requires_grad=True)
    b = cgrad.tensor(B, requires_grad=True)
    out = cgrad.spmm(idx, v, (2, 2), b)
    a[0, :] = [1, 1]
    out.backward(cgrad.tensor([[1.0], [100.0]]))
    # forward entries (0,1) and (1,0): d/dv_k = G[row_k] . B[col_k], d/dB = A.T @ G
    np.testing.assert_allclose(v.grad.numpy(), [10.0, 100.0])
    np.testing.assert_allclose(b.grad.numpy(), [[200.0], [1.0]])


def test_sddmm_sees_index_changes():
    rng = np.random.default_rng(1)
    G, Bm = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    a = np.array([[0, 1, 2], [2, 1, 0]])
    idx = cgrad.from_numpy(a)
    out = cgrad.sparse.sddmm(idx, cgrad.tensor(G), cgrad.tensor(Bm))
    np.testing.assert_allclose(out.numpy(), np.einsum("ij,ij->i", G[a[0]], Bm[a[1]]))
    a[1] = [0, 0, 2]
    out = cgrad.sparse.sddmm(idx, cgrad.tensor(G), cgrad.tensor(Bm))
    np.testing.assert_allclose(out.numpy(), np.einsum("ij,ij->i", G[a[0]], Bm[a[1]]))


def test_sparse_tensor_structure_cannot_be_edited_behind_its_caches():
    a, vals, B = _base()
    idx = cgrad.from_numpy(a)
    s = cgrad.sparse_coo_tensor(idx, vals, (2, 2))
    before = (s @ cgrad.tensor(B)).numpy().copy()
    # the sparse tensor holds its own copy of the indices (torch would alias them: cgrad's
    # products cache structure on them, so they are taken at construction)
    a[0, :] = [1, 1]
    np.testing.assert_array_equal((s @ cgrad.tensor(B)).numpy(), before)
    np.testing.assert_array_equal(s._indices().numpy(), [[0, 1], [1, 0]])
    # ... and they are read-only: a write raises instead of corrupting the cached CSR
    with pytest.raises((ValueError, RuntimeError)):
        s._indices().numpy()[0, 0] = 1
    with pytest.raises((ValueError, RuntimeError)):
        s._indices().add_(1)
    np.testing.assert_array_equal((s @ cgrad.tensor(B)).numpy(), before)
    # a new sparse tensor from the edited index tensor sees the edit
    s2 = cgrad.sparse_coo_tensor(idx, vals, (2, 2))
    np.testing.assert_allclose((s2 @ cgrad.tensor(B)).numpy(), _dense(a, vals, (2, 2)) @ B)


def test_gat_example_heads_index_follows_edits():
    # the path of examples/gat.py: a from_numpy index tensor kept across steps
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    try:
        import gat
    finally:
        sys.path.pop(0)
    g = gat.Graph(np.array([[0, 1, 2], [1, 2, 0]]), 3)
    idx = g.heads_index(2)
    n = 3 * 2
    rng = np.random.default_rng(2)
    vals = rng.standard_normal(idx.shape[1])
    B = rng.standard_normal((n, 3))
    _check_spmm(idx, idx.numpy(), vals, (n, n), B)
    idx.numpy()[1, :3] = 0
    _check_spmm(idx, idx.numpy(), vals, (n, n), B)
