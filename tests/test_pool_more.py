"""Adaptive average/max pooling 1-D/2-D, lp_pool, max_unpool, interpolate's linear, bilinear,
bicubic and area modes, pixel/channel shuffles and the padding modules against torch: values,
gradients (float64 to 1e-10, float32 to 1e-5), double backward, reprs and torch's errors."""
import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as F
from cgrad import nn
from cgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(1819)


def _close(c, t, tol=1e-10):
    np.testing.assert_allclose(np.asarray(c.detach().numpy(), dtype=np.float64),
                               np.asarray(t.detach().numpy(), dtype=np.float64),
                               atol=tol, rtol=tol)


def _both(cf, tf, shape, dtype=np.float64, double=True, node=True, x=None):
    """Run cf on cgrad and tf on torch; compare outputs, gradients and (double) second-order
    gradients."""
    x = RNG.standard_normal(shape).astype(dtype) if x is None else x
    tol = 1e-10 if dtype == np.float64 else 1e-5
    tx = torch.tensor(x, requires_grad=True)
    cx = cgrad.tensor(x, requires_grad=True)
    ty, cy = tf(tx), cf(cx)
    ty0 = ty[0] if isinstance(ty, tuple) else ty
    cy0 = cy[0] if isinstance(cy, tuple) else cy
    assert tuple(cy0.shape) == tuple(ty0.shape)
    _close(cy0, ty0, tol)
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(cy[1].numpy(), ty[1].numpy())
        assert cy[1].dtype == cgrad.int64
    if node:
        assert cy0.grad_fn.name() == ty0.grad_fn.name()
    g = RNG.standard_normal(tuple(ty0.shape)).astype(dtype)
    (tg,) = torch.autograd.grad(ty0, tx, torch.tensor(g), create_graph=double)
    (cg,) = cgrad.autograd.grad(cy0, cx, cgrad.tensor(g), create_graph=double)
    _close(cg, tg, tol)
    if double:
        # the gradient is linear in g: differentiate <grad, v> with respect to g is not
        # reachable through x alone, so check the graph through x * x
        tx2 = torch.tensor(x, requires_grad=True)
        cx2 = cgrad.tensor(x, requires_grad=True)
        tg2 = torch.tensor(g, requires_grad=True)
        cg2 = cgrad.tensor(g, requires_grad=True)
        (a,) = torch.autograd.grad(tf(tx2 * tx2) if not isinstance(ty, tuple)
                                   else tf(tx2 * tx2)[0], tx2, tg2, create_graph=True)
        yc = cf(cx2 * cx2)
        (b,) = cgrad.autograd.grad(yc[0] if isinstance(yc, tuple) else yc, cx2, cg2,
                                   create_graph=True)
        v = RNG.standard_normal(x.shape).astype(dtype)
        ta = torch.autograd.grad((a * torch.tensor(v)).sum(), (tx2, tg2))
        ca = cgrad.autograd.grad((b * cgrad.tensor(v)).sum(), (cx2, cg2))
        for p, q in zip(ca, ta):
            _close(p, q, tol)


@pytest.mark.parametrize("out", [3, (2, None), (4, 5)])
def test_adaptive_max_pool2d(out):
    _both(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True),
          lambda x: TF.adaptive_max_pool2d(x, out, return_indices=True), (2, 3, 7, 9))


def test_adaptive_max_pool2d_ties_nan_float32():
    x = np.zeros((1, 2, 5, 4), dtype=np.float32)
    x[0, 0, 1, 1] = x[0, 0, 3, 2] = 1.0
    x[0, 1, 2, 2] = np.nan
    x[0, 1, 4, 3] = np.nan
    cy, ci = F.adaptive_max_pool2d(cgrad.tensor(x), (3, 2), True)
    ty, ti = TF.adaptive_max_pool2d(torch.tensor(x), (3, 2), True)
    np.testing.assert_array_equal(ci.numpy(), ti.numpy())
    np.testing.assert_array_equal(cy.numpy(), ty.numpy())
    _both(lambda x: F.adaptive_max_pool2d(x, 2), lambda x: TF.adaptive_max_pool2d(x, 2),
          (3, 5, 5), np.float32, double=False)


def test_adaptive_1d():
    _both(lambda x: F.adaptive_max_pool1d(x, 4, True),
          lambda x: TF.adaptive_max_pool1d(x, 4, True), (2, 3, 10))
    _both(lambda x: F.adaptive_avg_pool1d(x, 3), lambda x: TF.adaptive_avg_pool1d(x, 3),
          (3, 7))
    for cm, tm, shape in ((nn.AdaptiveMaxPool2d((2, None), True),
                           torch.nn.AdaptiveMaxPool2d((2, None), True), (1, 2, 5, 3)),
                          (nn.AdaptiveMaxPool1d(3), torch.nn.AdaptiveMaxPool1d(3), (2, 7)),
                          (nn.AdaptiveAvgPool1d(2), torch.nn.AdaptiveAvgPool1d(2), (2, 7))):
        assert repr(cm) == repr(tm)
        _both(cm, tm, shape, double=False)


def test_adaptive_errors():
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.adaptive_max_pool2d(cgrad.zeros(2, 3), 2)
    with pytest.raises(RuntimeError, match="output_size.size\\(\\) must be 2"):
        F.adaptive_max_pool2d(cgrad.zeros(1, 2, 3, 3), (1, 2, 3))


def test_lp_pool():
    x = np.abs(RNG.standard_normal((2, 3, 6, 7))) + 0.1
    _both(lambda x: F.lp_pool2d(x, 2, 3, 2), lambda x: TF.lp_pool2d(x, 2, 3, 2), None, x=x,
          double=False)
    _both(lambda x: F.lp_pool1d(x, 1.5, 2), lambda x: TF.lp_pool1d(x, 1.5, 2), None,
          x=x[:, :, 0], double=False)
    for cm, tm in ((nn.LPPool2d(2, 3), torch.nn.LPPool2d(2, 3)),
                   (nn.LPPool1d(1.5, 3, 2), torch.nn.LPPool1d(1.5, 3, 2))):
        assert repr(cm) == repr(tm)
        _both(cm, tm, None, x=x if "2d" in repr(cm) else x[:, :, 0], double=False,
              node=False)


def test_max_unpool():
    x = RNG.standard_normal((2, 3, 6, 7))
    tv, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    cv, ci = F.max_pool2d(cgrad.tensor(x), 2, return_indices=True)
    v = tv.numpy()
    _both(lambda a: F.max_unpool2d(a, ci, 2, output_size=(6, 7)),
          lambda a: TF.max_unpool2d(a, ti, 2, output_size=(6, 7)), None, x=v)
    cm, tm = nn.MaxUnpool2d(2), torch.nn.MaxUnpool2d(2)
    assert repr(cm) == repr(tm)
    _close(cm(cgrad.tensor(v), ci, output_size=(6, 7)),
           tm(torch.tensor(v), ti, output_size=(6, 7)))
    tv1, ti1 = TF.max_pool1d(torch.tensor(x[:, :, 0]), 3, 2, 1, return_indices=True)
    ci1 = cgrad.tensor(ti1.numpy())
    cm1, tm1 = nn.MaxUnpool1d(3, 2, 1), torch.nn.MaxUnpool1d(3, 2, 1)
    assert repr(cm1) == repr(tm1)
    _both(lambda a: cm1(a, ci1), lambda a: tm1(a, ti1), None, x=tv1.numpy(), double=False,
          node=False)
    # a repeated index keeps the last value, as torch's CPU kernel
    dup = np.array([[[[0, 0], [3, 3]]]])
    vals = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    np.testing.assert_array_equal(
        F.max_unpool2d(cgrad.tensor(vals), cgrad.tensor(dup), 2).numpy(),
        TF.max_unpool2d(torch.tensor(vals), torch.tensor(dup), 2).numpy())
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(cv, ci, 2, output_size=(3, 3))


@pytest.mark.parametrize("mode,shape", [("bilinear", (2, 3, 4, 5)), ("linear", (2, 3, 5)),
                                        ("bicubic", (1, 2, 4, 5))])
@pytest.mark.parametrize("align", [False, True])
def test_interpolate(mode, shape, align):
    nd = len(shape) - 2
    cases = [{"scale_factor": 2}, {"size": (7,) * nd if nd > 1 else 3},
             {"scale_factor": (1.7,) * nd, "recompute_scale_factor": True},
             {"scale_factor": 0.6}]
    for i, kw in enumerate(cases):
        _both(lambda x, kw=kw: F.interpolate(x, mode=mode, align_corners=align, **kw),
              lambda x, kw=kw: TF.interpolate(x, mode=mode, align_corners=align, **kw),
              shape,
              double=(i == 0))
    if mode != "linear":
        _both(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode, align_corners=align),
              lambda x: TF.interpolate(x, scale_factor=1.5, mode=mode, align_corners=align),
              shape, np.float32, double=False)


def test_interpolate_area_and_errors():
    _both(lambda x: F.interpolate(x, size=(2, 3), mode="area"),
          lambda x: TF.interpolate(x, size=(2, 3), mode="area"), (1, 2, 5, 7), double=False)
    x = cgrad.zeros(1, 2, 3, 4)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, mode="nearest", align_corners=True)
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        F.interpolate(cgrad.zeros(1, 2, 3), size=0, mode="linear")
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=3, mode="bilinear", recompute_scale_factor=True)


def test_gradcheck_resize():
    x = cgrad.tensor(RNG.standard_normal((1, 1, 3, 3)), requires_grad=True)
    fn = lambda x: F.interpolate(x, size=(4, 5), mode="bicubic", align_corners=False)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_upsample_modules():
    for cm, tm in ((nn.Upsample(scale_factor=2, mode="bilinear"),
                    torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                   (nn.UpsamplingNearest2d(scale_factor=2),
                    torch.nn.UpsamplingNearest2d(scale_factor=2)),
                   (nn.UpsamplingBilinear2d(size=5), torch.nn.UpsamplingBilinear2d(size=5)),
                   (nn.Upsample(size=(3, 4), mode="bicubic", align_corners=True),
                    torch.nn.Upsample(size=(3, 4), mode="bicubic", align_corners=True))):
        assert repr(cm) == repr(tm)
        _both(cm, tm, (1, 2, 3, 4), double=False)


def test_shuffles():
    _both(lambda x: F.pixel_shuffle(x, 2), lambda x: TF.pixel_shuffle(x, 2), (2, 8, 3, 4),
          node=False, double=False)
    _both(lambda x: F.pixel_unshuffle(x, 2), lambda x: TF.pixel_unshuffle(x, 2), (3, 4, 6),
          node=False, double=False)
    _both(lambda x: F.channel_shuffle(x, 3), lambda x: TF.channel_shuffle(x, 3), (2, 6, 2, 3),
          node=False, double=False)
    for cm, tm in ((nn.PixelShuffle(2), torch.nn.PixelShuffle(2)),
                   (nn.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2)),
                   (nn.ChannelShuffle(2), torch.nn.ChannelShuffle(2))):
        assert repr(cm) == repr(tm)
        _both(cm, tm, (1, 4, 4, 2), node=False, double=False)
    x = cgrad.zeros(1, 8, 5, 6)
    for call, msg in ((lambda: F.pixel_shuffle(x, 3), "divisible by the square of upscale"),
                      (lambda: F.pixel_unshuffle(x, 2), "expects height to be divisible"),
                      (lambda: F.channel_shuffle(x, 3), "must be divisible by groups")):
        with pytest.raises(RuntimeError, match=msg):
            call()


def test_padding_modules():
    x = RNG.standard_normal((2, 3, 5, 6))
    for name, args in (("ZeroPad1d", ((1, 2),)), ("ZeroPad2d", (1,)),
                       ("ConstantPad1d", (2, 3.5)), ("ConstantPad2d", ((1, 2, 3, 0), -1.0)),
                       ("ReflectionPad1d", (2,)), ("ReflectionPad2d", ((1, 2, 0, 3),)),
                       ("ReplicationPad1d", (1,)), ("ReplicationPad2d", (2,)),
                       ("CircularPad1d", (1,)), ("CircularPad2d", ((1, 0, 2, 1),))):
        cm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(cm) == repr(tm)
        assert cm.padding == tm.padding
        _both(cm, tm, None, x=x if "2d" in name else x[:, :, 0], double=False,
              node="Circular" not in name)
