"""Built-in differentiable ops: each one a Function subclass named as torch names its node.

Conventions for every op (see arithmetic.py for examples):
- set ``_node_name`` to torch's node name (``ExpBackward0``); that marks the class built-in;
- forward works on the raw ndarrays (``t._data``) and returns arrays (apply wraps them);
- forward receives ``ctx=None`` when no graph is recorded: guard ctx writes with
  ``if ctx is not None``; keep op-private data in ``ctx._aux`` (a slot, no dict) and tensors
  in ``ctx.save_for_backward``;
- backward is written with cgrad ops (so create_graph=True works) and returns one gradient
  per forward argument, unreduced for broadcasting (the engine sums to the input's shape);
- every module of OP_MODULES exports ``TENSOR_METHODS`` (installed on cgrad.Tensor) and
  ``FUNCTIONS`` (installed as cgrad.*): adding an op is one class plus one table row.

One module per family (imports run down this list; none imports a later one):

=================  ==========================================================================
promotion          result_type and the operators' result dtypes
arithmetic         + - * / ** neg exp log, ToCopy, add/sub with alpha, floor division, remainder
pointwise          unary math (abs, sqrt, sin, ...) and activations (relu, gelu, sigmoid, ...)
comparison         where, maximum/minimum, clamp, comparisons, logical and bitwise ops
reductions         sum/mean/sum_to, prod, max/min, var/std, logsumexp, softmax, cumsum, ...
indexing           a[idx], masked_fill/masked_select, take, select, nonzero
shape              reshape/view/expand/clone, transposes and permutations, squeeze, flatten
joining            cat/stack, split/chunk/unbind, repeat/tile, flip, roll, meshgrid,
                   cartesian_prod, rot90, diff
gather_scatter     index_select, index_add, gather, scatter, scatter_add
linalg             matmul and the products (mm, bmm, mv, dot, outer)
einsum             einsum
decompositions     inv, det, slogdet, solve, cholesky, qr, eigh, svd
norms              torch.norm, linalg.vector_norm / matrix_norm / norm
special            elementwise math beyond pointwise: inverse trigonometric and hyperbolic
                   functions, erf/erfc/erfinv, logit, sinc, frac, deg2rad; atan2, hypot,
                   logaddexp, xlogy, copysign, heaviside, float_power, lerp
triangular         tril/triu, tril_indices/triu_indices, diagonal, diag, diag_embed, trace
products           addmm/addmv/addr/baddbmm/addbmm, addcmul/addcdiv, cross, cdist
sorting            sort/argsort/msort, topk, kthvalue, median/nanmedian, mode, quantile
scans              cummax/cummin (values and indices), logcumsumexp
statistics         var_mean/std_mean, aminmax, histc, histogram, bincount
searching          searchsorted, bucketize, unique, unique_consecutive
inplace            in-place ops and assignment (a[idx] = v), rebasing history (the Tensor
                   methods that use it are installed by cgrad/tensor.py)
=================  ==========================================================================
"""
from cgrad.ops.arithmetic import (BINOPS, Add, AddScalar, Div, DivScalar, Exp, Log, Mul,
                                  MulScalar, Neg, Pow, PowScalar, RDivScalar, RPow, RSubScalar,
                                  Sub, SubScalar, ToCopy)
from cgrad.ops.linalg import Dot, MatMul, Mm, Mv, matmul
from cgrad.ops.reductions import Mean, MeanDim, Sum, SumDim, SumTo
from cgrad.ops.shape import Clone, Expand, Reshape, T, Transpose, Unsqueeze, View
from cgrad.ops.indexing import Index, IndexBackward
from cgrad.ops import (arithmetic, pointwise, comparison, reductions, indexing, shape,  # noqa: E402
                       joining, gather_scatter, linalg, einsum, decompositions, norms,
                       special, triangular, products, sorting, scans, statistics,
                       searching)

OP_MODULES = (arithmetic, pointwise, comparison, reductions, indexing, shape, joining,
              gather_scatter, linalg, einsum, decompositions, norms, special, triangular,
              products, sorting, scans, statistics, searching)

__all__ = ["Add", "Sub", "Mul", "Div", "Neg", "Pow", "RPow", "Exp", "Log", "ToCopy", "Mm",
           "Mv", "Dot", "MatMul", "T", "Sum", "Mean", "SumTo", "Reshape", "View", "Expand",
           "Index", "IndexBackward", "Clone"]


def _register():
    from cgrad import _C
    from cgrad._creation import tensor
    from cgrad.ops.promotion import promote_any
    _C._register_binops(BINOPS, Neg, tensor, promote_any)


_register()
