"""cgrad.nn.init and the default initialisation of layers.

calculate_gain and the fan computations equal torch's for every nonlinearity and shape;
every initialiser fills in place (same object, version bumped, no graph, works on a
Parameter that requires grad), returns the tensor, draws from cgrad's generator (same seed,
same values) and has the distribution torch's formula gives (bounds of uniform draws,
standard deviations of normal draws on large tensors); layers initialise as torch does.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
from cgrad.nn import init


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def arr(t):
    return t.detach().numpy()


NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d", "sigmoid", "tanh", "relu",
                  "leaky_relu", "selu"]


@pytest.mark.parametrize("nl", NONLINEARITIES)
def test_calculate_gain_matches_torch(nl, torch):
    assert init.calculate_gain(nl) == torch.nn.init.calculate_gain(nl)
    assert type(init.calculate_gain(nl)) is type(torch.nn.init.calculate_gain(nl))


@pytest.mark.parametrize("param", [None, 0, 0.2, 1, 3.5, math.sqrt(5)])
def test_calculate_gain_leaky_relu_param(param, torch):
    assert init.calculate_gain("leaky_relu", param) == pytest.approx(
        torch.nn.init.calculate_gain("leaky_relu", param), rel=1e-15)


def test_calculate_gain_errors_match_torch(torch):
    for args in (("leaky_relu", True), ("leaky_relu", "x"), ("softmax",), ("ReLU",)):
        with pytest.raises(ValueError) as et:
            torch.nn.init.calculate_gain(*args)
        with pytest.raises(ValueError) as ec:
            init.calculate_gain(*args)
        assert str(ec.value) == str(et.value)


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (4, 3, 2, 2), (2, 1, 1, 1, 3)])
def test_fan_in_fan_out_match_torch(shape, torch):
    assert init._calculate_fan_in_and_fan_out(cgrad.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert init._calculate_correct_fan(cgrad.empty(*shape), mode) == \
            torch.nn.init._calculate_correct_fan(torch.empty(*shape), mode)


def test_fan_errors_match_torch(torch):
    for fn_c, fn_t in ((lambda: init._calculate_fan_in_and_fan_out(cgrad.empty(3)),
                        lambda: torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(3))),
                       (lambda: init.kaiming_uniform_(cgrad.empty(3, 4), mode="fan_avg"),
                        lambda: torch.nn.init.kaiming_uniform_(torch.empty(3, 4),
                                                               mode="fan_avg")),
                       (lambda: init.xavier_normal_(cgrad.empty(5)),
                        lambda: torch.nn.init.xavier_normal_(torch.empty(5))),
                       (lambda: init.eye_(cgrad.empty(2, 2, 2)),
                        lambda: torch.nn.init.eye_(torch.empty(2, 2, 2))),
                       (lambda: init.orthogonal_(cgrad.empty(3)),
                        lambda: torch.nn.init.orthogonal_(torch.empty(3))),
                       (lambda: init.dirac_(cgrad.empty(3, 3)),
                        lambda: torch.nn.init.dirac_(torch.empty(3, 3))),
                       (lambda: init.sparse_(cgrad.empty(3), 0.5),
                        lambda: torch.nn.init.sparse_(torch.empty(3), 0.5))):
        with pytest.raises(ValueError) as et:
            fn_t()
        with pytest.raises(ValueError) as ec:
            fn_c()
        assert str(ec.value) == str(et.value)


# ----------------------------------------------------------------------------------------
# in place, reproducible, on parameters
# ----------------------------------------------------------------------------------------
INITS = [
    ("uniform_", lambda t: init.uniform_(t, -0.5, 2.0)),
    ("normal_", lambda t: init.normal_(t, 1.0, 0.1)),
    ("trunc_normal_", lambda t: init.trunc_normal_(t, std=0.5)),
    ("xavier_uniform_", lambda t: init.xavier_uniform_(t, gain=2.0)),
    ("xavier_normal_", lambda t: init.xavier_normal_(t)),
    ("kaiming_uniform_", lambda t: init.kaiming_uniform_(t, a=math.sqrt(5))),
    ("kaiming_normal_", lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")),
    ("orthogonal_", lambda t: init.orthogonal_(t)),
    ("sparse_", lambda t: init.sparse_(t, 0.3)),
    ("constant_", lambda t: init.constant_(t, 0.3)),
    ("ones_", init.ones_),
    ("zeros_", init.zeros_),
    ("eye_", init.eye_),
]


@pytest.mark.parametrize("name,fn", INITS, ids=[c[0] for c in INITS])
@pytest.mark.parametrize("dtype", [cgrad.float32, cgrad.float64])
def test_init_in_place_reproducible(name, fn, dtype):
    p = nn.Parameter(cgrad.full((6, 5), 7.0, dtype=dtype))
    data = p._data
    v0 = p._version
    cgrad.manual_seed(123)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fn(p)
    assert out is p and p._data is data and p.dtype == dtype
    assert p._version > v0
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert not (arr(p) == 7.0).all()
    first = arr(p).copy()
    cgrad.manual_seed(123)
    fn(p)
    np.testing.assert_array_equal(arr(p), first)


def test_generator_argument():
    a, b = cgrad.empty(4, 4), cgrad.empty(4, 4)
    init.xavier_uniform_(a, generator=np.random.default_rng(1))
    init.xavier_uniform_(b, generator=np.random.default_rng(1))
    np.testing.assert_array_equal(arr(a), arr(b))
    init.kaiming_normal_(a, generator=np.random.default_rng(2))
    init.kaiming_normal_(b, generator=np.random.default_rng(2))
    np.testing.assert_array_equal(arr(a), arr(b))


def test_zero_element_warning_matches_torch(torch):
    for name in ("kaiming_uniform_", "kaiming_normal_"):
        with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
            t = cgrad.empty(0, 3)
            assert getattr(init, name)(t) is t
    t = cgrad.empty(0, 3)
    assert init.orthogonal_(t) is t


# ----------------------------------------------------------------------------------------
# distributions (large tensors: sample statistics against torch's formulas)
# ----------------------------------------------------------------------------------------
SHAPE = (400, 250)
FAN_IN, FAN_OUT = 250, 400


def _std_ok(a, std, rel=0.03):
    assert abs(a.std() - std) < rel * std, (a.std(), std)
    assert abs(a.mean()) < 5 * std / math.sqrt(a.size) + 1e-12


def _uniform_ok(a, lo, hi):
    assert a.min() >= lo and a.max() <= hi
    span = hi - lo
    assert a.min() < lo + 0.01 * span and a.max() > hi - 0.01 * span
    assert abs(a.mean() - (lo + hi) / 2) < 0.01 * span
    assert abs(a.std() - span / math.sqrt(12)) < 0.02 * span / math.sqrt(12)


def test_uniform_normal_constant():
    cgrad.manual_seed(0)
    _uniform_ok(arr(init.uniform_(cgrad.empty(*SHAPE), -0.3, 0.7)), -0.3, 0.7)
    a = arr(init.normal_(cgrad.empty(*SHAPE), 2.0, 0.5))
    assert abs(a.mean() - 2.0) < 0.01 and abs(a.std() - 0.5) < 0.01
    assert (arr(init.constant_(cgrad.empty(3, 2), -1.5)) == -1.5).all()
    assert (arr(init.ones_(cgrad.empty(3))) == 1).all()
    assert (arr(init.zeros_(cgrad.empty(3))) == 0).all()


@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier(gain):
    cgrad.manual_seed(1)
    std = gain * math.sqrt(2.0 / (FAN_IN + FAN_OUT))
    bound = math.sqrt(3.0) * std
    _uniform_ok(arr(init.xavier_uniform_(cgrad.empty(*SHAPE), gain=gain)), -bound, bound)
    _std_ok(arr(init.xavier_normal_(cgrad.empty(*SHAPE), gain=gain)), std)


@pytest.mark.parametrize("a,mode,nl", [(0, "fan_in", "leaky_relu"), (math.sqrt(5), "fan_in",
                                                                      "leaky_relu"),
                                       (0, "fan_out", "relu"), (0.1, "fan_in", "tanh"),
                                       (0, "fan_out", "selu"), (0, "fan_in", "linear")])
def test_kaiming(a, mode, nl, torch):
    cgrad.manual_seed(2)
    fan = FAN_IN if mode == "fan_in" else FAN_OUT
    std = torch.nn.init.calculate_gain(nl, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    _uniform_ok(arr(init.kaiming_uniform_(cgrad.empty(*SHAPE), a=a, mode=mode,
                                          nonlinearity=nl)), -bound, bound)
    _std_ok(arr(init.kaiming_normal_(cgrad.empty(*SHAPE), a=a, mode=mode, nonlinearity=nl)),
            std)


def test_kaiming_conv_shaped_fans():
    cgrad.manual_seed(3)
    t = cgrad.empty(64, 16, 5, 5)
    bound = math.sqrt(3.0) * math.sqrt(2.0) / math.sqrt(16 * 25)
    _uniform_ok(arr(init.kaiming_uniform_(t, nonlinearity="relu")), -bound, bound)


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.0, 0.5, -0.2, 1.0),
                                          (1.0, 1.0, 2.0, 3.0)])
def test_trunc_normal(mean, std, a, b):
    from scipy import stats
    cgrad.manual_seed(4)
    x = arr(init.trunc_normal_(cgrad.empty(*SHAPE, dtype=cgrad.float64), mean, std, a, b))
    assert x.min() >= a and x.max() <= b
    dist = stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
    assert abs(x.mean() - dist.mean()) < 0.01 * (b - a)
    assert abs(x.std() - dist.std()) < 0.02 * dist.std()
    assert stats.kstest(x.ravel()[:5000], dist.cdf).pvalue > 1e-4


def test_trunc_normal_far_mean_warns():
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(cgrad.empty(10), mean=10.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 3), (4, 2, 3)])
def test_orthogonal(shape):
    cgrad.manual_seed(5)
    t = init.orthogonal_(cgrad.empty(*shape, dtype=cgrad.float64), gain=2.0)
    m = arr(t).reshape(shape[0], -1) / 2.0
    if m.shape[0] <= m.shape[1]:
        np.testing.assert_allclose(m @ m.T, np.eye(m.shape[0]), atol=1e-12)
    else:
        np.testing.assert_allclose(m.T @ m, np.eye(m.shape[1]), atol=1e-12)


def test_eye_dirac_sparse_match_torch(torch):
    for shape in ((3, 5), (4, 2)):
        np.testing.assert_array_equal(arr(init.eye_(cgrad.empty(*shape))),
                                      torch.nn.init.eye_(torch.empty(shape)).numpy())
    for shape, groups in (((4, 2, 3), 1), ((6, 2, 3, 3), 2), ((2, 2, 3, 3, 3), 1)):
        np.testing.assert_array_equal(
            arr(init.dirac_(cgrad.empty(*shape), groups)),
            torch.nn.init.dirac_(torch.empty(shape), groups).numpy())
    cgrad.manual_seed(6)
    s = arr(init.sparse_(cgrad.empty(10, 40), sparsity=0.3, std=0.01))
    assert ((s == 0).sum(0) == math.ceil(0.3 * 10)).all()
    assert abs(s[s != 0].std() - 0.01) < 0.002


# ----------------------------------------------------------------------------------------
# default initialisation of layers (torch's reset_parameters)
# ----------------------------------------------------------------------------------------
def test_linear_default_init():
    cgrad.manual_seed(7)
    lin = nn.Linear(300, 200)
    bound = 1 / math.sqrt(300)       # kaiming_uniform_(a=sqrt(5)) == U(-1/sqrt(fan_in), ...)
    _uniform_ok(arr(lin.weight), -bound, bound)
    b = arr(lin.bias)
    assert b.min() >= -bound and b.max() <= bound and b.std() > 0.4 * bound
    assert lin.weight.dtype == np.float32
    assert nn.Linear(3, 2, dtype=cgrad.float64).weight.dtype == np.float64
    with pytest.warns(UserWarning, match="zero-element"):
        z = nn.Linear(0, 3)                     # fan_in 0: bias bound 0, warns as torch
    assert (arr(z.bias) == 0).all()


def test_linear_init_matches_torch_statistics(torch):
    cgrad.manual_seed(8)
    torch.manual_seed(8)
    cw = np.concatenate([arr(nn.Linear(50, 40).weight).ravel() for _ in range(20)])
    tw = np.concatenate([torch.nn.Linear(50, 40).weight.detach().numpy().ravel()
                         for _ in range(20)])
    assert abs(cw.std() - tw.std()) < 0.02 * tw.std()
    assert abs(np.abs(cw).max() - np.abs(tw).max()) < 0.01 * np.abs(tw).max()


def test_bilinear_embedding_norm_default_init():
    cgrad.manual_seed(9)
    bl = nn.Bilinear(400, 3, 50)
    bound = 1 / math.sqrt(400)
    _uniform_ok(arr(bl.weight), -bound, bound)
    assert np.abs(arr(bl.bias)).max() <= bound
    emb = nn.Embedding(500, 100)
    _std_ok(arr(emb.weight), 1.0)
    emb_p = nn.Embedding(10, 4, padding_idx=3)
    assert (arr(emb_p.weight)[3] == 0).all() and (arr(emb_p.weight)[2] != 0).all()
    ln = nn.LayerNorm((2, 3))
    assert (arr(ln.weight) == 1).all() and (arr(ln.bias) == 0).all()
    bn = nn.BatchNorm1d(4)
    assert (arr(bn.weight) == 1).all() and (arr(bn.bias) == 0).all()
    assert (arr(bn.running_mean) == 0).all() and (arr(bn.running_var) == 1).all()
    assert bn.num_batches_tracked.dtype == np.int64 and int(bn.num_batches_tracked) == 0


def test_layers_reproducible_with_manual_seed():
    cgrad.manual_seed(10)
    a = nn.Sequential(nn.Linear(4, 3), nn.Embedding(5, 2), nn.Bilinear(2, 2, 2))
    cgrad.manual_seed(10)
    b = nn.Sequential(nn.Linear(4, 3), nn.Embedding(5, 2), nn.Bilinear(2, 2, 2))
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=k)


def test_reset_parameters_redraws():
    cgrad.manual_seed(11)
    lin = nn.Linear(5, 5)
    w = lin.weight
    before = arr(w).copy()
    lin.reset_parameters()
    assert lin.weight is w and not np.array_equal(arr(w), before)
