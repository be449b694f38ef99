"""Finite-difference gradient checks for cgrad tests (torch.autograd.gradcheck's defaults).

``gradcheck(fn, inputs)`` compares the full Jacobian of ``fn`` (a function of cgrad tensors
returning a tensor or a tuple of tensors) computed two ways:

* numerically, by central differences in float64: column ``j`` of the Jacobian w.r.t. input
  ``k`` is ``(fn(x + eps e_j) - fn(x - eps e_j)) / (2 eps)``;
* analytically, row by row: ``cgrad.autograd.grad(out_i, inputs, onehot_r)`` for every
  element ``r`` of every output ``i``.

They must agree elementwise within ``atol + rtol * |numerical|`` (torch's ``allclose``).
The analytical gradients must also have each input's shape and dtype.

``gradgradcheck(fn, inputs, grad_outputs=None)`` runs ``gradcheck`` on the first gradient,
``(x, v) -> grad(fn(x), x, v, create_graph=True)``: the derivative of ``sum(grad * w)``
obtained by double backward is compared with finite differences of the first gradient, both
w.r.t. the inputs and w.r.t. the cotangent ``v`` (random when not given).

Non-tensor entries of ``inputs`` are passed through unchanged; tensors that do not require
grad are inputs but are not differentiated.
"""
from __future__ import annotations

import numpy as np

import cgrad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck", "numerical_jacobian",
           "analytical_jacobian"]

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3


class GradcheckError(RuntimeError):
    """Raised when a numerical and an analytical Jacobian disagree."""


def _is_tensor(x):
    return isinstance(x, cgrad.Tensor)


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _diff_outputs(outs):
    """The outputs that gradients are taken of: floating-point tensors."""
    return [o for o in outs if _is_tensor(o) and o.dtype.kind == "f"]


def _diff_inputs(inputs):
    return [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]


def _data(t):
    return t.detach().numpy()


def _rebuild(inputs, k, arr):
    """`inputs` with input `k` replaced by a fresh leaf holding `arr` (same requires_grad)."""
    new = list(inputs)
    new[k] = cgrad.tensor(arr, requires_grad=inputs[k].requires_grad)
    return new


def numerical_jacobian(fn, inputs, eps=EPS):
    """J[i][k]: array (out_i.numel(), inputs[k].numel()) by central differences."""
    outs = _diff_outputs(_as_tuple(fn(*inputs)))
    ks = _diff_inputs(inputs)
    jac = [[np.zeros((o.numel(), inputs[k].numel())) for k in ks] for o in outs]
    for col, k in enumerate(ks):
        base = _data(inputs[k]).astype(np.float64)
        for j in range(base.size):
            vals = []
            for sign in (1, -1):
                arr = base.copy()
                arr.reshape(-1)[j] += sign * eps
                arr = arr.astype(inputs[k].dtype)
                with cgrad.enable_grad():
                    res = _diff_outputs(_as_tuple(fn(*_rebuild(inputs, k, arr))))
                vals.append([_data(r).astype(np.float64).reshape(-1) for r in res])
            for i in range(len(outs)):
                jac[i][col][:, j] = (vals[0][i] - vals[1][i]) / (2 * eps)
    return jac


def analytical_jacobian(fn, inputs):
    """J[i][k] as in numerical_jacobian, from cgrad.autograd.grad with one-hot cotangents.
    Also checks that every gradient has its input's shape and dtype."""
    with cgrad.enable_grad():
        outs = _diff_outputs(_as_tuple(fn(*inputs)))
    ks = _diff_inputs(inputs)
    wrt = [inputs[k] for k in ks]
    jac = [[np.zeros((o.numel(), inputs[k].numel())) for k in ks] for o in outs]
    for i, o in enumerate(outs):
        if not o.requires_grad:
            continue    # does not depend on any differentiable input: zero rows
        for r in range(o.numel()):
            v = np.zeros(o.shape, dtype=o.dtype)
            v.reshape(-1)[r] = 1
            gs = cgrad.autograd.grad([o], wrt, [cgrad.tensor(v)], retain_graph=True,
                                     allow_unused=True)
            for col, (x, g) in enumerate(zip(wrt, gs)):
                if g is None:
                    continue
                if tuple(g.shape) != tuple(x.shape) or g.dtype != x.dtype:
                    raise GradcheckError(
                        f"Gradient for input {ks[col]} has shape {tuple(g.shape)} and dtype "
                        f"{g.dtype}, expected {tuple(x.shape)} and {x.dtype}")
                jac[i][col][r, :] = _data(g).astype(np.float64).reshape(-1)
    return jac


def gradcheck(fn, inputs, *, eps=EPS, atol=ATOL, rtol=RTOL, raise_exception=True):
    """True if fn's analytical Jacobian matches finite differences (else raise or False)."""
    inputs = tuple(inputs)
    for k in _diff_inputs(inputs):
        if inputs[k].dtype != np.float64:
            raise ValueError(f"gradcheck: input {k} must be float64, got {inputs[k].dtype}")
    num = numerical_jacobian(fn, inputs, eps)
    ana = analytical_jacobian(fn, inputs)
    ks = _diff_inputs(inputs)
    for i, (nrow, arow) in enumerate(zip(num, ana)):
        for col, (n, a) in enumerate(zip(nrow, arow)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {i} with respect to input {ks[col]},\n"
                    f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, *, eps=EPS, atol=ATOL, rtol=RTOL,
                  seed=0, raise_exception=True):
    """gradcheck of the first gradient (x, v) -> d<fn(x), v>/dx, built with create_graph."""
    inputs = tuple(inputs)
    with cgrad.enable_grad():
        outs = _diff_outputs(_as_tuple(fn(*inputs)))
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = [cgrad.tensor(rng.standard_normal(o.shape), requires_grad=True)
                        for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n_in, ks = len(inputs), _diff_inputs(inputs)

    def first_grad(*args):
        xs, vs = args[:n_in], args[n_in:]
        outs = [o for o in _diff_outputs(_as_tuple(fn(*xs)))]
        pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
        if not pairs:
            return tuple(cgrad.zeros_like(xs[k]) for k in ks)
        gs = cgrad.autograd.grad([o for o, _ in pairs], [xs[k] for k in ks],
                                 [v for _, v in pairs], create_graph=True,
                                 allow_unused=True, materialize_grads=True)
        return tuple(gs)

    return gradcheck(first_grad, inputs + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
