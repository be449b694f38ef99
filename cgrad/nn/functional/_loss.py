"""Losses of cgrad.nn.functional: ``nll_loss``, ``cross_entropy`` (log_softmax and nll in
one node), ``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy`` and ``binary_cross_entropy_with_logits``, with torch's reduction
helpers (``_Reduction``) and the stable sigmoid nodes their backwards use."""
from __future__ import annotations

import numpy as np

from cgrad import _checks
from cgrad._C import TensorBase, _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.nn.functional._utils import _check_float, _grad_enabled, _shape_list, _tname
from cgrad.ops.comparison import mask_fill
# the op library's node (cgrad/ops/reduce_ext.py): LogSoftmaxBackward0
from cgrad.ops.reductions import LogSoftmax as _LogSoftmax
from cgrad.ops._sums import _fast_sum


def _size_str(shape):
    from cgrad.tensor import Size
    return repr(Size(shape))


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
# log_softmax in NumPy: the forward of cross_entropy
# ------------------------------------------------------------------------------------------
def _log_softmax_np(x, axis):
    if x.ndim == 0:
        return np.zeros_like(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    s = np.subtract(x, m, dtype=x.dtype)
    e = np.exp(s)
    lse = np.log(_fast_sum(e, axis, True))
    s -= lse
    return s


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
    from cgrad.ops.promotion import result_dtype
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
