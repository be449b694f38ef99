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

Known differences from torch: ``embedding(sparse=True)`` gives a sparse COO gradient whose
values are scalars (indices (2, n * dim) where torch's hybrid tensor has indices (1, n) and
values (n, dim); ``to_dense()`` and the optimizers see the same gradient);
``embedding_bag(scale_grad_by_freq=True)`` scales by the true frequencies (torch 2.13's
kernel does not); ``ctc_loss`` and ``multi(label)_margin_loss`` have a double backward where
torch has none (ctc's gradient is not itself differentiated: it is a constant times the
incoming gradient);
``binary_cross_entropy_with_logits`` returns the target's dtype as torch does, and
``huber_loss`` promotes mixed dtypes (torch 2.13 returns the input's dtype and then fails in
backward).

Elementwise activations (relu, sigmoid, tanh, gelu, ...) delegate to the op library
(``cgrad.<name>`` or ``Tensor.<name>``), looked up at call time.

The implementation is split by family into private modules (torch's namespace is flat, so
no public name is added): ``_activation`` (softmax, log_softmax, relu, ...), ``_linear``
(linear, bilinear), ``_conv`` (conv1d, conv2d, unfold, fold), ``_conv_transpose``
(conv_transpose1d/2d), ``_loss``, ``_normalization`` (layer_norm, batch_norm), ``_norm_more`` (group_norm,
instance_norm, rms_norm, local_response_norm, normalize), ``_activation_more`` (hardtanh,
relu6, hardswish, mish, glu, prelu, softmin, celu, ..., cosine_similarity,
pairwise_distance), ``_dropout``,
``_sparse`` (embedding, one_hot), ``_loss_more`` (kl_div, margin and ranking losses,
ctc_loss, ...), ``_embedding_bag``, ``_attention`` (scaled_dot_product_attention,
multi_head_attention_forward), ``_padding`` (pad), ``_pooling`` (max/avg/adaptive pooling,
nearest interpolate), ``_pooling_more`` (adaptive max, lp_pool, max_unpool), ``_upsample``
(linear/bilinear/bicubic interpolate, pixel/channel shuffles) and ``_utils`` (shared helpers).
"""
from __future__ import annotations

# The names the single-file module held through its imports: kept, so that dir() of
# cgrad.nn.functional is unchanged (tests/test_layout.py).
import numbers  # noqa: F401

import numpy as np  # noqa: F401

from cgrad._C import TensorBase  # noqa: F401
from cgrad.autograd.function import Function  # noqa: F401
from cgrad.ops.comparison import mask_fill  # noqa: F401
from cgrad.ops.promotion import torch_type_name  # noqa: F401
from cgrad.ops.linalg import Mm
from cgrad.ops.shape import T  # noqa: F401
from cgrad.ops.shape import UnsafeView, View  # noqa: F401

from cgrad.nn.functional._activation import (elu, gelu, leaky_relu, log_softmax, relu,
                                             relu_, selu, sigmoid, silu, softmax, softplus,
                                             tanh)
from cgrad.nn.functional._attention import (multi_head_attention_forward,
                                             scaled_dot_product_attention)
from cgrad.nn.functional._activation_more import (celu, cosine_similarity, glu, hardshrink,
                                                  hardsigmoid, hardswish, hardtanh, hardtanh_,
                                                  logsigmoid, mish, pairwise_distance, prelu,
                                                  relu6, rrelu, softmin, softshrink, softsign,
                                                  tanhshrink, threshold, threshold_)
from cgrad.nn.functional._conv import conv1d, conv2d, fold, unfold
from cgrad.nn.functional._conv_transpose import conv_transpose1d, conv_transpose2d
from cgrad.nn.functional._dropout import dropout
from cgrad.nn.functional._linear import bilinear, linear
from cgrad.nn.functional._loss import (binary_cross_entropy, binary_cross_entropy_with_logits,
                                       cross_entropy, huber_loss, l1_loss, mse_loss, nll_loss,
                                       smooth_l1_loss)
from cgrad.nn.functional._loss_more import (cosine_embedding_loss, ctc_loss, gaussian_nll_loss,
                                            hinge_embedding_loss, kl_div, margin_ranking_loss,
                                            multi_margin_loss, multilabel_margin_loss,
                                            multilabel_soft_margin_loss, poisson_nll_loss,
                                            soft_margin_loss, triplet_margin_loss,
                                            triplet_margin_with_distance_loss)
from cgrad.nn.functional._embedding_bag import embedding_bag
from cgrad.nn.functional._normalization import batch_norm, layer_norm
from cgrad.nn.functional._norm_more import (group_norm, instance_norm, local_response_norm,
                                            normalize, rms_norm)
from cgrad.nn.functional._padding import pad
from cgrad.nn.functional._pooling import (adaptive_avg_pool2d, avg_pool1d, avg_pool2d,
                                          interpolate, max_pool1d, max_pool2d)
from cgrad.nn.functional._pooling_more import (adaptive_avg_pool1d, adaptive_max_pool1d,
                                               adaptive_max_pool2d, lp_pool1d, lp_pool2d,
                                               max_unpool1d, max_unpool2d)
from cgrad.nn.functional._sparse import embedding, one_hot
from cgrad.nn.functional._upsample import channel_shuffle, pixel_shuffle, pixel_unshuffle

__all__ = [
    "linear", "relu", "relu_", "leaky_relu", "elu", "selu", "gelu", "silu", "sigmoid", "tanh",
    "softplus", "softmax", "log_softmax", "dropout", "cross_entropy", "nll_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "embedding", "layer_norm", "one_hot", "pad",
    "batch_norm", "bilinear", "conv1d", "conv2d", "max_pool1d",
    "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d", "unfold", "fold", "interpolate",
    "group_norm", "instance_norm", "rms_norm", "local_response_norm", "normalize", "hardtanh",
    "hardtanh_", "relu6", "hardswish", "hardsigmoid", "mish", "softsign", "tanhshrink",
    "threshold", "threshold_", "glu", "prelu", "logsigmoid", "softmin", "hardshrink",
    "softshrink", "celu", "rrelu", "cosine_similarity", "pairwise_distance",
    "kl_div", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "soft_margin_loss", "hinge_embedding_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss",
    "embedding_bag",
    "scaled_dot_product_attention", "multi_head_attention_forward",
    "conv_transpose1d", "conv_transpose2d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "lp_pool1d", "lp_pool2d", "max_unpool1d", "max_unpool2d",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
]

# Note [Tensor functions] in cgrad/__init__.py: the functions of this module that torch binds
# to a C function refusing a non-Tensor first argument.
_TENSOR_FIRST = ("avg_pool1d", "avg_pool2d", "dropout", "elu", "gelu", "leaky_relu", "linear",
                 "one_hot", "relu", "relu_", "selu", "silu", "softplus", "hardtanh", "hardtanh_",
                 "relu6", "hardswish", "hardsigmoid", "mish", "threshold_", "prelu", "logsigmoid",
                 "hardshrink", "softshrink", "celu", "rrelu", "adaptive_avg_pool1d",
                 "channel_shuffle", "conv_transpose1d", "conv_transpose2d", "pixel_shuffle",
                 "pixel_unshuffle")
from cgrad import _api  # noqa: E402  # Note [Public callables] (cgrad/_api.py)

_api.install_functions(globals(), __all__, _TENSOR_FIRST, __name__,
                       c_in_torch=_api.C_IN_TORCH_NN)
