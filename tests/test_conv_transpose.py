"""F.conv_transpose1d/2d and nn.ConvTranspose1d/2d against torch: outputs and gradients with
the same weights (float64 to 1e-10, float32 to 1e-5), double backward against torch and by
finite differences, module init/repr/output_size and torch's errors; Conv1d/Conv2d with every
padding_mode and padding='same'/'valid' with dilation."""
import re

import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as F
from cgrad import nn
from cgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1818)


def _t(a):
    return torch.tensor(a, requires_grad=True)


def _c(a):
    return cgrad.tensor(a, requires_grad=True)


def _close(c, t, tol):
    np.testing.assert_allclose(c.detach().numpy(), t.detach().numpy(), atol=tol, rtol=tol)


def _check(nd, shape_x, shape_w, dtype=np.float64, bias=True, double=False, **kw):
    x = RNG.standard_normal(shape_x).astype(dtype)
    w = RNG.standard_normal(shape_w).astype(dtype)
    b = RNG.standard_normal(shape_w[1] * kw.get("groups", 1)).astype(dtype) if bias else None
    tf = getattr(torch.nn.functional, f"conv_transpose{nd}d")
    cf = getattr(F, f"conv_transpose{nd}d")
    t = [None if a is None else _t(a) for a in (x, w, b)]
    c = [None if a is None else _c(a) for a in (x, w, b)]
    ty, cy = tf(*t, **kw), cf(*c, **kw)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    assert tuple(cy.shape) == tuple(ty.shape)
    assert cy.dtype.itemsize == ty.dtype.itemsize
    assert cy.grad_fn.name() == ty.grad_fn.name()
    _close(cy, ty, tol)
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    tins = [a for a in t if a is not None]
    cins = [a for a in c if a is not None]
    tg = torch.autograd.grad(ty, tins, torch.tensor(g), create_graph=double)
    cg = cgrad.autograd.grad(cy, cins, cgrad.tensor(g), create_graph=double)
    for a, e in zip(cg, tg):
        _close(a, e, tol)
    if double:
        v = [RNG.standard_normal(tuple(e.shape)).astype(dtype) for e in tg[:2]]
        ts = sum((e * torch.tensor(vv)).sum() for e, vv in zip(tg[:2], v))
        cs = sum((a * cgrad.tensor(vv)).sum() for a, vv in zip(cg[:2], v))
        tgg = torch.autograd.grad(ts, tins[:2])
        cgg = cgrad.autograd.grad(cs, cins[:2])
        for a, e in zip(cgg, tgg):
            _close(a, e, tol)


@pytest.mark.parametrize("kw", [
    {},
    {"stride": 2, "padding": 1, "output_padding": 1},
    {"stride": (2, 3), "padding": (0, 1), "output_padding": (1, 2), "dilation": (1, 2)},
    {"stride": 2, "groups": 2, "dilation": 2, "padding": 2},
])
def test_conv_transpose2d(kw):
    _check(2, (2, 4, 5, 4), (4, 3, 3, 2), double=True, **kw)


def test_conv_transpose2d_float32_unbatched_nobias():
    _check(2, (4, 5, 6), (4, 2, 3, 3), dtype=np.float32, bias=False, stride=2)
    _check(2, (2, 4, 5, 6), (4, 1, 2, 2), dtype=np.float32, groups=2, stride=(1, 2))


@pytest.mark.parametrize("kw", [{}, {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 2},
                                {"groups": 2, "stride": 2}])
def test_conv_transpose1d(kw):
    _check(1, (2, 4, 7), (4, 3, 3), double=True, **kw)


def test_conv_transpose1d_float32_unbatched():
    _check(1, (4, 6), (4, 2, 4), dtype=np.float32, stride=2, padding=1)


def test_gradcheck():
    x = _c(RNG.standard_normal((1, 2, 3, 3)))
    w = _c(RNG.standard_normal((2, 2, 2, 2)))
    b = _c(RNG.standard_normal(4))
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1,
                                            groups=2)
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    x1 = _c(RNG.standard_normal((1, 2, 4)))
    w1 = _c(RNG.standard_normal((2, 1, 3)))
    assert gradgradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=2, dilation=2), (x1, w1))


def _copy(cm, tm):
    for name, p in tm.named_parameters():
        getattr(cm, name).data = cgrad.tensor(p.detach().numpy())


@pytest.mark.parametrize("nd", [1, 2])
def test_module(nd):
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "bias": True, "dilation": 1}
    tm = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 6, 3, **kw).double()
    cm = getattr(nn, f"ConvTranspose{nd}d")(4, 6, 3, dtype=cgrad.float64, **kw)
    assert repr(cm) == repr(tm)
    assert list(cm.state_dict()) == list(tm.state_dict())
    for (cn, cp), (tn, tp) in zip(cm.named_parameters(), tm.named_parameters()):
        assert cn == tn and tuple(cp.shape) == tuple(tp.shape)
    assert cm.transposed and cm.output_padding == tm.output_padding
    _copy(cm, tm)
    shape = (2, 4) + (5,) * nd
    x = RNG.standard_normal(shape)
    _close(cm(cgrad.tensor(x)), tm(torch.tensor(x)), 1e-10)
    size = (10,) * nd
    ty = tm(torch.tensor(x), output_size=size)
    cy = cm(cgrad.tensor(x), output_size=size)
    assert tuple(cy.shape) == tuple(ty.shape)
    _close(cy, ty, 1e-10)
    with pytest.raises(ValueError, match="requested an output size of"):
        cm(cgrad.tensor(x), output_size=(20,) * nd)
    assert repr(nn.ConvTranspose1d(2, 3, 2, bias=False)) == repr(
        torch.nn.ConvTranspose1d(2, 3, 2, bias=False))


def test_module_init():
    cgrad.manual_seed(0)
    m = nn.ConvTranspose2d(8, 4, 3, groups=2)
    fan_in = 2 * 9            # weight.size(1) * receptive field, as torch
    bound = 1 / np.sqrt(fan_in)
    w = m.weight.detach().numpy()
    assert w.shape == (8, 2, 3, 3)
    assert np.abs(w).max() <= bound + 1e-7 and np.abs(w).max() > 0.8 * bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported'):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


def _err_both(call, exc=RuntimeError):
    with pytest.raises(exc) as te:
        call(torch, torch.nn.functional)
    with pytest.raises(exc, match=re.escape(str(te.value).split("\n")[0][:60])):
        call(cgrad, F)


def test_errors():
    x = RNG.standard_normal((1, 2, 5, 5))
    w = RNG.standard_normal((2, 3, 3, 3))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), output_padding=1))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), groups=3))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), stride=0))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), padding=-1))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x[:, :1]), m.tensor(w)))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x[0, 0]), m.tensor(w)))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), m.tensor(np.ones(2))))
    _err_both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), padding="same"),
              TypeError)


# -- Conv1d/Conv2d: padding modes and string paddings ------------------------------------------

@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    for nd, kw in ((1, {"padding": 2, "dilation": 2}), (2, {"padding": (1, 2), "stride": 2}),
                   (2, {"padding": "same", "dilation": (1, 2)}), (1, {"padding": "valid"})):
        tm = getattr(torch.nn, f"Conv{nd}d")(2, 3, 3, padding_mode=mode, **kw).double()
        cm = getattr(nn, f"Conv{nd}d")(2, 3, 3, padding_mode=mode, dtype=cgrad.float64, **kw)
        assert repr(cm) == repr(tm)
        _copy(cm, tm)
        x = RNG.standard_normal((2, 2) + (6,) * nd)
        tx, cx = _t(x), _c(x)
        ty, cy = tm(tx), cm(cx)
        _close(cy, ty, 1e-10)
        g = RNG.standard_normal(tuple(ty.shape))
        ty.backward(torch.tensor(g))
        cy.backward(cgrad.tensor(g))
        _close(cx.grad, tx.grad, 1e-10)
        _close(cm.weight.grad, tm.weight.grad, 1e-10)


def test_output_padding_beyond_stride():
    # torch allows output_padding >= stride when it is below the dilation
    _check(2, (1, 2, 3, 4), (2, 2, 2, 3), double=True, stride=(1, 2), padding=(2, 1),
           output_padding=(1, 2), dilation=(3, 3))
    _check(1, (2, 2, 4), (2, 1, 3), double=True, stride=1, padding=1, output_padding=1,
           dilation=2)
