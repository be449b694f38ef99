"""Convolutions of cgrad.nn.functional: ``conv1d`` and ``conv2d`` (one
``ConvolutionBackward0`` node, as torch).

Note [Convolution by im2col]
The forward takes every kernel window of the zero-padded input at once through a strided
view (``as_strided``: no copy), reorders it to ``(N, groups, C/groups * kh * kw, Ho * Wo)``
(the one copy, im2col) and multiplies it by the weight viewed as
``(groups, O/groups, C/groups * kh * kw)`` in one batched matmul: no Python loop over pixels
or groups. 1-D convolutions are 2-D ones with a height of 1.

The three products of a convolution are linear in each argument, and each one's gradient is
one of the other two, so the backward is written with three Functions that call each other:

* ``_Conv``:        y  = conv(x, w) (+ b)
* ``_ConvGradX``:   gx = conv_x^T(g, w)   (col2im: w^T @ g, then the columns are added back
  onto the input, one strided slice per kernel offset: a loop over kh * kw, not pixels)
* ``_ConvGradW``:   gw = conv_w^T(x, g)   (g @ cols^T summed over the batch)

From <ggx, conv_x^T(g, w)> = <conv(ggx, w), g> and <ggw, conv_w^T(x, g)> = <conv(x, ggw), g>
each backward is an ``apply`` of the others, so double (and higher) backward works.
"""
from __future__ import annotations

import numbers

import numpy as np
from numpy.lib.stride_tricks import as_strided

from cgrad import _checks
from cgrad._C import _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _shape_list

# -- NumPy cores (always 2-D spatial; 1-D callers add a height of 1) -------------------------


def _out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(X, kh, kw, stride, padding, dilation):
    """The padded input and the strided view (N, C, kh, kw, Ho, Wo) of its kernel windows."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if ph or pw:
        X = np.pad(X, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    N, C, H, W = X.shape
    Ho = (H - dh * (kh - 1) - 1) // sh + 1
    Wo = (W - dw * (kw - 1) - 1) // sw + 1
    s0, s1, s2, s3 = X.strides
    win = as_strided(X, (N, C, kh, kw, Ho, Wo), (s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw),
                     writeable=False)
    return win, Ho, Wo


def _cols(X, kh, kw, stride, padding, dilation, groups):
    """im2col: (N, groups, C/groups * kh * kw, Ho * Wo), one copy."""
    win, Ho, Wo = _windows(X, kh, kw, stride, padding, dilation)
    N, C = X.shape[:2]
    cols = np.ascontiguousarray(win).reshape(N, groups, (C // groups) * kh * kw, Ho * Wo)
    return cols, Ho, Wo


# Note [Batch-last convolution]: for small images (a CNN's 8x8 or 4x4 feature maps) the
# layout above is slow twice over: each sample is its own small product (O, C*kh*kw) @
# (C*kh*kw, Ho*Wo), and every pass over a strided view (im2col, col2im) runs NumPy's inner
# loop over Wo elements only. With the batch as the last axis, the input is copied once to
# (C, H, W, N), the columns are (C*kh*kw, Ho*Wo*N) with N contiguous, and each of the three
# products is ONE matrix product over the whole batch: y = w @ cols, gw = g @ cols^T (no sum
# over per-sample products), dcols = w^T @ g, whose kernel offsets are added back onto a
# (C, H, W, N) image in contiguous runs of Wo*N elements. The outputs are transposed back to
# (N, C, H, W) (one copy each). Taken for groups == 1 when the output rows are short
# (Wo <= _BATCH_LAST_MAX_WO) and the batch is not tiny; the columns it saves are 2-D (the
# per-sample layout's are 4-D), which is how _grad_w tells them apart. Sums are the same terms
# in another order: results agree to rounding, not bitwise, with the per-sample layout.
_BATCH_LAST_MAX_WO = 8
_BATCH_LAST_MIN_N = 4


def _batch_last(N, Wo, groups):
    return groups == 1 and N >= _BATCH_LAST_MIN_N and Wo <= _BATCH_LAST_MAX_WO


def _out_hw(H, W, kh, kw, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    return ((H + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
            (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1)


def _cols_bl(X, kh, kw, stride, padding, dilation):
    """Batch-last im2col: (C * kh * kw, Ho * Wo * N), one transposing copy of X and one of
    the windows."""
    N, C, H, W = X.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    Ho, Wo = _out_hw(H, W, kh, kw, stride, padding, dilation)
    if ph or pw:
        Xt = np.zeros((C, H + 2 * ph, W + 2 * pw, N), dtype=X.dtype)
        Xt[:, ph: ph + H, pw: pw + W] = X.transpose(1, 2, 3, 0)
    else:
        Xt = np.ascontiguousarray(X.transpose(1, 2, 3, 0))
    s0, s1, s2, s3 = Xt.strides
    win = as_strided(Xt, (C, kh, kw, Ho, Wo, N), (s0, s1 * dh, s2 * dw, s1 * sh, s2 * sw, s3),
                     writeable=False)
    return np.ascontiguousarray(win).reshape(C * kh * kw, Ho * Wo * N)


def _g_bl(G):
    """(N, O, Ho, Wo) -> (O, Ho * Wo * N), contiguous."""
    N, O = G.shape[:2]
    return np.ascontiguousarray(G.transpose(1, 2, 3, 0)).reshape(O, -1)


def _fwd(X, Wt, stride, padding, dilation, groups):
    """The output and the im2col columns (kept for the weight's gradient)."""
    O, Cg, kh, kw = Wt.shape
    N = X.shape[0]
    Ho, Wo = _out_hw(X.shape[2], X.shape[3], kh, kw, stride, padding, dilation)
    if _batch_last(N, Wo, groups) and Ho > 0 and Wo > 0:          # Note [Batch-last ...]
        cols = _cols_bl(X, kh, kw, stride, padding, dilation)
        out = np.matmul(Wt.reshape(O, -1), cols).reshape(O, Ho, Wo, N)
        return np.ascontiguousarray(out.transpose(3, 0, 1, 2)), cols
    cols, Ho, Wo = _cols(X, kh, kw, stride, padding, dilation, groups)
    w2 = Wt.reshape(groups, O // groups, Cg * kh * kw)
    out = np.matmul(w2, cols)                          # (N, G, O/G, Ho*Wo)
    return out.reshape(X.shape[0], O, Ho, Wo), cols


def _grad_x(G, Wt, xshape, stride, padding, dilation, groups, gbl=None):
    """gbl: _g_bl(G) when the caller has it (the weight's gradient needs it too)."""
    O, Cg, kh, kw = Wt.shape
    N, C = xshape[:2]
    Ho, Wo = G.shape[2:]
    if _batch_last(N, Wo, groups) and Ho > 0 and Wo > 0:          # Note [Batch-last ...]
        H, W = xshape[2:]
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        if gbl is None:
            gbl = _g_bl(G)
        d = np.matmul(Wt.reshape(O, -1).T, gbl).reshape(C, kh, kw, Ho, Wo, N)
        dx = np.zeros((C, H + 2 * ph, W + 2 * pw, N), dtype=d.dtype)
        for i in range(kh):
            for j in range(kw):
                dx[:, i * dh: i * dh + sh * (Ho - 1) + 1: sh,
                   j * dw: j * dw + sw * (Wo - 1) + 1: sw] += d[:, i, j]
        return dx[:, ph: ph + H, pw: pw + W].transpose(3, 0, 1, 2)
    g2 = G.reshape(N, groups, O // groups, Ho * Wo)
    w2 = Wt.reshape(groups, O // groups, Cg * kh * kw)
    dcols = np.matmul(w2.transpose(0, 2, 1), g2).reshape(N, C, kh, kw, Ho, Wo)
    return _col2im(dcols, xshape, stride, padding, dilation)


def _col2im(dcols, xshape, stride, padding, dilation):
    """Add the columns (N, C, kh, kw, Ho, Wo) back onto an (N, C, H, W) input: one strided
    slice per kernel offset."""
    N, C, kh, kw, Ho, Wo = dcols.shape
    H, W = xshape[2:]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if sh > 1 or sw > 1:
        return _col2im_strided(dcols, xshape, stride, padding, dilation)
    dx = np.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=dcols.dtype)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i * dh: i * dh + sh * (Ho - 1) + 1: sh,
               j * dw: j * dw + sw * (Wo - 1) + 1: sw] += dcols[:, :, i, j]
    return dx[:, :, ph: ph + H, pw: pw + W]


def _col2im_strided(dcols, xshape, stride, padding, dilation):
    """_col2im for a stride > 1: the padded image is split into its sh * sw phases (rows
    ``q * sh + r`` of phase r), each a contiguous plane that a kernel offset adds to as a
    dense block (a strided destination is several times slower), interleaved once at the
    end."""
    N, C, kh, kw, Ho, Wo = dcols.shape
    H, W = xshape[2:]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    Hp, Wp = H + 2 * ph, W + 2 * pw
    Hq, Wq = -(-Hp // sh), -(-Wp // sw)
    buf = np.zeros((sh, sw, N, C, Hq, Wq), dtype=dcols.dtype)
    for i in range(kh):
        qa, ra = divmod(i * dh, sh)
        for j in range(kw):
            qb, rb = divmod(j * dw, sw)
            buf[ra, rb, :, :, qa: qa + Ho, qb: qb + Wo] += dcols[:, :, i, j]
    dx = buf.transpose(2, 3, 4, 0, 5, 1).reshape(N, C, Hq * sh, Wq * sw)
    return dx[:, :, ph: ph + H, pw: pw + W]


def _grad_w(X, G, wshape, stride, padding, dilation, groups, cols=None, gbl=None):
    O, _, kh, kw = wshape
    N = X.shape[0]
    if _batch_last(N, G.shape[3], groups) and G.shape[2] > 0 and G.shape[3] > 0:
        if cols is None or cols.ndim != 2:                          # Note [Batch-last ...]
            cols = _cols_bl(X, kh, kw, stride, padding, dilation)
        return np.matmul(_g_bl(G) if gbl is None else gbl, cols.T).reshape(wshape)
    if cols is not None and cols.ndim != 4:
        cols = None
    if cols is None:
        cols = _cols(X, kh, kw, stride, padding, dilation, groups)[0]
    N = X.shape[0]
    g2 = G.reshape(N, groups, O // groups, -1)
    # one product per sample (BLAS reads the transposed columns in place), summed over the
    # batch: cheaper than copying both operands to (G, O/G, N*L) @ (G, N*L, Cg*kk)
    return np.matmul(g2, cols.transpose(0, 1, 3, 2)).sum(0).reshape(wshape)


def _as2d(a, one_d):
    return a[:, :, None, :] if one_d else a


def _from2d(a, one_d):
    return a[:, :, 0, :] if one_d else a


class _Conv(Function):
    """conv(x, w) + b over (N, C, *spatial) with one or two spatial dims (Note [Convolution
    by im2col])."""
    _node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, w, b, params):
        stride, padding, dilation, groups, one_d = params
        X, Wt = _as2d(x._data, one_d), _as2d(w._data, one_d)
        out, cols = _fwd(X, Wt, stride, padding, dilation, groups)
        if b is not None:
            out += b._data.reshape(1, -1, 1, 1)
        if ctx is not None:
            nx, nw = ctx.needs_input_grad[:2]
            # the columns serve the weight's gradient (x's version is checked on unpacking);
            # saved, they are freed with x after the backward unless retain_graph=True
            ctx.save_for_backward(x if nw else None, w if nx else None,
                                  _wrap(cols) if nw else None)
            ctx._aux = (params, x._data.shape, w._data.shape)
        return _from2d(out, one_d)

    @staticmethod
    def backward(ctx, g):
        x, w, cols = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad[:3]
        p, xshape, wshape = ctx._aux
        gbl = None
        if nx and nw:
            # both gradients read g in the batch-last layout: transpose it once
            G = _as2d(g._data, p[4])
            if _batch_last(G.shape[0], G.shape[3], p[3]) and G.shape[2] > 0 and G.shape[3] > 0:
                gbl = _g_bl(G)
        gx = _ConvGradX.apply(g, w, xshape, p, gbl) if nx else None
        if nw:
            gw = _ConvGradW.apply(x, g, wshape, p, None if cols is None else cols._data, gbl)
        else:
            gw = None
        gb = g.sum((0, 2) if p[4] else (0, 2, 3)) if nb else None
        return gx, gw, gb, None


class _ConvGradX(Function):
    """The input gradient of a convolution, conv_x^T(g, w)."""
    _node_name = "ConvolutionBackwardBackward0"

    @staticmethod
    def forward(ctx, g, w, xshape, params, gbl=None):
        stride, padding, dilation, groups, one_d = params
        Wt = _as2d(w._data, one_d)
        xs = tuple(xshape[:2]) + ((1,) if one_d else ()) + tuple(xshape[2:])
        out = _grad_x(_as2d(g._data, one_d), Wt, xs, stride, padding, dilation, groups, gbl)
        if ctx is not None:
            ctx.save_for_backward(g, w)
            ctx._aux = params
        return np.ascontiguousarray(_from2d(out, one_d))

    @staticmethod
    def backward(ctx, ggx):
        g, w = ctx.saved_tensors
        ng, nw = ctx.needs_input_grad[:2]
        p = ctx._aux
        dg = _Conv.apply(ggx, w, None, p) if ng else None
        dw = _ConvGradW.apply(ggx, g, tuple(w.shape), p) if nw else None
        return dg, dw, None, None, None


class _ConvGradW(Function):
    """The weight gradient of a convolution, conv_w^T(x, g)."""
    _node_name = "ConvolutionBackwardBackward0"

    @staticmethod
    def forward(ctx, x, g, wshape, params, cols=None, gbl=None):
        stride, padding, dilation, groups, one_d = params
        ws = tuple(wshape[:2]) + ((1,) if one_d else ()) + tuple(wshape[2:])
        out = _grad_w(_as2d(x._data, one_d), _as2d(g._data, one_d), ws, stride, padding,
                      dilation, groups, cols, gbl)
        if ctx is not None:
            ctx.save_for_backward(x, g)
            ctx._aux = params
        return out.reshape(wshape)

    @staticmethod
    def backward(ctx, ggw):
        x, g = ctx.saved_tensors
        nx, ng = ctx.needs_input_grad[:2]
        p = ctx._aux
        dx = _ConvGradX.apply(g, ggw, tuple(x.shape), p) if nx else None
        dg = _Conv.apply(x, ggw, None, p) if ng else None
        return dx, dg, None, None, None, None


# -- argument handling -----------------------------------------------------------------------


def _tuple(v, n, name):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * n
    t = tuple(int(e) for e in v)
    if len(t) == 1 and n > 1:
        t = t * n
    if len(t) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={_shape_list(t)}")
    return t


def _same_padding(k, d):
    """torch's padding='same': total d*(k-1), the extra one on the right."""
    total = d * (k - 1)
    return total // 2, total - total // 2


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    fname = f"conv{nd}d"
    _checks.check_tensor(input, fname, "input", 1)
    _checks.check_tensor(weight, fname, "weight", 2)
    if bias is not None:
        _checks.check_tensor(bias, fname, "bias", 3)
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{fname}, but got input of size: {_shape_list(input.shape)}")
    if input.dim() == nd + 1:
        out = _conv(nd, input.unsqueeze(0), weight, bias, stride, padding, dilation, groups)
        return out.squeeze(0)
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    groups = int(groups)
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.dim() != nd + 2:
        raise RuntimeError(f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {_shape_list(input.shape)}, but got {weight.dim()}-dimensional"
                           f" weight of size {_shape_list(weight.shape)} instead")
    ks = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            lohi = [_same_padding(k, d) for k, d in zip(ks, dilation)]
            if any(lo != hi for lo, hi in lohi):
                _warn("Using padding='same' with even kernel lengths and odd dilation may "
                      "require a zero-padded copy of the input be created")
                # torch pads the odd one out first (ConstantPadNdBackward0), as here
                from cgrad.nn.functional._padding import pad
                extra = []
                for lo, hi in reversed(lohi):
                    extra += [0, hi - lo]
                input = pad(input, extra)
            padding = tuple(lo for lo, _ in lohi)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _tuple(padding, nd, "padding")
        if any(p < 0 for p in padding):
            raise RuntimeError("negative padding is not supported")
    C = input.shape[1]
    O = weight.shape[0]
    if O % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_shape_list(weight.shape)}]"
                           f" instead")
    if weight.shape[1] * groups != C:
        raise RuntimeError(f"Given groups={groups}, weight of size {_shape_list(weight.shape)}, "
                           f"expected input{_shape_list(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {C} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != O):
        raise RuntimeError(f"Given weight of size {_shape_list(weight.shape)}, expected bias to "
                           f"be 1-dimensional with {O} elements, but got bias of size "
                           f"{_shape_list(bias.shape)} instead")
    padded = [n + 2 * p for n, p in zip(input.shape[2:], padding)]
    eff = [d * (k - 1) + 1 for k, d in zip(ks, dilation)]
    if any(pn < e for pn, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ("
                           f"{' x '.join(map(str, padded))}). Kernel size: ("
                           f"{' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           f"actual input size")
    _check_dtypes(input, weight, bias, "slow_conv2d_cpu")
    if nd == 1:
        params = ((1, stride[0]), (0, padding[0]), (1, dilation[0]), groups, True)
    else:
        params = (stride, padding, dilation, groups, False)
    return _Conv.apply(input, weight, bias, params)


def _check_dtypes(input, weight, bias, kernel):
    """torch's errors for mixed input/weight/bias dtypes and for a non-float input (the
    convolutions and transposed convolutions; `kernel` names torch's CPU kernel)."""
    xd, wd = input._data.dtype, weight._data.dtype
    if xd != wd or (bias is not None and bias._data.dtype != wd):
        from cgrad.ops.promotion import torch_type_name as _tn
        a, b = (xd, wd) if xd != wd else (wd, bias._data.dtype)
        what = ("Input type", "weight type") if xd != wd else ("Input type", "bias type")
        raise RuntimeError(f"{what[0]} (torch.{_tn(a)}Tensor) and {what[1]} "
                           f"(torch.{_tn(b)}Tensor) should be the same")
    if xd.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_checks_type(xd)}\'')


def _checks_type(dt):
    from cgrad.ops.promotion import torch_type_name as _tn
    return _tn(np.dtype(dt))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) over ``(N, C, L)`` or ``(C, L)``; weight
    ``(out, C/groups, k)``. ``padding`` is an int, a 1-tuple, 'valid' or 'same'. One
    ``ConvolutionBackward0`` node (Note [Convolution by im2col] in
    cgrad/nn/functional/_conv.py)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) over ``(N, C, H, W)`` or ``(C, H, W)``; weight
    ``(out, C/groups, kh, kw)``. ``padding`` is an int, a pair, 'valid' or 'same'. One
    ``ConvolutionBackward0`` node (Note [Convolution by im2col] in
    cgrad/nn/functional/_conv.py)."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


# -- unfold / fold (im2col and col2im as functions) ------------------------------------------


class _Unfold(Function):
    """(N, C, H, W) -> (N, C * kh * kw, L): every kernel window as a column."""
    _node_name = "Im2ColBackward0"

    @staticmethod
    def forward(ctx, x, k, s, p, d):
        X = x._data
        cols = _cols(X, k[0], k[1], s, p, d, 1)[0]
        if ctx is not None:
            ctx._aux = (k, s, p, d, X.shape[2:])
        return cols.reshape(X.shape[0], -1, cols.shape[-1])

    @staticmethod
    def backward(ctx, g):
        k, s, p, d, hw = ctx._aux
        return _Fold.apply(g, hw, k, s, p, d), None, None, None, None


class _Fold(Function):
    """(N, C * kh * kw, L) -> (N, C, H, W): the columns summed back onto the image."""
    _node_name = "Col2ImBackward0"

    @staticmethod
    def forward(ctx, a, hw, k, s, p, d):
        A = a._data
        N, CK, _ = A.shape
        C = CK // (k[0] * k[1])
        Ho = _out_size(hw[0], k[0], s[0], p[0], d[0])
        Wo = _out_size(hw[1], k[1], s[1], p[1], d[1])
        out = _col2im(A.reshape(N, C, k[0], k[1], Ho, Wo), (N, C) + tuple(hw), s, p, d)
        if ctx is not None:
            ctx._aux = (k, s, p, d)
        return np.ascontiguousarray(out)

    @staticmethod
    def backward(ctx, g):
        return (_Unfold.apply(g, *ctx._aux),) + (None,) * 5


def _pairs(kernel_size, dilation, padding, stride):
    return tuple(_tuple(v, 2, name) for v, name in ((kernel_size, "kernel_size"),
                                                    (dilation, "dilation"),
                                                    (padding, "padding"), (stride, "stride")))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding blocks (im2col): ``(N, C, H, W)`` or ``(C, H, W)`` to
    ``(N, C * kh * kw, L)`` (``Im2ColBackward0``)."""
    _checks.check_tensor(input, "unfold")
    k, d, p, s = _pairs(kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and non-zero dimensions for input, but got: "
                           f"{_shape_list(input.shape)}")
    if input.dim() == 3:
        return unfold(input.unsqueeze(0), k, d, p, s).squeeze(0)
    H, W = input.shape[2:]
    oh, ow = (_out_size(H, k[0], s[0], p[0], d[0]), _out_size(W, k[1], s[1], p[1], d[1]))
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input with spatial size ({H}, {W}), kernel_size=({k[0]}, "
                           f"{k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"calculated shape of the array of sliding blocks as ({oh}, {ow}), "
                           f"but its components must be at least one.")
    return _Unfold.apply(input, k, s, p, d)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding blocks (col2im, overlaps summed): ``(N, C * kh * kw, L)`` or
    ``(C * kh * kw, L)`` to ``(N, C, *output_size)`` (``Col2ImBackward0``)."""
    _checks.check_tensor(input, "fold")
    hw = _tuple(output_size, 2, "output_size")
    k, d, p, s = _pairs(kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{_shape_list(input.shape)}")
    if input.dim() == 2:
        return fold(input.unsqueeze(0), hw, k, d, p, s).squeeze(0)
    ck, n = input.shape[1], input.shape[2]
    if ck % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size=({k[0]}, {k[1]}).")
    oh, ow = (_out_size(hw[0], k[0], s[0], p[0], d[0]), _out_size(hw[1], k[1], s[1], p[1], d[1]))
    if oh * ow != n:
        raise RuntimeError(f"Given output_size=({hw[0]}, {hw[1]}), kernel_size=({k[0]}, "
                           f"{k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"stride=({s[0]}, {s[1]}), expected size of input's dimension 2 to "
                           f"match the calculated number of sliding blocks {oh} * {ow} = "
                           f"{oh * ow}, but got input.size(2)={n}.")
    return _Fold.apply(input, hw, k, s, p, d)
