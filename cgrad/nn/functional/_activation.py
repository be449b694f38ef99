"""Activations of cgrad.nn.functional: ``softmax`` and ``log_softmax`` (the op library's
nodes, one ``SoftmaxBackward0`` / ``LogSoftmaxBackward0``), and ``relu``, ``relu_``,
``leaky_relu``, ``elu``, ``selu``, ``gelu``, ``silu``, ``sigmoid``, ``tanh``, ``softplus``,
which delegate to the op library (``cgrad.<name>``), looked up at call time."""
from __future__ import annotations

from cgrad import _checks
from cgrad._warn import warn as _warn
from cgrad.nn.functional._utils import _inplace_apply
# the op library's nodes (cgrad/ops/reduce_ext.py): one SoftmaxBackward0 / LogSoftmaxBackward0
from cgrad.ops import pointwise as _pointwise
from cgrad.ops.reductions import LogSoftmax as _LogSoftmax
from cgrad.ops.reductions import Softmax as _Softmax


def _norm_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


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


def _op(name):
    return _pointwise.FUNCTIONS[name]


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
    # torch's F.sigmoid is Python (no C check of its argument: not in F._TENSOR_FIRST); the
    # op table's sigmoid would fail on a non-Tensor's missing attribute
    _checks.check_tensor(input, "sigmoid")
    return _op("sigmoid")(input)


def tanh(input):
    _checks.check_tensor(input, "tanh")      # as sigmoid
    return _op("tanh")(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _op("softplus")(input, beta, threshold)
