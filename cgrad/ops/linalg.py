"""Matrix products, transposes and permutations, with torch's semantics.

matmul: one node per call, named as torch names its outermost node
------------------------------------------------------------------
``torch.matmul`` is a composite: it dispatches on the ranks to dot / mv / mm, folds an N-D
operand into a matrix for one mm/mv call, or broadcasts the batch dims and calls bmm, and
its output's ``grad_fn`` is whatever that path ends with. cgrad computes every case as ONE
node (``np.matmul`` forward, BLAS backward) and gives it the name torch's output has,
decided by the same rules as torch's ``_matmul_impl`` / ``should_fold`` (which look at the
ranks, the ``requires_grad`` flags and the strides of the operands):

==========================================  =============================================
1-D @ 1-D                                   DotBackward0
2-D @ 1-D                                   MvBackward0
1-D @ 2-D                                   SqueezeBackward4
2-D @ 2-D                                   MmBackward0
N-D folded into one mm/mv, or bmm path      UnsafeViewBackward0
1-D/2-D @ N-D folded (transposed result)    CloneBackward0 (TransposeBackward0 when the
                                            transposed result needs no copy)
==========================================  =============================================

Shape and dtype errors are torch's for the path torch takes (the mm/mv/dot/bmm messages,
with the folded shapes where torch folds).

Backward
--------
``d/dA = G @ B^T`` and ``d/dB = A^T @ G``, summed over broadcast batch dims. With plain
``backward()`` (grad mode off inside backward) the gradients are computed directly on the
raw arrays: one BLAS call per gradient, transposes are views, and when one operand has no
batch dims its gradient contracts the batch and row dims in a single GEMM
(``np.tensordot``) instead of materialising a batch of products and summing it (the linear
layer case ``(b, m, k) @ (k, p)`` gives ``dW = A.reshape(-1, k).T @ G.reshape(-1, p)``).
Under ``create_graph=True`` the same formulas are built from cgrad ops, so any order of
derivative works. A node saves only the operands its gradients need.
"""
from __future__ import annotations


import numpy as np

from cgrad._C import TensorBase, _wrap, is_grad_enabled
from cgrad.autograd.function import Function
from cgrad.ops.shape import Transpose
from cgrad.ops import _gemm

# ----------------------------------------------------------------------------------------
# dtype names as torch prints them in these kernels' errors
# ----------------------------------------------------------------------------------------
_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def _tn(dt):
    return _TORCH_NAMES.get(dt.name, dt.name)


def _c10(dt):
    return _C10_NAMES.get(dt.name, dt.name)


# ----------------------------------------------------------------------------------------
# torch's checks of mm / mv / dot / bmm (in torch's order: shapes, then dtypes)
# ----------------------------------------------------------------------------------------
def _check_mm(sa, sb, da, db):
    if sa[1] != sb[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and "
                           f"{sb[0]}x{sb[1]})")
    if da != db:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {_c10(da)} != {_c10(db)}")
    if da.kind == "b":
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")


def _check_mv(sm, sv, dm, dv):
    if sm[1] != sv[0]:
        raise RuntimeError(f"size mismatch, got input ({sm[0]}), mat ({sm[0]}x{sm[1]}), "
                           f"vec ({sv[0]})")
    if dm != dv:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{_tn(dv)}, {_tn(dm)}, and {_tn(dv)}")
    if dm.kind == "b":
        raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")


def _check_dot(sa, sb, da, db):
    if da != db:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_tn(da)} and {_tn(db)}")
    if sa[0] != sb[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have "
            f"the same number of elements, but got {sa[0]} and {sb[0]} elements respectively")
    if da.kind == "b":
        raise NotImplementedError("\"dot\" not implemented for 'Bool'")


def _check_bmm(s1, s2, d1, d2):
    if s2[0] != s1[0] or s2[1] != s1[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{s1[0]}, {s1[2]}] but got: [{s2[0]}, {s2[1]}].")
    if d1 != d2:
        raise RuntimeError(f"expected scalar type {_tn(d1)} but found {_tn(d2)}")
    if d1.kind == "b":
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")


def _tensor_arg(x, fn, name, pos):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


# ----------------------------------------------------------------------------------------
# shared forward / backward of every product
# ----------------------------------------------------------------------------------------
def _matmul_np(A, B):
    """np.matmul; a contiguous batch of small matrices times one matrix is folded into one
    GEMM (a view), instead of one BLAS call per matrix of the batch."""
    if A.ndim == 2 and B.ndim == 2:
        return _gemm.mm(A, B)
    if A.ndim >= 3 and B.ndim <= 2 and A.shape[-2] < 32 and A.flags.c_contiguous and A.size:
        return _gemm.mm(A.reshape(-1, A.shape[-1]), B).reshape(A.shape[:-1] + B.shape[1:]) \
            if B.ndim == 2 else np.matmul(A.reshape(-1, A.shape[-1]), B).reshape(A.shape[:-1])
    return np.matmul(A, B)


def _save(ctx, a, b):
    """Save what the gradients need: b for dA, a for dB; and both shapes."""
    na, nb = ctx.needs_input_grad
    ctx.save_for_backward(a if nb else None, b if na else None)
    ctx._aux = (a._data.shape, b._data.shape)


def _sum_to_shape(arr, shape):
    from cgrad.ops.reductions import _sum_to_array
    return arr if arr.shape == shape else _sum_to_array(arr, shape)


def _grads_np(G, A, B, sa, sb, na, nb):
    """dA, dB on raw arrays (first-order backward): BLAS calls on views."""
    la, lb = len(sa), len(sb)
    ga = gb = None
    if la <= 2 and lb <= 2:
        if la == 2 and lb == 2:
            if na:
                ga = _gemm.mm(G, B.T)
            if nb:
                gb = _gemm.mm(A.T, G)
        elif la == 1 and lb == 1:
            if na:
                ga = np.multiply(G, B)
            if nb:
                gb = np.multiply(G, A)
        elif la == 2:                                   # mv: (n, k) @ (k,)
            if na:
                ga = np.multiply.outer(G, B)
            if nb:
                gb = np.matmul(A.T, G)
        else:                                           # (k,) @ (k, p)
            if na:
                ga = np.matmul(B, G)
            if nb:
                gb = np.multiply.outer(A, G)
        return ga, gb
    # batched: promote 1-D operands to matrices, as np.matmul does
    Ge = G
    if la == 1:
        Ge = Ge[..., None, :]
    if lb == 1:
        Ge = Ge[..., None]
    nd = Ge.ndim
    if na:
        Be = B[:, None] if lb == 1 else B
        if la <= 2:
            # A has no batch dims: contract batch and column dims in one GEMM
            ax = list(range(nd - 2)) + [nd - 1]
            ga = np.tensordot(Ge, Be, axes=(ax, ax))
        else:
            ga = _sum_to_shape(np.matmul(Ge, np.swapaxes(Be, -1, -2)), sa)
        if la == 1:
            ga = ga.reshape(sa)
    if nb:
        Ae = A[None, :] if la == 1 else A
        if lb <= 2:
            # B has no batch dims: contract batch and row dims in one GEMM
            ax = list(range(nd - 1))
            gb = np.tensordot(Ae, Ge, axes=(ax, ax))
        else:
            gb = _sum_to_shape(np.matmul(np.swapaxes(Ae, -1, -2), Ge), sb)
        if lb == 1:
            gb = gb.reshape(sb)
    return ga, gb


def _mT(x):
    return Transpose.apply(x, -2, -1)


def _prod(x, y):
    if x._data.ndim == 2 and y._data.ndim == 2:
        return Mm.apply(x, y)
    return MatMul.apply(x, y)


def _grads_graph(g, a, b, sa, sb, na, nb):
    """dA, dB from cgrad ops (create_graph=True): differentiable again."""
    from cgrad.ops.reductions import sum_to
    la, lb = len(sa), len(sb)
    if la == 1 and lb == 1:
        return (g * b if na else None), (g * a if nb else None)
    gg = g
    if la == 1:
        gg = gg.unsqueeze(-2)
    if lb == 1:
        gg = gg.unsqueeze(-1)
    ga = gb = None
    if na:
        ga = _prod(gg, _mT(b.unsqueeze(-1) if lb == 1 else b))
        ga = sum_to(ga, (1,) + sa if la == 1 else sa)
        if la == 1:
            ga = ga.reshape(sa)
    if nb:
        gb = _prod(_mT(a.unsqueeze(0) if la == 1 else a), gg)
        gb = sum_to(gb, sb + (1,) if lb == 1 else sb)
        if lb == 1:
            gb = gb.reshape(sb)
    return ga, gb


def _backward(ctx, g):
    a, b = ctx.saved_tensors
    sa, sb = ctx._aux
    na, nb = ctx.needs_input_grad
    if not is_grad_enabled():
        ga, gb = _grads_np(g._data, None if a is None else a._data,
                           None if b is None else b._data, sa, sb, na, nb)
        return (None if ga is None else _wrap(ga)), (None if gb is None else _wrap(gb))
    return _grads_graph(g, a, b, sa, sb, na, nb)


class MatMul(Function):
    """Broadcast matmul (np.matmul semantics); the node of torch's N-D matmul paths, whose
    output is an ``_unsafe_view`` of one mm/mv/bmm call.  dA = G @ B^T, dB = A^T @ G."""
    _node_name = "UnsafeViewBackward0"
    _cg_composite = True      # Note [Nothing needed] (cgrad/_C_engine.pxi)

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            _save(ctx, a, b)
        return _matmul_np(a._data, b._data)

    backward = staticmethod(_backward)


class MatMulClone(MatMul):
    """1-D/2-D @ N-D folded by torch into mm on the transposed operand, then made contiguous
    (its output node is the ``clone`` of ``.mT.contiguous()``)."""
    _node_name = "CloneBackward0"


class MatMulTranspose(MatMul):
    """As MatMulClone when the transposed result is already contiguous (no clone): torch's
    result is then the transpose of a temporary, a view (matmul returns
    MatMulTransposeBase(a, b).mT: Note [Views of a temporary] in cgrad/ops/einsum.py)."""
    _node_name = "TransposeBackward0"


class MatMulTransposeBase(MatMul):
    """The temporary of MatMulTranspose (torch's ``_unsafe_view`` of its mm): the product with
    its last two dims swapped, C-contiguous."""
    _node_name = "UnsafeViewBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            _save(ctx, a, b)
        return np.ascontiguousarray(np.swapaxes(_matmul_np(a._data, b._data), -1, -2))

    @staticmethod
    def backward(ctx, g):
        return _backward(ctx, g.transpose(-1, -2))


class VecMat(MatMul):
    """1-D @ 2-D (torch: ``unsqueeze(0).mm(b).squeeze_(0)``)."""
    _node_name = "SqueezeBackward4"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        if A.shape[0] != B.shape[0] or A.dtype != B.dtype or A.dtype.kind == "b":
            _check_mm((1, A.shape[0]), B.shape, A.dtype, B.dtype)
        if ctx is not None:
            _save(ctx, a, b)
        return np.matmul(A, B)


class Mm(MatMul):
    """mm(a, b) for 2-D a, b.  dA = G @ B^T, dB = A^T @ G."""
    _node_name = "MmBackward0"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        if A.ndim != 2:
            raise RuntimeError("self must be a matrix")
        if B.ndim != 2:
            raise RuntimeError("mat2 must be a matrix")
        if A.shape[1] != B.shape[0] or A.dtype != B.dtype or A.dtype.kind == "b":
            _check_mm(A.shape, B.shape, A.dtype, B.dtype)
        if ctx is not None:
            _save(ctx, a, b)
        return _gemm.mm(A, B)


class Mv(MatMul):
    """mv(a, v) for 2-D a, 1-D v.  dA = outer(G, v), dv = A^T @ G."""
    _node_name = "MvBackward0"

    @staticmethod
    def forward(ctx, a, v):
        A, V = a._data, v._data
        if A.ndim != 2 or V.ndim != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {A.ndim}, {V.ndim}")
        if A.shape[1] != V.shape[0] or A.dtype != V.dtype or A.dtype.kind == "b":
            _check_mv(A.shape, V.shape, A.dtype, V.dtype)
        if ctx is not None:
            _save(ctx, a, v)
        return np.matmul(A, V)


class Dot(MatMul):
    """dot(a, b) for 1-D a, b.  da = g * b, db = g * a."""
    _node_name = "DotBackward0"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        if A.ndim != 1 or B.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {A.ndim}D and {B.ndim}D tensors")
        if A.shape[0] != B.shape[0] or A.dtype != B.dtype or A.dtype.kind == "b":
            _check_dot(A.shape, B.shape, A.dtype, B.dtype)
        if ctx is not None:
            _save(ctx, a, b)
        return np.asarray(np.dot(A, B))


class Bmm(MatMul):
    """bmm(a, b) for 3-D a, b with equal batch sizes (no broadcasting)."""
    _node_name = "BmmBackward0"

    @staticmethod
    def forward(ctx, a, b):
        A, B = a._data, b._data
        if A.ndim != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if B.ndim != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
        _check_bmm(A.shape, B.shape, A.dtype, B.dtype)
        if ctx is not None:
            _save(ctx, a, b)
        return np.matmul(A, B)


# ----------------------------------------------------------------------------------------
# torch.matmul's dispatch (which decides the node name and the error message)
# ----------------------------------------------------------------------------------------
def _prod_int(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _infer_size(a, b):
    """torch's infer_size for the batch dims (its error message)."""
    nd = max(len(a), len(b))
    out = [0] * nd
    for i in range(nd - 1, -1, -1):
        off = nd - 1 - i
        da, db = len(a) - 1 - off, len(b) - 1 - off
        sa = a[da] if da >= 0 else 1
        sb = b[db] if db >= 0 else 1
        if sa != sb and sa != 1 and sb != 1:
            raise RuntimeError(f"The size of tensor a ({sa}) must match the size of tensor b "
                               f"({sb}) at non-singleton dimension {i}")
        out[i] = sb if sa == 1 else sa
    return tuple(out)


def _should_fold(s1, st1, rg1, s2, st2, rg2):
    """torch's should_fold: mm/mv on the N-D operand folded to a matrix instead of bmm
    (strides in bytes: the contiguity test is the same in any unit)."""
    larger = len(s1) >= len(s2)
    if larger:
        t1s, t1st, dim_t2, t2_rg = s1, st1, len(s2), rg2
    else:
        t1s = s2[:-2] + (s2[-1], s2[-2])
        t1st = st2[:-2] + (st2[-1], st2[-2])
        dim_t2, t2_rg = len(s1), rg1
    if not (len(t1s) >= 3 and dim_t2 <= 2):
        return False
    if t2_rg:
        return True
    if len(s1) == 2:
        return False
    if _prod_int(t1s) == 0:
        return True
    for i in range(len(t1s) - 2):
        if t1st[i] != t1st[i + 1] * t1s[i + 1]:
            return False
    return True


def _plan(s1, st1, rg1, d1, s2, st2, rg2, d2):
    """The class for an N-D matmul (at least one operand has 3 or more dims); raises the
    error torch raises on the path it takes."""
    n1, n2 = len(s1), len(s2)
    if _should_fold(s1, st1, rg1, s2, st2, rg2):
        transpose = n2 > n1
        if transpose:
            t1, t1d = s2[:-2] + (s2[-1], s2[-2]), d2
            t2, t2d = (s1 if n1 == 1 else (s1[1], s1[0])), d1
        else:
            t1, t1d, t2, t2d = s1, d1, s2, d2
        folded = (_prod_int(t1[:-1]), t1[-1])
        if len(t2) == 2:
            _check_mm(folded, t2, t1d, t2d)
            if not transpose:
                return MatMul
            n, p = s1[0], s2[-1]
            if n == 1 or p == 1 or _prod_int(s2[:-2]) * n * p == 0:
                return MatMulTranspose
            return MatMulClone
        _check_mv(folded, t2, t1d, t2d)
        return MatMul
    if n1 == 3 and n2 == 3 and s1[0] != s2[0]:
        # torch squeezes a broadcast batch of 1 that requires grad and retries (fold path)
        if s1[0] == 1 and rg1:
            return _plan(s1[1:], st1[1:], rg1, d1, s2, st2, rg2, d2)
        if s2[0] == 1 and rg2:
            return _plan(s1, st1, rg1, d1, s2[1:], st2[1:], rg2, d2)
    batch = _infer_size(s1[:-2], s2[:-2])
    nb = _prod_int(batch)
    rows = s1[-2] if n1 > 1 else 1
    m2 = s2[-2] if n2 > 1 else s2[0]
    cols = s2[-1] if n2 > 1 else 1
    _check_bmm((nb, rows, s1[-1]), (nb, m2, cols), d1, d2)
    return MatMul


def _folds_to_view(A):
    """Whether A.reshape(-1, A.shape[-1]) is a view: the leading dims collapse."""
    lead = [(n, s) for n, s in zip(A.shape[:-1], A.strides[:-1]) if n != 1]
    return all(lead[i][1] == lead[i + 1][1] * lead[i + 1][0] for i in range(len(lead) - 1))


# products with a sparse operand: cgrad.sparse's matmul and mm, handed over at import of cgrad
# (cgrad/__init__.py, _wire; sparse is a layer above the op library)
_sparse = {}


def matmul(input, other):
    """torch.matmul: dot, mv, mm, or broadcast batched product (one node, torch's name)."""
    a, b = input, other
    if not isinstance(a, TensorBase) or not isinstance(b, TensorBase):
        _tensor_arg(a, "matmul", "input", 1)
        _tensor_arg(b, "matmul", "other", 2)
    if a.is_sparse or b.is_sparse:     # sparse: sparse @ dense / dense @ sparse
        return _sparse["matmul"](a, b)
    A, B = a._data, b._data
    n1, n2 = A.ndim, B.ndim
    if n1 == 2 and n2 == 2:
        return Mm.apply(a, b)
    if n1 == 0 or n2 == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{n1}D and {n2}D")
    if n1 == 1:
        if n2 == 1:
            return Dot.apply(a, b)
        if n2 == 2:
            return VecMat.apply(a, b)
    elif n1 == 2 and n2 == 1:
        return Mv.apply(a, b)
    elif n2 <= 2 and (b.requires_grad or A.flags.c_contiguous):
        # N-D @ matrix/vector that torch folds into one mm/mv (the linear-layer case)
        if A.shape[-1] != B.shape[0] or A.dtype != B.dtype or A.dtype.kind == "b":
            folded = (_prod_int(A.shape[:-1]), A.shape[-1])
            (_check_mm if n2 == 2 else _check_mv)(folded, B.shape, A.dtype, B.dtype)
        if b.requires_grad and not A.flags.c_contiguous and not _folds_to_view(A):
            # torch folds `a` with a reshape that copies here, and its mm node saves the
            # copy: an in-place op on a's base after the product does not invalidate it
            a = a.contiguous()
        return MatMul.apply(a, b)
    cls = _plan(A.shape, A.strides, a.requires_grad, A.dtype,
                B.shape, B.strides, b.requires_grad, B.dtype)
    if n1 <= 2 and n2 >= 3 and a.requires_grad and not _folds_to_view(np.swapaxes(B, -1, -2)):
        # the mirrored fold: torch reshapes b.mT, which copies here, and its mm node saves
        # the copy (an in-place op on b after the product does not invalidate it)
        b = b.clone()
    if cls is MatMulTranspose:
        return MatMulTransposeBase.apply(a, b).transpose(-1, -2)
    return cls.apply(a, b)


# ----------------------------------------------------------------------------------------
# products: functions and methods with torch's argument checks
# ----------------------------------------------------------------------------------------
def mm(input, mat2):
    """Matrix product of two 2-D tensors (no broadcasting)."""
    _tensor_arg(input, "mm", "input", 1)
    _tensor_arg(mat2, "mm", "mat2", 2)
    if input.is_sparse or mat2.is_sparse:
        return _sparse["mm"](input, mat2)
    return Mm.apply(input, mat2)


def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors with the same batch size."""
    _tensor_arg(input, "bmm", "input", 1)
    _tensor_arg(mat2, "bmm", "mat2", 2)
    return Bmm.apply(input, mat2)


def mv(input, vec):
    """Matrix-vector product of a 2-D and a 1-D tensor."""
    _tensor_arg(input, "mv", "input", 1)
    _tensor_arg(vec, "mv", "vec", 2)
    return Mv.apply(input, vec)


def dot(input, tensor):
    """Inner product of two 1-D tensors with the same number of elements."""
    _tensor_arg(input, "dot", "input", 1)
    _tensor_arg(tensor, "dot", "tensor", 2)
    return Dot.apply(input, tensor)


def outer(input, vec2):
    """Outer product of two 1-D tensors: ``input[:, None] * vec2`` (torch's composition:
    a ``MulBackward0`` node, dtypes promoted as in ``*``)."""
    _tensor_arg(input, "outer", "input", 1)
    _tensor_arg(vec2, "outer", "vec2", 2)
    for name, x in (("self", input), ("vec2", vec2)):
        if x._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {x._data.ndim}-D")
    return input.reshape(input._data.shape[0], 1) * vec2


ger = outer


def vecdot(x, y, *, dim=-1):
    """linalg.vecdot: sum(x * y, dim) (real tensors)."""
    _tensor_arg(x, "linalg_vecdot", "x", 1)
    _tensor_arg(y, "linalg_vecdot", "y", 2)
    _check_float(x._data, "linalg.vecdot")
    if x._data.dtype != y._data.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {_tn(x._data.dtype)} and y of type {_tn(y._data.dtype)} "
                           "instead")
    _infer_size(x._data.shape, y._data.shape)        # torch's broadcasting error
    return (x * y).sum(dim)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
def _matmul_method(self, other):
    return matmul(self, other)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "matmul": _matmul_method, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer,
    "ger": ger,
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "matmul": matmul, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer, "ger": ger,
}


# ----------------------------------------------------------------------------------------
# SVD
# ----------------------------------------------------------------------------------------
def _check_float(arr, fn):
    if arr.dtype.kind not in "fc":
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_tn(arr.dtype)}")


def _check_matrix(arr, fn):
    if arr.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
