"""Linear algebra beyond the core products (see cgrad/ops/__init__.py for the conventions).

* ``mm``, ``bmm``, ``mv``, ``dot``, ``matmul``, ``outer``/``ger``: torch's functions and
  Tensor methods over the products of cgrad/ops/linalg.py (argument checks as torch's).
* ``t``, ``transpose``/``swapdims``/``swapaxes``, ``permute``, ``x.T``, ``x.mT``, ``x.mH``,
  ``x.H``, ``adjoint``: views, with torch's node names and errors.
* ``einsum``: NumPy's subscripts (``...``, implicit output, spaces) with torch's parsing,
  broadcasting of size-1 dimensions and error messages; also the sublist form
  ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. One node per call, named as torch's output
  node (``ViewBackward0`` for a contraction of several operands, ``MulBackward0`` without
  one; ``SumBackward1`` / ``PermuteBackward0`` for a single operand). The gradient of each
  operand is one einsum of the output gradient with the other operands (dims summed only in
  that operand are broadcast back as a view; repeated subscripts scatter onto the diagonal),
  built from cgrad ops, so any order of derivative works. Evaluation: a two-operand
  contraction is one batched ``np.matmul`` on permuted operands (torch's bmm path: BLAS even
  with batch subscripts, where NumPy's einsum loops are not); other equations use
  ``np.einsum``, with NumPy's path optimiser for three or more operands and large
  contractions. Plans are cached per equation and shapes.
* ``linalg.svd`` / ``linalg.svdvals`` (one ``LinalgSvdBackward0`` node; backward is torch's
  ``svd_backward`` in cgrad ops, so singular values, nuclear and spectral norms are twice
  differentiable), ``linalg.vector_norm``, ``linalg.matrix_norm`` (ord 'fro', 'nuc', +-1,
  +-2, +-inf), ``linalg.norm``, ``linalg.vecdot``: composed exactly as torch composes them,
  so node names and errors agree. They are exposed as the ``cgrad.linalg`` namespace
  (cgrad/linalg.py).
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad.autograd.function import Function
from cgrad.ops import linalg as _la
from cgrad.ops.linalg import (Bmm, Dot, Mm, Mv, Permute, T, Transpose, _tensor_arg, _tn,
                              matmul, permute_dims, reverse_dims)

_INF = float("inf")


# ----------------------------------------------------------------------------------------
# products: functions and methods with torch's argument checks
# ----------------------------------------------------------------------------------------
def mm(input, mat2):
    """Matrix product of two 2-D tensors (no broadcasting)."""
    _tensor_arg(input, "mm", "input", 1)
    _tensor_arg(mat2, "mm", "mat2", 2)
    if input.is_sparse or mat2.is_sparse:
        from cgrad.sparse._ops import mm as sparse_aware
        return sparse_aware(input, mat2)
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


# ----------------------------------------------------------------------------------------
# transposes
# ----------------------------------------------------------------------------------------
def t(input):
    """Transpose of a tensor with at most 2 dims (0-D and 1-D tensors are returned as is)."""
    return T.apply(input)


def transpose(input, dim0, dim1):
    """A view with dims dim0 and dim1 swapped."""
    return Transpose.apply(input, dim0, dim1)


swapdims = transpose


def swapaxes(input, axis0, axis1):
    """transpose with NumPy's name (and torch's argument names for it)."""
    return Transpose.apply(input, axis0, axis1)


def permute(input, dims):
    """A view with the dims reordered: ``out.shape[i] == input.shape[dims[i]]``."""
    if isinstance(dims, TensorBase):
        dims = dims.tolist()
    return Permute.apply(input, tuple(dims))


def _permute_method(self, *args, dims=None):
    """x.permute(1, 0), x.permute((1, 0)) or x.permute(dims=(1, 0))."""
    if dims is not None:
        if args:
            raise TypeError("permute() got multiple values for argument 'dims'")
        args = (dims,)
    return Permute.apply(self, permute_dims(args))


def _no_complex(x, what):
    if x._data.dtype.kind == "c":
        raise NotImplementedError(f"{what} of a complex tensor (conjugation) is not supported")


def _mT(self):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {nd}-D tensor.")
    return Transpose.apply(self, -2, -1)


def _mH(self):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {nd}-D tensor.")
    _no_complex(self, "tensor.mH")
    return Transpose.apply(self, -2, -1)


def _H(self):
    nd = self._data.ndim
    if nd != 2:
        extra = ". For batches of matrices, consider using tensor.mH" if nd > 2 else "."
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{nd}-D tensor{extra}")
    _no_complex(self, "tensor.H")
    return Transpose.apply(self, 0, 1)


def adjoint(input):
    """The conjugate transpose of the last two dims (the transpose for real tensors)."""
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {nd}-D tensor.")
    _no_complex(input, "adjoint()")
    return Transpose.apply(input, -2, -1)


# ----------------------------------------------------------------------------------------
# einsum
# ----------------------------------------------------------------------------------------
_ELL = None                      # the ellipsis in a parsed operand
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Two-operand contractions at least this large (product of all label sizes) go through
# NumPy's path optimiser (tensordot -> BLAS); below it c_einsum's lower overhead wins.
_OPTIMIZE_MIN_WORK = 1 << 15


def _is_label(c):
    return c.isascii() and c.isalpha()


def _parse_lhs(lhs, num_ops):
    op_labels = [[] for _ in range(num_ops)]
    ell_seen = False
    cur = 0
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == " ":
            pass
        elif c == ".":
            if ell_seen:
                raise RuntimeError(f"einsum(): found '.' for operand {cur} for which an "
                                   "ellipsis was already found")
            if not (i + 2 < len(lhs) and lhs[i + 1] == "." and lhs[i + 2] == "."):
                raise RuntimeError(f"einsum(): found '.' for operand {cur} that is not part "
                                   "of any ellipsis")
            i += 2
            op_labels[cur].append(_ELL)
            ell_seen = True
        elif c == ",":
            cur += 1
            if cur >= num_ops:
                raise RuntimeError(
                    "einsum(): fewer operands were provided than specified in the equation")
            ell_seen = False
        else:
            if not _is_label(c):
                raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the "
                                   "equation string, subscripts must be in [a-zA-Z]")
            op_labels[cur].append(c)
        i += 1
    if cur != num_ops - 1:
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    return op_labels


def _parse_rhs(rhs, offset, counts):
    out = []
    ell = False
    i = 0
    while i < len(rhs):
        c = rhs[i]
        if c == " ":
            pass
        elif c == ".":
            if ell:
                raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was "
                                   "already found")
            if not (i + 2 < len(rhs) and rhs[i + 1] == "." and rhs[i + 2] == "."):
                raise RuntimeError("einsum(): found '.' for output that is not part of any "
                                   "ellipsis (...)")
            i += 2
            out.append(_ELL)
            ell = True
        else:
            if not _is_label(c):
                raise RuntimeError(f"einsum(): invalid subscript given at index {offset + i} "
                                   "in the equation string, subscripts must be in [a-zA-Z]")
            if not counts.get(c) or c in out:
                raise RuntimeError(
                    f"einsum(): output subscript {c}"
                    + (" appears more than once in the output" if c in out else
                       " does not appear in the equation for any input operand"))
            out.append(c)
        i += 1
    return out


def _einsum_spec(equation, shapes):
    """Parse as torch does (same checks and messages) and translate to explicit NumPy
    subscripts: returns (input subscripts, output subscript, has_contraction)."""
    num_ops = len(shapes)
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    op_labels = _parse_lhs(lhs, num_ops)
    counts = {}
    ell_num_dim = 0
    for i, labels in enumerate(op_labels):
        nd = len(shapes[i])
        nl = len(labels)
        has_ell = _ELL in labels
        if has_ell:
            nl -= 1
            ell_num_dim = builtins.max(ell_num_dim, nd - nl)
        for c in labels:
            if c is not _ELL:
                counts[c] = counts.get(c, 0) + 1
        if (nl > nd) if has_ell else (nl != nd):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({nl}) "
                + ("is more than" if has_ell else "does not match")
                + f" the number of dimensions ({nd}) for operand {i}"
                + ("" if has_ell else " and no ellipsis was given"))
    if arrow < 0:
        out = [_ELL] + sorted(c for c, n in counts.items() if n == 1)
    else:
        out = _parse_rhs(equation[arrow + 2:], len(lhs) + 2, counts)

    # sizes: size-1 dims broadcast; repeated subscripts need equal sizes
    label_size = {}
    ell_sizes = [1] * ell_num_dim
    for i, labels in enumerate(op_labels):
        shape = shapes[i]
        dim = 0
        seen = {}
        for c in labels:
            if c is _ELL:
                n_ell = len(shape) - (len(labels) - 1)
                for j in range(ell_num_dim - n_ell, ell_num_dim):
                    s = shape[dim]
                    if s != 1:
                        if ell_sizes[j] != 1 and ell_sizes[j] != s:
                            raise RuntimeError(
                                f"einsum(): dimension {dim} covered by ellipsis in operand "
                                f"{i}has size {s} which does not broadcast with previously "
                                f"seen ellipsis with size {ell_sizes[j]} for the respective "
                                "dimension")
                        ell_sizes[j] = s
                    dim += 1
            elif c not in seen:
                s = shape[dim]
                if s != 1:
                    prev = label_size.get(c, 1)
                    if prev != 1 and prev != s:
                        raise RuntimeError(
                            f"einsum(): subscript {c} has size {s} for operand {i} which does "
                            f"not broadcast with previously seen size {prev}")
                    label_size[c] = s
                seen[c] = dim
                dim += 1
            else:
                first = seen[c]
                if shape[dim] != shape[first]:
                    raise RuntimeError(
                        f"einsum(): subscript {c} is repeated for operand {i} but the sizes "
                        f"don't match, {shape[dim]} != {shape[first]}")
                dim += 1

    # explicit letters for the dims covered by ellipses
    free = [c for c in _LETTERS if c not in counts]
    if ell_num_dim > len(free):
        raise RuntimeError("einsum(): too many subscripts in the equation (at most 52 labels)")
    ell_letters = "".join(free[:ell_num_dim])
    subs = []
    for i, labels in enumerate(op_labels):
        n_ell = len(shapes[i]) - (len(labels) - 1)
        subs.append("".join(ell_letters[ell_num_dim - n_ell:] if c is _ELL else c
                            for c in labels))
    out_sub = "".join(ell_letters if c is _ELL else c for c in out)
    contraction = len(set("".join(subs))) > len(out_sub) or (
        ell_num_dim > 0 and _ELL not in out)
    return tuple(subs), out_sub, contraction


def _optimize(subs, shapes):
    if len(subs) >= 3:
        return "greedy"
    if len(subs) == 2:
        sizes = {}
        for sub, shape in zip(subs, shapes):
            for c, s in zip(sub, shape):
                sizes[c] = builtins.max(sizes.get(c, 1), s)
        if set(subs[0]) & set(subs[1]) and math.prod(sizes.values()) >= _OPTIMIZE_MIN_WORK:
            return "greedy"
    return False


def _bmm_plan(sa, sb, out, sha, shb):
    """A two-operand contraction as one batched matmul (torch's sumproduct_pair): permute
    each operand to (batch, kept, contracted) / (batch, contracted, kept), fold to 3-D and
    call np.matmul (BLAS; NumPy's own einsum loops do not use BLAS when a batch label is
    kept). None when the equation does not have that form (repeated subscripts, subscripts
    summed in one operand only, size-1 broadcasting, or nothing contracted)."""
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb):
        return None
    size = {}
    for sub, shape in ((sa, sha), (sb, shb)):
        for c, n in zip(sub, shape):
            if size.setdefault(c, n) != n:
                return None
    in_a, in_b = set(sa), set(sb)
    if any(c not in out for c in in_a ^ in_b):
        return None
    contr = [c for c in sa if c in in_b and c not in out]
    if not contr:
        return None
    batch = [c for c in out if c in in_a and c in in_b]
    keep_a = [c for c in out if c in in_a and c not in in_b]
    keep_b = [c for c in out if c in in_b and c not in in_a]

    def n(cs):
        return math.prod(size[c] for c in cs)

    order = batch + keep_a + keep_b
    return ("bmm", tuple(sa.index(c) for c in batch + keep_a + contr),
            (n(batch), n(keep_a), n(contr)),
            tuple(sb.index(c) for c in batch + contr + keep_b),
            (n(batch), n(contr), n(keep_b)),
            tuple(size[c] for c in order), tuple(order.index(c) for c in out))


_PLANS: dict = {}


def _einsum_plan(subs, out, shapes):
    """How to evaluate an einsum (cached per equation and shapes): a batched matmul, or
    np.einsum with or without NumPy's path optimiser."""
    key = (subs, out, shapes)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _bmm_plan(subs[0], subs[1], out, *shapes) if len(subs) == 2 else None
        if plan is None:
            plan = ("einsum", ",".join(subs) + "->" + out, _optimize(subs, shapes))
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _einsum_np(subs, out, arrays):
    plan = _einsum_plan(subs, out, tuple(a.shape for a in arrays))
    if plan[0] == "bmm":
        _, pa, sa, pb, sb, shape, perm = plan
        A, B = arrays
        res = np.matmul(A.transpose(pa).reshape(sa), B.transpose(pb).reshape(sb))
        return res.reshape(shape).transpose(perm)
    return np.asarray(np.einsum(plan[1], *arrays, optimize=plan[2]))


class Einsum(Function):
    """einsum over explicit subscripts ``spec = (input subscripts, output subscript,
    to_int64)``.  d/d(operand k) = einsum of g with the other operands."""
    _node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, spec, *ops):
        subs, out, to_long = spec
        arrays = [o._data for o in ops]
        if to_long:
            arrays = [x.astype(np.int64) for x in arrays]
        if ctx is not None:
            # as torch: an operand is kept only for the gradient of another operand
            needs = ctx.needs_input_grad[1:]
            keep = [o if True in needs[:k] + needs[k + 1:] else None for k, o in enumerate(ops)]
            if builtins.any(o is not None for o in keep):
                ctx.save_for_backward(*keep)
            ctx._aux = (spec, tuple([o._data.shape for o in ops]))
        return _einsum_np(subs, out, arrays)

    @staticmethod
    def backward(ctx, g):
        (subs, out, _), shapes = ctx._aux
        needs = ctx.needs_input_grad
        ops = ctx.saved_tensors or (None,) * len(subs)
        grads = [None]
        for k in range(len(subs)):
            grads.append(_einsum_grad(g, ops, shapes, subs, out, k) if needs[k + 1] else None)
        return tuple(grads)


class EinsumMul(Einsum):
    """Several operands, no summed subscript (torch ends with a mul)."""
    _node_name = "MulBackward0"


class EinsumSum(Einsum):
    """One operand with summed subscripts (torch ends with a sum)."""
    _node_name = "SumBackward1"


class EinsumPermute(Einsum):
    """One operand, nothing summed (torch ends with a permute)."""
    _node_name = "PermuteBackward0"


def _einsum_grad(g, ops, shapes, subs, out, k):
    sub = subs[k]
    uniq = "".join(dict.fromkeys(sub))
    others = [j for j in range(len(subs)) if j != k]
    avail = set(out).union(*(subs[j] for j in others))
    present = "".join(c for c in uniq if c in avail)
    gk = Einsum.apply(((out,) + tuple(subs[j] for j in others), present, False),
                      g, *(ops[j] for j in others))
    shape = shapes[k]
    gshape = gk._data.shape
    full = tuple(gshape[present.index(c)] if c in present else 1 for c in uniq)
    if len(present) != len(uniq):
        gk = gk.reshape(full)
    # subscripts summed only in this operand, or of size 1 everywhere else (broadcast): the
    # gradient is constant along them (a broadcast view)
    target = tuple(shape[sub.index(c)] if f == 1 else f for c, f in zip(uniq, full))
    if target != full:
        gk = gk._expand_to(target)
    if len(uniq) != len(sub):
        gk = DiagScatter.apply(gk, sub, uniq)
    return gk


class DiagScatter(Function):
    """The gradient of a diagonal: g (over unique subscripts) written onto the diagonal of
    zeros shaped as the operand's repeated subscripts.  d/dg = the diagonal again."""
    _node_name = "DiagonalBackwardBackward0"

    @staticmethod
    def forward(ctx, g, sub, uniq):
        G = g._data
        size = dict(zip(uniq, G.shape))
        out = np.zeros(tuple(size[c] for c in sub), dtype=G.dtype)
        strides = tuple(builtins.sum(st for d, st in zip(sub, out.strides) if d == c)
                        for c in uniq)
        np.lib.stride_tricks.as_strided(out, G.shape, strides, writeable=True)[...] = G
        if ctx is not None:
            ctx._aux = (sub, uniq)
        return out

    @staticmethod
    def backward(ctx, gg):
        sub, uniq = ctx._aux
        return Einsum.apply(((sub,), uniq, False), gg), None, None


def _sublist_to_str(sub):
    def lab(n):
        if n is Ellipsis:
            return "..."
        n = operator.index(n)
        if 0 <= n < 26:
            return chr(ord("A") + n)
        if 26 <= n < 52:
            return chr(ord("a") + n - 26)
        raise ValueError("einsum(): subscript in subscript list is not within the valid range "
                         "[0, 52)")
    return "".join(lab(n) for n in sub)


def einsum(*args):
    """Einstein summation: ``einsum("ij,jk->ik", a, b)``, ``einsum("ij,jk", [a, b])`` or the
    sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``; NumPy/torch subscripts with
    ``...``, implicit output (``...`` then the subscripts seen once, sorted) and
    broadcasting of size-1 dims."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if not isinstance(args[0], (str, TensorBase)):
        from cgrad._checks import type_name
        raise TypeError(f"einsum(): argument 'equation' (position 1) must be str, not "
                        f"{type_name(args[0])}")
    if isinstance(args[0], str):
        equation = args[0]
        operands = args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
    else:
        operands = args[0::2][: len(args) // 2]
        subs = [_sublist_to_str(s) for s in args[1::2]]
        equation = ",".join(subs[: len(operands)])
        if len(args) % 2 == 1:
            equation += "->" + _sublist_to_str(args[-1])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for i, op in enumerate(operands):
        if not isinstance(op, TensorBase):
            raise TypeError(f"einsum(): argument 'tensors' must be tuple of Tensors, but found "
                            f"element of type {type(op).__name__} at pos {i}")
    shapes = [op._data.shape for op in operands]
    subs, out, contraction = _einsum_spec(equation, shapes)
    dts = [op._data.dtype for op in operands]
    num = len(operands)
    to_long = False
    if any(d != dts[0] for d in dts):
        if contraction:
            other = next(d for d in dts if d != dts[0])
            raise RuntimeError(f"expected scalar type {_tn(dts[0])} but found {_tn(other)}")
        from cgrad.ops.binary import result_type
        # operands are broadcast views by then: no 0-d priority rule (f64 0-d * f32 -> f64)
        rt = result_type(*(np.empty((1,), d) for d in dts))
        operands = tuple(op if op._data.dtype == rt else op.to(rt) for op in operands)
    elif contraction:
        if num == 1:
            to_long = dts[0].kind in "biu"
        elif dts[0].kind == "b":
            raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    if num > _EINSUM_MAX_OPERANDS:
        return _einsum_chain(subs, out, operands)
    if num == 1:
        cls = EinsumSum if contraction else EinsumPermute
    else:
        cls = Einsum if contraction else EinsumMul
    return cls.apply((subs, out, to_long), *operands)


# More operands than this are contracted pairwise, left to right (torch always does; NumPy's
# einsum refuses more than 64 operands, and one node over n operands has an O(n^2) backward).
_EINSUM_MAX_OPERANDS = 16


def _einsum_chain(subs, out, operands):
    """einsum of many operands as a chain of two-operand einsums: each step keeps only the
    subscripts that the output or a later operand still needs (one node per step)."""
    n = len(subs)
    later = [None] * (n + 1)                 # later[k]: subscripts in out or subs[k:]
    acc = set(out)
    later[n] = frozenset(acc)
    for k in range(n - 1, 0, -1):
        acc.update(subs[k])
        later[k] = frozenset(acc)
    cur, cur_sub = operands[0], subs[0]
    for k in range(1, n):
        sk = subs[k]
        if k == n - 1:
            res = out
        else:
            keep = later[k + 1]
            res = "".join(c for c in dict.fromkeys(cur_sub + sk) if c in keep)
        contraction = len(set(cur_sub + sk)) > len(res)
        cls = Einsum if contraction else EinsumMul
        cur = cls.apply(((cur_sub, sk), res, False), cur, operands[k])
        cur_sub = res
    return cur


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


def _eye(k, dtype):
    return _wrap(np.eye(k, dtype=dtype))


def _diag_embed(v):
    return v.unsqueeze(-1) * _eye(v._data.shape[-1], v._data.dtype)


def _svd_np(A, full_matrices):
    m, n = A.shape[-2:]
    if A.size == 0:
        k = builtins.min(m, n)
        batch = A.shape[:-2]
        U = np.zeros(batch + (m, m if full_matrices else k), A.dtype)
        Vh = np.zeros(batch + (n if full_matrices else k, n), A.dtype)
        if full_matrices:
            U[...] = np.eye(m, dtype=A.dtype)
            Vh[...] = np.eye(n, dtype=A.dtype)
        return U, np.zeros(batch + (k,), A.dtype), Vh
    return np.linalg.svd(A, full_matrices=full_matrices)


class Svd(Function):
    """A = U diag(S) Vh (outputs U, S, Vh; one LinalgSvdBackward0 node).  Backward: torch's
    svd_backward in cgrad ops (gradients of U and Vh beyond the first min(m, n) columns and
    rows of full matrices are ignored, as torch)."""
    _node_name = "LinalgSvdBackward0"

    @staticmethod
    def forward(ctx, a, full_matrices):
        A = a._data
        U, S, Vh = _svd_np(A, full_matrices)
        if ctx is None:
            return U, S, Vh
        ctx.set_materialize_grads(False)
        U, S, Vh = _wrap(U), _wrap(S), _wrap(Vh)
        ctx.save_for_backward(U, S, Vh)
        ctx._aux = full_matrices
        return U, S, Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        U, S, Vh = ctx.saved_tensors
        if gU is None and gS is None and gVh is None:
            return None, None
        k = S._data.shape[-1]
        if ctx._aux:
            if U._data.shape[-1] != k:
                U = U[..., :k]
                gU = None if gU is None else gU[..., :k]
            if Vh._data.shape[-2] != k:
                Vh = Vh[..., :k, :]
                gVh = None if gVh is None else gVh[..., :k, :]
        return _svd_backward(gU, gS, gVh, U, S, Vh), None


def _svd_backward(gU, gS, gVh, U, S, Vh):
    """torch's svd_backward (FunctionsManual.cpp), real case."""
    m, n = U._data.shape[-2], Vh._data.shape[-1]
    mT = _la._mT
    if gU is None and gVh is None:
        if m >= n:
            return matmul(U, gS.unsqueeze(-1) * Vh)
        return matmul(U * gS.unsqueeze(-2), Vh)

    def skew(X):
        return X - mT(X)

    UhgU = skew(matmul(mT(U), gU)) if gU is not None else None
    VhgV = skew(matmul(Vh, mT(gVh))) if gVh is not None else None
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + _eye(S._data.shape[-1], S._data.dtype)
    if gU is not None:
        if gVh is not None:
            gA = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
        else:
            gA = (UhgU / E) * S.unsqueeze(-2)
    else:
        gA = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        gA = gA + _diag_embed(gS)
    if m > n and gU is not None:
        gA = matmul(U, gA)
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - matmul(U, matmul(mT(U), gUSinv))
        return matmul(gA, Vh)
    if m < n and gVh is not None:
        gA = matmul(gA, Vh)
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - matmul(matmul(SinvgVh, mT(Vh)), Vh)
        return matmul(U, gA)
    return matmul(U, matmul(gA, Vh)) if m >= n else matmul(matmul(U, gA), Vh)


def _svd_checks(A):
    _check_matrix(A, "linalg.svd")
    _check_float(A, "linalg.svd")
    if A.dtype == np.float16:
        raise NotImplementedError("\"linalg_svd_cpu\" not implemented for 'Half'")
    if A.dtype.kind == "c":
        raise NotImplementedError("linalg.svd of a complex tensor is not supported")


def _return_types():
    from cgrad.ops.reduce_ext import _return_type, return_types
    return getattr(return_types, "linalg_svd", None) or _return_type("linalg_svd",
                                                                     ("U", "S", "Vh"))


def svd(A, full_matrices=True, *, driver=None):
    """linalg.svd: ``(U, S, Vh)`` with ``A = U @ diag(S) @ Vh`` (S descending)."""
    if driver is not None:
        raise RuntimeError("cgrad.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    _svd_checks(A._data)
    return _return_types()(*Svd.apply(A, bool(full_matrices)))


def svdvals(A, *, driver=None):
    """linalg.svdvals: the singular values of A (descending)."""
    if driver is not None:
        raise RuntimeError("cgrad.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    _svd_checks(A._data)
    return Svd.apply(A, False)[1]


# ----------------------------------------------------------------------------------------
# norms
# ----------------------------------------------------------------------------------------
def _fmt_num(x):
    """A number as torch prints a Scalar in messages (C++ ostream: 2, -1.5, inf)."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return str(int(x))
    return f"{float(x):g}"


def _check_norm_dtype(dtype, arr, fn):
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        raise RuntimeError(f"{fn}: dtype should be floating point or complex, but got "
                           f"{_tn(dtype)}")
    if not np.can_cast(arr.dtype, dtype, "safe"):
        raise RuntimeError(f"{fn}: the dtype of the input ({_tn(arr.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({_tn(dtype)})")
    return dtype


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """linalg.vector_norm: the ord-norm of x over dim (all dims when None or ())."""
    from cgrad.ops.reduce_ext import VectorNorm, _dims
    if isinstance(ord, (str, type(None), bool)) or not isinstance(ord, (int, float, np.number)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not "
                        f"{type(ord).__name__}")
    arr = x._data
    _check_float(arr, "linalg.vector_norm")
    dt = _check_norm_dtype(dtype, arr, "linalg.vector_norm")
    p = float(ord)
    dims = _dims(dim, arr.ndim)
    if arr.size == 0 and (p < 0 or p == _INF):
        if dims is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {_fmt_num(ord)} norm on "
                               "an empty tensor because the operation does not have an "
                               "identity")
        for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
            if arr.shape[d] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {_fmt_num(ord)} norm on the "
                    f"dimension {d}because this dimension is empty and the operation does "
                    "not have an identity")
    if dt is not None and dt != arr.dtype:
        x = x.to(dt)
    return VectorNorm.apply(x, p, dims, bool(keepdim))


def _matrix_norm_checks(A, dim, dtype, low_precision):
    arr = A._data
    _check_matrix(arr, "linalg.matrix_norm")
    _check_float(arr, "linalg.matrix_norm")
    if not low_precision and arr.dtype == np.float16:
        raise RuntimeError("linalg.matrix_norm: Low precision dtypes not supported. Got Half")
    dim = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    if len(dim) != 2:
        raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                           + " ".join(str(d) for d in dim))
    d0, d1 = (_la._wrap_dim(d, arr.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    return d0, d1, _check_norm_dtype(dtype, arr, "linalg.matrix_norm")


def _backshift(d0, d1, nd):
    """torch's create_dim_backshift_permutation: (other dims..., d0, d1)."""
    return tuple(i for i in range(nd) if i not in (d0, d1)) + (d0, d1)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """linalg.matrix_norm: 'fro', 'nuc', 2/-2 (largest/smallest singular value), 1/-1 (max/min
    column abs-sum), inf/-inf (max/min row abs-sum) over the two dims `dim`."""
    from cgrad.ops.reduce_ext import amax, amin
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
        d0, d1, dt = _matrix_norm_checks(A, dim, dtype, ord != "nuc")
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim, dtype=dtype)
        A_ = A if dt is None or dt == A._data.dtype else A.to(dt)
        perm = _backshift(d0, d1, A._data.ndim)
        res = svdvals(Permute.apply(A_, perm)).sum(-1, keepdim=bool(keepdim))
        if keepdim:
            res = Permute.apply(res.unsqueeze(-1), _inverse(perm))
        return res
    p = float(ord)
    if abs(p) not in (1.0, 2.0, _INF):
        raise RuntimeError(f"linalg.matrix_norm: Order {_fmt_num(ord)} not supported.")
    d0, d1, dt = _matrix_norm_checks(A, dim, dtype, abs(p) != 2.0)

    def max_min(x, d):
        return amax(x, d, bool(keepdim)) if p > 0 else amin(x, d, bool(keepdim))

    if abs(p) == 2.0:
        A_ = A if dt is None or dt == A._data.dtype else A.to(dt)
        perm = _backshift(d0, d1, A._data.ndim)
        res = max_min(svdvals(Permute.apply(A_, perm)), -1)
        if keepdim:
            res = Permute.apply(res.unsqueeze(-1), _inverse(perm))
        return res
    if abs(p) == _INF:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    return max_min(vector_norm(A, 1.0, d0, keepdim, dtype=dtype), d1)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """linalg.norm: a vector norm (dim an int or 1-tuple, or ord None) or a matrix norm
    (dim a 2-tuple, or ord given for a 2-D input)."""
    if dim is not None:
        dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got [{', '.join(str(d) for d in dims)}]")
    else:
        dims = None
        nd = A._data.ndim
        if ord is not None and nd not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {nd}D.")
    if isinstance(ord, str):
        return matrix_norm(A, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    if ord is not None and ((dims is not None and len(dims) == 2)
                            or (dims is None and A._data.ndim == 2)):
        return matrix_norm(A, ord, dims if dims is not None else (0, 1), keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)


def vecdot(x, y, *, dim=-1):
    """linalg.vecdot: sum(x * y, dim) (real tensors)."""
    _tensor_arg(x, "linalg_vecdot", "x", 1)
    _tensor_arg(y, "linalg_vecdot", "y", 2)
    _check_float(x._data, "linalg.vecdot")
    if x._data.dtype != y._data.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {_tn(x._data.dtype)} and y of type {_tn(y._data.dtype)} "
                           "instead")
    _la._infer_size(x._data.shape, y._data.shape)        # torch's broadcasting error
    return (x * y).sum(dim)


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
def _matmul_method(self, other):
    return matmul(self, other)


# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {
    "matmul": _matmul_method, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer,
    "ger": ger, "t": t, "transpose": transpose, "swapdims": swapdims, "swapaxes": swapaxes,
    "permute": _permute_method, "adjoint": adjoint,
    "T": property(reverse_dims), "mT": property(_mT), "mH": property(_mH), "H": property(_H),
}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "matmul": matmul, "mm": mm, "bmm": bmm, "mv": mv, "dot": dot, "outer": outer, "ger": ger,
    "einsum": einsum, "t": t, "transpose": transpose, "swapdims": swapdims,
    "swapaxes": swapaxes, "permute": permute, "adjoint": adjoint,
}


def _install_namespace():
    import importlib
    FUNCTIONS["linalg"] = importlib.import_module("cgrad.linalg")


_install_namespace()
