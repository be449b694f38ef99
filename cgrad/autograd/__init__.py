"""cgrad.autograd: reverse-mode automatic differentiation with torch.autograd's API."""
from __future__ import annotations

from cgrad import _C
from cgrad.autograd import function, grad_mode, graph, anomaly_mode
from cgrad.autograd.anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled,
                                         is_anomaly_enabled, set_detect_anomaly)
from cgrad.autograd.function import Function, FunctionCtx, once_differentiable
from cgrad.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)

__all__ = ["Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "inference_mode", "once_differentiable",
           "detect_anomaly", "set_detect_anomaly", "graph", "Variable"]


from cgrad.autograd.engine import (_make_grads, _tensors, backward,  # noqa: E402,F401
                                    grad)

from cgrad.autograd import functional  # noqa: E402,F401
from cgrad.autograd.gradcheck import gradcheck, gradgradcheck  # noqa: E402,F401
from cgrad.autograd.variable import Variable  # noqa: E402,F401
