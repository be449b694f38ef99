"""More losses of cgrad.nn.functional: ``kl_div``, ``cosine_embedding_loss``,
``margin_ranking_loss``, ``triplet_margin_loss``, ``triplet_margin_with_distance_loss``,
``multi_margin_loss``, ``multilabel_margin_loss``, ``multilabel_soft_margin_loss``,
``soft_margin_loss``, ``hinge_embedding_loss``, ``poisson_nll_loss``, ``gaussian_nll_loss``
and ``ctc_loss``.

Every loss but ``ctc_loss`` is composed of cgrad ops (so its gradients and double backward are
the ops' own); ``ctc_loss`` is one fused node (``CtcLossBackward0``): the alpha recursion in
log space, vectorised over the batch and the label positions (a loop over time steps only),
and a backward by the alpha-beta formula. As torch's kernel, that backward returns
``exp(log_probs) - gamma`` (the gradient with respect to the logits under a log_softmax,
which is what flows back through log_softmax unchanged) and is not itself differentiable
(double backward raises torch's "derivative for _ctc_loss_backward is not implemented")."""
from __future__ import annotations

import math

import numpy as np

from cgrad import _checks
from cgrad._C import TensorBase, _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.nn.functional._loss import _legacy_get_string, _not_differentiable

_KL_MEAN_WARNING = (
    "reduction: 'mean' divides the total loss by both the batch size and the support size."
    "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
    "'mean' will be changed to behave the same as 'batchmean' in the next major release.")


def _red(reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        return _legacy_get_string(size_average, reduce)
    return reduction


def _apply_reduction(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _const(arr, like):
    return _wrap(np.asarray(arr, dtype=like._data.dtype))


def _args(fname, *ts):
    for i, t in enumerate(ts):
        _checks.check_tensor(t, fname, "input" if i == 0 else f"arg{i}", i + 1)


# ------------------------------------------------------------------------------------------
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence ``target * (log target - input)`` (``input`` is
    log-probabilities; ``log_target=True`` takes the target as log-probabilities too).
    ``reduction='batchmean'`` divides the sum by the batch size; 'mean' warns as torch."""
    _args("kl_div", input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_get_string(size_average, reduce)
        base = reduction
    else:
        if reduction == "mean":
            _warn(_KL_MEAN_WARNING)
        base = "sum" if reduction == "batchmean" else reduction
    if base not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    out = _apply_reduction(loss, base)
    if reduction == "batchmean" and input.dim() != 0:
        out = out / input.shape[0]
    return out


def _pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """torch.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    d = x1 - x2 + eps
    return d.norm(p, dim=-1, keepdim=keepdim)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    _args("cosine_embedding_loss", input1, input2, target)
    reduction = _red(reduction, size_average, reduce)
    if target.dim() not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.dim() == 1:
        if input1.dim() != 2 or input2.dim() != 2:
            raise RuntimeError(
                f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                f"{list(input1.shape)} and {list(input2.shape)}.")
    elif input1.dim() != 1 or input2.dim() != 1:
        raise RuntimeError(
            f"0D target tensor expects 1D input tensors, but found inputs with sizes "
            f"{list(input1.shape)} and {list(input2.shape)}.")
    d = input1.dim() - 1
    eps = 1e-12
    prod = (input1 * input2).sum(d)
    m1 = (input1 * input1).sum(d) + eps
    m2 = (input2 * input2).sum(d) + eps
    cos = prod / (m1 * m2).sqrt()
    t = target._data
    pos = (1 - cos) * _const(t == 1, cos)
    neg = (cos - margin).clamp_min(0) * _const(t == -1, cos)
    return _apply_reduction(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    _args("margin_ranking_loss", input1, input2, target)
    reduction = _red(reduction, size_average, reduce)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got "
            f"sizes: input1: {_size(input1)}, input2: {_size(input2)}, "
            f"target: {_size(target)} ")
    loss = (-target * (input1 - input2) + margin).clamp_min(0)
    return _apply_reduction(loss, reduction)


def _size(t):
    from cgrad.tensor import Size
    return repr(Size(t.shape))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d the pairwise p-norm distance (``swap``:
    d(a, n) is the smaller of d(a, n) and d(p, n))."""
    _args("triplet_margin_loss", anchor, positive, negative)
    reduction = _red(reduction, size_average, reduce)
    a, pd, nd = anchor.dim(), positive.dim(), negative.dim()
    if not (a == pd == nd):
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {a}D, positive {pd}D, and negative {nd}D inputs")
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(_pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_pos - d_neg).clamp_min(0)
    return _apply_reduction(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance function (default: pairwise_distance)."""
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, pd, nd = anchor.dim(), positive.dim(), negative.dim()
    if not (a == pd == nd):
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {a}D, positive {pd}D, and negative {nd}D inputs")
    dist = distance_function if distance_function is not None else _pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    loss = (margin + d_pos - d_neg).clamp_min(0)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _apply_reduction(loss, reduction)


def _class_targets(input, target, fname):
    if target._data.dtype.kind not in "iu":
        raise RuntimeError(f"{fname}: expected target of an integer type, got "
                           f"{target._data.dtype}")
    return target._data.astype(np.int64)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over i != y of w[y] max(0, margin - x[y] + x[i])**p / C (p is 1 or 2)."""
    _args("multi_margin_loss", input, target)
    reduction = _red(reduction, size_average, reduce)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    if input.dim() > 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = _class_targets(input, target, "multi_margin_loss").reshape(-1)
    N, C = x.shape
    if y.shape[0] != N:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of "
            f"input samples (batch size). Expected target size [{N}], but got "
            f"{list(target.shape)}. Input has shape {list(input.shape)}.")
    if y.size and (y.min() < 0 or y.max() >= C):
        raise RuntimeError("target out of range")
    xy = x.gather(1, _wrap(y[:, None]))
    z = (margin - xy + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[_wrap(y)].reshape(-1, 1)
    other = np.ones((N, C), dtype=x._data.dtype)
    other[np.arange(N), y] = 0
    loss = (z * _wrap(other)).sum(1) / C
    if input.dim() < 2:
        loss = loss.reshape(tuple(target.shape))
    return _apply_reduction(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C;
    the target lists class indices, ended by the first -1."""
    _args("multilabel_margin_loss", input, target)
    reduction = _red(reduction, size_average, reduce)
    if input.dim() > 2 or tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = _class_targets(input, target, "multilabel_margin_loss").reshape(x.shape)
    N, C = x.shape
    valid = np.cumprod(y >= 0, axis=1).astype(bool)        # before the first -1
    if (y[valid] >= C).any():
        raise RuntimeError("argument #2 'target' is out of range")
    yc = np.where(valid, y, 0)
    is_t = np.zeros((N, C), dtype=bool)
    rows = np.broadcast_to(np.arange(N)[:, None], y.shape)
    is_t[rows[valid], yc[valid]] = True
    xj = x.gather(1, _wrap(yc))                            # (N, S)
    h = (1 - (xj.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0)     # (N, S, C)
    mask = valid[:, :, None] & ~is_t[:, None, :]
    loss = (h * _const(mask, x)).sum((1, 2)) / C
    if input.dim() < 2:
        loss = loss.reshape(())
    return _apply_reduction(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(t log sigmoid(x) + (1 - t) log sigmoid(-x)), averaged over the classes."""
    _args("multilabel_soft_margin_loss", input, target)
    reduction = _red(reduction, size_average, reduce)
    from cgrad.nn.functional._activation import softplus
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    loss = target * softplus(-input) + (1 - target) * softplus(input)
    if weight is not None:
        loss = loss * weight
    cd = input.dim() - 1
    loss = loss.sum(cd) / input.shape[cd]
    return _apply_reduction(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    _args("soft_margin_loss", input, target)
    _not_differentiable(target, "soft_margin_loss", "target")
    reduction = _red(reduction, size_average, reduce)
    from cgrad.nn.functional._activation import softplus
    return _apply_reduction(softplus(-(input * target)), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """x where target is 1, max(0, margin - x) where it is -1."""
    _args("hinge_embedding_loss", input, target)
    reduction = _red(reduction, size_average, reduce)
    t = target._data
    m = (margin - input).clamp_min(0) * _const(t != 1, input)
    s = input * _const(t != -1, input)
    return _apply_reduction(m + s, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(x) - t x (log_input) or x - t log(x + eps); ``full`` adds Stirling's term
    t log t - t + log(2 pi t) / 2 where t > 1."""
    _args("poisson_nll_loss", input, target)
    reduction = _red(reduction, size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target
        big = _const(target._data > 1, target)
        tsafe = t * big + (1 - big)          # 1 where t <= 1: log(1) = 0, masked anyway
        stirling = (t * tsafe.log() - t + 0.5 * (2 * math.pi * tsafe).log()) * big
        loss = loss + stirling
    return _apply_reduction(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)**2 / var) (+ log(2 pi) / 2 with ``full``); var is
    clamped at eps without changing its gradient."""
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _const(np.full(tuple(input.shape), var), input)
    elif (var._data < 0).any():
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape)[:-1] == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.dim() == var.dim() and sum(
                b for a, b in zip(input.shape, var.shape) if a != b) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    vd = var._data
    var = var + _wrap(np.maximum(vd, eps).astype(vd.dtype) - vd)   # clamp, identity grad
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _apply_reduction(loss, reduction)


# ------------------------------------------------------------------------------------------
# CTC
# ------------------------------------------------------------------------------------------
def _lengths(x, name):
    if isinstance(x, TensorBase):
        a = np.asarray(x._data)
    else:
        a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"{name} must be integral")
    return a.astype(np.int64).reshape(-1)


def _lse(*xs):
    m = xs[0]
    for x in xs[1:]:
        m = np.maximum(m, x)
    fm = np.where(np.isfinite(m), m, 0)
    s = sum(np.exp(x - fm) for x in xs)
    with np.errstate(divide="ignore"):
        return np.log(s) + fm


class _CtcLoss(Function):
    _node_name = "CtcLossBackward0"

    @staticmethod
    def forward(ctx, log_probs, lab, Tl, Sl, blank, zero_infinity):
        lp = log_probs._data                       # (T, N, C)
        T, N, _ = lp.shape
        L = lab.shape[1]                           # 2 Smax + 1
        ninf = -np.inf
        n = np.arange(N)
        Lb = 2 * Sl + 1
        pos = np.arange(L)
        inlab = pos[None, :] < Lb[:, None]
        # may s take the skip from s - 2: a non-blank label differing from the one before
        skip = np.zeros((N, L), dtype=bool)
        skip[:, 2:] = (lab[:, 2:] != blank) & (lab[:, 2:] != lab[:, :-2])
        emit = np.take_along_axis(lp, np.broadcast_to(lab[None], (T, N, L)), axis=2)
        emit = np.where(inlab[None], emit, ninf)   # (T, N, L)
        alpha = np.full((T, N, L), ninf, dtype=lp.dtype)
        alpha[0, :, 0] = emit[0, :, 0]
        if L > 1:
            alpha[0, :, 1] = np.where(Sl > 0, emit[0, :, 1], ninf)
        neg = np.full((N, 1), ninf, dtype=lp.dtype)
        neg2 = np.full((N, 2), ninf, dtype=lp.dtype)
        for t in range(1, T):
            a = alpha[t - 1]
            a1 = np.concatenate([neg, a[:, :-1]], axis=1)
            a2 = np.where(skip, np.concatenate([neg2, a[:, :-2]], axis=1), ninf)
            alpha[t] = _lse(a, a1, a2) + emit[t]
        tl = np.maximum(Tl - 1, 0)
        last = alpha[tl, n, Lb - 1]
        prev = np.where(Sl > 0, alpha[tl, n, np.maximum(Lb - 2, 0)], ninf)
        nll = -_lse(last, prev)
        if zero_infinity:
            nll = np.where(np.isinf(nll), 0, nll)
        if ctx is not None:
            ctx.save_for_backward(log_probs)
            ctx._aux = (lp, lab, Tl, Sl, Lb, skip, emit, alpha, nll, blank, zero_infinity)
        return nll.astype(lp.dtype)

    @staticmethod
    def backward(ctx, g):
        lp, lab, Tl, Sl, Lb, skip, emit, alpha, _, _, zero_infinity = ctx._aux
        T, N, C = lp.shape
        L = lab.shape[1]
        ninf = -np.inf
        n = np.arange(N)
        beta = np.full((T, N, L), ninf, dtype=lp.dtype)
        skip_next = np.zeros((N, L), dtype=bool)       # s may go to s + 2
        skip_next[:, :-2] = skip[:, 2:]
        neg = np.full((N, 1), ninf, dtype=lp.dtype)
        neg2 = np.full((N, 2), ninf, dtype=lp.dtype)
        tl = Tl - 1
        for t in range(T - 1, -1, -1):
            if t < T - 1:
                b = beta[t + 1]
                b1 = np.concatenate([b[:, 1:], neg], axis=1)
                b2 = np.where(skip_next, np.concatenate([b[:, 2:], neg2], axis=1), ninf)
                beta[t] = _lse(b, b1, b2) + emit[t]
            start = np.nonzero(tl == t)[0]
            if start.size:
                beta[t, start] = ninf
                beta[t, start, Lb[start] - 1] = emit[t, start, Lb[start] - 1]
                s2 = start[Sl[start] > 0]
                beta[t, s2, Lb[s2] - 2] = emit[t, s2, Lb[s2] - 2]
        ab = alpha + beta                                  # (T, N, L)
        m = ab.max(axis=2, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.exp(ab - m)
        onehot = np.zeros((N, L, C), dtype=lp.dtype)
        onehot[n[:, None], np.arange(L)[None, :], lab] = 1
        onehot[~(np.arange(L)[None, :] < Lb[:, None])] = 0
        s = np.einsum("tnl,nlc->tnc", e, onehot)
        with np.errstate(divide="ignore"):
            lcab = np.log(s) + m
        raw_nll = -_lse(alpha[np.maximum(tl, 0), n, Lb - 1],
                        np.where(Sl > 0, alpha[np.maximum(tl, 0), n,
                                               np.maximum(Lb - 2, 0)], ninf))
        with np.errstate(invalid="ignore", over="ignore"):
            grad = np.exp(lp) - np.exp(lcab + raw_nll[None, :, None] - lp)
        grad[np.arange(T)[:, None] >= Tl[None, :]] = 0
        if zero_infinity:
            grad[:, np.isinf(raw_nll)] = 0
        gl = g.reshape(1, N, 1) if g.dim() else g
        (log_probs,) = ctx.saved_tensors
        return (_CtcLossGrad.apply(gl, log_probs, grad.astype(lp.dtype)), None, None, None, None,
                None)


class _CtcLossGrad(Function):
    """The gradient of ctc_loss: the alpha-beta array times the incoming gradient. As torch,
    it has no derivative of its own."""
    _node_name = "CtcLossBackwardBackward0"

    @staticmethod
    def forward(ctx, g, log_probs, grad):
        return grad * g._data

    @staticmethod
    def backward(ctx, gg):
        raise RuntimeError("derivative for _ctc_loss_backward is not implemented")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist Temporal Classification loss of ``log_probs`` (T, N, C) (or (T, C)
    unbatched) against ``targets`` padded (N, S) or concatenated 1-D; 'mean' divides each
    loss by its target length (at least 1) before the batch mean, as torch."""
    _checks.check_tensor(log_probs, "ctc_loss", "log_probs", 1)
    _checks.check_tensor(targets, "ctc_loss", "targets", 2)
    unbatched = log_probs.dim() == 2
    lpt = log_probs.unsqueeze(1) if unbatched else log_probs
    if lpt.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got "
                           f"{log_probs.dim()}-D")
    T, N, C = lpt.shape
    Tl = _lengths(input_lengths, "input_lengths")
    Sl = _lengths(target_lengths, "target_lengths")
    tg = np.asarray(targets._data).astype(np.int64)
    if unbatched:
        tg = tg.reshape(1, -1)
    if Tl.shape[0] != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if Sl.shape[0] != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    for name, a in (("input_lengths", Tl), ("target_lengths", Sl)):
        if (a < 0).any():
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value "
                               f"{a[np.argmax(a < 0)]} (while checking arguments for "
                               "ctc_loss_allocate_outputs)")
    if (Tl > T).any():
        b = int(np.argmax(Tl > T))
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value "
                           f"{Tl[b]} (while checking arguments for ctc_loss_allocate_outputs)")
    Smax = int(Sl.max()) if N else 0
    if tg.ndim == 1:
        if tg.shape[0] != Sl.sum():
            raise RuntimeError("Expected tensor to have size "
                               f"{int(Sl.sum())} at dimension 0, but got size {tg.shape[0]} "
                               "for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_allocate_outputs)")
        off = np.concatenate([[0], np.cumsum(Sl)[:-1]])
        j = np.arange(Smax)
        idx = np.minimum(off[:, None] + j[None, :], max(tg.shape[0] - 1, 0))
        padded = tg[idx] if tg.size else np.zeros((N, Smax), np.int64)
        padded = np.where(j[None, :] < Sl[:, None], padded, blank)
    else:
        if tg.shape[1] < Smax:
            raise RuntimeError(f"Expected tensor to have size at least {Smax} at dimension 1, "
                               f"but got size {tg.shape[1]} for argument #2 'targets' (while "
                               "checking arguments for ctc_loss_allocate_outputs)")
        padded = np.where(np.arange(Smax)[None, :] < Sl[:, None], tg[:, :Smax], blank)
    lab = np.full((N, 2 * Smax + 1), blank, dtype=np.int64)
    lab[:, 1::2] = padded
    loss = _CtcLoss.apply(lpt, lab, Tl, Sl, int(blank), bool(zero_infinity))
    if unbatched:
        loss = loss.reshape(())
    if reduction == "mean":
        d = _const(np.maximum(Sl, 1), loss)
        if unbatched:
            d = d.reshape(())
        return (loss / d).mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")
