"""Inverses, determinants, solves and decompositions (see cgrad/ops/__init__.py for the
conventions): ``linalg.inv``, ``linalg.det``, ``linalg.slogdet``, ``linalg.solve``,
``linalg.cholesky``, ``linalg.qr``, ``linalg.eigh``, ``linalg.svd`` / ``linalg.svdvals`` (one
``LinalgSvdBackward0`` node, torch's ``svd_backward``), and torch's top-level forms
``inverse``, ``det``, ``logdet``, ``slogdet``, ``cholesky``, ``qr`` (functions and Tensor
methods).

Forward: NumPy's batched LAPACK routines (``np.linalg``); inputs are matrices or batches of
matrices ``(*, m, n)``. Errors as torch's: the same checks in the same order (at least 2
dimensions, square, floating dtype, low precision), and ``cgrad.linalg.LinAlgError`` (a
RuntimeError) for a singular or non positive-definite input, naming the batch element and
LAPACK's pivot or leading minor as torch does.

Backward: written with cgrad ops (matmul, the ops of this module, elementwise ops), so
gradients are differentiable again (double backward, Hessians):

* inv: ``gA = -X^T g X^T`` (X = A^-1);
* det: ``gA = g det(A) A^-T`` when A is invertible; for a singular A the cofactor matrix
  through the SVD, ``U diag(g alpha prod_{j != i} s_j) Vh`` (alpha = det(U) det(Vh)), which
  finite differences confirm (torch 2.13 returns zeros there);
* slogdet: ``g_logabsdet A^-T`` (the sign has no gradient); logdet is torch's composite
  ``where(sign == -1, nan, logabsdet)``;
* solve: ``gB = A^-T g`` (a solve), ``gA = -gB X^T`` (left=False: ``X A = B``, the mirror);
* cholesky: Murray's formula (arXiv 1602.07527), symmetrised as torch's gradient is;
* qr: the formula of Walter and Lehmann for ``m >= n`` and, for ``m < n``, its extension
  through the first m columns (torch: mode='r' and mode='complete' with m > n are not
  differentiable);
* eigh: ``V (diag(g_L) + skew(V^T g_V) / 2 / (L_j - L_i)) V^T`` (undefined where
  eigenvalues repeat, as in torch).
"""
from __future__ import annotations

import builtins

import numpy as np

from cgrad._C import TensorBase, _wrap
from cgrad._warn import warn as _warn
from cgrad.autograd.function import Function
from cgrad.ops import linalg as _la
from cgrad.ops.linalg import _tn, matmul
from cgrad.ops.linalg import _check_float, _check_matrix

_mT = _la._mT


class LinAlgError(RuntimeError):
    """Error raised by cgrad.linalg for a singular or non positive-definite input
    (torch.linalg.LinAlgError)."""


LinAlgError.__module__ = "cgrad.linalg"


# ----------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------
def _tensor(A, fn):
    if not isinstance(A, TensorBase):
        raise TypeError(f"{fn}(): argument 'A' (position 1) must be Tensor, not "
                        f"{type(A).__name__}")
    return A._data


def _check(arr, fn, square=True, half_kernel=None, dtype_kernel=None):
    """torch's checks in torch's order: at least 2 dims, square, floating dtype, low
    precision. `half_kernel` / `dtype_kernel`: the name of the kernel whose "not implemented
    for 'Half'" / "for 'Long'" NotImplementedError torch raises instead of its RuntimeError."""
    if arr.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if square and arr.shape[-1] != arr.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are "
                           f"{arr.shape[-2]} by {arr.shape[-1]} matrices")
    if arr.dtype.kind not in "fc":
        if dtype_kernel is not None:
            raise NotImplementedError(
                f"\"{dtype_kernel}\" not implemented for '{_tn(arr.dtype)}'")
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_tn(arr.dtype)}")
    if arr.dtype == np.float16:
        if half_kernel is None:
            raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got Half")
        raise NotImplementedError(f"\"{half_kernel}\" not implemented for 'Half'")
    if arr.dtype.kind == "c":
        raise NotImplementedError(f"{fn} of a complex tensor is not supported by cgrad")


def _batches(shape):
    """Batch indices of an array of matrices (shape[:-2]), in order."""
    return np.ndindex(*shape[:-2]) if len(shape) > 2 else [()]


def _batch_prefix(arr, pos):
    if arr.ndim <= 2:
        return ""
    return f"(Batch element {int(np.ravel_multi_index(pos, arr.shape[:-2]))}): "


def _singular_pivot(M):
    """1-based index of LAPACK getrf's first exactly zero pivot of the square matrix M (the
    `info` that torch reports), or 0."""
    if np.isnan(M).any():
        return 0        # not singular for torch: its LAPACK's NaN pivots are not zero
    import scipy.linalg.lapack as lapack
    getrf = lapack.get_lapack_funcs("getrf", (M,))
    _, _, info = getrf(np.array(M, order="F"), overwrite_a=True)
    return int(info) if info > 0 else 0


def _raise_singular(arr, fn, message):
    """Raise torch's error for the first batch with an exactly zero LU pivot. Returns when
    there is none: NumPy also refuses matrices with NaN or inf (its check looks at the result),
    where LAPACK, and so torch, returns what the factorisation gives (NaN, or numbers)."""
    for pos in _batches(arr.shape):
        k = _singular_pivot(arr[pos])
        if k:
            raise LinAlgError(fn + ": " + _batch_prefix(arr, pos) + message.format(k=k))


def _lu_solve_raw(A, B=None):
    """inv(A) (B None) or A^-1 B, batch by batch with LAPACK getrf/getri/getrs and no check
    of the result: for the matrices NumPy refuses but LAPACK factorises (NaN, inf)."""
    import scipy.linalg.lapack as lapack
    getrf, getri, getrs = lapack.get_lapack_funcs(("getrf", "getri", "getrs"), (A,))
    out = np.empty(A.shape if B is None else B.shape, np.result_type(A, B) if B is not None
                   else A.dtype)
    for pos in _batches(A.shape):
        if np.isnan(A[pos]).any():
            out[pos] = np.nan       # torch's LAPACK: NaN everywhere
            continue
        lu, piv, _ = getrf(np.array(A[pos], order="F"))
        if B is None:
            out[pos] = getri(lu, piv)[0]
        else:
            out[pos] = getrs(lu, piv, np.array(B[pos], order="F"))[0]
    return out


def _inv_np(A, fn="linalg.inv"):
    if A.shape[-1] == 0:
        return np.empty(A.shape, A.dtype)
    try:
        with np.errstate(all="ignore"):
            return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        _raise_singular(A, fn, "The diagonal element {k} is zero, the inversion could not be "
                               "completed because the input matrix is singular.")
        with np.errstate(all="ignore"):
            return _lu_solve_raw(A)


def _unit(shape, dtype, where):
    """ones of shape (*batch, n, n) * I where `where` (batch bool), else 0."""
    n = shape[-1]
    out = np.zeros(shape, dtype)
    if n:
        out[where] = np.eye(n, dtype=dtype)
    return out


# ----------------------------------------------------------------------------------------
# inv
# ----------------------------------------------------------------------------------------
class Inv(Function):
    """linalg.inv(A).  d/dA = -X^T g X^T with X = A^-1 (the saved output)."""
    _node_name = "LinalgInvExBackward0"

    @staticmethod
    def forward(ctx, a):
        X = _inv_np(a._data)
        if ctx is None:
            return X
        X = _wrap(X)
        ctx.save_for_backward(X)
        return X

    @staticmethod
    def backward(ctx, g):
        (X,) = ctx.saved_tensors
        Xt = _mT(X)
        return -matmul(Xt, matmul(g, Xt))


def inv(A):
    """linalg.inv: the inverse of a square matrix (or of each matrix of a batch)."""
    _check(_tensor(A, "linalg_inv"), "linalg.inv")
    return Inv.apply(A)


def inverse(input):
    """torch.inverse: linalg.inv."""
    _check(_tensor(input, "inverse"), "linalg.inv")
    return Inv.apply(input)


# ----------------------------------------------------------------------------------------
# det, slogdet, logdet
# ----------------------------------------------------------------------------------------
def _cofactor(A):
    """The cofactor matrix det(A) A^-T of every matrix of A, through the SVD (valid for a
    singular A too), in cgrad ops: U diag(alpha prod_{j != i} s_j) Vh."""
    from cgrad.ops.decompositions import Svd
    U, S, Vh = Svd.apply(A.detach() if not A.requires_grad else A, False)
    n = S._data.shape[-1]
    alpha = np.linalg.det(U._data) * np.linalg.det(Vh._data)       # +-1: no gradient
    off = 1.0 - np.eye(n, dtype=S._data.dtype)
    # row i of `others` is S with its i-th entry replaced by 1
    others = S.unsqueeze(-2) * _wrap(off) + _wrap(np.eye(n, dtype=S._data.dtype))
    D = others.prod(-1) * _wrap(np.asarray(alpha, dtype=S._data.dtype)).unsqueeze(-1)
    return matmul(U * D.unsqueeze(-2), Vh)


def _det_np(A):
    """np.linalg.det, with torch's signed zero for a singular matrix (the product of LAPACK
    getrf's diagonal and the permutation's sign: -0.0 for [[1, 2], [2, 4]])."""
    d = np.asarray(np.linalg.det(A))
    if A.shape[-1] and (d == 0).any():
        import scipy.linalg.lapack as lapack
        getrf = lapack.get_lapack_funcs("getrf", (A,))
        d = d.copy()
        for pos in zip(*np.nonzero(d == 0)) if d.ndim else [()]:
            lu, piv, _ = getrf(np.array(A[pos], order="F"))
            swaps = np.count_nonzero(piv != np.arange(piv.shape[0]))
            d[pos] = (-1.0) ** swaps * np.prod(np.diagonal(lu))
    return d


def _singular_mask(A, d):
    """Which matrices take the SVD formula: an exactly zero determinant, or one whose
    inverse is not finite."""
    mask = np.asarray(d == 0)
    if not mask.all():
        with np.errstate(all="ignore"):
            try:
                Xi = np.linalg.inv(np.where(mask[..., None, None], _unit(A.shape, A.dtype,
                                                                         mask), A))
            except np.linalg.LinAlgError:
                return np.ones(mask.shape, dtype=bool)
        mask = mask | ~np.isfinite(Xi).all(axis=(-2, -1))
    return mask


def _inv_or_cofactor_t(a, d, over_det):
    """With over_det False: the cofactor matrix det(A) A^-T of every matrix of a; with
    over_det True: A^-T (for a singular matrix the cofactor matrix over its signed zero
    determinant: +-inf, as torch's LU solve gives). `d`: the determinants, a Tensor (the
    saved output of Det, so that second derivatives see its dependence on A) or an array.
    Invertible matrices go through Inv, singular ones through the SVD (_cofactor)."""
    A = a._data
    darr = d._data if isinstance(d, TensorBase) else np.asarray(d)
    dt = d if isinstance(d, TensorBase) else _wrap(np.asarray(d, dtype=A.dtype))
    mask = _singular_mask(A, darr)
    if not mask.any():
        Xt = _mT(Inv.apply(a))
        return Xt if over_det else Xt * dt.unsqueeze(-1).unsqueeze(-1)
    cof = _cofactor(a)
    if over_det:
        with np.errstate(all="ignore"):
            cof = cof / _wrap(np.asarray(darr, dtype=A.dtype))[..., None, None]
    if mask.all():
        return cof
    from cgrad.ops.comparison import Where
    safe = Where.apply(_wrap(mask[..., None, None]), _wrap(_unit(A.shape, A.dtype, mask)), a)
    Xt = _mT(Inv.apply(safe))
    if not over_det:
        Xt = Xt * dt.unsqueeze(-1).unsqueeze(-1)
    return Where.apply(_wrap(np.broadcast_to(mask[..., None, None], A.shape)), cof, Xt)


class Det(Function):
    """linalg.det(A).  d/dA = g det(A) A^-T (the cofactor matrix, through the SVD when A is
    singular)."""
    _node_name = "LinalgDetBackward0"

    @staticmethod
    def forward(ctx, a):
        d = _det_np(a._data)
        if ctx is None:
            return d
        d = _wrap(d)
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved_tensors
        return g.unsqueeze(-1).unsqueeze(-1) * _inv_or_cofactor_t(a, d, False)


def det(A):
    """linalg.det: the determinant (of each matrix of a batch)."""
    _check(_tensor(A, "linalg_det"), "linalg.det", half_kernel="lu_cpu")
    return Det.apply(A)


def _det_top(input):
    """torch.det: linalg.det."""
    _check(_tensor(input, "det"), "linalg.det", half_kernel="lu_cpu")
    return Det.apply(input)


class Slogdet(Function):
    """linalg.slogdet(A) -> (sign, logabsdet).  d/dA = g_logabsdet A^-T; the gradient of
    the sign is ignored (a real sign is piecewise constant), as torch."""
    _node_name = "LinalgSlogdetBackward0"

    @staticmethod
    def forward(ctx, a):
        A = a._data
        sign, lad = np.linalg.slogdet(A)
        sign, lad = np.asarray(sign), np.asarray(lad)
        if ctx is None:
            return sign, lad
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(a)
        ctx._aux = _det_np(A) if A.shape[-1] else np.ones_like(sign)
        return sign, lad            # (sign is an output with a grad_fn, as torch's)

    @staticmethod
    def backward(ctx, g_sign, g_lad):
        if g_lad is None:
            return None
        (a,) = ctx.saved_tensors
        return g_lad.unsqueeze(-1).unsqueeze(-1) * _inv_or_cofactor_t(a, ctx._aux, True)


def _slogdet_type(name):
    from cgrad.ops.reductions import _return_type, return_types
    return getattr(return_types, name, None) or _return_type(name, ("sign", "logabsdet"))


def slogdet(A):
    """linalg.slogdet: ``(sign, logabsdet)`` with det(A) = sign * exp(logabsdet)."""
    _check(_tensor(A, "linalg_slogdet"), "linalg.slogdet")
    return _slogdet_type("linalg_slogdet")(*Slogdet.apply(A))


def _slogdet_top(input):
    """torch.slogdet: linalg.slogdet, as torch.return_types.slogdet."""
    _check(_tensor(input, "slogdet"), "linalg.slogdet")
    return _slogdet_type("slogdet")(*Slogdet.apply(input))


def logdet(input):
    """torch.logdet: log(det(A)); nan where det(A) < 0, -inf where it is 0 (torch's
    composite: where(sign == -1, nan, logabsdet))."""
    _check(_tensor(input, "logdet"), "logdet")
    from cgrad.ops.comparison import where
    sign, lad = Slogdet.apply(input)
    return where(sign == -1, float("nan"), lad)


# ----------------------------------------------------------------------------------------
# solve
# ----------------------------------------------------------------------------------------
def _solve_np(A, B, vector):
    """X with A X = B (B: (*, n, k), or (*, n) when vector), batches broadcast."""
    if vector:
        B = B[..., None]
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, batch + A.shape[-2:])
    B = np.broadcast_to(B, batch + B.shape[-2:])
    if A.shape[-1] == 0 or B.shape[-1] == 0:
        X = np.zeros(B.shape, np.result_type(A, B))
    else:
        try:
            with np.errstate(all="ignore"):
                X = np.linalg.solve(A, B)
        except np.linalg.LinAlgError:
            _raise_singular(A, "cgrad.linalg.solve",
                            "The solver failed because the input matrix is singular.")
            with np.errstate(all="ignore"):
                X = _lu_solve_raw(A, B)
    return X[..., 0] if vector else X


class Solve(Function):
    """linalg.solve(A, B, left): X with A X = B (left) or X A = B.
    left: d/dB = A^-T g (a solve), d/dA = -gB X^T; right: d/dB = g A^-T, d/dA = -X^T gB."""
    _node_name = "LinalgSolveExBackward0"

    @staticmethod
    def forward(ctx, a, b, left, vector):
        A, B = a._data, b._data
        if left:
            X = _solve_np(A, B, vector)
        else:
            X = np.swapaxes(_solve_np(np.swapaxes(A, -1, -2), np.swapaxes(B, -1, -2), False),
                            -1, -2)
        if ctx is None:
            return X
        X = _wrap(X)
        ctx.save_for_backward(a, X)
        ctx._aux = (left, vector)
        return X

    @staticmethod
    def backward(ctx, g):
        a, X = ctx.saved_tensors
        left, vector = ctx._aux
        na, nb = ctx.needs_input_grad[:2]
        gB = Solve.apply(_mT(a), g, left, vector)
        gA = None
        if na:
            if not left:
                gA = -matmul(_mT(X), gB)
            elif vector:
                gA = -(gB.unsqueeze(-1) * X.unsqueeze(-2))
            else:
                gA = -matmul(gB, _mT(X))
        return gA, (gB if nb else None), None, None


def solve(A, B, *, left=True, out=None):
    """linalg.solve: X with ``A @ X = B`` (left=True) or ``X @ A = B``; B may be a vector
    or a batch of vectors (``B.shape == A.shape[:-1]``), batches broadcast."""
    if out is not None:
        raise TypeError("cgrad.linalg.solve: out= is not supported")
    a = _tensor(A, "linalg_solve")
    if not isinstance(B, TensorBase):
        raise TypeError(f"linalg_solve(): argument 'B' (position 2) must be Tensor, not "
                        f"{type(B).__name__}")
    b = B._data
    _check(a, "linalg.solve", half_kernel="lu_cpu")
    if b.dtype != a.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {_tn(a.dtype)} and B of type {_tn(b.dtype)} instead")
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    n = a.shape[-1]
    rows = b.shape[-1] if vector else (b.shape[-2] if left else b.shape[-1])
    if b.ndim == 0 or rows != n or (vector and not left):
        bshape = (f"{b.shape[-1]}x1" if vector or b.ndim < 2
                  else f"{b.shape[-2]}x{b.shape[-1]}")
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{eq} ({n}x{n} and {bshape})")
    _la._infer_size(b.shape[:-1 if vector else -2], a.shape[:-2])     # torch's message
    return Solve.apply(A, B, bool(left), vector)


# ----------------------------------------------------------------------------------------
# cholesky
# ----------------------------------------------------------------------------------------
def _cholesky_np(A, fn):
    if A.shape[-1] == 0:
        return np.zeros(A.shape, A.dtype)
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        import scipy.linalg.lapack as lapack
        potrf = lapack.get_lapack_funcs("potrf", (A,))
        for pos in _batches(A.shape):
            _, info = potrf(np.array(A[pos]), lower=1)
            if info > 0:
                raise LinAlgError(
                    f"{fn}: {_batch_prefix(A, pos)}The factorization could not be completed "
                    f"because the input is not positive-definite (the leading minor of order "
                    f"{info} is not positive-definite).") from None
        raise


def _tril(n, dtype, k=0):
    return _wrap(np.tril(np.ones((n, n), dtype=dtype), k))


class Cholesky(Function):
    """linalg.cholesky(A, upper): L lower triangular with A = L L^T, from the lower triangle
    of A (the upper one when upper=True; then U = L^T is returned).
    d/dA: Murray's formula, gA = sym(L^-T Phi L^-1), Phi = tril(L^T gL) with half diagonal."""
    _node_name = "LinalgCholeskyExBackward0"
    _fn = "linalg.cholesky"

    @classmethod
    def _factor(cls, A, upper):
        if upper:
            return np.swapaxes(_cholesky_np(np.swapaxes(A, -1, -2), cls._fn), -1, -2)
        return _cholesky_np(A, cls._fn)

    @staticmethod
    def forward(ctx, a, upper):
        L = Cholesky._factor(a._data, upper)
        if ctx is None:
            return L
        L = _wrap(L)
        ctx.save_for_backward(L)
        ctx._aux = upper
        return L

    @staticmethod
    def backward(ctx, g):
        (L,) = ctx.saved_tensors
        if ctx._aux:                       # U = L^T: work with the lower factor
            L, g = _mT(L), _mT(g)
        n = L._data.shape[-1]
        dt = L._data.dtype
        P = matmul(_mT(L), g) * _tril(n, dt)
        P = P - P * _wrap(np.eye(n, dtype=dt) * 0.5)           # halve the diagonal
        # S = L^-T P L^-1, by two solves
        S = Solve.apply(_mT(L), P, True, False)
        S = Solve.apply(L, S, False, False)
        return (S + _mT(S)) * 0.5, None


class _CholeskyLegacy(Function):
    """torch.cholesky: the same factor, node CholeskyBackward0, errors named 'cholesky'."""
    _node_name = "CholeskyBackward0"
    _fn = "cholesky"

    @staticmethod
    def forward(ctx, a, upper):
        L = _CholeskyLegacy._factor(a._data, upper)
        if ctx is None:
            return L
        L = _wrap(L)
        ctx.save_for_backward(L)
        ctx._aux = upper
        return L

    _factor = classmethod(Cholesky._factor.__func__)
    backward = staticmethod(Cholesky.backward)


def cholesky(A, *, upper=False, out=None):
    """linalg.cholesky: the Cholesky factor L (A = L L^T, lower) or, with upper=True,
    U = L^T. Reads only the lower (upper) triangle of A."""
    if out is not None:
        raise TypeError("cgrad.linalg.cholesky: out= is not supported")
    arr = _tensor(A, "linalg_cholesky")
    _check(arr, "linalg.cholesky", half_kernel="cholesky_cpu")
    return Cholesky.apply(A, bool(upper))


_CHOLESKY_DEPRECATED = (
    "cgrad.cholesky is deprecated in favor of cgrad.linalg.cholesky (as in torch) and will be "
    "removed in a future release.\nL = cgrad.cholesky(A)\nshould be replaced with\n"
    "L = cgrad.linalg.cholesky(A)\nand\nU = cgrad.cholesky(A, upper=True)\nshould be "
    "replaced with\nU = cgrad.linalg.cholesky(A).mH\nThis transform will produce equivalent "
    "results for all valid (symmetric positive definite) inputs.")


def _cholesky_top(input, upper=False):
    """torch.cholesky (deprecated in torch, with its warning): linalg.cholesky (out=: Note
    [out= arguments] in cgrad/_api.py)."""
    _warn(_CHOLESKY_DEPRECATED)
    arr = _tensor(input, "cholesky")
    _check(arr, "cholesky", half_kernel="cholesky_cpu", dtype_kernel="cholesky_cpu")
    return _CholeskyLegacy.apply(input, bool(upper))


# ----------------------------------------------------------------------------------------
# qr
# ----------------------------------------------------------------------------------------
_QR_MODES = ("reduced", "complete", "r")


def _qr_np(A, mode):
    m, n = A.shape[-2:]
    k = builtins.min(m, n)
    if A.size == 0:
        batch = A.shape[:-2]
        qcols = m if mode == "complete" else k
        Q = np.zeros(batch + (m, qcols), A.dtype)
        if qcols:
            Q[...] = np.eye(m, qcols, dtype=A.dtype)
        R = np.zeros(batch + (qcols if mode != "r" else k, n), A.dtype)
        return Q, R
    if mode == "r":
        return None, np.linalg.qr(A, mode="r")
    return np.linalg.qr(A, mode=mode)


class Qr(Function):
    """linalg.qr(A, mode) -> (Q, R).  Backward for mode='reduced' (and 'complete' when
    m <= n): Walter and Lehmann's formula; mode='r' and mode='complete' with m > n are not
    differentiable (torch's errors at backward)."""
    _node_name = "LinalgQrBackward0"

    @staticmethod
    def forward(ctx, a, mode):
        Q, R = _qr_np(a._data, mode)
        if Q is None:
            Q = np.empty((0,), a._data.dtype)
        if ctx is None:
            return Q, R
        ctx.set_materialize_grads(False)
        Q, R = _wrap(Q), _wrap(R)
        ctx.save_for_backward(Q, R)
        ctx._aux = mode
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):
        Q, R = ctx.saved_tensors
        mode = ctx._aux
        if mode == "r":
            raise RuntimeError(
                "The derivative of linalg.qr depends on Q, which is not computed when "
                "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                "differentiate through linalg.qr.")
        m, n = Q._data.shape[-2], R._data.shape[-1]
        if mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when "
                               "mode='complete' and nrows > ncols.")
        if gQ is None and gR is None:
            return None, None
        if m >= n:
            return _qr_backward_tall(gQ, gR, Q, R), None
        # m < n: A = [X | Y] with X = Q R1 (m x m) and Y = Q R2
        R1, R2 = R[..., :, :m], R[..., :, m:]
        Y = matmul(Q, R2)
        gR1 = None if gR is None else gR[..., :, :m]
        gR2 = None if gR is None else gR[..., :, m:]
        gY = matmul(Q, gR2) if gR2 is not None else None
        gQ1 = gQ
        if gR2 is not None:
            t = matmul(Y, _mT(gR2))
            gQ1 = t if gQ1 is None else gQ1 + t
        gX = _qr_backward_tall(gQ1, gR1, Q, R1)
        if gY is None:
            gY = _wrap(np.zeros(Y._data.shape, Y._data.dtype))
        from cgrad.ops.joining import cat
        return cat([gX, gY], -1), None


def _qr_backward_tall(gQ, gR, Q, R):
    """m >= n, reduced Q (m x n) and R (n x n): gA = [gQ + Q copyltu(M)] R^-T with
    M = R gR^T - gQ^T Q, copyltu(M) = the symmetric matrix of M's lower triangle."""
    n = R._data.shape[-1]
    dt = R._data.dtype
    M = None
    if gR is not None:
        M = matmul(R, _mT(gR))
    if gQ is not None:
        t = matmul(_mT(gQ), Q)
        M = -t if M is None else M - t
    low = M * _tril(n, dt, -1)
    sym = low + _mT(low) + M * _wrap(np.eye(n, dtype=dt))
    B = matmul(Q, sym)
    if gQ is not None:
        B = gQ + B
    # B R^-T: solve X R^T = B
    return Solve.apply(_mT(R), B, False, False)


def _qr_type(name):
    from cgrad.ops.reductions import _return_type, return_types
    return getattr(return_types, name, None) or _return_type(name, ("Q", "R"))


def _qr_checks(arr, fn):
    if arr.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if arr.dtype.kind not in "fc":
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{_tn(arr.dtype)}")
    if arr.dtype == np.float16:
        raise NotImplementedError("\"geqrf_cpu\" not implemented for 'Half'")
    if arr.dtype.kind == "c":
        raise NotImplementedError(f"{fn} of a complex tensor is not supported by cgrad")


def qr(A, mode="reduced", *, out=None):
    """linalg.qr: ``(Q, R)`` with A = Q R (mode 'reduced', 'complete', or 'r': R only, Q
    empty)."""
    if out is not None:
        raise TypeError("cgrad.linalg.qr: out= is not supported")
    arr = _tensor(A, "linalg_qr")
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    _qr_checks(arr, "linalg.qr")
    return _qr_type("linalg_qr")(*Qr.apply(A, mode))


_QR_DEPRECATED = (
    "cgrad.qr is deprecated in favor of cgrad.linalg.qr (as in torch) and will be removed in a "
    "future release.\nThe boolean parameter 'some' has been replaced with a string "
    "parameter 'mode'.\nQ, R = cgrad.qr(A, some)\nshould be replaced with\n"
    "Q, R = cgrad.linalg.qr(A, 'reduced' if some else 'complete')")


def _qr_top(input, some=True):
    """torch.qr (deprecated in torch, with its warning): linalg.qr(A, 'reduced' if some
    else 'complete'), as torch.return_types.qr (out=: Note [out= arguments] in
    cgrad/_api.py)."""
    _warn(_QR_DEPRECATED)
    arr = _tensor(input, "qr")
    _qr_checks(arr, "linalg.qr")
    return _qr_type("qr")(*Qr.apply(input, "reduced" if some else "complete"))


# ----------------------------------------------------------------------------------------
# eigh
# ----------------------------------------------------------------------------------------
class Eigh(Function):
    """linalg.eigh(A, UPLO) -> (eigenvalues ascending, eigenvectors), from one triangle of A.
    d/dA = V (diag(gL) + skew(V^T gV) / 2 / E) V^T, E_ij = L_j - L_i (torch's formula)."""
    _node_name = "LinalgEighBackward0"

    @staticmethod
    def forward(ctx, a, uplo):
        A = a._data
        if A.shape[-1] == 0:
            L, V = np.zeros(A.shape[:-1], A.dtype), np.zeros(A.shape, A.dtype)
        else:
            L, V = np.linalg.eigh(A, UPLO=uplo)
        if ctx is None:
            return L, V
        ctx.set_materialize_grads(False)
        L, V = _wrap(L), _wrap(V)
        ctx.save_for_backward(L, V)
        return L, V

    @staticmethod
    def backward(ctx, gL, gV):
        L, V = ctx.saved_tensors
        if gL is None and gV is None:
            return None, None
        n = L._data.shape[-1]
        dt = L._data.dtype
        eye = _wrap(np.eye(n, dtype=dt))
        inner = None
        if gV is not None:
            VgV = matmul(_mT(V), gV)
            skew = (VgV - _mT(VgV)) * 0.5
            E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye
            inner = skew / E
        if gL is not None:
            D = gL.unsqueeze(-1) * eye
            inner = D if inner is None else inner + D
        return matmul(V, matmul(inner, _mT(V))), None


def _eigh_type():
    from cgrad.ops.reductions import _return_type, return_types
    return getattr(return_types, "linalg_eigh", None) or _return_type(
        "linalg_eigh", ("eigenvalues", "eigenvectors"))


def eigh(A, UPLO="L", *, out=None):
    """linalg.eigh: eigenvalues (ascending) and orthonormal eigenvectors of a symmetric
    matrix, read from its lower (UPLO='L') or upper ('U') triangle."""
    if out is not None:
        raise TypeError("cgrad.linalg.eigh: out= is not supported")
    arr = _tensor(A, "linalg_eigh")
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    _check(arr, "linalg.eigh", half_kernel="linalg_eigh_cpu", dtype_kernel="linalg_eigh_cpu")
    return _eigh_type()(*Eigh.apply(A, UPLO.upper()))


# ----------------------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------------------
# cgrad.linalg.<name> (cgrad/linalg.py imports these)
LINALG = {"inv": inv, "det": det, "slogdet": slogdet, "solve": solve, "cholesky": cholesky,
          "qr": qr, "eigh": eigh, "LinAlgError": LinAlgError}


def _cholesky_method(self, upper=False):
    return _cholesky_top(self, upper)


def _qr_method(self, some=True):
    return _qr_top(self, some)


# torch's names for the top-level forms (Note [Tensor functions] in cgrad/__init__.py wraps
# them under these names)
for _f, _n in ((_det_top, "det"), (_slogdet_top, "slogdet"), (_cholesky_top, "cholesky"),
               (_qr_top, "qr")):
    _f.__name__ = _f.__qualname__ = _n
del _f, _n

# name -> function(self, ...) installed as a cgrad.Tensor method
TENSOR_METHODS: dict = {"inverse": inverse, "det": _det_top, "logdet": logdet,
                        "slogdet": _slogdet_top, "cholesky": _cholesky_method,
                        "qr": _qr_method}
# name -> function installed as cgrad.<name> (top-level functional form)
FUNCTIONS: dict = {"inverse": inverse, "det": _det_top, "logdet": logdet,
                   "slogdet": _slogdet_top, "cholesky": _cholesky_top, "qr": _qr_top}


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
    from cgrad.ops.reductions import _return_type, return_types
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
