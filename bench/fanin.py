"""Workload 4, fan-in accumulation: one (64,) leaf used by n ops ``x * 1.5``.

The engine must sum n gradients into the leaf's one buffer. Two ways of closing the graph:

* ``shared_loop`` (4a): ``s = outs[0]; for o in outs[1:]: s = s + o; s.sum().backward()``,
  plain user code; it adds n - 1 Add nodes whose backward is a pass-through;
* ``shared_roots`` (4b): ``autograd.backward(outs, [ones] * n)``, n roots and no Add nodes:
  only the uses. HIPS autograd has no multi-root backward; its equivalent packs the outputs
  with ``autograd.builtins.list`` (one node with n parents) and calls the VJP on a list of
  n ones.

Each factory takes (module, n) and returns run() -> (phases in seconds, keepalive, gradient);
bench/run.py times them interleaved across systems. Run through ``python bench/run.py --only
fanin``.
"""
import numpy as np

from common import cpu_time, perf_counter


def _ph(t0, t1, t2, c0, c2):
    return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0, "cpu": c2 - c0}


def loop_autograd(lib, n):
    def run():
        x = lib.ones(64, requires_grad=True)
        c0, t0 = cpu_time(), perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        s = outs[0]
        for o in outs[1:]:
            s = s + o
        t1 = perf_counter()
        s.sum().backward()
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (x, outs, s), x.grad
    return run


def loop_numpy(_np, n):
    def run():
        x = np.ones(64, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        s = outs[0]
        for o in outs[1:]:
            s = s + o
        t1 = perf_counter()
        s.sum()
        g = np.ones_like(s)
        gx = np.zeros_like(x)
        for _ in range(n):            # each add passes g through; each use's mul sends g*1.5
            gx += g * 1.5
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (outs, s), gx
    return run


def loop_hips(ag, n):
    anp = ag.np

    def f(x):
        outs = [x * 1.5 for _ in range(n)]
        s = outs[0]
        for o in outs[1:]:
            s = s + o
        return anp.sum(s)

    def run():
        x = np.ones(64, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        vjp, ans = ag.make_vjp(f)(x)
        t1 = perf_counter()
        g = vjp(np.ones_like(ans))
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (vjp,), g
    return run


def roots_autograd(lib, n):
    def run():
        x = lib.ones(64, requires_grad=True)
        g = lib.ones(64)
        grads = [g] * n
        c0, t0 = cpu_time(), perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        t1 = perf_counter()
        lib.autograd.backward(outs, grads)
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (x, outs), x.grad
    return run


def roots_numpy(_np, n):
    def run():
        x = np.ones(64, dtype=np.float32)
        g = np.ones(64, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        t1 = perf_counter()
        gx = np.zeros_like(x)
        for _ in range(n):
            gx += g * 1.5
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (outs,), gx
    return run


def roots_hips(ag, n):
    def f(x):
        return ag.list([x * 1.5 for _ in range(n)])

    def run():
        x = np.ones(64, dtype=np.float32)
        grads = [np.ones(64, dtype=np.float32)] * n
        c0, t0 = cpu_time(), perf_counter()
        vjp, outs = ag.make_vjp(f)(x)
        t1 = perf_counter()
        g = vjp(grads)
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (vjp, outs), g
    return run


WORKLOADS = {
    "shared_loop": {"cgrad": loop_autograd, "torch": loop_autograd, "numpy": loop_numpy,
                    "hips": loop_hips, "n": 10_000, "n_quick": 100, "unit": "use"},
    "shared_roots": {"cgrad": roots_autograd, "torch": roots_autograd, "numpy": roots_numpy,
                     "hips": roots_hips, "n": 10_000, "n_quick": 100, "unit": "use"},
}
