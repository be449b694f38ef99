"""Searching and deduplication (cgrad/ops/searching.py): searchsorted, bucketize, unique,
unique_consecutive, against torch: values, dtypes and shapes on random inputs with
repeats and NaNs (in values and boundaries, 1-D and N-D boundaries, sorter, scalars), the
tuple each returns, torch's not-implemented derivative, and torch's errors.
"""
from __future__ import annotations

import numpy as np
import pytest

import cgrad


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _same(rc, rt):
    assert type(rc).__name__ == type(rt).__name__
    for p, q in zip(_as_tuple(rc), _as_tuple(rt)):
        assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert len(_as_tuple(rc)) == len(_as_tuple(rt))


def test_searchsorted_and_bucketize_random(torch):
    rng = np.random.default_rng(0)
    for trial in range(150):
        n, k = int(rng.integers(0, 9)), int(rng.integers(0, 6))
        b = np.sort(rng.integers(0, 5, n)).astype(np.float64)
        if trial % 5 == 0 and n:
            b[-1] = np.nan
        v = rng.integers(-1, 6, k).astype(np.float64)
        if trial % 3 == 0 and k:
            v[0] = np.nan
        for right in (False, True):
            _same(cgrad.searchsorted(cgrad.tensor(b), cgrad.tensor(v), right=right),
                  torch.searchsorted(torch.tensor(b), torch.tensor(v), right=right))
            _same(cgrad.bucketize(cgrad.tensor(v), cgrad.tensor(b), right=right),
                  torch.bucketize(torch.tensor(v), torch.tensor(b), right=right))
        if n:
            perm = rng.permutation(n)
            sorter = np.argsort(perm)
            for side in ("left", "right"):
                _same(cgrad.searchsorted(cgrad.tensor(b[perm]), cgrad.tensor(v), side=side,
                                         sorter=cgrad.tensor(sorter)),
                      torch.searchsorted(torch.tensor(b[perm]), torch.tensor(v), side=side,
                                         sorter=torch.tensor(sorter)))
        B = np.sort(rng.integers(0, 5, (2, 3, n)), axis=-1).astype(np.float32)
        V = rng.integers(-1, 6, (2, 3, k)).astype(np.float32)
        _same(cgrad.searchsorted(cgrad.tensor(B), cgrad.tensor(V), out_int32=True),
              torch.searchsorted(torch.tensor(B), torch.tensor(V), out_int32=True))


SEARCH_CASES = [
    ("scalar", lambda m: m.searchsorted(m.tensor([1.0, 2.0, 3.0]), 2)),
    ("scalar_right", lambda m: m.searchsorted(m.tensor([1, 2, 3]), 2.5, right=True)),
    ("bool_scalar", lambda m: m.searchsorted(m.tensor([1, 2, 3]), True)),
    ("0d", lambda m: m.searchsorted(m.tensor([1.0, 2.0, 3.0]), m.tensor(2.0))),
    ("promotion", lambda m: m.searchsorted(m.tensor([1, 2, 3], dtype=m.uint8),
                                           m.tensor([-1, 300]))),
    ("int_float", lambda m: m.searchsorted(m.tensor([1, 2, 3]), m.tensor([1.5, 2.0]))),
    ("half", lambda m: m.searchsorted(m.tensor([1.0, 2.0, 3.0], dtype=m.float16),
                                      m.tensor([2.5]))),
    ("empty_boundaries", lambda m: m.searchsorted(m.zeros(0), m.tensor([1.0]))),
    ("empty_values", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.zeros(0, 3))),
    ("side_right_not_right", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]),
                                                      right=False, side="right")),
    ("nd_rows", lambda m: m.searchsorted(m.tensor([[1.0, 2.0], [3.0, 4.0]]),
                                         m.tensor([[1.5, 0, 9], [3.5, 4, 3]]), side="right")),
    ("bucketize_scalar", lambda m: m.bucketize(2, m.tensor([1.0, 2.0, 3.0]), right=True)),
    ("bucketize_int32", lambda m: m.bucketize(m.tensor([[1.0, 2.5]]), m.tensor([1.0, 2.0, 3.0]),
                                              out_int32=True)),
]


@pytest.mark.parametrize("name,fn", SEARCH_CASES, ids=[c[0] for c in SEARCH_CASES])
def test_search_cases(name, fn, torch):
    _same(fn(cgrad), fn(torch))


def test_unique_random(torch):
    rng = np.random.default_rng(1)
    for trial in range(80):
        a = rng.integers(0, 4, (int(rng.integers(1, 6)), int(rng.integers(1, 6))))
        a = a.astype(np.float64)
        if trial % 4 == 0:
            a[0, 0] = np.nan
        for kw in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True, "sorted": False}):
            ckw = {k: v for k, v in kw.items() if k != "sorted"}
            _same(cgrad.unique(cgrad.tensor(a), **kw), torch.unique(torch.tensor(a), **kw))
            _same(cgrad.unique_consecutive(cgrad.tensor(a), **ckw),
                  torch.unique_consecutive(torch.tensor(a), **ckw))
            for d in (0, 1, -1):
                _same(cgrad.tensor(a).unique(dim=d, **kw), torch.tensor(a).unique(dim=d, **kw))
                _same(cgrad.tensor(a).unique_consecutive(dim=d, **ckw),
                      torch.tensor(a).unique_consecutive(dim=d, **ckw))


def test_unique_dim_with_nans_in_long_inputs(torch):
    """torch orders slices holding NaNs as its std::sort leaves them (Note [Tie order])."""
    rng = np.random.default_rng(2)
    for _ in range(30):
        a = rng.integers(0, 3, (int(rng.integers(17, 60)), 3)).astype(np.float64)
        a[rng.integers(0, a.shape[0], size=3), rng.integers(0, 3, size=3)] = np.nan
        kw = {"dim": 0, "return_inverse": True, "return_counts": True}
        rc, rt = cgrad.unique(cgrad.tensor(a), **kw), torch.unique(torch.tensor(a), **kw)
        for p, q in zip(rc, rt):
            np.testing.assert_array_equal(p.numpy(), q.numpy())


UNIQUE_CASES = [
    ("0d", lambda m: m.unique(m.tensor(3.0))),
    ("0d_inverse", lambda m: m.unique(m.tensor(3.0), return_inverse=True)),
    ("consecutive_0d", lambda m: m.unique_consecutive(m.tensor(3.0), return_inverse=True,
                                                      return_counts=True)),
    ("empty", lambda m: m.unique(m.zeros(0), return_inverse=True, return_counts=True)),
    ("empty_dim0", lambda m: m.unique(m.zeros(0, 3), dim=0, return_counts=True)),
    ("empty_selected", lambda m: m.unique(m.zeros(2, 0), dim=1, return_inverse=True,
                                          return_counts=True)),
    ("signed_zero", lambda m: m.unique(m.tensor([0.0, -0.0, 1.0]), return_inverse=True)),
    ("bool", lambda m: m.unique(m.tensor([True, False, True]), return_counts=True)),
    ("int32", lambda m: m.unique(m.tensor([3, 1, 2, 1], dtype=m.int32), return_inverse=True)),
    ("2d_inverse", lambda m: m.unique(m.tensor([[1, 2], [3, 1]]), return_inverse=True)),
    ("dim_tensor", lambda m: m.unique(m.tensor([1, 2]), dim=m.tensor(0))),
    ("positional", lambda m: m.tensor([[1, 2], [1, 2], [3, 4]]).unique(True, True, True, 0)),
    ("consecutive_positional", lambda m: m.tensor([[1, 2], [1, 2], [3, 4]])
     .unique_consecutive(True, True, 0)),
    ("nan_rows", lambda m: m.unique(m.tensor([[1.0, np.nan], [1.0, np.nan]]), dim=0)),
    ("consecutive_nans", lambda m: m.unique_consecutive(
        m.tensor([1.0, np.nan, np.nan, 1.0]), return_counts=True, return_inverse=True)),
]


@pytest.mark.parametrize("name,fn", UNIQUE_CASES, ids=[c[0] for c in UNIQUE_CASES])
def test_unique_cases(name, fn, torch):
    _same(fn(cgrad), fn(torch))


@pytest.mark.parametrize("fn,node,aten", [
    (lambda x: x.unique(), "Unique2Backward0", "_unique2"),
    (lambda x: x.unique(return_counts=True)[0], "Unique2Backward0", "_unique2"),
    (lambda x: x.unique(dim=0), "UniqueDimBackward0", "unique_dim"),
    (lambda x: cgrad.unique_consecutive(x), "UniqueConsecutiveBackward0", "unique_consecutive"),
    (lambda x: x.unique_consecutive(dim=1), "UniqueConsecutiveBackward0",
     "unique_consecutive"),
])
def test_unique_has_torchs_not_implemented_derivative(fn, node, aten):
    x = cgrad.tensor([[1.0, 2.0], [1.0, 2.0]], requires_grad=True)
    y = fn(x)
    assert y.requires_grad and type(y.grad_fn).__name__ == node
    with pytest.raises(NotImplementedError,
                       match=f"the derivative for '{aten}' is not implemented."):
        y.sum().backward()
    inv = x.unique(return_inverse=True)[1]
    assert inv.dtype == np.int64 and not inv.requires_grad


def test_search_results_have_no_gradient():
    x = cgrad.tensor([0.5, 1.5], requires_grad=True)
    r = cgrad.searchsorted(cgrad.tensor([0.0, 1.0, 2.0]), x)
    assert r.dtype == np.int64 and not r.requires_grad and r.grad_fn is None
    assert cgrad.bucketize(x, cgrad.tensor([1.0]), out_int32=True).dtype == np.int32


ERRORS = [
    ("side", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]), side="middle"),
     RuntimeError, "searchsorted\\(\\): side can only be 'left' or 'right' but got middle"),
    ("side_conflict", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]),
                                               right=True, side="left"),
     RuntimeError, "side and right can't be set to opposites, got side of left while right "
                   "was True"),
    ("boundaries_0d", lambda m: m.searchsorted(m.tensor(1.0), m.tensor([1.0])), RuntimeError,
     "boundaries tensor should have positive dimension, but got 0 dimension"),
    ("dims", lambda m: m.searchsorted(m.tensor([[1.0, 2.0]]), m.tensor([1.0, 2.0])),
     RuntimeError, r"boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                   r"boundaries tensor and input value tensor must match, but we got "
                   r"boundaries tensor \[1, 2\] and input value tensor \[2\]"),
    ("leading_dims", lambda m: m.searchsorted(m.ones(2, 2), m.ones(3, 2)), RuntimeError,
     "first N-1 dimensions of boundaries tensor and input value tensor must match"),
    ("scalar_nd", lambda m: m.searchsorted(m.tensor([[1.0, 2.0]]), 1.0), RuntimeError,
     r"input value can be a scalar only when boundaries tensor dimension is 1, but we got "
     r"boundaries tensor dim\(2\) and input value's dim\(0\) numel\(1\)"),
    ("sorter_dtype", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]),
                                              sorter=m.tensor([0, 1], dtype=m.int32)),
     RuntimeError, "sorter must be a tensor of long dtype but got dtype Int"),
    ("sorter_shape", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]),
                                              sorter=m.tensor([0])),
     RuntimeError, r"boundary and sorter must have the same size, but got boundary tensor "
                   r"\[2\]and got sorter tensor \[1\]"),
    ("sorter_range", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]),
                                              sorter=m.tensor([0, 5])),
     RuntimeError, "sorter index out of range"),
    ("bool", lambda m: m.searchsorted(m.tensor([True, False]), m.tensor([True])),
     NotImplementedError, "\"searchsorted_out_cpu\" not implemented for 'Bool'"),
    ("list_values", lambda m: m.searchsorted(m.tensor([1.0, 2.0]), [1.0]), TypeError,
     r"searchsorted\(\) received an invalid combination of arguments - got \(Tensor, list\)"),
    ("list_boundaries", lambda m: m.searchsorted([1.0, 2.0], m.tensor([1.0])), TypeError,
     "received an invalid combination of arguments"),
    ("bucketize_2d", lambda m: m.bucketize(m.tensor([1.0]), m.tensor([[1.0, 2.0]])),
     RuntimeError, r"boundaries tensor must be 1 dimension, but got dim\(2\)"),
    ("bucketize_0d", lambda m: m.bucketize(m.tensor([1.0]), m.tensor(1.0)), RuntimeError,
     r"boundaries tensor must be 1 dimension, but got dim\(0\)"),
    ("unique_dim_0d", lambda m: m.unique(m.tensor(3.0), dim=0), IndexError,
     "Dimension specified as 0 but tensor has no dimensions"),
    ("unique_dim_range", lambda m: m.unique(m.ones(2, 3), dim=2), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ("unique_dim_float", lambda m: m.unique(m.ones(2), dim=1.0), TypeError,
     r"unique_dim\(\): argument 'dim' \(position 2\) must be int, not float"),
    ("unique_zero_dims", lambda m: m.unique(m.zeros(0, 3), dim=1), RuntimeError,
     "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied"),
    ("consecutive_zero_dims", lambda m: m.unique_consecutive(m.zeros(0, 3), dim=1),
     RuntimeError, "There are 0 sized dimensions, and they aren't selected"),
    ("consecutive_dim_0d", lambda m: m.unique_consecutive(m.tensor(3.0), dim=0), IndexError,
     "Dimension specified as 0 but tensor has no dimensions"),
]


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(cgrad)


@pytest.mark.parametrize("name,fn,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_agree_with_torch(name, fn, exc, msg, torch):
    with pytest.raises(exc, match=msg):
        fn(torch)


# ----------------------------------------------------------------------------------------
# the existing ops issue 17 asked to check (nonzero, where(cond), argwhere, count_nonzero,
# max/min with dim): results and return types as torch's
# ----------------------------------------------------------------------------------------
A = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, np.nan]])
EXISTING = [
    ("nonzero", lambda m: m.tensor(A).nonzero()),
    ("nonzero_as_tuple", lambda m: m.tensor(A).nonzero(as_tuple=True)),
    ("nonzero_fn_as_tuple", lambda m: m.nonzero(m.tensor(A), as_tuple=True)),
    ("nonzero_0d", lambda m: m.tensor(5.0).nonzero()),
    ("nonzero_0d_zero_as_tuple", lambda m: m.tensor(0.0).nonzero(as_tuple=True)),
    ("nonzero_empty", lambda m: m.zeros(0, 3).nonzero(as_tuple=True)),
    ("argwhere", lambda m: m.argwhere(m.tensor(A))),
    ("argwhere_0d", lambda m: m.tensor(3.0).argwhere()),
    ("where_condition_only", lambda m: m.where(m.tensor(A) > 0)),
    ("where_condition_only_0d", lambda m: m.where(m.tensor(True))),
    ("count_nonzero", lambda m: m.count_nonzero(m.tensor(A))),
    ("count_nonzero_dims", lambda m: m.tensor(A).count_nonzero(dim=(0, 1))),
    ("count_nonzero_neg", lambda m: m.tensor(A).count_nonzero(-1)),
    ("max_dim", lambda m: m.tensor(A[:, :2]).max(1)),
    ("min_dim_keepdim", lambda m: m.min(m.tensor(A[:, :2]), dim=0, keepdim=True)),
    ("max_dim_int_ties", lambda m: m.tensor([[1, 5, 5], [2, 2, 0]]).max(1)),
]


@pytest.mark.parametrize("name,fn", EXISTING, ids=[e[0] for e in EXISTING])
def test_existing_ops_match_torch(name, fn, torch):
    rc, rt = fn(cgrad), fn(torch)
    assert type(rc).__name__ == type(rt).__name__
    if name.startswith(("max", "min")):
        assert type(rc).__module__ == "cgrad.return_types"
        assert rc.values is rc[0] and rc.indices is rc[1]
    for p, q in zip(_as_tuple(rc), _as_tuple(rt)):
        assert tuple(p.shape) == tuple(q.shape) and str(p.dtype) == str(q.dtype)[6:]
        np.testing.assert_array_equal(p.numpy(), q.numpy())
