"""Finite-difference checks of analytical gradients: ``torch.autograd.gradcheck``'s API.

``gradcheck(func, inputs)`` compares, for every differentiable output ``o`` and every input
``x`` that requires grad, the Jacobian computed two ways:

* numerically, by central differences: the raw data of ``x`` is perturbed in place, element
  by element (``(f(x + eps e_k) - f(x - eps e_k)) / (2 eps)``), so ``func`` always sees the
  very input objects it was given;
* analytically, row by row, with ``cgrad.autograd.grad(o, inputs, e_r)`` for every element
  ``r`` of ``o`` (twice, to check that backward is deterministic within ``nondet_tol``).

Both Jacobians have torch's layout ``(x.numel(), o.numel())`` and must agree within
``allclose(analytical, numerical, rtol, atol)``. On failure ``GradcheckError`` (a
``RuntimeError``) is raised with torch's message, "Jacobian mismatch for output 0 with respect
to input 0,\\nnumerical:...\\nanalytical:...", or ``False`` is returned when
``raise_exception=False``. Output and input indices count only the outputs that require grad
and the inputs that require grad, as in torch.

``fast_mode=True`` is torch's random-projection check (pytorch/pytorch#53876): with random
unit vectors ``u`` (per input) and ``v`` (per output) it compares ``v^T J u`` computed from one
finite difference along ``u`` with ``(v^T J) . u`` from one backward call, with ``atol`` scaled
by ``sum(u) * sum(v)``; when it fails it recomputes the full Jacobians for the message.

Then, as torch: backward must be linear in the output gradient (zero in, zero out: "backward
not multiplied by grad_output") and, with ``check_undefined_grad``, it must accept undefined
(``None``) output gradients. ``gradgradcheck`` runs ``gradcheck`` on
``(inputs, v) -> grad(func(inputs), inputs, v, create_graph=True)``.

cgrad has no forward-mode AD and no vmap: ``check_forward_ad`` and
``check_batched_forward_grad`` raise ``NotImplementedError``; ``check_batched_grad`` compares
``grad(..., is_grads_batched=True)`` (one engine run per row in cgrad) with separate vjps.
Complex inputs or outputs are not supported.

Sparse inputs are checked w.r.t. their stored values (each value is perturbed; the analytical
gradient, sparse or dense, is read at the stored positions): torch's ``masked=True``
semantics, whatever ``masked`` says. ``gradgradcheck`` also works with sparse inputs (their
sparse first gradients are compared as dense tensors), which torch's does not (#96187).
"""
from __future__ import annotations

from itertools import product

import numpy as np

from cgrad._warn import warn as _warn
from cgrad import _C

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "get_numerical_jacobian",
           "get_analytical_jacobian", "get_numerical_jacobian_wrt_specific_input"]


class GradcheckError(RuntimeError):
    r"""Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def _Tensor():
    from cgrad.tensor import Tensor
    return Tensor


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _is_float(t):
    return t._data.dtype.kind == "f"


def _is_complex(t):
    return t._data.dtype.kind == "c"


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


class _NotATensorOutput(AttributeError, TypeError):
    """torch reads ``.requires_grad`` of every output (AttributeError for a non-tensor)."""


def _differentiable_outputs(x):
    outs = _as_tuple(x)
    for o in outs:
        if not _is_tensor(o):
            raise _NotATensorOutput(f"'{type(o).__name__}' object has no attribute "
                                    "'requires_grad' (gradcheck's function must return Tensors)")
    return tuple(o for o in outs if o.requires_grad)


def _diff_inputs(tupled_inputs):
    """(indices, tensors) of the inputs that require grad."""
    idx = [i for i, t in enumerate(tupled_inputs) if _is_tensor(t) and t.requires_grad]
    return idx, [tupled_inputs[i] for i in idx]


def _is_sparse(t):
    return getattr(t, "is_sparse", False) is True


def _storage(t):
    """The array whose elements gradcheck perturbs: the data of a dense tensor, the stored
    values of a sparse one."""
    return t._vals if _is_sparse(t) else t._data


def _dense_np(g):
    return g._dense_array() if _is_sparse(g) else g._data


def _per_element(g, x):
    """Gradient `g` of input `x` as one number per element of _storage(x)."""
    G = _dense_np(g)
    if _is_sparse(x):
        return G[tuple(x._pattern.idx)]
    return G.reshape(-1)


def _wrap(arr):
    return _C._wrap(np.asarray(arr))


def _grad(outputs, inputs, grad_outputs, **kw):
    from cgrad.autograd.engine import grad
    return grad(outputs, inputs, grad_outputs, **kw)


def _check_inputs(tupled_inputs):
    any_input_requiring_grad = False
    for idx, inp in enumerate(tupled_inputs):
        if _is_tensor(inp) and inp.requires_grad:
            dt = _storage(inp).dtype
            if dt != np.float64 and dt != np.complex128:
                _warn(
                    f"Input #{idx} requires gradient and "
                    "is not a double precision floating point or complex. "
                    "This check will likely fail if all the inputs are "
                    "not of double precision floating point or complex. ")
            if dt.kind == "c":
                raise NotImplementedError(
                    f"gradcheck: input #{idx} is complex; cgrad's gradcheck supports real "
                    "floating point inputs only")
            arr = _storage(inp)
            if not all(st > 0 or sz <= 1 for st, sz in zip(arr.strides, arr.shape)):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only "
                    "supports inputs that are non-overlapping to be able to "
                    "compute the numerical gradients correctly. You should call "
                    ".contiguous on the input before passing it to gradcheck.")
            any_input_requiring_grad = True
    if not any_input_requiring_grad:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of them have requires_grad=True.")
    return True


def _check_outputs(outputs):
    for o in outputs:
        if getattr(o, "is_sparse", False):
            raise ValueError(
                "Sparse output is not supported at gradcheck yet. "
                "Please call to_dense(masked_grad=...) on the output of fn for gradcheck.")
        if _is_complex(o):
            raise NotImplementedError(
                "gradcheck: complex outputs are not supported by cgrad's gradcheck")


def _out_arrays(fn, inputs):
    """Run fn and copy the data of its floating-point tensor outputs (outputs may alias the
    perturbed input, so they are copied before the next perturbation)."""
    return [o._data.copy() for o in _as_tuple(fn(*inputs)) if _is_tensor(o) and _is_float(o)]


def _check_same_meta(a, b, eps, idx=None):
    on_index = f"on index {idx} " if idx is not None else ""
    if a.shape != b.shape:
        raise AssertionError(
            f"Expected `func` to return outputs with the same shape"
            f" when inputs are perturbed {on_index}by {eps}, but got:"
            f" shapes {_C._shape_str(a.shape)} and {_C._shape_str(b.shape)}.")
    if a.dtype != b.dtype:
        raise AssertionError(
            f"Expected `func` to return outputs with the same dtype"
            f" when inputs are perturbed {on_index}by {eps}, but got:"
            f" dtypes {a.dtype} and {b.dtype}.")


def _perturbed_difference(fn, inputs, arr, where, delta, norm, eps, idx=None):
    """[(f(x + delta) - f(x - delta)) / (2 norm)] per float output, flattened, where the
    perturbation is applied in place to ``arr[where]``."""
    orig = np.array(arr[where], copy=True)
    try:
        arr[where] = orig - delta
        outa = _out_arrays(fn, inputs)
        arr[where] = orig + delta
        outb = _out_arrays(fn, inputs)
    finally:
        arr[where] = orig
    res = []
    for a, b in zip(outa, outb):
        _check_same_meta(a, b, eps, idx)
        res.append(((b - a) / (2 * norm)).reshape(-1))
    return res


def _float_outputs(func_out):
    return [o for o in _as_tuple(func_out) if _is_tensor(o) and _is_float(o)]


def _numerical_jacobian(fn, inputs, func_out, eps):
    """J[k][i]: ndarray (input_k.numel(), float_output_i.numel()) for every input k that
    requires grad (torch's layout), by central differences on each element."""
    outs = _float_outputs(func_out)
    _, diff = _diff_inputs(inputs)
    result = []
    for inp in diff:
        arr = _storage(inp)
        jacs = [np.zeros((arr.size, o._data.size), dtype=o._data.dtype) for o in outs]
        for d_idx, idx in enumerate(product(*[range(m) for m in arr.shape])):
            cols = _perturbed_difference(fn, inputs, arr, idx, eps, eps, eps, idx)
            for jac, col in zip(jacs, cols):
                jac[d_idx] = col
        result.append(jacs)
    return result


def _analytical_rows(output, diff, grad_out):
    """One vjp of ``output`` with cotangent ``grad_out``: a list (one per input) of ndarrays
    or None, plus per-input size/dtype flags."""
    gs = _grad([output], diff, [grad_out], retain_graph=True, allow_unused=True)
    return gs


def _analytical_jacobian(output, diff, nondet_tol, check_grad_dtypes, v=None):
    """J[k]: ndarray (input_k.numel(), n) where n = output.numel() (full Jacobian, v None) or 1
    (v^T J, fast mode). Computed twice to check determinism."""
    Tensor = _Tensor()
    n = 1 if v is not None else output._data.size
    jacs_twice = []
    sizes_ok = types_ok = True
    for _ in range(2):
        jacs = [np.zeros((_storage(x).size, n), dtype=_storage(x).dtype) for x in diff]
        if v is not None:
            cotangents = [_wrap(v.reshape(output._data.shape))]
        else:
            cotangents = []
            for j in range(n):
                e = np.zeros(output._data.shape, dtype=output._data.dtype)
                e.reshape(-1)[j] = 1
                cotangents.append(_wrap(e))
        for j, ct in enumerate(cotangents):
            gs = _analytical_rows(output, diff, ct)
            for k, (x, g) in enumerate(zip(diff, gs)):
                if g is None:
                    continue
                if not isinstance(g, Tensor):
                    raise GradcheckError("grad is incorrect type")
                if tuple(g._data.shape) != tuple(x._data.shape):
                    sizes_ok = False
                    continue
                if _storage(g).dtype != _storage(x).dtype:
                    types_ok = False
                jacs[k][:, j] = _per_element(g, x)
        jacs_twice.append(jacs)
    j1, j2 = jacs_twice
    reentrant = all(a.size == 0 or np.abs(a - b).max() <= nondet_tol for a, b in zip(j1, j2))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with "
            "same input and grad_output multiple times gives different values, "
            "although analytical gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG)
    return j1


def _allclose(a, n, rtol, atol):
    dt = np.promote_types(a.dtype, n.dtype)
    return bool(np.allclose(a.astype(dt, copy=False), n.astype(dt, copy=False),
                            rtol=rtol, atol=atol))


def _notallclose_msg(analytical, numerical, output_idx, input_idx):
    return (f"Jacobian mismatch for output {output_idx:d} with respect to input {input_idx:d},\n"
            f"numerical:{numerical}\nanalytical:{analytical}\n")


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations this failure might be expected.

If the test manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
with `nondet_tol=<tol>` as a keyword argument.
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If the test manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
with `fast_mode=False` as a keyword argument.
""".strip()


def _check_no_differentiable_outputs(func, inputs, func_out, eps):
    for jacs in _numerical_jacobian(func, inputs, func_out, eps):
        for jac in jacs:
            if np.count_nonzero(jac) > 0:
                raise GradcheckError("Numerical gradient for function expected to be zero")
    return True


# ------------------------------------------------------------------------------------------
# slow and fast checks
# ------------------------------------------------------------------------------------------
def _diff_output_positions(func_out):
    """For each differentiable output, its position among the float outputs."""
    pos = []
    for k, o in enumerate(_float_outputs(func_out)):
        if o.requires_grad:
            pos.append(k)
    return pos


def _slow_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol):
    if not outputs:
        return _check_no_differentiable_outputs(func, inputs, func_out, eps)
    numerical = _numerical_jacobian(func, inputs, func_out, eps)   # [input][float output]
    pos = _diff_output_positions(func_out)
    _, diff = _diff_inputs(inputs)
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(o, diff, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][pos[i]]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_notallclose_msg(_wrap(a), _wrap(n), i, j))
    return True


def _random_unit(numel, dtype, gen):
    vec = gen.random(numel).astype(dtype)
    norm = np.sqrt((vec.astype(np.float64) ** 2).sum())
    if norm > 0:
        vec /= dtype.type(norm) if hasattr(dtype, "type") else norm
    return vec


def _fast_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol):
    idx, diff = _diff_inputs(inputs)
    gen = np.random.default_rng(0)     # own generator: the user's RNG state is untouched
    all_u = [_random_unit(_storage(x).size, _storage(x).dtype, gen) for x in diff]
    all_v = [_random_unit(o._data.size, o._data.dtype, gen) for o in outputs]
    pos = _diff_output_positions(func_out)
    # numerical J u for every input, per float output
    all_Ju = []
    for x, u in zip(diff, all_u):
        arr = _storage(x)
        delta = (u * eps).reshape(arr.shape).astype(arr.dtype)
        all_Ju.append(_perturbed_difference(func, inputs, arr, Ellipsis, delta, eps, eps))
    if not outputs:
        for Jus in all_Ju:
            for Ju in Jus:
                if Ju.size and np.abs(Ju).max() > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    for i, (o, v) in enumerate(zip(outputs, all_v)):
        vJ = _analytical_jacobian(o, diff, nondet_tol, check_grad_dtypes, v=v)
        for j, (u, vJ_j) in enumerate(zip(all_u, vJ)):
            a = np.asarray(vJ_j[:, 0].dot(u))
            n = np.asarray(v.dot(all_Ju[j][pos[i]]))
            updated_atol = atol * float(u.sum()) * float(v.sum())
            if not _allclose(a, n, rtol, updated_atol):
                extra = _slow_mode_error(func, inputs, func_out, o, diff, j, pos[i], rtol,
                                         atol, eps)
                raise GradcheckError(_notallclose_msg(float(a), float(n), i, j) + extra)
    return True


def _slow_mode_error(func, inputs, func_out, output, diff, input_idx, output_pos, rtol, atol,
                     eps):
    slow_numerical = _numerical_jacobian(func, inputs, func_out, eps)[input_idx][output_pos]
    slow_analytical = _analytical_jacobian(output, diff, float("inf"), False)[input_idx]
    slow_max_diff = np.abs(slow_numerical - slow_analytical).max()
    slow_allclose = _allclose(slow_analytical, slow_numerical, rtol, atol)
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are "
           "computed \nin fast mode (random projections of the jacobians, as torch's fast "
           "mode). \nBelow, we recompute numerical and analytical "
           "jacobians in slow mode:\n\n"
           f"Numerical:\n {_wrap(slow_numerical)}\n"
           f"Analytical:\n{_wrap(slow_analytical)}\n\n"
           f"The max per-element difference (slow mode) is: {slow_max_diff}.\n")
    if slow_allclose:
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


# ------------------------------------------------------------------------------------------
# extra backward checks
# ------------------------------------------------------------------------------------------
def _test_backward_mul_by_grad_output(outputs, inputs):
    _, diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    zeros = [_wrap(np.zeros_like(o._data)) for o in outputs]
    grads_input = _grad(list(outputs), diff, zeros, allow_unused=True)
    for gi, di in zip(grads_input, diff):
        if gi is None:
            continue
        if np.count_nonzero(_dense_np(gi)) != 0:
            raise GradcheckError("backward not multiplied by grad_output")
        if _storage(gi).dtype != _storage(di).dtype:
            raise GradcheckError("grad is incorrect type")
        if tuple(gi._data.shape) != tuple(di._data.shape):
            raise GradcheckError("grad is incorrect size")
    return True


_UNDEFINED_GRAD = []


def _undefined_grad():
    """An identity Function whose backward returns an undefined (None) gradient: torch's
    ``torch._C._functions.UndefinedGrad``."""
    if not _UNDEFINED_GRAD:
        from cgrad.autograd.function import Function

        class UndefinedGrad(Function):
            @staticmethod
            def forward(ctx, x):
                return x._data

            @staticmethod
            def backward(ctx, g):
                return None

        _UNDEFINED_GRAD.append(UndefinedGrad)
    return _UNDEFINED_GRAD[0]


def _test_undefined_backward_mode(func, outputs, inputs):
    _, diff = _diff_inputs(inputs)
    if not diff:
        raise GradcheckError("no Tensors requiring grad found in input")
    undef = _undefined_grad()

    def warn_bc_breaking():
        _warn(
            "Backwards compatibility: New undefined gradient support checking "
            "feature is enabled by default, but it may break existing callers "
            "of this function. If this is true for you, you can call this "
            'function with "check_undefined_grad=False" to disable the feature')

    def check_undefined_grad_support(output_to_check):
        grads_output = [_wrap(np.zeros_like(o._data)) for o in output_to_check]
        try:
            grads_input = _grad(output_to_check, diff, grads_output, allow_unused=True)
        except RuntimeError as e:
            warn_bc_breaking()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. "
                'Please look at "Notes about undefined output gradients" in '
                '"tools/autograd/derivatives.yaml"') from e
        for gi in grads_input:
            if gi is not None and np.count_nonzero(_dense_np(gi)) != 0:
                warn_bc_breaking()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads "
                    'are undefined or zero. Please look at "Notes about undefined output '
                    'gradients" in "tools/autograd/derivatives.yaml"')
        return True

    outputs_to_check = [[undef.apply(o) for o in _differentiable_outputs(func(*inputs))]]
    if len(outputs_to_check[0]) > 1:
        for undef_grad_idx in range(len(outputs)):
            output_to_check = _differentiable_outputs(func(*inputs))
            outputs_to_check.append([undef.apply(o) if k == undef_grad_idx else o
                                     for k, o in enumerate(output_to_check)])
    return all(check_undefined_grad_support(o) for o in outputs_to_check)


def _test_batched_grad(inputs, output, output_idx):
    """Batched vjps (``grad(..., is_grads_batched=True)``) must equal one vjp per row."""
    _, diff = _diff_inputs(inputs)
    gen = np.random.default_rng(1)
    batch = gen.standard_normal((2,) + tuple(output._data.shape)).astype(output._data.dtype)
    batched = _grad([output], diff, [_wrap(batch)], retain_graph=True, allow_unused=True,
                    is_grads_batched=True)
    for b in range(batch.shape[0]):
        single = _grad([output], diff, [_wrap(batch[b])], retain_graph=True,
                       allow_unused=True)
        for k, (res, exp) in enumerate(zip(batched, single)):
            r = None if res is None else res._data[b]
            if exp is None and (r is None or np.count_nonzero(r) == 0):
                continue
            if r is None or not np.allclose(r, exp._data):
                raise GradcheckError(
                    f"\nFor output {output_idx} and input {k}:\n\n"
                    "gradcheck or gradgradcheck failed while testing batched gradient "
                    f"computation.\n\nGot: {r}\n\nExpected:\n{exp}\n")
    return True


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------
def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    r"""Check gradients computed via small finite differences against analytical gradients
    w.r.t. the tensors in ``inputs`` that are floating point and have ``requires_grad=True``.

    Same signature, defaults and errors as ``torch.autograd.gradcheck``. ``inputs`` is a
    tensor or a tuple (non-tensor entries are passed through to ``func``). Returns ``True``
    if all differences satisfy the ``allclose`` condition; otherwise raises
    :class:`GradcheckError`, or returns ``False`` when ``raise_exception=False``.

        >>> import cgrad
        >>> from cgrad.autograd import gradcheck
        >>> x = cgrad.tensor([0.5, 1.5], dtype=cgrad.float64, requires_grad=True)
        >>> gradcheck(lambda t: (t * t).exp(), (x,))
        True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    if check_forward_ad or check_batched_forward_grad:
        raise NotImplementedError(
            "gradcheck: check_forward_ad=True is not supported: cgrad has no forward-mode AD "
            "(cgrad.autograd.functional.jvp computes Jacobian-vector products with the "
            "double-backward trick instead)")
    args = dict(func=func, inputs=inputs, eps=eps, atol=atol, rtol=rtol,
                nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                check_backward_ad=check_backward_ad, fast_mode=fast_mode, masked=masked)
    if not raise_exception:
        try:
            return _gradcheck_helper(**args)
        except GradcheckError:
            return False
    return _gradcheck_helper(**args)


def _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                      check_grad_dtypes, check_batched_grad, check_backward_ad, fast_mode,
                      masked):
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    tupled_inputs = _as_tuple(inputs)
    _check_inputs(tupled_inputs)
    func_out = func(*tupled_inputs)
    outputs = _differentiable_outputs(func_out)
    _check_outputs(outputs)
    check = _fast_gradcheck if fast_mode else _slow_gradcheck
    check(func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes,
          nondet_tol)
    if not check_backward_ad:
        return True
    if check_batched_grad:
        for i, o in enumerate(outputs):
            _test_batched_grad(tupled_inputs, o, i)
    _test_backward_mul_by_grad_output(outputs, tupled_inputs)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, outputs, tupled_inputs)
    return True


def _make_grad_output(o, gen, noncontiguous):
    dtype = o._data.dtype if o._data.dtype.kind in "fc" else np.dtype(np.float64)
    arr = gen.uniform(-1.0, 1.0, size=o._data.shape).astype(dtype)
    if noncontiguous and arr.size > 1:
        # torch.testing.make_tensor(noncontiguous=True): repeat_interleave(2, -1)[..., ::2]
        arr = np.repeat(arr, 2, axis=-1)[..., ::2]
    t = _C._wrap(arr)
    t.requires_grad_(True)
    return t


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    r"""Check gradients of gradients computed via small finite differences against
    analytical gradients w.r.t. the tensors in ``inputs`` and ``grad_outputs`` that require
    grad: :func:`gradcheck` of ``(inputs, v) -> grad(func(inputs), inputs, v,
    create_graph=True)``. Same signature and defaults as ``torch.autograd.gradgradcheck``;
    random ``grad_outputs`` (uniform in [-1, 1), requiring grad) are made when not given.

        >>> import cgrad
        >>> from cgrad.autograd import gradgradcheck
        >>> x = cgrad.tensor([0.5, 1.5], dtype=cgrad.float64, requires_grad=True)
        >>> gradgradcheck(lambda t: (t * t).exp(), (x,))
        True
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_rev_over_rev to be True")
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        gen = np.random.default_rng(0)
        tupled_grad_outputs = tuple(_make_grad_output(o, gen, gen_non_contig_grad_outputs)
                                    for o in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_args_indices = {i for i, x in enumerate(tupled_inputs)
                               if _is_tensor(x) and x.requires_grad}

    def new_func(*args):
        input_args = args[:len(args) - num_outputs]
        outputs = _differentiable_outputs(func(*input_args))
        grad_outputs = args[len(args) - num_outputs:]
        diff_input_args = tuple(x for i, x in enumerate(input_args)
                                if i in diff_input_args_indices)
        if not outputs:
            return ()
        grad_inputs = _grad(list(outputs), list(diff_input_args), list(grad_outputs),
                            create_graph=True, allow_unused=True)
        # a sparse gradient is checked as a dense output (torch's gradgradcheck cannot
        # handle sparse inputs at all: pytorch/pytorch#96187)
        return tuple(g.to_dense() if _is_sparse(g) else g
                     for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad, fast_mode=fast_mode,
                     check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


# ------------------------------------------------------------------------------------------
# deprecated helpers kept for torch compatibility
# ------------------------------------------------------------------------------------------
def _deprecated(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _warn(
            f"`{fn.__name__}` was part of cgrad's private API and not meant to be exposed. "
            "We are deprecating it and it will be removed in a future version of cgrad. "
            "If you have a specific use for this or feature request for this to be a stable "
            "API, please file us an issue.",
            FutureWarning)
        return fn(*args, **kwargs)
    return wrapper


@_deprecated
def get_numerical_jacobian(fn, inputs, target=None, eps=1e-3, grad_out=1.0):
    """Numerical Jacobians of ``fn(inputs)`` w.r.t. the inputs requiring grad: a tuple with one
    ``(input.numel(), output.numel())`` tensor per input (first output only)."""
    if grad_out != 1.0:
        raise ValueError(
            "Expected grad_out to be 1.0. get_numerical_jacobian no longer "
            "supports values of grad_out != 1.0.")
    if target is not None and target is not inputs:
        raise NotImplementedError("get_numerical_jacobian: target is not supported by cgrad")
    tupled = _as_tuple(inputs)
    jacs = _numerical_jacobian(lambda *a: fn(a), tupled, fn(tupled), eps)
    return tuple(_wrap(j[0]) for j in jacs)


@_deprecated
def get_numerical_jacobian_wrt_specific_input(fn, input_idx, inputs, outputs, eps, input=None,
                                              is_forward_ad=False):
    """Numerical Jacobians of every float output of ``fn(*inputs)`` w.r.t. input
    ``input_idx``."""
    tupled = _as_tuple(inputs)
    sub = tuple(x.detach() if _is_tensor(x) and i != input_idx else x
                for i, x in enumerate(tupled))
    jacs = _numerical_jacobian(fn, sub, outputs, eps)
    return tuple(_wrap(j) for j in jacs[0])


@_deprecated
def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0):
    """``(jacobians, reentrant, correct_grad_sizes, correct_grad_types)`` of ``output``
    w.r.t. the inputs requiring grad."""
    if grad_out != 1.0:
        raise ValueError(
            "Expected grad_out to be 1.0. get_analytical_jacobian no longer "
            "supports values of grad_out != 1.0.")
    _, diff = _diff_inputs(_as_tuple(inputs))
    try:
        jacs = _analytical_jacobian(output, diff, nondet_tol, True)
        return tuple(_wrap(j) for j in jacs), True, True, True
    except GradcheckError as e:
        msg = str(e)
        jacs = _analytical_jacobian(output, diff, float("inf"), False)
        return (tuple(_wrap(j) for j in jacs), "reentrant" not in msg,
                "incorrect size" not in msg, "dtype" not in msg)
