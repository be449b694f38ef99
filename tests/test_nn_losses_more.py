"""The losses of cgrad/nn/functional/_loss_more.py and their modules in nn.modules.loss:
values, gradients and double backward equal torch's (float64 to 1e-10, float32 to 1e-5),
gradients by finite differences, the CTC loss in all its target layouts, reprs, legacy
size_average/reduce arguments, warnings and errors."""
from __future__ import annotations

import os
import sys
import warnings

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
N, C = 3, 4
X = RNG.standard_normal((N, C))
Y = RNG.standard_normal((N, C))
Z = RNG.standard_normal((N, C))
P = RNG.dirichlet(np.ones(C), N)
PM = np.array([1.0, -1.0, 1.0])
SIGN = np.sign(Y)
CLS = np.array([0, 3, 2])
MLT = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]])
BITS = (RNG.random((N, C)) > 0.5) * 1.0
W = np.abs(RNG.standard_normal(C)) + 0.1
COUNTS = RNG.poisson(2, (N, C)) * 1.0
VAR = np.abs(Z) + 0.1


def _t(mod, a, rg, dtype=np.float64):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = a.astype(dtype)
    return mod.tensor(a, requires_grad=bool(rg))


# name -> (function name, arrays, which require grad, kwargs); kwargs may hold 'W' (weight)
CASES = {
    "kl_div": ("kl_div", [np.log(P) + 0.1 * X, P], [1, 1], {}),
    "kl_div_log": ("kl_div", [X, np.log(P)], [1, 1], {"log_target": True}),
    "kl_div_batchmean": ("kl_div", [X, P], [1, 1], {"reduction": "batchmean"}),
    "cosine_embedding": ("cosine_embedding_loss", [X, Y, PM], [1, 1, 0], {"margin": 0.1}),
    "cosine_embedding_1d": ("cosine_embedding_loss", [X[0], Y[0], np.array(-1.0)], [1, 1, 0],
                            {"margin": -0.5}),
    "margin_ranking": ("margin_ranking_loss", [X[:, 0], Y[:, 0], PM], [1, 1, 1],
                       {"margin": 0.3}),
    "triplet": ("triplet_margin_loss", [X, Y, Z], [1, 1, 1], {"margin": 0.5}),
    "triplet_swap_p1": ("triplet_margin_loss", [X, Y, Z], [1, 1, 1],
                        {"margin": 2.0, "p": 1, "swap": True}),
    "triplet_swap_p3": ("triplet_margin_loss", [X, Y, Z], [1, 1, 1],
                        {"margin": 2.0, "p": 3, "swap": True}),
    "triplet_distance": ("triplet_margin_with_distance_loss", [X, Y, Z], [1, 1, 1],
                         {"swap": True, "margin": 2.0}),
    "multi_margin": ("multi_margin_loss", [X, CLS], [1, 0], {"margin": 0.7}),
    "multi_margin_p2_w": ("multi_margin_loss", [X, CLS], [1, 0], {"p": 2, "W": W}),
    "multi_margin_1d": ("multi_margin_loss", [X[0], CLS[:1]], [1, 0], {}),
    "multilabel_margin": ("multilabel_margin_loss", [X, MLT], [1, 0], {}),
    "multilabel_margin_1d": ("multilabel_margin_loss", [X[0], MLT[0]], [1, 0], {}),
    "multilabel_soft_margin": ("multilabel_soft_margin_loss", [X, BITS], [1, 1], {"W": W}),
    "soft_margin": ("soft_margin_loss", [X, SIGN], [1, 0], {}),
    "hinge_embedding": ("hinge_embedding_loss", [X, SIGN], [1, 0], {"margin": 0.5}),
    "poisson": ("poisson_nll_loss", [X, COUNTS], [1, 1], {}),
    "poisson_full": ("poisson_nll_loss", [np.abs(X) + 0.1, COUNTS], [1, 1],
                     {"log_input": False, "full": True}),
    "gaussian": ("gaussian_nll_loss", [X, Y, VAR], [1, 1, 1], {"full": True}),
    "gaussian_homoscedastic": ("gaussian_nll_loss", [X, Y, VAR[:, 0]], [1, 1, 1], {}),
    "gaussian_one_var": ("gaussian_nll_loss", [X, Y, VAR[:, :1]], [1, 1, 1], {}),
}


# torch 2.13: "derivative for aten::multi(label)_margin_loss_backward is not implemented"
_NO_TORCH_DOUBLE = ("multi_margin_loss", "multilabel_margin_loss")


def _call(mod, fname, arrays, rg, kw, reduction, dtype=np.float64):
    ts = [_t(mod, a, g, dtype) for a, g in zip(arrays, rg)]
    kw = dict(kw)
    if "W" in kw:
        kw["weight"] = _t(mod, kw.pop("W"), False, dtype)
    if "reduction" not in kw:
        kw["reduction"] = reduction
    fn = getattr(F if mod is cgrad else mod.nn.functional, fname)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*ts, **kw), [t for t, g in zip(ts, rg) if g]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_grads_double_backward(torch, case, reduction):
    fname, arrays, rg, kw = CASES[case]
    oc, ic = _call(cgrad, fname, arrays, rg, kw, reduction)
    ot, it = _call(torch, fname, arrays, rg, kw, reduction)
    assert tuple(oc.shape) == tuple(ot.shape)
    np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), rtol=1e-10,
                               atol=1e-10)
    v = RNG.standard_normal(tuple(ot.shape))
    gc = cgrad.autograd.grad((oc * cgrad.tensor(v)).sum(), ic, create_graph=True)
    gt = torch.autograd.grad((ot * torch.tensor(v)).sum(), it, create_graph=True)
    for a, b in zip(gc, gt):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-10)
    # double backward: d/dinputs of sum(grad * u)
    us = [RNG.standard_normal(tuple(b.shape)) for b in gt]
    sc = sum((a * cgrad.tensor(u)).sum() for a, u in zip(gc, us))
    st = sum((b * torch.tensor(u)).sum() for b, u in zip(gt, us))
    if not st.requires_grad or fname in _NO_TORCH_DOUBLE or kw.get("p") == 1:
        return      # no second-order graph in torch (p=1 norm: its first one takes torch 3 s)
    ggt = torch.autograd.grad(st, it, allow_unused=True)
    if not sc.requires_grad:        # piecewise linear in cgrad's graph: torch's are zero
        for b in ggt:
            assert b is None or b._is_zerotensor() or not b.abs().max().item()
        return
    ggc = cgrad.autograd.grad(sc, ic, allow_unused=True)
    for a, b in zip(ggc, ggt):
        a = 0 if a is None else a.numpy()
        b = 0 if b is None or b._is_zerotensor() else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", ["kl_div", "cosine_embedding", "triplet", "gaussian",
                                  "multilabel_margin", "poisson"])
def test_float32(torch, case):
    fname, arrays, rg, kw = CASES[case]
    oc, ic = _call(cgrad, fname, arrays, rg, kw, "sum", np.float32)
    ot, it = _call(torch, fname, arrays, rg, kw, "sum", np.float32)
    assert oc.dtype == cgrad.float32
    np.testing.assert_allclose(oc.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(cgrad.autograd.grad(oc, ic), torch.autograd.grad(ot, it)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["kl_div_log", "cosine_embedding", "triplet_swap_p1",
                                  "multilabel_soft_margin", "gaussian", "poisson_full"])
def test_gradcheck(case):
    fname, arrays, rg, kw = CASES[case]
    ts = [_t(cgrad, a, g) for a, g in zip(arrays, rg)]
    kw = dict(kw)
    if "W" in kw:
        kw["weight"] = cgrad.tensor(kw.pop("W"))
    fn = getattr(F, fname)
    assert gradcheck(lambda *a: fn(*a, **kw, reduction="sum"), ts)
    if case in ("kl_div_log", "cosine_embedding", "gaussian"):
        assert gradgradcheck(lambda *a: fn(*a, **kw, reduction="sum"), ts)


# ------------------------------------------------------------------------------------------
# CTC
# ------------------------------------------------------------------------------------------
T_, B_, K_ = 6, 3, 5
LOGITS = RNG.standard_normal((T_, B_, K_))
TGT = np.array([[1, 2, 2], [3, 1, 4], [4, 4, 4]])
IL = np.array([6, 4, 5])
TL = np.array([3, 2, 1])


def _ctc(mod, logits, targets, il, tl, log_softmax=True, **kw):
    x = mod.tensor(logits, requires_grad=True)
    lp = x.log_softmax(-1) if log_softmax else x
    fn = F.ctc_loss if mod is cgrad else mod.nn.functional.ctc_loss
    return fn(lp, mod.tensor(targets), il if isinstance(il, tuple) else mod.tensor(il),
              tl if isinstance(tl, tuple) else mod.tensor(tl), **kw), x


@pytest.mark.parametrize("layout", ["padded", "concatenated", "tuples"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("blank", [0, 2])
def test_ctc_matches_torch(torch, layout, reduction, blank):
    tg = np.where(TGT == blank, (blank + 1) % K_, TGT)
    il, tl = IL, TL
    if layout == "concatenated":
        tg = np.concatenate([tg[i, :TL[i]] for i in range(B_)])
    if layout == "tuples":
        il, tl = tuple(int(v) for v in IL), tuple(int(v) for v in TL)
    for log_softmax in (True, False):        # raw inputs: torch's exp(lp) - gamma gradient
        lc, xc = _ctc(cgrad, LOGITS, tg, il, tl, log_softmax, blank=blank, reduction=reduction)
        lt, xt = _ctc(torch, LOGITS, tg, il, tl, log_softmax, blank=blank, reduction=reduction)
        np.testing.assert_allclose(lc.detach().numpy(), lt.detach().numpy(), rtol=1e-10,
                                   atol=1e-10)
        v = RNG.standard_normal(tuple(lt.shape))
        (lc * cgrad.tensor(v)).sum().backward()
        (lt * torch.tensor(v)).sum().backward()
        np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_ctc_zero_infinity_unbatched_float32_and_gradcheck(torch):
    il, tl = np.array([6, 2, 5]), np.array([3, 3, 1])   # the second is impossible
    tg = np.array([[1, 2, 2], [1, 1, 1], [4, 4, 4]])
    for zi in (False, True):
        lc, xc = _ctc(cgrad, LOGITS, tg, il, tl, zero_infinity=zi, reduction="none")
        lt, xt = _ctc(torch, LOGITS, tg, il, tl, zero_infinity=zi, reduction="none")
        np.testing.assert_allclose(lc.detach().numpy(), lt.detach().numpy(), rtol=1e-10)
        if zi:
            lc.sum().backward()
            lt.sum().backward()
            np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    lc, xc = _ctc(cgrad, LOGITS[:, 0], TGT[0], np.array(6), np.array(3))
    lt, xt = _ctc(torch, LOGITS[:, 0], TGT[0], np.array(6), np.array(3))
    assert lc.shape == () and lt.shape == ()
    np.testing.assert_allclose(lc.detach().numpy(), lt.detach().numpy(), rtol=1e-10)
    lc.backward()
    lt.backward()
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    l32, x32 = _ctc(cgrad, LOGITS.astype(np.float32), TGT, IL, TL)
    t32, y32 = _ctc(torch, LOGITS.astype(np.float32), TGT, IL, TL)
    assert l32.dtype == cgrad.float32
    np.testing.assert_allclose(l32.detach().numpy(), t32.detach().numpy(), rtol=1e-5)
    l32.backward()
    t32.backward()
    np.testing.assert_allclose(x32.grad.numpy(), y32.grad.numpy(), atol=1e-5)
    # with log_softmax in front the fused gradient is the true one: finite differences
    x = cgrad.tensor(LOGITS[:4, :2], requires_grad=True)
    assert gradcheck(lambda a: F.ctc_loss(a.log_softmax(-1), cgrad.tensor(TGT[:2, :2]),
                                          (4, 3), (2, 1), reduction="sum"), [x])


def test_ctc_module_and_errors(torch):
    m = nn.CTCLoss(blank=0, zero_infinity=True)
    assert repr(m) == "CTCLoss()" and m.blank == 0 and m.zero_infinity
    lc, _ = _ctc(cgrad, LOGITS, TGT, IL, TL)
    x = cgrad.tensor(LOGITS).log_softmax(-1)
    out = m(x, cgrad.tensor(TGT), cgrad.tensor(IL), cgrad.tensor(TL))
    np.testing.assert_allclose(out.numpy(), lc.detach().numpy())
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(x, cgrad.tensor(TGT), cgrad.tensor(IL), cgrad.tensor(TL), blank=K_)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6"):
        F.ctc_loss(x, cgrad.tensor(TGT), cgrad.tensor(IL + 1), cgrad.tensor(TL))
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.ctc_loss(x, cgrad.tensor(TGT), cgrad.tensor(IL), cgrad.tensor(TL), reduction="x")
    xr = cgrad.tensor(LOGITS, requires_grad=True)
    loss = F.ctc_loss(xr.log_softmax(-1), cgrad.tensor(TGT), cgrad.tensor(IL), cgrad.tensor(TL))
    (g,) = cgrad.autograd.grad(loss, xr, create_graph=True)
    with pytest.raises(RuntimeError, match="derivative for _ctc_loss_backward is not "
                                           "implemented"):
        g.sum().backward()


# ------------------------------------------------------------------------------------------
# modules
# ------------------------------------------------------------------------------------------
MODULES = [
    ("SmoothL1Loss", {"beta": 0.5}, "smooth_l1_loss", [X, Y]),
    ("HuberLoss", {"delta": 0.5}, "huber_loss", [X, Y]),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True}, "kl_div", [X, np.log(P)]),
    ("CosineEmbeddingLoss", {"margin": 0.2}, "cosine_embedding_loss", [X, Y, PM]),
    ("MarginRankingLoss", {"margin": 0.2}, "margin_ranking_loss", [X[:, 0], Y[:, 0], PM]),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, "triplet_margin_loss",
     [X, Y, Z]),
    ("TripletMarginWithDistanceLoss", {"margin": 2.0}, "triplet_margin_with_distance_loss",
     [X, Y, Z]),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5}, "multi_margin_loss", [X, CLS]),
    ("MultiLabelMarginLoss", {}, "multilabel_margin_loss", [X, MLT]),
    ("MultiLabelSoftMarginLoss", {}, "multilabel_soft_margin_loss", [X, BITS]),
    ("SoftMarginLoss", {}, "soft_margin_loss", [X, SIGN]),
    ("HingeEmbeddingLoss", {"margin": 2.0}, "hinge_embedding_loss", [X, SIGN]),
    ("PoissonNLLLoss", {"log_input": False, "full": True}, "poisson_nll_loss",
     [np.abs(X) + 0.1, COUNTS]),
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3}, "gaussian_nll_loss", [X, Y, VAR]),
]


@pytest.mark.parametrize("name,kw,fname,arrays", MODULES, ids=[m[0] for m in MODULES])
def test_modules(torch, name, kw, fname, arrays):
    mc, mt = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(mc) == repr(mt)     # TripletMarginWithDistanceLoss: a PairwiseDistance child
    assert list(mc.state_dict()) == list(mt.state_dict())
    assert mc.reduction == mt.reduction
    oc = mc(*[_t(cgrad, a, False) for a in arrays])
    ot = mt(*[_t(torch, a, False) for a in arrays])
    np.testing.assert_allclose(oc.numpy(), ot.numpy(), rtol=1e-10)


def test_weighted_module_state_dict(torch):
    w = np.abs(RNG.standard_normal(C))
    mc = nn.MultiMarginLoss(weight=cgrad.tensor(w))
    mt = torch.nn.MultiMarginLoss(weight=torch.tensor(w))
    assert list(mc.state_dict()) == list(mt.state_dict()) == ["weight"]
    mc = nn.MultiLabelSoftMarginLoss(weight=cgrad.tensor(w))
    np.testing.assert_allclose(
        mc(cgrad.tensor(X), cgrad.tensor(BITS)).numpy(),
        torch.nn.MultiLabelSoftMarginLoss(weight=torch.tensor(w))(
            torch.tensor(X), torch.tensor(BITS)).numpy(), rtol=1e-10)


def test_legacy_args_and_kl_warning(torch):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        m = nn.SoftMarginLoss(size_average=False)
    assert m.reduction == "sum"
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        m = nn.HingeEmbeddingLoss(reduce=False)
    assert m.reduction == "none"
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        out = F.margin_ranking_loss(cgrad.tensor(X[:, 0]), cgrad.tensor(Y[:, 0]),
                                    cgrad.tensor(PM), size_average=False)
    np.testing.assert_allclose(out.numpy(), torch.nn.functional.margin_ranking_loss(
        torch.tensor(X[:, 0]), torch.tensor(Y[:, 0]), torch.tensor(PM),
        reduction="sum").numpy())
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(cgrad.tensor(X), cgrad.tensor(P))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(cgrad.tensor(X), cgrad.tensor(P), reduction="batchmean")


def test_errors():
    x, y = cgrad.tensor(X), cgrad.tensor(Y)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(x, cgrad.tensor(CLS), p=3)
    with pytest.raises(ValueError, match="expected margin to be greater than 0, got -1"):
        nn.TripletMarginLoss(margin=-1)
    with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
        F.triplet_margin_with_distance_loss(x, y, y, margin=0)
    with pytest.raises(RuntimeError, match="expected to have the same number of dimensions"):
        F.triplet_margin_loss(x, y, cgrad.tensor(Z[0]))
    with pytest.raises(RuntimeError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(x, y, cgrad.tensor(PM))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input tensors"):
        F.cosine_embedding_loss(cgrad.tensor(X[0]), cgrad.tensor(Y[0]), cgrad.tensor(PM))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, y, cgrad.tensor(VAR[:2]))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, y, -cgrad.tensor(VAR))
    with pytest.raises(ValueError, match="foo is not valid"):
        F.gaussian_nll_loss(x, y, cgrad.tensor(VAR), reduction="foo")
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.poisson_nll_loss(x, y, reduction="foo")
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument "
                                           "'target'"):
        F.soft_margin_loss(x, cgrad.tensor(SIGN, requires_grad=True))
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multilabel_margin_loss(x, cgrad.tensor(MLT[:, :2]))
    with pytest.raises(TypeError):
        F.kl_div(X, cgrad.tensor(P))


@pytest.mark.parametrize("case", ["input_lengths_size", "target_lengths_size", "too_long",
                                  "input_too_long", "concat_size", "float_lengths",
                                  "negative_length"])
def test_ctc_errors_match_torch(torch, case):
    def call(mod):
        f = F.ctc_loss if mod is cgrad else mod.nn.functional.ctc_loss
        lp = mod.tensor(LOGITS).log_softmax(-1)
        tg, il, tl = TGT, IL, TL
        if case == "input_lengths_size":
            il = IL[:2]
        elif case == "target_lengths_size":
            tl = TL[:2]
        elif case == "too_long":
            tl = np.array([4, 2, 1])
        elif case == "input_too_long":
            il = IL + 1
        elif case == "concat_size":
            tg = np.array([1, 2])
        elif case == "float_lengths":
            il = IL.astype(np.float64)
        else:
            il = np.array([-1, 4, 5])
        f(lp, mod.tensor(tg), mod.tensor(il), mod.tensor(tl))

    with pytest.raises(RuntimeError) as et:
        call(torch)
    with pytest.raises(RuntimeError) as ec:
        call(cgrad)
    assert str(ec.value) == str(et.value).split("\n")[0]


ERROR_CASES = {
    "multi_margin_target_size": lambda m, T: m.multi_margin_loss(T(X), T([0, 1])),
    "multi_margin_3d": lambda m, T: m.multi_margin_loss(T(np.ones((2, 2, 2))), T([0, 1])),
    "multilabel_margin_size": lambda m, T: m.multilabel_margin_loss(
        T(X), T(np.zeros((3, 3), dtype=np.int64))),
    "multilabel_margin_range": lambda m, T: m.multilabel_margin_loss(T(X), T(np.full((3, 4),
                                                                                       5))),
    "cosine_2d_target": lambda m, T: m.cosine_embedding_loss(T(X), T(Y), T(np.ones((3, 1)))),
    "cosine_0d_target": lambda m, T: m.cosine_embedding_loss(T(X), T(Y), T(1.0)),
    "multilabel_soft_reduction": lambda m, T: m.multilabel_soft_margin_loss(
        T(X), T(Y), reduction="foo"),
    "soft_margin_shape": lambda m, T: m.soft_margin_loss(T(X), T(np.ones((2, 4)))),
    "triplet_reduction": lambda m, T: m.triplet_margin_loss(T(X), T(Y), T(Z), reduction="x"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_messages_match_torch(torch, case):
    f = ERROR_CASES[case]
    with pytest.raises(Exception) as et:
        f(torch.nn.functional, lambda a: torch.tensor(np.asarray(a)))
    with pytest.raises(Exception) as ec:
        f(F, lambda a: cgrad.tensor(np.asarray(a)))
    assert type(ec.value) is type(et.value)
    assert str(ec.value) == str(et.value).split("\n")[0].replace("torch", "cgrad")
