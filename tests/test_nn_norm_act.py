"""Normalisation layers (group/instance/RMS/local-response norm, normalize), the further
activations (hardtanh ... celu, rrelu, prelu, glu, softmin) and distances
(cosine_similarity, pairwise_distance), and nn.utils gradient clipping, against torch 2.13:
values and gradients with the same inputs and weights (float64 to 1e-10, float32 to 1e-5),
double backward, finite-difference gradchecks, module reprs, parameter init, state_dict
keys and error types/messages."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(18)
X3 = RNG.standard_normal((2, 4, 5)) * 2
X3[0, 0, :4] = [1.0, -1.0, 3.0, -3.0]          # hardtanh / hardsigmoid boundaries
X4 = RNG.standard_normal((2, 4, 3, 3))
W4 = RNG.standard_normal(4)
B4 = RNG.standard_normal(4)


def _pair(arrs, dtype=np.float64):
    c = [cgrad.tensor(a.astype(dtype), requires_grad=True) for a in arrs]
    t = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrs]
    return c, t


def _np(t):
    if isinstance(t, torch.Tensor) and t._is_zerotensor():   # torch's symbolic zeros
        return np.zeros(tuple(t.shape))
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, tol):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def compare(fc, ft, arrs, dtype=np.float64, double=True, tol=None):
    """Values, gradients and (when double) the gradient of sum(grad * w) against torch."""
    tol = tol or (1e-10 if dtype == np.float64 else 1e-5)
    c, t = _pair(arrs, dtype)
    yc, yt = fc(*c), ft(*t)
    assert str(yc.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1]
    _close(yc, yt, tol)
    g = RNG.standard_normal(tuple(yt.shape)).astype(dtype)
    gc = cgrad.autograd.grad(yc, c, cgrad.tensor(g), create_graph=double)
    gt = torch.autograd.grad(yt, t, torch.tensor(g), create_graph=double)
    for a, b in zip(gc, gt):
        _close(a, b, tol)
    if not double:
        return
    ws = [RNG.standard_normal(a.shape) for a in arrs]
    sc = sum((a * cgrad.tensor(w)).sum() for a, w in zip(gc, ws))
    st = sum((a * torch.tensor(w)).sum() for a, w in zip(gt, ws))
    if not st.requires_grad:
        return
    if not sc.requires_grad:          # cgrad knows the second derivative is zero
        for b in torch.autograd.grad(st, t, allow_unused=True):
            assert b is None or not _np(b).any()
        return
    dc = cgrad.autograd.grad(sc, c, allow_unused=True)
    dt = torch.autograd.grad(st, t, allow_unused=True)
    for a, b in zip(dc, dt):
        if b is None:
            assert a is None or not _np(a).any()
        else:
            _close(a, b, tol)


# -- normalisation ---------------------------------------------------------------------------
NORMS = [
    ("group_norm", lambda m, x, w, b: m.group_norm(x, 2, w, b, 1e-3), [X4, W4, B4]),
    ("group_norm_plain", lambda m, x: m.group_norm(x, 4), [X3]),
    ("instance_norm", lambda m, x, w, b: m.instance_norm(x, weight=w, bias=b), [X4, W4, B4]),
    ("rms_norm", lambda m, x, w: m.rms_norm(x, [5], w), [X3, W4[:1].repeat(5)]),
    ("rms_norm_eps", lambda m, x: m.rms_norm(x, (4, 5), None, 0.1), [X3]),
    ("lrn", lambda m, x: m.local_response_norm(x, 3), [X3]),
    ("lrn_even", lambda m, x: m.local_response_norm(x, 2, 0.5, 0.6, 2.0), [X4]),
    ("normalize", lambda m, x: m.normalize(x), [X3]),
    ("normalize_p3", lambda m, x: m.normalize(x, 3.0, -1), [X3]),  # p=1: torch warm-up 2 s
]


@pytest.mark.parametrize("name,f,arrs", NORMS, ids=[n[0] for n in NORMS])
def test_norm_functions_match_torch(name, f, arrs):
    compare(lambda *a: f(F, *a), lambda *a: f(TF, *a), arrs)


@pytest.mark.parametrize("name,f,arrs", NORMS[:4], ids=[n[0] for n in NORMS[:4]])
def test_norm_functions_float32(name, f, arrs):
    compare(lambda *a: f(F, *a), lambda *a: f(TF, *a), arrs, np.float32, double=False)


def test_group_norm_node_and_gradcheck():
    x = cgrad.tensor(X3[:, :, :3].copy(), requires_grad=True)
    w = cgrad.tensor(W4.copy(), requires_grad=True)
    assert type(F.group_norm(x, 2).grad_fn).__name__ == "NativeGroupNormBackward0"
    gradcheck(lambda x, w: F.group_norm(x, 2, w), (x, w))
    gradgradcheck(lambda x: F.group_norm(x, 2), (x,))


def test_instance_norm_running_stats():
    for use in (True, False):
        rc, rt = cgrad.tensor(np.zeros(4) + 0.5), torch.tensor(np.zeros(4) + 0.5)
        vc, vt = cgrad.tensor(np.ones(4) * 2), torch.tensor(np.ones(4) * 2)
        yc = F.instance_norm(cgrad.tensor(X4), rc, vc, use_input_stats=use, momentum=0.3)
        yt = TF.instance_norm(torch.tensor(X4), rt, vt, use_input_stats=use, momentum=0.3)
        _close(yc, yt, 1e-10)
        _close(rc, rt, 1e-10)
        _close(vc, vt, 1e-10)


def test_norm_errors():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(cgrad.tensor(X3), 3)
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="Expected 3D or higher dimensionality input"):
        F.local_response_norm(cgrad.tensor(X3[0]), 2)
    with pytest.raises(RuntimeError, match="Given normalized_shape"):
        F.rms_norm(cgrad.tensor(X3), [4])
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        nn.InstanceNorm2d(4)(cgrad.tensor(X3[0, 0]))
    with pytest.raises(ValueError, match="to match num_features"):
        nn.InstanceNorm1d(3, affine=True)(cgrad.tensor(X3))


def _copy(mc, mt):
    mc.load_state_dict({k: v.detach().numpy().copy() for k, v in mt.state_dict().items()})


def _check_module(name, args, kwargs, x, train=True):
    mt = getattr(torch.nn, name)(*args, **kwargs).double()
    mc = getattr(nn, name)(*args, **kwargs).double()
    assert repr(mc) == repr(mt)
    assert list(mc.state_dict()) == list(mt.state_dict())
    assert [n for n, _ in mc.named_parameters()] == [n for n, _ in mt.named_parameters()]
    for (_, pc), (_, pt) in zip(mc.named_parameters(), mt.named_parameters()):
        _close(pc, pt, 0)                       # deterministic init
        pt.data.normal_()
    _copy(mc, mt)
    mc.train(train)
    mt.train(train)
    xc, xt = cgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for _ in range(2):
        yc, yt = mc(xc), mt(xt)
        _close(yc, yt, 1e-10)
    yc.sum().backward()
    yt.sum().backward()
    _close(xc.grad, xt.grad, 1e-10)
    for (_, pc), (_, pt) in zip(mc.named_parameters(), mt.named_parameters()):
        _close(pc.grad, pt.grad, 1e-10)
    for (k, bc), (_, bt) in zip(mc.state_dict().items(), mt.state_dict().items()):
        _close(bc, bt, 1e-10)


@pytest.mark.parametrize("name,args,kwargs,x,train", [
    ("GroupNorm", (2, 4), {}, X4, True),
    ("GroupNorm", (2, 4), {"affine": False}, X3, True),
    ("GroupNorm", (4, 4), {"bias": False}, X3, True),
    ("InstanceNorm1d", (4,), {}, X3, True),
    ("InstanceNorm1d", (4,), {"affine": True, "track_running_stats": True}, X3, True),
    ("InstanceNorm2d", (4,), {"affine": True, "track_running_stats": True,
                              "momentum": None}, X4, True),
    ("InstanceNorm2d", (4,), {"track_running_stats": True}, X4, False),
    ("InstanceNorm2d", (4,), {"affine": True}, X4[0], True),
    ("RMSNorm", (5,), {}, X3, True),
    ("RMSNorm", ([4, 5],), {"eps": 1e-3, "elementwise_affine": False}, X3, True),
    ("LocalResponseNorm", (3,), {}, X4, True),
])
def test_norm_modules_match_torch(name, args, kwargs, x, train):
    _check_module(name, args, kwargs, x, train)


def test_batch_and_layer_norm_signatures():
    x = cgrad.tensor(X3)
    rm, rv = cgrad.tensor(np.zeros(4)), cgrad.tensor(np.ones(4))
    y = F.batch_norm(x, rm, rv, weight=None, bias=None, training=True, momentum=0.2, eps=1e-3)
    trm, trv = torch.tensor(np.zeros(4)), torch.tensor(np.ones(4))
    yt = TF.batch_norm(torch.tensor(X3), trm, trv, None, None, True, 0.2, 1e-3)
    _close(y, yt, 1e-10)
    _close(rv, trv, 1e-10)
    _close(F.layer_norm(x, [5], eps=1e-3), TF.layer_norm(torch.tensor(X3), [5], eps=1e-3), 1e-10)


# -- activations -----------------------------------------------------------------------------
ACTS = [
    ("hardtanh", lambda m, x: m.hardtanh(x, -1.0, 3.0)),
    ("relu6", lambda m, x: m.relu6(x)),
    ("hardswish", lambda m, x: m.hardswish(x)),
    ("hardsigmoid", lambda m, x: m.hardsigmoid(x)),
    ("mish", lambda m, x: m.mish(x)),
    ("softsign", lambda m, x: m.softsign(x)),
    ("tanhshrink", lambda m, x: m.tanhshrink(x)),
    ("threshold", lambda m, x: m.threshold(x, 0.5, -2.0)),
    ("glu", lambda m, x: m.glu(x, 1)),
    ("logsigmoid", lambda m, x: m.logsigmoid(x)),
    ("softmin", lambda m, x: m.softmin(x, 1)),
    ("hardshrink", lambda m, x: m.hardshrink(x, 1.0)),
    ("softshrink", lambda m, x: m.softshrink(x)),
    ("celu", lambda m, x: m.celu(x)),
    ("rrelu_eval", lambda m, x: m.rrelu(x, 0.1, 0.3)),
]


@pytest.mark.parametrize("name,f", ACTS, ids=[a[0] for a in ACTS])
def test_activations_match_torch(name, f):
    # torch's hardsigmoid/hardswish backward multiplies by a float32 1/6 (~1e-8 off)
    tol = 1e-7 if name in ("hardsigmoid", "hardswish") else None
    # torch has no double backward for hardsigmoid
    compare(lambda x: f(F, x), lambda x: f(TF, x), [X3], tol=tol, double=name != "hardsigmoid")
    compare(lambda x: f(F, x), lambda x: f(TF, x), [X3], np.float32, double=False)


def test_celu_alpha_and_prelu():
    # torch's celu backward uses a float32 1 / alpha: agreement to ~1e-7 relative
    compare(lambda x: F.celu(x, 0.7), lambda x: TF.celu(x, 0.7), [X3], tol=1e-6)
    compare(F.prelu, TF.prelu, [X3, W4])
    compare(F.prelu, TF.prelu, [X3[0, 0], W4[:1]])


def test_activation_gradchecks():
    x = cgrad.tensor(X3[:, :2, :3] + 0.05, requires_grad=True)
    for f in (F.mish, F.logsigmoid, F.softsign, lambda t: F.celu(t, 0.5),
              lambda t: F.glu(t, -1 if t.shape[-1] % 2 == 0 else 1)):
        gradcheck(f, (x,))
        gradgradcheck(f, (x,))


def test_inplace_activations():
    for name, kw in (("hardtanh", {}), ("relu6", {}), ("hardswish", {}), ("hardsigmoid", {}),
                     ("mish", {}), ("celu", {}), ("threshold", {"threshold": 0.1, "value": 2.0}),
                     ("rrelu", {})):
        xc, xt = cgrad.tensor(X3.copy()), torch.tensor(X3.copy())
        rc = getattr(F, name)(xc, inplace=True, **kw)
        getattr(TF, name)(xt, inplace=True, **kw)
        assert rc is xc
        _close(xc, xt, 1e-12)
    xc, xt = cgrad.tensor(X3.copy()), torch.tensor(X3.copy())
    F.hardtanh_(xc, 0.0, 1.0)
    TF.hardtanh_(xt, 0.0, 1.0)
    _close(xc, xt, 0)
    F.threshold_(xc, 0.5, 9.0)
    TF.threshold_(xt, 0.5, 9.0)
    _close(xc, xt, 0)
    # recorded in a graph
    a = cgrad.tensor(X3.copy(), requires_grad=True)
    ta = torch.tensor(X3.copy(), requires_grad=True)
    b, tb = a * 2, ta * 2
    F.hardswish(b, inplace=True)
    TF.hardswish(tb, inplace=True)
    b.sum().backward()
    tb.sum().backward()
    _close(a.grad, ta.grad, 1e-7)


def test_rrelu_training_slopes_in_range():
    cgrad.manual_seed(0)
    x = cgrad.tensor(-np.abs(X3) - 0.1, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    r = y.detach().numpy() / x.detach().numpy()
    assert np.all((r >= 0.1) & (r <= 0.3)) and r.std() > 0
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), r)


@pytest.mark.parametrize("name,args,x", [
    ("Hardtanh", (-2.0, 1.5), X3), ("Hardtanh", (-1.0, 1.0, True), X3), ("ReLU6", (), X3),
    ("ReLU6", (True,), X3), ("Hardsigmoid", (), X3), ("Hardswish", (True,), X3),
    ("Mish", (), X3), ("Softsign", (), X3), ("Tanhshrink", (), X3),
    ("Threshold", (0.1, 20.0), X3), ("Threshold", (1, 2, True), X3), ("GLU", (), X4[..., :2]),
    ("GLU", (1,), X3), ("LogSigmoid", (), X3), ("Softmin", (1,), X3), ("Softmax2d", (), X4),
    ("Hardshrink", (), X3), ("Softshrink", (0.3,), X3), ("CELU", (2.0,), X3),
    ("CELU", (1.0, True), X3), ("RReLU", (0.1, 0.2), X3), ("PReLU", (), X3), ("PReLU", (4,), X4),
    ("PReLU", (1, 0.1), X3),
])
def test_activation_modules_match_torch(name, args, x):
    mt = getattr(torch.nn, name)(*args).double()
    mc = getattr(nn, name)(*args).double()
    assert repr(mc) == repr(mt)
    assert list(mc.state_dict()) == list(mt.state_dict())
    _copy(mc, mt)
    mc.eval()
    mt.eval()
    xc = cgrad.tensor(x.copy(), requires_grad=True)
    xt = torch.tensor(x.copy(), requires_grad=True)
    yc, yt = mc(xc * 1), mt(xt * 1)
    _close(yc, yt, 1e-7 if name == "CELU" else 1e-10)
    yc.sum().backward()
    yt.sum().backward()
    _close(xc.grad, xt.grad, 1e-6)
    for pc, pt in zip(mc.parameters(), mt.parameters()):
        _close(pc.grad, pt.grad, 1e-10)


def test_activation_errors():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(cgrad.tensor(X3), 2)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(cgrad.tensor(X3), 2.0, 1.0)
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel"):
        F.prelu(cgrad.tensor(X3), cgrad.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D"):
        nn.Softmax2d()(cgrad.tensor(X3[0, 0]))
    with pytest.raises(TypeError, match=r"hardtanh\(\): argument 'input' \(position 1\)"):
        F.hardtanh([1.0])
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 1.79769e\+308\] "
                       "for input dtype Double, but found -1"):
        F.softshrink(cgrad.tensor(X3), -1.0)
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(cgrad.tensor(X3), 0.0)
    with pytest.warns(FutureWarning, match="min_value"):
        m = nn.Hardtanh(min_value=-0.5)
    assert m.min_val == -0.5


# -- distances -------------------------------------------------------------------------------
Y3 = RNG.standard_normal((2, 4, 5))
Y3[1, :, 2] = 0.0                                   # a zero vector along dim 1 (eps clamp)


@pytest.mark.parametrize("name,f,arrs", [
    ("cos", lambda m, a, b: m.cosine_similarity(a, b), [X3, Y3]),
    ("cos_bcast", lambda m, a, b: m.cosine_similarity(a, b, -1, 1e-3), [X3, Y3[:1]]),
    ("pdist", lambda m, a, b: m.pairwise_distance(a, b), [X3, Y3]),
    ("pdist_p1_keep", lambda m, a, b: m.pairwise_distance(a, b, 1.0, 1e-3, True), [X3, Y3]),
    ("pdist_1d", lambda m, a, b: m.pairwise_distance(a, b, 3.0), [X3[0, 0], Y3[0, 0]]),
], ids=["cos", "cos_bcast", "pdist", "pdist_p1_keep", "pdist_1d"])
def test_distances_match_torch(name, f, arrs):
    compare(lambda *a: f(F, *a), lambda *a: f(TF, *a), arrs, double=name != "cos")
    mod = {"cos": "CosineSimilarity", "pdist": "PairwiseDistance"}.get(name)
    if mod:
        mc, mt = getattr(nn, mod)(), getattr(torch.nn, mod)()
        assert repr(mc) == repr(mt)
        _close(mc(*map(cgrad.tensor, arrs)), mt(*map(torch.tensor, arrs)), 1e-10)


def test_distance_keywords():
    a, b = cgrad.tensor(X3), cgrad.tensor(Y3)
    _close(F.cosine_similarity(x1=a, x2=b, dim=2, eps=1e-6),
           TF.cosine_similarity(x1=torch.tensor(X3), x2=torch.tensor(Y3), dim=2, eps=1e-6),
           1e-10)


# -- gradient clipping and parameter vectors ----------------------------------------------
@pytest.mark.parametrize("norm_type,foreach", [(2.0, None), (1.0, True), (math.inf, False)])
def test_clip_grad_norm_matches_torch(norm_type, foreach):
    pc = [cgrad.tensor(X3.copy(), requires_grad=True), cgrad.tensor(W4.copy(),
                                                                     requires_grad=True)]
    pt = [torch.tensor(X3.copy(), requires_grad=True), torch.tensor(W4.copy(),
                                                                     requires_grad=True)]
    for p, q in zip(pc, pt):
        p.grad = cgrad.tensor(np.asarray(q.detach().numpy()) * 3)
        q.grad = q.detach() * 3
    nc = nn.utils.clip_grad_norm_(pc, 1.5, norm_type, foreach=foreach)
    nt = torch.nn.utils.clip_grad_norm_(pt, 1.5, norm_type, foreach=foreach)
    _close(nc, nt, 1e-10)
    for p, q in zip(pc, pt):
        _close(p.grad, q.grad, 1e-10)
    pc[0].grad._data[0, 0, 0] = np.nan
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_(pc, 1.0, norm_type, error_if_nonfinite=True)


def test_clip_grad_value_and_vectors():
    p = cgrad.tensor(X3.copy(), requires_grad=True)
    q = torch.tensor(X3.copy(), requires_grad=True)
    p.grad, q.grad = cgrad.tensor(X3.copy()), torch.tensor(X3.copy())
    nn.utils.clip_grad_value_([p], 0.5)
    torch.nn.utils.clip_grad_value_([q], 0.5)
    _close(p.grad, q.grad, 0)
    m = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(m.parameters())
    assert tuple(v.shape) == (8,)
    nn.utils.vector_to_parameters(v.detach() * 0 + 1, m.parameters())
    assert np.all(m.weight.detach().numpy() == 1) and np.all(m.bias.detach().numpy() == 1)
