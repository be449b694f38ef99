"""Wide nodes: ops, Functions and engine calls with many inputs, outputs and roots.

A built-in op with more than 256 tensor inputs used to crash the interpreter on the next
graph (Note [Typed object before a steal] in cgrad/_C_function.pxi: the edge -> argument map held
dead ints for positions above CPython's small-int cache). Each case runs several graphs in
a row, since a freed int is only reused by a later allocation. The counts straddle every
power of two and cache a fixed table could hold (255, 256, 257) and go well past them.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cgrad

COUNTS = [1, 2, 255, 256, 257, 1000, 70_000]
# the n^2 or slow-per-input cases stop earlier
SMALL_COUNTS = [1, 2, 255, 256, 257, 1000]
REPEAT = 3


def _leaf(n=3, seed=0):
    rng = np.random.default_rng(seed)
    return cgrad.tensor(rng.standard_normal(n), requires_grad=True)


def _parts(x, n):
    # one distinct non-leaf per input (a product node each), as in an RNN's per-step outputs
    return [x * float(i % 7 + 1) for i in range(n)]


def _weights(n):
    return np.array([float(i % 7 + 1) for i in range(n)])


def _run(build, x, n, expect):
    for _ in range(REPEAT):
        x.grad = None
        out = build(_parts(x, n))
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), expect, rtol=1e-12)
        del out
    gc.collect()


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("name", ["cat", "concat", "concatenate", "stack", "hstack", "vstack",
                                  "dstack", "column_stack"])
def test_list_ops(name, n):
    if name in ("vstack", "dstack", "column_stack") and n > 1000:
        n = 5000     # one reshape node per input: keep the suite quick
    x = _leaf()
    fn = getattr(cgrad, name)
    _run(fn, x, n, np.full(3, _weights(n).sum()))


@pytest.mark.parametrize("n", COUNTS)
def test_stack_values_and_grads(n):
    x = _leaf()
    for _ in range(REPEAT):
        parts = _parts(x, n)
        s = cgrad.stack(parts, dim=1)
        assert s.shape == (3, n)
        w = cgrad.tensor(np.arange(n, dtype=np.float64))
        (s * w).sum().backward()
    expect = REPEAT * (_weights(n) * np.arange(n)).sum()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, expect), rtol=1e-12)


@pytest.mark.parametrize("n", COUNTS)
def test_einsum_many_operands(n):
    # torch contracts any number of operands; NumPy's einsum stops at 64 (NPY_MAXARGS)
    if n > 1000:
        n = 5000
    x = cgrad.tensor(np.full(3, 1.0), requires_grad=True)
    for _ in range(REPEAT):
        x.grad = None
        parts = [x * 1.0 for _ in range(n)]
        y = cgrad.einsum(",".join(["i"] * n) + "->i", *parts)
        np.testing.assert_allclose(y.detach().numpy(), np.ones(3))
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, float(n)))


@pytest.mark.parametrize("n", [2, 16, 17, 40, 51])
def test_einsum_many_operands_contraction(n):
    # a chain of n matrices needs n + 1 labels (52 at most): 51 is the longest
    rng = np.random.default_rng(n)
    mats = [rng.standard_normal((2, 2)) * 0.7 for _ in range(n)]
    ts = [cgrad.tensor(m, requires_grad=True) for m in mats]
    letters = "abcdefghijklmnopqrstuvwxyz"
    # a chain of matrix products written with a rotating alphabet: ab,bc,cd,...
    subs = [letters[i % 26] + letters[(i + 1) % 26] for i in range(n)]
    if n >= 26:
        # letters repeat: use the sublist form, which has 52 labels; still a chain
        args = []
        for i, t in enumerate(ts):
            args += [t, [i, i + 1]]
        y = cgrad.einsum(*args, [0, n])
    else:
        y = cgrad.einsum(",".join(subs) + "->" + subs[0][0] + subs[-1][1], *ts)
    ref = mats[0]
    for m in mats[1:]:
        ref = ref @ m
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    y.sum().backward()
    # d sum(A0 A1 ... An-1) / dA0 = 1 (A1...An-1)^T 1^T
    rest = np.eye(2)
    for m in mats[1:]:
        rest = rest @ m
    np.testing.assert_allclose(ts[0].grad.numpy(), np.ones((2, 2)) @ rest.T, rtol=1e-9,
                               atol=1e-12)


def test_einsum_many_operands_outer_and_diagonal():
    # 70 operands, a label summed out early, a repeated label in one operand, an outer axis
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    vs = [rng.standard_normal(3) for _ in range(68)]
    b = rng.standard_normal(4)
    ta = cgrad.tensor(a, requires_grad=True)
    tvs = [cgrad.tensor(v, requires_grad=True) for v in vs]
    tb = cgrad.tensor(b, requires_grad=True)
    eq = "ii," + ",".join(["i"] * 68) + ",k->k"
    y = cgrad.einsum(eq, ta, *tvs, tb)
    prod = np.prod(np.stack(vs), axis=0)
    ref = (np.diag(a) * prod).sum() * b
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-10)
    y.sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), np.diag(prod * b.sum()), rtol=1e-10,
                               atol=1e-14)
    np.testing.assert_allclose(tb.grad.numpy(), np.full(4, (np.diag(a) * prod).sum()),
                               rtol=1e-10)


@pytest.mark.parametrize("n", SMALL_COUNTS + [5000])
def test_broadcast_tensors_and_meshgrid(n):
    x = _leaf(1)
    for _ in range(REPEAT):
        x.grad = None
        parts = _parts(x, n)
        outs = cgrad.broadcast_tensors(*parts)
        assert len(outs) == n
        cgrad.stack(outs).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [_weights(n).sum()])
    if n <= 257:
        # meshgrid of n one-element vectors: n outputs of shape (1,)*n
        x.grad = None
        parts = _parts(x, n) if n <= 32 else _parts(x, 8)
        grids = cgrad.meshgrid(*parts, indexing="ij")
        assert len(grids) == len(parts)
        sum(g.sum() for g in grids).backward()
        np.testing.assert_allclose(x.grad.numpy(), [_weights(len(parts)).sum()])


@pytest.mark.parametrize("n", SMALL_COUNTS)
def test_block_diag(n):
    x = _leaf(1)
    for _ in range(REPEAT):
        x.grad = None
        parts = [p.reshape(1, 1) for p in _parts(x, n)]
        b = cgrad.block_diag(*parts)
        assert b.shape == (n, n)
        w = cgrad.tensor(np.eye(n) * 2.0 + 1.0)
        (b * w).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [3.0 * _weights(n).sum()])


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("with_non_tensor", [False, True])
def test_custom_function_many_inputs(n, with_non_tensor):
    class Many(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ts = [a for a in args if isinstance(a, cgrad.Tensor)]
            ctx.save_for_backward(*ts)
            ctx.kinds = tuple(isinstance(a, cgrad.Tensor) for a in args)
            out = ts[0].detach().numpy().copy()
            for t in ts[1:]:
                out = out + t.detach().numpy()
            return cgrad.tensor(out)

        @staticmethod
        def backward(ctx, g):
            needs = ctx.needs_input_grad
            assert len(needs) == len(ctx.kinds)
            assert all(nd == k for nd, k in zip(needs, ctx.kinds))
            return tuple(g if k else None for k in ctx.kinds)

    x = _leaf()
    for _ in range(REPEAT):
        x.grad = None
        parts = _parts(x, n)
        args = []
        for i, p in enumerate(parts):
            args.append(p)
            if with_non_tensor and i % 3 == 0:
                args.append(i)          # ints above 256 in the argument list
        y = Many.apply(*args)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, _weights(n).sum()), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000, 70_000])
def test_custom_function_many_outputs(n):
    class Split(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return tuple(x * 1.0 for _ in range(n))

        @staticmethod
        def backward(ctx, *gs):
            assert len(gs) == n
            total = gs[0]
            for g in gs[1:]:
                total = total + g
            return total

    x = _leaf()
    for _ in range(2):
        x.grad = None
        outs = Split.apply(x)           # a tuple, even of one tensor (as torch)
        cgrad.autograd.backward([o.sum() for o in outs])
        np.testing.assert_allclose(x.grad.numpy(), np.full(3, float(n)))


@pytest.mark.parametrize("n", COUNTS)
def test_grad_many_inputs_and_roots(n):
    leaves = [cgrad.tensor([float(i)], requires_grad=True) for i in range(n)]
    for _ in range(2):
        roots = [(l * 2.0).sum() for l in leaves]
        gs = cgrad.autograd.grad(roots, leaves)
        assert len(gs) == n
        assert all(float(g) == 2.0 for g in gs)
        roots = [(l * 3.0).sum() for l in leaves]
        cgrad.autograd.backward(roots, [cgrad.tensor(1.0, dtype=cgrad.float32)] * n)
    assert all(float(l.grad) == 6.0 for l in leaves)      # two backward calls
    # one root, all the leaves
    y = cgrad.cat(leaves).pow(2).sum()
    gs = cgrad.autograd.grad(y, leaves, retain_graph=True)
    assert [float(g) for g in gs] == [2.0 * i for i in range(n)]
    gs = cgrad.autograd.grad(y, leaves[::2])
    assert [float(g) for g in gs] == [2.0 * i for i in range(0, n, 2)]


@pytest.mark.parametrize("n", [256, 257, 1000])
def test_wide_node_create_graph_and_retain(n):
    x = cgrad.tensor([0.5, -1.5], dtype=cgrad.float64, requires_grad=True)
    parts = [x * float(i + 1) for i in range(n)]
    y = (cgrad.stack(parts) ** 2).sum()
    (g,) = cgrad.autograd.grad(y, x, create_graph=True)
    k = sum(float(i + 1) ** 2 for i in range(n))
    np.testing.assert_allclose(g.detach().numpy(), 2 * k * x.detach().numpy())
    g.sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [2 * k, 2 * k])
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4 * k, 4 * k])


def test_wide_node_needs_input_grad_positions():
    # a mix of grad / no-grad tensors and non-tensors at positions beyond 256
    seen = {}

    class F(cgrad.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            return cgrad.tensor(1.0)

        @staticmethod
        def backward(ctx, g):
            seen["needs"] = ctx.needs_input_grad
            return tuple(g if nd else None for nd in ctx.needs_input_grad)

    x = cgrad.tensor(1.0, requires_grad=True)
    c = cgrad.tensor(1.0)
    args = []
    for i in range(600):
        args.append(x * 1.0 if i % 5 == 0 else (c if i % 5 == 1 else i))
    y = F.apply(*args)
    y.backward()
    assert seen["needs"] == tuple(i % 5 == 0 for i in range(600))
    assert float(x.grad) == 120.0


def test_issue_example_subprocess():
    # the crash killed the interpreter: run the reproducer in a child process
    code = textwrap.dedent("""
        import numpy as np, cgrad
        x = cgrad.tensor(np.ones(64), requires_grad=True)
        for rep in range(4):
            s = cgrad.cat([x * 1.0 for _ in range(257)])
            s.sum().backward()
        for rep in range(3):
            cgrad.stack([x * 1.0 for _ in range(10_000)]).sum().backward()
        print(float(x.grad[0]))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    assert r.returncode == 0, r.stderr
    assert float(r.stdout) == 4 * 257 + 3 * 10_000


def test_reflint_clean():
    # the machine check for this class of bug: no reference macro on a Cython temporary
    pytest.importorskip("Cython")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, ".ci", "reflint.py")
    if not os.path.exists(script):
        pytest.skip("not a source checkout")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- Note [Target chains] (csrc/cg_engine.c) and Note [Wide outputs] (_C_function.pxi):
# the wide paths use id() maps and per-slot chains instead of scans; these pin that they
# give what the scans gave (repeats, several outputs of one node, dirty and
# non-differentiable outputs), on both sides of the 16-output threshold.

@pytest.mark.parametrize("n", [3, 17, 40])
def test_grad_with_repeated_inputs_and_outputs_of_one_node(n):
    x = cgrad.tensor([1.0, 2.0], dtype=cgrad.float64, requires_grad=True)
    z = cgrad.tensor([3.0], dtype=cgrad.float64, requires_grad=True)
    a, b = (x * 2.0).split(1)                 # two outputs of one node as inputs of grad()
    y = (x * x).sum() + (z ** 3).sum() + 5.0 * a.sum() + 7.0 * b.sum()
    inputs = [x, z, a, b] * n
    gs = cgrad.autograd.grad(y, inputs, retain_graph=True)
    assert len(gs) == 4 * n
    for k in range(n):
        np.testing.assert_array_equal(gs[4 * k].numpy(), [2.0 + 10.0, 4.0 + 14.0])
        np.testing.assert_array_equal(gs[4 * k + 1].numpy(), [27.0])
        np.testing.assert_array_equal(gs[4 * k + 2].numpy(), [5.0])
        np.testing.assert_array_equal(gs[4 * k + 3].numpy(), [7.0])


def _fan(T, n):
    class Fan(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            y.mul_(2.0)
            ctx.mark_dirty(y)
            same = x * 3.0
            flag = x * 0.0
            ctx.mark_non_differentiable(flag)
            outs = [x * float(i) for i in range(n)]
            outs[1] = same
            outs[n - 1] = same                  # the same new tensor twice
            outs[2] = y                         # the dirty input
            outs[3] = flag
            return tuple(outs)

        @staticmethod
        def backward(ctx, *gs):
            assert len(gs) == n
            gx = sum(float(i) * g for i, g in enumerate(gs) if i not in (1, 2, 3, n - 1))
            return gx + 3.0 * gs[n - 1] + 5.0 * gs[1], 2.0 * gs[2]

    x = T.tensor([1.0, -1.0], dtype=T.float64, requires_grad=True)
    y0 = T.tensor([0.5, 0.25], dtype=T.float64, requires_grad=True)
    y = y0 * 1.0
    outs = Fan.apply(x, y)
    facts = (len(outs), outs[1] is outs[n - 1], outs[2] is y, outs[3].requires_grad,
             outs[0].requires_grad, type(y.grad_fn).__name__)
    sum(o.sum() for o in outs).backward()
    return facts, x.grad.numpy().tolist(), y0.grad.numpy().tolist()


@pytest.mark.parametrize("n", [5, 17, 40])
def test_wide_outputs_with_repeats_dirty_and_non_differentiable(n):
    facts, gx, gy = _fan(cgrad, n)
    assert facts == (n, True, True, False, True, "FanBackward")
    k = sum(float(i) for i in range(n) if i not in (1, 2, 3, n - 1))
    # both places of the repeated output send their gradient to its last place, n - 1
    assert gx == [k + 6.0, k + 6.0] and gy == [2.0, 2.0]
    torch = pytest.importorskip("torch")
    tfacts, tgx, tgy = _fan(torch, n)
    assert facts[:5] == tfacts[:5] and (gx, gy) == (tgx, tgy)
