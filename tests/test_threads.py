"""Threads and processes: concurrent forward/backward loops checked against a single-threaded
reference, exact accumulation into shared leaves, shared retained subgraphs, which modes
are thread-local (as torch 2.13: grad mode, inference mode and saved-tensor hooks are; anomaly
mode is process-wide), and fork() while other threads run backward.

Every thread test switches threads as often as CPython allows (sys.setswitchinterval(1e-6))
so that threads interleave inside engine callbacks; NumPy also releases the GIL in large
adds. Scenarios that could crash or hang run in a subprocess with a timeout.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import cgrad
from cgrad import _C
from cgrad.autograd import Function

N_THREADS = 8


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def fast_switch():
    prev = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(prev)


def _run_threads(fn, n=N_THREADS):
    """Run fn(k) in n threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors = []

    def work(k):
        try:
            barrier.wait()
            fn(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    if errors:
        raise errors[0]
    assert _C._engine_active_runs() == 0
    assert _C._acc_lock_state() == (0, 0)


# ======================================================================================
# Independent loops against a single-threaded reference

class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class SplitScale(Function):
    """Two outputs, a non-tensor argument, and a nested autograd.grad in backward."""

    @staticmethod
    def forward(ctx, x, w, k):
        ctx.save_for_backward(x, w)
        ctx.k = k
        return x * w, x * k

    @staticmethod
    def backward(ctx, ga, gb):
        x, w = ctx.saved_tensors
        with cgrad.enable_grad():
            xd = x.detach().requires_grad_()
            (gx_nested,) = cgrad.autograd.grad((xd * w.detach()).sum(), xd)
        gx = ga * gx_nested + gb * ctx.k
        return gx, ga * x, None


def _params(seed):
    rng = np.random.RandomState(seed)
    return [cgrad.tensor(rng.randn(*s), requires_grad=True)
            for s in ((5, 16), (16,), (16, 3), (3,), (3,))]


def _mlp_step(params, xv, yv, how):
    """One forward/backward; returns the gradients as arrays."""
    w1, b1, w2, b2, s = params
    for p in params:
        p.grad = None
    x = cgrad.tensor(xv)
    h = (x @ w1 + b1).tanh()
    hc = Cube.apply(h * 0.5)
    h.register_hook(lambda g: g * 1.0)
    a, b = SplitScale.apply(hc @ w2 + b2, s, 0.25)
    loss = ((a + b - cgrad.tensor(yv)) ** 2).mean()
    if how == "backward":
        loss.backward()
        return [p.grad.numpy().copy() for p in params]
    if how == "grad":
        return [g.numpy() for g in cgrad.autograd.grad(loss, params)]
    # backward(inputs=) on part of the parameters, then autograd.grad for the rest
    loss.backward(inputs=params[:2], retain_graph=True)
    rest = cgrad.autograd.grad(loss, params[2:])
    return [p.grad.numpy().copy() for p in params[:2]] + [g.numpy() for g in rest]


def test_threads_running_their_own_loops_match_a_single_threaded_reference(fast_switch):
    hows = ("backward", "grad", "inputs")
    data = []
    for k in range(N_THREADS):
        rng = np.random.RandomState(100 + k)
        batches = [(rng.randn(4, 5), rng.randn(4, 3)) for _ in range(3)]
        params = _params(k)
        ref = {(i, how): _mlp_step(params, xv, yv, how)
               for i, (xv, yv) in enumerate(batches) for how in hows}
        data.append((params, batches, ref))
    deadline = time.monotonic() + 3.0
    counts = [0] * N_THREADS

    def work(k):
        params, batches, ref = data[k]
        i = 0
        while time.monotonic() < deadline or i < 6:
            b, how = i % 3, hows[(i // 3) % 3]
            xv, yv = batches[b]
            got = _mlp_step(params, xv, yv, how)
            for g, r in zip(got, ref[(b, how)]):
                np.testing.assert_allclose(g, r, rtol=1e-13, atol=1e-15)
            assert cgrad.is_grad_enabled()
            i += 1
        counts[k] = i

    _run_threads(work)
    assert min(counts) >= 6


# ======================================================================================
# One shared leaf

@pytest.mark.parametrize("size", [3, 100_000])
def test_threads_accumulating_into_one_leaf_give_the_serial_sum_exactly(size, fast_switch):
    w = cgrad.tensor(np.zeros(size), requires_grad=True)
    reps = 12

    def contribution(k, r):
        return float((k * 7 + r) % 5 + 1)          # an integer: every order sums exactly

    def work(k):
        for r in range(reps):
            c = contribution(k, r)
            how = (k + r) % 4
            if how == 0:
                (w * c).sum().backward()
            elif how == 1:
                Cube.apply(w + 1.0).mul(c / 3.0).sum().backward()   # w = 0: 3 (w + 1)^2 = 3
            elif how == 2:
                (w * c).sum().backward(inputs=[w])
            else:
                cgrad.autograd.backward([(w[None, :] * c).sum()])

    _run_threads(work)
    want = sum(contribution(k, r) for k in range(N_THREADS) for r in range(reps))
    g = w.grad.numpy()
    assert g.min() == g.max() == want


def test_threads_backward_through_a_shared_retained_subgraph(fast_switch):
    """Each thread's graph ends in a long common subgraph (built once, retained) down to one
    leaf: the runs claim the same nodes at once (Note [Run hints])."""
    w = cgrad.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    h = w
    for _ in range(300):
        h = h * 1.0 + 0.0
    h.retain_grad()
    reps = 10
    xs = [cgrad.tensor(np.full(3, float(k + 1)), requires_grad=True) for k in range(N_THREADS)]

    def work(k):
        x = xs[k]
        for r in range(reps):
            if r % 2:
                (h * x).sum().backward(retain_graph=True)
            else:
                gx, gw = cgrad.autograd.grad((h * x).sum(), [x, w], retain_graph=True)
                assert gx.tolist() == w.tolist() and gw.tolist() == x.tolist()
        assert x.grad.tolist() == [(reps // 2) * v for v in w.tolist()]

    _run_threads(work)
    total = sum(float(k + 1) for k in range(N_THREADS)) * (reps // 2)
    assert w.grad.tolist() == [total] * 3
    # retain_grad fires in autograd.grad runs too (as torch): every run added to h.grad
    assert h.grad.tolist() == [2 * total] * 3
    # the shared subgraph still runs
    w.grad = None
    h.sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]


def test_threads_freeing_a_graph_others_are_running(fast_switch):
    """Some threads run a shared graph with retain_graph=False (freeing its saved tensors node
    by node) while others run it with retain_graph=True: each run either gives the right
    gradient or raises torch's "second time" error, never anything else."""
    outcomes = []
    for _ in range(10):
        w = cgrad.tensor(np.linspace(0.1, 1.0, 50), requires_grad=True)
        h = w
        for _ in range(40):
            h = (h * 1.0).exp().log()              # nodes that save tensors
        loss = (h * h).sum()

        def work(k):
            for i in range(3):
                try:
                    if (k + i) % 2:
                        (g,) = cgrad.autograd.grad(loss, w)
                        np.testing.assert_allclose(g.numpy(), 2 * w.detach().numpy(),
                                                   rtol=1e-12)
                    else:
                        loss.backward(retain_graph=True)
                    outcomes.append("ok")
                except RuntimeError as e:
                    assert "backward through the graph a second time" in str(e)
                    outcomes.append("freed")

        _run_threads(work, n=4)
    assert set(outcomes) == {"ok", "freed"}


# --------------------------------------------------------------------------------------
# Note [Exact needs_input_grad]: the needs_input_grad a backward sees in a pruned run belongs
# to that call. It used to be written into the shared node for the call: a thread running
# the same node meanwhile saw the other thread's value (a gradient silently missing, or "appears
# to not have been used in the graph"), and two threads restoring it out of order left it
# wrong for every later run.

class CheckedMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        s = 0
        for i in range(50):          # Python work: with a tiny switch interval the GIL moves
            s += i
        ga = g * b if ctx.needs_input_grad[0] else None
        gb = g * a if ctx.needs_input_grad[1] else None
        return ga, gb


def test_threads_see_their_own_needs_input_grad_on_a_shared_node(fast_switch):
    x = cgrad.tensor(np.ones(10), requires_grad=True)
    w = cgrad.tensor(np.full(10, 2.0), requires_grad=True)
    loss = CheckedMul.apply(x, w).sum()
    node = loss.grad_fn.next_functions[0][0]

    def work(k):
        target, want = (x, 2.0) if k % 2 else (w, 1.0)
        for _ in range(150):
            (g,) = cgrad.autograd.grad(loss, [target], retain_graph=True)
            assert np.all(g.numpy() == want)

    _run_threads(work)
    assert node.needs_input_grad == (True, True)
    loss.backward()
    assert x.grad.tolist() == [2.0] * 10 and w.grad.tolist() == [1.0] * 10


def test_a_run_nested_in_a_pruned_backward_sees_the_nodes_own_needs_input_grad():
    seen = []

    class Nest(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            if len(seen) == 1:
                with cgrad.enable_grad():
                    loss.backward(retain_graph=True)      # a full run through this node
            seen.append(ctx.needs_input_grad)
            return g * 2.0, g * 3.0

    a = cgrad.tensor([1.0], requires_grad=True)
    b = cgrad.tensor([1.0], requires_grad=True)
    loss = Nest.apply(a, b).sum()
    (ga,) = cgrad.autograd.grad(loss, [a], retain_graph=True)
    # outer (pruned to a), nested (full run: the node's own value), outer again
    assert seen == [(True, False), (True, True), (True, True), (True, False)]
    assert ga.tolist() == [2.0] and a.grad.tolist() == [2.0] and b.grad.tolist() == [3.0]


# ======================================================================================
# Which modes are thread-local: as torch 2.13

def _thread_modes(lib):
    """Thread A enters each mode and waits; thread B looks at the mode and at its effect on
    B's own work. Returns what B saw (the same in cgrad and torch)."""
    warnings.simplefilter("ignore")           # detect_anomaly's warning
    ag = lib.autograd
    is_inf = getattr(lib, "is_inference_mode_enabled", None) or ag.is_inference_mode_enabled
    is_anomaly = getattr(lib, "is_anomaly_enabled", None) or ag.is_anomaly_enabled
    packed = []
    disabled = ag.graph.disable_saved_tensors_hooks

    def hooks():
        return ag.graph.saved_tensors_hooks(lambda t: packed.append("A") or t, lambda t: t)

    def b_no_hooks_raise():
        try:
            with ag.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
            return False
        except RuntimeError:
            return True

    def b_nan_raises():
        class NaNBackward(ag.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * float("nan")

        x = lib.tensor([1.0], requires_grad=True)
        try:
            NaNBackward.apply(x).sum().backward()
            return False
        except RuntimeError:
            return True

    modes = {
        "no_grad": (lib.no_grad, lambda: (lib.is_grad_enabled(),
                                          (lib.ones(1, requires_grad=True) * 2).requires_grad)),
        "set_grad_enabled": (lambda: lib.set_grad_enabled(False), lambda: lib.is_grad_enabled()),
        "inference_mode": (lib.inference_mode,
                           lambda: (is_inf(), lib.is_grad_enabled(),
                                    (lib.ones(1, requires_grad=True) * 2).requires_grad)),
        "detect_anomaly": (ag.detect_anomaly, lambda: (is_anomaly(), b_nan_raises())),
        "set_detect_anomaly": (lambda: ag.set_detect_anomaly(True), lambda: is_anomaly()),
        "saved_tensors_hooks": (hooks, lambda: (packed.clear(),
                                                lib.ones(1, requires_grad=True).exp(),
                                                len(packed))[2]),
        "disable_saved_tensors_hooks": (lambda: disabled("off"), b_no_hooks_raise),
    }
    seen = {}
    for name, (enter, look) in modes.items():
        inside, leave = threading.Barrier(2), threading.Barrier(2)
        out = {}

        def a():
            with enter():
                out["A"] = look()
                inside.wait()
                leave.wait()

        def b():
            inside.wait()
            try:
                out["B"] = look()
            finally:
                leave.wait()

        ts = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        packed.clear()
        seen[name] = (out["A"], out["B"], look())
    return seen


def test_which_modes_are_thread_local():
    with warnings.catch_warnings():
        seen = _thread_modes(cgrad)
    # thread-local: the other thread and the main thread see the default
    assert seen["no_grad"] == ((False, False), (True, True), (True, True))
    assert seen["set_grad_enabled"] == (False, True, True)
    assert seen["inference_mode"] == ((True, False, False), (False, True, True),
                                      (False, True, True))
    assert seen["saved_tensors_hooks"] == (1, 0, 0)
    assert seen["disable_saved_tensors_hooks"] == (True, False, False)
    # process-wide: the other thread sees (and is checked by) the anomaly mode
    assert seen["detect_anomaly"] == ((True, True), (True, True), (False, False))
    assert seen["set_detect_anomaly"] == (True, True, False)


def test_which_modes_are_thread_local_as_torch(torch):
    with warnings.catch_warnings():
        assert _thread_modes(cgrad) == _thread_modes(torch)


def test_mode_entered_in_a_thread_is_restored_there_after_an_exception():
    def work(k):
        for _ in range(50):
            try:
                with cgrad.no_grad():
                    with cgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                        raise KeyError(k)
            except KeyError:
                pass
            assert cgrad.is_grad_enabled()
            assert _C._current_saved_hooks() is None

    _run_threads(work)


# ======================================================================================
# fork() while other threads run backward

_FORK = textwrap.dedent("""
    import os, sys, threading, time, warnings
    import numpy as np
    import cgrad
    from cgrad import _C

    sys.setswitchinterval(1e-6)
    w = cgrad.tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = w
    for _ in range(2000):
        h = h * 1.0 + 0.0
    shared = (h * h).sum()                  # retained, run by every thread
    stop = threading.Event()
    running = threading.Barrier(9)
    errors = []

    def work(k):
        try:
            running.wait()
            while not stop.is_set():
                x = cgrad.tensor(np.full(2, float(k)), requires_grad=True)
                (gx,) = cgrad.autograd.grad((x * x).sum(), x)
                assert gx.tolist() == [2.0 * k] * 2
                cgrad.autograd.grad(shared, w, retain_graph=True)
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    running.wait()
    time.sleep(0.2)
    # Python 3.12+ warns that fork() in a multi-threaded process may deadlock the child: the
    # child here only runs cgrad (whose locks are renewed at fork) and exits with os._exit.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 10
        try:
            # threads in the child recycle (or unmap) the dead threads' stacks
            code = 11
            for _ in range(3):
                th = [threading.Thread(target=lambda: sum(range(1000))) for _ in range(8)]
                for t in th:
                    t.start()
                for t in th:
                    t.join()
            code = 12                       # the inherited graph, claimed by the dead runs
            (gw,) = cgrad.autograd.grad(shared, w, retain_graph=True)
            assert gw.tolist() == [2.0, 4.0], gw
            w.grad = None
            shared.backward(retain_graph=True)
            assert w.grad.tolist() == [2.0, 4.0]
            code = 13                       # the dead threads' runs were forgotten
            assert _C._engine_active_runs() == 0 and _C._acc_lock_state() == (0, 0)
            code = 14                       # a fresh graph, and threads running backward
            out = []

            def child_work(k):
                y = cgrad.tensor([float(k)], requires_grad=True)
                (y * y * y).sum().backward()
                out.append(y.grad.item() == 3.0 * k * k)
            th = [threading.Thread(target=child_work, args=(k,)) for k in range(4)]
            for t in th:
                t.start()
            for t in th:
                t.join()
            assert out == [True] * 4
            assert _C._engine_active_runs() == 0
            code = 0
        except BaseException as e:
            print("child:", repr(e), file=sys.stderr)
        finally:
            os._exit(code)
    time.sleep(0.2)                          # the parent carries on
    stop.set()
    for t in threads:
        t.join()
    _, status = os.waitpid(pid, 0)
    (gw,) = cgrad.autograd.grad(shared, w)
    print(os.waitstatus_to_exitcode(status), errors[:1], gw.tolist())
""")


def _run_script(src, timeout=120):
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    return r.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_while_threads_run_backward():
    """The child runs backward on an inherited graph that the other threads' runs had
    claimed (their runs were registered at the fork: Note [Runs across fork]) and on fresh
    graphs, in its own threads too; it exits 0. The parent carries on."""
    assert _run_script(_FORK) == "0 [] [2.0, 4.0]"


_FORK_IN_BACKWARD = textwrap.dedent("""
    import os, sys
    import cgrad
    from cgrad import _C

    x = cgrad.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    pids = []

    def hook(g):
        assert _C._engine_active_runs() == 1
        pids.append(os.fork())        # the child carries on inside this run
        return g

    h.register_hook(hook)
    (h * h).sum().backward()
    ok = x.grad.tolist() == [18.0, 36.0] and _C._engine_active_runs() == 0
    if pids[0] == 0:
        y = cgrad.tensor([2.0], requires_grad=True)
        (y * y).sum().backward()
        os._exit(0 if ok and y.grad.tolist() == [4.0] else 3)
    _, status = os.waitpid(pids[0], 0)
    print(os.waitstatus_to_exitcode(status), ok)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_from_inside_a_backward():
    assert _run_script(_FORK_IN_BACKWARD) == "0 True"
