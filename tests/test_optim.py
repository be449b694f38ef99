"""cgrad.optim (optimizers) and cgrad.optim.lr_scheduler against torch.optim.

* Every optimizer and option combination (table CONFIGS) gets the same starting weights and
  the same gradients as torch's, 100 steps: gradients set explicitly from a fixed random
  stream (one parameter sometimes has grad None, which must skip it), and gradients of a
  least-squares loss computed with cgrad ops vs torch ops. Weights must agree to 1e-6 in
  float64 and within float32 rounding in float32.
* State dicts: torch's format (keys, 'step' a 0-d float32 tensor, parameter indices), round
  trips (save, load into a fresh optimizer, continue: the same trajectory), loading a state
  dict converted from torch's, the checks and messages of load_state_dict.
* Param groups with different hyperparameters, add_param_group, zero_grad, closures, hooks,
  version counters, error messages for bad arguments (same type and text as torch).
* Schedulers: the lr sequences over 50 epochs equal torch's exactly (==), and their state dicts.
"""
from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import cgrad
import cgrad.optim as optim
from cgrad.optim import lr_scheduler as cg_sched


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    # tiny tensors: torch's intra-op threads only contend with the other processes here
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(n)


STEPS = 100
SHAPES = [(3, 4), (5,), (2, 3)]

# (id, class name, kwargs): the same kwargs are given to cgrad.optim.X and torch.optim.X
CONFIGS = [
    ("sgd", "SGD", dict(lr=0.05)),
    ("sgd-default-lr", "SGD", dict()),
    ("sgd-momentum", "SGD", dict(lr=0.05, momentum=0.9)),
    ("sgd-dampening", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.3)),
    ("sgd-nesterov", "SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("sgd-wd", "SGD", dict(lr=0.05, weight_decay=0.1)),
    ("sgd-all", "SGD", dict(lr=0.03, momentum=0.7, weight_decay=0.05, nesterov=True,
                            maximize=True)),
    ("sgd-maximize-damp-wd", "SGD", dict(lr=0.03, momentum=0.5, dampening=0.5,
                                         weight_decay=0.02, maximize=True)),
    ("adam", "Adam", dict(lr=0.01)),
    ("adam-betas-eps", "Adam", dict(lr=0.02, betas=(0.7, 0.95), eps=1e-6)),
    ("adam-big-beta1-weight", "Adam", dict(lr=0.01, betas=(0.3, 0.99))),   # lerp's 2nd form
    ("adam-wd", "Adam", dict(lr=0.01, weight_decay=0.1)),
    ("adam-amsgrad", "Adam", dict(lr=0.01, amsgrad=True)),
    ("adam-maximize-wd-amsgrad", "Adam", dict(lr=0.01, weight_decay=0.05, amsgrad=True,
                                              maximize=True)),
    ("adam-decoupled", "Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("adamw", "AdamW", dict(lr=0.01)),
    ("adamw-wd", "AdamW", dict(lr=0.01, weight_decay=0.3)),
    ("adamw-amsgrad-maximize", "AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("rmsprop", "RMSprop", dict(lr=0.01)),
    ("rmsprop-alpha-eps", "RMSprop", dict(lr=0.01, alpha=0.95, eps=1e-3)),
    ("rmsprop-wd", "RMSprop", dict(lr=0.01, weight_decay=0.1)),
    ("rmsprop-momentum", "RMSprop", dict(lr=0.01, momentum=0.9)),
    ("rmsprop-centered", "RMSprop", dict(lr=0.01, centered=True)),
    ("rmsprop-all", "RMSprop", dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.01,
                                    maximize=True)),
    ("adagrad", "Adagrad", dict(lr=0.1)),
    ("adagrad-lr-decay", "Adagrad", dict(lr=0.1, lr_decay=0.05)),
    ("adagrad-wd", "Adagrad", dict(lr=0.1, weight_decay=0.1)),
    ("adagrad-init-acc-eps", "Adagrad", dict(lr=0.1, initial_accumulator_value=0.5,
                                             eps=1e-5)),
    ("adagrad-maximize", "Adagrad", dict(lr=0.1, maximize=True, lr_decay=0.01)),
]
CONFIG_IDS = [c[0] for c in CONFIGS]

# float64: 1e-6 as the issue asks (the trajectories agree to ~1e-14); float32: torch's kernels
# fuse multiply-adds and NumPy's ufuncs do not, so the roundings differ by about an ulp per
# operation. (Configurations are chosen away from chaotic regimes, e.g. Adam or RMSprop with
# small betas/alpha near the optimum, where any ulp difference grows exponentially.)
TOL = {np.float64: dict(rtol=1e-6, atol=1e-6), np.float32: dict(rtol=3e-5, atol=3e-6)}


def _th_dtype(torch, dtype):
    return torch.float64 if dtype == np.float64 else torch.float32


def _init_weights(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _pair(torch, name, kwargs, dtype, seed=0):
    """(cgrad params, cgrad optimizer, torch params, torch optimizer) from the same weights."""
    ws = _init_weights(dtype, seed)
    cps = [cgrad.tensor(w.copy(), requires_grad=True) for w in ws]
    tps = [torch.tensor(w.copy(), requires_grad=True) for w in ws]
    copt = getattr(optim, name)(cps, **kwargs)
    topt = getattr(torch.optim, name)(tps, foreach=False, **kwargs)
    return cps, copt, tps, topt


def _grad_stream(dtype, steps, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(steps):
        gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        if i % 3 == 1:
            gs[2] = None            # this parameter gets no gradient: the step skips it
        out.append(gs)
    return out


def _set_grads(cps, tps, torch, gs):
    for cp, tp, g in zip(cps, tps, gs):
        cp.grad = None if g is None else cgrad.tensor(g.copy())
        tp.grad = None if g is None else torch.tensor(g.copy())


def _assert_params_close(cps, tps, dtype, what=""):
    for i, (cp, tp) in enumerate(zip(cps, tps)):
        a = cp.detach().numpy()
        b = tp.detach().numpy()
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(a, b, err_msg=f"{what} param {i}", **TOL[dtype])


# ----------------------------------------------------------------------------------------
# update rules against torch
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_explicit_gradients_match_torch(torch, cfg, dtype):
    _, name, kwargs = cfg
    cps, copt, tps, topt = _pair(torch, name, kwargs, dtype)
    for step, gs in enumerate(_grad_stream(dtype, STEPS)):
        _set_grads(cps, tps, torch, gs)
        copt.step()
        topt.step()
        if step in (0, 1, 9):
            _assert_params_close(cps, tps, dtype, f"step {step}")
    _assert_params_close(cps, tps, dtype, "final")
    # the state matches torch's too, entry by entry
    for cp, tp in zip(cps, tps):
        cs, ts = copt.state[cp], topt.state[tp]
        assert sorted(cs) == sorted(ts)
        for k in ts:
            np.testing.assert_allclose(np.asarray(cs[k]._data), ts[k].numpy(), **TOL[dtype])


def _lsq_data(dtype, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((20, 3)).astype(dtype)
    Y = rng.standard_normal((20, 4)).astype(dtype)
    Z = rng.standard_normal((20, 2)).astype(dtype)
    return X, Y, Z


def _lsq_loss(mod, ps, X, Y, Z):
    """A least-squares loss over the three parameters, written with mod's ops."""
    W, b, V = ps
    r = X @ W + b[:4] - Y                   # (20, 4)
    q = X @ V.t() - Z                       # (20, 2)
    return (r * r).mean() + (q * q).sum() * 0.05 + (b * b).sum() * 0.1


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_least_squares_training_matches_torch(torch, cfg, dtype):
    _, name, kwargs = cfg
    cps, copt, tps, topt = _pair(torch, name, kwargs, dtype, seed=3)
    X, Y, Z = _lsq_data(dtype)
    cX, cY, cZ = (cgrad.tensor(a) for a in (X, Y, Z))
    tX, tY, tZ = (torch.tensor(a) for a in (X, Y, Z))
    closs = tloss = None
    for _ in range(STEPS):
        copt.zero_grad()
        topt.zero_grad()
        closs = _lsq_loss(cgrad, cps, cX, cY, cZ)
        tloss = _lsq_loss(torch, tps, tX, tY, tZ)
        closs.backward()
        tloss.backward()
        copt.step()
        topt.step()
    _assert_params_close(cps, tps, dtype, "final")
    np.testing.assert_allclose(closs.item(), tloss.item(), **TOL[dtype])


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_closure_is_called_with_grad_enabled_and_its_loss_returned(torch, name):
    X, Y, Z = _lsq_data(np.float64)
    kwargs = dict(lr=0.01, momentum=0.9) if name == "SGD" else dict(lr=0.01)
    cps, copt, tps, topt = _pair(torch, name, kwargs, np.float64)
    cX, cY, cZ = (cgrad.tensor(a) for a in (X, Y, Z))
    tX, tY, tZ = (torch.tensor(a) for a in (X, Y, Z))

    def cclosure():
        assert cgrad.is_grad_enabled()
        copt.zero_grad()
        loss = _lsq_loss(cgrad, cps, cX, cY, cZ)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = _lsq_loss(torch, tps, tX, tY, tZ)
        loss.backward()
        return loss

    for _ in range(20):
        with cgrad.no_grad():
            cl = copt.step(cclosure)
        tl = topt.step(tclosure)
        assert abs(cl.item() - tl.item()) < 1e-9
    _assert_params_close(cps, tps, np.float64)


def test_param_groups_with_different_hyperparameters(torch):
    ws = _init_weights(np.float64)
    cps = [cgrad.tensor(w.copy(), requires_grad=True) for w in ws]
    tps = [torch.tensor(w.copy(), requires_grad=True) for w in ws]

    def groups(ps):
        return [{"params": [ps[0]], "lr": 0.1, "momentum": 0.5},
                {"params": ps[1:], "weight_decay": 0.2, "nesterov": True, "momentum": 0.9}]

    copt = optim.SGD(groups(cps), lr=0.01)
    topt = torch.optim.SGD(groups(tps), lr=0.01, foreach=False)
    assert [g["lr"] for g in copt.param_groups] == [0.1, 0.01]
    for gs in _grad_stream(np.float64, STEPS):
        _set_grads(cps, tps, torch, gs)
        copt.step()
        topt.step()
    _assert_params_close(cps, tps, np.float64)
    # changing a group's lr in place takes effect at the next step
    copt.param_groups[1]["lr"] = topt.param_groups[1]["lr"] = 0.5
    _set_grads(cps, tps, torch, _grad_stream(np.float64, 1, seed=9)[0])
    copt.step()
    topt.step()
    _assert_params_close(cps, tps, np.float64)


@pytest.mark.parametrize("name", ["Adam", "RMSprop", "Adagrad", "SGD"])
def test_complex_parameters_match_torch(torch, name):
    rng = np.random.default_rng(5)
    w = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex128)
    cp = cgrad.tensor(w.copy(), requires_grad=True)
    tp = torch.tensor(w.copy(), requires_grad=True)
    kwargs = dict(lr=0.05, weight_decay=0.1)
    if name == "RMSprop":
        kwargs.update(momentum=0.5, centered=True)
    copt = getattr(optim, name)([cp], **kwargs)
    topt = getattr(torch.optim, name)([tp], foreach=False, **kwargs)
    for _ in range(30):
        g = rng.standard_normal(6) + 1j * rng.standard_normal(6)
        cp.grad = cgrad.tensor(g.copy())
        tp.grad = torch.tensor(g.copy())
        copt.step()
        topt.step()
    np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] in
                                 ("sgd-all", "sgd-maximize-damp-wd", "adam-maximize-wd-amsgrad",
                                  "adamw", "rmsprop-all", "rmsprop-momentum", "adagrad-wd")],
                         ids=lambda c: c[0])
def test_large_parameters_match_torch(torch, cfg):
    """Tensors of >= 32768 elements take the reused-scratch path (two of the same size, one
    smaller and one transposed, so that the scratch is shared and reshaped)."""
    _, name, kwargs = cfg
    rng = np.random.default_rng(8)
    ws = [rng.standard_normal(s) for s in [(200, 200), (200, 200), (150, 300)]]
    ws.append(rng.standard_normal((300, 120)).T)              # non-contiguous parameter
    cps = [cgrad.tensor(w, requires_grad=True) for w in ws]
    tps = [torch.tensor(np.ascontiguousarray(w), requires_grad=True) for w in ws]
    copt = getattr(optim, name)(cps, **kwargs)
    topt = getattr(torch.optim, name)(tps, foreach=False, **kwargs)
    for _ in range(5):
        for cp, tp in zip(cps, tps):
            g = rng.standard_normal(tuple(cp.shape))
            cp.grad = cgrad.tensor(g)
            tp.grad = torch.tensor(g)
        copt.step()
        topt.step()
    _assert_params_close(cps, tps, np.float64)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("SGD", dict(lr=0.1)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.01))])
def test_sparse_gradients_match_torch(torch, name, kwargs):
    rng = np.random.default_rng(10)
    w = rng.standard_normal((6, 3))
    cp = cgrad.tensor(w.copy(), requires_grad=True)
    tp = torch.tensor(w.copy(), requires_grad=True)
    copt = getattr(optim, name)([cp], **kwargs)
    topt = getattr(torch.optim, name)([tp], **kwargs)
    for _ in range(10):
        idx = np.array([rng.integers(0, 6, 2), rng.integers(0, 3, 2)])
        val = rng.standard_normal(2)
        cp.grad = cgrad.sparse_coo_tensor(cgrad.tensor(idx), cgrad.tensor(val), (6, 3))
        tp.grad = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (6, 3),
                                          check_invariants=True)
        copt.step()
        topt.step()
    np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop"])
def test_sparse_gradients_are_rejected_as_torch(torch, name):
    idx, val = [[0], [1]], [1.0]
    cp = cgrad.tensor([[1.0, 2.0]], requires_grad=True)
    tp = torch.tensor([[1.0, 2.0]], requires_grad=True)
    cp.grad = cgrad.sparse_coo_tensor(cgrad.tensor(idx), cgrad.tensor(val), (1, 2))
    tp.grad = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (1, 2),
                                      check_invariants=True)
    with pytest.raises(RuntimeError) as te:
        getattr(torch.optim, name)([tp]).step()
    with pytest.raises(RuntimeError) as ce:
        getattr(optim, name)([cp]).step()
    assert str(ce.value) == str(te.value)
    with pytest.raises(RuntimeError, match="weight_decay option is not compatible with sparse"):
        optim.Adagrad([cp], weight_decay=0.1).step()


def test_repr_matches_torch(torch):
    cp = cgrad.tensor([1.0], requires_grad=True)
    tp = torch.tensor([1.0], requires_grad=True)
    for name in ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]:
        copt = getattr(optim, name)([cp, cgrad.tensor([2.0], requires_grad=True)])
        topt = getattr(torch.optim, name)([tp, torch.tensor([2.0], requires_grad=True)])
        copt.add_param_group({"params": [cgrad.tensor([3.0], requires_grad=True)], "lr": 0.5})
        topt.add_param_group({"params": [torch.tensor([3.0], requires_grad=True)], "lr": 0.5})
        assert repr(copt) == repr(topt)


def test_step_updates_in_place_and_bumps_versions():
    p = cgrad.tensor([1.0, 2.0], requires_grad=True)
    data = p._data
    opt = optim.Adam([p], lr=0.1)
    p.grad = cgrad.tensor([0.5, -0.5])
    v0 = p._version
    opt.step()
    assert p._data is data                       # same storage, updated in place
    assert p._version == v0 + 1
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    st = opt.state[p]
    assert st["exp_avg"]._version == 1 and st["step"]._version == 1
    # a graph that saved p before the step notices the in-place update
    y = (p * p).sum()
    p.grad = cgrad.tensor([0.5, -0.5])
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_step_records_no_graph_and_restores_grad_mode():
    p = cgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = cgrad.tensor([1.0, 1.0])
    opt.step()
    assert cgrad.is_grad_enabled()
    buf = opt.state[p]["momentum_buffer"]
    assert not buf.requires_grad and buf.grad_fn is None
    assert p.grad_fn is None


def test_params_without_grad_are_skipped_and_get_no_state(torch):
    a = cgrad.tensor([1.0, 2.0], requires_grad=True)
    b = cgrad.tensor([3.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = cgrad.tensor([1.0, 1.0])
    opt.step()
    assert b.tolist() == [3.0] and b not in opt.state
    assert list(opt.state_dict()["state"]) == [0]
    # SGD without momentum keeps no state at all, as torch
    opt = optim.SGD([a], lr=0.1)
    opt.step()
    assert opt.state_dict()["state"] == {}
    ta = torch.tensor([1.0, 2.0], requires_grad=True)
    ta.grad = torch.ones(2)
    topt = torch.optim.SGD([ta], lr=0.1)
    topt.step()
    assert topt.state_dict()["state"] == {}


def test_zero_grad():
    p = cgrad.tensor([1.0, 2.0], requires_grad=True)
    q = cgrad.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p, q], lr=0.1)
    (p * p).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and p.grad.tolist() == [0.0, 0.0]
    assert q.grad is None
    opt.zero_grad()
    assert p.grad is None
    # a gradient with history (create_graph) is detached before zeroing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # the create_graph reference-cycle note
        (p * p).sum().backward(create_graph=True)
    assert p.grad.requires_grad
    opt.zero_grad(set_to_none=False)
    assert not p.grad.requires_grad and p.grad.grad_fn is None
    assert p.grad.tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------------------
# state dicts
# ----------------------------------------------------------------------------------------
def _to_np(x):
    return x._data if isinstance(x, cgrad.Tensor) else x.numpy()


@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_state_dict_format_matches_torch(torch, cfg):
    _, name, kwargs = cfg
    cps, copt, tps, topt = _pair(torch, name, kwargs, np.float64)
    for gs in _grad_stream(np.float64, 3):
        _set_grads(cps, tps, torch, gs)
        copt.step()
        topt.step()
    csd, tsd = copt.state_dict(), topt.state_dict()
    assert set(csd) == set(tsd) == {"state", "param_groups"}
    assert len(csd["param_groups"]) == len(tsd["param_groups"])
    for cg, tg in zip(csd["param_groups"], tsd["param_groups"]):
        assert set(cg) == set(tg)
        assert cg["params"] == tg["params"]
        for k in tg:
            if k not in ("params", "foreach"):
                assert cg[k] == tg[k], k
    assert list(csd["state"]) == list(tsd["state"])
    for i in tsd["state"]:
        cst, tst = csd["state"][i], tsd["state"][i]
        assert list(cst) == list(tst)
        for k, tv in tst.items():
            cv = cst[k]
            assert isinstance(cv, cgrad.Tensor)
            assert cv.shape == tuple(tv.shape)
            assert str(cv.dtype) == str(tv.dtype).replace("torch.", "")
            np.testing.assert_allclose(_to_np(cv), _to_np(tv), rtol=1e-12, atol=1e-12)
    # the state dict holds the optimizer's own state tensors (as torch), param groups copied
    for i, p in enumerate(cps):
        for k, v in copt.state.get(p, {}).items():
            assert csd["state"][i][k] is v
    assert csd["param_groups"][0] is not copt.param_groups[0]


def test_step_state_is_a_0d_float32_tensor(torch):
    p = cgrad.tensor(np.ones(3), requires_grad=True)           # float64 parameter
    opt = optim.Adam([p])
    p.grad = cgrad.ones_like(p)
    opt.step()
    opt.step()
    step = opt.state[p]["step"]
    assert isinstance(step, cgrad.Tensor) and step.shape == () and step.dtype == np.float32
    assert repr(step) == "tensor(2.)"
    assert opt.state[p]["exp_avg"].dtype == np.float64
    tp = torch.ones(3, dtype=torch.float64, requires_grad=True)
    topt = torch.optim.Adam([tp])
    tp.grad = torch.ones_like(tp)
    topt.step()
    assert topt.state[tp]["step"].dtype == torch.float32


def _run(opt, ps, grads):
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = None if g is None else cgrad.tensor(g.copy())
        opt.step()


@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_state_dict_round_trip_continues_the_same_trajectory(cfg):
    _, name, kwargs = cfg
    grads = _grad_stream(np.float64, 40, seed=4)
    ws = _init_weights(np.float64)
    ref = [cgrad.tensor(w.copy(), requires_grad=True) for w in ws]
    ref_opt = getattr(optim, name)(ref, **kwargs)
    _run(ref_opt, ref, grads)

    ps = [cgrad.tensor(w.copy(), requires_grad=True) for w in ws]
    opt = getattr(optim, name)(ps, **kwargs)
    _run(opt, ps, grads[:20])
    saved = copy.deepcopy(opt.state_dict())
    weights = [p.detach().numpy().copy() for p in ps]
    del opt

    fresh = [cgrad.tensor(w, requires_grad=True) for w in weights]
    # a fresh optimizer with other hyperparameters: loading restores the saved ones
    opt2 = getattr(optim, name)(fresh, lr=0.123)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs.get("lr", opt2.defaults["lr"]) or \
        opt2.param_groups[0]["lr"] == saved["param_groups"][0]["lr"]
    assert opt2.param_groups[0]["params"] == fresh
    _run(opt2, fresh, grads[20:])
    for a, b in zip(fresh, ref):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_load_state_dict_shares_state_tensors_like_torch(torch):
    p = cgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = cgrad.tensor([1.0, 1.0])
    opt.step()
    q = cgrad.tensor([1.0, 2.0], requires_grad=True)
    opt2 = optim.Adam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"] is opt.state[p]["exp_avg"]
    assert opt2.state[q]["step"] is opt.state[p]["step"]
    tp = torch.tensor([1.0, 2.0], requires_grad=True)
    topt = torch.optim.Adam([tp], lr=0.1)
    tp.grad = torch.ones(2)
    topt.step()
    tq = torch.tensor([1.0, 2.0], requires_grad=True)
    topt2 = torch.optim.Adam([tq], lr=0.1)
    topt2.load_state_dict(topt.state_dict())
    assert topt2.state[tq]["exp_avg"] is topt.state[tp]["exp_avg"]


def test_load_state_dict_casts_state_to_the_parameter_dtype():
    p = cgrad.tensor(np.array([1.0, 2.0]), requires_grad=True)       # float64
    opt = optim.Adam([p], lr=0.1)
    p.grad = cgrad.ones_like(p)
    opt.step()
    q = cgrad.tensor([1.0, 2.0], requires_grad=True)                 # float32
    opt2 = optim.Adam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"].dtype == np.float32
    assert opt2.state[q]["step"] is opt.state[p]["step"]             # 'step' is never cast
    q.grad = cgrad.ones_like(q)
    opt2.step()
    assert opt2.state[q]["step"].item() == 2.0


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] in
                                 ("sgd-all", "adam-maximize-wd-amsgrad", "adamw",
                                  "rmsprop-all", "adagrad-lr-decay")],
                         ids=lambda c: c[0])
def test_load_a_state_dict_converted_from_torch(torch, cfg):
    """torch's state dict, its tensors converted to cgrad's, loads into a cgrad optimizer
    which then continues torch's trajectory."""
    _, name, kwargs = cfg
    grads = _grad_stream(np.float64, 40, seed=6)
    cps, _, tps, topt = _pair(torch, name, kwargs, np.float64)
    for gs in grads[:20]:
        _set_grads(cps, tps, torch, gs)
        topt.step()
    tsd = topt.state_dict()
    csd = {"state": {i: {k: cgrad.tensor(v.numpy().copy()) for k, v in st.items()}
                     for i, st in tsd["state"].items()},
           "param_groups": copy.deepcopy(tsd["param_groups"])}
    fresh = [cgrad.tensor(tp.detach().numpy().copy(), requires_grad=True) for tp in tps]
    copt = getattr(optim, name)(fresh, lr=1.0)
    copt.load_state_dict(csd)
    for gs in grads[20:]:
        _set_grads(fresh, tps, torch, gs)
        copt.step()
        topt.step()
    _assert_params_close(fresh, tps, np.float64)


def test_load_state_dict_errors(torch):
    a = cgrad.tensor([1.0], requires_grad=True)
    b = cgrad.tensor([2.0], requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1)
    two_groups = optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    with pytest.raises(ValueError, match="loaded state dict has a different number of "
                                         "parameter groups"):
        opt.load_state_dict(two_groups.state_dict())
    one = optim.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that "
                                         "doesn't match the size of optimizer's group"):
        opt.load_state_dict(one.state_dict())
    ta = torch.tensor([1.0], requires_grad=True)
    tb = torch.tensor([2.0], requires_grad=True)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        torch.optim.SGD([ta, tb]).load_state_dict(torch.optim.SGD([ta]).state_dict())


def test_adamw_load_forces_decoupled_weight_decay():
    p = cgrad.tensor([1.0], requires_grad=True)
    sd = optim.Adam([p]).state_dict()
    opt = optim.AdamW([cgrad.tensor([1.0], requires_grad=True)])
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_state_dict_hooks_and_step_hooks():
    p = cgrad.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kw: calls.append(("pre", o is opt, args)))
    h2 = opt.register_step_post_hook(lambda o, args, kw: calls.append(("post", o is opt)))
    hg = optim.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global"))
    p.grad = cgrad.tensor([1.0])
    opt.step()
    assert calls == ["global", ("pre", True, (opt,)), ("post", True)]
    h1.remove()
    h2.remove()
    hg.remove()
    calls.clear()
    opt.step()
    assert calls == [] and p.item() == 0.0
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    assert opt.state_dict()["extra"] == 1
    seen = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append("pre"))
    opt.register_load_state_dict_post_hook(lambda o: seen.append("post"))
    opt.load_state_dict(opt.state_dict())
    assert seen == ["pre", "post"]


def test_named_parameters_and_add_param_group(torch):
    a = cgrad.tensor([1.0], requires_grad=True)
    b = cgrad.tensor([2.0], requires_grad=True)
    opt = optim.Adam([("w", a)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["w"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w"]
    with pytest.raises(ValueError, match="cannot add param group without names"):
        opt.add_param_group({"params": [b]})
    opt = optim.Adam([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert opt.param_groups[1]["params"] == [b]
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter "
                                         "group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="optimizer parameters need to be organized in ordered "
                                        "collections"):
        opt.add_param_group({"params": {cgrad.tensor([1.0], requires_grad=True)}})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([a])
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([a, a])
    assert "Parameter Group 1" in repr(opt)


# ----------------------------------------------------------------------------------------
# errors, as torch's
# ----------------------------------------------------------------------------------------
def _bad_args(mod, p):
    o = mod.optim
    return [
        lambda: o.SGD(p),
        lambda: o.SGD([]),
        lambda: o.SGD([p * 2]),
        lambda: o.SGD([1]),
        lambda: o.SGD([p], lr=-1),
        lambda: o.SGD([p], momentum=-0.5),
        lambda: o.SGD([p], weight_decay=-1),
        lambda: o.SGD([p], nesterov=True),
        lambda: o.SGD([p], momentum=0.9, dampening=0.1, nesterov=True),
        lambda: o.Adam([p], lr=-0.1),
        lambda: o.Adam([p], eps=-1.0),
        lambda: o.Adam([p], betas=(1.0, 0.9)),
        lambda: o.Adam([p], betas=(0.9, 1)),
        lambda: o.Adam([p], betas=(0, 0.9)),
        lambda: o.Adam([p], weight_decay=-1e-3),
        lambda: o.AdamW([p], lr=-2),
        lambda: o.RMSprop([p], alpha=-1),
        lambda: o.RMSprop([p], momentum=-1),
        lambda: o.RMSprop([p], eps=-1),
        lambda: o.Adagrad([p], lr_decay=-1),
        lambda: o.Adagrad([p], initial_accumulator_value=-1),
        lambda: o.Adagrad([p], eps=-1),
        lambda: o.SGD([{"params": [p]}, {"params": [p]}]),
        lambda: o.SGD([{"params": [p]}, {"params": [p * 1]}]),
        lambda: o.SGD([{"params": [p]}, [p]]),
        lambda: o.SGD([("a", p), p]),
    ]


def test_error_types_and_messages_match_torch(torch):
    cp = cgrad.tensor([1.0], requires_grad=True)
    tp = torch.tensor([1.0], requires_grad=True)
    for i, (cf, tf) in enumerate(zip(_bad_args(cgrad, cp), _bad_args(torch, tp))):
        with pytest.raises(Exception) as te:
            tf()
        with pytest.raises(Exception) as ce:
            cf()
        assert type(ce.value) is type(te.value), (i, te.value, ce.value)
        expected = str(te.value).replace("torch.", "cgrad.")
        assert str(ce.value) == expected, (i, str(ce.value), expected)


def test_custom_optimizer_subclass():
    """A user-defined optimizer: required hyperparameters, hooks and the no-grad step."""
    from cgrad.optim.optimizer import required

    class SignSGD(optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p._data -= group["lr"] * np.sign(p.grad._data)
            return closure() if closure is not None else None

    a = cgrad.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(ValueError, match="parameter group didn't specify a value of required "
                                         "optimization parameter lr"):
        SignSGD([a])
    opt = SignSGD([{"params": [a], "lr": 0.5}])
    seen = []
    opt.register_step_post_hook(lambda o, args, kw: seen.append(args))
    a.grad = cgrad.tensor([2.0, -3.0])
    opt.step()
    assert a.tolist() == [0.5, -0.5] and seen == [(opt,)]
    assert repr(required) == "<required parameter>"


def test_non_leaf_with_retain_grad_is_accepted():
    p = cgrad.tensor([1.0], requires_grad=True)
    y = p * 2
    y.retain_grad()
    optim.SGD([y], lr=0.1)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_and_foreach_together_are_refused(name):
    p = cgrad.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        getattr(optim, name)([p], lr=0.1, fused=True, foreach=True)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop"])
def test_pickle_round_trip_and_old_pickles_get_new_group_keys(name):
    """Optimizers pickle (their hooks are rebuilt), and unpickling a state whose param groups
    predate some keys fills them in with torch's values (as torch's __setstate__)."""
    import pickle
    p = cgrad.nn.Parameter(cgrad.tensor([1.0, 2.0]))
    opt = getattr(optim, name)([p], lr=0.1)
    p.grad = cgrad.tensor([0.5, -0.5])
    opt.step()
    back = pickle.loads(pickle.dumps(opt))
    assert back.param_groups[0].keys() == opt.param_groups[0].keys()
    state = opt.__getstate__()
    state["param_groups"] = [{k: v for k, v in g.items() if k not in ("maximize", "foreach")}
                             for g in state["param_groups"]]
    old = getattr(optim, name).__new__(getattr(optim, name))
    old.__setstate__(state)
    assert old.param_groups[0]["maximize"] is False and old.param_groups[0]["foreach"] is None
    assert old._optimizer_step_pre_hooks == {}


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop"])
def test_unsupported_differentiable(name):
    p = cgrad.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="differentiable"):
        getattr(optim, name)([p], lr=0.1, differentiable=True)


# ----------------------------------------------------------------------------------------
# learning-rate schedulers
# ----------------------------------------------------------------------------------------
SCHEDULERS = [
    ("step", "StepLR", dict(step_size=7, gamma=0.5)),
    ("step-default-gamma", "StepLR", dict(step_size=3)),
    ("multistep", "MultiStepLR", dict(milestones=[5, 12, 12, 30], gamma=0.3)),
    ("exponential", "ExponentialLR", dict(gamma=0.93)),
    ("cosine", "CosineAnnealingLR", dict(T_max=20)),
    ("cosine-eta-min", "CosineAnnealingLR", dict(T_max=13, eta_min=0.001)),
    ("lambda", "LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e + 0.01 * (e % 4))),
    ("lambda-list", "LambdaLR", dict(lr_lambda=[lambda e: 1 / (1 + e), lambda e: 0.95 ** e])),
    ("multiplicative", "MultiplicativeLR", dict(lr_lambda=lambda e: 0.97)),
    ("constant", "ConstantLR", dict(factor=0.25, total_iters=6)),
    ("linear", "LinearLR", dict(start_factor=0.1, end_factor=0.9, total_iters=17)),
    ("polynomial", "PolynomialLR", dict(total_iters=30, power=2.0)),
]


def _sched_pair(torch, name, kwargs, opt_name="SGD"):
    cp = [cgrad.tensor([1.0], requires_grad=True), cgrad.tensor([2.0], requires_grad=True)]
    tp = [torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)]
    copt = getattr(optim, opt_name)([{"params": [cp[0]]}, {"params": [cp[1]], "lr": 0.3}],
                                    lr=0.1)
    topt = getattr(torch.optim, opt_name)([{"params": [tp[0]]}, {"params": [tp[1]],
                                                                 "lr": 0.3}], lr=0.1)
    cs = getattr(cg_sched, name)(copt, **kwargs)
    ts = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    return cp, copt, cs, tp, topt, ts


@pytest.mark.parametrize("cfg", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_scheduler_lrs_equal_torch(torch, cfg):
    _, name, kwargs = cfg
    cp, copt, cs, tp, topt, ts = _sched_pair(torch, name, kwargs)
    assert cs.get_last_lr() == ts.get_last_lr()
    assert [g["initial_lr"] for g in copt.param_groups] == [0.1, 0.3]
    for epoch in range(50):
        for p in cp:
            p.grad = cgrad.tensor([1.0])
        for p in tp:
            p.grad = torch.tensor([1.0])
        copt.step()
        topt.step()
        cs.step()
        ts.step()
        assert cs.last_epoch == ts.last_epoch == epoch + 1
        assert cs.get_last_lr() == ts.get_last_lr(), epoch        # exactly equal floats
        assert [g["lr"] for g in copt.param_groups] == [g["lr"] for g in topt.param_groups]
    np.testing.assert_allclose([p.item() for p in cp], [p.item() for p in tp], rtol=1e-6)
    # state dicts: the same keys as torch's, and a round trip continues the sequence (a new
    # scheduler's initial step may change the lr again, as torch's does)
    csd, tsd = cs.state_dict(), ts.state_dict()
    assert set(csd) == set(tsd)
    cs2 = getattr(cg_sched, name)(copt, **kwargs)
    ts2 = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    cs2.load_state_dict(copy.deepcopy(csd))
    ts2.load_state_dict(copy.deepcopy(tsd))
    for _ in range(3):
        copt.step()
        topt.step()
        cs2.step()
        ts2.step()
        assert cs2.get_last_lr() == ts2.get_last_lr()
        assert cs2.last_epoch == ts2.last_epoch


def test_cosine_annealing_past_t_max_and_closed_form(torch):
    cp, copt, cs, tp, topt, ts = _sched_pair(torch, "CosineAnnealingLR",
                                             dict(T_max=4, eta_min=0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in range(1, 20):
            copt.step()
            topt.step()
            if epoch % 5 == 0:
                cs.step(epoch)
                ts.step(epoch)
            else:
                cs.step()
                ts.step()
            assert cs.get_last_lr() == ts.get_last_lr()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
        cs.step(3)
    closed = 0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * 3 / 4)) / 2
    assert cs.get_last_lr()[0] == closed


def test_scheduler_warns_when_stepped_before_the_optimizer():
    p = cgrad.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    s = cg_sched.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before "
                                         "`optimizer.step\\(\\)`"):
        s.step()
    opt2 = optim.SGD([p], lr=0.1)
    s2 = cg_sched.StepLR(opt2, 2)
    opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()


def test_scheduler_errors(torch):
    p = cgrad.tensor([1.0], requires_grad=True)
    tp = torch.tensor([1.0], requires_grad=True)
    cases = [
        lambda m, q: m.optim.lr_scheduler.StepLR(object(), 3),
        lambda m, q: m.optim.lr_scheduler.StepLR(m.optim.SGD([q]), 3, last_epoch=4),
        lambda m, q: m.optim.lr_scheduler.LambdaLR(m.optim.SGD([q]), [abs, abs]),
        lambda m, q: m.optim.lr_scheduler.MultiplicativeLR(m.optim.SGD([q]), 3),
        lambda m, q: m.optim.lr_scheduler.ReduceLROnPlateau(m.optim.SGD([q]), factor=1.0),
        lambda m, q: m.optim.lr_scheduler.ReduceLROnPlateau(m.optim.SGD([q]), mode="up"),
        lambda m, q: m.optim.lr_scheduler.LinearLR(m.optim.SGD([q]), start_factor=0),
        lambda m, q: m.optim.lr_scheduler.ConstantLR(m.optim.SGD([q]), factor=2),
    ]
    for i, case in enumerate(cases):
        with pytest.raises(Exception) as te:
            case(torch, tp)
        with pytest.raises(Exception) as ce:
            case(cgrad, p)
        assert type(ce.value) is type(te.value), i
        assert str(ce.value) == str(te.value), i


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", factor=0.5, patience=2,
                                                 threshold_mode="abs", threshold=0.1,
                                                 cooldown=2, min_lr=[0.01, 0.05])])
def test_reduce_lr_on_plateau_equals_torch(torch, kwargs):
    cp, copt, _, tp, topt, _ = _sched_pair(torch, "StepLR", dict(step_size=1000))
    cs = cg_sched.ReduceLROnPlateau(copt, **kwargs)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    rng = np.random.default_rng(7)
    metrics = np.concatenate([np.linspace(1, 0.5, 10), 0.5 + 0.05 * rng.random(40)])
    for m in metrics:
        cs.step(cgrad.tensor(m))
        ts.step(float(m))
        assert cs.get_last_lr() == ts.get_last_lr()
        assert cs.num_bad_epochs == ts.num_bad_epochs and cs.best == ts.best
    assert set(cs.state_dict()) == set(ts.state_dict())
    cs2 = cg_sched.ReduceLROnPlateau(copt, **kwargs)
    cs2.load_state_dict(cs.state_dict())
    assert cs2.best == cs.best and cs2.mode == cs.mode


# ----------------------------------------------------------------------------------------
# update rules against a NumPy transcription of torch's documented algorithms (no torch)
# ----------------------------------------------------------------------------------------
def _np_step(name, kw, p, g, st, t):
    """One step of optimizer `name` on ndarray p (updated in place) with gradient g; `st`
    is this parameter's state dict, t the step number (1-based)."""
    lr = kw.get("lr", {"SGD": 1e-3, "Adam": 1e-3, "AdamW": 1e-3, "RMSprop": 1e-2,
                       "Adagrad": 1e-2}[name])
    wd = kw.get("weight_decay", 1e-2 if name == "AdamW" else 0.0)
    g = -g if kw.get("maximize") else g.copy()
    if name == "SGD":
        g = g + wd * p
        mu, damp = kw.get("momentum", 0.0), kw.get("dampening", 0.0)
        if mu:
            b = st["b"] = g.copy() if t == 1 else mu * st["b"] + (1 - damp) * g
            g = g + mu * b if kw.get("nesterov") else b
        p -= lr * g
    elif name in ("Adam", "AdamW"):
        b1, b2 = kw.get("betas", (0.9, 0.999))
        eps = kw.get("eps", 1e-8)
        if name == "AdamW" or kw.get("decoupled_weight_decay"):
            p *= 1 - lr * wd
        else:
            g = g + wd * p
        m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
        v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
        if kw.get("amsgrad"):
            v = st["vmax"] = np.maximum(st.get("vmax", 0.0), v)
        p -= lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    elif name == "RMSprop":
        alpha, eps, mu = kw.get("alpha", 0.99), kw.get("eps", 1e-8), kw.get("momentum", 0.0)
        g = g + wd * p
        v = st["v"] = alpha * st.get("v", 0.0) + (1 - alpha) * g * g
        if kw.get("centered"):
            ga = st["ga"] = alpha * st.get("ga", 0.0) + (1 - alpha) * g
            v = v - ga * ga
        d = g / (np.sqrt(v) + eps)
        if mu:
            d = st["b"] = mu * st.get("b", 0.0) + d
        p -= lr * d
    elif name == "Adagrad":
        eps, decay = kw.get("eps", 1e-10), kw.get("lr_decay", 0.0)
        g = g + wd * p
        s = st["s"] = st.get("s", kw.get("initial_accumulator_value", 0.0)) + g * g
        p -= lr / (1 + (t - 1) * decay) * g / (np.sqrt(s) + eps)


@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_update_rules_match_the_numpy_transcription(cfg):
    _, name, kwargs = cfg
    ws = _init_weights(np.float64)
    cps = [cgrad.tensor(w.copy(), requires_grad=True) for w in ws]
    opt = getattr(optim, name)(cps, **kwargs)
    states = [dict() for _ in ws]
    counts = [0] * len(ws)
    for gs in _grad_stream(np.float64, 30):
        for i, (cp, w, g) in enumerate(zip(cps, ws, gs)):
            cp.grad = None if g is None else cgrad.tensor(g.copy())
            if g is not None:           # a parameter without a gradient is skipped
                counts[i] += 1
                _np_step(name, kwargs, w, g, states[i], counts[i])
        opt.step()
        for i, (cp, w) in enumerate(zip(cps, ws)):
            np.testing.assert_allclose(cp.detach().numpy(), w, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{cfg[0]} param {i}")


def _closed_form_lr(name, kw, base, e):
    """The learning rate after e scheduler steps, from the schedulers' documented formulas."""
    if name == "StepLR":
        return base * kw.get("gamma", 0.1) ** (e // kw["step_size"])
    if name == "MultiStepLR":
        return base * kw["gamma"] ** sum(m <= e for m in kw["milestones"])
    if name == "ExponentialLR":
        return base * kw["gamma"] ** e
    if name == "CosineAnnealingLR":
        lo, t_max = kw.get("eta_min", 0.0), kw["T_max"]
        return lo + (base - lo) * (1 + math.cos(math.pi * e / t_max)) / 2
    if name == "ConstantLR":
        return base * (kw["factor"] if e < kw["total_iters"] else 1.0)
    if name == "LinearLR":
        s, f, n = kw["start_factor"], kw["end_factor"], kw["total_iters"]
        return base * (s + (f - s) * min(e, n) / n)
    if name == "PolynomialLR":
        n = kw["total_iters"]
        return base * (1 - min(e, n) / n) ** kw["power"]
    if name == "MultiplicativeLR":
        return base * kw["lr_lambda"](0) ** e
    return None


@pytest.mark.parametrize("cfg", [s for s in SCHEDULERS if _closed_form_lr(s[1], s[2], 1, 0)
                                 is not None], ids=lambda s: s[0])
def test_scheduler_lrs_follow_the_closed_forms(cfg):
    """Without torch: each schedule's lr over 40 epochs equals its formula (to rounding:
    the schedulers update recursively, as torch's do)."""
    _, name, kwargs = cfg
    ps = [cgrad.tensor([1.0], requires_grad=True), cgrad.tensor([2.0], requires_grad=True)]
    opt = optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.3}], lr=0.1)
    sched = getattr(cg_sched, name)(opt, **kwargs)
    for epoch in range(41):
        want = [_closed_form_lr(name, kwargs, base, epoch) for base in (0.1, 0.3)]
        np.testing.assert_allclose(sched.get_last_lr(), want, rtol=1e-9, atol=1e-15,
                                   err_msg=f"epoch {epoch}")
        for p in ps:
            p.grad = cgrad.tensor([1.0])
        opt.step()
        sched.step()
