"""einsum (see cgrad/ops/__init__.py for the conventions).

NumPy's subscripts (``...``, implicit output, spaces) with torch's parsing, broadcasting of
size-1 dimensions and error messages; also the sublist form
``einsum(a, [0, 1], b, [1, 2], [0, 2])``. One node per call, named as torch's output node
(``ViewBackward0`` for a contraction of several operands, ``MulBackward0`` without one;
``SumBackward1`` / ``PermuteBackward0`` for a single operand). The gradient of each operand
is one einsum of the output gradient with the other operands (dims summed only in that
operand are broadcast back as a view; repeated subscripts scatter onto the diagonal), built
from cgrad ops, so any order of derivative works. Evaluation: a two-operand contraction is
one batched ``np.matmul`` on permuted operands (torch's bmm path: BLAS even with batch
subscripts, where NumPy's einsum loops are not); other equations use ``np.einsum``, with
NumPy's path optimiser for three or more operands and large contractions. Plans are cached
per equation and shapes. More than 16 operands are contracted pairwise, as torch.
"""
from __future__ import annotations
import builtins
import math
import numpy as np
import operator
from cgrad._C import TensorBase
from cgrad.autograd.function import Function
from cgrad.ops.linalg import _tn

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
    _cg_composite = True      # Note [Nothing needed] (cgrad/_C_engine.pxi)

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


# Note [Views of a temporary]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's einsum with a contraction ends with a view of its bmm's result (ViewBackward0), and
# a 2-D @ N-D matmul whose transposed product is contiguous ends with the transpose of it
# (TransposeBackward0): the result is a view of a temporary nobody else holds. That shows
# when the result is modified in place: the temporary is rebased through CopySlices and the
# view regenerated, so the view's own node, with the hooks registered on the result before
# the op, is on no path from then on (the hooks run only for gradients reaching the old value
# through other uses). cgrad builds the same two steps: the contraction (EinsumBmm,
# MatMulTransposeBase in ops/linalg.py), then a view of it (EinsumView, a transpose), so its
# in-place machinery (Note [In-place on a view] in ops/inplace.py) does what torch does.


class EinsumBmm(Einsum):
    """einsum's contraction: torch's bmm, of whose result einsum returns a view."""
    _node_name = "BmmBackward0"
    _cg_composite = False


class EinsumView(Function):
    """The view torch's einsum ends with: the contraction's result itself.  d/da = g."""
    _node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, a):
        return a._data.view()

    @staticmethod
    def backward(ctx, g):
        return g


class EinsumMul(Einsum):
    """Several operands, no summed subscript (torch ends with a mul)."""
    _node_name = "MulBackward0"


class EinsumSum(Einsum):
    """One operand with summed subscripts (torch ends with a sum, whose result is
    C-contiguous whatever order the kept subscripts come in; np.einsum's follows the
    operand's memory order: 'ijk->ji' would not be viewable)."""
    _node_name = "SumBackward1"
    _cg_composite = True      # Note [Nothing needed] (cgrad/_C_engine.pxi)

    @staticmethod
    def forward(ctx, spec, *ops):
        out = Einsum.forward(ctx, spec, *ops)
        return out if out.flags.c_contiguous else out.copy(order="C")


class EinsumPermute(Einsum):
    """One operand, nothing summed (torch ends with a permute)."""
    _node_name = "PermuteBackward0"
    _cg_composite = True      # Note [Nothing needed] (cgrad/_C_engine.pxi)


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
        from cgrad.ops.promotion import result_type
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
    elif contraction:               # Note [Views of a temporary]
        return EinsumView.apply(EinsumBmm.apply((subs, out, to_long), *operands))
    else:
        cls = EinsumMul
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
        if k == n - 1 and contraction:      # Note [Views of a temporary]
            return EinsumView.apply(EinsumBmm.apply(((cur_sub, sk), res, False), cur,
                                                    operands[k]))
        cur = cls.apply(((cur_sub, sk), res, False), cur, operands[k])
        cur_sub = res
    return cur


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {

}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {
    "einsum": einsum,
}
