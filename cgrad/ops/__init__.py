"""Built-in differentiable ops: each one a Function subclass named as torch names its node.

Forward works on the raw ndarrays (``t._data``) and returns arrays; backward is written with
cgrad ops so that ``create_graph=True`` gives higher derivatives.
"""
from cgrad.ops.elementwise import Add, Div, Exp, Log, Mul, Neg, Pow, RPow, Sub, ToCopy
from cgrad.ops.linalg import Dot, MatMul, Mm, Mv, T, Transpose, Unsqueeze, matmul
from cgrad.ops.reduce import Mean, Sum, SumTo
from cgrad.ops.shape import Clone, Expand, Index, IndexBackward, Reshape, View

__all__ = ["Add", "Sub", "Mul", "Div", "Neg", "Pow", "RPow", "Exp", "Log", "ToCopy", "Mm",
           "Mv", "Dot", "MatMul", "T", "Sum", "Mean", "SumTo", "Reshape", "View", "Expand",
           "Index", "IndexBackward", "Clone"]
