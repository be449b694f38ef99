"""nn.RNN / LSTM / GRU, their cells and nn.utils.rnn against torch.

Each module gets the torch module's state_dict; outputs, final states and the gradients of
the input, the initial states and every parameter must match (float64 to 1e-10). Also:
finite-difference and double-backward checks of the composite steps, packing/padding
round trips with gradients, and torch's error messages.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import cgrad
import cgrad.nn as nn
from cgrad.nn.utils import rnn as rnn_utils

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _pair(torch, name, *args, **kwargs):
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    cm = getattr(nn, name)(*args, **kwargs, dtype=cgrad.float64)
    cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return tm, cm


def _leaf(torch, arr):
    return (torch.tensor(arr, requires_grad=True),
            cgrad.tensor(arr, requires_grad=True))


def _flat(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(_flat(o))
        return res
    if hasattr(out, "data") and hasattr(out, "batch_sizes"):   # PackedSequence
        return [out.data]
    return [out]


def _check(torch, tm, cm, targs, cargs, tol=1e-10):
    tout = _flat(tm(*targs))
    cout = _flat(cm(*cargs))
    assert len(tout) == len(cout)
    rng = np.random.default_rng(1)
    tl, cl = 0, 0
    for t, c in zip(tout, cout):
        assert tuple(t.shape) == tuple(c.shape)
        np.testing.assert_allclose(c.detach().numpy(), t.detach().numpy(), atol=tol, rtol=tol)
        w = rng.standard_normal(tuple(t.shape))
        tl = tl + (t * torch.tensor(w)).sum()
        cl = cl + (c * cgrad.tensor(w)).sum()
    tl.backward()
    cl.backward()
    leaves_t = [a for a in _flat(targs) if getattr(a, "requires_grad", False) and a.is_leaf]
    leaves_c = [a for a in _flat(cargs) if getattr(a, "requires_grad", False) and a.is_leaf]
    for t, c in zip(leaves_t, leaves_c):
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), atol=tol, rtol=tol)
    tp = dict(tm.named_parameters())
    for k, p in cm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[k].grad.numpy(), atol=tol, rtol=tol,
                                   err_msg=k)


@pytest.mark.parametrize("name,kw", [
    ("RNN", dict(num_layers=2, bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", bias=False, batch_first=True)),
    ("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
    ("LSTM", dict(batch_first=True)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(bias=False)),
])
def test_module_matches_torch(torch, name, kw):
    tm, cm = _pair(torch, name, 3, 4, **kw)
    rng = np.random.default_rng(0)
    T, B = 5, 3
    shape = (B, T, 3) if kw.get("batch_first") else (T, B, 3)
    tx, cx = _leaf(torch, rng.standard_normal(shape))
    nd = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    hout = kw.get("proj_size", 0) or 4
    th, ch = _leaf(torch, rng.standard_normal((L * nd, B, hout)))
    if name == "LSTM":
        tc, cc = _leaf(torch, rng.standard_normal((L * nd, B, 4)))
        _check(torch, tm, cm, (tx, (th, tc)), (cx, (ch, cc)))
    else:
        _check(torch, tm, cm, (tx, th), (cx, ch))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "LSTM-proj", "GRU"])
def test_packed_variable_lengths(torch, name):
    """Fused nodes over packed data (LSTM with proj_size: the composite steps)."""
    kw = dict(num_layers=2, bidirectional=True)
    if name == "LSTM-proj":
        kw["proj_size"] = 3
    name = name.split("-")[0]
    tm, cm = _pair(torch, name, 2, 4, **kw)
    rng = np.random.default_rng(2)
    lengths = [3, 5, 1, 4]
    x = rng.standard_normal((5, 4, 2))
    tx, cx = _leaf(torch, x)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=False)
    cp = rnn_utils.pack_padded_sequence(cx, lengths, enforce_sorted=False)
    np.testing.assert_array_equal(cp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    np.testing.assert_array_equal(cp.sorted_indices.numpy(), tp.sorted_indices.numpy())
    np.testing.assert_array_equal(cp.unsorted_indices.numpy(), tp.unsorted_indices.numpy())
    hout = kw.get("proj_size", 4)
    th, ch = _leaf(torch, rng.standard_normal((4, 4, hout)))
    if name == "LSTM":
        tc, cc = _leaf(torch, rng.standard_normal((4, 4, 4)))
        thx, chx = (th, tc), (ch, cc)
    else:
        thx, chx = th, ch

    class Pad:                       # module wrapper: packed in, padded out
        def __init__(self, m, utils):
            self.m, self.u = m, utils

        def __call__(self, p, hx):
            out, h = self.m(p, hx)
            return self.u.pad_packed_sequence(out, batch_first=True, total_length=6)[0], h

        def named_parameters(self):
            return self.m.named_parameters()

    _check(torch, Pad(tm, torch.nn.utils.rnn), Pad(cm, rnn_utils), (tp, thx), (cp, chx))
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), atol=1e-10)


def test_unbatched_and_default_state(torch):
    tm, cm = _pair(torch, "GRU", 3, 4, bidirectional=True)
    rng = np.random.default_rng(3)
    tx, cx = _leaf(torch, rng.standard_normal((5, 3)))
    _check(torch, tm, cm, (tx,), (cx,))
    tm, cm = _pair(torch, "LSTM", 3, 4, batch_first=True)
    tx, cx = _leaf(torch, rng.standard_normal((5, 3)))
    th, ch = _leaf(torch, rng.standard_normal((1, 4)))
    tc, cc = _leaf(torch, rng.standard_normal((1, 4)))
    _check(torch, tm, cm, (tx, (th, tc)), (cx, (ch, cc)))


@pytest.mark.parametrize("name,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                     ("LSTMCell", {}), ("GRUCell", {"bias": False})])
def test_cells_match_torch(torch, name, kw):
    tm, cm = _pair(torch, name, 3, 4, **kw)
    rng = np.random.default_rng(4)
    tx, cx = _leaf(torch, rng.standard_normal((2, 3)))
    th, ch = _leaf(torch, rng.standard_normal((2, 4)))
    if name == "LSTMCell":
        tc, cc = _leaf(torch, rng.standard_normal((2, 4)))
        _check(torch, tm, cm, (tx, (th, tc)), (cx, (ch, cc)))
    else:
        _check(torch, tm, cm, (tx, th), (cx, ch))
    # unbatched, no state
    tx, cx = _leaf(torch, rng.standard_normal(3))
    tm.zero_grad(), cm.zero_grad()
    _check(torch, tm, cm, (tx,), (cx,))


def test_float32_matches(torch):
    tm = torch.nn.LSTM(3, 4, num_layers=2)
    cm = nn.LSTM(3, 4, num_layers=2)
    cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((4, 2, 3)).astype(np.float32)
    to, (th, tc) = tm(torch.tensor(x))
    co, (ch, cc) = cm(cgrad.tensor(x))
    assert co.dtype == cgrad.float32
    np.testing.assert_allclose(co.detach().numpy(), to.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(cc.detach().numpy(), tc.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ["LSTM", "LSTM-proj", "GRU"])
def test_gradcheck_and_double_backward(name):
    """LSTM without projection is the fused node (NumPy BPTT; composite under create_graph)."""
    cgrad.manual_seed(0)
    kw = {"proj_size": 2} if name == "LSTM-proj" else {}
    name = name.split("-")[0]
    m = getattr(nn, name)(2, 3, bidirectional=True, dtype=cgrad.float64, **kw)
    x = cgrad.randn(3, 2, 2, dtype=cgrad.float64, requires_grad=True)

    assert gradcheck(lambda x: m(x)[0], (x,))
    assert gradgradcheck(lambda x: m(x)[0], (x,))


def test_params_init_and_names(torch):
    cgrad.manual_seed(0)
    m = nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    t = torch.nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    assert list(m.state_dict()) == list(t.state_dict())
    for (k, p), (_, q) in zip(m.named_parameters(), t.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape), k
        assert float(p.abs().max()) <= 0.25
    assert repr(m) == repr(t)
    for name in ["RNN", "GRU"]:
        assert repr(getattr(nn, name)(3, 4, 2, batch_first=True, dropout=0.5)) == \
            repr(getattr(torch.nn, name)(3, 4, 2, batch_first=True, dropout=0.5))
    for name in ["RNNCell", "LSTMCell", "GRUCell"]:
        assert repr(getattr(nn, name)(3, 4, bias=False)) == \
            repr(getattr(torch.nn, name)(3, 4, bias=False))
    assert len(m.all_weights) == 4


def test_dropout_between_layers():
    cgrad.manual_seed(0)
    m = nn.GRU(2, 3, num_layers=2, dropout=0.5, dtype=cgrad.float64)
    x = cgrad.randn(4, 2, 2, dtype=cgrad.float64)
    m.eval()
    a = m(x)[0]
    b = m(x)[0]
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    outs = {m(x)[0].detach().numpy().tobytes() for _ in range(3)}
    assert len(outs) > 1
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.RNN(2, 3, dropout=0.2)


def test_errors(torch):
    m = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        m(cgrad.randn(2, 1, 5))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        m(cgrad.randn(2, 1, 1, 3))
    with pytest.raises(RuntimeError, match="Expected hidden\\[1\\] size"):
        m(cgrad.randn(2, 1, 3), (cgrad.zeros(1, 1, 4), cgrad.zeros(2, 1, 4)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D"):
        nn.GRU(3, 4)(cgrad.randn(2, 1, 3), cgrad.zeros(1, 4))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D"):
        nn.GRU(3, 4)(cgrad.randn(2, 3), cgrad.zeros(1, 1, 4))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch"):
        nn.RNNCell(3, 4)(cgrad.randn(2, 3), cgrad.zeros(3, 4))
    with pytest.raises(ValueError, match="LSTMCell: Expected hx\\[0\\] to be 1D or 2D"):
        nn.LSTMCell(3, 4)(cgrad.randn(3), (cgrad.zeros(1, 1, 4),) * 2)
    with pytest.raises(RuntimeError,
                       match=r"Expected hidden\[0\] size \(1, 1, 4\), got \[2, 1, 4\]"):
        m(cgrad.randn(2, 1, 3), (cgrad.zeros(2, 1, 4), cgrad.zeros(1, 1, 4)))
    with pytest.raises(ValueError, match=r"RNN input dtype \(cgrad.float64\) does not match "
                       r"weight dtype \(cgrad.float32\)"):
        m(cgrad.randn(2, 1, 3, dtype=cgrad.float64))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        nn.GRU(3, 4)(cgrad.randn(2, 1, 3), cgrad.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=2)
    with pytest.raises(RuntimeError, match="input has inconsistent input_size"):
        nn.GRUCell(3, 4)(cgrad.randn(2, 5))
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        nn.RNNCell(3, 4)(cgrad.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(cgrad.randn(3, 2, 1), [1, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        rnn_utils.pack_padded_sequence(cgrad.randn(3, 2, 1), [3, 0])
    p = rnn_utils.pack_sequence([cgrad.randn(3), cgrad.randn(2)])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        rnn_utils.pad_packed_sequence(p, total_length=2)


def test_pack_pad_utils_match_torch(torch):
    rng = np.random.default_rng(6)
    seqs = [rng.standard_normal((n, 2)) for n in (2, 4, 3)]
    tseq = [torch.tensor(s, requires_grad=True) for s in seqs]
    cseq = [cgrad.tensor(s, requires_grad=True) for s in seqs]
    for side in ("right", "left"):
        for bf in (False, True):
            t = torch.nn.utils.rnn.pad_sequence(tseq, batch_first=bf, padding_value=-1.0,
                                                padding_side=side)
            c = rnn_utils.pad_sequence(cseq, batch_first=bf, padding_value=-1.0,
                                       padding_side=side)
            np.testing.assert_array_equal(c.detach().numpy(), t.detach().numpy())
    tp = torch.nn.utils.rnn.pack_sequence(tseq, enforce_sorted=False)
    cp = rnn_utils.pack_sequence(cseq, enforce_sorted=False)
    np.testing.assert_array_equal(cp.data.detach().numpy(), tp.data.detach().numpy())
    np.testing.assert_array_equal(cp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    tpad, tl = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=True, padding_value=7.0)
    cpad, cl = rnn_utils.pad_packed_sequence(cp, batch_first=True, padding_value=7.0)
    np.testing.assert_array_equal(cpad.detach().numpy(), tpad.detach().numpy())
    np.testing.assert_array_equal(cl.numpy(), tl.numpy())
    assert cl.dtype == cgrad.int64
    w = rng.standard_normal(tuple(tpad.shape))
    (tpad * torch.tensor(w)).sum().backward()
    (cpad * cgrad.tensor(w)).sum().backward()
    for t, c in zip(tseq, cseq):
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy())
    back = rnn_utils.unpack_sequence(cp)
    for s, b in zip(seqs, back):
        np.testing.assert_array_equal(b.detach().numpy(), s)
    up = rnn_utils.unpad_sequence(rnn_utils.pad_sequence(cseq), [2, 4, 3])
    for s, b in zip(seqs, up):
        np.testing.assert_array_equal(b.detach().numpy(), s)
    # PackedSequence is a namedtuple with .to
    assert cp._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert cp.to(cgrad.float32).data.dtype == cgrad.float32
    assert cp.to(cgrad.float32).batch_sizes.dtype == cgrad.int64


@pytest.mark.parametrize("name,kw", [("LSTM", {}), ("GRU", {}),
                                     ("RNN", {"nonlinearity": "relu"})])
def test_fused_double_backward_matches_torch(torch, name, kw):
    """Equal lengths run as one fused node per layer-direction; create_graph goes through
    the composite steps."""
    tm, cm = _pair(torch, name, 2, 3, bidirectional=True, **kw)
    rng = np.random.default_rng(7)
    tx, cx = _leaf(torch, rng.standard_normal((3, 2, 2)))
    th, ch = _leaf(torch, rng.standard_normal((2, 2, 3)))
    tc, cc = _leaf(torch, rng.standard_normal((2, 2, 3)))
    res = []
    for mod, x, h, c, lib in ((tm, tx, th, tc, torch), (cm, cx, ch, cc, cgrad)):
        if name == "LSTM":
            out, (hn, cn) = mod(x, (h, c))
            params = [x, h, c] + list(mod.parameters())
        else:
            out, hn = mod(x, h)
            cn = hn
            params = [x, h] + list(mod.parameters())
        loss = (out ** 2).sum() + (hn * cn).sum()
        gs = lib.autograd.grad(loss, params, create_graph=True)
        s = sum((g ** 2).sum() for g in gs)
        res.append([a.detach().numpy() for a in lib.autograd.grad(s, params)])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, atol=1e-10, rtol=1e-10)


def test_packed_double_backward():
    cgrad.manual_seed(0)
    m = nn.GRU(2, 3, bidirectional=True, dtype=cgrad.float64)
    x = cgrad.randn(3, 3, 2, dtype=cgrad.float64, requires_grad=True)

    def f(x):
        p = rnn_utils.pack_padded_sequence(x, [1, 3, 2], enforce_sorted=False)
        out, h = m(p)
        return rnn_utils.pad_packed_sequence(out)[0], h

    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))
