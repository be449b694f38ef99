"""Activation modules (thin wrappers over cgrad.nn.functional, with torch's extra_repr)."""
from __future__ import annotations

from cgrad.nn import functional as F
from cgrad.nn.modules.module import Module

__all__ = ["ReLU", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softplus",
           "Softmax", "LogSoftmax", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Mish",
           "Softsign", "Tanhshrink", "LogSigmoid", "Threshold", "GLU", "Softmin", "Softmax2d",
           "Hardshrink", "Softshrink", "CELU", "RReLU", "PReLU", "CosineSimilarity",
           "PairwiseDistance"]


class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0)."""

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)


class SELU(_Inplace):
    """scale * elu(x, alpha) with torch's constants."""

    def forward(self, input):
        return F.selu(input, inplace=self.inplace)


class SiLU(_Inplace):
    """x * sigmoid(x)."""

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)


class LeakyReLU(Module):
    """max(x, 0) + negative_slope * min(x, 0)."""

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"negative_slope={self.negative_slope}{inplace_str}"


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace_str}"


class GELU(Module):
    """x * Phi(x) (``approximate='tanh'``: the tanh approximation)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={repr(self.approximate)}"


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, input):
        return F.tanh(input)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class _Dim(Module):
    """A module applying a function along ``dim`` (Softmax, LogSoftmax)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_Dim):
    """exp(x) / sum(exp(x)) along ``dim``."""

    def forward(self, input):
        return F.softmax(input, self.dim)


class LogSoftmax(_Dim):
    """log(softmax(x)) along ``dim`` (computed stably)."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)


def _inplace_suffix(inplace):
    return ", inplace=True" if inplace else ""


class Hardtanh(Module):
    """clamp(x, min_val, max_val) (``min_value``/``max_value``: deprecated spellings)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:
            from cgrad._warn import warn
            warn("keyword argument `min_value` is deprecated and rename to `min_val`",
                 category=FutureWarning)
            min_val = min_value
        if max_value is not None:
            from cgrad._warn import warn
            warn("keyword argument `max_value` is deprecated and rename to `max_val`",
                 category=FutureWarning)
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        assert self.max_val > self.min_val

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Hardsigmoid(Module):
    """relu6(x + 3) / 6."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardswish(Hardsigmoid):
    """x * relu6(x + 3) / 6."""

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Mish(Hardsigmoid):
    """x * tanh(softplus(x))."""

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input):
        return F.logsigmoid(input)


class Threshold(Module):
    """x where x > threshold, value elsewhere."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return (f"threshold={self.threshold}, value={self.value}"
                f"{_inplace_suffix(self.inplace)}")


class GLU(Module):
    """a * sigmoid(b), (a, b) the halves of the input along ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(_Dim):
    """softmax(-x) along ``dim``."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3)


class _Shrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(_Shrink):
    """x where |x| > lambd, 0 elsewhere."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """x - sign(x) * lambd where |x| > lambd, 0 elsewhere."""

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class RReLU(Module):
    """Randomised leaky ReLU (random slopes in [lower, upper] in training mode; their mean
    in eval mode)."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_suffix(self.inplace)}"


class PReLU(Module):
    """max(0, x) + weight * min(0, x) with a learnt slope (one, or one per channel),
    initialised to ``init``."""

    __constants__ = ["num_parameters"]

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        from cgrad.nn.modules.linear import _empty
        from cgrad.nn.parameter import Parameter
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(_empty((num_parameters,), dtype, device))
        self.reset_parameters()

    def reset_parameters(self):
        from cgrad.nn import init as _init
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class CosineSimilarity(Module):
    """Cosine similarity along ``dim`` (F.cosine_similarity)."""

    __constants__ = ["dim", "eps"]

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """p-norm distance along the last dim (F.pairwise_distance)."""

    __constants__ = ["norm", "eps", "keepdim"]

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
