"""cgrad.nn.functional against torch.nn.functional, driven by one table (CASES).

For every row (a call of cgrad.nn.functional with fixed non-differentiable arguments such
as class targets, indices and options, and one or more float inputs that require grad):
* forward values, shape, dtype and requires_grad equal torch's, in float32 and float64;
* vector-Jacobian products equal torch's (float32 and float64);
* gradcheck and gradgradcheck pass (finite differences, float64);
* the first gradient built with create_graph=True equals the plain one (fast first-order
  paths and differentiable formulas agree);
* the node name is torch's (column `node`, itself checked against torch);
* no graph is recorded under cgrad.no_grad(), nor when no input requires grad.

Callables take the tensor module first (`cgrad` or `torch`) and call `m.nn.functional`.
Constants are built with `const(m, array, like)` (the dtype of `like`) or `idx(m, array)`
(int64). Adding a case means adding one row. Behaviours outside the table (dropout, errors,
warnings, one_hot, embedding's max_norm, in-place flags, legacy reduction arguments) are
tested separately below, against torch where torch is importable.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import cgrad
import cgrad.nn.functional as CF

sys.path.insert(0, os.path.dirname(__file__))
from gradcheck_util import gradcheck, gradgradcheck  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def np_of(t):
    return t.detach().numpy()


def node_name(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


def _dtname(x):
    return str(x.dtype).replace("torch.", "")


def const(m, arr, like):
    """A constant tensor of module m with the dtype of tensor `like`."""
    return m.tensor(np.asarray(arr, dtype=_dtname(like)))


def idx(m, arr):
    return m.tensor(np.asarray(arr, dtype=np.int64))


# ----------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    fn: Callable                      # fn(m, *tensors) -> tensor
    shapes: tuple                     # one shape per differentiable input
    node: str | None                  # torch's node name of the output
    domain: Any = "real"              # one per input or one for all (see DOMAINS)
    gc: bool = True                   # run gradcheck (False: torch's gradient is not the
                                      # derivative of the forward, e.g. padding_idx)
    ggc: bool = True                  # run gradgradcheck

    def __str__(self):
        return self.name


DOMAINS = {
    "real": (-1.5, 1.5),
    "wide": (-3.0, 3.0),
    "prob": (0.05, 0.95),
    "positive": (0.2, 1.0),
}

S = (3, 4)
T3 = np.array([0, 3, 1])                 # targets for (3, 4)
T3_IGN = np.array([0, -100, 2])          # with the default ignore_index
T3_IGN1 = np.array([1, 3, 1])            # with ignore_index=1
T3_ALL_IGN = np.array([-100, -100, -100])
TK = np.array([[0, 3, 2], [1, 1, 0]])    # targets for (2, 4, 3)
TK2 = np.array([[[0, 3], [2, 1]], [[1, -100], [0, 2]]])   # for (2, 4, 2, 2), one ignored
W4 = np.array([0.2, 1.0, 0.5, 2.0])
EMB_IDX = np.array([[0, 2, 4], [2, 2, 1]])


def fn_(name):
    return lambda m: getattr(m.nn.functional, name)


def act(name, node, shapes=(S,), domain="wide", **kw):
    return Case(name + "".join(f"_{k}{v}" for k, v in kw.items()),
                lambda m, x: getattr(m.nn.functional, name)(x, **kw), shapes, node, domain)


def ce(name, shapes, target, node, **kw):
    return Case("cross_entropy_" + name,
                lambda m, x: m.nn.functional.cross_entropy(x, idx(m, target), **kw),
                shapes, node)


def ce_w(name, shapes, target, node, **kw):
    return Case("cross_entropy_" + name,
                lambda m, x: m.nn.functional.cross_entropy(x, idx(m, target),
                                                           weight=const(m, W4, x), **kw),
                shapes, node)


def nll(name, shapes, target, node, weight=False, **kw):
    def f(m, x):
        w = const(m, W4, x) if weight else None
        return m.nn.functional.nll_loss(x, idx(m, target), weight=w, **kw)
    return Case("nll_loss_" + name, f, shapes, node)


def ce_prob(name, shapes, node, weight=False, **kw):
    def f(m, x, p):
        w = const(m, W4, x) if weight else None
        return m.nn.functional.cross_entropy(x, p, weight=w, **kw)
    return Case("cross_entropy_prob_" + name, f, shapes, node, ("real", "prob"))


CASES = [
    # -- linear ----------------------------------------------------------------------------
    Case("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), ((3, 4), (5, 4), (5,)),
         "AddmmBackward0"),
    Case("linear_no_bias", lambda m, x, w: m.nn.functional.linear(x, w), ((3, 4), (5, 4)),
         "MmBackward0"),
    Case("linear_3d", lambda m, x, w, b: m.nn.functional.linear(x, w, b),
         ((2, 3, 4), (5, 4), (5,)), "ViewBackward0"),
    Case("linear_3d_no_bias", lambda m, x, w: m.nn.functional.linear(x, w),
         ((2, 3, 4), (5, 4)), "UnsafeViewBackward0"),
    Case("linear_1d", lambda m, x, w, b: m.nn.functional.linear(x, w, b),
         ((4,), (5, 4), (5,)), "ViewBackward0"),
    Case("linear_1d_no_bias", lambda m, x, w: m.nn.functional.linear(x, w), ((4,), (5, 4)),
         "SqueezeBackward4"),
    Case("linear_bias_0d", lambda m, x, w, b: m.nn.functional.linear(x, w, b),
         ((3, 4), (5, 4), ()), "AddmmBackward0"),
    Case("linear_weight_1d", lambda m, x, w: m.nn.functional.linear(x, w), ((3, 4), (4,)),
         "MvBackward0"),
    # -- activations (delegated to the op library) ---------------------------------------
    act("relu", "ReluBackward0"),
    act("leaky_relu", "LeakyReluBackward0"),
    act("leaky_relu", "LeakyReluBackward0", negative_slope=0.2),
    act("elu", "EluBackward0"),
    act("elu", "EluBackward0", alpha=0.5),
    act("selu", "EluBackward0"),
    act("gelu", "GeluBackward0"),
    act("gelu", "GeluBackward0", approximate="tanh"),
    act("silu", "SiluBackward0"),
    act("softplus", "SoftplusBackward0"),
    act("softplus", "SoftplusBackward0", beta=2.0, threshold=1.0),
    act("sigmoid", "SigmoidBackward0"),
    act("tanh", "TanhBackward0"),
    # -- softmax / log_softmax -----------------------------------------------------------
    Case("softmax", lambda m, x: m.nn.functional.softmax(x, dim=1), (S,), "SoftmaxBackward0"),
    Case("softmax_dim0", lambda m, x: m.nn.functional.softmax(x, 0), (S,), "SoftmaxBackward0"),
    Case("softmax_3d_dim1", lambda m, x: m.nn.functional.softmax(x, dim=1), ((2, 3, 2),),
         "SoftmaxBackward0"),
    Case("softmax_1d", lambda m, x: m.nn.functional.softmax(x, dim=-1), ((5,),),
         "SoftmaxBackward0"),
    Case("softmax_0d", lambda m, x: m.nn.functional.softmax(x, dim=0), ((),),
         "SoftmaxBackward0"),
    Case("softmax_dtype64", lambda m, x: m.nn.functional.softmax(x, -1, dtype=m.float64), (S,),
         "SoftmaxBackward0"),
    Case("log_softmax", lambda m, x: m.nn.functional.log_softmax(x, dim=1), (S,),
         "LogSoftmaxBackward0", "wide"),
    Case("log_softmax_dim0", lambda m, x: m.nn.functional.log_softmax(x, 0), (S,),
         "LogSoftmaxBackward0"),
    Case("log_softmax_3d_dim_neg1", lambda m, x: m.nn.functional.log_softmax(x, dim=-1),
         ((2, 3, 2),), "LogSoftmaxBackward0"),
    Case("log_softmax_0d", lambda m, x: m.nn.functional.log_softmax(x, dim=0), ((),),
         "LogSoftmaxBackward0"),
    Case("log_softmax_dtype64", lambda m, x: m.nn.functional.log_softmax(x, 1, dtype=m.float64),
         (S,), "LogSoftmaxBackward0"),
    # -- cross_entropy with class indices ------------------------------------------------
    ce("mean", (S,), T3, "NllLossBackward0"),
    ce("sum", (S,), T3, "NllLossBackward0", reduction="sum"),
    ce("none", (S,), T3, "NllLossBackward0", reduction="none"),
    ce_w("weight", (S,), T3, "NllLossBackward0"),
    ce_w("weight_sum", (S,), T3, "NllLossBackward0", reduction="sum"),
    ce_w("weight_none", (S,), T3, "NllLossBackward0", reduction="none"),
    ce("ignore", (S,), T3_IGN, "NllLossBackward0"),
    ce("ignore_none", (S,), T3_IGN, "NllLossBackward0", reduction="none"),
    ce("ignore_index1", (S,), T3_IGN1, "NllLossBackward0", ignore_index=1),
    ce_w("weight_ignore", (S,), T3_IGN, "NllLossBackward0"),
    ce("smooth", (S,), T3, "AddBackward0", label_smoothing=0.1),
    ce("smooth_sum", (S,), T3, "AddBackward0", label_smoothing=0.3, reduction="sum"),
    ce("smooth_none", (S,), T3, "AddBackward0", label_smoothing=0.2, reduction="none"),
    ce("smooth_ignore", (S,), T3_IGN, "AddBackward0", label_smoothing=0.2),
    ce("smooth_ignore_none", (S,), T3_IGN, "AddBackward0", label_smoothing=0.2,
       reduction="none"),
    ce_w("smooth_weight", (S,), T3, "AddBackward0", label_smoothing=0.25),
    ce_w("smooth_weight_ignore", (S,), T3_IGN, "AddBackward0", label_smoothing=0.25),
    ce_w("smooth_weight_ignore_sum", (S,), T3_IGN, "AddBackward0", label_smoothing=0.25,
         reduction="sum"),
    ce_w("smooth_weight_none", (S,), T3, "AddBackward0", label_smoothing=0.25,
         reduction="none"),
    ce("smooth_one", (S,), T3, "AddBackward0", label_smoothing=1.0),
    ce("kdim", ((2, 4, 3),), TK, "NllLoss2DBackward0"),
    ce("kdim_none", ((2, 4, 3),), TK, "ViewBackward0", reduction="none"),
    ce("kdim2_none", ((2, 4, 2, 2),), TK2, "NllLoss2DBackward0", reduction="none"),
    ce("kdim3_none", ((2, 4, 2, 1, 2),), TK2[:, :, None], "ViewBackward0", reduction="none"),
    ce_w("kdim_weight_smooth", ((2, 4, 3),), TK, "AddBackward0", label_smoothing=0.1),
    ce("kdim2_ignore", ((2, 4, 2, 2),), TK2, "NllLoss2DBackward0"),
    ce_w("kdim2_weight_sum", ((2, 4, 2, 2),), TK2, "NllLoss2DBackward0", reduction="sum"),
    ce("1d", ((4,),), np.array(2), "NllLossBackward0"),
    ce_w("1d_weight_smooth", ((4,),), np.array(1), "AddBackward0", label_smoothing=0.3),
    # -- cross_entropy with class probabilities ------------------------------------------
    ce_prob("mean", (S, S), "DivBackward1"),
    ce_prob("sum", (S, S), "NegBackward0", reduction="sum"),
    ce_prob("none", (S, S), "NegBackward0", reduction="none"),
    ce_prob("weight", (S, S), "DivBackward1", weight=True),
    ce_prob("weight_none", (S, S), "NegBackward0", weight=True, reduction="none"),
    ce_prob("smooth", (S, S), "DivBackward1", label_smoothing=0.2),
    ce_prob("smooth_weight_sum", (S, S), "NegBackward0", weight=True, label_smoothing=0.2,
            reduction="sum"),
    ce_prob("kdim", ((2, 4, 3), (2, 4, 3)), "DivBackward1"),
    ce_prob("kdim_none_weight", ((2, 4, 3), (2, 4, 3)), "NegBackward0", weight=True,
            reduction="none"),
    ce_prob("1d", ((4,), (4,)), "DivBackward1"),
    # -- nll_loss ------------------------------------------------------------------------
    nll("mean", (S,), T3, "NllLossBackward0"),
    nll("sum", (S,), T3, "NllLossBackward0", reduction="sum"),
    nll("none", (S,), T3, "NllLossBackward0", reduction="none"),
    nll("weight", (S,), T3, "NllLossBackward0", weight=True),
    nll("weight_none", (S,), T3, "NllLossBackward0", weight=True, reduction="none"),
    nll("ignore", (S,), T3_IGN, "NllLossBackward0"),
    nll("weight_ignore_sum", (S,), T3_IGN, "NllLossBackward0", weight=True, reduction="sum"),
    nll("ignore_index1", (S,), T3_IGN1, "NllLossBackward0", ignore_index=1),
    nll("kdim", ((2, 4, 3),), TK, "NllLoss2DBackward0"),
    nll("kdim_weight_none", ((2, 4, 3),), TK, "ViewBackward0", weight=True,
        reduction="none"),
    nll("kdim2_ignore_weight", ((2, 4, 2, 2),), TK2, "NllLoss2DBackward0", weight=True),
    nll("1d", ((4,),), np.array(3), "NllLossBackward0"),
    # -- regression losses ---------------------------------------------------------------
    Case("mse_loss", lambda m, x, t: m.nn.functional.mse_loss(x, t), (S, S),
         "MseLossBackward0"),
    Case("mse_loss_sum", lambda m, x, t: m.nn.functional.mse_loss(x, t, reduction="sum"),
         (S, S), "MseLossBackward0"),
    Case("mse_loss_none", lambda m, x, t: m.nn.functional.mse_loss(x, t, reduction="none"),
         (S, S), "MseLossBackward0"),
    Case("mse_loss_0d", lambda m, x, t: m.nn.functional.mse_loss(x, t), ((), ()),
         "MseLossBackward0"),
    Case("mse_loss_weight", lambda m, x, t: m.nn.functional.mse_loss(
        x, t, weight=const(m, np.arange(1.0, 13.0).reshape(3, 4), x)), (S, S), "DivBackward0"),
    Case("mse_loss_bcast", lambda m, x, t: m.nn.functional.mse_loss(x, t.expand(3, 4)),
         (S, (4,)), "MseLossBackward0"),
    Case("l1_loss_weight_sum", lambda m, x, t: m.nn.functional.l1_loss(
        x, t, weight=const(m, np.arange(1.0, 13.0).reshape(3, 4), x), reduction="sum"),
         (S, S), "SumBackward0"),
    Case("l1_loss", lambda m, x, t: m.nn.functional.l1_loss(x, t), (S, S), "MeanBackward0"),
    Case("l1_loss_sum", lambda m, x, t: m.nn.functional.l1_loss(x, t, reduction="sum"),
         (S, S), "SumBackward0"),
    Case("l1_loss_none", lambda m, x, t: m.nn.functional.l1_loss(x, t, reduction="none"),
         (S, S), "AbsBackward0"),
    Case("smooth_l1_loss", lambda m, x, t: m.nn.functional.smooth_l1_loss(x, t), (S, S),
         "SmoothL1LossBackward0", "wide"),
    Case("smooth_l1_loss_beta", lambda m, x, t: m.nn.functional.smooth_l1_loss(
        x, t, reduction="none", beta=0.5), (S, S), "SmoothL1LossBackward0", "wide"),
    Case("smooth_l1_loss_sum", lambda m, x, t: m.nn.functional.smooth_l1_loss(
        x, t, reduction="sum", beta=2.0), (S, S), "SmoothL1LossBackward0", "wide"),
    Case("smooth_l1_loss_0d", lambda m, x, t: m.nn.functional.smooth_l1_loss(
        x, t, reduction="none", beta=0.5), ((), ()), "SmoothL1LossBackward0", "wide"),
    Case("huber_loss", lambda m, x, t: m.nn.functional.huber_loss(x, t), (S, S),
         "HuberLossBackward0", "wide"),
    Case("huber_loss_delta", lambda m, x, t: m.nn.functional.huber_loss(
        x, t, reduction="none", delta=0.5), (S, S), "HuberLossBackward0", "wide"),
    Case("huber_loss_sum", lambda m, x, t: m.nn.functional.huber_loss(
        x, t, reduction="sum", delta=2.0), (S, S), "HuberLossBackward0", "wide"),
    Case("huber_loss_weight", lambda m, x, t: m.nn.functional.huber_loss(
        x, t, weight=const(m, np.arange(1.0, 13.0).reshape(3, 4), x), delta=0.7), (S, S),
         "MeanBackward0", "wide"),
    Case("smooth_l1_loss_beta0", lambda m, x, t: m.nn.functional.smooth_l1_loss(
        x, t, beta=0.0), (S, S), "MeanBackward0", "wide"),
    # -- binary cross entropy ------------------------------------------------------------
    Case("bce", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t), (S, S),
         "BinaryCrossEntropyBackward0", "prob"),
    Case("bce_sum", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, reduction="sum"), (S, S), "BinaryCrossEntropyBackward0", "prob"),
    Case("bce_none", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, reduction="none"), (S, S), "BinaryCrossEntropyBackward0", "prob"),
    Case("bce_weight", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, weight=const(m, W4, x)), (S, S), "BinaryCrossEntropyBackward0", "prob"),
    Case("bce_weight_full_none", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, weight=const(m, np.arange(12.0).reshape(3, 4) / 6, x), reduction="none"),
         (S, S), "BinaryCrossEntropyBackward0", "prob"),
    Case("bce_logits", lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(x, t),
         (S, S), "BinaryCrossEntropyWithLogitsBackward0", ("wide", "prob")),
    Case("bce_logits_sum", lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(
        x, t, reduction="sum"), (S, S), "BinaryCrossEntropyWithLogitsBackward0",
         ("wide", "prob")),
    Case("bce_logits_none_weight", lambda m, x, t:
         m.nn.functional.binary_cross_entropy_with_logits(
             x, t, weight=const(m, W4, x), reduction="none"), (S, S),
         "BinaryCrossEntropyWithLogitsBackward0", ("wide", "prob")),
    Case("bce_logits_pos_weight", lambda m, x, t:
         m.nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=const(m, W4, x)),
         (S, S), "BinaryCrossEntropyWithLogitsBackward0", ("wide", "prob")),
    Case("bce_logits_both_weights", lambda m, x, t:
         m.nn.functional.binary_cross_entropy_with_logits(
             x, t, weight=const(m, [[1.0], [0.5], [2.0]], x), pos_weight=const(m, W4, x),
             reduction="sum"), (S, S), "BinaryCrossEntropyWithLogitsBackward0",
         ("wide", "prob")),
    # -- embedding -----------------------------------------------------------------------
    Case("embedding", lambda m, w: m.nn.functional.embedding(idx(m, EMB_IDX), w), ((5, 3),),
         "EmbeddingBackward0"),
    Case("embedding_1d", lambda m, w: m.nn.functional.embedding(idx(m, [3, 0, 3]), w),
         ((5, 3),), "EmbeddingBackward0"),
    Case("embedding_padding_idx", lambda m, w: m.nn.functional.embedding(
        idx(m, EMB_IDX), w, padding_idx=2), ((5, 3),), "EmbeddingBackward0", gc=False),
    Case("embedding_padding_idx_neg", lambda m, w: m.nn.functional.embedding(
        idx(m, EMB_IDX), w, padding_idx=-1), ((5, 3),), "EmbeddingBackward0", gc=False),
    Case("embedding_scale_grad_by_freq", lambda m, w: m.nn.functional.embedding(
        idx(m, EMB_IDX), w, scale_grad_by_freq=True), ((5, 3),), "EmbeddingBackward0", gc=False),
    Case("embedding_scale_padding", lambda m, w: m.nn.functional.embedding(
        idx(m, EMB_IDX), w, padding_idx=1, scale_grad_by_freq=True), ((5, 3),),
         "EmbeddingBackward0", gc=False),
    # -- layer_norm ----------------------------------------------------------------------
    Case("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (4,)), (S,),
         "NativeLayerNormBackward0"),
    Case("layer_norm_affine", lambda m, x, w, b: m.nn.functional.layer_norm(x, [4], w, b),
         (S, (4,), (4,)), "NativeLayerNormBackward0"),
    Case("layer_norm_weight_only", lambda m, x, w: m.nn.functional.layer_norm(
        x, (4,), weight=w, eps=1e-3), (S, (4,)), "NativeLayerNormBackward0"),
    Case("layer_norm_bias_only", lambda m, x, b: m.nn.functional.layer_norm(
        x, (4,), bias=b), (S, (4,)), "NativeLayerNormBackward0"),
    Case("layer_norm_2dims", lambda m, x, w, b: m.nn.functional.layer_norm(x, (3, 2), w, b),
         ((2, 3, 2), (3, 2), (3, 2)), "NativeLayerNormBackward0"),
    Case("layer_norm_all", lambda m, x: m.nn.functional.layer_norm(x, x.shape), ((2, 3),),
         "NativeLayerNormBackward0"),
    # -- pad -------------------------------------------------------------------------------
    Case("pad_constant", lambda m, x: m.nn.functional.pad(x, (1, 2)), (S,),
         "ConstantPadNdBackward0"),
    Case("pad_constant_value", lambda m, x: m.nn.functional.pad(x, (0, 1, 2, 0), value=1.5),
         (S,), "ConstantPadNdBackward0"),
    Case("pad_constant_negative", lambda m, x: m.nn.functional.pad(x, (-1, 2, 1, -1)), (S,),
         "ConstantPadNdBackward0"),
    Case("pad_constant_3dims", lambda m, x: m.nn.functional.pad(x, (1, 0, 0, 1, 1, 1)),
         ((2, 2, 3),), "ConstantPadNdBackward0"),
    Case("pad_reflect_1d", lambda m, x: m.nn.functional.pad(x, (2, 1), mode="reflect"),
         ((2, 4),), "ReflectionPad1DBackward0"),
    Case("pad_reflect_2d", lambda m, x: m.nn.functional.pad(x, (1, 2, 2, 1), mode="reflect"),
         ((1, 3, 4),), "ReflectionPad2DBackward0"),
    Case("pad_reflect_3d", lambda m, x: m.nn.functional.pad(
        x, (1, 1, 0, 1, 1, 0), mode="reflect"), ((1, 2, 2, 3),), "ReflectionPad3DBackward0"),
    Case("pad_replicate_1d", lambda m, x: m.nn.functional.pad(x, (2, 3), mode="replicate"),
         ((1, 2, 3),), "ReplicationPad1DBackward0"),
    Case("pad_replicate_2d", lambda m, x: m.nn.functional.pad(
        x, (1, 0, 2, 1), mode="replicate"), ((1, 1, 3, 2),), "ReplicationPad2DBackward0"),
    Case("pad_replicate_3d", lambda m, x: m.nn.functional.pad(
        x, (1, 0, 0, 1, 1, 0), mode="replicate"), ((1, 2, 2, 2),),
         "ReplicationPad3DBackward0"),
    Case("pad_circular_1d", lambda m, x: m.nn.functional.pad(x, (2, 1), mode="circular"),
         ((1, 2, 3),), "CopySlices"),
    Case("pad_circular_2d", lambda m, x: m.nn.functional.pad(x, (1, 1, 0, 2), mode="circular"),
         ((1, 1, 2, 3),), "CopySlices"),
    # -- dropout as identity -------------------------------------------------------------
    Case("dropout_eval", lambda m, x: m.nn.functional.dropout(x, 0.5, training=False) * 1.0,
         (S,), "MulBackward0"),
    Case("dropout_p0", lambda m, x: m.nn.functional.dropout(x, 0.0) * 1.0, (S,),
         "MulBackward0"),
]

IDS = [c.name for c in CASES]
assert len(set(IDS)) == len(IDS), "duplicate case names"


def _seed(case):
    return sum(map(ord, case.name)) % 2 ** 32


def make_arrays(case, dtype=np.float64):
    rng = np.random.default_rng(_seed(case))
    doms = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(case.shapes)
    out = []
    for shape, dom in zip(case.shapes, doms):
        lo, hi = DOMAINS[dom]
        out.append(np.asarray(rng.uniform(lo, hi, shape), dtype=dtype))
    return out


def cg_inputs(arrays, requires_grad=True):
    return [cgrad.tensor(a, requires_grad=requires_grad) for a in arrays]


def th_inputs(torch, arrays, requires_grad=True):
    return [torch.tensor(a, requires_grad=requires_grad) for a in arrays]


TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


# ----------------------------------------------------------------------------------------
# per-row tests
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch(case, dtype, torch):
    arrays = make_arrays(case, dtype)
    xc, xt = cg_inputs(arrays), th_inputs(torch, arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yc = case.fn(cgrad, *xc)
    yt = case.fn(torch, *xt)
    assert isinstance(yc, cgrad.Tensor)
    assert tuple(yc.shape) == tuple(yt.shape)
    assert _dtname(yc) == _dtname(yt)
    np.testing.assert_allclose(np_of(yc), yt.detach().numpy(), **TOL[dtype])
    assert yc.requires_grad == yt.requires_grad
    v = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(_dtname(yt))
    gc = cgrad.autograd.grad(yc, xc, cgrad.tensor(v), allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(v), allow_unused=True)
    for i, (a, b) in enumerate(zip(gc, gt)):
        if b is None:
            assert a is None or not np_of(a).any(), f"input {i}"
            continue
        assert a is not None, f"input {i}"
        assert tuple(a.shape) == tuple(b.shape)
        assert _dtname(a) == _dtname(b)
        np.testing.assert_allclose(np_of(a), b.numpy(), **TOL[dtype], err_msg=f"input {i}")


@pytest.mark.parametrize("case", [c for c in CASES if c.gc], ids=[c.name for c in CASES if c.gc])
def test_gradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradcheck(lambda *a: case.fn(cgrad, *a), xs)


@pytest.mark.parametrize("case", [c for c in CASES if c.ggc], ids=[c.name for c in CASES
                                                                    if c.ggc])
def test_gradgradcheck(case):
    xs = cg_inputs(make_arrays(case))
    assert gradgradcheck(lambda *a: case.fn(cgrad, *a), xs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_create_graph_gradient_equals_plain_gradient(case):
    xs = cg_inputs(make_arrays(case))
    y = case.fn(cgrad, *xs)
    v = cgrad.tensor(np.random.default_rng(3).standard_normal(tuple(y.shape)))
    plain = cgrad.autograd.grad(case.fn(cgrad, *xs), xs, v, allow_unused=True)
    graph = cgrad.autograd.grad(case.fn(cgrad, *xs), xs, v, create_graph=True,
                                allow_unused=True)
    for a, b in zip(plain, graph):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(np_of(b), np_of(a), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_backward_fills_grad_with_input_dtype(case, dtype):
    xs = cg_inputs(make_arrays(case, dtype))
    y = case.fn(cgrad, *xs)
    y.backward(cgrad.ones_like(y))
    for x in xs:
        assert x.grad is not None and x.grad.dtype == x.dtype
        assert tuple(x.grad.shape) == tuple(x.shape)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_node_name(case):
    y = case.fn(cgrad, *cg_inputs(make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_node_name_table_agrees_with_torch(case, torch):
    y = case.fn(torch, *th_inputs(torch, make_arrays(case)))
    assert node_name(y) == case.node


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_no_grad_records_no_graph(case):
    xs = cg_inputs(make_arrays(case))
    with cgrad.no_grad():
        y = case.fn(cgrad, *xs)
    assert y.grad_fn is None and not y.requires_grad and y.is_leaf
    y = case.fn(cgrad, *cg_inputs(make_arrays(case), requires_grad=False))
    assert y.grad_fn is None and not y.requires_grad


# ----------------------------------------------------------------------------------------
# losses: gradients w.r.t. the target, mixed dtypes, special values
# ----------------------------------------------------------------------------------------
def test_one_node_per_loss():
    """Fused losses record a single node over the leaf (no hidden log_softmax/mean nodes)."""
    x = cgrad.randn(4, 5, requires_grad=True)
    t = cgrad.tensor([0, 4, 2, 1])
    for y in (CF.cross_entropy(x, t), CF.nll_loss(x, t), CF.mse_loss(x, x.detach()),
              CF.layer_norm(x, (5,)), CF.softmax(x, 1), CF.log_softmax(x, 1)):
        (nxt,) = [n for n, _ in y.grad_fn.next_functions if n is not None]
        assert type(nxt).__name__ == "AccumulateGrad"


def test_cross_entropy_all_ignored_gives_nan_as_torch(torch):
    res = []
    for m in (cgrad, torch):
        x = m.tensor(np.ones((3, 4)), requires_grad=True)
        y = m.nn.functional.cross_entropy(x, idx(m, T3_ALL_IGN))
        y.backward()
        res.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])


def test_cross_entropy_uint8_target_and_extreme_logits(torch):
    x = np.array([[1000.0, -1000.0, 0.0], [-50.0, 60.0, 3.0]], dtype=np.float32)
    t = np.array([1, 0], dtype=np.uint8)
    res = []
    for m in (cgrad, torch):
        xx = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = m.nn.functional.cross_entropy(xx, m.tensor(t), reduction="none")
            y.sum().backward()
        res.append((y.detach().numpy(), xx.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6, atol=1e-7)


def test_bce_log_clamped_at_minus_100(torch):
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5], dtype=np.float64)
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.3])
    res = []
    for m in (cgrad, torch):
        xx = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = m.nn.functional.binary_cross_entropy(xx, m.tensor(t), reduction="none")
            y.sum().backward()
        res.append((y.detach().numpy(), xx.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1])


def test_bce_with_logits_extremes(torch):
    x = np.array([-200.0, -30.0, 0.0, 30.0, 200.0])
    t = np.array([1.0, 0.0, 0.5, 1.0, 0.0])
    res = []
    for m in (cgrad, torch):
        xx = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = m.nn.functional.binary_cross_entropy_with_logits(
                xx, m.tensor(t), pos_weight=m.tensor([2.0]), reduction="none")
            y.sum().backward()
        res.append((y.detach().numpy(), xx.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


PROMOTION = [
    ("mse_f32_f64", lambda m, a, b: m.nn.functional.mse_loss(a, b)),
    ("l1_f32_f64", lambda m, a, b: m.nn.functional.l1_loss(a, b, reduction="none")),
    ("smooth_l1_f32_f64", lambda m, a, b: m.nn.functional.smooth_l1_loss(a, b)),
    ("bce_logits_f32_f64", lambda m, a, b:
     m.nn.functional.binary_cross_entropy_with_logits(a, b.sigmoid())),
    ("bce_logits_f64_f32_target_dtype", lambda m, a, b:
     m.nn.functional.binary_cross_entropy_with_logits(b, a.sigmoid(),
                                                      pos_weight=b.detach()[0] * 0 + 2)),
]


@pytest.mark.parametrize("name,fn", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_mixed_dtype_losses_match_torch(name, fn, torch):
    a = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    b = np.linspace(0.7, -0.3, 6).reshape(2, 3)
    res = []
    for m in (cgrad, torch):
        aa, bb = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        y = fn(m, aa, bb)
        y.sum().backward()
        res.append((_dtname(y), np_of(y), _dtname(aa.grad), np_of(aa.grad), np_of(bb.grad)))
    assert res[0][0] == res[1][0] and res[0][2] == res[1][2]
    for a_, b_ in zip(res[0][1::2], res[1][1::2]):
        np.testing.assert_allclose(a_, b_, rtol=1e-5)


def test_mse_loss_broadcast_target_warns_as_torch(torch):
    x = np.arange(6.0).reshape(2, 3)
    t = np.array([1.0, 2.0, 0.0])
    res = []
    for m in (cgrad, torch):
        xx, tt = m.tensor(x, requires_grad=True), m.tensor(t, requires_grad=True)
        with pytest.warns(UserWarning, match="Using a target size"):
            y = m.nn.functional.mse_loss(xx, tt)
        y.backward()
        res.append((np_of(y), xx.grad.numpy(), tt.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b)


def test_legacy_size_average_and_reduce(torch):
    x = np.random.default_rng(0).standard_normal((3, 4))
    for kw in (dict(size_average=False), dict(reduce=False), dict(size_average=True),
               dict(size_average=False, reduce=True)):
        res = []
        for m in (cgrad, torch):
            with pytest.warns(UserWarning, match="size_average and reduce args will be"):
                y = m.nn.functional.cross_entropy(m.tensor(x), idx(m, T3), **kw)
            res.append(np_of(y))
        np.testing.assert_allclose(res[0], res[1])


@pytest.mark.parametrize("which", ["weight", "pos_weight"])
def test_loss_weight_requiring_grad_raises_as_torch(which, torch):
    errs = []
    for m in (cgrad, torch):
        x = m.tensor(np.zeros((3, 4)), requires_grad=True)
        w = m.tensor(W4, requires_grad=True)
        with pytest.raises(RuntimeError) as ei:
            if which == "weight":
                m.nn.functional.cross_entropy(x, idx(m, T3), weight=w)
            else:
                m.nn.functional.binary_cross_entropy_with_logits(
                    x, m.tensor(np.zeros((3, 4))), pos_weight=w)
        errs.append(str(ei.value))
    if which == "weight":
        assert errs[0] == errs[1]


# ----------------------------------------------------------------------------------------
# dropout
# ----------------------------------------------------------------------------------------
def test_dropout_train_statistics_and_gradient():
    cgrad.manual_seed(0)
    x = cgrad.ones(200, 100, requires_grad=True)
    y = CF.dropout(x, 0.3)
    assert node_name(y) == "MulBackward0"
    a = np_of(y)
    kept = a != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(a[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), a)     # gradient = mask / (1 - p)
    with cgrad.no_grad():
        z = CF.dropout(x, 0.3)
    assert z.grad_fn is None and not z.requires_grad


@pytest.mark.parametrize("dtype", [cgrad.float32, cgrad.float64])
def test_dropout_seeded_by_manual_seed(dtype):
    x = cgrad.randn(50, 20, dtype=dtype)
    cgrad.manual_seed(123)
    a = np_of(CF.dropout(x, 0.5))
    b = np_of(CF.dropout(x, 0.5))
    cgrad.manual_seed(123)
    c = np_of(CF.dropout(x, 0.5))
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    assert CF.dropout(x, 0.5).dtype == dtype


@pytest.mark.parametrize("dtype", [cgrad.float16, cgrad.float32, cgrad.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.6, 0.9])
def test_dropout_keep_fraction_scale_and_independence(dtype, p):
    """Masks come from 32 random bits per element against an integer threshold: the kept
    fraction is 1 - p within 6 binomial sigmas, the kept values are exactly
    dtype(1 / (1 - p)), and neighbours (two halves of one 64-bit draw) are independent."""
    cgrad.manual_seed(7)
    n = 400_001                                   # odd: half a 64-bit draw left over
    out = CF.dropout(cgrad.ones(n, dtype=dtype), p)
    assert out.dtype == dtype
    y = np_of(out)
    kept = y != 0
    q = 1 - p
    assert abs(kept.mean() - q) < 6 * (q * p / n) ** 0.5
    assert np.all(y[kept] == y.dtype.type(1.0 / (1.0 - p)))
    pairs = kept[:-1:2] & kept[1::2]
    m = pairs.shape[0]
    assert abs(pairs.mean() - q * q) < 6 * (q * q * (1 - q * q) / m) ** 0.5


def test_dropout_extreme_p_and_layouts():
    cgrad.manual_seed(3)
    x = cgrad.ones(1000, 7)
    assert np_of(CF.dropout(x, 1e-12)).min() > 0        # all kept (almost surely)
    y = np_of(CF.dropout(x, 1 - 1e-6))
    assert (y != 0).sum() <= 5 and np.all(y[y != 0] == np.float32(1 / 1e-6))
    base = cgrad.randn(40, 30)
    nc = base.t()                                       # non-contiguous input
    cgrad.manual_seed(9)
    a = np_of(CF.dropout(nc, 0.5))
    cgrad.manual_seed(9)
    b = np_of(CF.dropout(nc.contiguous(), 0.5))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[a != 0], np_of(nc)[a != 0] * np.float32(2.0))
    assert a.shape == (30, 40)
    e = CF.dropout(cgrad.ones(0, 3), 0.5)
    assert tuple(e.shape) == (0, 3)
    s = CF.dropout(cgrad.tensor(3.0), 0.5)             # 0-d
    assert np_of(s) in (0.0, 6.0)


def test_dropout_eval_p0_p1():
    x = cgrad.randn(4, 5, requires_grad=True)
    assert CF.dropout(x, 0.5, training=False) is x
    assert CF.dropout(x, 0.0) is x
    y = CF.dropout(x, 1.0)
    assert not np_of(y).any() and node_name(y) == "MulBackward0"
    y.sum().backward()
    assert not x.grad.numpy().any()


def test_dropout_inplace():
    cgrad.manual_seed(5)
    x = cgrad.ones(30, 30)
    v0 = x._version
    y = CF.dropout(x, 0.5, inplace=True)
    assert y is x and x._version > v0
    assert set(np.unique(np_of(x))) <= {0.0, 2.0}
    leaf = cgrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        CF.dropout(leaf, 0.5, inplace=True)


def test_dropout_errors_as_torch(torch):
    for m in (cgrad, torch):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, "
                                             "but got 1.5"):
            m.nn.functional.dropout(m.ones(3), 1.5)
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            m.nn.functional.dropout(m.ones(3), -0.1, training=False)


def test_dropout_double_backward():
    cgrad.manual_seed(1)
    x = cgrad.randn(5, 4, dtype=cgrad.float64, requires_grad=True)
    y = (CF.dropout(x, 0.4) ** 2).sum()
    (g,) = cgrad.autograd.grad(y, [x], create_graph=True)
    (gg,) = cgrad.autograd.grad(g.sum(), [x])
    assert gg.shape == x.shape


# ----------------------------------------------------------------------------------------
# one_hot, embedding extras, in-place activations, softmax implicit dim
# ----------------------------------------------------------------------------------------
def test_one_hot_matches_torch(torch):
    for t, n in (([0, 2, 1], -1), ([[1, 0], [3, 3]], 5), (3, -1), ([], 4)):
        a = CF.one_hot(cgrad.tensor(t, dtype=cgrad.int64), n)
        b = torch.nn.functional.one_hot(torch.tensor(t, dtype=torch.int64), n)
        assert a.dtype == np.int64 and not a.requires_grad
        np.testing.assert_array_equal(np_of(a), b.numpy())


def test_embedding_padding_row_gets_no_gradient():
    w = cgrad.randn(5, 3, requires_grad=True)
    y = CF.embedding(cgrad.tensor([[0, 2, 4], [2, 2, 1]]), w, padding_idx=2)
    y.sum().backward()
    g = w.grad.numpy()
    assert not g[2].any()
    np.testing.assert_array_equal(g[[0, 1, 4]], 1.0)
    assert not g[3].any()


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_weight_in_place_as_torch(norm_type, torch):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((6, 4)) * 2
    ix = np.array([[0, 2, 2], [5, 1, 0]])
    res = []
    for m in (cgrad, torch):
        w = m.tensor(w0.copy(), requires_grad=True)
        y = m.nn.functional.embedding(idx(m, ix), w, max_norm=1.5, norm_type=norm_type)
        y.sum().backward()
        res.append((np_of(y), np_of(w), w.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_embedding_int32_indices_and_higher_rank(torch):
    w0 = np.arange(12.0).reshape(4, 3)
    ix = np.array([[[0, 1]], [[3, 3]]], dtype=np.int32)
    res = []
    for m in (cgrad, torch):
        w = m.tensor(w0, requires_grad=True)
        y = m.nn.functional.embedding(m.tensor(ix), w)
        y.backward(m.tensor(np.ones((2, 1, 2, 3))))
        res.append((np_of(y), w.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name,kw", [("relu", {}), ("leaky_relu", {"negative_slope": 0.2}),
                                     ("elu", {}), ("selu", {}), ("silu", {})])
def test_inplace_activation_flag(name, kw, torch):
    a = np.linspace(-2, 2, 7)
    x = cgrad.tensor(a)
    y = getattr(CF, name)(x, inplace=True, **kw)
    assert y is x
    xt = torch.tensor(a)
    getattr(torch.nn.functional, name)(xt, inplace=True, **kw)
    np.testing.assert_allclose(np_of(x), xt.numpy(), rtol=1e-12)
    leaf = cgrad.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(CF, name)(leaf, inplace=True, **kw)


def test_relu_underscore():
    x = cgrad.tensor([-1.0, 2.0])
    assert CF.relu_(x) is x
    np.testing.assert_array_equal(np_of(x), [0.0, 2.0])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)])
def test_softmax_implicit_dim_warns_as_torch(name, shape, torch):
    a = np.random.default_rng(0).standard_normal(shape)
    res = []
    for m in (cgrad, torch):
        with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name}"):
            res.append(np_of(getattr(m.nn.functional, name)(m.tensor(a))))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


def test_softmax_extreme_values_no_overflow(torch):
    a = np.array([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0]], dtype=np.float32)
    for name in ("softmax", "log_softmax"):
        res = []
        for m in (cgrad, torch):
            x = m.tensor(a, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                y = getattr(m.nn.functional, name)(x, 1)
            res.append(np_of(y))
        np.testing.assert_allclose(res[0], res[1], rtol=1e-6)


def test_functions_exist_with_torch_signatures(torch):
    import inspect
    names = ["linear", "relu", "leaky_relu", "elu", "selu", "gelu", "silu", "softplus",
             "sigmoid", "tanh", "softmax", "log_softmax", "dropout", "cross_entropy",
             "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
             "binary_cross_entropy", "binary_cross_entropy_with_logits", "embedding",
             "layer_norm", "one_hot", "pad"]
    for n in names:
        assert n in CF.__all__
        fc, ft = getattr(CF, n), getattr(torch.nn.functional, n)
        try:
            pt = inspect.signature(ft).parameters
        except (TypeError, ValueError):     # builtins without a signature
            continue
        pc = inspect.signature(fc).parameters
        for p in pt.values():
            if p.name.startswith("_"):
                continue
            assert p.name in pc, f"{n}: missing argument {p.name}"
            if p.default is not inspect.Parameter.empty and not isinstance(
                    p.default, (type(None), bool, int, float, str)):
                continue
            assert pc[p.name].default == p.default, f"{n}({p.name}=...)"


# ----------------------------------------------------------------------------------------
# errors: the same exception type as torch and the same message
# ----------------------------------------------------------------------------------------
def _x(m, shape=(3, 4), dtype="float32", rg=True):
    return m.tensor(np.linspace(0.1, 0.9, int(np.prod(shape))).reshape(shape).astype(dtype),
                    requires_grad=rg)


ERRORS = [
    ("ce_target_oob", lambda m: m.nn.functional.cross_entropy(_x(m), idx(m, [0, 4, 1]))),
    ("ce_target_negative", lambda m: m.nn.functional.cross_entropy(_x(m), idx(m, [0, -1, 1]))),
    ("nll_target_oob", lambda m: m.nn.functional.nll_loss(_x(m), idx(m, [0, 7, 1]))),
    ("ce_batch_mismatch", lambda m: m.nn.functional.cross_entropy(_x(m), idx(m, [0, 1]))),
    ("ce_float_target_wrong_shape", lambda m: m.nn.functional.cross_entropy(
        _x(m), m.zeros(3, 5))),
    ("ce_int32_target", lambda m: m.nn.functional.cross_entropy(
        _x(m), m.tensor(np.array([0, 1, 2], dtype=np.int32)))),
    ("ce_2d_target", lambda m: m.nn.functional.cross_entropy(_x(m), idx(m, [[0], [1], [2]]))),
    ("ce_kdim_target_shape", lambda m: m.nn.functional.cross_entropy(
        _x(m, (2, 4, 3)), idx(m, [[0, 1], [1, 2]]))),
    ("ce_weight_wrong_size", lambda m: m.nn.functional.cross_entropy(
        _x(m), idx(m, [0, 1, 2]), weight=m.ones(3))),
    ("ce_bad_reduction", lambda m: m.nn.functional.cross_entropy(
        _x(m), idx(m, [0, 1, 2]), reduction="avg")),
    ("ce_smoothing_gt_1", lambda m: m.nn.functional.cross_entropy(
        _x(m), idx(m, [0, 1, 2]), label_smoothing=1.5)),
    ("ce_int_input", lambda m: m.nn.functional.cross_entropy(
        m.tensor([[1, 2], [3, 4]]), idx(m, [0, 1]))),
    ("nll_0d_input", lambda m: m.nn.functional.nll_loss(m.tensor(1.0), idx(m, 0))),
    ("mse_shape_mismatch", lambda m: m.nn.functional.mse_loss(_x(m), m.zeros(2, 4))),
    ("mse_bad_reduction", lambda m: m.nn.functional.mse_loss(_x(m), _x(m), reduction="x")),
    ("bce_shape_mismatch", lambda m: m.nn.functional.binary_cross_entropy(_x(m), m.zeros(4))),
    ("bce_out_of_range", lambda m: m.nn.functional.binary_cross_entropy(
        _x(m) * 2, m.zeros(3, 4))),
    ("bce_weight_not_broadcastable", lambda m: m.nn.functional.binary_cross_entropy(
        _x(m), m.zeros(3, 4), weight=m.ones(3))),
    ("bce_weight_too_many_dims", lambda m: m.nn.functional.binary_cross_entropy(
        _x(m), m.zeros(3, 4), weight=m.ones(2, 3, 4))),
    ("bce_weight_grows_input", lambda m: m.nn.functional.binary_cross_entropy(
        _x(m, (3, 1)), m.zeros(3, 1), weight=m.ones(3, 4))),
    ("bce_target_dtype", lambda m: m.nn.functional.binary_cross_entropy(
        _x(m), m.zeros(3, 4, dtype=m.float64))),
    ("bce_logits_weight_not_broadcastable", lambda m:
     m.nn.functional.binary_cross_entropy_with_logits(_x(m), m.zeros(3, 4), weight=m.ones(3))),
    ("bce_logits_pos_weight_not_broadcastable", lambda m:
     m.nn.functional.binary_cross_entropy_with_logits(_x(m), m.zeros(3, 4),
                                                      pos_weight=m.ones(3))),
    ("bce_logits_int_target", lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        _x(m), m.zeros(3, 4, dtype=m.int64))),
    ("smooth_l1_negative_beta", lambda m: m.nn.functional.smooth_l1_loss(_x(m), _x(m),
                                                                         beta=-1.0)),
    ("huber_zero_delta", lambda m: m.nn.functional.huber_loss(_x(m), _x(m), delta=0.0)),
    ("huber_bad_reduction", lambda m: m.nn.functional.huber_loss(_x(m), _x(m), reduction="x")),
    ("huber_weight_shape", lambda m: m.nn.functional.huber_loss(_x(m), _x(m),
                                                                weight=m.ones(4))),
    ("mse_weight_shape", lambda m: m.nn.functional.mse_loss(_x(m), _x(m), weight=m.ones(4))),
    ("ce_weight_dtype", lambda m: m.nn.functional.cross_entropy(
        _x(m), idx(m, [0, 1, 2]), weight=m.ones(4, dtype=m.float64))),
    ("ce_prob_ignore_index", lambda m: m.nn.functional.cross_entropy(
        _x(m), m.zeros(3, 4), ignore_index=1)),
    ("ce_prob_weight_size", lambda m: m.nn.functional.cross_entropy(
        _x(m), m.zeros(3, 4), weight=m.ones(3))),
    ("nll_4d_target_shape", lambda m: m.nn.functional.nll_loss(
        _x(m, (2, 4, 3, 1)), m.zeros(2, 2, 1, dtype=m.int64))),
    ("embedding_weight_1d", lambda m: m.nn.functional.embedding(idx(m, [0]), m.zeros(5))),
    ("embedding_padding_idx_oob", lambda m: m.nn.functional.embedding(
        idx(m, [0]), m.zeros(5, 3), padding_idx=5)),
    ("layer_norm_int_input", lambda m: m.nn.functional.layer_norm(m.tensor([[1, 2]]), (2,))),
    ("layer_norm_empty_shape", lambda m: m.nn.functional.layer_norm(_x(m), ())),
    ("layer_norm_weight_dtype", lambda m: m.nn.functional.layer_norm(
        _x(m), (4,), weight=m.ones(4, dtype=m.float64))),
    ("softmax_int", lambda m: m.nn.functional.softmax(m.tensor([1, 2]), 0)),
    ("gelu_int", lambda m: m.nn.functional.gelu(m.tensor([1, 2]))),
    ("dropout_int", lambda m: m.nn.functional.dropout(m.tensor([1, 2]), 0.5)),
    ("one_hot_empty_infer", lambda m: m.nn.functional.one_hot(m.zeros(0, dtype=m.int64))),
    ("pad_replicate_value", lambda m: m.nn.functional.pad(_x(m), (1, 1), mode="replicate",
                                                          value=1.0)),
    ("pad_float_amount", lambda m: m.nn.functional.pad(_x(m), (1.5, 1))),
    ("pad_reflect_4_on_2d", lambda m: m.nn.functional.pad(_x(m), (1, 1, 1, 1),
                                                          mode="reflect")),
    ("bce_logits_shape_mismatch", lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        _x(m), m.zeros(3, 1))),
    ("linear_shape_mismatch", lambda m: m.nn.functional.linear(_x(m), m.zeros(5, 3))),
    ("linear_dtype_mismatch", lambda m: m.nn.functional.linear(
        _x(m), m.zeros(5, 4, dtype=m.float64))),
    ("linear_0d", lambda m: m.nn.functional.linear(m.tensor(1.0), m.zeros(5, 4))),
    ("linear_bias_mismatch", lambda m: m.nn.functional.linear(_x(m), m.zeros(5, 4),
                                                              m.zeros(3))),
    ("embedding_oob", lambda m: m.nn.functional.embedding(idx(m, [0, 5]), m.zeros(5, 3))),
    ("embedding_float_idx", lambda m: m.nn.functional.embedding(m.tensor([0.0]),
                                                                m.zeros(5, 3))),
    ("layer_norm_shape", lambda m: m.nn.functional.layer_norm(_x(m), (3,))),
    ("layer_norm_weight_shape", lambda m: m.nn.functional.layer_norm(
        _x(m), (4,), weight=m.ones(3))),
    ("layer_norm_int_shape", lambda m: m.nn.functional.layer_norm(_x(m), 4)),
    ("softmax_dim_oob", lambda m: m.nn.functional.softmax(_x(m), dim=2)),
    ("log_softmax_dim_oob", lambda m: m.nn.functional.log_softmax(_x(m), dim=-3)),
    ("one_hot_int32", lambda m: m.nn.functional.one_hot(m.tensor(np.array([1],
                                                                          dtype=np.int32)))),
    ("one_hot_too_small", lambda m: m.nn.functional.one_hot(idx(m, [0, 3]), 3)),
    ("one_hot_negative", lambda m: m.nn.functional.one_hot(idx(m, [0, -1]))),
    ("pad_odd", lambda m: m.nn.functional.pad(_x(m), (1,))),
    ("pad_too_long", lambda m: m.nn.functional.pad(_x(m), (1, 1, 1, 1, 1, 1))),
    ("pad_reflect_too_big", lambda m: m.nn.functional.pad(_x(m, (1, 3, 4)), (4, 0),
                                                          mode="reflect")),
    ("pad_bad_mode", lambda m: m.nn.functional.pad(_x(m), (1, 1), mode="wrap")),
    ("pad_negative_size", lambda m: m.nn.functional.pad(_x(m), (-3, -2))),
    ("gelu_bad_approximate", lambda m: m.nn.functional.gelu(_x(m), approximate="fast")),
]
# cases whose message differs from torch's only in wording that carries no information
ERROR_MESSAGE_PREFIX_ONLY = {"pad_bad_mode", "layer_norm_int_shape"}


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn, torch):
    with pytest.raises(Exception) as et:
        fn(torch)
    with pytest.raises(Exception) as ec:
        fn(cgrad)
    assert type(ec.value) is type(et.value), (str(ec.value), str(et.value))
    mc, mt = str(ec.value), str(et.value).replace("torch.", "cgrad.")
    if name in ERROR_MESSAGE_PREFIX_ONLY:
        assert mt.split(":")[0] == mc.split(":")[0] or mt[:30] == mc[:30], (mc, mt)
    else:
        assert mc == mt


def test_errors_without_torch():
    with pytest.raises(IndexError, match="Target 4 is out of bounds."):
        CF.cross_entropy(cgrad.zeros(3, 4), cgrad.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="index out of range in self"):
        CF.embedding(cgrad.tensor([7]), cgrad.zeros(5, 3))
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        CF.linear(cgrad.zeros(3, 4), cgrad.zeros(5, 3))
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        CF.mse_loss(cgrad.zeros(3), cgrad.zeros(3), reduction="avg")


# ----------------------------------------------------------------------------------------
# an MLP training step end to end (the benchmark's workload, small)
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mlp_step_matches_torch(dtype, torch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 12)).astype(dtype)
    y = rng.integers(0, 5, 16)
    params = [rng.standard_normal(s).astype(dtype) * 0.3 for s in ((8, 12), (8,), (5, 8), (5,))]
    res = []
    for m in (cgrad, torch):
        ps = [m.tensor(p, requires_grad=True) for p in params]
        h = m.tanh(m.nn.functional.linear(m.tensor(X), ps[0], ps[1]))
        loss = m.nn.functional.cross_entropy(m.nn.functional.linear(h, ps[2], ps[3]),
                                             idx(m, y))
        loss.backward()
        res.append([np_of(loss)] + [p.grad.numpy() for p in ps])
    tol = TOL[np.dtype(dtype).type]
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **tol)


def test_functional_batch_norm_and_bilinear_match_torch():
    th = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((6, 3)), rng.random(3), rng.random(3)
    for training in (True, False):
        rm, rv = np.zeros(3), np.ones(3)
        rmc, rvc = cgrad.tensor(rm.copy()), cgrad.tensor(rv.copy())
        rmt, rvt = th.tensor(rm.copy()), th.tensor(rv.copy())
        a = cgrad.nn.functional.batch_norm(cgrad.tensor(x), rmc, rvc, cgrad.tensor(w),
                                           cgrad.tensor(b), training=training)
        t = th.nn.functional.batch_norm(th.tensor(x), rmt, rvt, th.tensor(w), th.tensor(b),
                                        training=training)
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10)
        np.testing.assert_allclose(rmc.numpy(), rmt.numpy(), rtol=1e-10)
        np.testing.assert_allclose(rvc.numpy(), rvt.numpy(), rtol=1e-10)
    x1, x2, W = rng.standard_normal((5, 3)), rng.standard_normal((5, 4)), rng.standard_normal((2, 3, 4))
    bias = rng.standard_normal(2)
    a = cgrad.nn.functional.bilinear(cgrad.tensor(x1), cgrad.tensor(x2), cgrad.tensor(W),
                                     cgrad.tensor(bias))
    t = th.nn.functional.bilinear(th.tensor(x1), th.tensor(x2), th.tensor(W), th.tensor(bias))
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ["relu", "elu", "silu"])
def test_inplace_on_nonleaf_rebases_like_torch(name, torch):
    a = np.linspace(-2, 2, 7)
    res = []
    for m in (cgrad, torch):
        F_ = CF if m is cgrad else torch.nn.functional
        x = m.tensor(a, requires_grad=True)
        h = x * 1.5
        y = getattr(F_, name)(h, inplace=True)
        assert y is h and h._version >= 1
        (h * m.arange(7, dtype=m.float64)).sum().backward()
        res.append((h.detach().numpy().copy(), x.grad.numpy().copy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


def test_dropout_inplace_on_nonleaf_rebases():
    cgrad.manual_seed(0)
    x = cgrad.tensor(np.ones(1000), requires_grad=True)
    h = x * 2.0
    y = CF.dropout(h, 0.5, inplace=True)
    assert y is h and h._version == 1
    assert type(h.grad_fn).__name__ == "MulBackward0"
    kept = h.detach().numpy() != 0
    np.testing.assert_array_equal(h.detach().numpy()[kept], 4.0)
    h.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 4.0, 0.0))
