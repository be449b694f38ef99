"""Built-in differentiable ops: each one a Function subclass named as torch names its node.

Conventions for every op (see elementwise.py for examples):
- set ``_node_name`` to torch's node name (``ExpBackward0``); that marks the class built-in;
- forward works on the raw ndarrays (``t._data``) and returns arrays (apply wraps them);
- forward receives ``ctx=None`` when no graph is recorded: guard ctx writes with
  ``if ctx is not None``; keep op-private data in ``ctx._aux`` (a slot, no dict) and tensors
  in ``ctx.save_for_backward``;
- backward is written with cgrad ops (so create_graph=True works) and returns one gradient
  per forward argument, unreduced for broadcasting (the engine sums to the input's shape);
- modules unary, binary, reduce_ext, shape_ext, indexing, linalg_ext, linalg_dec export
  ``TENSOR_METHODS`` (installed on cgrad.Tensor) and ``FUNCTIONS`` (installed as cgrad.*).
"""
from cgrad.ops.elementwise import (BINOPS, Add, AddScalar, Div, DivScalar, Exp, Log, Mul,
                                  MulScalar, Neg, Pow, PowScalar, RDivScalar, RPow, RSubScalar,
                                  Sub, SubScalar, ToCopy)
from cgrad.ops.linalg import Dot, MatMul, Mm, Mv, T, Transpose, Unsqueeze, matmul
from cgrad.ops.reduce import Mean, MeanDim, Sum, SumDim, SumTo
from cgrad.ops.shape import Clone, Expand, Index, IndexBackward, Reshape, View
from cgrad.ops import unary, binary, reduce_ext, shape_ext, indexing, linalg_ext  # noqa: E402
from cgrad.ops import linalg_dec  # noqa: E402

EXTENSION_MODULES = (unary, binary, reduce_ext, shape_ext, indexing, linalg_ext, linalg_dec)

__all__ = ["Add", "Sub", "Mul", "Div", "Neg", "Pow", "RPow", "Exp", "Log", "ToCopy", "Mm",
           "Mv", "Dot", "MatMul", "T", "Sum", "Mean", "SumTo", "Reshape", "View", "Expand",
           "Index", "IndexBackward", "Clone"]


def _register():
    from cgrad import _C
    from cgrad._creation import tensor
    from cgrad.ops.elementwise import promote_any
    _C._register_binops(BINOPS, Neg, tensor, promote_any)


_register()
