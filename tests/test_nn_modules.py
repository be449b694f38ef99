"""cgrad.nn: Parameter, Module, layers, losses, containers, clip_grad, save/load.

Against torch (when importable): the same weights copied in (through load_state_dict with
NumPy arrays) give the same outputs and gradients for every layer and loss; reprs equal
torch's with 'torch' replaced by 'cgrad'; state_dict keys, load_state_dict errors, BatchNorm
running statistics and clip_grad_norm_ equal torch's. Without torch: gradcheck of the fused
batch_norm and of bilinear, registration rules, save/load round trips and a short training
run that must reach a loss threshold.
"""
from __future__ import annotations

import copy
import io
import math
import os
import pickle
import sys
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402

try:
    from cgrad import save, load
except ImportError:                                   # until cgrad/__init__ exports them
    from cgrad.serialization import save, load


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def np_of(t):
    return t.detach().numpy()


def th2cg(s):
    return s.replace("torch", "cgrad")


def copy_weights(tm, cm):
    """Copy torch module tm's state into cgrad module cm as NumPy arrays."""
    res = cm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    assert res.missing_keys == [] and res.unexpected_keys == []


# ----------------------------------------------------------------------------------------
# Parameter
# ----------------------------------------------------------------------------------------
def test_parameter_basics(torch):
    t = cgrad.zeros(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, cgrad.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert np.shares_memory(p._data, t._data)
    assert repr(p) == th2cg(repr(torch.nn.Parameter(torch.zeros(2, 3))))
    assert str(p) == repr(p)
    pd = nn.Parameter(cgrad.zeros(2, dtype=cgrad.float64))
    assert repr(pd) == th2cg(repr(torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))))
    assert repr(nn.Parameter()) == th2cg(repr(torch.nn.Parameter()))
    pi = nn.Parameter(cgrad.tensor([1, 2]), requires_grad=False)
    assert repr(pi) == th2cg(repr(torch.nn.Parameter(torch.tensor([1, 2]),
                                                     requires_grad=False)))
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        nn.Parameter(cgrad.tensor([1, 2]))
    with pytest.raises(TypeError):
        nn.Parameter(np.zeros(2))


def test_parameter_results_are_plain_tensors():
    p = nn.Parameter(cgrad.randn(3, 2))
    x = cgrad.randn(4, 2)
    for r in (p * 2, 2 * p, p + p, p[0], p.t(), x @ p.t(), p.sum(), p.data, p.detach(),
              p.reshape(-1)):
        assert type(r) is cgrad.Tensor
    y = (x @ p.t()).sum()
    y.backward()
    assert type(p.grad) is cgrad.Tensor and p.grad.shape == p.shape
    np.testing.assert_allclose(np_of(p.grad), np.tile(np_of(x).sum(0), (3, 1)), rtol=1e-6)


def test_parameter_from_tensor_requiring_grad():
    a = cgrad.randn(3, requires_grad=True)
    b = a * 2
    p = nn.Parameter(b)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    np.testing.assert_array_equal(np_of(p), np_of(b))
    q = nn.Parameter(a, requires_grad=False)
    assert not q.requires_grad


def test_parameter_copy_and_pickle():
    p = nn.Parameter(cgrad.randn(2, 2))
    p.extra = "tag"
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad and q.extra == "tag"
    assert not np.shares_memory(q._data, p._data)
    np.testing.assert_array_equal(np_of(q), np_of(p))
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is nn.Parameter and r.requires_grad
    np.testing.assert_array_equal(np_of(r), np_of(p))


# ----------------------------------------------------------------------------------------
# Module registration and traversal
# ----------------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2)
        self.register_buffer("scale", cgrad.ones(2))
        self.register_buffer("tmp", cgrad.zeros(1), persistent=False)
        self.w = nn.Parameter(cgrad.ones(2))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale * self.w


def test_registration_and_traversal():
    m = Net()
    assert [n for n, _ in m.named_parameters()] == ["w", "fc1.weight", "fc1.bias",
                                                    "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["scale", "tmp"]
    assert list(m.state_dict()) == ["w", "scale", "fc1.weight", "fc1.bias", "fc2.weight",
                                    "fc2.bias"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert list(m.children())[0] is m.fc1 and list(m.modules())[0] is m
    assert len(list(m.parameters())) == 5 and len(list(m.parameters(recurse=False))) == 1
    assert [n for n, _ in m.named_parameters(prefix="net")][0] == "net.w"
    assert m.get_submodule("fc1") is m.fc1 and m.get_submodule("") is m
    assert m.get_parameter("fc2.bias") is m.fc2.bias
    assert m.get_buffer("scale") is m.scale
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        m.get_submodule("nope")
    with pytest.raises(AttributeError, match="is not an nn.Module"):
        m.get_submodule("w")
    assert "fc1" in dir(m) and "scale" in dir(m)
    # reassigning / deleting
    m.fc2 = nn.Linear(4, 5)
    assert m.fc2.out_features == 5
    m.w = None
    assert m.w is None and "w" not in m.state_dict()
    del m.act
    assert "act" not in m._modules
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'act'"):
        m.act
    m.scale = cgrad.zeros(2)
    assert "scale" in m._buffers
    m.plain = 3
    assert m.plain == 3 and "plain" in m.__dict__


def test_buffer_assignment(torch):
    m = nn.Module()
    m.a = nn.Buffer(cgrad.zeros(2))
    m.b = nn.Buffer(cgrad.ones(1), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["a", "b"]
    assert list(m.state_dict()) == ["a"]
    assert isinstance(m.a, cgrad.Tensor) and not m.a.requires_grad
    m.a = cgrad.ones(2)                  # a plain tensor assigned to a buffer name stays one
    assert list(m.state_dict()) == ["a"] and float(m.a.sum()) == 2.0
    tm = torch.nn.Module()
    tm.a = torch.nn.Buffer(torch.zeros(2))
    tm.b = torch.nn.Buffer(torch.ones(1), persistent=False)
    assert list(tm.state_dict()) == list(m.state_dict())


def test_forward_hooks_with_kwargs_and_prepend():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor
    m = Scale()
    order = []
    m.register_forward_pre_hook(lambda mod, args, kw: (args, {"factor": 3.0}),
                                with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: order.append("b"))
    m.register_forward_hook(lambda mod, args, out: order.append("a"), prepend=True)
    m.register_forward_hook(lambda mod, args, kw, out: out + kw["factor"], with_kwargs=True)
    y = m(cgrad.ones(2), factor=2.0)
    assert y.tolist() == [6.0, 6.0] and order == ["a", "b"]


def test_shared_parameters_and_modules_deduplicated():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    m = nn.Module()
    m.a = nn.Linear(2, 2)
    m.b = nn.Linear(2, 2)
    m.b.weight = m.a.weight
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias", "b.bias"]


def test_registration_errors_match_torch(torch):
    def errs(mod):
        m = mod.Module()
        m.p = mod.Parameter(mod.zeros(2))
        m.sub = mod.Linear(2, 2)
        m.register_buffer("buf", mod.zeros(1))
        out = []
        for fn in (lambda: setattr(m, "p", mod.zeros(2)),
                   lambda: setattr(m, "sub", 3),
                   lambda: setattr(m, "buf", 3),
                   lambda: m.register_buffer("a.b", mod.zeros(1)),
                   lambda: m.register_buffer("", mod.zeros(1)),
                   lambda: m.register_buffer("p", mod.zeros(1)),
                   lambda: m.register_buffer("x", 3),
                   lambda: m.register_buffer(1, mod.zeros(1)),
                   lambda: m.register_parameter("q", mod.zeros(2)),
                   lambda: m.register_parameter("a.b", mod.Parameter(mod.zeros(1))),
                   lambda: m.register_parameter("buf", mod.Parameter(mod.zeros(1))),
                   lambda: m.add_module("x", 3),
                   lambda: m.add_module("a.b", mod.Linear(1, 1)),
                   lambda: m.add_module("", mod.Linear(1, 1)),
                   lambda: m.add_module("p", mod.Linear(1, 1)),
                   lambda: m.train("yes"),
                   lambda: m(1)):
            try:
                fn()
                out.append(None)
            except Exception as e:   # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        return out

    class Shim:      # torch's names with torch.nn's classes
        Module, Parameter, Linear, zeros = (torch.nn.Module, torch.nn.Parameter,
                                            torch.nn.Linear, torch.zeros)

    class CShim:
        Module, Parameter, Linear, zeros = nn.Module, nn.Parameter, nn.Linear, cgrad.zeros

    for got, want in zip(errs(CShim), errs(Shim)):
        assert want is not None
        assert got is not None and got[0] == want[0]
        assert got[1] == th2cg(want[1]).replace("cgrad Tensor", "cgrad Tensor"), (got, want)


def test_non_leaf_parameter_rejected():
    m = nn.Module()
    a = cgrad.randn(2, requires_grad=True)
    p = nn.Parameter(cgrad.zeros(2))
    p._set_grad_fn((a * 2).grad_fn)
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'p'"):
        m.register_parameter("p", p)


def test_train_eval_zero_grad_apply_requires_grad():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Sequential(nn.BatchNorm1d(3)))
    assert all(mod.training for mod in m.modules())
    assert m.eval() is m and not any(mod.training for mod in m.modules())
    assert m.train() is m and all(mod.training for mod in m.modules())
    x = cgrad.randn(4, 3)
    m(x).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    g = m[0].weight.grad
    m.zero_grad(set_to_none=False)
    assert m[0].weight.grad is g and not g._data.any()
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "Dropout", "BatchNorm1d", "Sequential", "Sequential"]
    assert m.requires_grad_(False) is m and not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_forward_hooks_and_missing_forward():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    y = lin(cgrad.randn(3, 2))
    np.testing.assert_allclose(np_of(y), np.tile(np_of(lin.bias) + 1, (3, 1)), rtol=1e-6)
    assert calls == [cgrad.Size([3, 2])]
    h1.remove()
    h2.remove()
    x = cgrad.randn(3, 2)
    np.testing.assert_allclose(np_of(lin(x)), np_of(F.linear(x, lin.weight, lin.bias)))
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_to_double_float_keep_parameter_identity():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    w = m[0].weight
    m(cgrad.randn(4, 2)).sum().backward()
    assert m.double() is m
    assert m[0].weight is w and w.dtype == np.float64 and w.grad.dtype == np.float64
    assert m[1].running_mean.dtype == np.float64
    assert m[1].num_batches_tracked.dtype == np.int64
    y = m(cgrad.randn(4, 2, dtype=cgrad.float64))
    assert y.dtype == np.float64
    m.to(cgrad.float32)
    assert w.dtype == np.float32
    m.to("float64")
    assert w.dtype == np.float64
    m.float()
    assert w.dtype == np.float32
    assert m.to("cpu") is m
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(cgrad.int64)


def test_deepcopy_module():
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    m2 = copy.deepcopy(m)
    assert m2[0].weight is not m[0].weight
    assert type(m2[0].weight) is nn.Parameter
    np.testing.assert_array_equal(np_of(m2[0].weight), np_of(m[0].weight))
    m2[0].weight.data = m2[0].weight.data + 1     # .data takes a Tensor (torch)
    assert not np.allclose(np_of(m2[0].weight), np_of(m[0].weight))
    assert list(m2.state_dict()) == list(m.state_dict())


# ----------------------------------------------------------------------------------------
# repr
# ----------------------------------------------------------------------------------------
REPR_CASES = [
    lambda nn: nn.Linear(2, 3),
    lambda nn: nn.Linear(2, 3, bias=False),
    lambda nn: nn.Bilinear(2, 3, 4),
    lambda nn: nn.Embedding(10, 3),
    lambda nn: nn.Embedding(10, 3, padding_idx=-1, max_norm=1.0, norm_type=1.0,
                            scale_grad_by_freq=True, sparse=True),
    lambda nn: nn.Dropout(),
    lambda nn: nn.Dropout(0.2, inplace=True),
    lambda nn: nn.LayerNorm(4),
    lambda nn: nn.LayerNorm([3, 4], eps=1e-3, elementwise_affine=False),
    lambda nn: nn.LayerNorm(4, bias=False),
    lambda nn: nn.BatchNorm1d(3),
    lambda nn: nn.BatchNorm1d(3, momentum=None, affine=False, track_running_stats=False),
    lambda nn: nn.BatchNorm1d(3, bias=False),
    lambda nn: nn.BatchNorm2d(3),
    lambda nn: nn.Identity(54, unused="x"),
    lambda nn: nn.Flatten(),
    lambda nn: nn.Flatten(0, 2),
    lambda nn: nn.Unflatten(1, (2, 3)),
    lambda nn: nn.Unflatten(-1, [2, -1]),
    lambda nn: nn.ReLU(),
    lambda nn: nn.ReLU(inplace=True),
    lambda nn: nn.LeakyReLU(),
    lambda nn: nn.LeakyReLU(0.2, inplace=True),
    lambda nn: nn.ELU(),
    lambda nn: nn.ELU(alpha=0.5, inplace=True),
    lambda nn: nn.SELU(),
    lambda nn: nn.GELU(),
    lambda nn: nn.GELU(approximate="tanh"),
    lambda nn: nn.SiLU(),
    lambda nn: nn.Sigmoid(),
    lambda nn: nn.Tanh(),
    lambda nn: nn.Softplus(beta=2.0),
    lambda nn: nn.Softmax(dim=1),
    lambda nn: nn.Softmax(),
    lambda nn: nn.LogSoftmax(dim=-1),
    lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1),
    lambda nn: nn.NLLLoss(),
    lambda nn: nn.MSELoss(reduction="sum"),
    lambda nn: nn.L1Loss(),
    lambda nn: nn.BCELoss(),
    lambda nn: nn.BCEWithLogitsLoss(),
    lambda nn: nn.Sequential(),
    lambda nn: nn.Sequential(nn.Linear(2, 3), nn.ReLU(),
                             nn.Sequential(nn.Dropout(0.2), nn.BatchNorm1d(3)),
                             nn.ModuleDict({"a": nn.Identity(), "b": nn.Tanh()}),
                             nn.ModuleList([nn.Tanh()])),
    lambda nn: nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.GELU())])),
    lambda nn: nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.ReLU()]),
    lambda nn: nn.ModuleList(),
    lambda nn: nn.ModuleDict(),
    lambda nn: nn.ParameterList([nn.Parameter(nn.init.zeros_(nn.Linear(3, 2).weight)),
                                 nn.Parameter(nn.init.zeros_(nn.Linear(4, 1).bias))]),
]


@pytest.mark.parametrize("i", range(len(REPR_CASES)))
def test_repr_matches_torch(i, torch):
    assert repr(REPR_CASES[i](nn)) == th2cg(repr(REPR_CASES[i](torch.nn)))


def test_custom_module_repr(torch):
    def build(mod):
        class Net(mod.Module):
            def __init__(self):
                super().__init__()
                self.enc = mod.Sequential(mod.Linear(4, 8), mod.ReLU())
                self.head = mod.Linear(8, 2)

            def extra_repr(self):
                return "custom=1\nsecond line"
        return Net()
    assert repr(build(nn)) == repr(build(torch.nn))


# ----------------------------------------------------------------------------------------
# state dicts
# ----------------------------------------------------------------------------------------
ARCHS = [
    lambda nn: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(),
                             nn.Linear(4, 2)),
    lambda nn: nn.Sequential(nn.Embedding(5, 3), nn.LayerNorm(3), nn.Bilinear(3, 3, 2)),
    lambda nn: nn.ModuleDict({"a": nn.Linear(2, 2, bias=False),
                              "b": nn.ModuleList([nn.BatchNorm1d(2, affine=False),
                                                  nn.BatchNorm1d(2,
                                                                 track_running_stats=False)])}),
    lambda nn: nn.Sequential(nn.CrossEntropyLoss(weight=nn.Parameter(
        nn.init.ones_(nn.Linear(1, 3).bias)).detach()), nn.BCEWithLogitsLoss()),
]


@pytest.mark.parametrize("i", range(len(ARCHS)))
def test_state_dict_keys_match_torch(i, torch):
    cm, tm = ARCHS[i](nn), ARCHS[i](torch.nn)
    csd, tsd = cm.state_dict(), tm.state_dict()
    assert list(csd) == list(tsd)
    assert isinstance(csd, OrderedDict)
    assert dict(csd._metadata) == dict(tsd._metadata)
    for k in csd:
        assert tuple(csd[k].shape) == tuple(tsd[k].shape)
        assert csd[k].dtype == np.dtype(str(tsd[k].dtype).replace("torch.", ""))
        assert type(csd[k]) is cgrad.Tensor and not csd[k].requires_grad
        assert isinstance(csd[k].numpy(), np.ndarray)
    # the values share storage with the module's tensors (as torch's detach())
    p = next(cm.parameters(), None)
    if p is not None:
        assert np.shares_memory(next(iter(csd.values())).numpy(), p._data)
        kv = cm.state_dict(keep_vars=True)
        assert any(v is p for v in kv.values())


def test_load_state_dict_round_trip_and_numpy_values():
    src, dst = ARCHS[0](nn), ARCHS[0](nn)
    src.train()
    src(cgrad.randn(8, 3))            # moves the running stats
    res = dst.load_state_dict(src.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    for (k, a), b in zip(src.state_dict().items(), dst.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    w = dst[0].weight
    v0 = w._version
    dst.load_state_dict({k: v.numpy() * 2 for k, v in src.state_dict().items()})
    assert dst[0].weight is w and w._version > v0
    np.testing.assert_array_equal(np_of(w), np_of(src[0].weight) * 2)
    assert int(dst[1].num_batches_tracked) == 2
    # 0-d buffer from a shape-[1] value (torch's special case)
    sd = src.state_dict()
    sd["1.num_batches_tracked"] = np.array([7])
    dst.load_state_dict(sd)
    assert int(dst[1].num_batches_tracked) == 7
    # assign=True: the given tensors become the parameters
    sd = {k: v.clone() for k, v in src.state_dict().items()}
    dst.load_state_dict(sd, assign=True)
    assert type(dst[0].weight) is nn.Parameter and dst[0].weight.requires_grad
    assert np.shares_memory(dst[0].weight._data, sd["0.weight"]._data)
    # old BatchNorm checkpoints without num_batches_tracked load (version < 2)
    sd = OrderedDict((k, v) for k, v in src.state_dict().items() if "num_batches" not in k)
    dst.load_state_dict(sd)


def test_load_state_dict_errors_match_torch(torch):
    def msg(mod, sd, **kw):
        with pytest.raises(RuntimeError) as ei:
            mod.Linear(2, 3).load_state_dict(sd, **kw)
        return str(ei.value)

    cases = [
        {"weight": np.zeros((3, 3), np.float32), "foo": np.zeros(1, np.float32)},
        {"weight": np.zeros((3, 2), np.float32)},
        {"weight": np.zeros((3, 2), np.float32), "bias": np.zeros(3, np.float32),
         "extra.x": np.zeros(1, np.float32)},
        {"weight": np.zeros((2, 2), np.float32), "bias": np.zeros(4, np.float32)},
    ]
    for sd in cases:
        want = msg(torch.nn, {k: torch.tensor(v) for k, v in sd.items()})
        got = msg(nn, sd)
        assert got == th2cg(want), (got, want)
        assert got.startswith("Error(s) in loading state_dict for Linear")
    with pytest.raises(RuntimeError, match="Missing key"):
        nn.Sequential(nn.Linear(2, 2)).load_state_dict({"0.weight": np.zeros((2, 2))})
    res = nn.Linear(2, 3).load_state_dict({"weight": np.zeros((3, 2)), "foo": np.zeros(1)},
                                          strict=False)
    tres = torch.nn.Linear(2, 3).load_state_dict(
        {"weight": torch.zeros(3, 2), "foo": torch.zeros(1)}, strict=False)
    assert res == tuple(tres) and repr(res) == repr(tres)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        nn.Linear(2, 3).load_state_dict([1, 2])
    with pytest.raises(RuntimeError, match='While copying the parameter named "weight"'):
        nn.Linear(2, 3).load_state_dict({"weight": "x", "bias": np.zeros(3)})


def test_load_state_dict_between_cgrad_and_torch(torch):
    tm, cm = ARCHS[0](torch.nn), ARCHS[0](nn)
    tm(torch.randn(8, 3))
    copy_weights(tm, cm)
    tm2 = ARCHS[0](torch.nn)
    tm2.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in cm.state_dict().items()})
    for (k, a), b in zip(tm.state_dict().items(), tm2.state_dict().values()):
        assert torch.equal(a, b), k


# ----------------------------------------------------------------------------------------
# layers against torch: outputs and gradients (inputs and parameters), float64
# ----------------------------------------------------------------------------------------
LAYERS = [
    # name, constructor(nn), input shapes (int inputs: ("int", shape, high)), train mode
    ("linear", lambda nn: nn.Linear(4, 3), [(5, 4)]),
    ("linear_nobias", lambda nn: nn.Linear(4, 3, bias=False), [(5, 4)]),
    ("linear_3d", lambda nn: nn.Linear(4, 3), [(2, 5, 4)]),
    ("linear_1d", lambda nn: nn.Linear(4, 3), [(4,)]),
    ("bilinear", lambda nn: nn.Bilinear(3, 4, 2), [(5, 3), (5, 4)]),
    ("bilinear_nobias_3d", lambda nn: nn.Bilinear(3, 4, 2, bias=False), [(2, 5, 3), (2, 5, 4)]),
    ("embedding", lambda nn: nn.Embedding(10, 3), [("int", (4, 5), 10)]),
    ("embedding_pad", lambda nn: nn.Embedding(10, 3, padding_idx=2), [("int", (4, 5), 4)]),
    ("layernorm", lambda nn: nn.LayerNorm(4), [(3, 4)]),
    ("layernorm_2d", lambda nn: nn.LayerNorm([3, 4]), [(2, 3, 4)]),
    ("layernorm_noaffine", lambda nn: nn.LayerNorm(4, elementwise_affine=False), [(3, 4)]),
    ("layernorm_nobias", lambda nn: nn.LayerNorm(4, bias=False), [(3, 4)]),
    ("batchnorm", lambda nn: nn.BatchNorm1d(3), [(6, 3)]),
    ("batchnorm_3d", lambda nn: nn.BatchNorm1d(3), [(4, 3, 5)]),
    ("batchnorm_noaffine", lambda nn: nn.BatchNorm1d(3, affine=False), [(6, 3)]),
    ("batchnorm_nobias", lambda nn: nn.BatchNorm1d(3, bias=False), [(6, 3)]),
    ("batchnorm_notrack", lambda nn: nn.BatchNorm1d(3, track_running_stats=False), [(6, 3)]),
    ("batchnorm_eval", lambda nn: nn.BatchNorm1d(3).eval(), [(6, 3)]),
    ("batchnorm_eval_3d", lambda nn: nn.BatchNorm1d(3).eval(), [(4, 3, 5)]),
    ("batchnorm_eval_noaffine", lambda nn: nn.BatchNorm1d(3, affine=False).eval(), [(6, 3)]),
    ("batchnorm_eval_notrack",
     lambda nn: nn.BatchNorm1d(3, track_running_stats=False).eval(), [(6, 3)]),
    ("batchnorm2d", lambda nn: nn.BatchNorm2d(2), [(3, 2, 2, 3)]),
    ("dropout_eval", lambda nn: nn.Dropout(0.5).eval(), [(3, 4)]),
    ("dropout_p0", lambda nn: nn.Dropout(0.0), [(3, 4)]),
    ("identity", lambda nn: nn.Identity(), [(3, 4)]),
    ("flatten", lambda nn: nn.Flatten(), [(2, 3, 4, 5)]),
    ("flatten_0_2", lambda nn: nn.Flatten(0, 2), [(2, 3, 4, 5)]),
    ("flatten_neg", lambda nn: nn.Flatten(-3, -2), [(2, 3, 4, 5)]),
    ("unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [(4, 6)]),
    ("unflatten_neg", lambda nn: nn.Unflatten(-1, (2, -1)), [(4, 3, 6)]),
    ("relu", lambda nn: nn.ReLU(), [(3, 4)]),
    ("leaky_relu", lambda nn: nn.LeakyReLU(0.2), [(3, 4)]),
    ("elu", lambda nn: nn.ELU(0.5), [(3, 4)]),
    ("selu", lambda nn: nn.SELU(), [(3, 4)]),
    ("gelu", lambda nn: nn.GELU(), [(3, 4)]),
    ("gelu_tanh", lambda nn: nn.GELU("tanh"), [(3, 4)]),
    ("silu", lambda nn: nn.SiLU(), [(3, 4)]),
    ("sigmoid", lambda nn: nn.Sigmoid(), [(3, 4)]),
    ("tanh", lambda nn: nn.Tanh(), [(3, 4)]),
    ("softplus", lambda nn: nn.Softplus(beta=2.0, threshold=1.0), [(3, 4)]),
    ("softmax", lambda nn: nn.Softmax(dim=1), [(3, 4)]),
    ("softmax_0", lambda nn: nn.Softmax(dim=0), [(3, 4)]),
    ("log_softmax", lambda nn: nn.LogSoftmax(dim=-1), [(2, 3, 4)]),
    ("mlp", lambda nn: nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                     nn.Dropout(0.0), nn.Linear(8, 8), nn.LayerNorm(8),
                                     nn.GELU(), nn.Linear(8, 3), nn.LogSoftmax(dim=1)),
     [(6, 4)]),
]


def _inputs(shapes, rng):
    arrs = []
    for s in shapes:
        if isinstance(s[0], str):
            _, shape, high = s
            arrs.append(rng.integers(0, high, size=shape))
        else:
            arrs.append(rng.standard_normal(s))
    return arrs


@pytest.mark.parametrize("name,ctor,shapes", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_torch(name, ctor, shapes, torch):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    tm, cm = ctor(torch.nn).double(), ctor(nn).double()
    if name.startswith("batchnorm_eval") and tm.track_running_stats:
        with torch.no_grad():
            tm.running_mean.copy_(torch.tensor(rng.standard_normal(3)))
            tm.running_var.copy_(torch.tensor(rng.uniform(0.5, 2, 3)))
    for p in tm.parameters():       # non-trivial affine parameters
        with torch.no_grad():
            p.add_(torch.tensor(rng.standard_normal(tuple(p.shape))) * 0.3)
    copy_weights(tm, cm)
    cm.train(tm.training)
    arrs = _inputs(shapes, rng)
    xt = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrs]
    xc = [cgrad.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrs]
    yt, yc = tm(*xt), cm(*xc)
    assert tuple(yc.shape) == tuple(yt.shape)
    assert yc.dtype == np.float64
    np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), rtol=1e-9, atol=1e-10)
    v = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(v))
    yc.backward(cgrad.tensor(v))
    for a, b in zip(xc, xt):
        if b.requires_grad:
            np.testing.assert_allclose(np_of(a.grad), b.grad.numpy(), rtol=1e-8, atol=1e-10)
    tp = dict(tm.named_parameters())
    cp = dict(cm.named_parameters())
    assert list(cp) == list(tp)
    for k in tp:
        if tp[k].grad is None:
            assert cp[k].grad is None, k
        else:
            np.testing.assert_allclose(np_of(cp[k].grad), tp[k].grad.numpy(), rtol=1e-8,
                                       atol=1e-10, err_msg=k)
    for (k, a), b in zip(cm.state_dict().items(), tm.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


def test_layer_errors_match_torch(torch):
    cases = [
        (lambda nn: nn.BatchNorm1d(3), (4,)),
        (lambda nn: nn.BatchNorm1d(3), (2, 3, 4, 5)),
        (lambda nn: nn.BatchNorm1d(3), (1, 3)),
        (lambda nn: nn.BatchNorm2d(3), (2, 3)),
        (lambda nn: nn.Flatten(2, 1), (2, 3, 4)),
        (lambda nn: nn.Flatten(3), (2, 3, 4)),
        (lambda nn: nn.Unflatten(1, (4, 2)), (2, 6)),
    ]
    for ctor, shape in cases:
        with pytest.raises(Exception) as et:
            ctor(torch.nn)(torch.zeros(shape))
        with pytest.raises(Exception) as ec:
            ctor(nn)(cgrad.zeros(*shape))
        assert type(ec.value) is type(et.value), (et.value, ec.value)
        assert str(ec.value) == th2cg(str(et.value))
    for fn in (lambda nn: nn.Dropout(1.5), lambda nn: nn.Dropout(-0.1),
               lambda nn: nn.Unflatten(1, 3), lambda nn: nn.Unflatten(1, (2, 1.5)),
               lambda nn: nn.Embedding(3, 2, padding_idx=3),
               lambda nn: nn.Embedding(3, 2, padding_idx=-4)):
        with pytest.raises(Exception) as et:
            fn(torch.nn)
        with pytest.raises(Exception) as ec:
            fn(nn)
        assert type(ec.value) is type(et.value) and str(ec.value) == str(et.value)


# ----------------------------------------------------------------------------------------
# losses against torch
# ----------------------------------------------------------------------------------------
def _targets(kind, rng, n=5, c=4):
    if kind == "class":
        return rng.integers(0, c, size=n)
    if kind == "prob":
        return rng.uniform(0.05, 0.95, size=(n, c))
    return rng.standard_normal((n, c))


LOSSES = [
    # name, ctor(nn, weight_tensor_fn), input kind, target kind
    ("ce", lambda nn, w: nn.CrossEntropyLoss(), "logits", "class"),
    ("ce_weight_sum", lambda nn, w: nn.CrossEntropyLoss(weight=w(4), reduction="sum"),
     "logits", "class"),
    ("ce_ignore_none", lambda nn, w: nn.CrossEntropyLoss(ignore_index=1, reduction="none"),
     "logits", "class"),
    ("ce_smooth", lambda nn, w: nn.CrossEntropyLoss(label_smoothing=0.2), "logits", "class"),
    ("ce_probs", lambda nn, w: nn.CrossEntropyLoss(), "logits", "softprob"),
    ("nll", lambda nn, w: nn.NLLLoss(), "logprob", "class"),
    ("nll_weight", lambda nn, w: nn.NLLLoss(weight=w(4), ignore_index=0), "logprob", "class"),
    ("mse", lambda nn, w: nn.MSELoss(), "logits", "real"),
    ("mse_sum", lambda nn, w: nn.MSELoss(reduction="sum"), "logits", "real"),
    ("mse_none", lambda nn, w: nn.MSELoss(reduction="none"), "logits", "real"),
    ("l1", lambda nn, w: nn.L1Loss(), "logits", "real"),
    ("l1_none", lambda nn, w: nn.L1Loss(reduction="none"), "logits", "real"),
    ("bce", lambda nn, w: nn.BCELoss(), "prob", "prob"),
    ("bce_weight", lambda nn, w: nn.BCELoss(weight=w(4), reduction="sum"), "prob", "prob"),
    ("bce_logits", lambda nn, w: nn.BCEWithLogitsLoss(), "logits", "prob"),
    ("bce_logits_pos", lambda nn, w: nn.BCEWithLogitsLoss(weight=w(4), pos_weight=w(4)),
     "logits", "prob"),
    ("bce_logits_none", lambda nn, w: nn.BCEWithLogitsLoss(reduction="none"), "logits",
     "prob"),
]


@pytest.mark.parametrize("name,ctor,ikind,tkind", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(name, ctor, ikind, tkind, torch):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    warr = rng.uniform(0.5, 2.0, 4)
    if ikind == "logits":
        x = rng.standard_normal((5, 4))
    elif ikind == "prob":
        x = rng.uniform(0.05, 0.95, (5, 4))
    else:
        z = rng.standard_normal((5, 4))
        x = z - np.log(np.exp(z).sum(1, keepdims=True))
    if tkind == "softprob":
        t = rng.uniform(0, 1, (5, 4))
        t /= t.sum(1, keepdims=True)
    else:
        t = _targets(tkind, rng)
    tl = ctor(torch.nn, lambda n: torch.tensor(warr[:n]))
    cl = ctor(nn, lambda n: cgrad.tensor(warr[:n]))
    assert list(cl.state_dict()) == list(tl.state_dict())
    xt, xc = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
    yt, yc = tl(xt, torch.tensor(t)), cl(xc, cgrad.tensor(t))
    assert tuple(yc.shape) == tuple(yt.shape)
    np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), rtol=1e-9, atol=1e-12)
    v = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(v))
    yc.backward(cgrad.tensor(v))
    np.testing.assert_allclose(np_of(xc.grad), xt.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_loss_legacy_size_average_reduce(torch):
    x = np.random.default_rng(0).standard_normal((3, 4))
    for kw in ({"size_average": False}, {"reduce": False}):
        with warnings.catch_warnings(record=True) as wc:
            warnings.simplefilter("always")
            cl = nn.MSELoss(**kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tl = torch.nn.MSELoss(**kw)
        assert cl.reduction == tl.reduction
        assert any("size_average and reduce args will be deprecated" in str(w.message)
                   for w in wc)
        np.testing.assert_allclose(np_of(cl(cgrad.tensor(x), cgrad.zeros(3, 4,
                                                                         dtype=cgrad.float64))),
                                   tl(torch.tensor(x), torch.zeros(3, 4,
                                                                   dtype=torch.float64)).numpy())


# ----------------------------------------------------------------------------------------
# Dropout and BatchNorm: train/eval behaviour
# ----------------------------------------------------------------------------------------
def test_dropout_train_eval():
    cgrad.manual_seed(0)
    d = nn.Dropout(0.3)
    x = cgrad.ones(200, 100, requires_grad=True)
    y = d(x)
    arr = np_of(y)
    frac = (arr == 0).mean()
    assert abs(frac - 0.3) < 0.02
    np.testing.assert_allclose(arr[arr != 0], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), arr)     # grad = mask / (1 - p)
    d.eval()
    x2 = cgrad.randn(3, 4)
    assert d(x2) is x2
    d.train()
    assert (np_of(nn.Dropout(1.0)(cgrad.ones(3, 4))) == 0).all()
    z = cgrad.randn(3, 4)
    np.testing.assert_array_equal(np_of(nn.Dropout(0.0)(z)), np_of(z))
    # reproducible with the global seed
    cgrad.manual_seed(5)
    a = np_of(d(cgrad.ones(10, 10)))
    cgrad.manual_seed(5)
    np.testing.assert_array_equal(a, np_of(d(cgrad.ones(10, 10))))


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5)])
@pytest.mark.parametrize("kw", [{}, {"momentum": None}, {"momentum": 0.3, "affine": False}])
def test_batchnorm_running_stats_match_torch(shape, kw, torch):
    rng = np.random.default_rng(1)
    tm, cm = torch.nn.BatchNorm1d(3, **kw), nn.BatchNorm1d(3, **kw)
    for step in range(5):
        x = (rng.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        yt = tm(torch.tensor(x))
        yc = cm(cgrad.tensor(x))
        np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    for k, a in cm.state_dict().items():
        np.testing.assert_allclose(a.numpy(), tm.state_dict()[k].numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=k)
    assert int(cm.num_batches_tracked) == 5
    tm.eval()
    cm.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(np_of(cm(cgrad.tensor(x))), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    rm = cm.running_mean.numpy().copy()
    cm(cgrad.tensor(x))
    np.testing.assert_array_equal(cm.running_mean.numpy(), rm)     # eval: no update
    assert int(cm.num_batches_tracked) == 5


def test_batchnorm_no_running_stats_in_no_grad_and_reset():
    bn = nn.BatchNorm1d(2)
    with cgrad.no_grad():
        y = bn(cgrad.randn(5, 2) * 3 + 1)
    assert not y.requires_grad
    assert not np.allclose(bn.running_mean.numpy(), 0)
    bn.reset_running_stats()
    np.testing.assert_array_equal(bn.running_mean.numpy(), 0)
    np.testing.assert_array_equal(bn.running_var.numpy(), 1)
    assert int(bn.num_batches_tracked) == 0


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 4)])
def test_batch_norm_gradcheck(shape):
    from cgrad.nn.modules.normalization import batch_norm
    rng = np.random.default_rng(2)
    C = shape[1]
    x = cgrad.tensor(rng.standard_normal(shape), requires_grad=True)
    w = cgrad.tensor(rng.standard_normal(C), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal(C), requires_grad=True)

    def fn(x, w, b):
        return batch_norm(x, None, None, w, b, training=True, eps=1e-3)
    assert gradcheck(fn, [x, w, b])
    assert gradgradcheck(fn, [x, w, b])
    assert gradcheck(lambda x: batch_norm(x, None, None, training=True), [x])
    assert fn(x, w, b).grad_fn.name() == "NativeBatchNormBackward0"


def test_bilinear_gradcheck():
    from cgrad.nn.modules.linear import bilinear
    rng = np.random.default_rng(3)
    a = cgrad.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    c = cgrad.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = cgrad.tensor(rng.standard_normal((2, 2, 4)), requires_grad=True)
    b = cgrad.tensor(rng.standard_normal(2), requires_grad=True)
    assert gradcheck(bilinear, [a, c, w, b])
    assert gradgradcheck(bilinear, [a, c, w, b])


def test_embedding_padding_and_from_pretrained(torch):
    cgrad.manual_seed(0)
    e = nn.Embedding(6, 3, padding_idx=-2)
    assert e.padding_idx == 4
    np.testing.assert_array_equal(np_of(e.weight)[4], 0)
    idx = cgrad.tensor([[4, 1], [4, 4]])
    e(idx).sum().backward()
    np.testing.assert_array_equal(np_of(e.weight.grad)[4], 0)
    np.testing.assert_array_equal(np_of(e.weight.grad)[1], 1)
    w = cgrad.randn(4, 2)
    ep = nn.Embedding.from_pretrained(w)
    assert not ep.weight.requires_grad and np.shares_memory(ep.weight._data, w._data)
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    assert repr(nn.Embedding.from_pretrained(w, padding_idx=1)) == th2cg(
        repr(torch.nn.Embedding.from_pretrained(torch.zeros(4, 2), padding_idx=1)))
    with pytest.raises(AssertionError, match="expected to be 2-dimensional"):
        nn.Embedding.from_pretrained(cgrad.zeros(3))
    with pytest.raises(AssertionError, match="Shape of weight does not match"):
        nn.Embedding(3, 2, _weight=cgrad.zeros(2, 2))


# ----------------------------------------------------------------------------------------
# containers
# ----------------------------------------------------------------------------------------
def test_sequential_container_ops():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    sl = s[1:]
    assert type(sl) is nn.Sequential and list(sl) == [b, c]
    assert list(sl._modules) == ["1", "2"]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        s[3]
    s.append(nn.Tanh())
    assert len(s) == 4 and isinstance(s[3], nn.Tanh)
    d = nn.Identity()
    s.insert(1, d)
    assert s[1] is d and s[2] is b and list(s._modules) == ["0", "1", "2", "3", "4"]
    del s[1]
    assert list(s) == [a, b, c, s[3]] and list(s._modules) == ["0", "1", "2", "3"]
    assert s.pop(3).__class__ is nn.Tanh and len(s) == 3
    s[1] = nn.GELU()
    assert isinstance(s[1], nn.GELU)
    s2 = s + nn.Sequential(nn.Sigmoid())
    assert len(s2) == 4
    s.extend([nn.Identity()])
    assert len(s) == 4
    y = s(cgrad.randn(5, 2))
    assert y.shape == (5, 1)
    named = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(named._modules) == ["enc", "act"] and named.enc is named[0]
    with pytest.raises(ValueError, match="add operator supports only objects of Sequential"):
        s + 1


def test_modulelist_moduledict_parameterlist():
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    ml.append(nn.Tanh())
    ml += [nn.Identity()]
    ml.extend([nn.Sigmoid()])
    assert len(ml) == 5 and isinstance(ml[-1], nn.Sigmoid)
    assert type(ml[1:3]) is nn.ModuleList and len(ml[1:3]) == 2
    ml.insert(0, nn.GELU())
    assert isinstance(ml[0], nn.GELU) and len(ml) == 6
    del ml[0]
    assert isinstance(ml[0], nn.Linear) and list(ml._modules) == [str(i) for i in range(5)]
    assert isinstance(ml.pop(1), nn.ReLU) and len(ml) == 4
    assert len(list(ml.parameters())) == 2
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable"):
        ml.extend(3)
    md = nn.ModuleDict({"a": nn.Linear(2, 2)})
    md["b"] = nn.ReLU()
    md.update([("c", nn.Tanh())])
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert list(md.keys()) == ["a", "b", "c"] and isinstance(md.pop("b"), nn.ReLU)
    assert [k for k, _ in md.items()] == ["a", "c"]
    assert list(md.state_dict()) == ["a.weight", "a.bias"]
    md.clear()
    assert len(md) == 0
    pl = nn.ParameterList([nn.Parameter(cgrad.zeros(2)), cgrad.ones(3)])
    assert type(pl[1]) is nn.Parameter and len(pl) == 2
    assert list(pl.state_dict()) == ["0", "1"]
    holder = nn.Module()
    holder.params = pl
    assert [n for n, _ in holder.named_parameters()] == ["params.0", "params.1"]


# ----------------------------------------------------------------------------------------
# nn.utils: clip_grad_norm_, clip_grad_value_, parameters_to_vector
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, torch):
    rng = np.random.default_rng(4)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4,), (2, 2, 2))]
    cps = [nn.Parameter(cgrad.zeros(*g.shape)) for g in grads]
    tps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
    for cp, tp, g in zip(cps, tps, grads):
        cp.grad = cgrad.tensor(g)
        tp.grad = torch.tensor(g)
    cps.append(nn.Parameter(cgrad.zeros(2)))     # no grad: skipped
    tps.append(torch.nn.Parameter(torch.zeros(2)))
    g0 = cps[0].grad
    tn_c = nn.utils.clip_grad_norm_(iter(cps), max_norm, norm_type=norm_type)
    tn_t = torch.nn.utils.clip_grad_norm_(iter(tps), max_norm, norm_type=norm_type)
    assert isinstance(tn_c, cgrad.Tensor) and tn_c.dim() == 0 and tn_c.dtype == np.float32
    np.testing.assert_allclose(float(tn_c), float(tn_t), rtol=1e-5)
    assert cps[0].grad is g0                      # scaled in place
    for cp, tp in zip(cps[:3], tps[:3]):
        np.testing.assert_allclose(np_of(cp.grad), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(cgrad.zeros(3))
    tn = nn.utils.clip_grad_norm_(p, 1.0)        # single tensor, no grad
    assert float(tn) == 0.0
    p.grad = cgrad.tensor([3.0, 4.0, 0.0])
    assert float(nn.utils.clip_grad_norm_(p, 1.0)) == pytest.approx(5.0)
    np.testing.assert_allclose(np_of(p.grad), [0.6, 0.8, 0.0], rtol=1e-5)
    p.grad = cgrad.tensor([float("nan"), 1.0, 0.0])
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    tn = nn.utils.clip_grad_norm_([p], 1.0)
    assert math.isnan(float(tn))


def test_clip_grad_value_and_vector_conversion(torch):
    rng = np.random.default_rng(5)
    g = rng.standard_normal((4, 3)).astype(np.float32) * 2
    cp, tp = nn.Parameter(cgrad.zeros(4, 3)), torch.nn.Parameter(torch.zeros(4, 3))
    cp.grad, tp.grad = cgrad.tensor(g), torch.tensor(g)
    assert nn.utils.clip_grad_value_([cp], 0.7) is None
    torch.nn.utils.clip_grad_value_([tp], 0.7)
    np.testing.assert_array_equal(np_of(cp.grad), tp.grad.numpy())
    m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = nn.utils.parameters_to_vector(m.parameters())
    assert vec.shape == (11,) and vec.requires_grad and vec.grad_fn.name() == "CatBackward0"
    (vec * cgrad.arange(11, dtype=cgrad.float32)).sum().backward()
    np.testing.assert_array_equal(np_of(m[0].weight.grad).ravel(), np.arange(6))
    np.testing.assert_array_equal(np_of(m[1].bias.grad), [10])
    new = cgrad.arange(11, dtype=cgrad.float32)
    nn.utils.vector_to_parameters(new, m.parameters())
    np.testing.assert_array_equal(np_of(m[0].weight), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np_of(m[1].bias), [10])
    with pytest.raises(TypeError, match="expected cgrad.Tensor, but got"):
        nn.utils.vector_to_parameters(np.zeros(11), m.parameters())


# ----------------------------------------------------------------------------------------
# save / load
# ----------------------------------------------------------------------------------------
def test_save_load_round_trip(tmp_path):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m(cgrad.randn(5, 3))
    shared = cgrad.randn(3)
    ckpt = {
        "model": m.state_dict(),
        "optimizer": {"state": {0: {"step": cgrad.tensor(3.0), "exp_avg": shared},
                                1: {"momentum_buffer": shared}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
                                        "weight_decay": 0, "amsgrad": False,
                                        "foreach": None, "params": [0, 1]}]},
        "epoch": 7, "best": float("inf"), "name": "run", "hist": [1.5, 2.5],
        "arr": np.arange(4, dtype=np.int32), "npscalar": np.float32(0.25),
        (1, "k"): "tuple key", "param": nn.Parameter(cgrad.ones(2)),
        "grad_leaf": cgrad.ones(2, requires_grad=True),
    }
    path = tmp_path / "ckpt.pt"
    save(ckpt, path)
    assert path.exists() and not (tmp_path / "ckpt.pt.npz").exists()
    with zipfile.ZipFile(path) as z:                   # torch's zip checkpoint format
        assert "archive/data.pkl" in z.namelist()
    r = load(str(path), weights_only=False)             # NumPy objects need weights_only=False
    assert type(r["model"]) is OrderedDict and list(r["model"]) == list(m.state_dict())
    for (k, a), b in zip(m.state_dict().items(), r["model"].values()):
        assert type(b) is cgrad.Tensor and b.dtype == a.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    st = r["optimizer"]["state"]
    assert set(st) == {0, 1} and st[0]["exp_avg"] is st[1]["momentum_buffer"]
    assert float(st[0]["step"]) == 3.0
    pg = r["optimizer"]["param_groups"][0]
    assert pg == {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0,
                  "amsgrad": False, "foreach": None, "params": [0, 1]}
    assert r["epoch"] == 7 and r["best"] == float("inf") and r["name"] == "run"
    assert r["hist"] == [1.5, 2.5] and r[(1, "k")] == "tuple key"
    assert r["arr"].dtype == np.int32 and list(r["arr"]) == [0, 1, 2, 3]
    assert r["npscalar"] == np.float32(0.25) and type(r["npscalar"]) is np.float32
    assert type(r["param"]) is nn.Parameter and r["param"].requires_grad
    assert r["grad_leaf"].requires_grad
    m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m2.load_state_dict(r["model"])
    x = cgrad.randn(2, 3)
    m.eval()
    m2.eval()
    np.testing.assert_array_equal(np_of(m(x)), np_of(m2(x)))
    # file objects and bare tensors
    buf = io.BytesIO()
    save(cgrad.arange(3), buf)
    buf.seek(0)
    t = load(buf)
    assert type(t) is cgrad.Tensor and t.tolist() == [0, 1, 2]


def test_save_refuses_code_and_load_refuses_foreign(tmp_path):
    with pytest.raises(TypeError, match="Save model.state_dict"):
        save(nn.Linear(2, 2), io.BytesIO())
    with pytest.raises(TypeError):
        save({"f": len}, io.BytesIO())
    with pytest.raises(TypeError):
        save({"a": np.array([object()])}, io.BytesIO())
    p = tmp_path / "plain.npz"
    np.savez(p, x=np.zeros(2))
    with pytest.raises(RuntimeError, match="not a cgrad archive"):
        load(p)
    q = tmp_path / "garbage.pt"
    q.write_bytes(b"not a zip file")
    with pytest.raises(Exception):
        load(q)


# ----------------------------------------------------------------------------------------
# a short training run
# ----------------------------------------------------------------------------------------
def test_training_run_reaches_loss_threshold():
    """Two interleaved spirals: a 2-32-32-2 MLP with BatchNorm trained with plain SGD."""
    rng = np.random.default_rng(0)
    n = 100
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    pts = np.stack([t * np.cos(t), t * np.sin(t)], 1) / 10
    X = np.concatenate([pts, -pts]).astype(np.float32) + rng.normal(0, 0.02, (2 * n, 2)).astype(
        np.float32)
    y = np.concatenate([np.zeros(n), np.ones(n)]).astype(np.int64)
    cgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 32), nn.BatchNorm1d(32), nn.Tanh(), nn.Linear(32, 32),
                          nn.ReLU(), nn.Linear(32, 2))
    loss_fn = nn.CrossEntropyLoss()
    Xt, yt = cgrad.tensor(X), cgrad.tensor(y)
    lr = 0.3
    first = None
    for step in range(800):
        model.zero_grad()
        loss = loss_fn(model(Xt), yt)
        if first is None:
            first = float(loss)
        loss.backward()
        for p in model.parameters():
            p.data -= lr * p.grad
    model.eval()
    with cgrad.no_grad():
        logits = model(Xt)
        final = float(loss_fn(logits, yt))
    acc = (np_of(logits).argmax(1) == y).mean()
    assert first > 0.6 and final < 0.1, (first, final)
    assert acc > 0.95
