"""F.conv1d / F.conv2d and nn.Conv1d / nn.Conv2d against torch: outputs and gradients with
the same weights (float64 to 1e-10, float32 to 1e-5), finite-difference gradchecks (first and
second order), node names, module init/repr and torch's errors."""
import itertools
import re

import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as F
from cgrad import nn
from cgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(18)


def _pair(shape_x, shape_w, nd, dtype=np.float64, bias=True, **kw):
    x = RNG.standard_normal(shape_x).astype(dtype)
    w = RNG.standard_normal(shape_w).astype(dtype)
    b = RNG.standard_normal(shape_w[0]).astype(dtype) if bias else None
    tf = getattr(torch.nn.functional, f"conv{nd}d")
    cf = getattr(F, f"conv{nd}d")
    t = [None if a is None else torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    c = [None if a is None else cgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
    ty, cy = tf(*t, **kw), cf(*c, **kw)
    g = RNG.standard_normal(tuple(ty.shape)).astype(dtype)
    ty.backward(torch.tensor(g))
    cy.backward(cgrad.tensor(g))
    tol = 1e-10 if dtype == np.float64 else 1e-5
    assert tuple(cy.shape) == tuple(ty.shape)
    assert cy.dtype.itemsize == ty.dtype.itemsize
    np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), atol=tol, rtol=tol)
    for tt, cc in zip(t, c):
        if tt is not None:
            np.testing.assert_allclose(cc.grad.numpy(), tt.grad.numpy(), atol=tol, rtol=tol)
    return ty, cy


GRID2 = list(itertools.product(
    [1, (2, 1), 3],          # stride
    [0, 1, (2, 0)],          # padding
    [1, (1, 2)],             # dilation
    [1, 2],                  # groups
))


@pytest.mark.parametrize("stride,padding,dilation,groups", GRID2)
def test_conv2d_grid_float64(stride, padding, dilation, groups):
    _pair((2, 4, 9, 8), (6, 4 // groups, 3, 2), 2, stride=stride, padding=padding,
          dilation=dilation, groups=groups)


@pytest.mark.parametrize("stride,padding,dilation,groups",
                         list(itertools.product([1, 2], [0, 2], [1, 3], [1, 3])))
def test_conv1d_grid_float64(stride, padding, dilation, groups):
    _pair((3, 6, 13), (9, 6 // groups, 3), 1, stride=stride, padding=padding,
          dilation=dilation, groups=groups)


@pytest.mark.parametrize("nd,ks", [(2, (3, 3)), (2, (2, 4)), (1, (4,)), (1, (1,))])
@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_padding_strings(nd, ks, padding):
    shape_x = (2, 3) + (7,) * nd
    ty, cy = _pair(shape_x, (4, 3) + ks, nd, padding=padding, dilation=2 if nd == 2 else 1)
    # torch pads the odd one out of an even kernel first: same node chain
    assert type(cy.grad_fn).__name__ == type(ty.grad_fn).__name__ == "ConvolutionBackward0"


def test_float32_no_bias_depthwise_unbatched():
    _pair((2, 4, 10, 10), (8, 1, 3, 3), 2, dtype=np.float32, groups=4, padding=1)
    _pair((5, 10, 10), (4, 5, 3, 3), 2, dtype=np.float32, bias=False, stride=2)
    ty, cy = _pair((5, 12), (4, 5, 3), 1, dtype=np.float32)
    assert type(cy.grad_fn).__name__ == type(ty.grad_fn).__name__


def test_node_name_and_dtype():
    x = cgrad.randn(1, 2, 5, 5, requires_grad=True)
    y = F.conv2d(x, cgrad.randn(3, 2, 3, 3))
    assert type(y.grad_fn).__name__ == "ConvolutionBackward0"
    assert y.dtype == cgrad.float32


def test_gradcheck_first_and_second_order():
    x = cgrad.randn(2, 4, 6, 5, dtype=cgrad.float64, requires_grad=True)
    w = cgrad.randn(4, 2, 3, 2, dtype=cgrad.float64, requires_grad=True)
    b = cgrad.randn(4, dtype=cgrad.float64, requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))
    x1 = cgrad.randn(2, 2, 7, dtype=cgrad.float64, requires_grad=True)
    w1 = cgrad.randn(3, 2, 3, dtype=cgrad.float64, requires_grad=True)
    assert gradgradcheck(lambda x, w: F.conv1d(x, w, stride=2, padding=1), (x1, w1))


def test_double_backward_matches_torch():
    x = RNG.standard_normal((2, 2, 6, 6))
    w = RNG.standard_normal((3, 2, 3, 3))
    vals = []
    for m in (torch, cgrad):
        tx, tw = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
        y = (m.nn.functional.conv2d(tx, tw, stride=2, padding=1) ** 2).sum()
        gx, = m.autograd.grad(y, tx, create_graph=True)
        (gx ** 2).sum().backward()
        vals.append((gx.detach().numpy(), tw.grad.numpy(), tx.grad.numpy()))
    for a, b in zip(*vals):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_module_padding_modes(mode):
    for nd in (1, 2):
        tm = getattr(torch.nn, f"Conv{nd}d")(4, 6, 3, padding=2 if mode == "zeros" else 1,
                                             groups=2, padding_mode=mode).double()
        cm = getattr(nn, f"Conv{nd}d")(4, 6, 3, padding=2 if mode == "zeros" else 1,
                                       groups=2, padding_mode=mode, dtype=cgrad.float64)
        assert repr(cm) == repr(tm)
        assert [n for n, _ in cm.named_parameters()] == [n for n, _ in tm.named_parameters()]
        cm.weight.data = cgrad.tensor(tm.weight.detach().numpy())
        cm.bias.data = cgrad.tensor(tm.bias.detach().numpy())
        x = RNG.standard_normal((2, 4) + (7,) * nd)
        tx, cx = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
        ty, cy = tm(tx), cm(cx)
        np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), atol=1e-10)
        ty.sum().backward()
        cy.sum().backward()
        np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), atol=1e-10)
        np.testing.assert_allclose(cm.weight.grad.numpy(), tm.weight.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("args,kw", [
    ((3, 4, 3), {}),
    ((3, 4, (3, 5)), {"stride": 2, "padding": 1, "dilation": 2, "bias": False,
                    "padding_mode": "reflect"}),
    ((4, 4, 3), {"padding": "same", "groups": 2}),
    ((4, 8, 2), {"padding": "valid", "groups": 4, "stride": (1, 2)}),
])
def test_module_repr_shapes_init(args, kw):
    for nd in (1, 2):
        if nd == 1 and isinstance(args[2], tuple) or nd == 1 and "stride" in kw and \
                isinstance(kw["stride"], tuple):
            continue
        tm = getattr(torch.nn, f"Conv{nd}d")(*args, **kw)
        cm = getattr(nn, f"Conv{nd}d")(*args, **kw)
        assert repr(cm) == repr(tm)
        assert tuple(cm.weight.shape) == tuple(tm.weight.shape)
        assert cm._reversed_padding_repeated_twice == list(tm._reversed_padding_repeated_twice)
        fan_in = args[1] and cm.weight[0].numel()
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(cm.weight.detach().numpy()).max() <= bound
        if cm.bias is not None:
            assert np.abs(cm.bias.detach().numpy()).max() <= bound


def _msg(f, m):
    with pytest.raises(Exception) as te:
        f(torch)
    with pytest.raises(Exception) as ce:
        f(m)
    assert type(ce.value).__name__ == type(te.value).__name__
    return str(ce.value), str(te.value)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 2, 3, 3)),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5), m.randn(4, 3, 3, 3)),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5, 5), m.randn(4, 3, 3, 3)),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 2, 2), m.randn(4, 3, 3, 3)),
    lambda m: m.nn.functional.conv2d(m.randn(2, 4, 5, 5), m.randn(4, 2, 3, 3), groups=3),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 3, 3, 3), stride=2,
                                     padding="same"),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 3, 3, 3), padding="foo"),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 3, 3, 3),
                                     bias=m.randn(3)),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 3, 3, 3), stride=0),
    lambda m: m.nn.functional.conv2d(m.randn(2, 3, 5, 5), m.randn(4, 3, 3, 3), padding=-1),
    lambda m: m.nn.functional.conv1d(m.randn(2, 3, 5), m.randn(4, 2, 3)),
    lambda m: m.nn.Conv2d(3, 4, 3, groups=2),
    lambda m: m.nn.Conv2d(4, 3, 3, groups=2),
    lambda m: m.nn.Conv2d(4, 4, 3, padding_mode="foo"),
    lambda m: m.nn.Conv2d(4, 4, 3, stride=2, padding="same"),
    lambda m: m.nn.Conv2d(4, 4, 3, padding="bar"),
])
def test_errors_like_torch(case):
    c, t = _msg(case, cgrad)
    assert _sets_sorted(c) == _sets_sorted(t)


def _sets_sorted(msg):
    """A printed set's order follows string hashing (per process): compare it sorted."""
    return re.sub(r"\{([^{}]*)\}", lambda m: str(sorted(m.group(1).split(", "))), msg)


def test_dtype_mismatch_error():
    c, _ = _msg(lambda m: m.nn.functional.conv2d(m.randn(1, 3, 5, 5),
                                                  m.randn(4, 3, 3, 3, dtype=m.float64)), cgrad)
    # torch's message depends on its kernel choice; both are RuntimeErrors naming the dtypes
    assert "Double" in c and "Float" in c


@pytest.mark.parametrize("k,d,p,s", list(itertools.product([2, (2, 3)], [1, (2, 1)], [0, 1],
                                                            [1, (2, 3)])))
def test_unfold_fold_like_torch(k, d, p, s):
    x = RNG.standard_normal((2, 3, 8, 9))
    tx, cx = torch.tensor(x, requires_grad=True), cgrad.tensor(x, requires_grad=True)
    tu = torch.nn.functional.unfold(tx, k, d, p, s)
    cu = F.unfold(cx, k, d, p, s)
    np.testing.assert_allclose(cu.detach().numpy(), tu.detach().numpy(), atol=1e-12)
    assert type(cu.grad_fn).__name__ == type(tu.grad_fn).__name__ == "Im2ColBackward0"
    g = RNG.standard_normal(tuple(tu.shape))
    tf = torch.nn.functional.fold(torch.tensor(g, requires_grad=True), (8, 9), k, d, p, s)
    cg = cgrad.tensor(g, requires_grad=True)
    cf = F.fold(cg, (8, 9), k, d, p, s)
    np.testing.assert_allclose(cf.detach().numpy(), tf.detach().numpy(), atol=1e-12)
    assert type(cf.grad_fn).__name__ == "Col2ImBackward0"
    tu.backward(torch.tensor(g))
    cu.backward(cgrad.tensor(g))
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), atol=1e-12)


def test_unfold_fold_gradchecks_and_unbatched():
    x = cgrad.randn(2, 5, 6, dtype=cgrad.float64, requires_grad=True)
    assert gradgradcheck(lambda x: F.unfold(x, 2, padding=1, stride=2), (x,))
    c = cgrad.randn(2, 8, 9, dtype=cgrad.float64, requires_grad=True)
    assert gradgradcheck(lambda c: F.fold(c, (4, 4), 2), (c,))
    assert gradcheck(lambda c: F.fold(c[0], (4, 4), 2), (c,))


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.unfold(m.randn(2, 3, 4, 4), 5),
    lambda m: m.nn.functional.fold(m.randn(2, 5, 9), (4, 4), 2),
    lambda m: m.nn.functional.fold(m.randn(2, 8, 8), (4, 4), 2),
    lambda m: m.nn.functional.fold(m.randn(8), (4, 4), 2),
])
def test_unfold_fold_errors(case):
    c, t = _msg(case, cgrad)
    assert c == t


@pytest.mark.parametrize("name,args", [("Unfold", (2,)), ("Unfold", ((2, 3), 2, 1, 2)),
                                       ("Fold", ((4, 5), 2)), ("Fold", (4, (2, 3), 1, 0, 2))])
def test_fold_modules(name, args):
    tm, cm = getattr(torch.nn, name)(*args), getattr(nn, name)(*args)
    assert repr(cm) == repr(tm)
    shape = (2, 3, 7, 8) if name == "Unfold" else tuple(
        torch.nn.functional.unfold(torch.zeros(1, 3, 4, 4 if args[0] == 4 else 5),
                                   *args[1:]).shape)
    x = RNG.standard_normal(shape)
    np.testing.assert_allclose(cm(cgrad.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(),
                               atol=1e-12)


# Note [Batch-last convolution]: batches of >= 4 with output rows of <= 8 take the batch-last
# layout (one product over the whole batch, columns (C*kh*kw, Ho*Wo*N)); the grids above use
# batches of 2 (the per-sample layout). The same grid here, both sides of the row-length
# threshold, and gradients of the first and second order through the batch-last path.
@pytest.mark.parametrize("stride,padding,dilation,groups", GRID2)
@pytest.mark.parametrize("width", [8, 17])
def test_conv2d_grid_batch_last(stride, padding, dilation, groups, width):
    _pair((5, 4, 7, width), (6, 4 // groups, 3, 2), 2, stride=stride, padding=padding,
          dilation=dilation, groups=groups)


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1), (1, 3)])
def test_conv1d_and_float32_batch_last(stride, padding):
    _pair((6, 3, 8), (5, 3, 3), 1, stride=stride, padding=padding)
    _pair((16, 4, 4, 4), (8, 4, 3, 3), 2, dtype=np.float32, padding=1)
    _pair((8, 1, 8, 8), (16, 1, 3, 3), 2, dtype=np.float32, bias=False, padding=1)


def test_batch_last_non_contiguous_and_partial_grads():
    x = RNG.standard_normal((6, 3, 5, 5)).transpose(0, 1, 3, 2)     # non-contiguous
    w = RNG.standard_normal((4, 3, 2, 2))
    for need in ((True, False), (False, True), (True, True)):
        t = [torch.tensor(np.array(a), requires_grad=r) for a, r in zip((x, w), need)]
        c = [cgrad.tensor(a, requires_grad=r) for a, r in zip((x, w), need)]
        ty = torch.nn.functional.conv2d(*t, padding=1)
        cy = F.conv2d(*c, padding=1)
        np.testing.assert_allclose(cy.detach().numpy(), ty.detach().numpy(), atol=1e-12)
        (ty ** 2).sum().backward()
        (cy ** 2).sum().backward()
        for tt, cc in zip(t, c):
            if tt.requires_grad:
                np.testing.assert_allclose(cc.grad.numpy(), tt.grad.numpy(), atol=1e-10)
            else:
                assert cc.grad is None


def test_batch_last_gradchecks_and_double_backward_like_torch():
    x = cgrad.randn(4, 2, 5, 4, dtype=cgrad.float64, requires_grad=True)
    w = cgrad.randn(3, 2, 3, 2, dtype=cgrad.float64, requires_grad=True)
    b = cgrad.randn(3, dtype=cgrad.float64, requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2))
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))
    xs = RNG.standard_normal((5, 2, 6, 6))
    ws = RNG.standard_normal((3, 2, 3, 3))
    vals = []
    for m in (torch, cgrad):
        tx, tw = m.tensor(xs, requires_grad=True), m.tensor(ws, requires_grad=True)
        y = (m.nn.functional.conv2d(tx, tw, stride=2, padding=1) ** 2).sum()
        gx, gw = m.autograd.grad(y, (tx, tw), create_graph=True)
        ((gx ** 2).sum() + (gw ** 3).sum()).backward()
        vals.append((gx.detach().numpy(), gw.detach().numpy(), tw.grad.numpy(),
                     tx.grad.numpy()))
    for a, b in zip(*vals):
        np.testing.assert_allclose(a, b, atol=1e-9, rtol=1e-10)


def test_conv_transpose_batch_last_like_torch():
    x = RNG.standard_normal((6, 4, 3, 3))
    w = RNG.standard_normal((4, 2, 3, 3))
    outs = []
    for m in (torch, cgrad):
        tx, tw = m.tensor(x, requires_grad=True), m.tensor(w, requires_grad=True)
        y = m.nn.functional.conv_transpose2d(tx, tw, stride=2, padding=1, output_padding=1)
        (y ** 2).sum().backward()
        outs.append((y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=1e-10)
