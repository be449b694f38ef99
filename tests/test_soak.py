"""Memory soak, short: bench/soak.py's scenario c (build + backward + drop of small graphs)
for 20,000 cycles in a fresh subprocess must not grow the process after its warm-up, and the
reference cycles its custom Functions' ctx close must be freed by the cycle collector.

The bounds come from measurement (bench/README.md, "Memory soak"). After gc.collect(), the
RSS of 20,000-cycle runs of c1 and c2 moved by 0 bytes after the 5,000-cycle warm-up and
sys.getallocatedblocks() by -1 to 0, in each of 8 runs (4 of c1, 4 of c2; load average 3 on
2 cores). A leak of one Python object per cycle is 15,000 blocks after warm-up, and of one
tensor per cycle also about 3 MB of RSS, so the bounds (1,000 blocks, 1 MiB of RSS) are far
above the noise and far below the smallest leak: leaking one 4-element array every 10th cycle
(1,500 blocks) fails the test. gc.collect() runs before each sample: cycle garbage that
CPython's generational thresholds have not reached yet is not a leak (see bench/soak.py).
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import warnings
import weakref

import numpy as np
import pytest

import cgrad
from cgrad.autograd import Function

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOAK = os.path.join(ROOT, "bench", "soak.py")

CYCLES, WARMUP, EVERY = 20_000, 5_000, 1_000
# Under AddressSanitizer (.ci/sanitize preloads libasan and sets PYTHONMALLOC=malloc) freed
# memory waits in ASan's quarantine (256 MB by default) before it is reused, so the RSS grows
# by design and sys.getallocatedblocks() reads 0: only the object and registry bounds hold.
UNDER_ASAN = "asan" in os.environ.get("LD_PRELOAD", "")
MAX_RSS_GROWTH = 1 << 20        # bytes, after warm-up
MAX_BLOCKS_GROWTH = 1_000       # sys.getallocatedblocks(), after warm-up


def _soak_child(name):
    """Run bench/soak.py's scenario `name` in a fresh process importing this cgrad."""
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(cgrad.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    env["OPENBLAS_NUM_THREADS"] = "1"
    cmd = [sys.executable, SOAK, "--_child", name, "--_steps", str(CYCLES), "--_warmup",
           str(WARMUP), "--_every", str(EVERY)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["c1", "c2"])
def test_soak_cycles_memory_flat_after_warmup(name):
    rec = _soak_child(name)
    s = rec["samples"]
    assert s[-1]["step"] == CYCLES and len(s) == CYCLES // EVERY + 1
    warm = next(x for x in s if x["step"] >= WARMUP)
    after = s[s.index(warm):]
    # the gradients of the last cycle are right (the workload really ran)
    assert rec["info"]["grad_max_err"] < 1e-12
    # flat: no sample after warm-up above the warm-up's RSS by more than the bound
    if not UNDER_ASAN:
        assert max(x["rss"] for x in after) - warm["rss"] <= MAX_RSS_GROWTH, after
        assert s[-1]["blocks"] - warm["blocks"] <= MAX_BLOCKS_GROWTH, after
    # no object the collector tracks survives a cycle, and the untracked registry is bounded
    assert s[-1]["objects"] - warm["objects"] <= 50
    assert max(x["registry_capacity"] for x in after) == warm["registry_capacity"]


# ---------------------------------------------------------------------------------------------
# the cycles of scenario c1 are real and the collector frees them

class CycleMul(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.me = ctx
        ctx.d = {"ctx": ctx}
        ctx.f = lambda: ctx
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        assert ctx.f() is ctx
        return g * w, g * x


class ExpOut(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        ctx.out = y
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


@pytest.fixture
def gc_off():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("create_graph", [False, True])
def test_ctx_cycles_are_collected(gc_off, create_graph):
    w = cgrad.tensor(np.linspace(0.1, 0.4, 4), requires_grad=True)
    x = cgrad.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    a = CycleMul.apply(x, w)
    b = ExpOut.apply(a)
    b.register_hook(lambda g: g * 1.0)
    a.grad_fn.register_hook(lambda gi, go: None)
    c = (b * a).sum()
    with warnings.catch_warnings():      # torch's warning about this very cycle
        warnings.simplefilter("ignore", UserWarning)
        c.backward(create_graph=create_graph)
    an, xn = a.detach().numpy(), x.detach().numpy()
    want = (np.exp(an) * an + np.exp(an)) * w.detach().numpy()
    np.testing.assert_allclose(x.grad.detach().numpy(), want, rtol=1e-12)
    assert (x.grad.grad_fn is not None) == create_graph
    # on cycles: CycleMul's ctx (itself, its dict, its closure), ExpOut's ctx and its output b
    # (ctx.out), and with create_graph x (x.grad's graph leads back to x)
    cyclic = [weakref.ref(o) for o in (a.grad_fn, b.grad_fn, b) + ((x,) if create_graph
                                                                    else ())]
    others = [weakref.ref(o) for o in (a, c, c.grad_fn)]
    w.grad = None
    del a, b, c, x, an, xn
    assert [r for r in cyclic if r() is None] == []    # refcounting alone cannot free them
    gc.collect()
    assert [r for r in cyclic + others if r() is not None] == []


def test_builtin_ops_graph_is_freed_without_the_collector(gc_off):
    w = cgrad.tensor(np.linspace(0.1, 0.4, 4), requires_grad=True)
    x = cgrad.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    h = (x * w + 0.5).tanh()
    y = (h * x.exp()).sum()
    y.backward()
    refs = [weakref.ref(o) for o in (x, h, y, h.grad_fn, y.grad_fn, x.grad)]
    w.grad = None
    del x, h, y
    assert [r for r in refs if r() is not None] == []
