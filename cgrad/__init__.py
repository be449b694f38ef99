"""cgrad: PyTorch-style reverse-mode autograd on NumPy with a compiled graph engine.

>>> import cgrad
>>> x = cgrad.tensor([1.0, 2.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad
tensor([2., 4.])
"""
try:
    from cgrad import _C
except ImportError as e:  # pragma: no cover - tested in a subprocess (test_packaging.py)
    from cgrad._ext_missing import message as _message
    raise ImportError(_message(e, __path__[0])) from e
from cgrad import _memory  # noqa: E402  # Note [Array buffer cache] (csrc/cg_memory.h)
_memory.install_default()

from cgrad import _dtype
from cgrad._dtype import (bool, complex64, complex128, double, float, float16, float32,
                          float64, get_default_dtype, half, int, int8, int16, int32, int64,
                          long, set_default_dtype, short, uint8)
from cgrad.tensor import Size, Tensor, typename
from cgrad.ops.reductions import sum_to as _sum_to


def _cast(g, dtype):
    if g.is_sparse:     # sparse: keep the layout
        return g.to(dtype)
    from cgrad.ops import ToCopy
    return ToCopy.apply(g, dtype)


_C._register(Tensor, _sum_to, _cast)

from cgrad import ops  # noqa: E402
from cgrad import autograd  # noqa: E402
from cgrad import linalg  # noqa: E402  # the cgrad.linalg namespace
from cgrad import sparse  # noqa: E402  # sparse: the cgrad.sparse namespace
from cgrad.functional import *  # noqa: E402,F401,F403
from cgrad.functional import __all__ as _fn_all  # noqa: E402


def _wire():
    """The one place where lower layers receive pieces of higher ones (docs/ARCHITECTURE.md):
    Tensor's methods that call ops, autograd and sparse (Note [Tensor bindings]), the op
    tables installed as Tensor methods and cgrad.* functions, and sparse products in
    ops.linalg. Runs once, before any layer above the op library is imported."""
    from cgrad import tensor
    from cgrad.ops import OP_MODULES, arithmetic, indexing, inplace, linalg as _linalg, shape
    tensor._bind(ops, indexing.index, shape.reshape, inplace, arithmetic.add_alpha,
                 autograd.backward, sparse.to_sparse, indexing.masked_fill)
    _linalg._sparse.update(matmul=sparse.matmul, mm=sparse._ops.mm)
    sparse._tensor._OPS.update(matmul=sparse._ops.matmul, mm=sparse._ops.mm,
                               sum=sparse._ops._tensor_sum, SegmentSum=sparse._ops.SegmentSum,
                               SegmentGather=sparse._ops.SegmentGather)
    g = globals()
    for mod in OP_MODULES:
        for name, fn in mod.TENSOR_METHODS.items():
            setattr(Tensor, name, fn)
        for name, fn in mod.FUNCTIONS.items():
            g[name] = fn
    g["mm"] = sparse._sparse_aware_mm(g["mm"])  # sparse: cgrad.mm(sparse, dense)


_wire()

from cgrad._creation import (arange, as_tensor, empty, empty_like, eye, from_numpy,  # noqa: E402
                             full, full_like, linspace, ones, ones_like, tensor, zeros,
                             zeros_like)
from cgrad._device import (channels_last, channels_last_3d, contiguous_format,  # noqa: E402
                           device, get_default_device, layout, memory_format, preserve_format,
                           set_default_device)
from cgrad._generator import (Generator, default_generator, get_rng_state,  # noqa: E402
                              initial_seed, manual_seed, seed, set_rng_state)
from cgrad._legacy import (BoolTensor, ByteTensor, CharTensor, DoubleTensor,  # noqa: E402
                           FloatTensor, HalfTensor, IntTensor, LongTensor, ShortTensor)
from cgrad._random import (bernoulli, multinomial, normal, poisson, rand,  # noqa: E402
                           rand_like, randint, randint_like, randn, randn_like, randperm)
from cgrad._threads import (get_num_interop_threads, get_num_threads,  # noqa: E402
                            set_num_interop_threads, set_num_threads)
from cgrad.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: E402
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)
from cgrad import distributed  # noqa: E402  # torch.distributed's API on MPI
from cgrad import nn  # noqa: E402
from cgrad import optim  # noqa: E402
from cgrad.serialization import load, save  # noqa: E402
from cgrad import utils  # noqa: E402
from cgrad import accelerator, backends, cuda, random  # noqa: E402  # torch's, CPU-only
from cgrad.sparse import sparse_coo, sparse_coo_tensor, spmm, strided  # noqa: E402  # sparse:


def is_tensor(obj):
    """True if obj is a cgrad Tensor."""
    return isinstance(obj, Tensor)


# Note [Tensor functions]: torch's functions bound in C refuse a first argument that is not a
# Tensor with TypeError("exp(): argument 'input' (position 1) must be Tensor, not list");
# cgrad's are Python and would fail later on an internal attribute. These (the functions for
# which torch 2.13 gives that error for a list, a float and an ndarray, re-derived against
# torch by tests/test_bad_input.py) are wrapped in a C callable that checks the type and
# passes the call on by vectorcall (csrc/cg_tfn.h).
_TENSOR_FIRST = (
    "abs", "absolute", "adjoint", "allclose", "amax", "amin", "argmax", "argmin", "argwhere",
    "bitwise_not", "ceil", "cholesky", "chunk", "clone", "cos", "count_nonzero", "cumprod",
    "cumsum", "det", "dot", "empty_like", "equal", "exp", "exp2", "expm1", "fix", "flatten",
    "flip", "floor", "full_like", "gather", "ger", "index_add", "index_select", "inverse",
    "isclose", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "log", "log10", "log1p",
    "log2", "log_softmax", "logdet", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logsumexp", "masked_select", "matmul", "max", "maximum", "mean", "min",
    "minimum", "mv", "nan_to_num", "nanmean", "nansum", "neg", "negative", "nonzero",
    "ones_like", "outer", "permute", "prod", "qr", "ravel", "reciprocal", "relu", "reshape",
    "roll", "round", "rsqrt", "scatter_add", "select", "selu", "sgn", "sigmoid", "sign", "sin",
    "slogdet", "softmax", "split_with_sizes", "sqrt", "square", "squeeze", "sum", "swapaxes",
    "swapdims", "t", "take", "take_along_dim", "tan", "tanh", "tile", "transpose", "trunc",
    "unbind", "unflatten", "unsqueeze", "zeros_like") + (
    # issue 17 (ops set A): cgrad/ops/special.py
    "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "asin", "asinh", "atan", "atan2", "atanh", "cosh", "deg2rad", "erf", "erfc", "erfinv",
    "frac", "heaviside", "hypot", "logaddexp", "logaddexp2", "logit", "rad2deg", "sinc", "sinh",
    # issue 17 (ops set A): triangular.py, products.py, rot90, diff
    "cross", "diag", "diag_embed", "diagonal", "diff", "rot90", "trace", "tril", "triu",
    # sorting and selection, statistics, scans
    "argsort", "kthvalue", "median", "mode", "msort", "nanmedian", "sort", "topk",
    "cummax", "cummin", "logcumsumexp", "aminmax", "bincount", "histc", "histogram",
    "unique", "unique_consecutive",
    # random sampling (cgrad/_random.py)
    "bernoulli", "multinomial", "poisson", "rand_like", "randn_like")
from cgrad import _api  # noqa: E402  # Note [Public callables] (cgrad/_api.py)

_api.install_functions(globals(), sorted(set(_api.function_names()) | set(_TENSOR_FIRST)),
                       _TENSOR_FIRST, __name__, _api.PYTHON_IN_TORCH["function"])
_api.install_methods(Tensor)
_api.adopt_functions(globals(), __name__)

__version__ = "0.1.0"
