"""cgrad.nn.functional: torch.nn.functional's names, signatures and defaults on cgrad.

What a training loop calls is fused here, one node per call where torch's own kernel is one
node (or where fusing is what makes it fast and numerically stable):

* ``linear``: ``x @ W.T + b`` in one node named ``AddmmBackward0`` (``MmBackward0`` without a
  bias). torch records ``TBackward0(W)`` under its addmm; cgrad's node holds the weight
  directly and computes ``dW = g.T @ x`` with one BLAS call (a fresh contiguous array that
  the engine may store in ``W.grad`` without a copy). N-D inputs are flattened to 2-D around
  it as in torch (``ViewBackward0`` / ``UnsafeViewBackward0`` on top).
* ``cross_entropy``: log_softmax + nll in ONE node. torch has ``NllLossBackward0`` on top of
  ``LogSoftmaxBackward0``; cgrad has a single ``NllLossBackward0`` (``NllLoss2DBackward0``
  for inputs with 3 or more dims, ``ViewBackward0`` for 3-D and >= 5-D inputs with
  reduction='none', ``AddBackward0`` with label smoothing, ``DivBackward1`` /
  ``NegBackward0`` for probability targets: always the name of torch's top node). Its
  backward is ``(softmax - onehot) * weight * g / N`` computed in place from the saved
  log-probabilities; ignored targets get exactly zero gradient (also when every target is
  ignored and the mean is 0 / 0 = nan, as torch).
* ``softmax``/``log_softmax`` (max-subtracted), ``nll_loss``, ``mse_loss``,
  ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy(_with_logits)`` (log-sum-exp
  form), ``embedding``, ``layer_norm`` (``NativeLayerNormBackward0``), ``pad``: one node
  each, as in torch. ``l1_loss`` is ``AbsBackward0`` (of the difference, fused) under
  ``MeanBackward0``/``SumBackward0``, as torch.

Every backward is written with cgrad ops, so ``create_graph=True`` (double backward) works.
Where a first-order backward has a faster NumPy form (cross_entropy, linear) it is used only
when no graph is being recorded (``cgrad.is_grad_enabled()`` is False inside backward unless
``create_graph=True``); both forms compute the same formula.

``inplace=True`` modifies the input; on a tensor that is part of a recorded graph the op is
recorded and the input's history rebased, as torch (cgrad/ops/inplace.py).

Known differences from torch: ``embedding(sparse=True)`` is not supported;
``binary_cross_entropy_with_logits`` returns the target's dtype as torch does, and
``huber_loss`` promotes mixed dtypes (torch 2.13 returns the input's dtype and then fails in
backward).

Elementwise activations (relu, sigmoid, tanh, gelu, ...) delegate to the op library
(``cgrad.<name>`` or ``Tensor.<name>``), looked up at call time.
"""
from __future__ import annotations

import numbers

import numpy as np

from cgrad._warn import warn as _warn
from cgrad.ops.binary import torch_type_name

from cgrad import _C
from cgrad import _checks
from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops.binary import mask_fill
from cgrad.ops.linalg import Mm, T
from cgrad.ops.shape import UnsafeView, View

__all__ = [
    "linear", "relu", "relu_", "leaky_relu", "elu", "selu", "gelu", "silu", "sigmoid", "tanh",
    "softplus", "softmax", "log_softmax", "dropout", "cross_entropy", "nll_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "embedding", "layer_norm", "one_hot", "pad",
]

_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _tname(dt):
    """torch's ScalarType name for a NumPy dtype (Float, Double, Long, ...)."""
    return torch_type_name(np.dtype(dt))


def _shape_list(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _size_str(shape):
    from cgrad.tensor import Size
    return repr(Size(shape))


def _grad_enabled():
    return _C.is_grad_enabled()


def _check_float(x, kernel):
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tname(x.dtype)}\'')


def _norm_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def _not_differentiable(t, fname, arg):
    """torch refuses a loss weight that requires grad (its kernels give it no gradient)."""
    if isinstance(t, TensorBase) and t.requires_grad and _grad_enabled():
        raise RuntimeError(f"The function '{fname}' is not differentiable with respect to "
                           f"argument '{arg}'. This input cannot have requires_grad True.")


def _broadcast_shape(a, b):
    """Broadcast two shapes, raising torch's message when they do not broadcast."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {i}")
        out.append(y if x == 1 else x)
    return tuple(out)


def _as_tensor(x, like=None, fname="loss"):
    """A loss's target must be a Tensor (torch: AttributeError on x.size(); see
    cgrad._checks.NotATensorError)."""
    return _checks.check_tensor(x, fname, "target", 2)


def _loss_args(fname, input, target):
    _checks.check_tensor(input, fname, "input", 1)
    return _checks.check_tensor(target, fname, "target", 2)


# ------------------------------------------------------------------------------------------
# reductions: torch's _Reduction helpers
# ------------------------------------------------------------------------------------------
_REDUCTIONS = ("none", "mean", "sum")


def _legacy_get_string(size_average, reduce, emit_warning=True):
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    ret = "mean" if size_average and reduce else ("sum" if reduce else "none")
    if emit_warning:
        _warn("size_average and reduce args will be deprecated, please use "
              f"reduction='{ret}' instead.")
    return ret


def _reduction(reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce_np(loss, reduction, dtype):
    if reduction == "none":
        return loss
    out = loss.sum() if reduction == "sum" else loss.mean()
    return np.asarray(out, dtype=dtype)


def _scale(g, reduction, n):
    """The gradient of each unreduced loss element: g (none, sum) or g / n (mean)."""
    return g / n if reduction == "mean" else g


# ------------------------------------------------------------------------------------------
# private elementwise helpers used inside backward formulas (differentiable, stable)
# ------------------------------------------------------------------------------------------
def _sigmoid_np(x):
    e = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return out.astype(x.dtype, copy=False)


def _softplus_neg_abs_np(x):
    """log1p(exp(-|x|)): the stable tail of softplus."""
    return np.log1p(np.exp(-np.abs(x)))


class _Sigmoid(Function):
    """sigmoid(a), stable for large |a|.  d/da = g * y * (1 - y)."""
    _node_name = "SigmoidBackward0"

    @staticmethod
    def forward(ctx, a):
        out = _sigmoid_np(a._data)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y * (1.0 - y))


class _LogSigmoid(Function):
    """log(sigmoid(a)) = -softplus(-a).  d/da = g * sigmoid(-a)."""
    _node_name = "LogSigmoidBackward0"

    @staticmethod
    def forward(ctx, a):
        x = a._data
        if ctx is not None:
            ctx.save_for_backward(a)
        return -(np.maximum(-x, 0) + _softplus_neg_abs_np(x)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * _Sigmoid.apply(-a)


class _ClampMin(Function):
    """max(a, m) for a number m.  d/da = g where a >= m, else 0."""
    _node_name = "ClampMinBackward0"

    @staticmethod
    def forward(ctx, a, m):
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx._aux = m
        return np.maximum(a._data, m).astype(a._data.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        keep = (a._data >= ctx._aux).astype(g.dtype)
        return g * _wrap(keep), None


# ------------------------------------------------------------------------------------------
# linear
# ------------------------------------------------------------------------------------------
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
        out = X @ W.T
        if b is not None:
            B = b._data
            _check_bias(B, out.shape, out.dtype)
            out += B                       # out is ours: add the bias in place
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
            return (_wrap(G @ w._data) if nx else None,
                    _wrap(G.T @ x._data) if nw else None,
                    (_wrap(G.sum(0)) if sum_bias else g) if nb else None)
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


# ------------------------------------------------------------------------------------------
# softmax / log_softmax
# ------------------------------------------------------------------------------------------
def _log_softmax_np(x, axis):
    if x.ndim == 0:
        return np.zeros_like(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    s = np.subtract(x, m, dtype=x.dtype)
    e = np.exp(s)
    lse = np.log(np.sum(e, axis=axis, keepdims=True))
    s -= lse
    return s


# the op library's nodes (cgrad/ops/reduce_ext.py): one SoftmaxBackward0 / LogSoftmaxBackward0
from cgrad.ops.reduce_ext import LogSoftmax as _LogSoftmax  # noqa: E402
from cgrad.ops.reduce_ext import Softmax as _Softmax  # noqa: E402


def _get_softmax_dim(name, ndim, stacklevel):
    # _stacklevel=3 (the default) blames the user's call; more blames callers further out
    _warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
          "to include dim=X as an argument.", skip=max(stacklevel - 3, 0))
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_common(cls, name, input, dim, stacklevel, dtype):
    _checks.check_tensor(input, name)
    if dim is None:
        dim = _get_softmax_dim(name, input.dim(), stacklevel)
    dim = _norm_dim(_checks.check_int(dim, name, "dim", 1), input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return cls.apply(input, dim)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x), dim)``, computed as ``exp(x - max)`` (no overflow).
    One node, ``SoftmaxBackward0``. ``dtype`` casts the input first."""
    return _softmax_common(_Softmax, "softmax", input, dim, _stacklevel, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``x - logsumexp(x, dim)`` (max-subtracted). One node, ``LogSoftmaxBackward0``."""
    return _softmax_common(_LogSoftmax, "log_softmax", input, dim, _stacklevel, dtype)


# ------------------------------------------------------------------------------------------
# nll_loss / cross_entropy with class-index targets
# ------------------------------------------------------------------------------------------
class _NllPrep:
    """Validated class-index targets: safe indices, per-element weights, the mean's divisor."""
    __slots__ = ("t", "wt", "mask", "denom", "reduction", "cax", "weight", "shape", "C")


def _nll_prepare(input, target, weight, ignore_index, reduction):
    shape = input._data.shape
    nd = len(shape)
    if nd < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {nd})")
    t = target._data
    if nd != 1:
        tb = t.shape[0] if t.ndim else 0
        if shape[0] != tb:
            raise ValueError(f"Expected input batch_size ({shape[0]}) to match target "
                             f"batch_size ({tb}).")
    if nd <= 2:
        if t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    elif nd == 4:
        if t.shape != (shape[0],) + shape[2:]:
            raise RuntimeError(f"size mismatch (got input: {_shape_list(shape)} , target: "
                               f"{_shape_list(t.shape)}")
    elif t.shape != (shape[0],) + shape[2:]:
        raise RuntimeError(f"Expected target size {_shape_list((shape[0],) + shape[2:])}, got "
                           f"{_shape_list(t.shape)}")
    cax = 0 if nd == 1 else 1
    C = shape[cax]
    W = None
    if weight is not None:
        W = weight._data
        if W.ndim != 1 or W.size != C:
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or "
                               f"no classes but got weight tensor of shape: "
                               f"{_shape_list(W.shape)}")
        if W.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {_tname(input.dtype)} but found "
                               f"{_tname(W.dtype)}")
    if t.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_tname(t.dtype)}")
    t = t.astype(np.int64, copy=False)
    # the common case costs two reductions: all targets in [0, C) and none ignored
    lo, hi = (int(t.min()), int(t.max())) if t.size else (0, 0)
    has_ign = lo <= ignore_index <= hi
    if has_ign:
        ign = t == ignore_index
        has_ign = bool(ign.any())
        if has_ign:
            t = np.where(ign, 0, t)
            lo, hi = int(t.min()), int(t.max())
    if t.size and (lo < 0 or hi >= C):
        bad = (t < 0) | (t >= C)
        raise IndexError(f"Target {int(target._data[bad][0])} is out of bounds.")
    dtype = input.dtype
    wt = None if W is None else W[t]
    mask = None
    if has_ign:
        mask = ~ign
        wt = np.where(ign, 0, wt if wt is not None else 1).astype(dtype)
    p = _NllPrep()
    p.t, p.wt, p.mask, p.reduction, p.cax, p.weight, p.shape, p.C = (
        t, wt, mask, reduction, cax, W, shape, C)
    p.denom = wt.sum() if wt is not None else t.size
    return p


def _pick(arr, t, cax):
    """arr[i, t_i, ...] along the class axis (shape of t)."""
    if arr.ndim == 1:
        return arr[t]
    if arr.ndim == 2:
        return arr[np.arange(arr.shape[0]), t]
    return np.take_along_axis(arr, np.expand_dims(t, 1), axis=1).squeeze(1)


def _sub_at(arr, t, vals):
    """arr[i, t_i, ...] -= vals (each position once), in place."""
    if arr.ndim == 1:
        arr[t] -= vals
    elif arr.ndim == 2:
        arr[np.arange(arr.shape[0]), t] -= vals
    else:
        idx = np.expand_dims(t, 1)
        cur = np.take_along_axis(arr, idx, axis=1)
        np.put_along_axis(arr, idx, cur - np.expand_dims(np.broadcast_to(vals, t.shape), 1),
                          axis=1)


def _class_view(arr, cax, ndim):
    """A per-class vector (C,) shaped to broadcast along the class axis of an ndim array."""
    shape = [1] * ndim
    shape[cax] = -1
    return arr.reshape(shape)


def _nll_forward_np(x, p):
    """Unreduced and reduced nll of the log-probabilities x."""
    picked = _pick(x, p.t, p.cax)
    loss = -picked if p.wt is None else -(picked * p.wt)
    if p.mask is not None and p.wt is None:
        loss = np.where(p.mask, loss, 0)
    if p.reduction == "none":
        return loss.astype(x.dtype, copy=False)
    s = loss.sum()
    if p.reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):   # all ignored: nan, as torch
            s = s / p.denom
    return np.asarray(s, dtype=x.dtype)


def _masked(s, p):
    """The per-element gradient scale s with ignored targets set to exactly 0 (so that a mean
    over no counted element, s = g / 0, gives 0 there and not inf * 0 = nan, as torch)."""
    if p.mask is None:
        return s
    if isinstance(s, TensorBase):
        return mask_fill(s, ~p.mask) if s.dim() else mask_fill(
            s._expand_to(p.mask.shape), ~p.mask)
    return np.where(p.mask, s, 0).astype(np.result_type(s), copy=False)


def _nll_coef(p, dtype):
    """Per-element weight of the nll term (shape of the target, or a scalar)."""
    return p.wt if p.wt is not None else np.asarray(1.0, dtype)


class _NllLoss(Function):
    """nll_loss(x, t): -w[t_i] * x[i, t_i], reduced.  d/dx = scatter of -w[t_i] * g_i."""
    _node_name = "NllLossBackward0"
    _cg_saves = True      # torch saves target and total_weight (Note [Freed saved values])

    @staticmethod
    def forward(ctx, input, prep):
        if ctx is not None:
            ctx._aux = prep
        return _nll_forward_np(input._data, prep)

    @staticmethod
    def backward(ctx, g):
        return _NllLossGrad.apply(g, ctx._aux), None


class _NllLoss2d(_NllLoss):
    _node_name = "NllLoss2DBackward0"


class _NllLossView(_NllLoss):
    """K-dim input other than 4-D with reduction='none': torch's top node is the view back."""
    _node_name = "ViewBackward0"


def _kdim(nd, reduction):
    """Which of torch's top nodes: 0 NllLoss, 1 NllLoss2D, 2 the ViewBackward0 that torch
    records for 3-D and >= 5-D inputs with reduction='none' (it calls nll_loss2d on a 4-D
    view of them)."""
    if nd < 3:
        return 0
    return 2 if reduction == "none" and nd != 4 else 1


class _NllLossGrad(Function):
    """The gradient of nll_loss: zeros with -w[t_i] * s_i at (i, t_i). It is linear in g;
    its own gradient is nll_loss of the incoming gradient (the adjoint)."""
    _node_name = "NllLossBackwardBackward0"
    _cg_saves = True      # torch saves target and total_weight (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, prep):
        if ctx is not None:
            ctx._aux = prep
        G = g._data
        out = np.zeros(prep.shape, dtype=G.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            vals = _masked(_scale(G, prep.reduction, prep.denom), prep) * _nll_coef(prep,
                                                                                     G.dtype)
        _sub_at(out, prep.t, vals)
        return out

    @staticmethod
    def backward(ctx, gg):
        prep = ctx._aux
        cls = (_NllLoss, _NllLoss2d, _NllLossView)[_kdim(len(prep.shape), prep.reduction)]
        return cls.apply(gg, prep), None


class _CrossEntropy(Function):
    """cross_entropy(x, t) with class indices, optionally label-smoothed:
    log_softmax and nll in one node.

    loss_i = (1 - eps) * w[t_i] * -lsm[i, t_i] + eps / C * mask_i * sum_c w_c * -lsm[i, c]
    d/dx_i = s_i * (p_i * ((1-eps) w[t_i] + eps/C sum(w)) - (1-eps) w[t_i] onehot(t_i)
                    - eps/C w),   p = softmax(x), s_i = mask_i * (g_i, or g / N for 'mean').
    """
    _node_name = "NllLossBackward0"

    @staticmethod
    def forward(ctx, input, prep, eps):
        x = input._data
        _check_float(x, "log_softmax_lastdim_kernel_impl")
        lsm = _log_softmax_np(x, prep.cax)
        out = _nll_forward_np(lsm, prep)
        if eps > 0:
            C = prep.C
            if prep.weight is not None:
                sm = -(lsm * _class_view(prep.weight, prep.cax, x.ndim)).sum(prep.cax)
            else:
                sm = -lsm.sum(prep.cax)
            if prep.mask is not None:
                sm = np.where(prep.mask, sm, 0)
            if prep.reduction == "sum":
                sm = sm.sum()
            elif prep.reduction == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    sm = sm.sum() / prep.denom
            out = np.asarray((1 - eps) * out + sm * (eps / C), dtype=x.dtype)
        if ctx is not None:
            ctx.save_for_backward(input)
            ctx._aux = (prep, eps, lsm)
        return out

    @staticmethod
    def backward(ctx, g):
        (input,) = ctx.saved_tensors
        prep, eps, lsm = ctx._aux
        dt = lsm.dtype
        cax, C, nd = prep.cax, prep.C, lsm.ndim
        nllw = _nll_coef(prep, dt)              # w[t_i] (0 where ignored), or 1
        # d/dx_i = s_i * (p_i * a_i - (1 - eps) w[t_i] onehot(t_i) - eps / C * w), with
        # a_i = (1 - eps) w[t_i] + eps / C * sum(w); s_i = 0 for ignored targets
        a = (1 - eps) * nllw
        if eps > 0:
            a = a + (eps / C) * (prep.weight.sum() if prep.weight is not None else C)
        wv = _class_view(prep.weight, cax, nd) if prep.weight is not None else None
        if not _grad_enabled():
            # first order: one new array, (softmax * a - onehot * w - eps/C w) * s in place
            with np.errstate(invalid="ignore", divide="ignore"):
                s = _masked(_scale(g._data, prep.reduction, prep.denom), prep)
                gx = np.exp(lsm)
                gx *= _expand_class(np.asarray(s * a, dtype=dt), cax, nd)
                _sub_at(gx, prep.t, s * ((1 - eps) * nllw))
                if eps > 0:
                    se = _expand_class(np.asarray(s * (eps / C), dtype=dt), cax, nd)
                    gx -= se * wv if wv is not None else se
            return _wrap(gx), None, None
        # create_graph: the same formula in cgrad ops, softmax recomputed differentiably
        p = _LogSoftmax.apply(input, cax).exp()
        with np.errstate(invalid="ignore", divide="ignore"):
            s = _masked(_scale(g, prep.reduction, float(prep.denom)), prep)
        if s.dim() > 0 and nd > 1:
            s = s.unsqueeze(cax)
        A = _wrap(_expand_class(np.asarray(a, dtype=dt), cax, nd))
        B = np.zeros(lsm.shape, dtype=dt)
        _sub_at(B, prep.t, -(1 - eps) * nllw)
        if eps > 0:
            B += (eps / C) * wv if wv is not None else eps / C
        return p * (s * A) - s * _wrap(B), None, None


def _expand_class(arr, cax, ndim):
    """Insert the class axis into a per-element array (or keep a scalar)."""
    if arr.ndim == 0 or ndim == 1:
        return arr
    return np.expand_dims(arr, cax)


class _CrossEntropy2d(_CrossEntropy):
    _node_name = "NllLoss2DBackward0"


class _CrossEntropyView(_CrossEntropy):
    _node_name = "ViewBackward0"


class _CrossEntropySmooth(_CrossEntropy):
    _node_name = "AddBackward0"


class _CrossEntropyProb(Function):
    """cross_entropy(x, p) with class probabilities p (optionally smoothed, weighted):
    loss_i = -sum_c w_c * p'_ic * lsm_ic with p' = p (1 - eps) + eps / C.
    d/dx = s * (softmax(x) * sum_c(w p') - w p'),  d/dp = -(1 - eps) * s * w * lsm."""
    _node_name = "DivBackward1"

    @staticmethod
    def forward(ctx, input, target, weight, reduction, eps):
        x, t = input._data, target._data
        cax = 0 if x.ndim == 1 else 1
        C = x.shape[cax] if x.ndim else 1
        lsm = _log_softmax_np(x, cax)
        tt = t * (1 - eps) + eps / C if eps > 0 else t
        if weight is not None:
            tt = tt * _class_view(weight, cax, x.ndim)
        el = -(lsm * tt)
        dt = el.dtype
        n = x.size // C if C else 0
        if reduction == "none":
            out = el.sum(cax) if x.ndim else el
        elif reduction == "sum":
            out = np.asarray(el.sum(), dtype=dt)
        else:
            out = np.asarray(el.sum() / n if n else np.nan, dtype=dt)
        if ctx is not None:
            ctx.save_for_backward(input, target)
            ctx._aux = (weight, reduction, eps, cax, C, n, lsm)
        return out

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        weight, reduction, eps, cax, C, n, lsm = ctx._aux
        nx, nt = ctx.needs_input_grad[:2]
        nd = input.dim()
        lsm_t = _LogSoftmax.apply(input, cax) if _grad_enabled() else _wrap(lsm)
        s = _scale(g, reduction, float(n))
        if s.dim() > 0 and nd > 0:
            s = s.unsqueeze(cax)
        wv = _wrap(_class_view(weight, cax, nd)) if weight is not None else None
        gx = gt = None
        if nx:
            tt = target * (1 - eps) + eps / C if eps > 0 else target
            if wv is not None:
                tt = tt * wv
            tsum = tt.sum(cax, keepdim=True) if nd else tt
            gx = lsm_t.exp() * (s * tsum) - s * tt
        if nt:
            gt = lsm_t * s
            if wv is not None:
                gt = gt * wv
            gt = gt * (-(1 - eps))
        return gx, gt, None, None, None


class _CrossEntropyProbNeg(_CrossEntropyProb):
    _node_name = "NegBackward0"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class-index targets: ``-weight[t] * input[i, t]``.

    input ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)`` log-probabilities; target int64 (or
    uint8) ``(N,)``, ``()`` or ``(N, d1, ...)``. Entries equal to ``ignore_index`` contribute
    nothing; 'mean' divides by the summed weights of the counted entries."""
    _loss_args("nll_loss", input, target)
    reduction = _reduction(reduction, size_average, reduce)
    _not_differentiable(weight, "nll_loss_forward", "weight")
    prep = _nll_prepare(input, target, weight, ignore_index, reduction)
    cls = (_NllLoss, _NllLoss2d, _NllLossView)[_kdim(input.dim(), reduction)]
    return cls.apply(input, prep)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    r"""Cross entropy of logits: ``log_softmax`` + ``nll_loss`` fused in one node.

    input ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)`` unnormalised logits; target either class
    indices (int64/uint8, input's shape without the class dim) or class probabilities (a
    float tensor of the input's shape). ``weight`` is a per-class ``(C,)`` rescaling,
    ``ignore_index`` drops targets (class indices only), ``label_smoothing`` mixes in the
    uniform distribution.

    The node is ``NllLossBackward0`` (torch has ``NllLossBackward0`` over
    ``LogSoftmaxBackward0``); with label smoothing or probability targets the node is named
    after torch's top node. Its backward is ``(softmax - onehot) * w * g / N``.

    >>> import cgrad, cgrad.nn.functional as F
    >>> x = cgrad.zeros(2, 4, requires_grad=True)
    >>> F.cross_entropy(x, cgrad.tensor([0, 3]))
    tensor(1.3863, grad_fn=<NllLossBackward0>)
    """
    _loss_args("nll_loss", input, target)
    _loss_args("cross_entropy", input, target)
    reduction = _reduction(reduction, size_average, reduce)
    _not_differentiable(weight, "nll_loss_forward", "weight")
    x = input._data
    _check_float(x, "log_softmax_lastdim_kernel_impl")
    if tuple(input.shape) == tuple(target.shape):
        if target.dtype.kind != "f":
            raise RuntimeError("Expected floating point type for target with class "
                               f"probabilities, got {_tname(target.dtype)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        cax = 0 if x.ndim <= 1 else 1
        C = x.shape[cax] if x.ndim else 1
        W = None
        if weight is not None:
            W = weight._data
            if W.ndim != 1 or W.size != C:
                raise RuntimeError(f"cross_entropy: weight tensor should be defined either for "
                                   f"all {C} classes or no classes but got weight tensor of "
                                   f"shape: {_shape_list(W.shape)}")
        eps = float(label_smoothing)
        if eps > 0 and eps > 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {eps}")
        cls = _CrossEntropyProb if reduction == "mean" else _CrossEntropyProbNeg
        return cls.apply(input, target, W, reduction, max(eps, 0.0))
    eps = float(label_smoothing)
    if eps > 0 and eps > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {eps}")
    prep = _nll_prepare(input, target, weight, ignore_index, reduction)
    if eps > 0:
        cls = _CrossEntropySmooth
    else:
        eps = 0.0
        cls = (_CrossEntropy, _CrossEntropy2d, _CrossEntropyView)[_kdim(input.dim(), reduction)]
    return cls.apply(input, prep, eps)


# ------------------------------------------------------------------------------------------
# regression losses
# ------------------------------------------------------------------------------------------
def _warn_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        _warn(f"Using a target size ({target.size()}) that is different to the input "
              f"size ({input.size()}). This will likely lead to incorrect results due "
              "to broadcasting. Please ensure they have the same size.")


def _result_dtype(x, t):
    from cgrad.ops.elementwise import result_dtype
    return result_dtype(x, t)


def _diff(x, t):
    """x - t in the promoted dtype, always a fresh ndarray (also for 0-d inputs)."""
    d = np.subtract(x, t, dtype=_result_dtype(x, t))
    return d if type(d) is np.ndarray else np.asarray(d)


class _MseLoss(Function):
    """mean/sum/none of (x - t)**2 (broadcast).  d/dx = 2 (x - t) s, d/dt = -d/dx."""
    _node_name = "MseLossBackward0"

    @staticmethod
    def forward(ctx, input, target, reduction):
        d = _diff(input._data, target._data)
        dt = d.dtype
        np.square(d, out=d)
        if ctx is not None:
            ctx.save_for_backward(input, target)
            ctx._aux = (reduction, d.size)
        return _reduce_np(d, reduction, dt)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        reduction, n = ctx._aux
        nx, nt = ctx.needs_input_grad[:2]
        gd = (input - target) * (g * (2.0 / n) if reduction == "mean" else g * 2.0)
        return gd if nx else None, -gd if nt else None, None


class _AbsDiff(Function):
    """|x - t| (broadcast).  d/dx = g * sign(x - t), d/dt = -d/dx."""
    _node_name = "AbsBackward0"

    @staticmethod
    def forward(ctx, input, target):
        d = _diff(input._data, target._data)
        if ctx is not None:
            ctx.save_for_backward(input, target)
        return np.abs(d, out=d)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        nx, nt = ctx.needs_input_grad
        gd = g * _wrap(np.sign(_diff(input._data, target._data)))
        return gd if nx else None, -gd if nt else None


def _weighted(loss, weight, reduction):
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     "'sum'.")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target)**2``, reduced. One node (``MseLossBackward0``);
    gradients flow to both input and target. A ``weight`` of the input's shape gives
    ``sum(w * err) / sum(w)`` for 'mean' (torch's formula)."""
    target = _loss_args("mse_loss", input, target)
    _warn_size(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    _broadcast_shape(input.shape, target.shape)
    if _result_dtype(input._data, target._data).kind not in "fc":
        raise NotImplementedError(f"\"mse_cpu\" not implemented for "
                                  f"'{_tname(_result_dtype(input._data, target._data))}'")
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        return _weighted(_MseLoss.apply(input, target, "none"), weight, reduction)
    return _MseLoss.apply(input, target, _reduction(reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced. As torch: an ``AbsBackward0`` node
    (of the difference, fused here) followed by ``mean``/``sum``."""
    target = _loss_args("l1_loss", input, target)
    _warn_size(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    _broadcast_shape(input.shape, target.shape)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        return _weighted(_AbsDiff.apply(input, target), weight, reduction)
    reduction = _reduction(reduction)
    d = _AbsDiff.apply(input, target)
    if reduction == "none":
        return d
    return d.sum() if reduction == "sum" else d.mean()


class _SmoothL1(Function):
    """smooth_l1_loss (huber=False): 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2;
    huber_loss (huber=True): 0.5 d^2 where |d| < delta, else delta (|d| - delta / 2);
    d = x - t.  d/dx = s * clamp(d, -beta, beta) (/ beta for smooth_l1), d/dt = -d/dx."""
    _node_name = "SmoothL1LossBackward0"

    @staticmethod
    def forward(ctx, input, target, reduction, beta, huber):
        d = _diff(input._data, target._data)
        ad = np.abs(d, out=np.empty_like(d))    # an array also for 0-d inputs
        small = ad < beta
        quad = np.square(d, out=d)
        quad *= 0.5 if huber else 0.5 / beta
        lin = ad
        lin -= 0.5 * beta
        if huber:
            lin *= beta
        np.copyto(lin, quad, where=small)
        if ctx is not None:
            ctx.save_for_backward(input, target)
            ctx._aux = (reduction, lin.size, beta, huber)
        return _reduce_np(lin, reduction, lin.dtype)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        reduction, n, beta, huber = ctx._aux
        nx, nt = ctx.needs_input_grad[:2]
        d = (input - target).clamp(-beta, beta)
        s = _scale(g, reduction, n)
        gd = d * (s if huber else s / beta)
        return gd if nx else None, -gd if nt else None, None, None, None


class _Huber(_SmoothL1):
    _node_name = "HuberLossBackward0"


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1: ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``
    (``d = input - target``), reduced. One node (``SmoothL1LossBackward0``); ``beta=0`` is
    ``l1_loss``."""
    target = _as_tensor(target, input)
    _warn_size(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    _broadcast_shape(input.shape, target.shape)
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    reduction = _reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _SmoothL1.apply(input, target, reduction, float(beta), False)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber: ``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``, reduced.
    One node (``HuberLossBackward0``). A ``weight`` of the input's shape multiplies the
    elementwise loss before the reduction ('mean' is then the plain mean, as torch)."""
    target = _as_tensor(target, input)
    _warn_size(input, target)
    _broadcast_shape(input.shape, target.shape)
    if weight is None:
        reduction = _reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is None:
        return _Huber.apply(input, target, reduction, float(delta), True)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = _Huber.apply(input, target, "none", float(delta), True) * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     "'sum'.")


# ------------------------------------------------------------------------------------------
# binary cross entropy
# ------------------------------------------------------------------------------------------
class _BCE(Function):
    """-w (t log x + (1 - t) log(1 - x)), logs clamped at -100 (torch).
    d/dx = s w (x - t) / max(x (1 - x), 1e-12), d/dt = s w (log(1 - x) - log x)."""
    _node_name = "BinaryCrossEntropyBackward0"

    @staticmethod
    def forward(ctx, input, target, weight, reduction):
        x, t = input._data, target._data
        with np.errstate(divide="ignore"):
            lx = np.maximum(np.log(x), -100)
            l1x = np.maximum(np.log1p(-x), -100)
        loss = (t - 1) * l1x - t * lx
        if weight is not None:
            loss = loss * weight
        loss = loss.astype(x.dtype, copy=False)
        if ctx is not None:
            ctx.save_for_backward(input, target)
            ctx._aux = (weight, reduction, x.size)
        return _reduce_np(loss, reduction, x.dtype)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        weight, reduction, n = ctx._aux
        nx, nt = ctx.needs_input_grad[:2]
        s = _scale(g, reduction, float(n))
        if weight is not None:
            s = s * _wrap(weight)
        gx = gt = None
        if nx:
            gx = s * (input - target) / _ClampMin.apply((1.0 - input) * input, 1e-12)
        if nt:
            gt = s * ((1.0 - input).log() - input.log())
        return gx, gt, None, None


class _BCEWithLogits(Function):
    """(1 - t) x + l * softplus(-x) with l = 1 + (pw - 1) t, times w (stable form).
    d/dx = s w (l sigmoid(x) - pw t), d/dt = s w (-x + (pw - 1) softplus(-x))."""
    _node_name = "BinaryCrossEntropyWithLogitsBackward0"

    @staticmethod
    def forward(ctx, input, target, weight, pos_weight, reduction):
        x, t = input._data, target._data
        dt = t.dtype                        # torch: the result has the target's dtype
        sp = np.maximum(-x, 0) + _softplus_neg_abs_np(x)        # softplus(-x)
        if pos_weight is not None:
            lw = (pos_weight - 1) * t + 1
            loss = (1 - t) * x + lw * sp
        else:
            loss = (1 - t) * x + sp
        if weight is not None:
            loss = loss * weight
        loss = loss.astype(dt, copy=False)
        if ctx is not None:
            ctx.save_for_backward(input, target)
            ctx._aux = (weight, pos_weight, reduction, loss.size)
        return _reduce_np(loss, reduction, dt)

    @staticmethod
    def backward(ctx, g):
        input, target = ctx.saved_tensors
        weight, pos_weight, reduction, n = ctx._aux
        nx, nt = ctx.needs_input_grad[:2]
        s = _scale(g, reduction, float(n))
        if weight is not None:
            s = s * _wrap(weight)
        gx = gt = None
        pw = _wrap(pos_weight) if pos_weight is not None else None
        if nx:
            sig = _Sigmoid.apply(input)
            if pw is None:
                gx = s * (sig - target)
            else:
                pt = pw * target
                gx = s * ((pt + 1.0 - target) * sig - pt)
        if nt:
            if pw is None:
                gt = s * -input
            else:
                gt = s * (_LogSigmoid.apply(-input) - _LogSigmoid.apply(input) * pw)
        return gx, gt, None, None, None


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """Binary cross entropy of probabilities in [0, 1]; logs are clamped at -100 as in torch.
    One node, ``BinaryCrossEntropyBackward0``; ``weight`` broadcasts to the input."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    reduction = _reduction(reduction)
    target = _loss_args("binary_cross_entropy", input, target)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input "
                         f"size ({input.size()}) is deprecated. Please ensure they have the "
                         "same size.")
    _not_differentiable(weight, "binary_cross_entropy", "weight")
    x = input._data
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_tname(target.dtype)} but expected {_tname(x.dtype)}")
    if not np.all((x >= 0) & (x <= 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    t = target._data
    if not np.all((t >= 0) & (t <= 1)):         # NaN fails too, as in torch
        raise RuntimeError("all elements of target should be between 0 and 1")
    W = None
    if weight is not None:
        W = weight._data
        try:
            bshape = np.broadcast_shapes(W.shape, x.shape)
        except ValueError:
            bshape = None
        if bshape is not None and bshape != x.shape:
            raise RuntimeError(f"output with shape {_shape_list(x.shape)} doesn't match the "
                               f"broadcast shape {_shape_list(bshape)}")
        for i in range(1, min(W.ndim, x.ndim) + 1):
            if W.shape[-i] != 1 and W.shape[-i] != x.shape[-i]:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {W.shape[-i]} at {-i}! "
                    f"Mismatching argument at index 1 had {_size_str(W.shape)}; but expected "
                    f"shape should be broadcastable to {_shape_list(x.shape)}")
        W = W.astype(x.dtype, copy=False)
    return _BCE.apply(input, target, W, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Sigmoid + binary cross entropy in one stable node (log-sum-exp form), with an optional
    ``pos_weight`` (weight of the positive class, broadcast along the last dim)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
    reduction = _reduction(reduction)
    target = _loss_args("binary_cross_entropy_with_logits", input, target)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size "
                         f"({input.size()})")
    _not_differentiable(weight, "binary_cross_entropy_with_logits", "weight")
    _not_differentiable(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    x, t = input._data, target._data
    if t.dtype.kind != "f":
        raise RuntimeError(f"result type {_tname(x.dtype)} can't be cast to the desired output "
                           f"type {_tname(t.dtype)}")
    dt = _result_dtype(x, t)
    W = PW = None
    if weight is not None:
        W = weight._data
        _broadcast_shape(x.shape, W.shape)
        W = W.astype(dt, copy=False)
    if pos_weight is not None:
        PW = pos_weight._data
        bshape = _broadcast_shape(PW.shape, x.shape)
        if bshape != x.shape:
            raise RuntimeError(f"output with shape {_shape_list(x.shape)} doesn't match the "
                               f"broadcast shape {_shape_list(bshape)}")
        PW = PW.astype(dt, copy=False)
    return _BCEWithLogits.apply(input, target, W, PW, reduction)


# ------------------------------------------------------------------------------------------
# embedding
# ------------------------------------------------------------------------------------------
class _Embedding(Function):
    """weight[idx].  d/dweight = rows of g summed into their indices (padding_idx: none).
    With ``adjoint`` it is the gradient of _EmbeddingDenseBackward: the gather with the
    padding positions zeroed and the frequency scaling applied."""
    _node_name = "EmbeddingBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, weight, idx, padding_idx, scale, adjoint):
        W = weight._data
        out = W[idx]
        if adjoint:
            if padding_idx is not None:
                out[idx == padding_idx] = 0
            if scale:
                out /= _counts(idx, W.shape[0])[idx][..., None]
        if ctx is not None:
            ctx._aux = (idx, W.shape[0], padding_idx, scale)
        return out

    @staticmethod
    def backward(ctx, g):
        idx, V, padding_idx, scale = ctx._aux
        return _EmbeddingDenseBackward.apply(g, idx, V, padding_idx, scale), None, None, None, None


def _counts(idx, V):
    return np.bincount(idx.reshape(-1), minlength=V)


class _EmbeddingDenseBackward(Function):
    """Scatter-add the rows of g into zeros(V, D) at idx; the padding row stays zero."""
    _node_name = "EmbeddingDenseBackwardBackward0"
    _cg_saves = True      # torch saves the indices (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, idx, V, padding_idx, scale):
        G = g._data
        D = G.shape[-1]
        flat = idx.reshape(-1)
        G2 = G.reshape(-1, D)
        if scale:
            G2 = G2 / _counts(idx, V)[flat][:, None]
        out = np.zeros((V, D), dtype=G.dtype)
        np.add.at(out, flat, G2)
        if padding_idx is not None:
            out[padding_idx] = 0
        if ctx is not None:
            ctx._aux = (idx, padding_idx, scale)
        return out

    @staticmethod
    def backward(ctx, gg):
        idx, padding_idx, scale = ctx._aux
        return _Embedding.apply(gg, idx, padding_idx, scale, True), None, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Look up rows of ``weight`` (num_embeddings, dim) at the int64/int32 indices ``input``.
    Repeated indices accumulate their gradients; the ``padding_idx`` row gets no gradient.
    ``max_norm`` renormalises the looked-up rows of ``weight`` in place (no gradient), as in
    torch."""
    _checks.check_tensor(weight, "embedding", "weight", 1)
    _checks.check_tensor(input, "embedding", "indices", 2)
    idx = input._data
    W = weight._data
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {_C._type_name(idx)} instead (while checking arguments "
            "for embedding)")
    if W.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    V = W.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < V, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -V, "Padding_idx must be within num_embeddings"
            padding_idx = V + padding_idx
    if idx.size and (idx.min() < 0 or idx.max() >= V):
        raise IndexError("index out of range in self")
    if sparse:
        raise NotImplementedError("embedding(sparse=True) is not supported by cgrad: its "
                                  "gradient is dense")
    if max_norm is not None:
        uniq = np.unique(idx)
        rows = W[uniq]
        norms = np.linalg.norm(rows, ord=norm_type, axis=1)
        over = norms > max_norm
        if over.any():
            W[uniq[over]] = rows[over] * (max_norm / (norms[over] + 1e-7))[:, None].astype(W.dtype)
            weight._bump_version()
    return _Embedding.apply(weight, idx.astype(np.int64, copy=False), padding_idx,
                            bool(scale_grad_by_freq), False)


# ------------------------------------------------------------------------------------------
# layer_norm
# ------------------------------------------------------------------------------------------
class _LayerNorm(Function):
    """(x - mean) / sqrt(var + eps) * w + b over the trailing normalized dims.
    d/dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with gh = g * w;
    d/dw = sum(g * xhat), d/db = sum(g) over the leading dims."""
    _node_name = "NativeLayerNormBackward0"

    @staticmethod
    def forward(ctx, input, weight, bias, k, eps):
        x = input._data
        axes = tuple(range(x.ndim - k, x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = np.mean(np.square(xc), axis=axes, keepdims=True)
        rstd = 1.0 / np.sqrt(var + eps)
        rstd = rstd.astype(x.dtype, copy=False)
        xc *= rstd
        if weight is not None:
            xc *= weight._data
        if bias is not None:
            xc += bias._data
        if ctx is not None:
            ctx.save_for_backward(input, weight, bias)
            ctx._aux = (axes, eps, mu, rstd)
        return xc

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        axes, eps, mu, rstd = ctx._aux
        nx, nw, nb = ctx.needs_input_grad[:3]
        lead = tuple(range(x.dim() - len(axes)))
        if _grad_enabled():       # create_graph: mean and rstd as functions of x
            mu_t = x.mean(axes, keepdim=True)
            xc = x - mu_t
            rstd_t = ((xc * xc).mean(axes, keepdim=True) + eps) ** -0.5
        else:
            xc = x - _wrap(mu)
            rstd_t = _wrap(rstd)
        xhat = xc * rstd_t
        gx = gw = gb = None
        if nx:
            gh = g * w if w is not None else g
            gx = rstd_t * (gh - gh.mean(axes, keepdim=True)
                           - xhat * (gh * xhat).mean(axes, keepdim=True))
        if nw:
            gw = (g * xhat).sum(lead) if lead else g * xhat
        if nb:
            gb = g.sum(lead) if lead else g
        return gx, gw, gb, None, None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims (biased variance).
    One node, ``NativeLayerNormBackward0``."""
    _checks.check_tensor(input, "layer_norm")
    if isinstance(normalized_shape, numbers.Integral) or not isinstance(
            normalized_shape, (tuple, list)):
        raise TypeError("layer_norm(): argument 'normalized_shape' (position 2) must be tuple "
                        f"of ints, not {type(normalized_shape).__name__}")
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    shape = tuple(input.shape)
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != ns:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {_shape_list(p.shape)} and "
                               f"normalized_shape = {_shape_list(ns)}")
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if len(shape) < k or shape[len(shape) - k:] != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size"
                           f"{_shape_list(shape)}")
    _check_float(input._data, "LayerNormKernelImpl")
    for p in (weight, bias):
        if p is not None and p.dtype != input.dtype:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               f"{_tname(input.dtype)}")
    return _LayerNorm.apply(input, weight, bias, k, float(eps))


# ------------------------------------------------------------------------------------------
# one_hot, dropout
# ------------------------------------------------------------------------------------------
def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a trailing class dim; ``num_classes=-1`` infers max + 1.
    Never requires grad."""
    t = tensor._data
    if t.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if t.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(t.max()) + 1
    if t.size:
        if t.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if t.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes < 0:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(t.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, t[..., None], 1, axis=-1)
    return _wrap(out)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (``input * mask``: ``MulBackward0``, as torch). The mask is drawn from cgrad's generator
    (``cgrad.manual_seed``). ``training=False`` or ``p=0`` return ``input`` itself."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = input._data
    if not training or p == 0 or x.size == 0:
        return input
    if x.dtype.kind != "f":
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{_tname(x.dtype)}")
    if p == 1:
        noise = np.zeros((), dtype=x.dtype)
    else:
        from cgrad._creation import _rng
        r = _rng().random(x.shape, dtype=x.dtype if x.dtype in (np.float32, np.float64)
                          else np.float64)
        noise = (r >= p).astype(x.dtype)
        noise *= x.dtype.type(1.0 / (1.0 - p))
    noise = _wrap(noise)
    if inplace:
        return _inplace_apply(input, lambda s: s * noise)
    return input * noise


# ------------------------------------------------------------------------------------------
# pad
# ------------------------------------------------------------------------------------------
class _ConstantPad(Function):
    """Pad (or crop, for negative amounts) with a constant.  d/da = g cropped back (a
    constant-pad of g by the negated amounts)."""
    _node_name = "ConstantPadNdBackward0"

    @staticmethod
    def forward(ctx, a, pads, value):
        x = a._data
        nd = x.ndim
        new_shape = list(x.shape)
        src, dst = [slice(None)] * nd, [slice(None)] * nd
        for i in range(len(pads) // 2):
            d = nd - 1 - i
            lo, hi = pads[2 * i], pads[2 * i + 1]
            n = x.shape[d]
            size = n + lo + hi
            if size < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
            new_shape[d] = size
            s0, s1 = max(-lo, 0), n - max(-hi, 0)
            src[d] = slice(s0, max(s1, s0))
            dst[d] = slice(max(lo, 0), max(lo, 0) + max(s1 - s0, 0))
        out = np.full(new_shape, value, dtype=x.dtype)
        out[tuple(dst)] = x[tuple(src)]
        if ctx is not None:
            ctx._aux = pads
        return out

    @staticmethod
    def backward(ctx, g):
        return _ConstantPad.apply(g, tuple(-p for p in ctx._aux), 0), None, None


def _pad_indices(n, lo, hi, mode):
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i > n - 1, 2 * (n - 1) - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    else:
        i = i % n
    return i


class _IndexPad(Function):
    """reflect/replicate/circular padding as a gather along each padded dim.
    d/da = the matching scatter-add of g (_IndexPadBackward)."""
    _node_name = "ReflectionPad1DBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, a, spec):
        out = a._data
        for d, idx in spec:
            out = np.take(out, idx, axis=d)
        if ctx is not None:
            ctx._aux = (spec, a._data.shape)
        return out

    @staticmethod
    def backward(ctx, g):
        spec, shape = ctx._aux
        return _IndexPadBackward.apply(g, spec, shape), None


class _IndexPadBackward(Function):
    """Scatter-add g back through the gathers of _IndexPad; its gradient is that gather."""
    _node_name = "ReflectionPad1DBackwardBackward0"
    _cg_saves = True      # torch saves self (Note [Freed saved values])

    @staticmethod
    def forward(ctx, g, spec, shape):
        out = g._data
        cur = list(out.shape)
        for d, idx in reversed(spec):
            cur[d] = shape[d]
            acc = np.zeros(cur, dtype=out.dtype)
            np.add.at(acc, (slice(None),) * d + (idx,), out)
            out = acc
        if ctx is not None:
            ctx._aux = spec
        return out

    @staticmethod
    def backward(ctx, gg):
        return _IndexPad.apply(gg, ctx._aux), None, None


_PAD_CLASSES = {}


def _pad_class(mode, k):
    key = (mode, k)
    if key not in _PAD_CLASSES:
        if mode == "circular":
            name = "CopySlices"
        else:
            name = f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{k}DBackward0"
        fwd = type(f"_IndexPad_{mode}{k}", (_IndexPad,), {"_node_name": name})
        # found by name: its nodes can be untracked (Note [Untracked graphs], _C_untracked.pxi)
        globals()[fwd.__name__] = fwd
        _PAD_CLASSES[key] = fwd
    return _PAD_CLASSES[key]


_PAD_HELP = ("Supported combinations for non-constant padding:\n"
             "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
             "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
             "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left_last, right_last, left_2nd_last,
    ...)``. Modes: 'constant' (any rank; negative amounts crop), 'reflect', 'replicate',
    'circular' (2-D..5-D inputs as in torch)."""
    _checks.check_tensor(input, "pad")
    if value is not None and not isinstance(value, (numbers.Number, np.number)):
        raise TypeError(f"pad(): argument 'value' (position 4) must be float, not "
                        f"{_checks.type_name(value)}")
    pads = tuple(pad)
    for i, p in enumerate(pads):
        if not isinstance(p, (numbers.Integral,)) or isinstance(p, bool):
            raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but found "
                            f"element of type {type(p).__name__} at pos {i}")
    pads = tuple(int(p) for p in pads)
    nd = input.dim()
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pads)} and input of "
                           f"dimension {nd}")
    if mode == "constant":
        return _ConstantPad.apply(input, pads, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pads) // 2
    if k not in (1, 2, 3) or nd not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pads)} is not supported for {nd}D input "
                                  f"tensor.\n{_PAD_HELP}")
    shape = tuple(input.shape)
    spec = []
    for i in range(k):
        d = nd - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        n = shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension "
                               f"{d} of input {_shape_list(shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + lo + hi <= 0:
            raise RuntimeError(f"input (W: {n}) is too small. Calculated output W: {n + lo + hi}")
        spec.append((d, _pad_indices(n, lo, hi, mode)))
    return _pad_class(mode, k).apply(input, tuple(spec))


# ------------------------------------------------------------------------------------------
# activations: delegate to the op library (cgrad.<name> or Tensor.<name>)
# ------------------------------------------------------------------------------------------
def _op(name):
    import cgrad
    return getattr(cgrad, name)


def _inplace_apply(input, compute):
    """torch's inplace=True: input takes compute(input)'s values; when autograd records it,
    the op is recorded and input's history rebased (cgrad/ops/inplace.py), as torch."""
    from cgrad.ops import inplace as _inplace
    if _inplace.needs_record(input):
        return _inplace.record(input, compute, saves_self=True)
    _inplace.check_overlap(input)
    out = compute(input)
    input._data[...] = out._data
    input._bump_version()
    return input


def _act(name, input, inplace, *args):
    fn = _op(name)
    if inplace:
        return _inplace_apply(input, lambda s: fn(s, *args))
    return fn(input, *args)


def relu(input, inplace=False):
    """max(x, 0) (delegates to cgrad.relu)."""
    return _act("relu", input, inplace)


def relu_(input):
    return _act("relu", input, True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    _checks.check_number(negative_slope, "leaky_relu", "negative_slope", 2)
    return _act("leaky_relu", input, inplace, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    _checks.check_number(alpha, "elu", "alpha", 2)
    return _act("elu", input, inplace, alpha)


def selu(input, inplace=False):
    return _act("selu", input, inplace)


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _op("gelu")(input, approximate)


def silu(input, inplace=False):
    return _act("silu", input, inplace)


def sigmoid(input):
    return _op("sigmoid")(input)


def tanh(input):
    return _op("tanh")(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _op("softplus")(input, beta, threshold)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm (implemented next to nn.BatchNorm1d)."""
    from cgrad.nn.modules.normalization import batch_norm as _bn
    return _bn(input, running_mean, running_var, weight, bias, training, momentum, eps)


def bilinear(input1, input2, weight, bias=None):
    """torch.nn.functional.bilinear (implemented next to nn.Bilinear)."""
    from cgrad.nn.modules.linear import bilinear as _bl
    return _bl(input1, input2, weight, bias)


__all__ += ["batch_norm", "bilinear"]

# Note [Tensor functions] in cgrad/__init__.py: the functions of this module that torch binds
# to a C function refusing a non-Tensor first argument.
_TENSOR_FIRST = ("dropout", "elu", "gelu", "leaky_relu", "linear", "one_hot", "relu", "relu_",
                 "selu", "silu", "softplus")
from cgrad import _api  # noqa: E402  # Note [Public callables] (cgrad/_api.py)

_api.install_functions(globals(), __all__, _TENSOR_FIRST, __name__,
                       c_in_torch=_api.C_IN_TORCH_NN)
