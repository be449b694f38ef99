"""Sample calls for every op cgrad exposes, runnable on cgrad and on torch alike.

One table, used by the tests that sweep the API surface against torch
(tests/test_second_backward.py, tests/test_torch_signatures.py):

* ``SAMPLES[name]``: the samples of the op called ``name`` (a key of an op table in
  cgrad/ops: ``FUNCTIONS`` -> ``cgrad.<name>``, ``TENSOR_METHODS`` -> ``Tensor.<name>``;
  ``cgrad.functional.__all__``; the methods cgrad/tensor.py defines; the operators);
* ``F_SAMPLES[name]``: the samples of ``cgrad.nn.functional.<name>``.

A sample gives the arguments of one call as a function of the library module ``m`` (cgrad or
torch) and the leaf ``x`` (a float64 tensor that requires grad, from ``S.x``). The same sample
runs in every form the name has: ``m.name(*args, **kw)`` (a function), ``args[0].name(*args[1:],
**kw)`` (a method), ``getattr(args[0], name)`` (a property), or ``call(m, x)`` when the sample
gives one (operators and statements). ``forms`` restricts a sample to some forms.

Samples are chosen so that the op is differentiable at them (no ties, no kinks, positive
inputs for logarithms) and so that torch accepts them.
"""
from __future__ import annotations

import numpy as np

X = np.array([[0.5, -1.2, 0.8, 1.5], [-0.3, 0.9, -1.7, 0.4], [1.1, -0.6, 0.7, -1.4]])
POS = np.abs(X)
HALF = X / 4                                    # in (-0.5, 0.5)
Y = np.array([[0.2, 0.7, -1.1, 0.6], [1.3, -0.4, 0.1, -0.9], [-0.8, 1.6, 0.3, 1.2]])
V4 = np.array([0.3, -0.7, 1.2, 0.5])
W42 = np.array([[0.4, -0.2], [0.1, 0.9], [-0.6, 0.3], [0.8, -0.5]])
SPD = X[:, :3] @ X[:, :3].T + np.eye(3)          # symmetric positive definite, det > 0
MASK = np.array([[True, False, False, True], [False, True, False, False],
                 [True, False, True, False]])


def c(m, a):
    """A constant (no grad) float64 tensor."""
    return m.tensor(np.array(a, dtype=np.float64))


def leaf(m, a):
    """Another float64 leaf that requires grad."""
    return m.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def i(m, a):
    """An int64 tensor."""
    return m.tensor(np.array(a, dtype=np.int64))


def b(m, a):
    """A bool tensor."""
    return m.tensor(np.array(a, dtype=bool))


def f32(m):
    return m.float32


class S:
    """One sample call (see the module docstring).

    tag: names the sample when an op has several (its id is ``name/tag``); x: the leaf's
    values; args(m, x) -> tuple and kw(m, x) -> dict: the call's arguments (default: (x,)
    and {}); call(m, x) -> result: a call that is not a plain function or method call;
    forms: the forms it runs in (default: all of the name's); random: the result is random
    (compare outcomes, not values)."""

    def __init__(self, args=None, kw=None, *, tag="", x=X, call=None, forms=None,
                 random=False):
        self.args = args if args is not None else (lambda m, x: (x,))
        self.kw = kw if kw is not None else (lambda m, x: {})
        self.tag = tag
        self.x = x
        self.call = call
        self.forms = forms
        self.random = random


SAMPLES: dict = {}
F_SAMPLES: dict = {}


def add(names, *samples, table=None, extend=False):
    table = SAMPLES if table is None else table
    for name in names.split():
        assert (name in table) == extend, name
        table.setdefault(name, []).extend(samples)


def _one(args=None, kw=None, **k):
    return S(args, kw, **k)


# -- elementwise unary ------------------------------------------------------------------------
add("abs absolute __abs__ ceil cos exp2 expm1 fix floor negative neg exp relu round sgn "
    "sigmoid sign sin square tan tanh trunc nan_to_num isnan isinf isfinite isneginf "
    "isposinf elu gelu leaky_relu selu silu softplus clone ravel flatten t adjoint "
    "contiguous", S())
add("sqrt rsqrt reciprocal log log10 log1p log2", S(x=POS))
add("abs_ ceil_ cos_ exp2_ expm1_ floor_ negative_ neg_ exp_ relu_ round_ sigmoid_ sign_ "
    "sin_ square_ tan_ tanh_ trunc_ nan_to_num_ zero_",
    S(lambda m, x: (x.clone(),), forms={"method"}))
add("sqrt_ rsqrt_ reciprocal_ log_ log10_ log1p_ log2_", S(lambda m, x: (x.clone(),), x=POS,
                                                       forms={"method"}))
add("clamp_ clip_", S(lambda m, x: (x.clone(), -0.5, 0.5), forms={"method"}))
add("clamp_min_", S(lambda m, x: (x.clone(), 0.0), forms={"method"}))
add("clamp_max_", S(lambda m, x: (x.clone(), 0.0), forms={"method"}))
add("clamp clip",
    S(lambda m, x: (x, -0.5, 0.5), tag="scalars"),
    S(lambda m, x: (x, c(m, -HALF), c(m, HALF + 0.3)), tag="tensors"))
add("clamp_min", S(lambda m, x: (x, 0.0)))
add("clamp_max", S(lambda m, x: (x, 0.0)))

# -- binary arithmetic ----------------------------------------------------------------------
# Binary ops run with the other operand a leaf, a constant and a scalar, and with the
# leaf second: torch saves only what the gradients of the inputs that require grad use.
add("add sub subtract mul multiply div divide true_divide",
    S(lambda m, x: (x, leaf(m, Y)), tag="tensor"),
    S(lambda m, x: (x, c(m, Y)), tag="constant"),
    S(lambda m, x: (c(m, Y), x), tag="rconstant"),
    S(lambda m, x: (x, 2.0), tag="scalar"))
add("add sub subtract",   # alpha scales the other operand inside the one node (as torch)
    S(lambda m, x: (x, leaf(m, Y)), lambda m, x: {"alpha": 2}, tag="alpha"),
    S(lambda m, x: (c(m, Y), x), lambda m, x: {"alpha": 2}, tag="ralpha"), extend=True)
add("pow",
    S(lambda m, x: (x, leaf(m, Y)), x=POS, tag="tensor"),
    S(lambda m, x: (x, c(m, Y)), x=POS, tag="constant"),
    S(lambda m, x: (c(m, POS), x), tag="rconstant"),
    S(lambda m, x: (x, 2), tag="scalar"),
    S(lambda m, x: (2.0, x), tag="rscalar", forms={"fn"}))
add("maximum minimum", S(lambda m, x: (x, leaf(m, Y)), tag="tensor"),
    S(lambda m, x: (x, c(m, Y)), tag="constant"))
add("fmod remainder",
    S(lambda m, x: (x, 0.7), tag="scalar"),
    S(lambda m, x: (x, c(m, POS + 0.5)), tag="constant"),
    S(lambda m, x: (x, leaf(m, POS + 0.5)), tag="tensor"),
    S(lambda m, x: (c(m, POS + 0.5), x), x=POS + 0.2, tag="rconstant"))
add("floor_divide", S(lambda m, x: (x, 0.7)))
add("__floordiv__ __mod__", S(lambda m, x: (x, 0.7)))
add("__rfloordiv__ __rmod__", S(lambda m, x: (x, 2.0)))
add("eq ne lt le gt ge greater greater_equal less less_equal not_equal",
    S(lambda m, x: (x, c(m, Y))))
add("isclose allclose equal", S(lambda m, x: (x, c(m, X))))
add("logical_and logical_or logical_xor", S(lambda m, x: (x, c(m, Y))))
add("logical_not", S())
add("bitwise_and bitwise_or bitwise_xor __and__ __or__ __xor__ __rand__ __ror__ __rxor__",
    S(lambda m, x: (i(m, [1, 2, 3]), i(m, [3, 1, 2]))))
add("bitwise_not __invert__", S(lambda m, x: (i(m, [1, 2, 3]),)))
add("where",
    S(lambda m, x: (b(m, MASK), x, leaf(m, Y)), tag="tensors", forms={"fn"}),
    S(lambda m, x: (b(m, MASK), x, c(m, Y)), tag="constant", forms={"fn"}),
    S(lambda m, x: (b(m, MASK), x, 0.0), tag="scalar", forms={"fn"}),
    S(lambda m, x: (x, b(m, MASK), leaf(m, Y)), tag="method", forms={"method"}))

# -- reductions -------------------------------------------------------------------------------
add("sum mean prod nansum nanmean",
    S(tag="all"),
    S(lambda m, x: (x, 1), tag="dim"),
    S(lambda m, x: (x, 1, True), tag="keepdim"))
add("max min",
    S(tag="all"),
    S(lambda m, x: (x, 1), tag="dim"),
    S(lambda m, x: (x, leaf(m, Y)), tag="other"))
add("amax amin", S(lambda m, x: (x, 1)))
add("argmax argmin all any count_nonzero", S(), S(lambda m, x: (x, 1), tag="dim"))
add("var std", S(tag="all"), S(lambda m, x: (x, 1), tag="dim"))
add("norm", S(tag="fro"), S(lambda m, x: (x, 2, 1), tag="p2dim"),
    S(lambda m, x: (x, 1), tag="p1"))
add("logsumexp softmax log_softmax cumsum cumprod", S(lambda m, x: (x, 1)))

# -- sorting and selection (X has no ties) ----------------------------------------------------
add("sort", S(lambda m, x: (x, 1), tag="dim"),
    S(lambda m, x: (x,), lambda m, x: {"descending": True, "stable": True}, tag="stable"))
add("argsort", S(lambda m, x: (x, 1)))
add("msort", S())
add("topk", S(lambda m, x: (x, 2, 1)),
    S(lambda m, x: (x, 2), lambda m, x: {"largest": False}, tag="smallest"))
add("kthvalue", S(lambda m, x: (x, 2, 1)))
add("median nanmedian", S(tag="all"), S(lambda m, x: (x, 1), tag="dim"))
add("mode", S(lambda m, x: (x, 1)))
add("quantile nanquantile", S(lambda m, x: (x, 0.3), tag="scalar"),
    S(lambda m, x: (x, c(m, [0.25, 0.5]), 1), tag="tensor"))

# -- scans --------------------------------------------------------------------------------------
add("cummax cummin logcumsumexp", S(lambda m, x: (x, 1)))

# -- statistics and counts --------------------------------------------------------------------
add("var_mean std_mean", S(tag="all"), S(lambda m, x: (x, 1), tag="dim"))
add("aminmax", S(tag="all"), S(lambda m, x: (x,), lambda m, x: {"dim": 1}, tag="dim"))
add("histc", S(lambda m, x: (x, 4)))
add("histogram", S(lambda m, x: (x, 3), tag="bins"),
    S(lambda m, x: (x, c(m, [-2.0, 0.0, 0.5, 2.0])), lambda m, x: {"weight": c(m, POS)},
      tag="edges"))
add("bincount", S(lambda m, x: (i(m, [0, 2, 2, 1]),), tag="counts"),
    S(lambda m, x: (i(m, [0, 2, 2, 1]), x[0]), tag="weights"))

# -- searching and deduplication -----------------------------------------------------------
add("searchsorted", S(lambda m, x: (c(m, [-1.0, 0.0, 1.0]), x)),
    S(lambda m, x: (c(m, [1.0, -1.0, 0.0]), x), lambda m, x: {"side": "right",
                                                             "sorter": i(m, [1, 2, 0])},
      tag="sorter"))
add("bucketize", S(lambda m, x: (x, c(m, [-1.0, 0.0, 1.0]))))
add("unique", S(), S(lambda m, x: (x,), lambda m, x: {"return_inverse": True,
                                                      "return_counts": True, "dim": 0},
                     tag="dim"))
add("unique_consecutive", S(), S(lambda m, x: (x,), lambda m, x: {"return_counts": True,
                                                                  "dim": 1}, tag="dim"))

# -- shape --------------------------------------------------------------------------------------
add("reshape", S(lambda m, x: (x, (4, 3))))
add("view", S(lambda m, x: (x, 4, 3), forms={"method"}))
add("view_as reshape_as", S(lambda m, x: (x, c(m, np.zeros((4, 3))))))
add("expand", S(lambda m, x: (x, 2, 3, 4), forms={"method"}))
add("expand_as", S(lambda m, x: (x, c(m, np.zeros((2, 3, 4))))))
add("squeeze", S(x=X.reshape(3, 1, 4), tag="all"),
    S(lambda m, x: (x, 1), x=X.reshape(3, 1, 4), tag="dim"))
add("unsqueeze", S(lambda m, x: (x, 0)))
add("unflatten", S(lambda m, x: (x, 1, (2, 2))))
add("movedim moveaxis transpose swapaxes swapdims", S(lambda m, x: (x, 0, 1)))
add("permute", S(lambda m, x: (x, (1, 0))))
add("T mT H mH", S(forms={"property"}))
add("flip", S(lambda m, x: (x, (0,))))
add("roll", S(lambda m, x: (x, 1, 0)))
add("narrow", S(lambda m, x: (x, 1, 1, 2)))
add("tile", S(lambda m, x: (x, (2, 1))))
add("repeat", S(lambda m, x: (x, 2, 1)))
add("split", S(lambda m, x: (x, 2, 1)))
add("split_with_sizes", S(lambda m, x: (x, [1, 3], 1)))
add("chunk", S(lambda m, x: (x, 2, 1)))
add("unbind", S(lambda m, x: (x, 0)))
add("cat concat concatenate stack hstack vstack dstack column_stack",
    S(lambda m, x: ([x, leaf(m, Y)],)), S(lambda m, x: ([c(m, Y), x],), tag="constant"))
add("atleast_1d", S(x=np.array(0.7)))
add("atleast_2d", S(x=V4))
add("atleast_3d", S())
add("broadcast_tensors", S(lambda m, x: (x, leaf(m, V4))))
add("meshgrid", S(lambda m, x: (x, leaf(m, [0.5, -0.2])), lambda m, x: {"indexing": "ij"},
                  x=V4))
add("block_diag", S(lambda m, x: (x, leaf(m, W42))))

# -- indexing ---------------------------------------------------------------------------------
add("index_select", S(lambda m, x: (x, 0, i(m, [0, 2]))))
add("index_add", S(lambda m, x: (x, 0, i(m, [0, 2]), leaf(m, Y[:2])), tag="leaf"),
    S(lambda m, x: (x, 0, i(m, [0, 2]), c(m, Y[:2])), tag="constant"))
add("gather", S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 1]]))))
add("take_along_dim", S(lambda m, x: (x, i(m, [[0, 1], [2, 3], [1, 1]]), 1)))
add("scatter",
    S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 0]]), leaf(m, Y[:, :2])), tag="src"),
    S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 0]]), c(m, Y[:, :2])), tag="constant"),
    S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 0]]), 0.5), tag="value"))
add("scatter_add",
    S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 0]]), leaf(m, Y[:, :2])), tag="leaf"),
    S(lambda m, x: (x, 1, i(m, [[0, 1], [2, 3], [1, 0]]), c(m, Y[:, :2])), tag="constant"))
add("masked_fill", S(lambda m, x: (x, b(m, MASK), 0.0)),
    S(lambda m, x: (x, b(m, MASK), leaf(m, 0.5)), tag="tensor"))
add("masked_select", S(lambda m, x: (x, b(m, MASK))))
add("take", S(lambda m, x: (x, i(m, [0, 5, 11]))))
add("select", S(lambda m, x: (x, 0, 1)))
add("nonzero argwhere", S())

# -- linear algebra ---------------------------------------------------------------------------
add("matmul mm", S(lambda m, x: (x, leaf(m, W42)), tag="leaf"),
    S(lambda m, x: (x, c(m, W42)), tag="constant"),
    S(lambda m, x: (c(m, W42.T), x), x=Y.T, tag="rconstant"))
add("bmm", S(lambda m, x: (x, leaf(m, np.stack([W42, W42 * 2]))),
             x=np.stack([X, Y])))
add("mv", S(lambda m, x: (x, leaf(m, V4)), tag="leaf"),
    S(lambda m, x: (x, c(m, V4)), tag="constant"))
add("dot", S(lambda m, x: (x, leaf(m, [0.2, 0.5, -0.4, 1.1])), x=V4))
add("outer ger", S(lambda m, x: (x, leaf(m, [0.2, 0.5, -0.4])), x=V4, tag="leaf"),
    S(lambda m, x: (x, c(m, [0.2, 0.5, -0.4])), x=V4, tag="constant"))
add("einsum", S(lambda m, x: ("ij,jk->ik", x, leaf(m, W42)), tag="leaf"),
    S(lambda m, x: ("ij,jk->ik", x, c(m, W42)), tag="constant"),
    S(lambda m, x: ("ij->j", x), tag="reduce"))

# -- conversions and the methods cgrad/tensor.py defines ------------------------------------------
add("to", S(lambda m, x: (x, m.float32), forms={"method"}))
add("float half", S(forms={"method"}))
add("double", S(lambda m, x: (x.float(),), forms={"method"}))
add("long int bool", S(forms={"method"}))
add("type", S(lambda m, x: (x, m.float32), forms={"method"}))
add("add_ sub_ mul_ div_", S(lambda m, x: (x.clone(), leaf(m, Y)), forms={"method"}),
    S(lambda m, x: (x.clone(), 2.0), forms={"method"}, tag="scalar"))
add("add_ sub_", S(lambda m, x: (x.clone(), leaf(m, Y)), lambda m, x: {"alpha": 2},
                   forms={"method"}, tag="alpha"), extend=True)
add("pow_", S(lambda m, x: (x.clone(), 2), forms={"method"}))
add("fill_", S(lambda m, x: (x.clone(), 0.5), forms={"method"}))
add("copy_", S(lambda m, x: (c(m, np.zeros((3, 4))), x), forms={"method"}))
add("masked_fill_", S(lambda m, x: (x.clone(), b(m, MASK), 0.0), forms={"method"}))
add("uniform_ normal_", S(lambda m, x: (x.clone(),), forms={"method"}, random=True))


def _setitem(m, x):
    y = x.clone()
    y[0] = leaf(m, V4)
    return y


add("__setitem__", S(call=_setitem))
# Indexing and the arithmetic operators are C slots: their samples are expressions.
add("__getitem__",
    S(call=lambda m, x: x[0], tag="int"),
    S(call=lambda m, x: x[0:2], tag="slice"),
    S(call=lambda m, x: x[:, 1], tag="column"),
    S(call=lambda m, x: x[None, ..., 1], tag="none_ellipsis"),
    S(call=lambda m, x: x[[0, 2]], tag="list"),
    S(call=lambda m, x: x[i(m, [2, 0])], tag="tensor"),
    S(call=lambda m, x: x[b(m, MASK)], tag="mask"),
    S(call=lambda m, x: x[[0, 2], [1, 3]], tag="advanced"))
add("__add__", S(call=lambda m, x: x + 1.0, tag="scalar"),
    S(call=lambda m, x: x + leaf(m, Y), tag="tensor"))
add("__radd__", S(call=lambda m, x: 1.0 + x))
add("__sub__", S(call=lambda m, x: x - 1.0, tag="scalar"),
    S(call=lambda m, x: x - leaf(m, Y), tag="tensor"))
add("__rsub__", S(call=lambda m, x: 1.0 - x))
add("__mul__", S(call=lambda m, x: x * 2.0, tag="scalar"),
    S(call=lambda m, x: x * leaf(m, Y), tag="tensor"),
    S(call=lambda m, x: x * c(m, Y), tag="constant"))
add("__rmul__", S(call=lambda m, x: 2.0 * x))
add("__truediv__", S(call=lambda m, x: x / 2.0, tag="scalar"),
    S(call=lambda m, x: x / leaf(m, Y), tag="tensor"))
add("__rtruediv__", S(call=lambda m, x: 2.0 / x))
add("__pow__", S(call=lambda m, x: x ** 2, tag="scalar"),
    S(call=lambda m, x: x ** leaf(m, Y), x=POS, tag="tensor"))
add("__rpow__", S(call=lambda m, x: 2.0 ** x))
add("__neg__", S(call=lambda m, x: -x))
add("__pos__", S(call=lambda m, x: +x))
add("__matmul__", S(call=lambda m, x: x @ leaf(m, W42)))
add("__rmatmul__", S(call=lambda m, x: x.__rmatmul__(c(m, np.ones((2, 3))))))
add("__iadd__", S(call=lambda m, x: _iop(x, "__iadd__", 2.0)))
add("__isub__", S(call=lambda m, x: _iop(x, "__isub__", 2.0)))
add("__imul__", S(call=lambda m, x: _iop(x, "__imul__", 2.0)))
add("__itruediv__", S(call=lambda m, x: _iop(x, "__itruediv__", 2.0)))


def _iop(x, op, v):
    y = x.clone()
    return getattr(y, op)(v)


# -- cgrad.nn.functional -------------------------------------------------------------------
FS = F_SAMPLES
add("relu elu selu gelu silu leaky_relu sigmoid tanh softplus", S(forms={"F"}), table=FS)
add("relu_", S(lambda m, x: (x.clone(),), forms={"F"}), table=FS)
add("softmax log_softmax", S(lambda m, x: (x, 1), forms={"F"}), table=FS)
add("linear", S(lambda m, x: (x, leaf(m, W42.T), leaf(m, [0.1, -0.3])), forms={"F"}),
    S(lambda m, x: (x, c(m, W42.T)), forms={"F"}, tag="constant"), table=FS)
add("bilinear", S(lambda m, x: (x, leaf(m, Y[:, :3]), leaf(m, np.ones((2, 4, 3)) * 0.1),
                                leaf(m, [0.1, -0.3])), forms={"F"}), table=FS)
add("dropout", S(lambda m, x: (x, 0.5), forms={"F"}, random=True), table=FS)
add("embedding", S(lambda m, x: (i(m, [0, 2, 1]), x), forms={"F"}), table=FS)
add("one_hot", S(lambda m, x: (i(m, [0, 2, 1]), 3), forms={"F"}), table=FS)
add("pad", S(lambda m, x: (x, (1, 2)), forms={"F"}),
    S(lambda m, x: (x, (1, 2)), lambda m, x: {"mode": "reflect"}, x=X[None], forms={"F"},
      tag="reflect"),
    S(lambda m, x: (x, (1, 2)), lambda m, x: {"mode": "replicate"}, x=X[None], forms={"F"},
      tag="replicate"),
    S(lambda m, x: (x, (1, 2)), lambda m, x: {"mode": "circular"}, x=X[None], forms={"F"},
      tag="circular"), table=FS)
add("layer_norm", S(lambda m, x: (x, (4,), leaf(m, V4), leaf(m, -V4)), forms={"F"}),
    S(lambda m, x: (x, (4,)), forms={"F"}, tag="plain"), table=FS)
add("batch_norm", S(lambda m, x: (x, c(m, np.zeros(4)), c(m, np.ones(4)), leaf(m, V4),
                                  leaf(m, -V4)), lambda m, x: {"training": True},
                    forms={"F"}), table=FS)
add("mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy_with_logits",
    S(lambda m, x: (x, c(m, Y)), forms={"F"}), table=FS)
add("binary_cross_entropy",
    S(lambda m, x: (x, c(m, np.abs(Y) / 2)), x=POS / 2, forms={"F"}), table=FS)
add("cross_entropy", S(lambda m, x: (x, i(m, [0, 3, 1])), forms={"F"}),
    S(lambda m, x: (x, i(m, [0, 3, 1])), lambda m, x: {"label_smoothing": 0.1}, forms={"F"},
      tag="smooth"),
    S(lambda m, x: (x, c(m, np.abs(Y) / np.abs(Y).sum(1, keepdims=True))), forms={"F"},
      tag="probs"), table=FS)
add("nll_loss", S(lambda m, x: (x, i(m, [0, 3, 1])), forms={"F"}), table=FS)
add("conv1d", S(lambda m, x: (x, leaf(m, X[:2, :, None].repeat(2, 2)[:, :3] * 0.5),
                              leaf(m, [0.1, -0.3])), x=X[None], forms={"F"}),
    S(lambda m, x: (x, c(m, X[:2, :3, None]), None, 2, 1), x=X[None], forms={"F"},
      tag="strided"), table=FS)
add("conv2d", S(lambda m, x: (x, leaf(m, W42.reshape(2, 1, 2, 2)), leaf(m, [0.1, -0.3])),
                x=X[None, None], forms={"F"}),
    S(lambda m, x: (x, c(m, X[:2, :3].reshape(2, 1, 1, 3))), lambda m, x: {"padding": "same"},
      x=X[None, None], forms={"F"}, tag="same"), table=FS)
add("max_pool2d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}),
    S(lambda m, x: (x, 2, 1, 1), lambda m, x: {"ceil_mode": True}, x=X[None], forms={"F"},
      tag="padded"), table=FS)
add("max_pool1d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}), table=FS)
add("avg_pool2d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}),
    S(lambda m, x: (x, 2, 1, 1), lambda m, x: {"count_include_pad": False}, x=X[None],
      forms={"F"}, tag="padded"), table=FS)
add("avg_pool1d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}), table=FS)
add("unfold", S(lambda m, x: (x, 2), x=X[None, None], forms={"F"}),
    S(lambda m, x: (x, (2, 3)), lambda m, x: {"padding": 1, "stride": 2}, x=X[None, None],
      forms={"F"}, tag="strided"), table=FS)
add("fold", S(lambda m, x: (x, (3, 4), (1, 2)),
              x=np.concatenate([X.ravel(), X.ravel()[:6]]).reshape(1, 2, 9), forms={"F"}),
    table=FS)
add("interpolate", S(lambda m, x: (x, None, 2), x=X[None, None], forms={"F"}),
    S(lambda m, x: (x, 5), x=X[None], forms={"F"}, tag="1d"),
    S(lambda m, x: (x, None, 1.5, "bilinear", True), x=X[None, None], forms={"F"},
      tag="bilinear"),
    S(lambda m, x: (x, 6, None, "bicubic"), x=X[None, None], forms={"F"}, tag="bicubic"),
    table=FS)
add("adaptive_avg_pool2d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}),
    S(lambda m, x: (x, 1), x=X[None], forms={"F"}, tag="mean"), table=FS)
add("conv_transpose1d", S(lambda m, x: (x, leaf(m, X[:1, :3].reshape(1, 1, 3)),
                                        leaf(m, [0.2])), x=X[None, :1], forms={"F"}),
    S(lambda m, x: (x, c(m, X[:1, :2].reshape(1, 1, 2)), None, 2, 1, 1), x=X[None, :1],
      forms={"F"}, tag="strided"), table=FS)
add("conv_transpose2d", S(lambda m, x: (x, leaf(m, W42.reshape(1, 2, 2, 2)),
                                        leaf(m, [0.1, -0.3])), x=X[None, None], forms={"F"}),
    S(lambda m, x: (x, c(m, W42.reshape(1, 2, 2, 2))), lambda m, x: {"stride": 2,
                                                                      "output_padding": 1},
      x=X[None, None], forms={"F"}, tag="strided"), table=FS)
add("adaptive_avg_pool1d", S(lambda m, x: (x, 3), x=X[None], forms={"F"}), table=FS)
add("adaptive_max_pool1d", S(lambda m, x: (x, 3), x=X[None], forms={"F"}), table=FS)
add("adaptive_max_pool2d", S(lambda m, x: (x, 2), x=X[None], forms={"F"}), table=FS)
add("lp_pool2d", S(lambda m, x: (x, 2, 2), x=np.abs(X)[None], forms={"F"}), table=FS)
add("lp_pool1d", S(lambda m, x: (x, 2, 2), x=np.abs(X)[None], forms={"F"}), table=FS)
add("pixel_shuffle", S(lambda m, x: (x, 2), x=X.reshape(1, 4, 3, 1), forms={"F"}), table=FS)
add("pixel_unshuffle", S(lambda m, x: (x, 2), x=X[None, :2], forms={"F"}), table=FS)
add("channel_shuffle", S(lambda m, x: (x, 2), x=X.reshape(1, 4, 3, 1), forms={"F"}),
    table=FS)
add("max_unpool1d", S(lambda m, x: (x, i(m, [[1, 2, 5], [0, 3, 4]]), 2), x=X[:2, :3],
                     forms={"F"}), table=FS)
add("max_unpool2d", S(lambda m, x: (x, i(m, [[[1, 6], [8, 15]]]), 2), x=X[None, :2, :2],
                     forms={"F"}), table=FS)
# normalisation, activations and distances of _norm_more.py / _activation_more.py
add("hardtanh relu6 hardswish hardsigmoid mish softsign tanhshrink hardshrink "
    "softshrink celu rrelu", S(forms={"F"}), table=FS)
add("hardtanh_", S(lambda m, x: (x.clone(),), forms={"F"}), table=FS)
# (logsigmoid: torch binds it as torch._C._nn.log_sigmoid, whose signature is not swept)
add("threshold", S(lambda m, x: (x, 0.6, -2.0), forms={"F"}), table=FS)
add("threshold_", S(lambda m, x: (x.clone(), 0.6, -2.0), forms={"F"}), table=FS)
add("glu", S(lambda m, x: (x,), forms={"F"}), table=FS)
add("prelu", S(lambda m, x: (x, leaf(m, [0.25])), forms={"F"}),
    S(lambda m, x: (x, leaf(m, V4)), x=X.T[None], forms={"F"}, tag="channels"), table=FS)
add("softmin", S(lambda m, x: (x, 1), forms={"F"}), table=FS)
add("cosine_similarity pairwise_distance", S(lambda m, x: (x, c(m, Y)), forms={"F"}), table=FS)
add("normalize", S(forms={"F"}), table=FS)
add("group_norm", S(lambda m, x: (x, 2, leaf(m, V4), leaf(m, -V4)), x=X[:, :, None],
                    forms={"F"}), table=FS)
add("instance_norm", S(x=X[None], forms={"F"}), table=FS)
add("rms_norm", S(lambda m, x: (x, (4,), leaf(m, V4)), forms={"F"}), table=FS)
add("local_response_norm", S(lambda m, x: (x, 2), x=X[None], forms={"F"}), table=FS)

# the losses of cgrad/nn/functional/_loss_more.py, embedding_bag and attention
add("kl_div", S(lambda m, x: (x, c(m, np.abs(Y) / 4)), lambda m, x: {"reduction": "batchmean"},
                forms={"F"}), table=FS)
add("soft_margin_loss multilabel_soft_margin_loss",
    S(lambda m, x: (x, c(m, np.sign(Y))), forms={"F"}), table=FS)
add("hinge_embedding_loss", S(lambda m, x: (x, c(m, np.sign(Y))), forms={"F"}), table=FS)
add("poisson_nll_loss", S(lambda m, x: (x, c(m, np.abs(Y))), forms={"F"}), table=FS)
add("gaussian_nll_loss", S(lambda m, x: (x, c(m, Y), c(m, POS + 0.5)), forms={"F"}),
    table=FS)
add("margin_ranking_loss", S(lambda m, x: (x[0], c(m, Y[0]), c(m, [1.0, -1.0, 1.0, -1.0])),
                             forms={"F"}), table=FS)
add("cosine_embedding_loss", S(lambda m, x: (x, c(m, Y), c(m, [1.0, -1.0, 1.0])),
                               forms={"F"}), table=FS)
add("triplet_margin_loss triplet_margin_with_distance_loss",
    S(lambda m, x: (x, c(m, Y), c(m, -Y)), forms={"F"}), table=FS)
add("multi_margin_loss", S(lambda m, x: (x, i(m, [0, 3, 1])), forms={"F"}), table=FS)
add("multilabel_margin_loss", S(lambda m, x: (x, i(m, [[0, 3, -1, 0], [1, -1, 0, 0],
                                                       [2, 1, 3, -1]])), forms={"F"}),
    table=FS)
add("logsigmoid", S(forms={"F"}), table=FS)
add("ctc_loss", S(lambda m, x: (x.reshape(3, 1, 4).log_softmax(2), i(m, [[1, 2]]),
                                i(m, [3]), i(m, [2])), forms={"F"}), table=FS)
add("embedding_bag", S(lambda m, x: (i(m, [0, 2, 1, 1]), x, i(m, [0, 2])), forms={"F"}),
    table=FS)
add("scaled_dot_product_attention",
    S(lambda m, x: (x[None], c(m, Y[None]), c(m, Y[None] * 0.5)), forms={"F"}),
    S(lambda m, x: (x[None], x[None], x[None]), lambda m, x: {"is_causal": True},
      forms={"F"}, tag="causal"), table=FS)
add("multi_head_attention_forward",
    S(lambda m, x: (x[:, None], x[:, None], x[:, None], 4, 2,
                    leaf(m, np.linspace(-0.5, 0.5, 48).reshape(12, 4)), None, None, None,
                    False, 0.0, c(m, np.eye(4) * 0.5), None), forms={"F"}), table=FS)


# -- linear algebra on square matrices -------------------------------------------------------
add("cholesky det inverse logdet slogdet qr", S(x=SPD))


# -- elementwise math of cgrad/ops/special.py -----------------------------------------------
UNIT = X / 2                                    # in (-1, 1)
PROB = 1 / (1 + np.exp(-X))                     # in (0, 1)
add("atan arctan sinh cosh asinh arcsinh erf erfc sinc frac deg2rad rad2deg", S())
add("acos arccos asin arcsin atanh arctanh erfinv", S(x=UNIT))
add("acosh arccosh", S(x=POS + 1))
add("logit", S(x=PROB), S(lambda m, x: (x, 0.2), x=PROB, tag="eps"))
add("atan_ arctan_ sinh_ cosh_ asinh_ arcsinh_ erf_ erfc_ sinc_ frac_ deg2rad_ rad2deg_",
    S(lambda m, x: (x.clone(),), forms={"method"}))
add("acos_ arccos_ asin_ arcsin_ atanh_ arctanh_ erfinv_",
    S(lambda m, x: (x.clone(),), x=UNIT, forms={"method"}))
add("acosh_ arccosh_", S(lambda m, x: (x.clone(),), x=POS + 1, forms={"method"}))
add("logit_", S(lambda m, x: (x.clone(),), x=PROB, forms={"method"}))
add("atan2 arctan2 hypot logaddexp logaddexp2 copysign",
    S(lambda m, x: (x, leaf(m, Y)), tag="tensor"),
    S(lambda m, x: (x, c(m, Y)), tag="constant"),
    S(lambda m, x: (c(m, Y), x), tag="rconstant"))
add("copysign", S(lambda m, x: (x, -1.0), tag="scalar"), extend=True)
add("xlogy", S(lambda m, x: (x, leaf(m, POS)), tag="tensor"),
    S(lambda m, x: (x, c(m, POS)), tag="constant"),
    S(lambda m, x: (c(m, Y), x), x=POS, tag="rconstant"),
    S(lambda m, x: (x, 2.0), tag="scalar"),
    S(lambda m, x: (2.0, x), x=POS, tag="rscalar", forms={"fn"}))
add("heaviside", S(lambda m, x: (x, c(m, Y))))
add("float_power", S(lambda m, x: (x, leaf(m, Y)), x=POS, tag="tensor"),
    S(lambda m, x: (x, c(m, Y)), x=POS, tag="constant"),
    S(lambda m, x: (x, 2), tag="scalar"),
    S(lambda m, x: (2.0, x), tag="rscalar", forms={"fn"}))
add("lerp", S(lambda m, x: (x, leaf(m, Y), 0.3), tag="scalar"),
    S(lambda m, x: (x, c(m, Y), leaf(m, PROB)), tag="tensor"),
    S(lambda m, x: (c(m, X), x, c(m, PROB)), x=Y, tag="rconstant"))
add("atan2_ arctan2_ hypot_ copysign_", S(lambda m, x: (x.clone(), leaf(m, Y)),
                                          forms={"method"}))
add("xlogy_", S(lambda m, x: (x.clone(), leaf(m, POS)), forms={"method"}))
add("heaviside_", S(lambda m, x: (x.clone(), c(m, Y)), forms={"method"}))
add("float_power_", S(lambda m, x: (x.clone(), 2), x=POS, forms={"method"}),
    S(lambda m, x: (x.clone(), leaf(m, Y)), x=POS, forms={"method"}, tag="tensor"))
add("lerp_", S(lambda m, x: (x.clone(), leaf(m, Y), 0.3), forms={"method"}),
    S(lambda m, x: (x.clone(), leaf(m, Y), leaf(m, PROB)), forms={"method"}, tag="tensor"))

# -- triangles and diagonals (cgrad/ops/triangular.py) ----------------------------------------
add("tril triu", S(), S(lambda m, x: (x, 1), tag="k"), S(lambda m, x: (x, -1), x=np.stack([X, Y]),
                                                         tag="batched"))
add("tril_ triu_", S(lambda m, x: (x.clone(), 1), forms={"method"}))
add("tril_indices triu_indices", S(lambda m, x: (3, 4, 1), forms={"fn"}))
add("diagonal", S(), S(lambda m, x: (x, 1, 1, 0), x=np.stack([X, Y]), tag="dims"))
add("diag", S(tag="matrix"), S(lambda m, x: (x, 1), x=V4, tag="vector"))
add("diag_embed", S(), S(lambda m, x: (x, 1, 0, 2), tag="dims"))
add("trace", S())

# -- products, cross, cdist (cgrad/ops/products.py) -------------------------------------------
B1, B2 = np.stack([X[:, :2], Y[:, :2]]), np.stack([W42[:2].T @ X[:2], W42[2:].T @ Y[:2]])
add("addmm", S(lambda m, x: (x, leaf(m, Y[:, :2]), leaf(m, W42[:2].T @ X[:2])), tag="leaf"),
    S(lambda m, x: (x, c(m, Y[:, :2]), c(m, X[:2])), lambda m, x: {"beta": 0.5, "alpha": 2},
      tag="constant"),
    S(lambda m, x: (c(m, [0.1, -0.2]), x, c(m, W42)), x=Y, tag="mat1"))
add("addmv", S(lambda m, x: (x, leaf(m, X), leaf(m, V4)), x=V4[:3], tag="leaf"),
    S(lambda m, x: (c(m, V4[:3]), c(m, X), x), lambda m, x: {"alpha": 2}, x=V4,
      tag="vec"))
add("addr", S(lambda m, x: (x, leaf(m, V4[:3]), leaf(m, V4)), tag="leaf"),
    S(lambda m, x: (c(m, X), x, c(m, V4)), lambda m, x: {"beta": 2}, x=V4[:3], tag="vec1"))
add("baddbmm", S(lambda m, x: (x, leaf(m, B1), leaf(m, B2)), x=np.stack([X, Y]), tag="leaf"),
    S(lambda m, x: (x, c(m, B1), c(m, B2)), lambda m, x: {"beta": 2}, x=V4, tag="constant"))
add("addbmm", S(lambda m, x: (x, leaf(m, B1), leaf(m, B2)), tag="leaf"),
    S(lambda m, x: (c(m, X), c(m, B1), x), lambda m, x: {"alpha": -1}, x=B2, tag="batch2"))
add("addcmul addcdiv", S(lambda m, x: (x, leaf(m, Y), c(m, POS + 0.5)), tag="leaf"),
    S(lambda m, x: (c(m, X), x, leaf(m, POS + 0.5)), lambda m, x: {"value": 2}, x=Y,
      tag="value"))
add("addmm_", S(lambda m, x: (x.clone(), leaf(m, Y[:, :2]), leaf(m, W42[:2].T @ X[:2])),
                forms={"method"}))
add("addmv_", S(lambda m, x: (x.clone(), leaf(m, X), leaf(m, V4)), x=V4[:3], forms={"method"}))
add("addr_", S(lambda m, x: (x.clone(), leaf(m, V4[:3]), leaf(m, V4)), forms={"method"}))
add("baddbmm_", S(lambda m, x: (x.clone(), leaf(m, B1), leaf(m, B2)), x=np.stack([X, Y]),
                  forms={"method"}))
add("addbmm_", S(lambda m, x: (x.clone(), leaf(m, B1), leaf(m, B2)), forms={"method"}))
add("addcmul_ addcdiv_", S(lambda m, x: (x.clone(), leaf(m, Y), c(m, POS + 0.5)),
                           forms={"method"}))
add("cross", S(lambda m, x: (x, leaf(m, Y[:, :3]), 1), x=X[:, :3], tag="leaf"),
    S(lambda m, x: (c(m, Y[:, :3]), x, 0), x=X[:, :3], tag="constant"))
add("cdist", S(lambda m, x: (x, leaf(m, Y[:2])), tag="leaf"),
    S(lambda m, x: (x, c(m, Y[:2]), 1.0), tag="p1"),
    S(lambda m, x: (x, c(m, Y[:2])), lambda m, x: {"compute_mode": "use_mm_for_euclid_dist"},
      tag="mm"))

# -- cartesian_prod, rot90, diff (cgrad/ops/joining.py) -------------------------------------
add("cartesian_prod", S(lambda m, x: (x, leaf(m, [0.5, -0.2])), x=V4))
add("rot90", S(), S(lambda m, x: (x, 2, (1, 0)), tag="k2"))
add("diff", S(), S(lambda m, x: (x, 1, 0, leaf(m, Y[:1])), tag="prepend"),
    S(lambda m, x: (x, 2), lambda m, x: {"append": c(m, Y[:, :1])}, tag="append"))
