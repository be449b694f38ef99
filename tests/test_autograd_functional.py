"""cgrad.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp) against torch's.

Every function is written once with a module argument and evaluated by both libraries: the
results must have the same nesting (tuple / list / single tensor), shapes, values and
requires_grad; errors must have torch's type and message ("torch." -> "cgrad."). Also:
create_graph results can be differentiated again, create_graph=False results never require
grad, and the user's tensors are not modified.
"""
from __future__ import annotations

import numpy as np
import pytest

import cgrad
import cgrad.autograd.functional as AF


# torch's own forward-mode jacobian (vmap) emits a torch.jit deprecation warning
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def t64(mod, arr, requires_grad=False):
    return mod.tensor(np.asarray(arr, dtype=np.float64), requires_grad=requires_grad)


RNG = np.random.default_rng(7)
XA = RNG.uniform(-1, 1, 3)
YA = RNG.uniform(-1, 1, 3)
MA = RNG.uniform(-1, 1, (2, 3))


def assert_same(ours, theirs, path="", check_requires_grad=True):
    if isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs), (path, type(ours), type(theirs))
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{i}]", check_requires_grad)
        return
    assert isinstance(ours, cgrad.Tensor), (path, type(ours))
    assert tuple(ours.shape) == tuple(theirs.shape), (path, ours.shape, theirs.shape)
    if check_requires_grad:
        assert ours.requires_grad == theirs.requires_grad, path
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12, err_msg=path)


def run_both(torch, build):
    out = []
    for mod in (cgrad, torch):
        try:
            out.append(("ok", build(mod)))
        except Exception as e:           # noqa: BLE001
            out.append((type(e).__name__, str(e).replace("torch.", "cgrad.")))
    return out


# functions: name -> (func(mod), inputs(mod))
FUNCS = {
    "single_to_single": (lambda m: (lambda x: x.exp() * x), lambda m: t64(m, XA)),
    "single_to_tuple": (lambda m: (lambda x: (x.sin(), (x * x).sum())), lambda m: t64(m, XA)),
    "tuple_to_single": (lambda m: (lambda x, y: x * y.exp()),
                        lambda m: (t64(m, XA), t64(m, YA))),
    "tuple_to_tuple": (lambda m: (lambda x, y: ((x.exp() * y).sum(), x * y.sum())),
                       lambda m: (t64(m, XA), t64(m, YA))),
    "matrix": (lambda m: (lambda a, x: (a @ x).tanh()), lambda m: (t64(m, MA), t64(m, XA))),
    "independent_output": (lambda m: (lambda x, y: (x * 2, x.sum() * 0 + 1)),
                           lambda m: (t64(m, XA), t64(m, YA))),
}

SCALAR_FUNCS = {
    "cubic": (lambda m: (lambda x: (x ** 3).sum()), lambda m: t64(m, XA)),
    "two_inputs": (lambda m: (lambda x, y: (x.exp() * y * y).sum()),
                   lambda m: (t64(m, XA), t64(m, YA))),
    "linear_in_y": (lambda m: (lambda x, y: (x * x).sum() + y.sum()),
                    lambda m: (t64(m, XA), t64(m, YA))),
    "matrix": (lambda m: (lambda a, x: ((a @ x).tanh() ** 2).sum()),
               lambda m: (t64(m, MA), t64(m, XA))),
}


def v_like(mod, inputs, scale=1.0):
    if isinstance(inputs, tuple):
        return tuple(mod.ones_like(t) * scale for t in inputs)
    return mod.ones_like(inputs) * scale


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_jacobian_matches_torch(torch, name, create_graph, vectorize):
    f, inp = FUNCS[name]
    ours, theirs = run_both(torch, lambda m: m.autograd.functional.jacobian(
        f(m), inp(m), create_graph=create_graph, vectorize=vectorize))
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_forward_mode_jacobian_matches_torch(torch, name):
    f, inp = FUNCS[name]
    ours, theirs = run_both(torch, lambda m: m.autograd.functional.jacobian(
        f(m), inp(m), vectorize=True, strategy="forward-mode"))
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", sorted(SCALAR_FUNCS))
def test_hessian_matches_torch(torch, name, create_graph):
    f, inp = SCALAR_FUNCS[name]
    ours, theirs = run_both(torch, lambda m: m.autograd.functional.hessian(
        f(m), inp(m), create_graph=create_graph))
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("name", sorted(SCALAR_FUNCS))
def test_hessian_forward_mode_outer_matches_torch(torch, name):
    f, inp = SCALAR_FUNCS[name]
    ours, theirs = run_both(torch, lambda m: m.autograd.functional.hessian(
        f(m), inp(m), vectorize=True, outer_jacobian_strategy="forward-mode"))
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    # torch leaves these requiring grad (its forward-mode path skips the detach); cgrad's
    # create_graph=False results never require grad
    assert_same(ours[1], theirs[1], check_requires_grad=False)
    assert not any(t.requires_grad for t in _leaves(ours[1]))


def _leaves(x):
    if isinstance(x, (tuple, list)):
        return [t for el in x for t in _leaves(el)]
    return [x]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_vjp_and_jvp_match_torch(torch, name, create_graph):
    f, inp = FUNCS[name]

    def vjp(m):
        x = inp(m)
        out = f(m)(*(x if isinstance(x, tuple) else (x,)))
        v = v_like(m, tuple(out) if isinstance(out, tuple) else out, 0.5)
        return m.autograd.functional.vjp(f(m), x, v, create_graph=create_graph)

    def jvp(m):
        x = inp(m)
        return m.autograd.functional.jvp(f(m), x, v_like(m, x, 0.5), create_graph=create_graph)

    for build in (vjp, jvp):
        ours, theirs = run_both(torch, build)
        assert ours[0] == theirs[0] == "ok", (ours, theirs)
        assert_same(ours[1], theirs[1])


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("fn", ["hvp", "vhp"])
@pytest.mark.parametrize("name", sorted(SCALAR_FUNCS))
def test_hvp_vhp_match_torch(torch, name, fn, create_graph):
    f, inp = SCALAR_FUNCS[name]
    ours, theirs = run_both(torch, lambda m: getattr(m.autograd.functional, fn)(
        f(m), inp(m), v_like(m, inp(m), -0.5), create_graph=create_graph))
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    assert_same(ours[1], theirs[1])


def test_scalar_defaults_for_v(torch):
    def build(m):
        x = t64(m, [0.7])
        f = lambda t: (t ** 3).sum()                        # noqa: E731
        F = m.autograd.functional
        return (F.vjp(f, x), F.jvp(f, x), F.hvp(f, x), F.vhp(f, x))
    ours, theirs = run_both(torch, build)
    assert ours[0] == theirs[0] == "ok"
    assert_same(ours[1], theirs[1])


# ------------------------------------------------------------------------------------------
# strict mode and errors
# ------------------------------------------------------------------------------------------
ERROR_CASES = {
    "jacobian_strict_independent": lambda F, m: F.jacobian(
        lambda x, y: x * 2, (t64(m, XA), t64(m, YA)), strict=True),
    "jacobian_strict_no_grad_output": lambda F, m: F.jacobian(
        lambda x: x.detach() * 2, t64(m, XA), strict=True),
    "jacobian_strict_create_graph_linear": lambda F, m: F.jacobian(
        lambda x: x * 2, t64(m, XA), strict=True, create_graph=True),
    "jacobian_strict_vectorize": lambda F, m: F.jacobian(
        lambda x: x * x, t64(m, XA), strict=True, vectorize=True),
    "jacobian_bad_strategy": lambda F, m: F.jacobian(lambda x: x, t64(m, XA), strategy="x"),
    "jacobian_fwd_no_vectorize": lambda F, m: F.jacobian(
        lambda x: x, t64(m, XA), strategy="forward-mode"),
    "jacobian_fwd_create_graph": lambda F, m: F.jacobian(
        lambda x: x, t64(m, XA), strategy="forward-mode", vectorize=True, create_graph=True),
    "jacobian_fwd_strict": lambda F, m: F.jacobian(
        lambda x: x, t64(m, XA), strategy="forward-mode", vectorize=True, strict=True),
    "inputs_not_tensor": lambda F, m: F.jacobian(lambda x, y: x, (t64(m, XA), 3)),
    "input_not_tensor": lambda F, m: F.vjp(lambda x: x, [1.0, 2.0]),
    "output_not_tensor": lambda F, m: F.jacobian(lambda x: (x, 1.0), t64(m, XA)),
    "vjp_strict_independent": lambda F, m: F.vjp(
        lambda x, y: x.sum(), (t64(m, XA), t64(m, YA)), strict=True),
    "vjp_v_missing": lambda F, m: F.vjp(lambda x: x * 2, t64(m, XA)),
    "vjp_v_bad_size": lambda F, m: F.vjp(lambda x: x * 2, t64(m, XA), t64(m, [1.0, 2.0])),
    "vjp_v_bad_len": lambda F, m: F.vjp(
        lambda x: (x, x), t64(m, XA), (t64(m, XA),)),
    "vjp_v_single_expected": lambda F, m: F.vjp(
        lambda x: x, t64(m, XA), (t64(m, XA), t64(m, XA))),
    "vjp_v_bad_entry": lambda F, m: F.vjp(
        lambda x: (x, x), t64(m, XA), (t64(m, XA), t64(m, [1.0]))),
    "jvp_v_missing": lambda F, m: F.jvp(lambda x: x * 2, t64(m, XA)),
    "jvp_strict_independent": lambda F, m: F.jvp(
        lambda x, y: x * 2, (t64(m, XA), t64(m, YA)), (t64(m, XA), t64(m, YA)), strict=True),
    "hessian_not_scalar": lambda F, m: F.hessian(lambda x: x * x, t64(m, XA)),
    "hessian_tuple_output": lambda F, m: F.hessian(lambda x: (x.sum(),), t64(m, XA)),
    "hessian_strict_linear": lambda F, m: F.hessian(lambda x: x.sum(), t64(m, XA), strict=True),
    "hessian_strict_independent": lambda F, m: F.hessian(
        lambda x, y: (x * x).sum() + y.sum(), (t64(m, XA), t64(m, YA)), strict=True),
    "hvp_not_scalar": lambda F, m: F.hvp(lambda x: x * x, t64(m, XA), t64(m, XA)),
    "vhp_tuple_output": lambda F, m: F.vhp(lambda x: (x.sum(),), t64(m, XA), t64(m, XA)),
    "hvp_strict_linear": lambda F, m: F.hvp(
        lambda x: x.sum(), t64(m, XA), t64(m, XA), strict=True),
    "vhp_strict_quadratic_in_x_linear_in_y": lambda F, m: F.vhp(
        lambda x, y: (x * x).sum() + y.sum(), (t64(m, XA), t64(m, YA)),
        (t64(m, XA), t64(m, YA)), strict=True),
    "hvp_v_missing": lambda F, m: F.hvp(lambda x: (x * x).sum(), t64(m, XA)),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_match_torch(torch, case):
    ours, theirs = run_both(torch, lambda m: ERROR_CASES[case](m.autograd.functional, m))
    assert ours[0] == theirs[0] and ours[0] != "ok", (ours, theirs)
    assert ours[1] == theirs[1]


def test_strict_error_message_key_phrase():
    with pytest.raises(RuntimeError, match=r"^Output 0 of the user-provided function is "
                       r"independent of input 1\. This is not allowed in strict mode\.$"):
        AF.jacobian(lambda x, y: x * 2, (t64(cgrad, XA), t64(cgrad, YA)), strict=True)


def test_non_strict_independent_parts_are_zeros():
    x, y = t64(cgrad, XA), t64(cgrad, YA)
    jx, jy = AF.jacobian(lambda a, b: a * 2, (x, y))
    np.testing.assert_array_equal(jx.numpy(), 2 * np.eye(3))
    np.testing.assert_array_equal(jy.numpy(), np.zeros((3, 3)))
    _, (gx, gy) = AF.vjp(lambda a, b: a.sum(), (x, y))
    np.testing.assert_array_equal(gy.numpy(), np.zeros(3))
    _, hv = AF.hvp(lambda a: a.sum(), x, x)
    np.testing.assert_array_equal(hv.numpy(), np.zeros(3))
    j = AF.jacobian(lambda a: a.detach() * 2, x)        # output does not require grad
    np.testing.assert_array_equal(j.numpy(), np.zeros((3, 3)))


# ------------------------------------------------------------------------------------------
# create_graph semantics
# ------------------------------------------------------------------------------------------
def test_create_graph_false_results_do_not_require_grad_and_inputs_untouched():
    x = t64(cgrad, XA, requires_grad=True)
    f = lambda a: (a.exp() * a).sum()                         # noqa: E731
    results = [AF.jacobian(f, x), AF.hessian(f, x), AF.vjp(f, x)[1], AF.jvp(f, x, x)[1],
               AF.hvp(f, x, x)[1], AF.vhp(f, x, x)[1], AF.vjp(f, x)[0],
               AF.jacobian(f, x, vectorize=True, strategy="forward-mode")]
    assert not any(r.requires_grad for r in results)
    assert x.grad is None and x.is_leaf


def test_create_graph_true_allows_higher_derivatives(torch):
    def build(m):
        x = t64(m, XA, requires_grad=True)
        F = m.autograd.functional
        f = lambda a: (a.sin() * a * a).sum()                 # noqa: E731
        out = []
        for jac in (F.jacobian(f, x, create_graph=True), F.hessian(f, x, create_graph=True),
                    F.vjp(f, x, create_graph=True)[1], F.jvp(f, x, x, create_graph=True)[1],
                    F.hvp(f, x, x * 1, create_graph=True)[1],
                    F.vhp(f, x, x * 1, create_graph=True)[1]):
            g, = m.autograd.grad((jac * jac).sum(), x)
            out.append(g)
        return tuple(out)
    ours, theirs = run_both(torch, build)
    assert ours[0] == theirs[0] == "ok", (ours, theirs)
    assert_same(ours[1], theirs[1])


def test_works_under_no_grad():
    x = t64(cgrad, XA)
    with cgrad.no_grad():
        j = AF.jacobian(lambda a: a * a, x)
        out, v = AF.vjp(lambda a: (a * a).sum(), x)
        assert not cgrad.is_grad_enabled()
    np.testing.assert_allclose(j.numpy(), np.diag(2 * XA))
    np.testing.assert_allclose(v.numpy(), 2 * XA)


def test_float32_dtypes_kept(torch):
    def build(m):
        x = m.tensor(XA.astype(np.float32))
        return m.autograd.functional.jacobian(lambda a: a.exp(), x)
    ours, theirs = run_both(torch, build)
    assert ours[1].dtype == np.float32
    assert_same(ours[1], theirs[1])


# ----------------------------------------------------------------------------------------
# Without torch: every function's values against central differences in float64
# ----------------------------------------------------------------------------------------
def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _fd_jacobian(f, arrays, eps=1e-6):
    """[output][input] Jacobian blocks (shape out.shape + in.shape) of f by central
    differences, f evaluated with cgrad on float64 copies of `arrays`."""
    def call(arrs):
        return [o.detach().numpy() for o in _tuple(f(*(cgrad.tensor(a) for a in arrs)))]
    outs = call(arrays)
    blocks = [[np.zeros(o.shape + a.shape) for a in arrays] for o in outs]
    for k, a in enumerate(arrays):
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            for i, (op, om) in enumerate(zip(call(plus), call(minus))):
                blocks[i][k][(...,) + idx] = (op - om) / (2 * eps)
    return blocks


def _blocks(result, single_out, single_in):
    """cgrad's nested result as [output][input] ndarrays."""
    if single_out and single_in:
        return [[result.detach().numpy()]]
    if single_out or single_in:
        row = [r.detach().numpy() for r in result]
        return [row] if single_out else [[r] for r in row]
    return [[r.detach().numpy() for r in out] for out in result]


def _arrays(inp):
    return tuple(t.detach().numpy().copy() for t in _tuple(inp))


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("strategy", ["reverse", "reverse-vectorized", "forward-mode"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_jacobian_against_finite_differences(name, strategy):
    f, inp = FUNCS[name]
    inputs = inp(cgrad)
    kw = {"reverse": {}, "reverse-vectorized": dict(vectorize=True),
          "forward-mode": dict(vectorize=True, strategy="forward-mode")}[strategy]
    J = AF.jacobian(f(cgrad), inputs, **kw)
    single_out = not isinstance(f(cgrad)(*_tuple(inputs)), tuple)
    got = _blocks(J, single_out, not isinstance(inputs, tuple))
    want = _fd_jacobian(f(cgrad), _arrays(inputs))
    for g_row, w_row in zip(got, want, strict=True):
        for g, w in zip(g_row, w_row, strict=True):
            _close(g, w)


def _fd_hessian(f, arrays):
    """[input][input] Hessian blocks: central differences of the gradient (cgrad's
    autograd.grad, itself checked against finite differences by gradcheck)."""
    def grads(*ts):
        ts = [t.detach().requires_grad_() for t in ts]
        return cgrad.autograd.grad(f(*ts), ts, allow_unused=True, materialize_grads=True)
    return _fd_jacobian(grads, arrays)


@pytest.mark.parametrize("outer", ["reverse", "forward-mode"])
@pytest.mark.parametrize("name", sorted(SCALAR_FUNCS))
def test_hessian_hvp_vhp_against_finite_differences(name, outer):
    f, inp = SCALAR_FUNCS[name]
    inputs = inp(cgrad)
    single = not isinstance(inputs, tuple)
    kw = {} if outer == "reverse" else dict(vectorize=True, outer_jacobian_strategy=outer)
    H = _fd_hessian(f(cgrad), _arrays(inputs))
    got = _blocks(AF.hessian(f(cgrad), inputs, **kw), single, single)
    for g_row, w_row in zip(got, H, strict=True):
        for g, w in zip(g_row, w_row, strict=True):
            _close(g, w)
    rng = np.random.default_rng(3)
    arrays = _arrays(inputs)
    v = tuple(rng.standard_normal(a.shape) for a in arrays)
    v_in = cgrad.tensor(v[0]) if single else tuple(cgrad.tensor(x) for x in v)
    value = f(cgrad)(*_tuple(inputs)).item()
    for fn in (AF.hvp, AF.vhp):
        out, prod = fn(f(cgrad), inputs, v_in)
        assert out.item() == pytest.approx(value)
        for i, p in enumerate(_tuple(prod)):
            # the Hessian is symmetric: H v and v^T H agree
            want = sum(np.tensordot(H[i][k], v[k], axes=v[k].ndim) for k in range(len(v)))
            _close(p.detach().numpy(), want)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_vjp_jvp_against_finite_differences(name):
    f, inp = FUNCS[name]
    inputs = inp(cgrad)
    arrays = _arrays(inputs)
    J = _fd_jacobian(f(cgrad), arrays)
    outs = [o.detach().numpy() for o in _tuple(f(cgrad)(*_tuple(inputs)))]
    rng = np.random.default_rng(4)
    u = tuple(rng.standard_normal(o.shape) for o in outs)      # cotangents
    w = tuple(rng.standard_normal(a.shape) for a in arrays)    # tangents
    single_out = not isinstance(f(cgrad)(*_tuple(inputs)), tuple)
    single_in = not isinstance(inputs, tuple)
    u_in = cgrad.tensor(u[0]) if single_out else tuple(cgrad.tensor(x) for x in u)
    w_in = cgrad.tensor(w[0]) if single_in else tuple(cgrad.tensor(x) for x in w)
    value, vjp = AF.vjp(f(cgrad), inputs, u_in)
    for k, g in enumerate(_tuple(vjp)):
        want = sum(np.tensordot(u[i], J[i][k], axes=u[i].ndim) for i in range(len(u)))
        _close(g.detach().numpy(), want)
    value2, jvp = AF.jvp(f(cgrad), inputs, w_in)
    for i, g in enumerate(_tuple(jvp)):
        want = sum(np.tensordot(J[i][k], w[k], axes=w[k].ndim) for k in range(len(w)))
        _close(g.detach().numpy(), want)
    for val in (value, value2):
        for o, ref in zip(_tuple(val), outs, strict=True):
            np.testing.assert_array_equal(o.detach().numpy(), ref)
