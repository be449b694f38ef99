"""Built-in differentiable ops: each one a Function subclass named as torch names its node.

Forward works on the raw ndarrays (``t._data``) and returns arrays; backward is written with
cgrad ops so that ``create_graph=True`` gives higher derivatives.
"""
from cgrad.ops.elementwise import (BINOPS, Add, AddScalar, Div, DivScalar, Exp, Log, Mul,
                                  MulScalar, Neg, Pow, PowScalar, RDivScalar, RPow, RSubScalar,
                                  Sub, SubScalar, ToCopy)
from cgrad.ops.linalg import Dot, MatMul, Mm, Mv, T, Transpose, Unsqueeze, matmul
from cgrad.ops.reduce import Mean, MeanDim, Sum, SumDim, SumTo
from cgrad.ops.shape import Clone, Expand, Index, IndexBackward, Reshape, View

__all__ = ["Add", "Sub", "Mul", "Div", "Neg", "Pow", "RPow", "Exp", "Log", "ToCopy", "Mm",
           "Mv", "Dot", "MatMul", "T", "Sum", "Mean", "SumTo", "Reshape", "View", "Expand",
           "Index", "IndexBackward", "Clone"]


def _register():
    from cgrad import _C
    from cgrad._creation import tensor
    from cgrad.ops.elementwise import promote_any
    _C._register_binops(BINOPS, Neg, tensor, promote_any)


_register()
