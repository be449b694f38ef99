"""Transposed convolutions of cgrad.nn.functional: ``conv_transpose1d`` and
``conv_transpose2d`` (one ``ConvolutionBackward0`` node, as torch).

Note [Transposed convolution]
A transposed convolution is the adjoint of the convolution of Note [Convolution by im2col]:
with the weight read as a convolution's weight ``(C_in, C_out/groups, k...)`` (torch's layout
already is), ``conv_transpose(x, w)`` is the input gradient of ``conv(., w)`` taken at
``g = x``: one batched matmul ``w^T @ x`` over the groups (one BLAS call per group) and then
col2im (the columns added back onto the output, one strided slice per kernel offset). Its
gradients are the other two products of the same convolution:

* ``gx = conv(g, w)``            (``_Conv`` of cgrad/nn/functional/_conv.py)
* ``gw = conv_w^T(g, x)``        (``_ConvGradW``)

and those Functions' own backwards are written with the same three products, so double (and
higher) backward works. ``output_padding`` only widens the output that col2im fills; when
it is at least as large as the stride (torch allows it when the dilation is larger), the
backward pads g explicitly and crops it to what x's windows read.
"""
from __future__ import annotations

import numpy as np

from cgrad import _checks
from cgrad.autograd.function import Function
from cgrad.nn.functional._conv import (
    _as2d,
    _check_dtypes,
    _Conv,
    _ConvGradW,
    _from2d,
    _grad_x,
    _tuple,
)
from cgrad.nn.functional._utils import _shape_list


class _ConvTranspose(Function):
    """conv_transpose(x, w) + b = conv_x^T(x, w) + b (Note [Transposed convolution])."""
    _node_name = "ConvolutionBackward0"

    @staticmethod
    def forward(ctx, x, w, b, oshape, params):
        stride, padding, dilation, groups, one_d = params
        os2 = tuple(oshape[:2]) + ((1,) if one_d else ()) + tuple(oshape[2:])
        out = _grad_x(_as2d(x._data, one_d), _as2d(w._data, one_d), os2, stride, padding,
                      dilation, groups)
        out = np.ascontiguousarray(_from2d(out, one_d))
        if b is not None:
            out += b._data.reshape((1, -1) + (1,) * (out.ndim - 2))
        if ctx is not None:
            nx, nw = ctx.needs_input_grad[:2]
            ctx.save_for_backward(x if nw else None, w if nx else None)
            wide = any(o > ((n - 1) * st + dl * (k - 1) + 1 - 2 * pd) + st - 1
                       for o, n, st, dl, k, pd in zip(
                           oshape[2:], x._data.shape[2:], stride[-(x._data.ndim - 2):],
                           dilation[-(x._data.ndim - 2):], w._data.shape[2:],
                           padding[-(x._data.ndim - 2):]))
            ctx._aux = (params, tuple(w._data.shape), tuple(x._data.shape[2:]) if wide else ())
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad[:3]
        p, wshape, wide = ctx._aux
        gb = g.sum((0,) + tuple(range(2, g.dim()))) if nb else None
        if wide:
            # output_padding >= stride: the convolution of g would yield more positions than
            # x has; pad g explicitly and keep only the rows and columns the windows of x's
            # positions read, then convolve without padding
            stride, padding, dilation, groups, one_d = p
            from cgrad.nn.functional._padding import pad
            pads = [padding[1], padding[1]] + ([] if one_d else [padding[0], padding[0]])
            keep = [(n - 1) * st + dl * (k - 1) + 1
                    for n, st, dl, k in zip(wide,
                                            stride[-(g.dim() - 2):],
                                            dilation[-(g.dim() - 2):], wshape[2:])]
            g = pad(g, pads)
            g = g[(slice(None), slice(None)) + tuple(slice(0, k) for k in keep)]
            p = (stride, (0, 0), dilation, groups, one_d)
        gx = _Conv.apply(g, w, None, p) if nx else None
        gw = _ConvGradW.apply(g, x, wshape, p) if nw else None
        return gx, gw, gb, None, None


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups,
                    dilation):
    fname = f"conv_transpose{nd}d"
    _checks.check_tensor(input, fname, "input", 1)
    _checks.check_tensor(weight, fname, "weight", 2)
    if bias is not None:
        _checks.check_tensor(bias, fname, "bias", 3)
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{fname}, but got input of size: {_shape_list(input.shape)}")
    if input.dim() == nd + 1:
        return _conv_transpose(nd, input.unsqueeze(0), weight, bias, stride, padding,
                               output_padding, groups, dilation).squeeze(0)
    if isinstance(padding, str):
        raise TypeError(f"{fname}(): argument 'padding' must be tuple of ints, not str")
    stride = _tuple(stride, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    output_padding = _tuple(output_padding, nd, "output_padding")
    dilation = _tuple(dilation, nd, "dilation")
    groups = int(groups)
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.dim() != nd + 2:
        raise RuntimeError(f"Expected {nd + 2}-dimensional weight for {nd + 2}-dimensional "
                           f"input {_shape_list(input.shape)}, but got {weight.dim()}-dimensional"
                           f" weight of size {_shape_list(weight.shape)} instead")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        names = ("height", "width") if nd == 2 else ("",)
        parts = []
        for what, vals in (("output_padding", output_padding), ("stride", stride),
                           ("dilation", dilation)):
            for nm, v in zip(names, vals):
                parts.append(f"{what}_{nm}: {v}" if nm else f"{what}: {v}")
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           "but got " + " ".join(parts))
    C = input.shape[1]
    Cin = weight.shape[0]
    if Cin < groups or Cin % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {_shape_list(weight.shape)} "
                           f"instead" if Cin < groups else
                           f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {_shape_list(weight.shape)} "
                           f"instead")
    if Cin != C:
        raise RuntimeError(f"Given transposed=1, weight of size {_shape_list(weight.shape)}, "
                           f"expected input{_shape_list(input.shape)} to have {Cin} channels, "
                           f"but got {C} channels instead")
    O = weight.shape[1] * groups
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != O):
        raise RuntimeError(f"Given transposed=1, weight of size {_shape_list(weight.shape)}, "
                           f"expected bias to be 1-dimensional with {O} elements, but got bias "
                           f"of size {_shape_list(bias.shape)} instead")
    ks = tuple(weight.shape[2:])
    osz = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1
           for n, s, p, d, k, op in zip(input.shape[2:], stride, padding, dilation, ks,
                                        output_padding)]
    if any(o <= 0 for o in osz):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, input.shape[2:]))})"
                           f". Calculated output size per channel: "
                           f"({' x '.join(map(str, osz))}). Output size is too small")
    _check_dtypes(input, weight, bias, "slow_conv_transpose2d_cpu")
    if nd == 1:
        params = ((1, stride[0]), (0, padding[0]), (1, dilation[0]), groups, True)
    else:
        params = (stride, padding, dilation, groups, False)
    oshape = (input.shape[0], O) + tuple(osz)
    return _ConvTranspose.apply(input, weight, bias, oshape, params)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution over ``(N, C_in, L)`` or ``(C_in, L)``; weight
    ``(C_in, C_out/groups, k)``. One ``ConvolutionBackward0`` node (Note [Transposed
    convolution] in cgrad/nn/functional/_conv_transpose.py)."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)``; weight
    ``(C_in, C_out/groups, kh, kw)``. One ``ConvolutionBackward0`` node (Note [Transposed
    convolution] in cgrad/nn/functional/_conv_transpose.py)."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)
