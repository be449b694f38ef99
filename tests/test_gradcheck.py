"""cgrad.autograd.gradcheck / gradgradcheck (cgrad/autograd/gradcheck.py) against torch's.

The same function is written once with a module argument (`cgrad` or `torch`) and checked by
both libraries: verdicts, error types and messages must agree (torch's messages with
"torch." replaced by "cgrad."). Also: the API surface (names, module, signature and
defaults), fast mode, the extra backward checks (linearity in grad_output, undefined output
gradients, determinism), warnings, and that inputs are left untouched.
"""
from __future__ import annotations

import inspect
import random
import sys
import warnings

import numpy as np
import pytest

import cgrad
from cgrad.autograd import Function, gradcheck, gradgradcheck
from cgrad.autograd.gradcheck import GradcheckError


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def f64(mod, data, requires_grad=True):
    return mod.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


def make_functions(mod):
    """Custom Functions written identically for cgrad and torch (wrong ones included)."""
    F = mod.autograd.Function

    class Square(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x

    class BadSquare(F):             # forgets the factor 2
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x

    class BadIdentity(F):           # y = 2x with gradient g
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    class NotMulByGrad(F):          # gradient 2 whatever the grad_output
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return mod.ones_like(g) * 2

    class NoUndefined(F):           # two outputs, cannot handle an undefined (None) one
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    class BadOnUndefined(F):        # handles one undefined gradient, not all of them
        @staticmethod
        def forward(ctx, x, mode):
            ctx.set_materialize_grads(False)
            ctx.mode = mode
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g1 is None and g2 is None:
                if ctx.mode == "raise":
                    raise RuntimeError("cannot handle undefined gradients")
                return mod.ones(2, dtype=mod.float64), None
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3), None

    class NonDifferentiableBackward(F):   # x^2 whose backward detaches x: gradgrad wrong
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x.detach()

    return dict(Square=Square, BadSquare=BadSquare, BadIdentity=BadIdentity,
                NotMulByGrad=NotMulByGrad, NoUndefined=NoUndefined, BadOnUndefined=BadOnUndefined,
                NonDifferentiableBackward=NonDifferentiableBackward)


def both(torch, builder):
    """(cgrad result, torch result) of builder(mod): each is ('ok', value) or (type, msg)."""
    out = []
    for mod in (cgrad, torch):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(("ok", builder(mod)))
        except Exception as e:          # noqa: BLE001
            out.append((type(e).__name__, str(e)))
    return out


# ------------------------------------------------------------------------------------------
# API surface
# ------------------------------------------------------------------------------------------
def test_module_layout_mirrors_torch():
    assert callable(cgrad.autograd.gradcheck) and callable(cgrad.autograd.gradgradcheck)
    mod = sys.modules["cgrad.autograd.gradcheck"]
    assert mod.gradcheck is cgrad.autograd.gradcheck
    assert mod.GradcheckError is GradcheckError
    assert issubclass(GradcheckError, RuntimeError)
    assert set(mod.__all__) >= {"gradcheck", "gradgradcheck", "GradcheckError"}


@pytest.mark.parametrize("name", ["gradcheck", "gradgradcheck"])
def test_signature_equals_torch(torch, name):
    import torch.autograd.gradcheck  # noqa: F401
    tmod = sys.modules["torch.autograd.gradcheck"]
    ours = inspect.signature(getattr(sys.modules["cgrad.autograd.gradcheck"], name))
    theirs = inspect.signature(getattr(tmod, name))
    assert list(ours.parameters) == list(theirs.parameters)
    for p in theirs.parameters.values():
        q = ours.parameters[p.name]
        assert q.kind == p.kind and q.default == p.default, p.name


# ------------------------------------------------------------------------------------------
# verdicts and messages against torch
# ------------------------------------------------------------------------------------------
PASSING = {
    "exp_square": lambda m: (lambda x: (x * x).exp(), (f64(m, [0.5, -1.2, 0.3]),)),
    "two_inputs_two_outputs": lambda m: (
        lambda a, b: (a * b.sin(), (a @ b).tanh()),
        (f64(m, [[0.1, 0.2], [0.3, -0.4]]), f64(m, [[1.0, -0.5], [0.25, 2.0]]))),
    "non_tensor_arg": lambda m: (lambda a, k: a * k, (f64(m, [1.0, 2.0]), 3.0)),
    "integer_output_ignored": lambda m: (lambda a: (a * 2, a.argmax()), (f64(m, [1.0, 3.0]),)),
    "input_without_grad": lambda m: (
        lambda a, b: a * b, (f64(m, [1.0, 2.0], False), f64(m, [0.5, -0.5]))),
    "reduction": lambda m: (lambda a: (a.exp().sum(), a.mean()), (f64(m, [[1.0, 2.0]]),)),
    "custom_function": lambda m: (make_functions(m)["Square"].apply, (f64(m, [0.3, -2.0]),)),
    "single_tensor_input": lambda m: (lambda a: a.sigmoid(), f64(m, [0.3, -2.0])),
    "scalar": lambda m: (lambda a: a * a * a, f64(m, 1.5)),
}


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("case", sorted(PASSING))
def test_correct_functions_pass_like_torch(torch, case, fast_mode):
    def run(mod):
        fn, inputs = PASSING[case](mod)
        return mod.autograd.gradcheck(fn, inputs, fast_mode=fast_mode)
    ours, theirs = both(torch, run)
    assert ours == theirs == ("ok", True)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("case", sorted(PASSING))
def test_gradgradcheck_passes_like_torch(torch, case, fast_mode):
    def run(mod):
        fn, inputs = PASSING[case](mod)
        return mod.autograd.gradgradcheck(fn, inputs, fast_mode=fast_mode)
    ours, theirs = both(torch, run)
    assert ours == theirs == ("ok", True)


def test_jacobian_mismatch_message_equals_torch(torch):
    def run(mod):
        return mod.autograd.gradcheck(make_functions(mod)["BadSquare"].apply,
                                      (f64(mod, [1.0, 2.0]),))
    ours, theirs = both(torch, run)
    assert ours[0] == theirs[0] == "GradcheckError"
    assert ours[1] == theirs[1].replace("torch.", "cgrad.")
    assert ours[1].startswith("Jacobian mismatch for output 0 with respect to input 0,\n"
                              "numerical:tensor([[2.0000, 0.0000],")
    assert "\nanalytical:tensor([[1., 0.]," in ours[1]


def test_indices_count_differentiable_outputs_and_inputs_like_torch(torch):
    def run(mod):
        bad = make_functions(mod)["BadIdentity"]
        a, b = f64(mod, [1.0, 2.0], False), f64(mod, [1.0, 2.0])
        return mod.autograd.gradcheck(lambda a, b: (a.sum(), a * b, bad.apply(b)), (a, b))
    ours, theirs = both(torch, run)
    assert ours[1] == theirs[1].replace("torch.", "cgrad.")
    assert ours[1].startswith("Jacobian mismatch for output 1 with respect to input 0,")


def test_fast_mode_detects_and_reports_in_slow_mode():
    bad = make_functions(cgrad)["BadSquare"]
    x = f64(cgrad, [1.0, 2.0, -0.5])
    with pytest.raises(GradcheckError) as e:
        gradcheck(bad.apply, (x,), fast_mode=True)
    msg = str(e.value)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    assert "computed \nin fast mode" in msg
    assert "Numerical:\n tensor([[ 2.0000,  0.0000,  0.0000]," in msg
    assert "The max per-element difference (slow mode) is: " in msg
    assert gradcheck(bad.apply, (x,), fast_mode=True, raise_exception=False) is False


@pytest.mark.parametrize("fast_mode", [False, True])
def test_raise_exception_false_returns_false(torch, fast_mode):
    def run(mod):
        return mod.autograd.gradcheck(make_functions(mod)["BadSquare"].apply,
                                      (f64(mod, [1.0, 2.0]),), raise_exception=False,
                                      fast_mode=fast_mode)
    assert both(torch, run) == [("ok", False), ("ok", False)]


def test_float32_inputs_warn_and_fail_like_torch(torch):
    def run(mod):
        x = mod.tensor([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                mod.autograd.gradcheck(lambda a: a * 2, (x,))
                res = "passed"
            except RuntimeError as e:
                res = str(e)
        return res, [str(i.message) for i in w if i.category is UserWarning]
    ours, theirs = both(torch, run)
    assert ours[1][1] == theirs[1][1] == [
        "Input #0 requires gradient and is not a double precision floating point or complex. "
        "This check will likely fail if all the inputs are not of double precision floating "
        "point or complex. "]
    assert ours[1][0] == theirs[1][0].replace("torch.", "cgrad.")


@pytest.mark.parametrize("case", [
    "no_input_requires_grad", "no_differentiable_outputs", "not_mul_by_grad",
    "undefined_grad", "stride0"])
def test_errors_equal_torch(torch, case):
    def run(mod):
        fns = make_functions(mod)
        x = f64(mod, [1.0, 2.0])
        if case == "no_input_requires_grad":
            return mod.autograd.gradcheck(lambda a: a * 2, (x.detach(),))
        if case == "no_differentiable_outputs":
            return mod.autograd.gradcheck(lambda a: a.detach() * a.detach(), x)
        if case == "not_mul_by_grad":
            return mod.autograd.gradcheck(fns["NotMulByGrad"].apply, (x,))
        if case == "undefined_grad":
            return mod.autograd.gradcheck(fns["NoUndefined"].apply, (x,))
        base = mod.tensor(np.array([1.0]), dtype=mod.float64)
        return mod.autograd.gradcheck(lambda a: a * 2, (base.expand(3).requires_grad_(),))
    if case == "stride0" and not hasattr(cgrad.Tensor, "expand"):
        pytest.skip("no expand")
    ours, theirs = both(torch, run)
    assert ours[0] == theirs[0], (ours, theirs)
    assert ours[1] == theirs[1].replace("torch.", "cgrad.")


@pytest.mark.parametrize("mode", ["raise", "nonzero"])
def test_undefined_grad_check_like_torch(torch, mode):
    def run(mod):
        fn = make_functions(mod)["BadOnUndefined"]
        x = f64(mod, [1.0, 2.0])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                mod.autograd.gradcheck(lambda a: fn.apply(a, mode), (x,))
                res = "passed"
            except GradcheckError if mod is cgrad else RuntimeError as e:
                res = str(e)
        assert mod.autograd.gradcheck(lambda a: fn.apply(a, mode), (x,),
                                      check_undefined_grad=False)
        return res, [str(i.message) for i in w]
    ours, theirs = both(torch, run)
    assert ours == theirs
    assert ("handle undefined output grads" if mode == "raise" else
            "Expected all input grads to be undefined or zero") in ours[1][0]
    assert "check_undefined_grad=False" in ours[1][1][0]


def test_nondeterministic_backward_and_nondet_tol(torch):
    def run(mod, tol):
        class ND(mod.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * (2 + random.random() * 1e-9)
        return mod.autograd.gradcheck(ND.apply, (f64(mod, [1.0, 2.0]),), nondet_tol=tol)
    ours, theirs = both(torch, lambda m: run(m, 0.0))
    assert ours[0] == theirs[0] == "GradcheckError"
    assert ours[1].startswith(
        "Backward is not reentrant, i.e., running backward with same input and grad_output "
        "multiple times gives different values, although analytical gradient matches "
        "numerical gradient.The tolerance for nondeterminism was 0.0.")
    assert both(torch, lambda m: run(m, 1e-7)) == [("ok", True), ("ok", True)]


def test_gradgradcheck_detects_wrong_double_backward_like_torch(torch):
    def run(mod):
        fn = make_functions(mod)["NonDifferentiableBackward"].apply
        x = f64(mod, [1.0, 2.0])
        assert mod.autograd.gradcheck(fn, (x,))
        return mod.autograd.gradgradcheck(fn, (x,), grad_outputs=(f64(mod, [1.0, 1.0]),))
    ours, theirs = both(torch, run)
    assert ours[0] == theirs[0] == "GradcheckError"
    assert ours[1] == theirs[1].replace("torch.", "cgrad.")
    assert ours[1].startswith("Jacobian mismatch for output 0 with respect to input 0,")
    fn = make_functions(cgrad)["NonDifferentiableBackward"].apply
    assert gradgradcheck(fn, (f64(cgrad, [1.0, 2.0]),), raise_exception=False) is False
    assert gradgradcheck(fn, (f64(cgrad, [1.0, 2.0]),), fast_mode=True,
                         raise_exception=False) is False


def test_gradgradcheck_grad_outputs_options():
    fn = lambda a, b: (a.exp() * b, (a * b).sum())          # noqa: E731
    a, b = f64(cgrad, [[0.1, 0.2], [0.3, 0.4]]), f64(cgrad, [[1.0, -1.0], [0.5, 2.0]])
    assert gradgradcheck(fn, (a, b), gen_non_contig_grad_outputs=True)
    go = (f64(cgrad, [[1.0, 2.0], [3.0, 4.0]]), f64(cgrad, 0.5))
    assert gradgradcheck(fn, (a, b), go)
    # grad_outputs that do not require grad are constants of the checked function
    assert gradgradcheck(fn, (a, b), tuple(g.detach() for g in go))


def test_inputs_left_untouched_and_passed_as_is():
    x = f64(cgrad, [0.1, 0.7, -0.3])
    before = x.detach().numpy().copy()
    seen = set()

    def fn(a):
        seen.add(id(a))
        return a.exp()
    assert gradcheck(fn, (x,))
    assert gradcheck(fn, (x,), fast_mode=True)
    assert gradgradcheck(fn, (x,))
    assert seen == {id(x)}
    np.testing.assert_array_equal(x.detach().numpy(), before)
    assert x.grad is None and x._version == 0


def test_list_inputs_and_non_contiguous_input():
    a = f64(cgrad, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).detach().t().requires_grad_()
    assert gradcheck(lambda t: (t * t).sum(0), [a])
    assert gradcheck(lambda t: (t * t).sum(0), [a], fast_mode=True)


def test_option_validation():
    x = f64(cgrad, [1.0])
    with pytest.raises(AssertionError, match="at least one of check_forward_ad"):
        gradcheck(lambda a: a, (x,), check_backward_ad=False)
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        gradcheck(lambda a: a, (x,), check_forward_ad=True)
    with pytest.raises(AssertionError, match="check_rev_over_rev"):
        gradgradcheck(lambda a: a, (x,), check_rev_over_rev=False)
    assert gradcheck(lambda a: a * a, (x,), check_batched_grad=True)
    y = f64(cgrad, [[1.0, -2.0], [0.5, 3.0]])
    assert gradcheck(lambda a, b: (b @ a.exp()).tanh(), (f64(cgrad, [0.3, -0.7]), y),
                     check_batched_grad=True)
    assert gradgradcheck(lambda a, b: (b @ a.exp()).tanh(), (f64(cgrad, [0.3, -0.7]), y),
                         check_batched_grad=True)
    assert gradcheck(lambda a: a * a, (x,), check_grad_dtypes=True, masked=False)


def test_deprecated_jacobian_helpers():
    from cgrad.autograd.gradcheck import get_analytical_jacobian, get_numerical_jacobian
    x = f64(cgrad, [1.0, 2.0])
    with pytest.warns(FutureWarning):
        num = get_numerical_jacobian(lambda inp: inp[0] ** 3, (x,), eps=1e-6)
    np.testing.assert_allclose(num[0].numpy(), np.diag([3.0, 12.0]), rtol=1e-6)
    with pytest.warns(FutureWarning):
        jac, reentrant, sizes_ok, types_ok = get_analytical_jacobian((x,), x ** 3)
    np.testing.assert_allclose(jac[0].numpy(), np.diag([3.0, 12.0]))
    assert reentrant and sizes_ok and types_ok


@pytest.mark.parametrize("name,fn,shapes", [
    ("matmul", lambda a, b: a @ b, [(2, 3), (3, 2)]),
    ("softmax", lambda a: a.softmax(-1), [(2, 3)]),
    ("logsumexp", lambda a: a.logsumexp(1), [(2, 3)]),
    ("div_pow", lambda a, b: (a / (b * b + 1)) ** 2, [(3,), (3,)]),
    ("broadcast", lambda a, b: a * b + a, [(2, 3), (3,)]),
    ("norm", lambda a: a.norm(), [(4,)]),
    ("var", lambda a: a.var(0), [(3, 2)]),
])
def test_builtin_ops_pass_gradcheck_and_gradgradcheck(name, fn, shapes):
    rng = np.random.default_rng(len(name))
    inputs = tuple(f64(cgrad, rng.uniform(0.2, 1.5, s)) for s in shapes)
    assert gradcheck(fn, inputs)
    assert gradcheck(fn, inputs, fast_mode=True)
    assert gradgradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs, fast_mode=True)


# ------------------------------------------------------------------------------------------
# sparse inputs (checked on their stored values)
# ------------------------------------------------------------------------------------------
def sparse_input():
    if not hasattr(cgrad, "sparse_coo_tensor"):
        pytest.skip("no cgrad.sparse")
    idx = cgrad.tensor([[0, 1, 1, 0], [2, 0, 2, 2]])          # with a duplicate entry
    vals = cgrad.tensor([1.0, 2.0, 3.0, 0.5], dtype=cgrad.float64)
    return cgrad.sparse_coo_tensor(idx, vals, (2, 3)).requires_grad_()


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("op", ["sparse_mm", "matmul", "to_dense"])
def test_sparse_inputs(op, fast_mode):
    S = sparse_input()
    B = f64(cgrad, np.random.default_rng(0).standard_normal((3, 2)))
    fn = {"sparse_mm": lambda s, b: cgrad.sparse.mm(s, b),
          "matmul": lambda s, b: cgrad.matmul(s, b),
          "to_dense": lambda s, b: s.to_dense() * 2}[op]
    assert gradcheck(fn, (S, B), fast_mode=fast_mode)
    assert gradgradcheck(lambda s, b: fn(s, b) ** 2, (S, B), fast_mode=fast_mode)
    vals_before = S._values().numpy().copy()
    gradcheck(fn, (S, B), fast_mode=fast_mode)
    np.testing.assert_array_equal(S._values().numpy(), vals_before)


def test_sparse_wrong_gradient_detected_and_sparse_output_rejected():
    S = sparse_input()

    class BadDensify(Function):
        @staticmethod
        def forward(ctx, s):
            return s.to_dense().detach() * 2

        @staticmethod
        def backward(ctx, g):
            return g                       # should be 2 * g

    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect "
                                             "to input 0"):
        gradcheck(BadDensify.apply, (S,))
    with pytest.raises(ValueError, match="Sparse output is not supported at gradcheck yet"):
        gradcheck(lambda s: s * 2, (S,))
