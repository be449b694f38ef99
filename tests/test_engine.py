"""The compiled engine: differential tests on random graphs (against the pure-Python
reference engine in tests/reference_engine.py, finite differences and torch), then the
engine's semantics one by one (order, retain_graph, accumulation, autograd.grad/backward
arguments and errors, reentrancy, gradient ownership, threads)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import types
import warnings

import numpy as np
import pytest

import cgrad

sys.path.insert(0, os.path.dirname(__file__))
from reference_engine import reference_grad  # noqa: E402
from thread_util import run_threads  # noqa: E402

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    HAVE_HYPOTHESIS = True
except ImportError:  # pragma: no cover
    HAVE_HYPOTHESIS = False

_SECOND_TIME = "Trying to backward through the graph a second time"


def _t(data, requires_grad=False):
    return cgrad.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


# ======================================================================================
# Random graphs
#
# A program is a list of steps (op, i, j, param) over a pool of tensors that starts with the
# leaves; each step appends one tensor. `_replay` runs a program with any library whose
# tensors have torch's methods (cgrad, torch), so the same graph is built for the compiled
# engine, the reference engine, finite differences and torch.

LEAF_SHAPES = [(3, 1), (4,), (), (2, 3, 4), (3, 4), (1, 4), (2,)]


def _bshape(a, b):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return None


def _apply(op, a, b, param, keep):
    """One step; every intermediate tensor is appended to `keep` (the reference engine reads
    node output shapes from live tensors)."""
    def k(t):
        keep.append(t)
        return t

    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":                        # by a positive tensor
        return a / k(k(b * b) + 1.0)
    if op == "scale":                      # Python scalars on both sides
        return 0.5 - k(a * param)
    if op == "neg":
        return -a
    if op == "exp":                        # of small values: |a / (1 + a^2)| <= 1/2
        return k(a / k(k(a * a) + 1.0)).exp()
    if op == "log":                        # of positive values
        return k(k(a * a) + 1.0).log()
    if op in ("sum", "mean"):
        f = getattr(a, op)
        return f() if param is None else f(dim=param[0], keepdim=param[1])
    if op == "matmul":                     # a @ (b reshaped to (n, -1) or (n,))
        n = a.shape[-1]
        return a @ k(b.reshape(n) if param == "vec" else b.reshape(n, -1))
    if op == "reshape":
        return a.reshape(param)
    if op == "index":
        return a[param]
    if op == "expand":
        return a.expand(*param)
    raise AssertionError(op)


def _replay(program, leaves, keep=None):
    pool = list(leaves)
    keep = [] if keep is None else keep
    for op, i, j, param in program:
        pool.append(_apply(op, pool[i], pool[j] if j is not None else None, param, keep))
    return pool


if HAVE_HYPOTHESIS:
    @st.composite
    def _graphs(draw):
        """(leaf arrays, program, root indices, grad_output arrays)."""
        n_leaves = draw(st.integers(2, 5))
        shapes = [draw(st.sampled_from(LEAF_SHAPES)) for _ in range(n_leaves)]
        rng = np.random.RandomState(draw(st.integers(0, 2**31 - 1)))
        arrays = [rng.uniform(-1.5, 1.5, s) for s in shapes]
        pool_shapes = list(shapes)
        program = []
        for _ in range(draw(st.integers(1, 12))):
            # operands are drawn from the whole pool, so leaves and results get reused
            # (shared inputs, diamonds, the same tensor on both sides of an op)
            i = draw(st.integers(0, len(pool_shapes) - 1))
            sa = pool_shapes[i]
            partners = [k for k, s in enumerate(pool_shapes) if _bshape(sa, s) is not None]
            mm_partners = [k for k, s in enumerate(pool_shapes)
                           if sa and int(np.prod(s)) % sa[-1] == 0 and int(np.prod(s)) > 0]
            ops = ["add", "sub", "mul", "div", "scale", "neg", "exp", "log", "sum", "mean",
                   "reshape", "expand"]
            if sa:
                ops += ["index", "matmul"] if mm_partners else ["index"]
            op = draw(st.sampled_from(ops))
            j, param = None, None
            if op in ("add", "sub", "mul", "div"):
                j = draw(st.sampled_from(partners))
                out = _bshape(sa, pool_shapes[j])
            elif op == "scale":
                param = draw(st.sampled_from([2.0, -0.5, 1.0]))
                out = sa
            elif op in ("sum", "mean"):
                if sa and draw(st.booleans()):
                    dims = tuple(sorted(draw(st.sets(st.integers(0, len(sa) - 1),
                                                     min_size=1))))
                    keep = draw(st.booleans())
                    param = (dims, keep)
                    out = tuple(1 if d in dims else s for d, s in enumerate(sa)
                                if keep or d not in dims)
                else:
                    out = ()
            elif op == "matmul":
                j = draw(st.sampled_from(mm_partners))
                n, numel = sa[-1], int(np.prod(pool_shapes[j]))
                param = "vec" if numel == n and draw(st.booleans()) else "mat"
                b_shape = (n,) if param == "vec" else (n, numel // n)
                # zeros, not empty: uninitialised memory can overflow in the product
                out = np.matmul(np.zeros(sa), np.zeros(b_shape)).shape
            elif op == "reshape":
                param = draw(st.sampled_from([(-1,), tuple(reversed(sa)), (1,) + sa]))
                out = (int(np.prod(sa)),) if param == (-1,) else param
            elif op == "expand":
                param = (2,) + sa
                out = param
            elif op == "index":
                choices = [0, (Ellipsis, 0)]
                if sa[0] >= 2:
                    choices += [slice(1, None), [0, 0, sa[0] - 1]]
                param = draw(st.sampled_from(choices))
                out = np.zeros(sa)[param].shape
            else:
                out = sa
            program.append((op, i, j, param))
            pool_shapes.append(tuple(out))
        n_pool = len(pool_shapes)
        roots = sorted(draw(st.sets(st.integers(n_leaves, n_pool - 1), min_size=1,
                                    max_size=min(3, n_pool - n_leaves))) | {n_pool - 1})
        grad_outputs = [rng.standard_normal(pool_shapes[r]) for r in roots]
        return arrays, program, roots, grad_outputs

    def _close(a, b, rtol, atol_scale):
        a = np.asarray(a)
        b = np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        scale = 1.0 + max(np.abs(a).max(initial=0), np.abs(b).max(initial=0))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol_scale * scale)

    @settings(max_examples=int(os.environ.get("CGRAD_HYPOTHESIS_EXAMPLES", "30")),
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(_graphs())
    def test_random_dag_matches_reference_fd_and_torch(graph):
        arrays, program, roots, grad_outputs = graph
        leaves = [_t(a, requires_grad=True) for a in arrays]
        inter = []
        pool = _replay(program, leaves, inter)
        outs = [pool[r] for r in roots]
        gos = [_t(g) for g in grad_outputs]

        # the reference first: it needs the saved tensors (retain_graph semantics)
        ref = reference_grad(outs, gos, tensors=pool + inter)
        got = cgrad.autograd.grad(outs, leaves, gos, retain_graph=True, allow_unused=True)
        assert isinstance(got, tuple) and len(got) == len(leaves)
        for leaf, g in zip(leaves, got):
            assert leaf.grad is None
            if id(leaf) not in ref:
                assert g is None
            else:
                assert g is not None and g.shape == leaf.shape and g.dtype == np.float64
                _close(g.numpy(), ref[id(leaf)], 1e-9, 1e-9)

        # backward() into .grad, freeing the graph this time
        cgrad.autograd.backward(outs, gos)
        for leaf in leaves:
            if id(leaf) not in ref:
                assert leaf.grad is None
            else:
                _close(leaf.grad.numpy(), ref[id(leaf)], 1e-9, 1e-9)

        # finite differences on a few coordinates (central, float64)
        big = max(float(np.abs(p.detach().numpy()).max(initial=0)) for p in pool)
        if big < 1e3:
            def loss(arrs):
                with cgrad.no_grad():
                    p = _replay(program, [_t(a) for a in arrs])
                return sum(float((p[r].numpy() * g).sum()) for r, g in zip(roots, grad_outputs))

            rng = np.random.RandomState(len(program))
            coords = [(k, idx) for k, a in enumerate(arrays) for idx in np.ndindex(a.shape)]
            for pick in rng.permutation(len(coords))[:4]:
                k, idx = coords[pick]
                eps = 1e-6
                plus = [a.copy() for a in arrays]
                minus = [a.copy() for a in arrays]
                plus[k][idx] += eps
                minus[k][idx] -= eps
                fd = (loss(plus) - loss(minus)) / (2 * eps)
                an = ref[id(leaves[k])][idx] if id(leaves[k]) in ref else 0.0
                assert abs(fd - an) <= 1e-6 * (1 + abs(fd)) + 1e-7 * big, (k, idx, fd, an)

        # torch on the same program
        if _torch_available():
            import torch
            tleaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True)
                       for a in arrays]
            tpool = _replay(program, tleaves)
            for p, tp in zip(pool, tpool):
                _close(p.detach().numpy(), tp.detach().numpy(), 1e-9, 1e-12)
            touts = [tpool[r] for r in roots]
            tg = torch.autograd.grad(touts, tleaves, [torch.tensor(g) for g in grad_outputs],
                                     allow_unused=True)
            for leaf, g, t in zip(leaves, got, tg):
                assert (g is None) == (t is None)
                if g is not None:
                    _close(g.numpy(), t.numpy(), 1e-8, 1e-10)


def _torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def test_reference_engine_agrees_with_torch_on_a_fixed_graph():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(0)
    A, B, C = rng.randn(3, 1), rng.randn(4), rng.randn(2, 3, 4)

    def build(lib_tensor):
        a, b, c = (lib_tensor(v) for v in (A, B, C))
        ab = a * b                       # (3, 4) broadcast
        cc = c * c
        c2 = cc + 1.0
        q = ab / c2                      # (2, 3, 4)
        e = q.exp()
        e0 = e.sum(0)
        m = e0 @ b                       # (3,)
        a0 = a[:, 0]
        ma = m * a0
        abi = ab[[0, 0, 2]]
        r = abi - a
        mm, rs = ma.mean(), r.sum()
        s = mm + rs
        # all the intermediates: the reference engine reads node output shapes from them
        return (a, b, c), [ab, cc, c2, q, e, e0, m, a0, ma, abi, r, mm, rs, s], s

    (a, b, c), inter, s = build(lambda v: _t(v, requires_grad=True))
    ref = reference_grad(s, tensors=inter)
    (ta, tb, tc), _, ts = build(lambda v: torch.tensor(v, requires_grad=True))
    ts.backward()
    for leaf, tleaf in ((a, ta), (b, tb), (c, tc)):
        np.testing.assert_allclose(ref[id(leaf)], tleaf.grad.numpy(), rtol=1e-10, atol=1e-12)
    got = cgrad.autograd.grad(s, [a, b, c])
    for g, tleaf in zip(got, (ta, tb, tc)):
        np.testing.assert_allclose(g.numpy(), tleaf.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_reference_engine_deep_chain_without_recursion():
    x = _t([1.0, 2.0], requires_grad=True)
    y = x
    keep = []
    for _ in range(3 * sys.getrecursionlimit()):
        y = y * 1.0
        keep.append(y)
    assert np.array_equal(reference_grad(y.sum(), tensors=keep)[id(x)], [1.0, 1.0])


# ======================================================================================
# Execution order

def _logging_fn(lib, name, log):
    """A custom Function `name` of library `lib` whose backward appends name to log."""
    def forward(ctx, *xs):
        out = xs[0].clone()
        for t in xs[1:]:
            out = out + t
        return out

    def backward(ctx, g):
        log.append(name)
        n = len(ctx.needs_input_grad)
        return g if n == 1 else (g,) * n

    return types.new_class(name, (lib.autograd.Function,), exec_body=lambda ns: ns.update(
        forward=staticmethod(forward), backward=staticmethod(backward)))


def _run_structure(lib, structure, leaf):
    """structure: list of (name, parent names) in creation order; "x" is the leaf. Runs
    backward from every node nobody consumes; returns the order of the custom backwards."""
    log = []
    vals = {"x": leaf}
    used = set()
    for name, parents in structure:
        vals[name] = _logging_fn(lib, name, log).apply(*[vals[p] for p in parents])
        used.update(parents)
    roots = [vals[n] for n, _ in structure if n not in used]
    lib.autograd.backward(roots, [lib.ones(2, dtype=lib.float64) for _ in roots])
    return log


DIAMOND = [("A", ["x"]), ("B", ["A"]), ("D", ["B"]), ("C", ["A"])]


def test_execution_order_matches_torch_example():
    assert _run_structure(cgrad, DIAMOND, _t([1.0, 2.0], True)) == ["C", "D", "B", "A"]


def _random_structure(seed):
    rng = np.random.RandomState(seed)
    names = []
    structure = []
    for k in range(int(rng.randint(3, 9))):
        cands = ["x"] + names
        n_par = 1 if len(cands) == 1 else int(rng.randint(1, 3))
        parents = [str(p) for p in rng.choice(cands, size=n_par, replace=True)]
        name = f"N{k}"
        structure.append((name, parents))
        names.append(name)
    return structure


@pytest.mark.parametrize("seed", range(12))
def test_execution_order_matches_torch_random(seed):
    torch = pytest.importorskip("torch")
    structure = DIAMOND if seed == 0 else _random_structure(seed)
    got = _run_structure(cgrad, structure, _t([1.0, 2.0], True))
    want = _run_structure(torch, structure,
                          torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True))
    assert got == want
    # the reference engine orders the ready queue the same way
    vals = {"x": _t([1.0, 2.0], True)}
    used = set()
    for name, parents in structure:
        vals[name] = _logging_fn(cgrad, name, []).apply(*[vals[p] for p in parents])
        used.update(parents)
    roots = [vals[n] for n, _ in structure if n not in used]
    order = []
    reference_grad(roots, [_t([1.0, 1.0]) for _ in roots], tensors=list(vals.values()),
                   order=order)
    assert [n.removesuffix("Backward") for n in order if n != "AccumulateGrad"] == want


# ======================================================================================
# retain_graph

def test_second_backward_through_freed_graph_errors():
    x = _t([1.0, 2.0], True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=_SECOND_TIME):
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    z = (x * x).sum()
    cgrad.autograd.grad(z, x)
    with pytest.raises(RuntimeError, match=_SECOND_TIME):
        cgrad.autograd.grad(z, x)


def test_second_backward_without_saved_tensors_works_and_accumulates():
    x = _t([1.0, 2.0], True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_retain_graph_true_allows_second_backward():
    x = _t([1.0, 2.0], True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match=_SECOND_TIME):
        y.backward()


def test_custom_saved_tensors_freed_after_backward():
    class Sq(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = _t([3.0], True)
    y = Sq.apply(x)
    y.backward()
    assert x.grad.item() == 6.0
    with pytest.raises(RuntimeError, match=_SECOND_TIME):
        y.grad_fn.saved_tensors
    with pytest.raises(RuntimeError, match=_SECOND_TIME):
        y.backward()


# ======================================================================================
# Accumulation into .grad

def test_leaf_grad_keeps_identity_across_calls():
    x = _t([1.0, 2.0], True)
    (x * 3).sum().backward()
    g = x.grad
    data = g._data
    (x * 3).sum().backward()
    assert x.grad is g
    assert x.grad._data is data
    (x * x).sum().backward()
    assert x.grad is g and x.grad._data is data
    np.testing.assert_array_equal(g.numpy(), [8.0, 10.0])
    assert g.grad_fn is None and not g.requires_grad


def test_create_graph_accumulates_out_of_place_with_grad_fn():
    x = _t([1.0, 2.0], True)
    (x * 3).sum().backward()
    g = x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        (x * x).sum().backward(create_graph=True)
    assert x.grad is not g
    assert x.grad.grad_fn is not None and x.grad.requires_grad
    np.testing.assert_array_equal(x.grad.detach().numpy(), [5.0, 7.0])
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])   # the old grad is untouched

    w = _t([1.0, 2.0], True)
    with pytest.warns(UserWarning, match="create_graph=True will create a reference cycle"):
        (w * w * w).sum().backward(create_graph=True)
    assert w.grad.grad_fn is not None
    (gg,) = cgrad.autograd.grad(w.grad.sum(), w)       # d/dw sum(3 w^2) = 6 w
    np.testing.assert_array_equal(gg.numpy(), [6.0, 12.0])


def test_diamond_gradients_are_summed():
    x = _t([1.0, 2.0], True)
    a = x.exp()
    ((a * 3) + (a * 4)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 7 * np.exp([1.0, 2.0]))

    x = _t([1.0, 2.0], True)
    (x + x).sum().backward()                 # both gradients of one node reach one input
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])

    x = _t([1.0, 2.0], True)
    y = x * 2
    (y * y).sum().backward()                 # MulBackward0 -> the same non-leaf twice
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 16.0])


def test_backward_inputs_restricts_accumulation():
    a = _t([1.0, 2.0], True)
    b = _t([3.0, 4.0], True)
    (a * b).sum().backward(inputs=[a])
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    assert b.grad is None


def test_root_gradient_is_cast_to_the_output_dtype():
    """torch's engine casts every gradient to the dtype of the tensor it belongs to, the
    root gradients included: a float64 `gradient=` for a float32 tensor gives float32."""
    x = cgrad.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    g64 = _t([1.0, 1.0])
    (x * 2).backward(g64)
    assert x.grad.dtype == np.float32
    y = x * 2
    (gy,) = cgrad.autograd.grad(y, y, g64)
    assert gy.dtype == np.float32
    x.grad = None
    x.backward(g64)                        # the root is the leaf itself
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_repeated_roots_and_repeated_inputs():
    x = _t([1.0, 2.0], True)
    y = x * 2
    cgrad.autograd.backward([y, y], [_t([1.0, 1.0]), _t([3.0, 3.0])])
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 8.0])
    r = cgrad.autograd.grad((x * x).sum(), [x, x])
    assert len(r) == 2
    for g in r:
        np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    seed = _t([5.0, 5.0])
    (g,) = cgrad.autograd.grad(x, x, seed)           # d x / d x
    np.testing.assert_array_equal(g.numpy(), [5.0, 5.0])


def _pruning_log(lib):
    log = []
    F = _logging_fn(lib, "F", log)
    G = _logging_fn(lib, "G", log)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([1.0, 2.0], requires_grad=True)
    loss = (F.apply(a) + G.apply(b)).sum()
    lib.autograd.grad(loss, a, retain_graph=True)
    log.append("|")
    loss.backward(inputs=[b], retain_graph=True)
    log.append("|")
    loss.backward()
    return log, a.grad, b.grad


def test_grad_and_backward_inputs_only_run_nodes_on_a_path():
    log, ga, gb = _pruning_log(cgrad)
    assert log == ["F", "|", "G", "|", "G", "F"]
    np.testing.assert_array_equal(ga.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(gb.numpy(), [2.0, 2.0])
    torch = pytest.importorskip("torch")
    assert _pruning_log(torch)[0] == log


def test_create_graph_gives_higher_derivatives():
    x = _t([0.5, -2.0], True)
    (g,) = cgrad.autograd.grad((x * x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (gg,) = cgrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, -2.0]) ** 2)
    np.testing.assert_allclose(gg.numpy(), 6 * np.array([0.5, -2.0]))


# ======================================================================================
# autograd.grad

def test_grad_returns_tuple_and_leaves_dot_grad_alone():
    x = _t([1.0, 2.0], True)
    y = _t([3.0, 4.0], True)
    r = cgrad.autograd.grad((x * y).sum(), [x, y])
    assert isinstance(r, tuple) and len(r) == 2
    np.testing.assert_array_equal(r[0].numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(r[1].numpy(), [1.0, 2.0])
    assert x.grad is None and y.grad is None
    r = cgrad.autograd.grad((x * y).sum(), x)
    assert isinstance(r, tuple) and len(r) == 1


def test_grad_unused_input():
    x = _t([1.0, 2.0], True)
    y = _t([3.0, 4.0], True)
    msg = ("The differentiated Tensor at index 1 appears to not have been used in the graph. "
           "Set allow_unused=True if this is the desired behavior.")
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        cgrad.autograd.grad((x * 2).sum(), [x, y])
    gx, gy = cgrad.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    assert gy is None
    np.testing.assert_array_equal(gx.numpy(), [2.0, 2.0])
    gx, gy = cgrad.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
    assert gy is not None and gy.shape == y.shape
    np.testing.assert_array_equal(gy.numpy(), [0.0, 0.0])


def test_grad_non_leaf_inputs_and_dict_inputs():
    x = _t([1.0, 2.0], True)
    y = x * 2
    z = (y * y).sum()
    (gy,) = cgrad.autograd.grad(z, y, retain_graph=True)
    np.testing.assert_array_equal(gy.numpy(), [4.0, 8.0])
    assert x.grad is None
    r = cgrad.autograd.grad(z, {"y": y, "x": x})
    assert isinstance(r, dict) and list(r) == ["y", "x"]
    np.testing.assert_array_equal(r["y"].numpy(), [4.0, 8.0])
    np.testing.assert_array_equal(r["x"].numpy(), [8.0, 16.0])


def test_grad_input_not_requiring_grad():
    x = _t([1.0, 2.0], True)
    c = _t([1.0, 1.0])
    msg = "One of the differentiated Tensors does not require grad"
    with pytest.raises(RuntimeError, match=msg):
        cgrad.autograd.grad((x * c).sum(), [x, c])


# ======================================================================================
# Errors about the roots

def test_implicit_grad_only_for_scalars():
    x = _t([1.0, 2.0], True)
    msg = "grad can be implicitly created only for scalar outputs"
    with pytest.raises(RuntimeError, match=msg):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=msg):
        cgrad.autograd.grad(x * 2, x)
    (x * 2).backward(_t([1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_root_without_grad_fn():
    x = _t([1.0, 2.0])
    msg = "element 0 of tensors does not require grad and does not have a grad_fn"
    with pytest.raises(RuntimeError, match=msg):
        (x * 2).sum().backward()
    w = _t([1.0, 2.0], True)
    with cgrad.no_grad():
        y = (w * 2).sum()
    with pytest.raises(RuntimeError, match=msg):
        y.backward()
    with pytest.raises(RuntimeError, match=msg):
        cgrad.autograd.grad(y, w)
    with pytest.raises(RuntimeError, match="element 1 of tensors does not require grad"):
        cgrad.autograd.backward([(w * 2).sum(), y])


def test_gradient_shape_mismatch():
    x = _t([1.0, 2.0], True)
    msg = ("Mismatch in shape: grad_output[0] has a shape of cgrad.Size([3]) and output[0] has "
           "a shape of cgrad.Size([2]).")
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        (x * 2).backward(_t([1.0, 1.0, 1.0]))
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        cgrad.autograd.grad(x * 2, x, _t([1.0, 1.0, 1.0]))


def test_backward_several_roots():
    x = _t([1.0, 2.0], True)
    y1 = x * 2
    y2 = x.exp()
    y3 = (x * x).sum()
    g1, g2 = _t([1.0, -1.0]), _t([0.5, 2.0])
    assert cgrad.autograd.backward([y1, y2, y3], [g1, g2, None]) is None
    want = 2 * g1.numpy() + np.exp([1.0, 2.0]) * g2.numpy() + 2 * np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), want)
    # torch gives the same
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.autograd.backward([tx * 2, tx.exp(), (tx * tx).sum()],
                            [torch.tensor(g1.numpy()), torch.tensor(g2.numpy()), None])
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)


# ======================================================================================
# User code inside the engine

class _Boom(ValueError):
    pass


def test_exception_in_backward_propagates_unchanged():
    err = _Boom("boom")

    class Bad(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise err

    x = _t([1.0, 2.0], True)
    y = (Bad.apply(x) * x).sum()
    with pytest.raises(_Boom) as info:
        y.backward()
    assert info.value is err
    assert cgrad.is_grad_enabled()
    with pytest.raises(_Boom):
        cgrad.autograd.grad(Bad.apply(x).sum(), x)
    assert cgrad.is_grad_enabled()
    # the engine is still usable, on a new graph
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_backward_inside_backward():
    class Inner(cgrad.autograd.Function):
        """backward computes d/dz sum(z^3) = 3 z^2 on a fresh graph with autograd.grad."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with cgrad.enable_grad():
                z = x.detach().requires_grad_()
                (dz,) = cgrad.autograd.grad((z * z * z).sum(), z)
            assert not dz.requires_grad
            return g * dz

    class Checkpoint(cgrad.autograd.Function):
        """Reentrant checkpoint: recompute Inner on the detached input and backward it."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x ** 3).exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with cgrad.enable_grad():
                z = x.detach().requires_grad_()
                y = Inner.apply(z).exp()        # nested run that itself nests a run
                y.backward(g)
            return z.grad

    x = _t([0.5, -1.0], True)
    (Inner.apply(x) * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy() ** 2)

    x = _t([0.5, -1.0], True)
    out = Checkpoint.apply(x) * x
    out.sum().backward()
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(xv ** 3) * 3 * xv ** 2 * xv + np.exp(xv ** 3))


def test_backward_inside_backward_on_the_running_graph():
    """The nested run walks nodes that the outer run has claimed and not yet executed."""
    def run(lib):
        seen = []
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = a.exp()

        class N(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                with lib.enable_grad():
                    (gi,) = lib.autograd.grad(h.sum(), a, retain_graph=True)
                seen.append(gi.detach().numpy().copy())
                return g

        (N.apply(h) + h).sum().backward()
        return seen, a.grad.numpy()

    seen, grad = run(cgrad)
    np.testing.assert_allclose(seen[0], np.exp([1.0, 2.0]))
    np.testing.assert_allclose(grad, 2 * np.exp([1.0, 2.0]))
    torch = pytest.importorskip("torch")
    tseen, tgrad = run(torch)
    np.testing.assert_allclose(seen[0], tseen[0])
    np.testing.assert_allclose(grad, tgrad)


def test_exception_in_nested_run_is_caught_and_outer_run_continues():
    def run(lib):
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = a.exp()

        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                raise KeyError("inner")

        class N(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                with lib.enable_grad():
                    with pytest.raises(KeyError):
                        lib.autograd.grad(Bad.apply(h).sum(), a, retain_graph=True)
                    (gi,) = lib.autograd.grad((h * 2).sum(), a, retain_graph=True)
                return g * 0 + gi

        (N.apply(h) + h).sum().backward()
        return a.grad.detach().numpy()

    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(run(cgrad), (2 * e + 1) * e)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(run(cgrad), run(torch))


def test_returned_gradient_object_is_never_modified():
    kept = []

    class Twice(cgrad.autograd.Function):
        """y = sum of the inputs; backward returns the same Tensor object for every input."""

        @staticmethod
        def forward(ctx, *xs):
            out = xs[0].clone()
            for x in xs[1:]:
                out = out + x
            return out

        @staticmethod
        def backward(ctx, g):
            t = cgrad.tensor(np.array([1.0, 2.0]))
            kept.append(t)
            return (t,) * len(ctx.needs_input_grad)

    # both gradients flow into the same leaf
    x = _t([0.0, 0.0], True)
    Twice.apply(x, x).sum().backward()
    np.testing.assert_array_equal(kept[-1].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    # three times: the second arrival makes an engine-owned sum, the third adds into it
    x = _t([0.0, 0.0], True)
    Twice.apply(x, x, x).sum().backward()
    np.testing.assert_array_equal(kept[-1].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])
    # ... into the same non-leaf (an input buffer that sums them)
    x = _t([0.0, 0.0], True)
    y = x * 1.0
    Twice.apply(y, y).sum().backward()
    np.testing.assert_array_equal(kept[-1].numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    # ... into an existing .grad (accumulated in place: must not be the user's object)
    x = _t([0.0, 0.0], True)
    w = _t([5.0, 5.0], True)
    Twice.apply(x, w).sum().backward()
    Twice.apply(x, w).sum().backward()
    for t in kept[-2:]:
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])
    assert all(x.grad is not t and w.grad is not t for t in kept)

    # a gradient passed by the user as `gradient=` is not modified either
    x = _t([1.0, 2.0], True)
    seed = _t([1.0, 1.0])
    (x * 1.0).backward(seed)
    (x * 1.0).backward(seed)
    np.testing.assert_array_equal(seed.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# ======================================================================================
# Threads

def test_threads_run_separate_graphs():
    barrier = threading.Barrier(2)

    def work(k):
        barrier.wait()
        rng = np.random.RandomState(k)
        for i in range(200):
            xv = rng.randn(5)
            x = _t(xv, True)
            w = _t([float(k + 1)], True)
            if k == 1:                     # grad mode is per thread
                with cgrad.no_grad():
                    assert not (x * w).requires_grad
            loss = ((x * x) * w).sum() + (x.exp() * 0.5).mean()
            if i % 2:
                loss.backward()
                gx, gw = x.grad, w.grad
            else:
                gx, gw = cgrad.autograd.grad(loss, [x, w])
            np.testing.assert_allclose(gx.numpy(), 2 * (k + 1) * xv + 0.1 * np.exp(xv),
                                       rtol=1e-12)
            np.testing.assert_allclose(gw.numpy(), [(xv * xv).sum()], rtol=1e-12)
            assert cgrad.is_grad_enabled()

    run_threads(work, [(k,) for k in range(2)])


_SHARED_THREADS = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import cgrad
    sys.setswitchinterval(1e-6)          # switch threads often, inside engine callbacks too
    w = cgrad.tensor(np.array([1.5, -0.5]), requires_grad=True)
    h = w.exp()                          # a retained subgraph shared by every thread
    errors = []

    def work(k):
        try:
            rng = np.random.RandomState(k)
            for i in range(300):
                xv = rng.randn(2)
                x = cgrad.tensor(xv, requires_grad=True)
                y = x * w
                for _ in range(4):
                    y = y * 1.0 + 0.0
                loss = (y * w).sum() + (h * x).sum()
                gx, gw = cgrad.autograd.grad(loss, [x, w], retain_graph=True)
                wv = w.detach().numpy()
                np.testing.assert_allclose(gx.numpy(), wv ** 2 + np.exp(wv))
                np.testing.assert_allclose(gw.numpy(), 2 * xv * wv + np.exp(wv) * xv)
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(errors[:1])
    sys.exit(1 if errors else 0)
""")


def test_threads_share_a_leaf_and_a_retained_subgraph():
    """torch allows concurrent backward passes over graphs that share nodes (a parameter's
    AccumulateGrad, a retained common subgraph). Run in a subprocess: a crash must not take
    the test session down."""
    r = subprocess.run([sys.executable, "-c", _SHARED_THREADS], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])


@pytest.mark.parametrize("depth", [1, 3])
def test_nested_runs_over_the_same_long_chain(depth):
    """Note [Run hints] in csrc/cg_engine.c: a nested run claims nodes the outer run has
    claimed (taking over their hints); the outer run must still find its own slots."""
    def build():
        a = cgrad.tensor([0.5, -1.0, 2.0], dtype=cgrad.float64, requires_grad=True)
        h = a
        for k in range(200):
            h = h * 1.01 + 0.001 * k
        return a, h

    a, h = build()
    (ref,) = cgrad.autograd.grad((h * h).sum(), a, retain_graph=True)
    inner_results = []

    class Nest(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, level):
            ctx.level = level
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            with cgrad.enable_grad():
                if ctx.level > 1:
                    inner = Nest.apply(h, ctx.level - 1)
                    cgrad.autograd.backward((inner * h).sum(), inputs=[a], retain_graph=True)
                (gi,) = cgrad.autograd.grad((h * h).sum(), a, retain_graph=True)
            inner_results.append(gi.numpy().copy())
            return g, None

    a.grad = None
    out = Nest.apply(h, depth) * h
    out.sum().backward(retain_graph=True)
    for r in inner_results:
        np.testing.assert_allclose(r, ref.numpy())
    assert len(inner_results) == depth
    # the outer run's gradient: d/da sum(h * h) (the Nest output is a copy of h), plus what the
    # nested backward(inputs=[a]) calls accumulated into a.grad
    (plain,) = cgrad.autograd.grad((h * h).sum(), a, retain_graph=True)
    np.testing.assert_allclose(a.grad.numpy(), plain.numpy() * depth, rtol=1e-12)


def test_backward_argument_fast_check_agrees_with_the_python_checks():
    """autograd.backward checks many roots in one C loop (_C._roots_ready) and falls back to
    the Python checks (_make_grads) otherwise. The fast check may only accept what the Python
    checks pass through unchanged."""
    from cgrad import _C
    from cgrad.autograd import _make_grads

    f32 = np.ones((2, 3), np.float32)
    root = (cgrad.tensor(f32, requires_grad=True) * 2)
    cases = [
        (root, cgrad.tensor(f32)),                                       # accepted
        (root, cgrad.from_numpy(np.ones((3, 2), np.float32).T)),         # non-contiguous
        (root, cgrad.tensor(np.ones((2, 3)))),                           # float64: cast
        (root, cgrad.tensor(np.ones((2, 3), np.int64))),                 # int: cast
        (root, cgrad.tensor(np.ones((3, 2), np.float32))),               # wrong shape
        (root, cgrad.tensor(np.ones((1, 3), np.float32))),               # broadcastable
        (root, f32),                                                     # ndarray
        (root, None),                                                    # implicit, not scalar
        (root.sum(), None),                                              # implicit scalar
        (cgrad.tensor(f32), cgrad.tensor(f32)),                          # no grad
    ]
    accepted = 0
    for t, g in cases:
        fast = _C._roots_ready([t], [g])
        try:
            slow = _make_grads([t], [g])
        except (RuntimeError, TypeError):     # TypeError: an ndarray is no gradient (torch)
            slow = None
        if fast:
            accepted += 1
            assert slow is not None and slow[0] is g, (t, g)
            assert t.requires_grad
    assert accepted == 2
