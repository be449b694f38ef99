"""nn.utils.parametrize and nn.utils.parametrizations (weight_norm, spectral_norm) against
torch: class names, repr, state_dict keys, values and gradients with torch's state loaded,
assignment through right_inverse, caching, removal, errors."""
from __future__ import annotations

import numpy as np
import pytest

import cgrad
from cgrad.nn.utils import parametrize

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def _load_from_torch(cm, tm):
    cm.load_state_dict({k: cgrad.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})


def _symmetric(T):
    class Symmetric(T.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()
    return Symmetric


def _scale(T):
    class Scale(T.nn.Module):
        def forward(self, X):
            return 2.0 * X

        def right_inverse(self, A):
            return A / 2.0
    return Scale


def _build(T, seed=0):
    T.manual_seed(seed)
    m = T.nn.Linear(3, 3).double()
    parametrize.register_parametrization(m, "weight", _symmetric(T)()) if T is cgrad else \
        torch.nn.utils.parametrize.register_parametrization(m, "weight", _symmetric(T)())
    return m


def test_register_parametrization_like_torch():
    tm = _build(torch)
    cm = _build(cgrad)
    assert type(cm).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert repr(cm) == repr(tm)
    assert list(cm.state_dict()) == list(tm.state_dict())
    _load_from_torch(cm, tm)
    np.testing.assert_allclose(_np(cm.weight), _np(tm.weight), rtol=0, atol=0)
    w = _np(cm.weight)
    assert np.array_equal(w, w.T)
    x = np.random.default_rng(0).standard_normal((5, 3))
    yc, yt = cm(cgrad.tensor(x)), tm(torch.tensor(x))
    yc.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    np.testing.assert_allclose(_np(yc), _np(yt), rtol=1e-12)
    oc = cm.parametrizations.weight.original
    ot = tm.parametrizations.weight.original
    np.testing.assert_allclose(_np(oc.grad), _np(ot.grad), rtol=1e-12)
    assert parametrize.is_parametrized(cm) and parametrize.is_parametrized(cm, "weight")
    assert not parametrize.is_parametrized(cm, "bias")
    assert parametrize.type_before_parametrizations(cm) is cgrad.nn.Linear


def test_original_keeps_the_parameter_object_and_optimizers_train_it():
    m = cgrad.nn.Linear(3, 3).double()
    w = m.weight
    opt = cgrad.optim.SGD(m.parameters(), lr=0.1)
    parametrize.register_parametrization(m, "weight", _symmetric(cgrad)())
    assert m.parametrizations.weight.original is w
    assert any(p is w for p in m.parameters())
    before = _np(w).copy()
    m(cgrad.ones(2, 3, dtype=cgrad.float64)).sum().backward()
    opt.step()
    assert not np.array_equal(before, _np(w))


def test_assignment_chaining_caching_and_removal():
    for T, P in ((cgrad, parametrize), (torch, torch.nn.utils.parametrize)):
        T.manual_seed(0)
        m = T.nn.Linear(3, 3).double()
        P.register_parametrization(m, "weight", _symmetric(T)())
        P.register_parametrization(m, "weight", _scale(T)())
        a = T.tensor(np.arange(9.0).reshape(3, 3))
        m.weight = a + a.T                          # right_inverse in reverse order
        got = m.weight.detach().numpy()
        orig = m.parametrizations.weight.original.detach().numpy()
        if T is cgrad:
            c_got, c_orig = got, orig
            calls = []
            m.parametrizations.weight[0].register_forward_hook(lambda *a: calls.append(1))
            with P.cached():
                m.weight
                m.weight
            assert calls == [1]
            P.remove_parametrizations(m, "weight", leave_parametrized=True)
            assert type(m) is cgrad.nn.Linear and not hasattr(m, "parametrizations")
            assert isinstance(m.weight, cgrad.nn.Parameter)
            np.testing.assert_allclose(_np(m.weight), got)
        else:
            np.testing.assert_allclose(c_got, got, rtol=1e-12)
            np.testing.assert_allclose(c_orig, orig, rtol=1e-12)


def test_registration_errors_like_torch():
    class Shape(cgrad.nn.Module):
        def forward(self, X):
            return X[:1]

    class Dtype(cgrad.nn.Module):
        def forward(self, X):
            return X.float()

    m = cgrad.nn.Linear(3, 3).double()
    with pytest.raises(ValueError, match="may not change the shape of the tensor"):
        parametrize.register_parametrization(m, "weight", Shape())
    with pytest.raises(ValueError, match="may not change the dtype of the tensor"):
        parametrize.register_parametrization(m, "weight", Dtype())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a "
                                         "parametrized element with name 'nope'"):
        parametrize.register_parametrization(m, "nope", Shape())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")
    parametrize.register_parametrization(m, "weight", Shape(), unsafe=True)
    assert m.weight.shape == (1, 3)


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_weight_norm_matches_torch(kind):
    def make(T):
        T.manual_seed(0)
        m = (T.nn.Linear(5, 4) if kind == "linear" else T.nn.Conv2d(2, 3, 3)).double()
        return T.nn.utils.parametrizations.weight_norm(m)
    tm, cm = make(torch), make(cgrad)
    assert list(cm.state_dict()) == list(tm.state_dict())
    _load_from_torch(cm, tm)
    assert cm.parametrizations.weight.original0.shape == \
        tuple(tm.parametrizations.weight.original0.shape)
    shape = (2, 5) if kind == "linear" else (2, 2, 6, 6)
    x = np.random.default_rng(1).standard_normal(shape)
    yc, yt = cm(cgrad.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(_np(yc), _np(yt), rtol=1e-10)
    yc.sin().sum().backward()
    yt.sin().sum().backward()
    for i in range(2):
        np.testing.assert_allclose(_np(getattr(cm.parametrizations.weight, f"original{i}").grad),
                                   _np(getattr(tm.parametrizations.weight, f"original{i}").grad),
                                   rtol=1e-10, atol=1e-12)
    # weight_norm with dim=None: one scalar magnitude
    mn = cgrad.nn.utils.parametrizations.weight_norm(cgrad.nn.Linear(3, 2), dim=None)
    assert mn.parametrizations.weight.original0.shape == ()


def test_spectral_norm_matches_torch_in_training_and_eval():
    def make(T):
        T.manual_seed(0)
        return T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(6, 4).double())
    tm, cm = make(torch), make(cgrad)
    assert list(cm.state_dict()) == list(tm.state_dict())
    _load_from_torch(cm, tm)          # the same weight and the same power-iteration vectors
    x = np.random.default_rng(2).standard_normal((3, 6))
    for step in range(3):
        yc, yt = cm(cgrad.tensor(x)), tm(torch.tensor(x))
        np.testing.assert_allclose(_np(yc), _np(yt), rtol=1e-10)
        np.testing.assert_allclose(_np(cm.parametrizations.weight[0]._u),
                                   _np(tm.parametrizations.weight[0]._u), rtol=1e-10)
    yc.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    np.testing.assert_allclose(_np(cm.parametrizations.weight.original.grad),
                               _np(tm.parametrizations.weight.original.grad), rtol=1e-9)
    cm.eval()
    tm.eval()
    u = _np(cm.parametrizations.weight[0]._u).copy()
    np.testing.assert_allclose(_np(cm(cgrad.tensor(x))), _np(tm(torch.tensor(x))), rtol=1e-10)
    assert np.array_equal(u, _np(cm.parametrizations.weight[0]._u))   # no iteration in eval
    # the spectral norm of the normalised weight is 1 after enough iterations
    cm.train()
    for _ in range(50):
        cm.weight
    assert abs(np.linalg.svd(_np(cm.weight), compute_uv=False)[0] - 1.0) < 1e-6
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        cgrad.nn.utils.parametrizations.spectral_norm(cgrad.nn.Linear(2, 2),
                                                      n_power_iterations=0)


# ---- the older hook-based forms (cgrad/nn/utils/_hook_norms.py) -------------------------

def _old(T, which):
    T.manual_seed(0)
    m = T.nn.Conv2d(2, 3, 3).double() if which == "weight_norm" else T.nn.Linear(5, 4).double()
    if which == "weight_norm":
        with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
            T.nn.utils.weight_norm(m)
    else:
        T.nn.utils.spectral_norm(m)
    return m


@pytest.mark.parametrize("which", ["weight_norm", "spectral_norm"])
def test_hook_based_forms_match_torch(which):
    tm, cm = _old(torch, which), _old(cgrad, which)
    assert list(cm.state_dict()) == list(tm.state_dict())
    _load_from_torch(cm, tm)
    shape = (2, 2, 5, 5) if which == "weight_norm" else (3, 5)
    x = np.random.default_rng(3).standard_normal(shape)
    for _ in range(2):
        yc, yt = cm(cgrad.tensor(x)), tm(torch.tensor(x))
        np.testing.assert_allclose(_np(yc), _np(yt), rtol=1e-10)
    yc.sin().sum().backward()
    yt.sin().sum().backward()
    for k, p in tm.named_parameters():
        np.testing.assert_allclose(_np(dict(cm.named_parameters())[k].grad), _np(p.grad),
                                   rtol=1e-9, atol=1e-12)
    remove = getattr(cgrad.nn.utils, "remove_" + which)
    tremove = getattr(torch.nn.utils, "remove_" + which)
    remove(cm)
    tremove(tm)
    assert list(cm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(_np(cm.weight), _np(tm.weight), rtol=1e-10)
    with pytest.raises(ValueError, match=f"{which} of 'weight' not found in"):
        remove(cm)
    register = getattr(cgrad.nn.utils, which)
    with pytest.warns(FutureWarning) if which == "weight_norm" else _nothing():
        register(cm)
    with pytest.raises(RuntimeError, match=f"Cannot register two {which} hooks on the same "
                                           "parameter weight"):
        with pytest.warns(FutureWarning) if which == "weight_norm" else _nothing():
            register(cm)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
