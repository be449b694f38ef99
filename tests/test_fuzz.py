"""Differential fuzzing of the engine and the op library: random programs of 20-300 nodes
(tests/fuzz_graphs.py) run on cgrad and compared with torch (float64: every tensor's value,
requires_grad, is_leaf and version after the forward, every gradient, hook call counts and
the exception type where one is raised), or, without torch, with central finite differences.

Drivers (one test each):
- backward: `autograd.backward(roots, grad_tensors, retain_graph, inputs)` or
  `root.backward(...)`; a second backward on a retained graph; sometimes a second backward
  on a freed graph (torch may raise where cgrad does not: see `_AGAIN_DIVERGENCE`);
- grad: `autograd.grad(roots, inputs, grad_outputs, allow_unused / materialize_grads)` on a
  subset of leaves and intermediates, twice when the graph is retained;
- double: `create_graph=True`, then the gradient of a function of the gradients.

Tensor hooks (scale / replace / observe) and retain_grad are steps of the program.

Profiles (tests/conftest.py): `default` (CI), `long` (>= 20,000 programs over the four
tests: `pytest tests/test_fuzz.py --hypothesis-profile=long`) and `sanitize` (1,000
programs, for the ASan+UBSan build). Set CGRAD_FUZZ_NO_TORCH=1 to use the
finite-difference oracle even where torch is installed.

Ops torch has and cgrad lacks (left out of the generator): kron, sort, argsort, topk,
median, kthvalue, mode, repeat_interleave, index_put(_), index_copy, index_fill,
masked_scatter, scatter_reduce, cummax, cummin, logcumsumexp, inner, tensordot, renorm,
std_mean, var_mean, aminmax, F.logsigmoid, F.hardtanh, and the in-place forms index_add_,
scatter_, scatter_add_. Of the ops of issue 17 set A, the unary ones of cgrad/ops/special.py
and atan2, hypot and logaddexp are drawn; lerp, xlogy, the add* products, cross, diag,
diagonal, tril, triu, trace and diff are not yet (tests/test_ops_more_*.py test them).
"""
from __future__ import annotations

import builtins
import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import event, given, note, reject

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from fuzz_graphs import _STEP_FUNCTIONS, R, programs, run_program  # noqa: E402


def _load_torch():
    if os.environ.get("CGRAD_FUZZ_NO_TORCH"):
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


TORCH = _load_torch()
RTOL = 1e-10


@pytest.fixture(scope="module")
def oracle():
    """torch when importable (and not disabled), else None: finite differences."""
    return TORCH


# ======================================================================================
# Running one program on one library


class Outcome:
    def __init__(self):
        self.error = None          # (phase, step, exception)
        self.phase = "forward"
        self.values = None         # per pool entry: (array, requires_grad, is_leaf, version)
        self.grads = []            # [(phase, {label: array or None})]
        self.hooks = {}
        self.again = None          # "ok" or the exception of a backward on a freed graph
        self.made_by = None        # the step that made each pool entry


def _np(t):
    return np.array(t.detach().numpy(), copy=True)


def _attr(t, name):
    """t.name, or the exception type's name if reading it raises (torch raises for a view
    from a multi-output op whose base was modified in place)."""
    try:
        return getattr(t, name)
    except Exception as e:
        return f"raises {_builtin_type(e).__name__}"


def _snap(t):
    return (_np(t), _attr(t, "requires_grad"), _attr(t, "is_leaf"), int(t._version))


def _grad_snap(pool):
    out = {}
    for k, t in enumerate(pool):
        if _attr(t, "is_leaf") is True or _attr(t, "retains_grad") is True:
            g = t.grad
            out[f"t{k}.grad"] = None if g is None else _np(g)
    return out


def _tensor(lib, a):
    return None if a is None else lib.tensor(a, dtype=lib.float64)


def _drive_backward(prog, lib, env, pool, res):
    roots = [pool[r] for r in prog.roots]
    gos = [_tensor(lib, g) for g in prog.grad_outputs]
    inputs = [pool[i] for i in prog.inputs] if prog.inputs else None

    def call():
        if len(roots) == 1 and prog.seed % 2:
            roots[0].backward(gos[0], retain_graph=prog.retain, inputs=inputs)
        else:
            lib.autograd.backward(roots, gos, retain_graph=prog.retain, inputs=inputs)
    res.phase = "backward"
    call()
    res.grads.append(("backward", _grad_snap(pool)))
    if prog.second:
        res.phase = "backward2"
        call()
        res.grads.append(("backward2", _grad_snap(pool)))
    if prog.again:
        res.phase = "again"
        try:
            call()
        except Exception as e:   # compared in _compare
            res.again = e
        else:
            res.again = "ok"
            res.grads.append(("again", _grad_snap(pool)))


def _drive_grad(prog, lib, env, pool, res):
    roots = [pool[r] for r in prog.roots]
    gos = [_tensor(lib, g) for g in prog.grad_outputs]
    inputs = [pool[i] for i in prog.inputs]
    kw = {"materialize_grads": True} if prog.materialize else {}

    def call():
        gs = lib.autograd.grad(roots, inputs, gos, retain_graph=prog.retain,
                               allow_unused=prog.allow_unused, **kw)
        return {f"d/dt{i}": None if g is None else _np(g) for i, g in zip(prog.inputs, gs)}
    res.phase = "grad"
    got = call()
    got.update(_grad_snap(pool))
    res.grads.append(("grad", got))
    if prog.retain:
        res.phase = "grad2"
        res.grads.append(("grad2", call()))


def _drive_double(prog, lib, env, pool, res):
    roots = [pool[r] for r in prog.roots]
    gos = [_tensor(lib, g) for g in prog.grad_outputs]
    inputs = [pool[i] for i in prog.inputs]
    res.phase = "double1"
    gs = lib.autograd.grad(roots, inputs, gos, create_graph=True, allow_unused=True)
    res.grads.append(("double1", {f"d/dt{i}": None if g is None else _np(g)
                                  for i, g in zip(prog.inputs, gs)}))
    res.phase = "double2"
    s = None
    for g, w, x, c in zip(gs, prog.weights, inputs, prog.coefs):
        term = (x * c).sum()
        if g is not None:
            term = term + (g * _tensor(lib, w)).sum()
        s = term if s is None else s + term
    g2 = lib.autograd.grad(s, inputs, allow_unused=True)
    res.grads.append(("double2", {f"d2/dt{i}": None if g is None else _np(g)
                                  for i, g in zip(prog.inputs, g2)}))


_DRIVERS = {"backward": _drive_backward, "grad": _drive_grad, "double": _drive_double}


def execute(prog, lib, hooks=True, leaf_data=None):
    """Run the program and its driver with `lib`; exceptions are recorded, not raised."""
    res = Outcome()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            env, pool = run_program(prog, lib, leaf_data, hooks)
        except Exception as e:
            res.error = ("forward", getattr(e, "fuzz_step", None), e)
            return res
        res.values = [_snap(t) for t in pool]
        res.made_by = env.made_by
        try:
            _DRIVERS[prog.mode](prog, lib, env, pool, res)
        except Exception as e:
            res.error = (res.phase, None, e)
        res.hooks = dict(env.hook_calls)
    return res


# ======================================================================================
# Comparing cgrad with torch


def _builtin_type(e):
    """The nearest built-in exception class of e (torch raises built-ins)."""
    for c in type(e).__mro__:
        if getattr(builtins, c.__name__, None) is c:
            return c
    return type(e)


def _close(what, got, want):
    assert (got is None) == (want is None), f"{what}: cgrad {got is None and 'None' or 'tensor'}" \
        f", torch {want is None and 'None' or 'tensor'}"
    if got is None:
        return
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch {want.shape}"
    assert got.dtype.kind == want.dtype.kind, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    if want.dtype.kind in "biu":
        assert np.array_equal(got, want), f"{what}: {got} != torch {want}"
        return
    fin = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(fin.max())) if fin.size else 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, equal_nan=True,
                               err_msg=what)


def _rounding_at_a_jump(c, t, k):
    """Pool entry k is sign/floor/round/trunc of an input on which cgrad and torch agree to
    rounding (their summation orders differ), and the outputs differ only where torch's input
    is at one of the function's jumps: not a bug, the step function amplifies rounding."""
    s = c.made_by[k] if c.made_by is not None and k < len(c.made_by) else None
    if s is None or s.name not in _STEP_FUNCTIONS or not s.args or type(s.args[0]) is not R:
        return False
    i = s.args[0].i
    ci, ti = c.values[i][0], t.values[i][0]
    if ci is None or ti is None or ci.shape != ti.shape or ci.shape != c.values[k][0].shape:
        return False
    if not np.allclose(ci, ti, rtol=RTOL, atol=RTOL, equal_nan=True):
        return False
    differ = ~np.isclose(c.values[k][0], t.values[k][0], rtol=RTOL, atol=RTOL, equal_nan=True)
    x = ti[differ]
    tol = 1e-9 * np.maximum(1.0, np.abs(x))
    if s.name == "sign":
        dist = np.abs(x)
    elif s.name == "round":
        dist = np.abs(np.abs(x - np.floor(x)) - 0.5)
    else:
        dist = np.abs(x - np.round(x))
    return bool(np.all(dist <= tol))


def _unsupported(e):
    return isinstance(e, NotImplementedError) and "not supported by cgrad" in str(e)


def _compare(prog, c, t):
    ce, te = c.error, t.error
    if ce is not None and _unsupported(ce[2]) and (te is None or te[:2] != ce[:2]):
        event("cgrad: unsupported (NotImplementedError)")
        reject()
    if te is not None and "INTERNAL ASSERT FAILED" in str(te[2]):
        event("torch: internal assert (a torch bug)")
        reject()
    if ce is not None or te is not None:
        def show(x):
            if x is None:
                return "no exception"
            return f"{type(x[2]).__name__} in {x[0]} (step {x[1]}): {str(x[2])[:300]}"
        assert ce is not None and te is not None, f"cgrad: {show(ce)}; torch: {show(te)}"
        assert ce[:2] == te[:2] and _builtin_type(ce[2]) is _builtin_type(te[2]), \
            f"cgrad: {show(ce)}; torch: {show(te)}"
        event(f"both raise {_builtin_type(te[2]).__name__} in {te[0]}")
    else:
        event("both succeed")
    if c.values is None:
        return
    assert len(c.values) == len(t.values)
    for k, (cv, tv) in enumerate(zip(c.values, t.values)):
        try:
            _close(f"value of t{k}", cv[0], tv[0])
        except AssertionError:
            if _rounding_at_a_jump(c, t, k):
                event("a step function of values equal up to rounding, at its jump")
                reject()
            raise
        assert cv[1:3] == tv[1:3], f"t{k}: (requires_grad, is_leaf) cgrad {cv[1:3]} torch {tv[1:3]}"
    cgr = [g for g in c.grads if g[0] != "again"]      # compared in _check_again
    tgr = [g for g in t.grads if g[0] != "again"]
    assert [p for p, _ in cgr] == [p for p, _ in tgr], \
        f"phases cgrad {[p for p, _ in cgr]} torch {[p for p, _ in tgr]}"
    if c.again == "ok" and t.again == "ok":
        cgr.append(("again", dict(c.grads)["again"]))
        tgr.append(("again", dict(t.grads)["again"]))
    for (phase, cg), (_, tg) in zip(cgr, tgr):
        assert sorted(cg) == sorted(tg), f"{phase}: gradients of {sorted(cg)} vs torch {sorted(tg)}"
        for label in cg:
            _close(f"{phase} {label}", cg[label], tg[label])
    if ce is None:
        assert c.hooks == t.hooks, f"hook calls cgrad {c.hooks} torch {t.hooks}"
    if prog.again and c.again is not None and t.again is not None:
        _check_again(c, t)


def _check_again(c, t):
    """A backward on a freed graph: cgrad raises only where torch does; where torch raises
    and cgrad does not (torch also saved a wrapped scalar or an index list and lost it), the
    second backward must have added the first one's gradients once more."""
    if t.again == "ok" or c.again != "ok":
        assert (c.again == "ok") == (t.again == "ok"), f"again: cgrad {c.again!r} torch {t.again!r}"
        if c.again != "ok":
            assert _builtin_type(c.again) is _builtin_type(t.again)
        return
    event("again: torch raises, cgrad runs (_AGAIN_DIVERGENCE)")
    first = dict(c.grads)["backward"]
    again = dict(c.grads)["again"]
    for label, g in first.items():
        if g is None:
            assert again[label] is None
        else:
            np.testing.assert_allclose(again[label], 2 * g, rtol=1e-12, atol=1e-12,
                                       err_msg=label)


# ======================================================================================
# Finite differences (no torch)


def _loss(prog, leaf_data):
    """sum over roots of <root, grad_output> with the given leaf data (no hooks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with cgrad.no_grad():
            _, pool = run_program(prog, cgrad, leaf_data, hooks=False)
    total = 0.0
    for r, g in zip(prog.roots, prog.grad_outputs):
        v = pool[r].detach().numpy()
        total += float(v.sum() if g is None else (v * g).sum())
    return total


def _fd_check(prog, grads_of_leaf, f=None, n_coords=4, h=1e-6):
    """Compare analytic gradients {leaf pool id: array} with central differences of f
    (default: the loss) on a few coordinates; coordinates where the one-sided differences
    disagree (a kink: relu, abs, max, ties...) are skipped."""
    f = f or (lambda data: _loss(prog, data))
    rng = np.random.default_rng(prog.seed)
    coords = [(k, idx) for k in grads_of_leaf
              for idx in np.ndindex(prog.leaf_data[prog.leaf_ids[k]].shape)]
    if not coords:
        return
    base = [a.copy() for a in prog.leaf_data]
    f0 = f(base)
    checked = 0
    for pick in rng.permutation(len(coords))[:n_coords]:
        k, idx = coords[pick]
        li = prog.leaf_ids[k]
        vals = []
        for s in (1, -1, 2, -2):
            d = [a.copy() for a in base]
            d[li][idx] += s * h
            vals.append(f(d))
        fp, fm, fp2, fm2 = vals
        an = grads_of_leaf[k][idx] if grads_of_leaf[k] is not None else 0.0
        if not np.isfinite(an):
            event("fd: non-finite analytic gradient (skipped)")
            continue
        right, left = (fp - f0) / h, (f0 - fm) / h
        central = (fp - fm) / (2 * h)
        noise = 1e-9 * (1 + abs(f0)) / h
        central2 = (fp2 - fm2) / (4 * h)
        # a kink has one-sided differences that disagree; a jump at the point itself (sign(x)
        # at x = 0: +J on both sides) has a central difference that scales as 1/h
        if (abs(right - left) > 1e-3 * (1 + abs(central)) + 4 * noise
                or abs(central - central2) > 1e-3 * (1 + abs(central)) + 4 * noise):
            event("fd: kink (coordinate skipped)")
            continue
        checked += 1
        assert abs(central - an) <= 1e-5 * (1 + abs(central)) + noise, \
            f"t{k}{list(idx)}: finite difference {central!r}, analytic {an!r}"
    if checked:
        event("fd: checked")


def _fd_compare(prog, c):
    if c.error is not None:
        e = c.error[2]
        if _unsupported(e):
            reject()
        # Without an oracle no one can say whether torch would raise in the forward too: the
        # generator's rare invalid steps (allow_bad, view() of a non-contiguous tensor) and
        # the few steps its shape model gets wrong raise there in both libraries (the torch
        # runs compare them). Such programs are discarded; in the backward phases only
        # torch's documented autograd errors are accepted.
        if c.error[0] == "forward" and isinstance(e, (RuntimeError, IndexError, ValueError)) \
                and not isinstance(e, NotImplementedError):
            event("fd: an error in the forward (discarded)")
            reject()
        msg = str(e)
        known = ("modified by an inplace operation", "leaf Variable that requires grad",
                 "backward through the graph a second time", "does not require grad",
                 "differentiate twice", "appears to not have been used in the graph",
                 "more than one element of the written-to tensor", "step must be greater",
                 "view size is not compatible with input tensor's size and stride")
        assert isinstance(e, (RuntimeError, ValueError)) and any(k in msg for k in known), \
            f"{type(e).__name__} in {c.error[0]} (step {c.error[1]}): {msg}"
        event("fd: a documented error")
        return
    if any(np.isnan(v[0]).any() for v in c.values if v[0].dtype.kind == "f"):
        event("fd: NaN in forward (skipped)")
        return
    grads = dict(c.grads)
    leaf_ids = set(prog.leaf_ids)
    if prog.mode == "backward":
        first = grads["backward"]
        an = {k: first.get(f"t{k}.grad") for k in prog.rg_leaves if k in leaf_ids}
        if prog.inputs is None:
            _fd_check(prog, an)
        if prog.second:
            for label, g in first.items():
                g2 = grads["backward2"][label]
                assert (g is None) == (g2 is None)
                if g is not None:
                    np.testing.assert_allclose(g2, 2 * g, rtol=1e-12, atol=1e-12)
    elif prog.mode == "grad":
        got = grads["grad"]
        an = {k: got[f"d/dt{k}"] for k in prog.inputs if k in leaf_ids and k in prog.rg_leaves}
        _fd_check(prog, an)
    else:
        got = grads["double2"]
        an = {k: got[f"d2/dt{k}"] for k in prog.inputs if k in leaf_ids and k in prog.rg_leaves}

        def s(data):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, pool = run_program(prog, cgrad, data, hooks=False)
                roots = [pool[r] for r in prog.roots]
                gos = [_tensor(cgrad, g) for g in prog.grad_outputs]
                ins = [pool[i] for i in prog.inputs]
                gs = cgrad.autograd.grad(roots, ins, gos, allow_unused=True)
            total = 0.0
            for g, w, x, cc in zip(gs, prog.weights, ins, prog.coefs):
                total += float((x.detach().numpy() * cc).sum())
                if g is not None:
                    total += float((g.numpy() * w).sum())
            return total
        _fd_check(prog, an, f=s, n_coords=3)


# ======================================================================================
# The tests


def _run(prog, oracle):
    note(repr(prog))
    if oracle is None:
        _fd_compare(prog, execute(prog, cgrad, hooks=False))
        return
    c = execute(prog, cgrad)
    t = execute(prog, oracle)
    _compare(prog, c, t)


@given(prog=programs(mode="backward", fd=TORCH is None))
def test_fuzz_backward(oracle, prog):
    _run(prog, oracle)


@given(prog=programs(mode="grad", fd=TORCH is None))
def test_fuzz_grad(oracle, prog):
    _run(prog, oracle)


@given(prog=programs(mode="double", fd=TORCH is None))
def test_fuzz_double_backward(oracle, prog):
    _run(prog, oracle)


@given(prog=programs(mode="backward", min_nodes=20, max_nodes=60, fd=TORCH is None))
def test_fuzz_small_backward(oracle, prog):
    """Small programs: many more of them per second, and failures that shrink further."""
    _run(prog, oracle)
