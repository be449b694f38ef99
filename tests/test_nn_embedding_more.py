"""Embedding with sparse gradients (and SGD / SparseAdam stepping on them), max_norm,
padding_idx and scale_grad_by_freq; F.embedding_bag / nn.EmbeddingBag in every mode against
torch; nn.ParameterDict's API against torch's."""
from __future__ import annotations

import os
import sys
from collections import OrderedDict

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


RNG = np.random.default_rng(0)
V, D = 7, 3
WEIGHT = RNG.standard_normal((V, D))
IDX = np.array([[1, 2, 1], [0, 6, 1]])


def _dense(g):
    return (g.to_dense() if g.is_sparse else g).numpy()


# ------------------------------------------------------------------------------------------
# Embedding
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_sparse_gradient_and_optimizers(torch, padding_idx):
    ec = nn.Embedding(V, D, padding_idx=padding_idx, sparse=True, _weight=cgrad.tensor(WEIGHT))
    et = torch.nn.Embedding(V, D, padding_idx=padding_idx, sparse=True,
                            _weight=torch.tensor(WEIGHT))
    assert repr(ec) == repr(et)
    oc = [cgrad.optim.SparseAdam(ec.parameters(), lr=0.1),
          cgrad.optim.SGD(ec.parameters(), lr=0.1, momentum=0.9)]
    ot = [torch.optim.SparseAdam(et.parameters(), lr=0.1),
          torch.optim.SGD(et.parameters(), lr=0.1, momentum=0.9)]
    for step in range(2):
        g = RNG.standard_normal(IDX.shape + (D,))
        (ec(cgrad.tensor(IDX)) * cgrad.tensor(g)).sum().backward()
        (et(torch.tensor(IDX)) * torch.tensor(g)).sum().backward()
        assert ec.weight.grad.is_sparse and et.weight.grad.is_sparse
        assert not ec.weight.grad.is_coalesced() and not et.weight.grad.is_coalesced()
        np.testing.assert_allclose(_dense(ec.weight.grad), _dense(et.weight.grad), atol=1e-12)
        for a, b in zip(oc, ot):
            a.step()
            b.step()
        np.testing.assert_allclose(ec.weight.detach().numpy(), et.weight.detach().numpy(),
                                   atol=1e-12)
        ec.zero_grad()
        et.zero_grad()


def test_sparse_functional_and_scale_grad_refused(torch):
    w = cgrad.tensor(WEIGHT, requires_grad=True)
    F.embedding(cgrad.tensor(IDX), w, sparse=True).sum().backward()
    wt = torch.tensor(WEIGHT, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(IDX), wt, sparse=True).sum().backward()
    assert w.grad.is_sparse
    np.testing.assert_allclose(_dense(w.grad), _dense(wt.grad))
    assert tuple(w.grad.shape) == tuple(wt.grad.shape) == (V, D)
    w = cgrad.tensor(WEIGHT, requires_grad=True)
    out = F.embedding(cgrad.tensor(IDX), w, sparse=True, scale_grad_by_freq=True)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
        out.sum().backward()


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_padding_and_scale_grad(torch, norm_type):
    w = WEIGHT * 3
    ec = nn.Embedding(V, D, padding_idx=0, max_norm=1.5, norm_type=norm_type,
                      scale_grad_by_freq=True, _weight=cgrad.tensor(w))
    et = torch.nn.Embedding(V, D, padding_idx=0, max_norm=1.5, norm_type=norm_type,
                            scale_grad_by_freq=True, _weight=torch.tensor(w))
    assert repr(ec) == repr(et)
    g = RNG.standard_normal(IDX.shape + (D,))
    oc, ot = ec(cgrad.tensor(IDX)), et(torch.tensor(IDX))
    np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(ec.weight.detach().numpy(), et.weight.detach().numpy(),
                               atol=1e-12)      # renormalised in place
    (oc * cgrad.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ec.weight.grad.numpy(), et.weight.grad.numpy(), atol=1e-12)


# The models' shapes (makemore MLP: vocab 28, (32, 16) indices, dim 64; nanoGPT's wte
# 65 x 64 at (16, 32) and wpe 32 x 64 at arange(32)), which take the CSR scatter-add path of
# accumulate_along, and small/odd ones which take the linear add.at path.
EMB_CASES = [(28, (32, 16), 64, None, False), (65, (16, 32), 64, None, False),
             (32, (32,), 64, None, False), (28, (32, 16), 64, 0, False),
             (28, (32, 16), 64, 3, True), (5, (2, 3, 4), 3, None, False),
             (9, (0,), 4, None, False), (9, (3, 0), 4, 2, False), (6, (), 5, None, False)]


@pytest.mark.parametrize("itype", [np.int64, np.int32], ids=["i64", "i32"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", EMB_CASES, ids=[f"{c[0]}x{c[2]}-{c[1]}-p{c[3]}-s{c[4]}"
                                                 for c in EMB_CASES])
def test_dense_backward_order_pinned(torch, case, dtype, itype):
    """Note [Scatter-add order]: the rows of each index are added in index order from +0.0,
    so the weight gradient equals torch's (sequential index_add_ on one thread) bitwise, with
    repeated indices (scale_grad_by_freq: within rounding); against the float64 sums it is within float32 rounding."""
    V_, shape, D_, pad, scale = case
    rng = np.random.default_rng(11)
    w = rng.standard_normal((V_, D_)).astype(dtype)
    idx = rng.integers(0, V_, shape).astype(itype)
    if shape == (32,):
        idx = np.arange(32).astype(itype)
    g = rng.standard_normal(shape + (D_,)).astype(dtype)
    grads = []
    for mod, fn in ((cgrad, F.embedding), (torch, torch.nn.functional.embedding)):
        wt = mod.tensor(w, requires_grad=True)
        out = fn(mod.tensor(idx), wt, padding_idx=pad, scale_grad_by_freq=scale)
        (out * mod.tensor(g)).sum().backward()
        grads.append(wt.grad.numpy())
    if scale:       # cgrad divides each row before the sum; torch's scaling rounds otherwise
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(grads[0], grads[1], rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(grads[0], grads[1])
    assert grads[0].dtype == dtype
    ref = np.zeros((V_, D_))
    g64 = g.reshape(-1, D_).astype(np.float64)
    cnt = np.bincount(idx.reshape(-1), minlength=V_)
    for j, i in enumerate(idx.reshape(-1)):
        ref[i] += g64[j] / (cnt[i] if scale else 1)
    if pad is not None:
        ref[pad] = 0
    n = max(int(cnt.max(initial=1)), 1)
    tol = 1e-12 if dtype == np.float64 else 4 * n * np.finfo(np.float32).eps
    np.testing.assert_allclose(grads[0], ref, rtol=tol, atol=tol * np.abs(g64).max(initial=1))


def test_dense_backward_large_and_double_backward(torch):
    """A vocabulary and index count past the CSR threshold, then the double backward (the
    gather of the gradient's gradient) against torch."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((300, 40))
    idx = rng.integers(0, 300, (50, 20))
    g = rng.standard_normal((50, 20, 40))
    res = []
    for mod in (cgrad, torch):
        wt = mod.tensor(w, requires_grad=True)
        gt = mod.tensor(g, requires_grad=True)
        out = mod.nn.functional.embedding(mod.tensor(idx), wt, padding_idx=7)
        (gw,) = mod.autograd.grad(out, [wt], gt, create_graph=True)
        (ggw,) = mod.autograd.grad((gw * mod.tensor(w)).sum(), [gt])
        res.append((gw.detach().numpy(), ggw.numpy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])


# ------------------------------------------------------------------------------------------
# EmbeddingBag
# ------------------------------------------------------------------------------------------
FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 0, 6, 1])
OFFS = np.array([0, 2, 2, 5])          # an empty bag


def _bag(mod, w, inp, offs, psw=None, **kw):
    wt = mod.tensor(w, requires_grad=True)
    pt = None if psw is None else mod.tensor(psw, requires_grad=True)
    fn = F.embedding_bag if mod is cgrad else mod.nn.functional.embedding_bag
    out = fn(mod.tensor(inp), wt, None if offs is None else mod.tensor(offs),
             per_sample_weights=pt, **kw)
    return out, wt, pt


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("variant", ["offsets", "last_offset", "padding", "2d", "sparse",
                                     "float32"])
def test_embedding_bag_matches_torch(torch, mode, variant):
    w, inp, offs, kw = WEIGHT, FLAT, OFFS, {"mode": mode}
    tol = 1e-12
    if variant == "last_offset":
        offs, kw["include_last_offset"] = np.append(OFFS, len(FLAT)), True
    elif variant == "padding":
        kw["padding_idx"] = 4
    elif variant == "2d":
        inp, offs = FLAT.reshape(2, 5), None
    elif variant == "sparse":
        if mode == "max":
            with pytest.raises(ValueError, match="max mode does not support sparse weights"):
                _bag(cgrad, w, inp, offs, sparse=True, **kw)
            return
        kw["sparse"] = True
    elif variant == "float32":
        w, tol = w.astype(np.float32), 1e-5
    oc, wc, _ = _bag(cgrad, w, inp, offs, **kw)
    ot, wt, _ = _bag(torch, w, inp, offs, **kw)
    assert tuple(oc.shape) == tuple(ot.shape)
    np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), atol=tol)
    g = RNG.standard_normal(tuple(ot.shape)).astype(w.dtype)
    (oc * cgrad.tensor(g)).sum().backward()
    (ot * torch.tensor(g)).sum().backward()
    assert wc.grad.is_sparse == wt.grad.is_sparse
    np.testing.assert_allclose(_dense(wc.grad), _dense(wt.grad), atol=tol)


def test_embedding_bag_per_sample_weights_and_double_backward(torch):
    psw = RNG.standard_normal(len(FLAT))
    for pad in (None, 2):
        oc, wc, pc = _bag(cgrad, WEIGHT, FLAT, OFFS, psw, mode="sum", padding_idx=pad)
        ot, wt, pt = _bag(torch, WEIGHT, FLAT, OFFS, psw, mode="sum", padding_idx=pad)
        np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), atol=1e-12)
        g = RNG.standard_normal(tuple(ot.shape))
        gc = cgrad.autograd.grad((oc * cgrad.tensor(g)).sum(), [wc, pc], create_graph=True)
        gt = torch.autograd.grad((ot * torch.tensor(g)).sum(), [wt, pt], create_graph=True)
        for a, b in zip(gc, gt):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    # torch 2.13 has no double backward here ("the derivative for '_embedding_bag_backward'
    # is not implemented"); cgrad's is checked by finite differences
    w = cgrad.tensor(WEIGHT, requires_grad=True)
    p = cgrad.tensor(psw, requires_grad=True)
    def fn(w, p):
        return F.embedding_bag(cgrad.tensor(FLAT), w, cgrad.tensor(OFFS), mode="sum",
                               per_sample_weights=p)
    assert gradcheck(fn, [w, p])
    assert gradgradcheck(fn, [w, p])
    assert gradcheck(lambda w: F.embedding_bag(cgrad.tensor(FLAT), w, cgrad.tensor(OFFS),
                                               mode="max"), [w])


def test_embedding_bag_module(torch):
    kw = {"max_norm": 1.0, "norm_type": 3.0, "mode": "sum", "padding_idx": 0}
    mc = nn.EmbeddingBag(V, D, **kw)
    mt = torch.nn.EmbeddingBag(V, D, **kw)
    assert repr(mc) == repr(mt)
    assert repr(nn.EmbeddingBag(V, D)) == repr(torch.nn.EmbeddingBag(V, D))
    assert list(mc.state_dict()) == list(mt.state_dict()) == ["weight"]
    assert not mc.weight.detach().numpy()[0].any()
    mc.load_state_dict({"weight": WEIGHT * 2})
    mt.load_state_dict({"weight": torch.tensor(WEIGHT * 2)})
    psw = RNG.standard_normal(len(FLAT)).astype(np.float32)
    oc = mc(cgrad.tensor(FLAT), cgrad.tensor(OFFS), cgrad.tensor(psw))
    ot = mt(torch.tensor(FLAT), torch.tensor(OFFS), torch.tensor(psw))
    np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(mc.weight.detach().numpy(), mt.weight.detach().numpy(),
                               atol=1e-6)
    pre = nn.EmbeddingBag.from_pretrained(cgrad.tensor(WEIGHT), mode="max")
    assert not pre.weight.requires_grad and pre.mode == "max"


def test_embedding_bag_errors():
    w, inp, offs = cgrad.tensor(WEIGHT), cgrad.tensor(FLAT), cgrad.tensor(OFFS)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(inp, w, offs, mode="foo")
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(cgrad.tensor(IDX), w, offs)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(inp, w)
    with pytest.raises(ValueError, match="input has to be 1D or 2D Tensor"):
        F.embedding_bag(cgrad.tensor(IDX[None]), w)
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(inp, w, offs, per_sample_weights=cgrad.ones(len(FLAT)))
    with pytest.raises(ValueError, match="must have the same shape as the input"):
        F.embedding_bag(inp, w, offs, mode="sum", per_sample_weights=cgrad.ones(3))
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(inp, w, cgrad.tensor([1, 3]))


# ------------------------------------------------------------------------------------------
# ParameterDict / ParameterList
# ------------------------------------------------------------------------------------------
def test_parameter_dict_api(torch):
    def build(mod, nnm):
        d = nnm.ParameterDict({"b": mod.ones(2), "a": nnm.Parameter(mod.zeros(3, 2))})
        d["c"] = mod.ones(1, dtype=mod.float64)
        d.update(OrderedDict([("e", mod.zeros(1)), ("d", mod.zeros(2))]))
        d.update([("f", nnm.Parameter(mod.zeros(1)))])
        return d

    dc, dt = build(cgrad, nn), build(torch, torch.nn)
    assert repr(dc) == repr(dt).replace("torch", "cgrad")
    assert list(dc) == list(dt) == list(dc.keys())
    assert list(dc.state_dict()) == list(dt.state_dict())
    assert len(dc) == len(dt) == len(list(dc.parameters()))
    assert all(isinstance(v, nn.Parameter) for v in dc.values())
    assert [k for k, _ in dc.items()] == list(dt.keys())
    assert "a" in dc and "z" not in dc
    m = nn.Module()
    m.pd = dc
    assert list(m.state_dict()) == ["pd." + k for k in dt.state_dict()]
    assert tuple(dc.pop("a").shape) == (3, 2) and "a" not in dc
    assert dc.popitem()[0] == dt.popitem()[0] == "f"
    assert dc.get("zz") is None and dc.setdefault("g", cgrad.ones(1)) is dc["g"]
    assert list(dc.copy()) == list(dc)
    both = dc | nn.ParameterDict({"h": cgrad.ones(1)})
    assert list(both)[-1] == "h"
    del dc["b"]
    assert "b" not in dc and not hasattr(dc, "b")
    with pytest.raises(RuntimeError, match="ParameterDict should not be called"):
        dc(1)
    with pytest.raises(TypeError, match="ParametersDict.update should be called with an "
                                        "iterable"):
        dc.update(1)
    with pytest.raises(ValueError, match="has length 1; 2 is required"):
        dc.update([("x",)])
    dc.clear()
    assert len(dc) == 0 and list(dc.parameters()) == []
    assert nn.ParameterList is not None and len(nn.ParameterList([cgrad.ones(1)])) == 1


BAG_ERRORS = {
    "weight_1d": lambda m, T: m.embedding_bag(T([1, 2]), T(np.ones(3)), T([0])),
    "index_range": lambda m, T: m.embedding_bag(T([1, 9]), T(np.ones((3, 2))), T([0])),
    "float_offsets": lambda m, T: m.embedding_bag(T([1, 2]), T(np.ones((3, 2))), T([0.0])),
    "float_input": lambda m, T: m.embedding_bag(T([1.0, 2]), T(np.ones((3, 2))), T([0])),
    "last_offset": lambda m, T: m.embedding_bag(T([1, 2, 0]), T(np.ones((3, 2))), T([0, 5])),
}


@pytest.mark.parametrize("case", sorted(BAG_ERRORS))
def test_embedding_bag_error_messages_match_torch(torch, case):
    f = BAG_ERRORS[case]
    with pytest.raises(Exception) as et:
        f(torch.nn.functional, lambda a: torch.tensor(np.asarray(a)))
    with pytest.raises(Exception) as ec:
        f(F, lambda a: cgrad.tensor(np.asarray(a)))
    assert type(ec.value) is type(et.value)
    assert str(ec.value) == str(et.value).split("\n")[0].replace("torch", "cgrad")
