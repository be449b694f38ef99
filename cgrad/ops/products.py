"""Fused products, cross products and distances (see cgrad/ops/__init__.py for the
conventions): torch's add* family ``beta * input + alpha * product`` (addmm, addmv, addr,
baddbmm, addbmm, each with its in-place form) and ``input + value * t1 * t2`` / ``/ t2``
(addcmul, addcdiv), cross / linalg.cross, and cdist.

Each add* op is one node named as torch's (AddmmBackward0, ...); ``input`` broadcasts to the
product's shape and is ignored when beta is 0 (a nan in it does not propagate), as torch. The
checks and messages are torch's, in torch's order (shapes, then dtypes): the product's
operands must share input's dtype (addr and addcmul/addcdiv promote instead), and for integer
tensors beta/alpha/value are truncated to integers (addr refuses a float instead, as torch).

cdist
-----
torch computes p=2 distances with a matrix product when either set has more than 25 rows
(or with compute_mode='use_mm_for_euclid_dist'): ``sqrt(clamp(|x|^2 - 2 x.y + |y|^2, 0))``,
the node torch's ``_euclidean_dist`` (EuclideanDistBackward0, whose gradient is 0 where a
distance is 0, twice differentiable) under a ``view`` (ViewBackward0). cgrad does the same,
with the same formula and backward, so values and gradients agree with torch's up to the
rounding of the matrix product (which differs between BLAS libraries: where torch's product
leaves 2e-8 for two equal points, NumPy's may give exactly 0, and the gradient there is then
0 instead of torch's (x - y) / 2e-8). Every other case is one CdistBackward0 node,
whose gradient (torch's ``_cdist_backward`` for each p: 0, 1, < 2, 2, inf and the rest) is
not differentiable again, as in torch (the second backward raises torch's
NotImplementedError).
"""
from __future__ import annotations

import math

import numpy as np

from cgrad import _checks
from cgrad._C import TensorBase, _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.ops.comparison import mask_fill
from cgrad.ops.linalg import (Bmm, Mm, Mv, _c10, _check_bmm, _check_mm, _infer_size, _tn,
                              matmul)
from cgrad.ops.pointwise import _inplace_method
from cgrad.ops.promotion import _as_result, _cast, _errstate, result_type, torch_type_name
from cgrad.ops.shape import Transpose, _expand_shape, _wrap_dim


def _tensor(x, fn, name, pos):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{_checks.type_name(x)}")
    return x


def _number(v, fn, name):
    if isinstance(v, TensorBase) and v._data.ndim == 0:
        v = v._data.item()
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (bool, int, float)):
        raise TypeError(f"{fn}(): argument '{name}' must be Number, not "
                        f"{_checks.type_name(v)}")
    return v


def _size(shape, d):
    """torch's t.size(d) (IndexError for a dim out of range)."""
    return shape[_wrap_dim(d, len(shape))]


def _scalars(dt, *values):
    """beta/alpha/value as the kernel uses them: integers for integer tensors."""
    if dt.kind in "iub":
        return tuple(int(v) for v in values)
    return tuple(float(v) if isinstance(v, bool) else v for v in values)


def _mT(x):
    return Transpose.apply(x, -2, -1)


def _save(ctx, *tensors):
    """save_for_backward only when something is saved: a node that saves nothing runs
    again in a second backward, as torch's."""
    if any(t is not None for t in tensors):
        ctx.save_for_backward(*tensors)


def _saved(ctx, n):
    return ctx.saved_tensors or (None,) * n


def _scale(t, s):
    return t if s == 1 else t * s


def _combine(prod, inp, beta, alpha):
    """alpha * prod + beta * inp (inp ignored when beta is 0), in prod's dtype."""
    if alpha != 1:
        prod = prod * prod.dtype.type(alpha) if prod.dtype.kind != "b" else prod
    if beta != 0:
        prod = prod + (inp if beta == 1 else inp * beta)
    return np.asarray(prod)


class _AddProduct(Function):
    """beta * input + alpha * product(a, b): what the backward needs, and d/dinput = beta g
    (summed to input's shape by the engine)."""
    _node_name = "AddmmBackward0"

    @staticmethod
    def _save(ctx, a, b, beta, alpha, extra=None):
        _, na, nb = ctx.needs_input_grad[:3]
        _save(ctx, a if nb else None, b if na else None)
        ctx._aux = (beta, alpha, extra)

    @staticmethod
    def _grads(ctx, g, ga_fn, gb_fn):
        a, b = _saved(ctx, 2)
        beta, alpha, _ = ctx._aux
        ni, na, nb = ctx.needs_input_grad[:3]
        gi = _scale(g, beta) if ni else None
        ga = _scale(ga_fn(g, b), alpha) if na else None
        gb = _scale(gb_fn(a, g), alpha) if nb else None
        return gi, ga, gb, None, None


# ----------------------------------------------------------------------------------------
# addmm
# ----------------------------------------------------------------------------------------
def _check_same(self_dt, other_dt, what):
    if self_dt != other_dt:
        raise RuntimeError(f"{what} must have the same dtype, but got {_tn(self_dt)} and "
                           f"{_tn(other_dt)}")


class Addmm(_AddProduct):
    """beta * input + alpha * (mat1 @ mat2).  d/dinput = beta g, d/dmat1 = alpha g mat2^T,
    d/dmat2 = alpha mat1^T g."""
    _node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, inp, m1, m2, beta, alpha):
        x, A, B = inp._data, m1._data, m2._data
        for name, arr in (("mat1", A), ("mat2", B)):
            if arr.ndim != 2:
                raise RuntimeError(f"{name} must be a matrix, got {arr.ndim}-D tensor")
        if A.shape[1] != B.shape[0]:
            _check_mm(A.shape, B.shape, A.dtype, A.dtype)
        _check_same(x.dtype, B.dtype, "self and mat2")
        _check_same(A.dtype, B.dtype, "mat1 and mat2")
        _expand_shape(x, (A.shape[0], B.shape[1]))
        if A.dtype.kind == "b":
            raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
        beta, alpha = _scalars(A.dtype, beta, alpha)
        if ctx is not None:
            Addmm._save(ctx, m1, m2, beta, alpha)
        return _combine(np.matmul(A, B), x, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        return Addmm._grads(ctx, g, lambda g, b: Mm.apply(g, _mT(b)),
                            lambda a, g: Mm.apply(_mT(a), g))


class Addbmm(_AddProduct):
    """beta * input + alpha * sum_b batch1[b] @ batch2[b].  d/dbatch1 = alpha g batch2^T
    (g repeated over the batch), d/dbatch2 = alpha batch1^T g."""
    _node_name = "AddbmmBackward0"

    @staticmethod
    def forward(ctx, inp, b1, b2, beta, alpha):
        x, A, B = inp._data, b1._data, b2._data
        _size(A.shape, 0), _size(A.shape, 1), _size(B.shape, 2)   # torch's IndexError
        for name, arr in (("batch1", A), ("batch2", B)):
            if arr.ndim != 3:
                raise RuntimeError(f"{name} must be a 3D tensor")
        if A.shape[0] != B.shape[0]:
            raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                               f"{A.shape[0]} and {B.shape[0]}")
        if A.shape[2] != B.shape[1]:
            raise RuntimeError(f"Incompatible matrix sizes for bmm ({A.shape[1]}x{A.shape[2]} "
                               f"and {B.shape[1]}x{B.shape[2]})")
        _expand_shape(x, (A.shape[1], B.shape[2]))
        _check_same(x.dtype, B.dtype, "self and mat2")
        _check_same(A.dtype, B.dtype, "mat1 and mat2")
        if A.dtype.kind == "b":
            raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
        beta, alpha = _scalars(A.dtype, beta, alpha)
        if ctx is not None:
            Addbmm._save(ctx, b1, b2, beta, alpha, A.shape[0])
        prod = np.matmul(A, B).sum(0, dtype=A.dtype) if A.shape[0] else \
            np.zeros((A.shape[1], B.shape[2]), dtype=A.dtype)
        return _combine(prod, x, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        gexp = g.unsqueeze(0).expand(ctx._aux[2], *g.shape)
        return Addbmm._grads(ctx, g, lambda g, b: Bmm.apply(gexp, _mT(b)),
                             lambda a, g: Bmm.apply(_mT(a), gexp))


class Baddbmm(_AddProduct):
    """beta * input + alpha * (batch1 @ batch2) (batched).  d/dbatch1 = alpha g batch2^T,
    d/dbatch2 = alpha batch1^T g."""
    _node_name = "BaddbmmBackward0"

    @staticmethod
    def forward(ctx, inp, b1, b2, beta, alpha):
        x, A, B = inp._data, b1._data, b2._data
        shape = (_size(A.shape, 0), _size(A.shape, 1), _size(B.shape, 2))
        _expand_shape(x, shape)
        for name, arr in (("batch1", A), ("batch2", B)):
            if arr.ndim != 3:
                raise RuntimeError(f"{name} must be a 3D tensor")
        _check_bmm(A.shape, B.shape, A.dtype, B.dtype)
        if x.dtype != A.dtype:
            raise RuntimeError(f"Input dtypes must be the same, got: input {_c10(x.dtype)}, "
                               f"batch1: {_c10(A.dtype)}, batch2: {_c10(B.dtype)}")
        beta, alpha = _scalars(A.dtype, beta, alpha)
        if ctx is not None:
            Baddbmm._save(ctx, b1, b2, beta, alpha)
        return _combine(np.matmul(A, B), x, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        return Baddbmm._grads(ctx, g, lambda g, b: Bmm.apply(g, _mT(b)),
                              lambda a, g: Bmm.apply(_mT(a), g))


class Addmv(_AddProduct):
    """beta * input + alpha * (mat @ vec).  d/dmat = alpha outer(g, vec),
    d/dvec = alpha mat^T g."""
    _node_name = "AddmvBackward0"

    @staticmethod
    def forward(ctx, inp, m, v, beta, alpha):
        x, A, V = inp._data, m._data, v._data
        if not (A.ndim == 2 and V.ndim == 1 and x.ndim <= 1):
            raise RuntimeError(f"vector + matrix @ vector expected, got {x.ndim}, {A.ndim}, "
                               f"{V.ndim}")
        if A.shape[1] != V.shape[0] or (x.size != A.shape[0] and x.size != 1):
            raise RuntimeError(f"size mismatch, got input ({x.shape[0] if x.ndim else 1}), "
                               f"mat ({A.shape[0]}x{A.shape[1]}), vec ({V.shape[0]})")
        if not x.dtype == A.dtype == V.dtype:
            raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                               f"{_tn(x.dtype)}, {_tn(A.dtype)}, and {_tn(V.dtype)}")
        if A.dtype.kind == "b":
            raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")
        beta, alpha = _scalars(A.dtype, beta, alpha)
        if ctx is not None:
            Addmv._save(ctx, m, v, beta, alpha)
        return _combine(np.matmul(A, V), x, beta, alpha)

    @staticmethod
    def backward(ctx, g):
        return Addmv._grads(ctx, g, lambda g, v: g.unsqueeze(1) * v,
                            lambda a, g: Mv.apply(_mT(a), g))


class Addr(_AddProduct):
    """beta * input + alpha * outer(vec1, vec2) (dtypes promoted).  d/dvec1 = alpha g vec2,
    d/dvec2 = alpha g^T vec1."""
    _node_name = "AddrBackward0"

    @staticmethod
    def forward(ctx, inp, v1, v2, beta, alpha):
        x, a, b = inp._data, v1._data, v2._data
        for name, arr in (("vec1", a), ("vec2", b)):
            if arr.ndim != 1:
                raise RuntimeError(f"addr: Expected 1-D argument {name}, but got "
                                   f"{arr.ndim}-D")
        _expand_shape(x, (a.shape[0], b.shape[0]))
        dt = result_type(x, a, b)
        for name, s in (("beta", beta), ("alpha", alpha)):
            if isinstance(s, bool) and dt.kind != "b":
                raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
            if dt.kind in "iu" and isinstance(s, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be "
                                   "a floating point number.")
        if ctx is not None:
            Addr._save(ctx, v1, v2, beta, alpha)
        a, b, x = _cast(a, dt), _cast(b, dt), _cast(x, dt)
        if dt.kind == "b":
            out = np.logical_and(bool(alpha), np.multiply.outer(a, b))
            if beta:
                out = np.logical_or(out, x)
            return np.asarray(out)
        return _as_result(_combine(np.multiply.outer(a, b), x, beta, alpha), dt)

    @staticmethod
    def backward(ctx, g):
        return Addr._grads(ctx, g, lambda g, b: Mv.apply(g, b),
                           lambda a, g: Mv.apply(_mT(g), a))


# ----------------------------------------------------------------------------------------
# addcmul / addcdiv
# ----------------------------------------------------------------------------------------
def _pointwise3(x, t1, t2, kernel):
    """The result dtype of input, t1, t2 (torch's broadcasting error first)."""
    _infer_size(_infer_size(x.shape, t1.shape), t2.shape)
    dt = result_type(x, t1, t2)
    if dt.kind == "b":
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    return dt


_ADDCDIV_INT = ("Integer division with addcdiv is no longer supported, and in a future  "
                "release addcdiv will perform a true division of tensor1 and tensor2. The "
                "historic addcdiv behavior can be implemented as (input + value * "
                "cgrad.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
                "behavior is just the latter implementation: (input + value * tensor1 / "
                "tensor2), for all dtypes.")


class Addcmul(Function):
    """input + value * t1 * t2.  d/dinput = g, d/dt1 = g t2 value, d/dt2 = g t1 value."""
    _node_name = "AddcmulBackward0"

    @staticmethod
    def forward(ctx, inp, t1, t2, value):
        x, a, b = inp._data, t1._data, t2._data
        dt = _pointwise3(x, a, b, "addcmul_cpu_out")
        (value,) = _scalars(dt, value)
        if ctx is not None:
            _, n1, n2 = ctx.needs_input_grad[:3]
            _save(ctx, t1 if n2 else None, t2 if n1 else None)
            ctx._aux = value
        with _errstate():
            prod = _cast(a, dt) * _cast(b, dt)
            if value != 1:
                prod = prod * dt.type(value)
            return _as_result(_cast(x, dt) + prod, dt)

    @staticmethod
    def backward(ctx, g):
        t1, t2 = _saved(ctx, 2)
        value = ctx._aux
        ni, n1, n2 = ctx.needs_input_grad[:3]
        with _errstate():
            return (g if ni else None, g * (t2 * value) if n1 else None,
                    g * (t1 * value) if n2 else None, None)


class Addcdiv(Function):
    """input + value * t1 / t2.  d/dinput = g, d/dt1 = g value / t2,
    d/dt2 = -g value t1 / t2**2."""
    _node_name = "AddcdivBackward0"

    @staticmethod
    def forward(ctx, inp, t1, t2, value):
        x, a, b = inp._data, t1._data, t2._data
        if a.dtype.kind in "iub" and b.dtype.kind in "iub":
            raise RuntimeError(_ADDCDIV_INT)
        dt = _pointwise3(x, a, b, "addcdiv_cpu_out")
        (value,) = _scalars(dt, value)
        if ctx is not None:
            _, n1, n2 = ctx.needs_input_grad[:3]
            # as torch: tensor2 always (even when only input needs a gradient)
            ctx.save_for_backward(t1 if n2 else None, t2)
            ctx._aux = value
        with _errstate():
            q = _cast(a, dt) / _cast(b, dt)
            if value != 1:
                q = q * dt.type(value)
            return _as_result(_cast(x, dt) + q, dt)

    @staticmethod
    def backward(ctx, g):
        t1, t2 = _saved(ctx, 2)
        value = ctx._aux
        ni, n1, n2 = ctx.needs_input_grad[:3]
        with _errstate():
            return (g if ni else None, g * (value / t2) if n1 else None,
                    -g * (value * t1 / (t2 * t2)) if n2 else None, None)


# ----------------------------------------------------------------------------------------
# cross
# ----------------------------------------------------------------------------------------
class LinalgCross(Function):
    """cross(a, b, dim) of 3-vectors along dim (batch dims broadcast).
    d/da = cross(b, g), d/db = cross(g, a)."""
    _node_name = "LinalgCrossBackward0"

    @staticmethod
    def forward(ctx, a, b, dim):
        x, y = a._data, b._data
        if x.ndim != y.ndim:
            raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
        if _size(x.shape, dim) != 3 or _size(y.shape, dim) != 3:
            raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                               f"{_size(x.shape, dim)} and {_size(y.shape, dim)}")
        _infer_size(x.shape, y.shape)
        if x.dtype != y.dtype:
            raise RuntimeError(f"expected scalar type {_tn(x.dtype)} but found {_tn(y.dtype)}")
        if x.dtype.kind == "b":
            raise NotImplementedError("\"cross\" not implemented for 'Bool'")
        d = _wrap_dim(dim, x.ndim)
        if ctx is not None:
            na, nb = ctx.needs_input_grad[:2]
            ctx.save_for_backward(a if nb else None, b if na else None)
            ctx._aux = d
        return np.asarray(np.cross(x, y, axisa=d, axisb=d, axisc=d), dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        d = ctx._aux
        na, nb = ctx.needs_input_grad[:2]
        return (LinalgCross.apply(b, g, d) if na else None,
                LinalgCross.apply(g, a, d) if nb else None, None)


def linalg_cross(input, other, *, dim=-1):
    """Computes the cross product of two 3-dimensional vectors (or batches of them) along
    dim, broadcasting the other dimensions."""
    _tensor(input, "linalg_cross", "input", 1)
    _tensor(other, "linalg_cross", "other", 2)
    return LinalgCross.apply(input, other, _checks.check_int(dim, "linalg_cross", "dim", 3))


_CROSS_WARNING = ("Using cgrad.cross without specifying the dim arg is deprecated.\n"
                  "Please either pass the dim explicitly or simply use cgrad.linalg.cross.\n"
                  "The default value of dim will change to agree with that of linalg.cross "
                  "in a future release.")


def cross(input, other, dim=None):
    """Returns the cross product of vectors in dimension dim of input and other (dim None:
    the first dimension of size 3, deprecated as in torch)."""
    _tensor(input, "cross", "input", 1)
    _tensor(other, "cross", "other", 2)
    if dim is None:
        _warn(_CROSS_WARNING, UserWarning)
        sizes = input._data.shape
        if 3 not in sizes:
            raise RuntimeError("no dimension of size 3 in input")
        dim = sizes.index(3)
    return LinalgCross.apply(input, other, _checks.check_int(dim, "cross", "dim", 3))


# ----------------------------------------------------------------------------------------
# cdist
# ----------------------------------------------------------------------------------------
_MODES = {"use_mm_for_euclid_dist_if_necessary": 0, "use_mm_for_euclid_dist": 1,
          "donot_use_mm_for_euclid_dist": 2}


def _pairwise_diff(x, y):
    """x[..., i, None, :] - y[..., None, j, :] (batch dims broadcast)."""
    return x[..., :, None, :] - y[..., None, :, :]


_CHUNK = 1 << 22      # elements of one block of pairwise differences (32 MiB in float64)


def _row_blocks(x, y):
    """Slices of x's rows such that a block of pairwise differences with y stays small."""
    batch = math.prod(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
    per_row = max(1, batch * y.shape[-2] * x.shape[-1])
    step = max(1, _CHUNK // per_row)
    r1 = x.shape[-2]
    return [slice(i, i + step) for i in range(0, r1, step)] or [slice(None)]


def _cdist_array(x, y, p):
    blocks = _row_blocks(x, y)
    if len(blocks) == 1:
        return _cdist_block(x, y, p)
    return np.concatenate([_cdist_block(x[..., b, :], y, p) for b in blocks], axis=-2)


def _cdist_block(x, y, p):
    d = np.abs(_pairwise_diff(x, y))
    if p == 0:
        return np.count_nonzero(d, axis=-1).astype(x.dtype)
    if p == 1:
        return d.sum(-1)
    if p == 2:
        return np.sqrt((d * d).sum(-1))
    if math.isinf(p):
        return d.max(-1) if d.shape[-1] else np.zeros(d.shape[:-1], x.dtype)
    return np.power(np.power(d, p).sum(-1), 1.0 / p)


def _cdist_grad(g, x, y, p, dist):
    """torch's _cdist_backward: the gradient w.r.t. x (g and dist: (..., r1, r2))."""
    if p == 0:
        return np.zeros(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + x.shape[-2:],
                        dtype=x.dtype)
    blocks = _row_blocks(x, y)
    if len(blocks) == 1:
        return _cdist_grad_block(g, x, y, p, dist)
    return np.concatenate([_cdist_grad_block(g[..., b, :], x[..., b, :], y, p, dist[..., b, :])
                           for b in blocks], axis=-2)


def _cdist_grad_block(g, x, y, p, dist):
    diff = _pairwise_diff(x, y)
    gg = g[..., None]
    dd = dist[..., None]
    if p == 1:
        t = gg * np.sign(diff)
    elif p == 2:
        t = np.where(dd == 0, 0, gg * diff / dd)
    elif math.isinf(p):
        t = gg * np.sign(diff) * (np.abs(diff) == dd)
    elif p < 2:
        t = np.sign(diff) * np.power(np.abs(diff), p - 1) * gg / np.power(dd, p - 1)
        t = np.where(dd == 0, 0, t)
        if p < 1:
            t = np.where(diff == 0, 0, t)
    else:
        t = diff * np.power(np.abs(diff), p - 2) * gg / np.power(dd, p - 1)
        t = np.where(dd == 0, 0, t)
    return t.sum(-2).astype(x.dtype, copy=False)


class Cdist(Function):
    """cdist(x1, x2, p): p-norm distances between the rows of x1 and of x2 (batch dims
    broadcast). Its gradient (CdistBackward) is not differentiable again, as torch's."""
    _node_name = "CdistBackward0"

    @staticmethod
    def forward(ctx, a, b, p):
        x, y = a._data, b._data
        with _errstate():
            out = np.asarray(_cdist_array(x, y, p), dtype=x.dtype)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, b, out)
            ctx._aux = p
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad[:2]
        p = ctx._aux
        ga = CdistBackward.apply(g, a, b, out, p, False) if na else None
        gb = CdistBackward.apply(g, b, a, out, p, True) if nb else None
        return ga, gb, None


class CdistBackward(Function):
    """torch's _cdist_backward (the gradient of cdist w.r.t. one input; `swap`: w.r.t. x2,
    with g and the distances transposed). Not differentiable, as in torch."""
    _node_name = "CdistBackwardBackward0"

    @staticmethod
    def forward(ctx, g, x, y, dist, p, swap):
        gd, dd = g._data, dist._data
        if swap:
            gd, dd = np.swapaxes(gd, -1, -2), np.swapaxes(dd, -1, -2)
        with _errstate():
            return _cdist_grad(gd, x._data, y._data, p, dd)

    @staticmethod
    def backward(ctx, gg):
        raise NotImplementedError("the derivative for '_cdist_backward' is not implemented.")


def _euclidean_array(x, y):
    """torch's _euclidean_dist: [-2x, |x|^2, 1] @ [y, 1, |y|^2]^T, clamped at 0, sqrt."""
    xn = (x * x).sum(-1, keepdims=True)
    yn = (y * y).sum(-1, keepdims=True)
    x_ = np.concatenate([x * -2, xn, np.ones_like(xn)], -1)
    y_ = np.concatenate([y, np.ones_like(yn), yn], -1)
    out = np.matmul(x_, np.swapaxes(y_, -1, -2))
    np.maximum(out, 0, out=out)
    return np.sqrt(out, out=out)


class _Quotient(Function):
    """a / b whose backward runs without NumPy warnings: the gradient of the ratio in
    EuclideanDist's backward is nan where a distance is 0, silently as in torch (the
    forward node's backward masks it out again)."""
    _node_name = "DivBackward0"

    @staticmethod
    def forward(ctx, a, b):
        if ctx is not None:
            ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        with _errstate():
            return a._data / b._data

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            return (_Quotient.apply(g, b) if na else None,
                    -_Quotient.apply(g * a, b * b) if nb else None)


class EuclideanDist(Function):
    """torch's _euclidean_dist (cdist's p=2 product path).  With ratio = g / out (0 where
    out is 0): d/dx = x * sum_j ratio - ratio @ y, d/dy = y * sum_i ratio - ratio^T @ x."""
    _node_name = "EuclideanDistBackward0"

    @staticmethod
    def forward(ctx, a, b):
        x, y = a._data, b._data
        with _errstate():
            out = _euclidean_array(x, y)
        if ctx is not None:
            out = _wrap(out)
            ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        with _errstate():
            ratio = mask_fill(_Quotient.apply(g, out), out._data == 0)
            ga = a * ratio.sum(-1, keepdim=True) - matmul(ratio, b) if na else None
            gb = (b * ratio.sum(-2).unsqueeze(-1) - matmul(_mT(ratio), a)) if nb else None
        return ga, gb


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Computes the p-norm distance between each pair of rows of x1 (..., r1, c) and x2
    (..., r2, c), batch dimensions broadcast: a (..., r1, r2) tensor."""
    _tensor(x1, "cdist", "x1", 1)
    _tensor(x2, "cdist", "x2", 2)
    if compute_mode not in _MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    mode = _MODES[compute_mode]
    x, y = x1._data, x2._data
    if x.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x.ndim}D")
    if y.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {y.ndim}D")
    if x.shape[-1] != y.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x.shape[-1]} X2: {y.shape[-1]}")
    p = float(_number(p, "cdist", "p"))
    for arr, name in ((x, "X1"), (y, "X2")):
        if arr.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{torch_type_name(arr.dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    batch = _infer_size(x.shape[:-2], y.shape[:-2])
    if x.dtype != y.dtype:
        raise RuntimeError(f"expected scalar type {_tn(x.dtype)} but found {_tn(y.dtype)}")
    if x.dtype == np.float16:
        raise NotImplementedError("\"cdist\" not implemented for 'Half'")
    r1, r2 = x.shape[-2], y.shape[-2]
    if (x.size and y.size and p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25)))
            and x.shape[-1]):
        nb = math.prod(batch)
        if nb != 1:
            # as torch: each input expanded to the batch, made contiguous (a copy where the
            # expansion repeats elements) and viewed as 3-D; the node saves those
            x1 = x1.expand(*batch, r1, x.shape[-1]).contiguous().view(nb, r1, x.shape[-1])
            x2 = x2.expand(*batch, r2, y.shape[-1]).contiguous().view(nb, r2, y.shape[-1])
        out = EuclideanDist.apply(x1, x2)
        return out.view(*batch, r1, r2)
    return Cdist.apply(x1, x2, p)


# ----------------------------------------------------------------------------------------
# functional forms and in-place methods
# ----------------------------------------------------------------------------------------
def _add_args(fn, input, a, b, beta, alpha, names):
    _tensor(input, fn, "input", 1)
    _tensor(a, fn, names[0], 2)
    _tensor(b, fn, names[1], 3)
    return input, a, b, _number(beta, fn, "beta"), _number(alpha, fn, "alpha")


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """Performs beta * input + alpha * (mat1 @ mat2): the matrix product of mat1 (n, m) and
    mat2 (m, p) added to input (broadcastable to (n, p))."""
    return Addmm.apply(*_add_args("addmm", input, mat1, mat2, beta, alpha, ("mat1", "mat2")))


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """Performs beta * input + alpha * (mat @ vec): a matrix-vector product added to input
    (broadcastable to (n,))."""
    return Addmv.apply(*_add_args("addmv", input, mat, vec, beta, alpha, ("mat", "vec")))


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """Performs beta * input + alpha * outer(vec1, vec2): the outer product of two vectors
    added to input (broadcastable to (n, m))."""
    return Addr.apply(*_add_args("addr", input, vec1, vec2, beta, alpha, ("vec1", "vec2")))


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """Performs beta * input + alpha * (batch1 @ batch2): a batch of matrix products added to
    input (broadcastable to (b, n, p))."""
    return Baddbmm.apply(*_add_args("baddbmm", input, batch1, batch2, beta, alpha,
                                    ("batch1", "batch2")))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """Performs beta * input + alpha * sum_i batch1[i] @ batch2[i]: the sum of a batch of
    matrix products added to input (broadcastable to (n, p))."""
    return Addbmm.apply(*_add_args("addbmm", input, batch1, batch2, beta, alpha,
                                   ("batch1", "batch2")))


def _addc(cls, name):
    def fn(input, tensor1, tensor2, *, value=1):
        _tensor(input, name, "input", 1)
        _tensor(tensor1, name, "tensor1", 2)
        _tensor(tensor2, name, "tensor2", 3)
        return cls.apply(input, tensor1, tensor2, _number(value, name, "value"))
    fn.__name__ = fn.__qualname__ = name
    return fn


addcmul = _addc(Addcmul, "addcmul")
addcmul.__doc__ = ("Performs input + value * tensor1 * tensor2 elementwise (the three "
                   "broadcast).")
addcdiv = _addc(Addcdiv, "addcdiv")
addcdiv.__doc__ = ("Performs input + value * tensor1 / tensor2 elementwise (the three "
                   "broadcast).")


def _add_inplace(fn, name):
    """addmm_ & co.: self must have the product's shape (torch's 'Bad in-place call')."""
    import inspect
    sig = inspect.signature(fn)

    def inplace(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        a, b = list(bound.arguments.values())[1:3]
        out_shape = _out_shape(name, a, b)
        if name == "addr" and out_shape is not None:
            if self._data.ndim != 2:
                raise RuntimeError(f"2D tensor expected, got {self._data.ndim}D tensor for "
                                   "input")
            if tuple(self._data.shape) != out_shape:
                raise RuntimeError(f"size mismatch, input: {list(self._data.shape)}, v1: "
                                   f"{list(a._data.shape)}, v2: {list(b._data.shape)}")
        if out_shape is not None and tuple(self._data.shape) != out_shape:
            raise RuntimeError(f"Bad in-place call: input tensor size {list(self._data.shape)} "
                               f"and output tensor size {list(out_shape)} should match")
        return fn(*bound.args, **bound.kwargs)
    inplace.__name__ = name
    return _inplace_method(inplace)


def _out_shape(name, a, b):
    if not (isinstance(a, TensorBase) and isinstance(b, TensorBase)):
        return None
    sa, sb = a._data.shape, b._data.shape
    try:
        if name == "addmv":
            return sa[:1]
        if name == "addr":
            return sa[:1] + sb[:1]
        if name == "baddbmm":
            return (sa[0], sa[1], sb[2])
        return (sa[-2] if name == "addmm" else sa[1], sb[-1])
    except IndexError:
        return None


FUNCTIONS: dict = {
    "addmm": addmm, "addmv": addmv, "addr": addr, "baddbmm": baddbmm, "addbmm": addbmm,
    "addcmul": addcmul, "addcdiv": addcdiv, "cross": cross, "cdist": cdist,
}

TENSOR_METHODS: dict = {
    "addmm": addmm, "addmv": addmv, "addr": addr, "baddbmm": baddbmm, "addbmm": addbmm,
    "addcmul": addcmul, "addcdiv": addcdiv, "cross": cross,
    "addcmul_": _inplace_method(addcmul), "addcdiv_": _inplace_method(addcdiv),
}
for _name in ("addmm", "addmv", "addr", "baddbmm", "addbmm"):
    TENSOR_METHODS[_name + "_"] = _add_inplace(FUNCTIONS[_name], _name)
del _name
