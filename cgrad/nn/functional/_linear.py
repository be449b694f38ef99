"""Linear functions of cgrad.nn.functional: ``linear`` (``x @ W.T + b`` in one
``AddmmBackward0`` node, ``MmBackward0`` without a bias) and ``bilinear``."""
from __future__ import annotations

from cgrad import _C
from cgrad import _checks
from cgrad._C import _wrap
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _shape_list, _tname
from cgrad.ops import _gemm
from cgrad.ops.linalg import Mm
from cgrad.ops._sums import _fast_sum
from cgrad.ops.shape import T
from cgrad.ops.shape import UnsafeView, View


_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _check_mm(X, W):
    if X.shape[1] != W.shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({X.shape[0]}x"
                           f"{X.shape[1]} and {W.shape[1]}x{W.shape[0]})")
    if X.dtype != W.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: "
            f"{_C10_NAMES.get(X.dtype.name, X.dtype.name)} != "
            f"{_C10_NAMES.get(W.dtype.name, W.dtype.name)}")


def _check_bias(B, out_shape, dtype):
    if B.dtype != dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_tname(B.dtype)} "
                           f"and {_tname(dtype)}")
    if B.ndim > len(out_shape):
        raise RuntimeError(
            f"expand({_C._type_name(B)}{{{_shape_list(B.shape)}}}, size={_shape_list(out_shape)}"
            f"): the number of sizes provided ({len(out_shape)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({B.ndim})")
    for i in range(1, B.ndim + 1):
        if B.shape[-i] != 1 and B.shape[-i] != out_shape[-i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({out_shape[-i]}) must match the existing "
                f"size ({B.shape[-i]}) at non-singleton dimension {len(out_shape) - i}.  Target "
                f"sizes: {_shape_list(out_shape)}.  Tensor sizes: {_shape_list(B.shape)}")


class _Addmm(Function):
    """linear(x, W, b) for a 2-D x: x @ W.T + b, one node.
    d/dx = g @ W, d/dW = g.T @ x (BLAS, contiguous), d/db = g summed over rows."""
    _node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, x, w, b):
        X, W = x._data, w._data
        _check_mm(X, W)
        if b is not None:
            B = b._data
            shape = (X.shape[0], W.shape[0])
            _check_bias(B, shape, X.dtype)
            if B.shape == shape[1:]:
                out = _gemm.mm(X, W.T, B)  # the bias added in the product's store
            else:
                out = _gemm.mm(X, W.T)
                out += B                   # out is ours: add the bias in place
        else:
            out = _gemm.mm(X, W.T)
        if ctx is not None:
            nx, nw = ctx.needs_input_grad[:2]
            # save only what backward reads: x for dW, W for dx
            ctx.save_for_backward(x if nw else None, w if nx else None)
            ctx._aux = None if b is None else b._data.shape
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        # a (out,) bias: reduce here; any other broadcast bias: the engine sums g to it
        sum_bias = nb and len(ctx._aux) == 1
        if not _C.is_grad_enabled():
            # first order: the three BLAS/NumPy calls themselves, no nodes to record
            G = g._data
            return (_wrap(_gemm.mm(G, w._data)) if nx else None,
                    _wrap(_gemm.mm(G.T, x._data)) if nw else None,
                    (_wrap(_fast_sum(G, 0)) if sum_bias else g) if nb else None)
        gx = Mm.apply(g, w) if nx else None
        gw = Mm.apply(T.apply(g), x) if nw else None
        gb = (g.sum(0) if sum_bias else g) if nb else None
        return gx, gw, gb


class _MmLinear(_Addmm):
    """linear(x, W) without a bias, for a 2-D x: x @ W.T (torch: MmBackward0 over TBackward0)."""
    _node_name = "MmBackward0"


def linear(input, weight, bias=None):
    r"""Apply ``y = x W^T + b``.

    Shapes: input ``(*, in_features)``, weight ``(out_features, in_features)`` (or
    ``(in_features,)``), bias ``(out_features,)`` or broadcastable to the output; output
    ``(*, out_features)``. A 2-D input gives one node (``AddmmBackward0``, or ``MmBackward0``
    without bias); other ranks are flattened to 2-D and viewed back, as torch does.

    >>> import cgrad, cgrad.nn.functional as F
    >>> x = cgrad.ones(2, 3); w = cgrad.ones(4, 3, requires_grad=True)
    >>> F.linear(x, w, cgrad.zeros(4)).shape
    cgrad.Size([2, 4])
    """
    _checks.check_tensor(input, "linear", "input", 1)
    _checks.check_tensor(weight, "linear", "weight", 2)
    if bias is not None:
        _checks.check_tensor(bias, "linear", "bias", 3)
        if input._data.dtype != weight._data.dtype and input.dim() >= 1 and weight.dim() == 2:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{_tname(input._data.dtype)} and {_tname(weight._data.dtype)}")
    xd, wd = input.dim(), weight.dim()
    if xd == 0 or wd == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{xd}D and {wd}D")
    if wd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {wd}D")
    if wd == 1:
        if bias is not None:
            raise RuntimeError("mat2 must be a matrix, got 1-D tensor")
        from cgrad.ops.linalg import matmul
        return matmul(input, weight)
    cls = _MmLinear if bias is None else _Addmm
    if xd == 2:
        return cls.apply(input, weight, bias)
    lead = input.shape[:-1]
    out = cls.apply(input.reshape(-1, input.shape[-1]), weight, bias)
    shape = tuple(lead) + (weight.shape[0],)
    if bias is None:        # torch: matmul's view back (squeeze_ of the 1-D case)
        return (_Squeeze0 if xd == 1 else UnsafeView).apply(out, shape)
    return out.view(shape)


class _Squeeze0(View):
    """The (1, out) -> (out,) view of linear(1-D input) without bias (torch's squeeze_(0))."""
    _node_name = "SqueezeBackward4"


def bilinear(input1, input2, weight, bias=None):
    """y[..., k] = x1 A_k x2^T + b_k with A = weight of shape (out, in1, in2) (torch's
    F.bilinear), computed as one matmul: (x1 @ A viewed as (in1, out*in2)) * x2, summed."""
    out, in1, in2 = weight.shape
    s1, s2 = input1.shape, input2.shape
    if s1[:-1] != s2[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(s1[:-1])} and {list(s2[:-1])}")
    if s1[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {s1[-1]} "
                           f"but expected {in1}")
    if s2[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {s2[-1]} "
                           f"but expected {in2}")
    lead = tuple(s1[:-1])
    a = input1.reshape(-1, in1)
    c = input2.reshape(-1, in2)
    n = a.shape[0]
    t = a.matmul(weight.permute(1, 0, 2).reshape(in1, out * in2))
    y = (t.reshape(n, out, in2) * c.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (out,))
