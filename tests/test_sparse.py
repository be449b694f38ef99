"""Sparse COO tensors (cgrad/sparse): construction, torch's API and printing, autograd.

* construction, attributes, coalescing rules, errors and repr equal torch's (repr compared
  character for character after ``torch`` -> ``cgrad``);
* every differentiable sparse op (sparse_coo_tensor, coalesce, to_dense, to_sparse, t,
  values, matmul/mm/sparse.mm, sum, softmax, log_softmax, scalar and dense arithmetic) has
  torch's node name and torch's gradients, both for values that require grad and for sparse
  leaves (dense .grad for matmul/mm, sparse .grad on the coalesced pattern for sparse.mm,
  to_dense, sum, ...), and passes gradcheck through the values (float64) and a sparse-aware
  check for sparse leaves ("on the pattern");
* sparse gradients stay sparse through accumulation (engine sums, leaf .grad, retain_grad);
* a sparse tensor works inside a custom Function: pyGAT's SpecialSpmmFunction, verbatim,
  gives the gradients of dense NumPy math, of torch, and of cgrad.spmm (karate club graph);
* dense ops refuse sparse tensors loudly (never computing with the placeholder);
* segment_sum / segment_max / segment_gather (for attention layers).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402

I = [[0, 1, 1, 0], [2, 0, 2, 2]]            # (0, 2) is stored twice
V = [1.0, 2.0, 3.0, 4.0]


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    return t


def _cg(requires_grad=False, dtype=None, values=V):
    return cgrad.sparse_coo_tensor(I, values, (2, 3), dtype=dtype, requires_grad=requires_grad)


def _th(torch, requires_grad=False, dtype=None, values=V):
    return torch.sparse_coo_tensor(torch.tensor(I), torch.tensor(values, dtype=dtype), (2, 3),
                                   requires_grad=requires_grad)


def _same_repr(c, t):
    assert repr(c) == repr(t).replace("torch", "cgrad")


def _dense(s):
    return s.detach().to_dense().numpy() if s.is_sparse else s.detach().numpy()


# ----------------------------------------------------------------------------------------
# construction, attributes, printing
# ----------------------------------------------------------------------------------------
def test_repr_matches_torch(torch):
    _same_repr(_cg(), _th(torch))
    _same_repr(_cg(dtype=cgrad.float64), _th(torch, dtype=torch.float64))
    _same_repr(_cg(requires_grad=True), _th(torch, requires_grad=True))
    _same_repr(cgrad.sparse_coo_tensor(I, [1, 2, 3, 4], (2, 3)),
               torch.sparse_coo_tensor(torch.tensor(I), torch.tensor([1, 2, 3, 4]), (2, 3)))
    _same_repr(cgrad.sparse_coo_tensor(np.zeros((2, 0), dtype=np.int64), np.zeros(0), (3, 3)),
               torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long),
                                       torch.zeros(0, dtype=torch.float64), (3, 3)))
    _same_repr(cgrad.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,)),
               torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (4,)))
    v = cgrad.tensor(V, requires_grad=True)
    tv = torch.tensor(V, requires_grad=True)
    _same_repr(cgrad.sparse_coo_tensor(I, v, (2, 3)),
               torch.sparse_coo_tensor(torch.tensor(I), tv, (2, 3)))
    _same_repr(cgrad.sparse_coo_tensor(I, v, (2, 3)).coalesce(),
               torch.sparse_coo_tensor(torch.tensor(I), tv, (2, 3)).coalesce())
    assert str(_cg()) == repr(_cg())


def test_attributes():
    s = _cg()
    assert s.is_sparse and not cgrad.ones(2).is_sparse
    assert s.layout is cgrad.sparse_coo and repr(s.layout) == "cgrad.sparse_coo"
    assert s.shape == cgrad.Size([2, 3]) and s.size() == (2, 3) and s.size(1) == 3
    assert s.dtype == cgrad.float32 and s.dim() == 2 and s.ndim == 2 and s.numel() == 6
    assert s._nnz() == 4 and s.sparse_dim() == 2 and s.dense_dim() == 0 and len(s) == 2
    assert isinstance(s, cgrad.Tensor) and cgrad.is_tensor(s)
    assert s._indices().tolist() == I and s._indices().dtype == cgrad.int64
    assert s._values().tolist() == V
    assert not s.is_coalesced() and not s.requires_grad and s.is_leaf


def test_inferred_size_dtype_and_inputs():
    s = cgrad.sparse_coo_tensor(I, V)
    assert s.shape == (2, 3)
    assert cgrad.sparse_coo_tensor(I, V, dtype=cgrad.float64).dtype == cgrad.float64
    assert cgrad.sparse_coo_tensor(np.array(I, dtype=np.int32), V)._indices().dtype == cgrad.int64
    assert cgrad.sparse_coo_tensor(cgrad.tensor(I), np.array(V), cgrad.Size([2, 5])).shape == (2, 5)
    assert cgrad.sparse_coo_tensor(I, cgrad.tensor(V, dtype=cgrad.float64)).dtype == cgrad.float64
    e = cgrad.sparse_coo_tensor(np.zeros((2, 0), dtype=np.int64), np.zeros(0))
    assert e.shape == (0, 0) and e._nnz() == 0


def test_construction_errors(torch):
    with pytest.raises(RuntimeError, match="indices and values must have same nnz, but got nnz "
                                           "from indices: 4, nnz from values: 3"):
        cgrad.sparse_coo_tensor(I, V[:3], (2, 3))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size "
                                           "is 1 but found index 1"):
        cgrad.sparse_coo_tensor(I, V, (1, 3))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 1"):
        cgrad.sparse_coo_tensor([[0, 1], [-1, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="indices must be an int64 tensor"):
        cgrad.sparse_coo_tensor(np.array(I, dtype=float), V, (2, 3))
    with pytest.raises(RuntimeError, match="float16"):
        cgrad.sparse_coo_tensor(I, V, (2, 3), dtype=cgrad.float16)
    with pytest.raises(NotImplementedError, match="dense_dim"):
        cgrad.sparse_coo_tensor(I, np.ones((4, 2)), (2, 3))
    with pytest.raises(NotImplementedError, match="1-D or 2-D"):
        cgrad.sparse_coo_tensor([[0], [0], [0]], [1.0], (1, 1, 1))
    with pytest.raises(RuntimeError, match=r"number of dimensions must be sparse_dim \(2\)"):
        cgrad.sparse_coo_tensor(I, V, (3,))
    # torch agrees on the nnz message
    with pytest.raises(RuntimeError, match="indices and values must have same nnz"):
        torch.sparse_coo_tensor(torch.tensor(I), torch.tensor(V[:3]), (2, 3))


def test_coalescing_rules(torch):
    s = _cg()
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor, please "
                                           r"call .coalesce\(\) first"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    c = s.coalesce()
    tc = _th(torch).coalesce()
    _same_repr(c, tc)
    assert c.is_coalesced() and c.coalesce() is c
    assert c.indices().tolist() == tc.indices().tolist()
    assert c.values().tolist() == tc.values().tolist()
    # construction never coalesces, even sorted unique indices (torch), unless asserted
    sorted_ = cgrad.sparse_coo_tensor([[0, 1], [0, 1]], [1.0, 2.0])
    assert not sorted_.is_coalesced()
    assert cgrad.sparse_coo_tensor([[0, 1], [0, 1]], [1.0, 2.0], is_coalesced=True).is_coalesced()
    assert sorted_.coalesce()._pattern is sorted_._pattern      # already canonical: no work
    # duplicates sum in to_dense, and a 1-D tensor coalesces too
    np.testing.assert_array_equal(s.to_dense().numpy(), [[0, 0, 5], [2, 0, 3]])
    one = cgrad.sparse_coo_tensor([[3, 0, 3]], [1.0, 2.0, 4.0], (5,)).coalesce()
    assert one.indices().tolist() == [[0, 3]] and one.values().tolist() == [2.0, 5.0]


def test_t_transpose_to_dense_to_sparse(torch):
    s = _cg()
    _same_repr(s.t(), _th(torch).t())
    _same_repr(s.transpose(0, 1), _th(torch).transpose(0, 1))
    assert s.transpose(1, 1) is s
    np.testing.assert_array_equal(s.t().to_dense().numpy(), s.to_dense().numpy().T)
    d = cgrad.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    td = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    _same_repr(d.to_sparse(), td.to_sparse())
    assert d.to_sparse().is_coalesced() and d.to_sparse().to_sparse() is not None
    _same_repr(cgrad.tensor([0.0, 2.0, 0.0]).to_sparse(), torch.tensor([0.0, 2.0, 0.0]).to_sparse())
    np.testing.assert_array_equal(d.to_sparse().to_dense().numpy(), d.numpy())
    assert s.to_dense(dtype=cgrad.float64).dtype == cgrad.float64


def test_scipy_round_trip():
    import scipy.sparse as sp
    s = _cg(dtype=cgrad.float64)
    m = s.to_scipy()
    assert isinstance(m, sp.coo_array)      # coo_array: `*` stays elementwise
    np.testing.assert_array_equal(m.toarray(), s.to_dense().numpy())
    back = cgrad.sparse.from_scipy(m)
    assert back._indices().tolist() == I and back._values().tolist() == V
    csr = sp.csr_matrix(np.array([[0, 1.0, 0], [2.0, 0, 3.0]]))
    t = cgrad.sparse.from_scipy(csr, dtype=cgrad.float32, requires_grad=True)
    assert t.is_coalesced() and t.requires_grad and t.dtype == cgrad.float32
    np.testing.assert_array_equal(t.detach().to_dense().numpy(), csr.toarray())
    with pytest.raises(TypeError, match="scipy.sparse"):
        cgrad.sparse.from_scipy(np.eye(2))


def test_detach_data_clone_to():
    v = cgrad.tensor(V, requires_grad=True)
    s = cgrad.sparse_coo_tensor(I, v, (2, 3))
    d = s.detach()
    assert d.is_sparse and not d.requires_grad and d._vals is s._vals
    assert s.data.is_sparse and s.data.grad_fn is None
    c = s.clone()
    assert c.is_sparse and type(c.grad_fn).__name__ == "CloneBackward0"
    assert c._vals is not s._vals
    t64 = s.to(cgrad.float64)
    assert t64.is_sparse and t64.dtype == cgrad.float64
    assert type(t64.grad_fn).__name__ == "ToCopyBackward0"
    assert s.double().dtype == cgrad.float64 and s.float() is s
    t64.to_dense().sum().backward()
    assert v.grad.dtype == cgrad.float32 and v.grad.tolist() == [1.0, 1.0, 1.0, 1.0]


# ----------------------------------------------------------------------------------------
# dense ops refuse sparse tensors (never compute with the placeholder)
# ----------------------------------------------------------------------------------------
def test_unsupported_ops_raise(torch):
    s = _cg()
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy. Use "
                                        r"Tensor.to_dense\(\) first."):
        s.numpy()
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        np.asarray(s)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use "
                                           r"add\(dense, sparse\) instead."):
        s + cgrad.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s + 1
    with pytest.raises(RuntimeError, match="reshape is not implemented for sparse tensors"):
        s.reshape(-1)
    with pytest.raises(RuntimeError, match="Cannot access data pointer"):
        s.tolist()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        s.item()
    with pytest.raises(RuntimeError, match="unsupported memory format"):
        s.contiguous()
    for fn in (lambda: s.view(-1), lambda: s[0], lambda: cgrad.exp(s), lambda: s.exp(),
               lambda: s.mean(), lambda: s * s, lambda: s ** 2, lambda: -s @ s,
               lambda: s.unsqueeze(0), lambda: s.expand(4, 2, 3),
               lambda: s.max(), lambda: s.abs(), lambda: s > 0, lambda: bool(s[0, 0])):
        with pytest.raises(NotImplementedError, match="'SparseCPU' backend"):
            fn()
    # the placeholder itself refuses arithmetic and copies
    for fn in (lambda: s._data + 1, lambda: s._data.copy(), lambda: np.exp(s._data),
               lambda: s._data.astype(float), lambda: s._data.reshape(-1), lambda: s._data.T,
               lambda: np.einsum("ij->", s._data), lambda: s._data.view(np.ndarray)):
        with pytest.raises(NotImplementedError):
            fn()
    # torch also refuses these
    with pytest.raises(NotImplementedError):
        _th(torch).view(-1)


def test_operators_that_work(torch):
    s, ts = _cg(), _th(torch)
    for fn in (lambda m, s: s * 2, lambda m, s: 2 * s, lambda m, s: s / 4, lambda m, s: -s,
               lambda m, s: s + s, lambda m, s: s - s * 3, lambda m, s: s * m.ones(2, 3) * 2,
               lambda m, s: s.t() * 1.5, lambda m, s: s.add(s, alpha=2)):
        np.testing.assert_allclose(_dense(fn(cgrad, s)), _dense(fn(torch, ts)), rtol=1e-6)
    d = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for fn in (lambda m, s: m.tensor(d) + s, lambda m, s: m.tensor(d) - s):
        r = fn(cgrad, s)
        assert not r.is_sparse
        np.testing.assert_allclose(_dense(r), _dense(fn(torch, ts)), rtol=1e-6)
    r = d + s                                     # ndarray + sparse: the dense result
    assert not r.is_sparse and np.allclose(r.numpy(), d + s.to_dense().numpy())
    assert (s + s).is_coalesced() is False and (s.coalesce() + s.coalesce()).is_coalesced()
    with pytest.raises(RuntimeError, match="same size"):
        s + cgrad.sparse_coo_tensor([[0]], [1.0], (4,))


# ----------------------------------------------------------------------------------------
# autograd: node names and gradients equal torch's
# ----------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
D34 = RNG.standard_normal((3, 4)).astype(np.float32)
D3 = RNG.standard_normal(3).astype(np.float32)
D23 = RNG.standard_normal((2, 3)).astype(np.float32)
D53 = RNG.standard_normal((5, 3)).astype(np.float32)
D52 = RNG.standard_normal((5, 2)).astype(np.float32)

# name -> (fn(module, sparse), node name of the result)
OPS = {
    "matmul": (lambda m, s: m.matmul(s, m.tensor(D34)), "MmBackward0"),
    "matmul_vec": (lambda m, s: m.matmul(s, m.tensor(D3)), None),
    "at": (lambda m, s: s @ m.tensor(D34), "MmBackward0"),
    "mm": (lambda m, s: m.mm(s, m.tensor(D34)), "MmBackward0"),
    "method_mm": (lambda m, s: s.mm(m.tensor(D34)), "MmBackward0"),
    "sparse.mm": (lambda m, s: m.sparse.mm(s, m.tensor(D34)), "SparseAddmmBackward0"),
    "dense_at_sparse": (lambda m, s: m.tensor(D52) @ s, "MmBackward0"),
    "vec_at_sparse": (lambda m, s: m.tensor(D52[0]) @ s, None),
    "dense_at_sparse_t": (lambda m, s: m.tensor(D53) @ s.t(), "MmBackward0"),
    "to_dense": (lambda m, s: s.to_dense(), "ToDenseBackward0"),
    "sum": (lambda m, s: m.sparse.sum(s), "SumBackward0"),
    "method_sum": (lambda m, s: s.sum(), "SumBackward0"),
    "sum0": (lambda m, s: m.sparse.sum(s, 0), "SparseSumBackward0"),
    "sum1": (lambda m, s: m.sparse.sum(s, 1), "SparseSumBackward0"),
    "sum01": (lambda m, s: m.sparse.sum(s, (0, 1)), "SparseSumBackward0"),
    "softmax1": (lambda m, s: m.sparse.softmax(s, 1), "SparseSoftmaxBackward0"),
    "softmax0": (lambda m, s: m.sparse.softmax(s, 0), "SparseSoftmaxBackward0"),
    "log_softmax1": (lambda m, s: m.sparse.log_softmax(s, 1), "SparseLogSoftmaxBackward0"),
    "coalesce": (lambda m, s: s.coalesce(), "CoalesceBackward0"),
    "t": (lambda m, s: s.t(), "TBackward0"),
    "values": (lambda m, s: s.coalesce().values(), "ValuesBackward0"),
    "mul": (lambda m, s: s * 3, "MulBackward0"),
    "div": (lambda m, s: s / 3, "DivBackward0"),
    "neg": (lambda m, s: -s, "NegBackward0"),
    "add": (lambda m, s: s + s * 2, "AddBackward0"),
    "sub": (lambda m, s: s - s * 2, "SubBackward0"),
    "dense_add": (lambda m, s: m.tensor(D23) + s, "AddBackward0"),
    "to_double": (lambda m, s: s.double(), "ToCopyBackward0"),
}


def _loss(m, out, w):
    """A scalar with a distinct weight per position (so gradients are not all equal)."""
    d = out.to_dense() if out.is_sparse else out
    return (d * m.tensor(w.astype(np.float64 if d.dtype == m.float64 else np.float32))).sum()


def _weights(out):
    return np.arange(1, 1 + int(np.prod(out.shape)), dtype=np.float64).reshape(tuple(out.shape)) / 7


@pytest.mark.parametrize("name", list(OPS))
def test_gradient_through_values_matches_torch(torch, name):
    fn, node = OPS[name]
    v = cgrad.tensor(V, requires_grad=True)
    tv = torch.tensor(V, requires_grad=True)
    out = fn(cgrad, cgrad.sparse_coo_tensor(I, v, (2, 3)))
    tout = fn(torch, torch.sparse_coo_tensor(torch.tensor(I), tv, (2, 3)))
    assert out.is_sparse == tout.is_sparse and tuple(out.shape) == tuple(tout.shape)
    assert out.dtype == getattr(np, str(tout.dtype).split(".")[1])
    np.testing.assert_allclose(_dense(out), _dense(tout), rtol=1e-5, atol=1e-6)
    if node is not None:
        assert type(out.grad_fn).__name__ == node == type(tout.grad_fn).__name__
    w = _weights(out)
    _loss(cgrad, out, w).backward()
    _loss(torch, tout, w).backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [n for n in OPS if n not in ("values", "dense_at_sparse_t")])
def test_sparse_leaf_grad_matches_torch(torch, name):
    """.grad of a sparse leaf: dense for matmul/mm (torch), sparse (coalesced) elsewhere."""
    fn, _ = OPS[name]
    s = _cg(requires_grad=True)
    ts = _th(torch, requires_grad=True)
    out, tout = fn(cgrad, s), fn(torch, ts)
    w = _weights(out)
    _loss(cgrad, out, w).backward()
    _loss(torch, tout, w).backward()
    assert s.grad.is_sparse == ts.grad.is_sparse, (s.grad, ts.grad)
    assert s.grad.dtype == s.dtype
    np.testing.assert_allclose(_dense(s.grad), _dense(ts.grad), rtol=1e-5, atol=1e-6)
    if s.grad.is_sparse and ts.grad.is_coalesced():
        _same_repr(s.grad, ts.grad)


def _sparse_leaf_check(fn, s, eps=1e-6, atol=1e-5, rtol=1e-3):
    """gradcheck for a sparse leaf "on the pattern": perturb each stored value and compare
    with the leaf's .grad read at the entry's position (masked semantics)."""
    s.grad = None
    out = fn(s)
    outs = out if isinstance(out, tuple) else (out,)
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(tuple(o.shape)) for o in outs]

    def scalar(t):
        res = fn(t)
        res = res if isinstance(res, tuple) else (res,)
        return sum(float((_dense(r) * w).sum()) for r, w in zip(res, ws))

    loss = None
    for o, w in zip(outs, ws):
        d = o.to_dense() if o.is_sparse else o
        term = (d * cgrad.tensor(w)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    g = s.grad
    idx = s._pattern.idx
    analytic = (_dense(g)[idx[0], idx[1]] if s.dim() == 2 else _dense(g)[idx[0]])
    base = s._vals
    numeric = np.empty(base.shape[0])
    for k in range(base.shape[0]):
        vals = []
        for sign in (1, -1):
            v = base.copy()
            v[k] += sign * eps
            vals.append(scalar(cgrad.sparse_coo_tensor(idx, v, tuple(s.shape))))
        numeric[k] = (vals[0] - vals[1]) / (2 * eps)
    # duplicates: each stored copy moves the matrix entry by the same amount
    np.testing.assert_allclose(analytic, numeric, atol=atol, rtol=rtol)
    return True


SPARSE_FNS = {
    "sparse.mm": lambda s: cgrad.sparse.mm(s, cgrad.tensor(D34.astype(np.float64))),
    "matmul": lambda s: cgrad.matmul(s, cgrad.tensor(D34.astype(np.float64))),
    "to_dense": lambda s: s.to_dense(),
    "sum": lambda s: cgrad.sparse.sum(s),
    "sum1": lambda s: cgrad.sparse.sum(s, 1),
    "softmax1": lambda s: cgrad.sparse.softmax(s, 1),
    "softmax0": lambda s: cgrad.sparse.softmax(s, 0),
    "log_softmax1": lambda s: cgrad.sparse.log_softmax(s, 1),
    "coalesce": lambda s: s.coalesce(),
    "t_mm": lambda s: s.t() @ cgrad.tensor(D23.astype(np.float64)),
    "mul_dense": lambda s: s * cgrad.tensor(D23.astype(np.float64)),
    "add": lambda s: cgrad.tensor(D23.astype(np.float64)) + s * cgrad.tensor(2.5).double(),
    "dense_at_sparse": lambda s: cgrad.tensor(D53.astype(np.float64)) @ s.t(),
}


@pytest.mark.parametrize("name", list(SPARSE_FNS))
def test_gradcheck_sparse_leaf_on_pattern(name):
    s = cgrad.sparse_coo_tensor(I, np.array(V) / 3, (2, 3), requires_grad=True)
    assert _sparse_leaf_check(SPARSE_FNS[name], s)


@pytest.mark.parametrize("name", list(SPARSE_FNS))
def test_gradcheck_through_values(name):
    fn = SPARSE_FNS[name]

    def f(v):
        out = fn(cgrad.sparse_coo_tensor(I, v, (2, 3)))
        return out.to_dense() if out.is_sparse else out

    v = cgrad.tensor(np.array(V) / 3, requires_grad=True)
    assert gradcheck(f, (v,))
    if name in ("sparse.mm", "to_dense", "softmax1", "log_softmax1", "sum1", "t_mm"):
        assert gradgradcheck(f, (v,))


def test_softmax_negative_dim():
    """dim=-1 is dim=1 (torch 2.13's backward for a negative dim is wrong: its row gradients
    do not sum to zero, so cgrad is compared with torch's dim=1 above)."""
    for fn in (cgrad.sparse.softmax, cgrad.sparse.log_softmax):
        grads = []
        for d in (1, -1):
            v = cgrad.tensor(V, requires_grad=True)
            out = fn(cgrad.sparse_coo_tensor(I, v, (2, 3)), d)
            (out.to_dense() * cgrad.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))).sum() \
                .backward()
            grads.append(v.grad.numpy())
        np.testing.assert_array_equal(grads[0], grads[1])
    g = grads[0]
    assert abs(g[1] + g[2]) < 1e-6 or fn is cgrad.sparse.log_softmax


def test_matmul_grad_of_a_transposed_leaf_is_on_the_pattern(torch):
    """Documented difference: matmul/mm give a sparse *leaf* torch's dense .grad; for a
    sparse operand computed from the leaf (here leaf.t()) cgrad keeps the gradient on the
    pattern (O(nnz * F)), where torch densifies; both agree on the pattern."""
    s, ts = _cg(requires_grad=True), _th(torch, requires_grad=True)
    (cgrad.tensor(D53) @ s.t()).sum().backward()
    (torch.tensor(D53) @ ts.t()).sum().backward()
    assert s.grad.is_sparse and not ts.grad.is_sparse
    cp = s._pattern.coalesced()[0]
    np.testing.assert_allclose(s.grad.coalesce().values().numpy(),
                               ts.grad.numpy()[cp.idx[0], cp.idx[1]], rtol=1e-6)


def test_softmax_and_sum_of_a_1d_tensor(torch):
    idx, vals = [[3, 0, 3, 1]], [1.0, 2.0, 0.5, -1.0]
    for fn in (lambda m, s: m.sparse.softmax(s, 0), lambda m, s: m.sparse.sum(s, 0),
               lambda m, s: m.sparse.log_softmax(s, 0), lambda m, s: s.coalesce()):
        v, tv = cgrad.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
        out = fn(cgrad, cgrad.sparse_coo_tensor(idx, v, (5,)))
        tout = fn(torch, torch.sparse_coo_tensor(torch.tensor(idx), tv, (5,)))
        np.testing.assert_allclose(_dense(out), _dense(tout), rtol=1e-6)
        w = np.arange(1, 6, dtype=np.float32) if out.dim() else np.float32(2)
        (_dense_t(cgrad, out) * cgrad.tensor(w)).sum().backward()
        (_dense_t(torch, tout) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-7)


def _dense_t(m, t):
    return t.to_dense() if t.is_sparse else t


def test_no_graph_under_no_grad():
    v = cgrad.tensor(V, requires_grad=True)
    with cgrad.no_grad():
        s = cgrad.sparse_coo_tensor(I, v, (2, 3))
        out = cgrad.sparse.softmax(s, 1) @ cgrad.ones(3, 2)
    assert s.grad_fn is None and not s.requires_grad and out.grad_fn is None


def test_requires_grad_leaf_and_errors():
    s = _cg(requires_grad=True)
    assert s.requires_grad and s.is_leaf and s.grad is None
    with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point"):
        cgrad.sparse_coo_tensor(I, [1, 2, 3, 4], (2, 3), requires_grad=True)
    v = cgrad.tensor(V, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        cgrad.sparse_coo_tensor(I, v, (2, 3), requires_grad=True)


# ----------------------------------------------------------------------------------------
# accumulation: sparse gradients stay sparse
# ----------------------------------------------------------------------------------------
def test_sparse_grad_accumulates_sparse_and_keeps_identity():
    s = _cg(requires_grad=True)
    B = cgrad.tensor(D34)
    cgrad.sparse.mm(s, B).sum().backward()
    g = s.grad
    first = g.to_dense().numpy().copy()
    assert g.is_sparse and g.is_coalesced() and g._nnz() == 3
    cgrad.sparse.mm(s, B).sum().backward()
    assert s.grad is g and g.is_sparse and g._nnz() == 3       # same pattern: values add
    np.testing.assert_allclose(g.to_dense().numpy(), 2 * first, rtol=1e-6)
    cgrad.sparse.sum(cgrad.sparse.softmax(s, 1) * 0.5).backward()   # another sparse grad
    assert s.grad.is_sparse
    (s.to_dense() * 0).sum().backward()                             # sparse + sparse
    cgrad.matmul(s, B).sum().backward()                             # + dense: becomes dense
    assert not s.grad.is_sparse
    dense_grad = s.grad
    cgrad.sparse.mm(s, B).sum().backward()                          # dense += sparse in place
    assert s.grad is dense_grad


def test_two_uses_sum_in_the_engine():
    v = cgrad.tensor(V, requires_grad=True)
    s = cgrad.sparse_coo_tensor(I, v, (2, 3))
    B = cgrad.tensor(D34)
    # two sparse gradients (same pattern) and a dense one reach s's node
    out = cgrad.sparse.mm(s, B).sum() + cgrad.sparse.mm(s, B * 2).sum() + s.to_dense().sum()
    out.backward()
    ref = 3 * D34.sum(1)[np.array(I[1])] + 1
    np.testing.assert_allclose(v.grad.numpy(), ref, rtol=1e-5)
    leaf = _cg(requires_grad=True)
    (cgrad.sparse.mm(leaf, B).sum() * 2 + cgrad.sparse.sum(leaf)).backward()
    assert leaf.grad.is_sparse


def test_create_graph_through_sparse():
    v = cgrad.tensor(np.array(V, dtype=np.float64), requires_grad=True)
    B = cgrad.tensor(D34.astype(np.float64), requires_grad=True)
    out = (cgrad.sparse.mm(cgrad.sparse_coo_tensor(I, v, (2, 3)), B) ** 2).sum()
    gv, = cgrad.autograd.grad(out, v, create_graph=True)
    assert gv.requires_grad
    gv.sum().backward()
    # d/dB of sum_k dL/dv_k, by finite differences of the first gradient
    eps, Bn = 1e-6, D34.astype(np.float64)
    A = np.zeros((2, 3))
    np.add.at(A, (np.array(I[0]), np.array(I[1])), V)

    def first(Bx):
        G = 2 * (A @ Bx)
        return (G @ Bx.T)[np.array(I[0]), np.array(I[1])].sum()

    num = np.zeros_like(Bn)
    for j in np.ndindex(*Bn.shape):
        Bp, Bm = Bn.copy(), Bn.copy()
        Bp[j] += eps
        Bm[j] -= eps
        num[j] = (first(Bp) - first(Bm)) / (2 * eps)
    np.testing.assert_allclose(B.grad.numpy(), num, rtol=1e-5, atol=1e-6)


def test_retain_grad_and_hooks_on_sparse_nonleaf():
    v = cgrad.tensor(V, requires_grad=True)
    s = cgrad.sparse_coo_tensor(I, v, (2, 3))
    s.retain_grad()
    seen = []
    s.register_hook(lambda g: seen.append(g.is_sparse))
    B = cgrad.tensor(D34)
    (cgrad.sparse.mm(s, B).sum() + cgrad.sparse.sum(s)).backward()
    assert s.grad.is_sparse and seen == [True]
    cp = s._pattern.coalesced()[0]
    expected = np.zeros((2, 3), dtype=np.float32)
    expected[cp.idx[0], cp.idx[1]] = (D34.sum(1)[cp.idx[1]] + 1)
    np.testing.assert_allclose(s.grad.to_dense().numpy(), expected, rtol=1e-5)


def test_sparse_gradient_for_a_dense_input():
    """A custom Function may return a sparse gradient for a dense input (torch accepts it);
    the leaf's .grad is then sparse."""
    class Pick(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[0, 1] * 1.0

        @staticmethod
        def backward(ctx, g):
            return cgrad.sparse_coo_tensor([[0], [1]], g.reshape(1) * 1.0, (2, 3))

    x = cgrad.tensor(D23, requires_grad=True)
    Pick.apply(x).backward()
    assert x.grad.is_sparse
    Pick.apply(x).backward()
    assert x.grad.is_sparse and x.grad.to_dense().numpy()[0, 1] == 2.0
    class Pick32(Pick):
        @staticmethod
        def backward(ctx, g):
            return Pick.backward(ctx, g).float()

    y = cgrad.tensor(D23.astype(np.float64), requires_grad=True)
    Pick32.apply(y).backward()            # a float32 sparse grad is cast to the input's dtype
    assert y.grad.is_sparse and y.grad.dtype == cgrad.float64


def test_function_returning_or_saving_a_sparse_tensor():
    class Ident(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            return s

        @staticmethod
        def backward(ctx, g):
            return g

    class Make(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            out = cgrad.sparse_coo_tensor(I, v, (2, 3))
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            assert out.is_sparse
            return g.coalesce().to_dense()[np.array(I[0]), np.array(I[1])] if g.is_sparse \
                else g[np.array(I[0]), np.array(I[1])]

    v = cgrad.tensor(V, requires_grad=True)
    s = cgrad.sparse_coo_tensor(I, v, (2, 3))
    r = Ident.apply(s)
    assert r.is_sparse and r is not s and type(r.grad_fn).__name__ == "IdentBackward"
    r.to_dense().sum().backward()
    assert v.grad.tolist() == [1.0] * 4
    w = cgrad.tensor(V, requires_grad=True)
    m = Make.apply(w)
    assert m.is_sparse and type(m.grad_fn).__name__ == "MakeBackward"
    (m @ cgrad.ones(3, 1)).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0, 1.0]


# ----------------------------------------------------------------------------------------
# pyGAT's SpecialSpmmFunction, verbatim (torch -> cgrad)
# ----------------------------------------------------------------------------------------
class SpecialSpmmFunction(cgrad.autograd.Function):
    """Special function for only sparse region backpropataion layer."""
    @staticmethod
    def forward(ctx, indices, values, shape, b):
        assert indices.requires_grad == False  # noqa: E712
        a = cgrad.sparse_coo_tensor(indices, values, shape)
        ctx.save_for_backward(a, b)
        ctx.N = shape[0]
        return cgrad.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_values = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a_dense = grad_output.matmul(b.t())
            edge_idx = a._indices()[0, :] * ctx.N + a._indices()[1, :]
            grad_values = grad_a_dense.view(-1)[edge_idx]
        if ctx.needs_input_grad[3]:
            grad_b = a.t().matmul(grad_output)
        return None, grad_values, None, grad_b


KARATE = [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 10), (0, 11),
          (0, 12), (0, 13), (0, 17), (0, 19), (0, 21), (0, 31), (1, 2), (1, 3), (1, 7),
          (1, 13), (1, 17), (1, 19), (1, 21), (1, 30), (2, 3), (2, 7), (2, 8), (2, 9), (2, 13),
          (2, 27), (2, 28), (2, 32), (3, 7), (3, 12), (3, 13), (4, 6), (4, 10), (5, 6), (5, 10),
          (5, 16), (6, 16), (8, 30), (8, 32), (8, 33), (9, 33), (13, 33), (14, 32), (14, 33),
          (15, 32), (15, 33), (18, 32), (18, 33), (19, 33), (20, 32), (20, 33), (22, 32),
          (22, 33), (23, 25), (23, 27), (23, 29), (23, 32), (23, 33), (24, 25), (24, 27),
          (24, 31), (25, 31), (26, 29), (26, 33), (27, 33), (28, 31), (28, 33), (29, 32),
          (29, 33), (30, 32), (30, 33), (31, 32), (31, 33), (32, 33)]


def _karate_edges():
    e = np.array(KARATE).T
    n = 34
    loops = np.arange(n)
    # both directions and self-loops, in an unsorted order (as pyGAT's nonzero() is not)
    idx = np.hstack([e, e[::-1], np.vstack([loops, loops])])
    perm = np.random.default_rng(3).permutation(idx.shape[1])
    return idx[:, perm], n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pygat_special_spmm_verbatim(torch, dtype):
    idx, n = _karate_edges()
    rng = np.random.default_rng(4)
    vals = rng.standard_normal(idx.shape[1]).astype(dtype)
    B = rng.standard_normal((n, 8)).astype(dtype)
    G = rng.standard_normal((n, 8)).astype(dtype)
    v = cgrad.tensor(vals, requires_grad=True)
    b = cgrad.tensor(B, requires_grad=True)
    out = SpecialSpmmFunction.apply(cgrad.tensor(idx), v, cgrad.Size([n, n]), b)
    assert type(out.grad_fn).__name__ == "SpecialSpmmFunctionBackward"
    out.backward(cgrad.tensor(G))
    # dense NumPy math
    A = np.zeros((n, n))
    np.add.at(A, (idx[0], idx[1]), vals.astype(np.float64))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), A @ B, **tol)
    np.testing.assert_allclose(v.grad.numpy(), (G.astype(np.float64) @ B.T)[idx[0], idx[1]], **tol)
    np.testing.assert_allclose(b.grad.numpy(), A.T @ G, **tol)
    # cgrad.spmm: the efficient form gives the same gradients
    v2 = cgrad.tensor(vals, requires_grad=True)
    b2 = cgrad.tensor(B, requires_grad=True)
    cgrad.spmm(cgrad.tensor(idx), v2, (n, n), b2).backward(cgrad.tensor(G))
    np.testing.assert_allclose(v2.grad.numpy(), v.grad.numpy(), **tol)
    np.testing.assert_allclose(b2.grad.numpy(), b.grad.numpy(), **tol)
    # the same Function on torch

    class TorchSpmm(torch.autograd.Function):
        forward = staticmethod(lambda ctx, indices, values, shape, b: (
            ctx.save_for_backward(torch.sparse_coo_tensor(indices, values, shape), b),
            setattr(ctx, "N", shape[0]),
            torch.matmul(torch.sparse_coo_tensor(indices, values, shape), b))[2])

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            grad_a_dense = grad_output.matmul(b.t())
            edge_idx = a._indices()[0, :] * ctx.N + a._indices()[1, :]
            return (None, grad_a_dense.view(-1)[edge_idx], None, a.t().matmul(grad_output))

    tv = torch.tensor(vals, requires_grad=True)
    tb = torch.tensor(B, requires_grad=True)
    TorchSpmm.apply(torch.tensor(idx), tv, torch.Size([n, n]), tb).backward(torch.tensor(G))
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), **tol)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **tol)


def test_pygat_needs_input_grad_and_gradcheck():
    idx, n = _karate_edges()
    rng = np.random.default_rng(5)
    it = cgrad.tensor(idx)
    v = cgrad.tensor(rng.standard_normal(idx.shape[1]), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal((n, 2)), requires_grad=True)
    seen = []

    class Spy(SpecialSpmmFunction):
        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return SpecialSpmmFunction.backward(ctx, g)

    Spy.apply(it, v, (n, n), b).sum().backward()
    assert seen == [(False, True, False, True)]
    small = cgrad.tensor(idx[:, :40])
    vs = cgrad.tensor(rng.standard_normal(40), requires_grad=True)
    assert gradcheck(lambda v, b: SpecialSpmmFunction.apply(small, v, (n, n), b), (vs, b))


# ----------------------------------------------------------------------------------------
# segment reductions
# ----------------------------------------------------------------------------------------
def test_segment_sum_and_gather():
    rng = np.random.default_rng(6)
    ids = np.array([2, 0, 2, 3, 0, 2])
    for shape in ((6,), (6, 3)):
        x = rng.standard_normal(shape)
        ref = np.zeros((5,) + shape[1:])
        np.add.at(ref, ids, x)
        out = cgrad.sparse.segment_sum(cgrad.tensor(x), ids, 5)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
        assert out.dtype == cgrad.float64
        xt = cgrad.tensor(x, requires_grad=True)
        f = lambda x: cgrad.sparse.segment_sum(x, cgrad.tensor(ids), 5)  # noqa: E731
        assert type(f(xt).grad_fn).__name__ == "SegmentReduceBackward0"
        assert gradcheck(f, (xt,)) and gradgradcheck(f, (xt,))
        y = cgrad.tensor(rng.standard_normal((5,) + shape[1:]), requires_grad=True)
        gth = lambda y: cgrad.sparse.segment_gather(y, ids)  # noqa: E731
        np.testing.assert_array_equal(gth(y).detach().numpy(), y.detach().numpy()[ids])
        assert gradcheck(gth, (y,)) and gradgradcheck(gth, (y,))
    x32 = cgrad.tensor(rng.standard_normal(6).astype(np.float32))
    assert cgrad.sparse.segment_sum(x32, ids, 4).dtype == cgrad.float32
    with pytest.raises(IndexError, match="out of range"):
        cgrad.sparse.segment_sum(x32, ids, 3)
    with pytest.raises(RuntimeError, match="one id per value"):
        cgrad.sparse.segment_sum(x32, ids[:4], 4)
    with pytest.raises(RuntimeError, match="integer"):
        cgrad.sparse.segment_sum(x32, ids.astype(float), 4)


def test_segment_max(torch):
    ids = np.array([2, 0, 2, 3, 0, 2])
    x = np.array([1.0, -2.0, 5.0, 0.5, -1.0, 3.0])
    out = cgrad.sparse.segment_max(cgrad.tensor(x, requires_grad=True), ids, 5)
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_array_equal(out.numpy(), [-1.0, -np.inf, 5.0, 0.5, -np.inf])
    # torch.segment_reduce gives -inf for an empty segment too
    lengths = torch.tensor([2, 0, 3, 1, 0])
    order = np.argsort(ids, kind="stable")
    ref = torch.segment_reduce(torch.tensor(x[order]), "max", lengths=lengths)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    x2 = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(cgrad.sparse.segment_max(x2, ids, 4).numpy(),
                                  [[8, 9], [-np.inf, -np.inf], [10, 11], [6, 7]])


def test_gat_style_attention_matches_sparse_softmax():
    """segment_max/segment_sum/spmm compose into the row-softmax attention of a GAT layer,
    equal to sparse.softmax + sparse.mm, with equal gradients."""
    idx, n = _karate_edges()
    row, col = idx
    rng = np.random.default_rng(7)
    e = rng.standard_normal(idx.shape[1])
    H = rng.standard_normal((n, 4))
    e1, h1 = cgrad.tensor(e, requires_grad=True), cgrad.tensor(H, requires_grad=True)
    m = cgrad.sparse.segment_max(e1, row, n)
    p = (e1 - cgrad.sparse.segment_gather(m, row)).exp()
    den = cgrad.sparse.segment_sum(p, row, n)
    out1 = cgrad.spmm(idx, p, (n, n), h1) / den.unsqueeze(1)
    e2, h2 = cgrad.tensor(e, requires_grad=True), cgrad.tensor(H, requires_grad=True)
    att = cgrad.sparse.softmax(cgrad.sparse_coo_tensor(idx, e2, (n, n)), 1)
    out2 = cgrad.sparse.mm(att, h2)
    np.testing.assert_allclose(out1.detach().numpy(), out2.detach().numpy(), rtol=1e-10)
    w = cgrad.tensor(rng.standard_normal((n, 4)))
    (out1 * w).sum().backward()
    (out2 * w).sum().backward()
    np.testing.assert_allclose(e1.grad.numpy(), e2.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h1.grad.numpy(), h2.grad.numpy(), rtol=1e-9, atol=1e-12)
