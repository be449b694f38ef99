#!/usr/bin/env python
"""cgrad benchmark suite: cgrad against the NumPy/SciPy floor, PyTorch and HIPS autograd.

    pip install -e ".[bench]"          # matplotlib and HIPS autograd (torch: pip install torch)
    python bench/run.py                # everything (10-20 minutes); writes bench/results/
    python bench/run.py --quick        # a smoke test, not a measurement: tiny sizes, 1
                                       # repetition, no gates; writes nothing unless --out
    python bench/run.py --only chain hvp --repeats 11 --out /tmp/res
    python bench/run.py --profile elementwise     # + cProfile of cgrad in that workload

Systems (a column each; a missing one is skipped with a note): ``cgrad``; ``numpy``, the floor:
the same computation with a hand-written NumPy/SciPy forward and backward; ``torch`` (CPU, one
thread) when importable; ``hips``: HIPS autograd (the ``autograd`` package on PyPI) when
importable. cgrad and torch run the *same* source (only the module object differs).

Workloads:

1. ``elementwise``: tiny-op chain: 2000 ops on a (8,) leaf alternating ``y = y * 1.0001`` and
   ``y = y + 0.5``, then ``y.sum().backward()``; per op.
2. ``chain``: the seed's custom Function (forward ``save_for_backward(input); return input *
   2``, backward ``grad_output * 2``) applied 2000 times to a (1,) leaf, then backward; per
   node. HIPS: an ``@primitive`` with ``defvjp``. (The values overflow to inf after ~128
   doublings in float32, as in torch; the gradients are checked on a 100-node chain.)
3. ``bigchain``: a 1,000,000-node chain of (2) (``--chain-kind mul``: ``y = y * 1.0001``)
   built and backpropagated in a fresh subprocess per system and repetition: time per node
   and bytes per node (RSS growth while building).
4. ``fanin`` (bench/fanin.py): one (64,) leaf used by 10,000 ops ``x * 1.5``: (4a) summed with
   ``s = s + o`` then backward, (4b) ``autograd.backward(outs, [ones] * n)``; per use.
5. ``mlp`` (bench/mlp.py; HIPS column: bench/mlp_hips.py): one SGD training step of a
   784-1024-1024-10 tanh MLP, batch 512, cross-entropy, float32 and float64, with peak memory.
6. ``sparse`` (bench/sparse.py): spmm forward+backward, N = 20,000, nnz = 200,000, F = 64,
   against scipy, torch sparse.mm and pyGAT's Function on torch, with peak memory; SDDMM.
7. ``gat`` (bench/gat.py): a GAT training epoch on Cora against pyGAT on torch.
8. ``hvp`` (bench/hvp.py): double backward: the Hessian-vector product of a tanh MLP loss.
9. ``models`` (bench/models.py): whole training steps of real models against torch (nanoGPT-
   tiny, makemore's Transformer and MLP, a pygcn epoch on Cora, examples/char_lstm.py and
   examples/digits_cnn.py), the same weights, gradients checked against torch's; with the
   forward / backward / optimizer split and a cProfile of cgrad's step. ``--quick``: tiny
   sizes, cgrad alone.
S. ``scaling`` (bench/scaling.py): time and bytes per node of chains and random DAGs of 1e3,
   1e4, 1e5, 1e6, 3e6 nodes, one fresh process per cell, and the cycle collector's share.
M. ``soak`` (bench/soak.py): memory soak, RSS growth after warm-up of long runs (MLP training,
   GAT training, small graphs of custom Functions whose ctx closes cycles, built-in ops; torch
   on the latter), one fresh process per scenario, here 10x shorter than ``python
   bench/soak.py`` (the full one); ``--quick``: 100x shorter, all at once.

Method: OPENBLAS/OMP/MKL threads = 1 (set here before NumPy is imported) and
torch.set_num_threads(1); every system's gradients are checked against the floor's before
anything is timed; one untimed warm-up, then ``--repeats`` repetitions interleaved across
systems (the order rotates every round) so machine drift hits every column alike;
``gc.collect()`` and a heap settling (Note [Heap settling] in common.py; ``--no-heap-settle``
turns it off) before each repetition, the collector enabled while timing (what users get;
``--gc-off`` disables it inside the timed region); dropping the graph is not timed. Both wall
time (perf_counter) and process CPU time (process_time) are recorded; every system computes
on one thread, so CPU time is the figure that other jobs on a shared machine disturb least:
the summary uses CPU-time medians where a workload records them (1-5, 8, 9, S) and wall medians
otherwise (6, 7: their modules record wall time). Ratios are median/median from this run.
The summary's "vs target" is measured / target for the workloads that have a target (above
1: over the target). The machine (CPU, cores, load average at start and end, versions) heads the output.

Output: the detail tables and the summary (Markdown) on stdout; with a full run (or --out),
``latest.md``, ``latest.json``, ``ratios.png``, ``scaling.png`` and ``soak.png`` (when
matplotlib is installed) in bench/results/; ``--readme`` also refreshes the results block of
bench/README.md. The exit status is 1 when a system errs, a gradient check fails or (full
length only) a soak scenario's RSS grows by more than 2 % after warm-up; timings are never
gated.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import common  # noqa: E402
from common import (check_all, cpu_time, err_text, interleaved,  # noqa: E402
                    load, load_cgrad, load_hips, load_torch, loadavg, machine_info,
                    perf_counter, rss_bytes, stats, to_numpy)
import fanin  # noqa: E402
import hvp  # noqa: E402
import scaling  # noqa: E402
import soak  # noqa: E402

RESULTS_DIR = os.path.join(HERE, "results")
QUICK = False


# ---------------------------------------------------------------------------------------------
# workloads 1 and 2. Each factory takes (module, n) and returns run() -> (phases in seconds,
# keepalive, gradient of the leaf); keepalive is dropped after the clock stops.

def make_my_function(lib):
    """The classic custom Function, defined against `lib.autograd.Function`. As in the seed
    (and in users' code) the class is held by a module, here this one under a per-library
    name: cgrad keeps the nodes of such a class out of the cycle collector, and would keep
    them in it for a class held only by a function's frame (Note [Untracked graphs])."""
    name = "MyFunction_" + lib.__name__.split(".")[0]
    if name in globals():
        return globals()[name]

    class MyFunction(lib.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            output = input * 2
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            grad_input = grad_output * 2
            return grad_input
    MyFunction.__qualname__ = name
    globals()[name] = MyFunction
    return MyFunction


def make_hips_myfn(ag):
    """HIPS autograd's custom primitive: the vjp closure keeps the input (as save_for_backward)."""
    @ag.primitive
    def myfn(input):
        return input * 2

    def vjp_maker(ans, input):
        def vjp(g):
            return g * 2
        return vjp
    ag.defvjp(myfn, vjp_maker)
    return myfn


def _ph(t0, t1, t2, c0, c2):
    return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0, "cpu": c2 - c0}


def chain_autograd(lib, n):
    apply = make_my_function(lib).apply

    def run():
        x = lib.ones(1, requires_grad=True)
        c0, t0 = cpu_time(), perf_counter()
        y = x
        for _ in range(n):
            y = apply(y)
        t1 = perf_counter()
        y.sum().backward()
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (x, y), x.grad
    return run


def chain_numpy(_np, n):
    def run():
        x = np.ones(1, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        saved = []
        y = x
        for _ in range(n):
            saved.append(y)          # ctx.save_for_backward(input)
            y = y * 2
        t1 = perf_counter()
        y.sum()
        g = np.ones_like(y)
        for i in range(n - 1, -1, -1):
            inp = saved[i]            # input, = ctx.saved_tensors  # noqa: F841
            g = g * 2
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (saved, y), g
    return run


def chain_hips(ag, n):
    myfn = make_hips_myfn(ag)
    anp = ag.np

    def f(x):
        y = x
        for _ in range(n):
            y = myfn(y)
        return anp.sum(y)

    def run():
        x = np.ones(1, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        vjp, ans = ag.make_vjp(f)(x)
        t1 = perf_counter()
        g = vjp(np.ones_like(ans))
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (vjp,), g
    return run


def elementwise_autograd(lib, n):
    half = n // 2

    def run():
        x = lib.ones(8, requires_grad=True)
        c0, t0 = cpu_time(), perf_counter()
        y = x
        for _ in range(half):
            y = y * 1.0001
            y = y + 0.5
        t1 = perf_counter()
        y.sum().backward()
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (x, y), x.grad
    return run


def elementwise_numpy(_np, n):
    half = n // 2

    def run():
        x = np.ones(8, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        y = x
        for _ in range(half):
            y = y * 1.0001
            y = y + 0.5
        t1 = perf_counter()
        y.sum()
        g = np.ones_like(y)
        for _ in range(half):
            # add: pass-through, nothing to compute
            g = g * 1.0001            # mul by a constant
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (y,), g
    return run


def elementwise_hips(ag, n):
    half = n // 2
    anp = ag.np

    def f(x):
        y = x
        for _ in range(half):
            y = y * 1.0001
            y = y + 0.5
        return anp.sum(y)

    def run():
        x = np.ones(8, dtype=np.float32)
        c0, t0 = cpu_time(), perf_counter()
        vjp, ans = ag.make_vjp(f)(x)
        t1 = perf_counter()
        g = vjp(np.ones_like(ans))
        t2, c2 = perf_counter(), cpu_time()
        return _ph(t0, t1, t2, c0, c2), (vjp,), g
    return run


INPROC = {
    # name: {system: factory, n, n_quick, n_check (gradient check size), unit}
    "elementwise": {"cgrad": elementwise_autograd, "torch": elementwise_autograd,
                    "numpy": elementwise_numpy, "hips": elementwise_hips,
                    "n": 2000, "n_quick": 50, "unit": "op"},
    "chain": {"cgrad": chain_autograd, "torch": chain_autograd, "numpy": chain_numpy,
              "hips": chain_hips, "n": 2000, "n_quick": 50, "n_check": 100, "unit": "node"},
    **fanin.WORKLOADS,
}


def time_inproc(name, libs, repeats, warmup, gc_off):
    """Gradient check, then interleaved repetitions of workload `name` for every system."""
    spec = INPROC[name]
    n = spec["n_quick"] if QUICK else spec["n"]
    n_check = min(n, spec.get("n_check", n))
    runners, errors, grads = {}, {}, {}
    with np.errstate(over="ignore"):
        for lname, mod in libs.items():
            fac = spec.get(lname)
            if fac is None:
                continue
            try:
                _, keep, g = fac(mod, n_check)()
                grads[lname] = to_numpy(g)
                del keep
                runners[lname] = fac(mod, n)
            except Exception as e:
                errors[lname] = err_text(e)
        grad_check = check_all(grads, "numpy", rtol=1e-3)

        def wrap(r):
            def w():
                if gc_off:
                    gc.disable()
                try:
                    ph, keep, _ = r()
                finally:
                    if gc_off:
                        gc.enable()
                return ph, keep
            return w
        samples, errs = interleaved({k: wrap(r) for k, r in runners.items()}, repeats, warmup)
    errors.update(errs)
    out = {"n": n, "n_check": n_check, "unit": spec["unit"], "libs": {},
           "grad_check": grad_check}
    for lname, ss in samples.items():
        out["libs"][lname] = {p: stats(v, 1e6 / n) for p, v in ss.items()}   # us per unit
    for lname, e in errors.items():
        out["libs"][lname] = {"error": e}
    return out


# ---------------------------------------------------------------------------------------------
# workload 3: the 1,000,000-node chain, one fresh subprocess per system and repetition

def child_bigchain(lname, n, kind, gc_off=False):
    """Runs inside the subprocess: prints one JSON line."""
    mod = load(lname)
    np.seterr(over="ignore")
    if lname == "numpy":
        def build(m):
            y = np.ones(1, dtype=np.float32)
            saved = []
            if kind == "myfn":
                for _ in range(m):
                    saved.append(y)
                    y = y * 2
            else:
                for _ in range(m):
                    y = y * 1.0001
            return (saved, y, m)

        def backward(state):
            saved, y, m = state
            y.sum()
            g = np.ones_like(y)
            if kind == "myfn":
                for i in range(len(saved) - 1, -1, -1):
                    inp = saved[i]  # noqa: F841
                    g = g * 2
            else:
                for _ in range(m):
                    g = g * 1.0001
            return g
    elif lname == "hips":
        anp = mod.np
        myfn = make_hips_myfn(mod)

        def build(m):
            def f(x):
                y = x
                if kind == "myfn":
                    for _ in range(m):
                        y = myfn(y)
                else:
                    for _ in range(m):
                        y = y * 1.0001
                return anp.sum(y)
            return mod.make_vjp(f)(np.ones(1, dtype=np.float32))

        def backward(state):
            vjp, ans = state
            return vjp(np.ones_like(ans))
    else:
        apply = make_my_function(mod).apply

        def build(m):
            x = mod.ones(1, requires_grad=True)
            y = x
            if kind == "myfn":
                for _ in range(m):
                    y = apply(y)
            else:
                for _ in range(m):
                    y = y * 1.0001
            return (x, y)

        def backward(state):
            x, y = state
            y.sum().backward()
            return x.grad

    st = build(100)   # the gradient check (2**100 is finite in float32)
    check = to_numpy(backward(st)).tolist()
    del st
    st = build(1000)  # warm-up: first-call costs, lazily built code paths
    backward(st)
    del st
    gc.collect()
    rss0 = rss_bytes()
    if gc_off:
        gc.disable()
    c0, t0 = cpu_time(), perf_counter()
    st = build(n)
    t1 = perf_counter()
    rss1 = rss_bytes()
    g = backward(st)
    t2, c2 = perf_counter(), cpu_time()
    rss2 = rss_bytes()
    del st
    t3 = perf_counter()
    gc.enable()
    gc.collect()
    rss3 = rss_bytes()
    print(json.dumps({
        "lib": lname, "n": n, "kind": kind,
        "build_s": t1 - t0, "backward_s": t2 - t1, "free_s": t3 - t2, "cpu_s": c2 - c0,
        "rss_before": rss0, "rss_built": rss1, "rss_after_backward": rss2, "rss_freed": rss3,
        "grad_ok": g is not None, "check_grad": check,
    }))


def bigchain_n():
    return 10_000 if QUICK else 1_000_000


def spawn_bigchain(lname, n, kind, gc_off=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--_child-bigchain", lname,
           "--_n", str(n), "--chain-kind", kind] + (["--gc-off"] if gc_off else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_bigchain(proc, timeout):
    """-> (sample dict, None) or (None, error text)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, f"timeout after {timeout} s"
    if proc.returncode != 0:
        tail = (err.strip().splitlines() or ["?"])[-1]
        return None, f"subprocess exit {proc.returncode}: {tail[:200]}"
    try:
        return json.loads(out.strip().splitlines()[-1]), None
    except Exception as e:
        return None, f"bad child output ({err_text(e)}): {out[-200:]!r}"


def time_bigchain(libnames, repeats, kind, timeout, budget, started=None, gc_off=False):
    """Sequential fresh subprocesses, interleaved across systems. A system stops early (at
    least one sample) when its next run would exceed `budget` seconds in total.
    `started`: already running children ({lib: Popen}, used by --quick to overlap them)."""
    n = bigchain_n()
    samples = {k: [] for k in libnames}
    spent = {k: 0.0 for k in libnames}
    errors = {}
    if started:
        for lname, proc in started.items():
            s, e = finish_bigchain(proc, timeout)
            if e:
                errors[lname] = e
            else:
                samples[lname].append(s)
    else:
        for _ in range(repeats):
            for lname in libnames:
                if lname in errors:
                    continue
                k = len(samples[lname])
                if k and spent[lname] / k * (k + 1) > budget:
                    continue
                t0 = perf_counter()
                s, e = finish_bigchain(spawn_bigchain(lname, n, kind, gc_off), timeout)
                spent[lname] += perf_counter() - t0
                if e:
                    errors[lname] = e
                else:
                    samples[lname].append(s)
    out = {"n": n, "kind": kind, "unit": "node", "libs": {}}
    for lname, ss in samples.items():
        if not ss:
            continue
        ph = {
            "total": [(s["build_s"] + s["backward_s"]) for s in ss],
            "cpu": [s["cpu_s"] for s in ss],
            "fwd": [s["build_s"] for s in ss],
            "bwd": [s["backward_s"] for s in ss],
            "free": [s["free_s"] for s in ss],
        }
        d = {k: stats(v, 1e6 / n) for k, v in ph.items()}
        d["bytes"] = stats([(s["rss_built"] - s["rss_before"]) / n for s in ss])
        d["bytes_left"] = stats([(s["rss_freed"] - s["rss_before"]) / n for s in ss])
        d["runs"] = len(ss)
        d["raw"] = ss
        out["libs"][lname] = d
    for lname, e in errors.items():
        out["libs"].setdefault(lname, {})["error"] = e
    grads = {k: np.array(v[0]["check_grad"]) for k, v in samples.items() if v}
    out["grad_check"] = check_all(grads, "numpy", rtol=1e-3)
    return out


# ---------------------------------------------------------------------------------------------
# workloads written by other modules (sparse, gat): imported when present

def load_bench_module(name):
    """bench/<name>.py as a module -> (module, None) or (None, why it was skipped)."""
    path = os.path.join(HERE, f"{name}.py")
    if not os.path.exists(path):
        return None, f"bench/{name}.py is absent"
    try:
        spec = importlib.util.spec_from_file_location(f"cgrad_bench_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:
        return None, f"bench/{name}.py failed to import: {err_text(e)}"
    if not callable(getattr(mod, "run", None)):
        return None, f"bench/{name}.py has no run()"
    return mod, None


def call_run(mod, quick, log, **extra):
    """mod.run(quick=...) with whichever of `log` and `extra` its signature accepts."""
    try:
        params = inspect.signature(mod.run).parameters
    except (TypeError, ValueError):
        params = {}
    kw = {"quick": quick}
    if "log" in params:
        kw["log"] = log
    kw.update({k: v for k, v in extra.items() if k in params})
    return mod.run(**kw)


def run_module_workload(name, quick, log, **extra):
    mod, why = load_bench_module(name)
    if mod is None:
        return {"skipped": why}
    try:
        rows = call_run(mod, quick, log, **extra)
    except Exception as e:
        traceback.print_exc()
        return {"error": err_text(e)}
    out = {"rows": rows}
    if callable(getattr(mod, "render", None)):
        try:
            out["text"] = mod.render(rows)
        except Exception as e:
            out["text"] = f"(render failed: {err_text(e)})"
    return out


def system_of(name):
    """A row's system name in bench/sparse.py and bench/gat.py -> our system key."""
    s = str(name).lower()
    if "cgrad" in s:
        return "cgrad"
    if "floor" in s or "scipy" in s or s.startswith("numpy"):
        return "numpy"
    if "hips" in s:
        return "hips"
    if "torch" in s or "pygat" in s:
        return "torch"
    return None


# ---------------------------------------------------------------------------------------------
# summary

def _med(d, phase):
    if not d or "error" in d and phase not in d:
        return None
    v = d.get(phase)
    return v["median"] if isinstance(v, dict) else None


def _clock(libs):
    ok = [d for d in libs.values() if d and "error" not in d]
    return "cpu" if ok and all("cpu" in d for d in ok) else "total"


def _row(rid, label, unit, values, target=None, vs_target=None, check=None, kind="time",
         clock="cpu", note=""):
    ratios = {}
    c = values.get("cgrad")
    for s in ("numpy", "torch", "hips"):
        v = values.get(s)
        ratios[s] = c / v if c is not None and v else None
    return {"id": rid, "label": label, "unit": unit, "values": values, "ratios": ratios,
            "target": target or "", "vs_target": vs_target, "check": check or "",
            "kind": kind, "clock": {"cpu": "cpu", "-": "-"}.get(clock, "wall"), "note": note}


def _checks(gc_dict, errors=()):
    bad = {k: v for k, v in (gc_dict or {}).items() if v not in ("ok", "ref")}
    txt = "ok" if gc_dict and not bad else ("; ".join(f"{k}: {v}" for k, v in bad.items())
                                            if bad else "-")
    if errors:
        txt += "; errors: " + ", ".join(errors)
    return txt


def build_summary(results):
    rows = []

    def inproc(name, rid, label, target, limit):
        r = results.get(name)
        if not r:
            return
        libs = r["libs"]
        clock = _clock(libs)
        vals = {s: _med(libs.get(s), clock) for s in libs}
        c = vals.get("cgrad")
        errs = [s for s, d in libs.items() if "error" in d]
        rows.append(_row(rid, label.format(n=r["n"]), f"us/{r['unit']}", vals,
                         f"<= {limit:g} us" if target else "",
                         c / limit if target and c is not None else None,
                         _checks(r.get("grad_check"), errs), clock=clock))

    inproc("elementwise", "1", "1 tiny-op chain, {n} ops on (8,)", True, 1.8)
    inproc("chain", "2", "2 MyFunction chain, {n} applies on (1,)", True, 2.0)
    r = results.get("bigchain")
    if r:
        libs = r["libs"]
        clock = _clock(libs)
        vals = {s: _med(d, clock) for s, d in libs.items()}
        c, t = vals.get("cgrad"), vals.get("torch")
        errs = [s for s, d in libs.items() if "error" in d]
        rows.append(_row("3", f"3 deep chain, {r['n']:,} {r['kind']} nodes", "us/node", vals,
                         ">= 3x faster than torch",
                         3 * c / t if c and t else None, _checks(r.get("grad_check"), errs),
                         clock=clock))
        bvals = {s: _med(d, "bytes") for s, d in libs.items()}
        c, t = bvals.get("cgrad"), bvals.get("torch")
        rows.append(_row("3m", f"3 deep chain, {r['n']:,} nodes: memory", "bytes/node", bvals,
                         "<= torch", c / t if c and t else None, "",
                         kind="memory", clock="-"))
    inproc("shared_loop", "4a", "4a fan-in, {n} uses, s = s + o", True, 2.5)
    inproc("shared_roots", "4b", "4b fan-in, {n} uses, backward(outs)", True, 2.5)

    r = results.get("mlp")
    if r and "dtypes" in r:
        hips_r = results.get("mlp_hips", {}).get("dtypes", {})
        for dt, d in r["dtypes"].items():
            libs = d["libs"]
            vals = {s: _med(libs.get(s), "cpu") for s in libs}
            h = hips_r.get(dt, {}).get("libs", {})
            if "hips" in h:
                vals["hips"] = _med(h["hips"], "cpu")
            errs = [s for s, x in {**libs, **h}.items() if "error" in x]
            row = _row("5", f"5 MLP step {dt}, batch {r['config']['batch']}, "
                       f"{'-'.join(map(str, r['config']['sizes']))}", "ms/step", vals,
                       "<= 1.03x NumPy", None,
                       _checks({**d.get("grad_check", {}),
                                **{k: v for k, v in hips_r.get(dt, {}).get(
                                    "grad_check", {}).items() if k == "hips"}}, errs))
            if row["ratios"]["numpy"]:
                row["vs_target"] = row["ratios"]["numpy"] / 1.03
            # cgrad/HIPS from the loop that interleaved the two
            if _med(h.get("cgrad"), "cpu") and vals.get("hips"):
                row["ratios"]["hips"] = _med(h["cgrad"], "cpu") / vals["hips"]
                row["note"] = "HIPS: separate interleaved loop (bench/mlp_hips.py)"
            peak = {s: (x.get("tracemalloc_peak") or 0) / 2 ** 20 or None
                    for s, x in libs.items() if "error" not in x}
            rows.append(row)
            if any(peak.values()):
                rows.append(_row("5m", f"5 MLP step {dt}: peak memory (tracemalloc)",
                                 "MB", peak, "", None, "", kind="memory", clock="-",
                                 note="torch: see the RSS column of the details"))

    r = results.get("sparse")
    if r and "rows" in r:
        for dt in ("float32", "float64"):
            rs = [x for x in r["rows"] if x.get("bench") == "spmm" and x.get("dtype") == dt]
            if not rs:
                continue
            vals, mem, errs, chk = {}, {}, [], {}
            for x in rs:
                s = system_of(x.get("system"))
                if s is None or s in vals or "median" not in x:
                    if s is not None and "median" not in x:
                        errs.append(x.get("system"))
                    continue
                vals[s] = x["median"]
                mem[s] = x.get("trace_peak_mb") or x.get("rss_peak_mb")
                chk[s] = x.get("check", "-")
            c = vals.get("cgrad")
            x0 = rs[0]
            rows.append(_row("6", f"6 spmm fwd+bwd {dt}, N={x0.get('N', 0):,} "
                             f"nnz={x0.get('nnz', 0):,} F={x0.get('F')}", "ms", vals,
                             "<= 43 ms", c / 43 if c else None,
                             _checks({k: v for k, v in chk.items() if k != "numpy"}, errs),
                             clock="total", note="torch: sparse.mm (pyGAT's Function: see "
                                                 "details)"))
            cm = mem.get("cgrad")
            rows.append(_row("6m", f"6 spmm {dt}: peak memory (tracemalloc; torch: RSS)",
                             "MB", mem,
                             "<= 120 MB", cm / 120 if cm else None, "",
                             kind="memory", clock="-"))
    r = results.get("gat")
    if r and "rows" in r:
        vals, chk = {}, {}
        for x in r["rows"]:
            s = system_of(x.get("system"))
            if s and s not in vals and "median" in x:
                vals[s] = x["median"]
        c = vals.get("cgrad")
        ds = r["rows"][0].get("dataset", "cora") if r["rows"] else "cora"
        rows.append(_row("7", f"7 GAT epoch, {ds}", "ms/epoch", vals, "<= 100 ms",
                         c / 100 if c else None, "-", clock="total",
                         note="torch: unmodified pyGAT"))
    r = results.get("models")
    if r and "rows" in r:
        for x in r["rows"]:
            sy = x.get("systems", {})
            vals = {s: d["cpu"]["median"] for s, d in sy.items() if "cpu" in d}
            errs = [s for s, d in sy.items() if "error" in d] + (["all"] if "error" in x
                                                                 else [])
            chk = x.get("check", "-") + ("; errors: " + ", ".join(errs) if errs else "")
            unit = "ms/epoch" if "epoch" in x["label"] else "ms/step"
            rows.append(_row("9", f"9 {x['label']}", unit, vals, "", None, chk))
    r = results.get("hvp")
    if r:
        for name, d in r["configs"].items():
            libs = d["libs"]
            clock = _clock(libs)
            vals = {s: _med(x, clock) for s, x in libs.items()}
            errs = [s for s, x in libs.items() if "error" in x]
            rows.append(_row("8", f"8 HVP {name}, batch {d['batch']}, "
                             f"{'-'.join(map(str, d['sizes']))}", "ms/HVP", vals, "", None,
                             _checks(d.get("grad_check"), errs), clock=clock))
    r = results.get("scaling")
    if r:
        for k in r["kinds"]:
            res_k = r["results"][k]
            for n in r["sizes"][-1:]:
                vals = {s: res_k[s][str(n)]["cpu_us_per_node"] for s in res_k
                        if str(n) in res_k[s]}
                cg = res_k.get("cgrad", {})
                note = ""
                done = [(m, cg[str(m)]) for m in r["sizes"] if str(m) in cg]
                if len(done) > 1:
                    (m0, d0), (m1, d1), (m2, d2) = done[0], done[-2], done[-1]
                    note = (f"cgrad per-node time {m2:,}/{m0:,} nodes: "
                            f"{d2['cpu_us_per_node'] / d0['cpu_us_per_node']:.2f}x, "
                            f"{m2:,}/{m1:,}: {d2['cpu_us_per_node'] / d1['cpu_us_per_node']:.2f}x"
                            + (f"; cycle collector {100 * d2['gc_share']:.0f}% of it"
                               if "gc_share" in d2 else ""))
                label = "chain" if k == "chain" else "random DAG"
                rows.append(_row("S", f"S {label}, {n:,} nodes", "us/node", vals, "", None,
                                 _checks(r["grad_check"].get(k)), note=note))
    r = results.get("soak")
    if r and "scenarios" in r:
        sc = r["scenarios"]
        for name, x in sc.items():
            if name == "d":
                continue
            vals, errs, chk = {}, [], "-"
            if "error" in x:
                errs.append("cgrad")
            else:
                vals["cgrad"] = x["result"]["growth_pct"]
                err = x.get("info", {}).get("grad_max_err")
                chk = "flat" if x["result"]["flat"] else "GROWS"
                if err is not None:
                    chk += ", gradients " + ("ok" if err < 1e-9 else f"off by {err:.2g}")
            note = ""
            if name == "c2" and "d" in sc:       # torch on the same code
                if "error" in sc["d"]:
                    errs.append("torch")
                else:
                    vals["torch"] = sc["d"]["result"]["growth_pct"]
                    note = "torch: scenario d, the same code"
            steps = x["result"]["steps"] if "result" in x else x["planned"][0]
            short = x["label"].split(",")[0]
            row = _row("M", f"M soak {name} {short}, {steps:,} {x['unit']}s: RSS growth "
                       "after warm-up", "%", vals, f"flat within {soak.FLAT_PCT:g} %",
                       abs(vals["cgrad"]) / soak.FLAT_PCT if "cgrad" in vals else None,
                       chk + ("; errors: " + ", ".join(errs) if errs else ""), kind="memory",
                       clock="-", note=note)
            row["ratios"] = {s: None for s in row["ratios"]}   # a ratio of growths means nothing
            rows.append(row)
    return rows


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "%":
        return f"{v:+.2f}"
    if unit in ("bytes/node",):
        return f"{v:.0f}"
    if unit == "MB":
        return f"{v:.1f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def _fr(v):
    return "-" if v is None else f"{v:.2f}x"


def render_summary(rows, md=True):
    head = ["workload", "unit", "clock", "cgrad", "NumPy floor", "torch", "HIPS autograd",
            "cgrad/NumPy", "cgrad/torch", "cgrad/HIPS", "target", "vs target", "gradients"]
    table = []
    for r in rows:
        v = r["values"]
        table.append([r["label"], r["unit"], r["clock"], _fmt(v.get("cgrad"), r["unit"]),
                      _fmt(v.get("numpy"), r["unit"]), _fmt(v.get("torch"), r["unit"]),
                      _fmt(v.get("hips"), r["unit"]), _fr(r["ratios"].get("numpy")),
                      _fr(r["ratios"].get("torch")), _fr(r["ratios"].get("hips")),
                      r["target"], "-" if r["vs_target"] is None else
                      f"{r['vs_target']:.2f}" + (" (over)" if r["vs_target"] > 1 else ""),
                      r["check"]])
    if md:
        out = ["| " + " | ".join(head) + " |",
               "|" + "|".join("---" if i < 3 or i >= 10 else "---:"
                              for i in range(len(head))) + "|"]
        out += ["| " + " | ".join(t) + " |" for t in table]
        return "\n".join(out)
    w = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip()]
    out.append("-" * len(out[0]))
    out += ["  ".join(c.ljust(x) for c, x in zip(t, w)).rstrip() for t in table]
    return "\n".join(out)


def worst_row(rows):
    cand = [r for r in rows if r["vs_target"] is not None]
    return max(cand, key=lambda r: r["vs_target"]) if cand else None


# ---------------------------------------------------------------------------------------------
# the detailed table of workloads 1-4 (every phase; the targets also rescaled by torch)

# (bench, phase, metric label, target kind, target value, torch ref, numpy ref)
ROWS = [
    ("elementwise", "total", "us/op fwd+bwd (wall)", "abs", 1.8, 4.6, 0.9),
    ("elementwise", "cpu", "  us/op fwd+bwd (cpu)", "abs", 1.8, 4.6, 0.9),
    ("elementwise", "fwd", "  us/op fwd", None, None, 2.0, None),
    ("elementwise", "bwd", "  us/op bwd", None, None, 2.5, None),
    ("chain", "total", "us/node apply+bwd (wall)", "abs", 2.0, 12.4, 1.3),
    ("chain", "cpu", "  us/node apply+bwd (cpu)", "abs", 2.0, 12.4, 1.3),
    ("chain", "fwd", "  us/node apply", None, None, None, None),
    ("chain", "bwd", "  us/node bwd", None, None, None, None),
    ("bigchain", "total", "us/node build+bwd (wall)", "speedup", 3.0, 9.0, None),
    ("bigchain", "cpu", "  us/node build+bwd (cpu)", "speedup", 3.0, 9.0, None),
    ("bigchain", "bytes", "bytes/node RSS build", "bytes", None, None, None),
    ("bigchain", "fwd", "  us/node build", None, None, None, None),
    ("bigchain", "bwd", "  us/node bwd", None, None, None, None),
    ("bigchain", "free", "  us/node free (del y)", None, None, None, None),
    ("bigchain", "bytes_left", "  bytes/node left after free", None, None, None, None),
    ("shared_loop", "total", "us/use fwd+bwd (wall)", "abs", 2.5, 8.8, None),
    ("shared_loop", "cpu", "  us/use fwd+bwd (cpu)", "abs", 2.5, 8.8, None),
    ("shared_loop", "fwd", "  us/use fwd", None, None, None, None),
    ("shared_loop", "bwd", "  us/use bwd", None, None, None, None),
    ("shared_roots", "total", "us/use fwd+bwd (wall)", "abs", 2.5, 8.8, None),
    ("shared_roots", "cpu", "  us/use fwd+bwd (cpu)", "abs", 2.5, 8.8, None),
    ("shared_roots", "fwd", "  us/use fwd", None, None, None, None),
    ("shared_roots", "bwd", "  us/use bwd", None, None, None, None),
]

TITLES = {
    "elementwise": "1 y*1.0001 / y+0.5, (8,) x{n}",
    "chain": "2 MyFunction chain, (1,) x{n}",
    "bigchain": "3 {kind} chain, (1,) x{n}, subprocess",
    "shared_loop": "4a (64,) leaf x{n} uses, s=s+o",
    "shared_roots": "4b (64,) leaf x{n} uses, backward(outs)",
}


def fmt_val(d, phase):
    if d is None or "error" in d and phase not in d:
        return "ERROR" if d else "-"
    if phase not in d:
        return "-"
    m, lo = d[phase]["median"], d[phase]["min"]
    if phase.startswith("bytes"):
        return f"{m:7.0f} ({lo:.0f})"
    return f"{m:7.3f} ({lo:.3f})"


def verdict(kind, value, ref_torch, c, t):
    """Returns (target text, meets text)."""
    if kind is None or c is None:
        return "", ""
    if kind == "abs":
        s = "yes" if c <= value else "NO"
        if t is not None and ref_torch:
            # the same target expressed against torch measured on this machine
            rel = value / ref_torch
            s += f" | vs torch {'yes' if c / t <= rel else 'NO'} (<= {rel:.2f}x)"
        return f"<= {value:g} us", s
    if kind == "speedup":
        txt = f">= {value:g}x faster than torch"
        if t is None:
            return txt, "n/a (no torch)"
        return txt, f"{'yes' if t / c >= value else 'NO'} ({t / c:.2f}x)"
    if kind == "bytes":
        txt = "<= torch bytes/node"
        if t is None:
            return txt, "n/a (no torch)"
        return txt, "yes" if c <= t else "NO"
    return "", ""


def _ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def render_micro(results, systems):
    others = [s for s in ("torch", "numpy", "hips") if s in systems]
    cols = ["benchmark", "metric", "cgrad med (min)"] + [f"{s} med (min)" for s in others]
    cols += [f"cgrad/{s}" for s in others] + ["target", "reference when set", "meets target"]
    rows = []
    last = None
    for bench, phase, label, tkind, tval, rtorch, rnumpy in ROWS:
        r = results.get(bench)
        if r is None:
            continue
        libs = r["libs"]
        c = libs.get("cgrad")
        title = ""
        if bench != last:
            title = TITLES[bench].format(n=r["n"], kind=r.get("kind", ""))
            last = bench
        row = [title, label, fmt_val(c, phase)] + [fmt_val(libs.get(s), phase) for s in others]
        row += [_ratio(_med(c, phase), _med(libs.get(s), phase)) for s in others]
        tgt, meets = verdict(tkind, tval, rtorch, _med(c, phase), _med(libs.get("torch"), phase))
        if QUICK and meets:
            meets = "(quick: not gated) " + meets
        refs = []
        if rtorch is not None:
            refs.append(f"torch ~{rtorch:g}")
        if rnumpy is not None:
            refs.append(f"numpy ~{rnumpy:g}")
        if bench == "bigchain" and phase == "total":
            refs = ["torch ~8-10"]
        rows.append(row + [tgt, ", ".join(refs), meets])
    if not rows:
        return ""
    widths = [max(len(cols[i]), *(len(r[i]) for r in rows)) for i in range(len(cols))]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()
    out = ["Workloads 1-4 in detail (us per unit: median (min); wall unless marked cpu)",
           line, "-" * len(line)]
    for r in rows:
        out.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def problems(results):
    out = []
    for bench, r in results.items():
        if not isinstance(r, dict):
            continue
        if bench == "models":
            if "error" in r:
                out.append(f"ERROR models: {r['error']}")
            for x in r.get("rows", []):
                if "error" in x:
                    out.append(f"ERROR models {x['id']}: {x['error']}")
                for s, d in x.get("systems", {}).items():
                    if "error" in d:
                        out.append(f"ERROR models {x['id']}/{s}: {d['error']}")
                if x.get("check") not in (None, "ok", "-"):
                    out.append(f"GRADIENT MISMATCH models {x['id']}: {x['check']}")
            continue
        if bench in ("sparse", "gat"):
            if "error" in r:
                out.append(f"ERROR {bench}: {r['error']}")
            for x in r.get("rows", []):
                chk = x.get("check")
                if chk not in (None, "ok", "ref"):
                    out.append(f"{bench} {x.get('dtype', '')} {x.get('system')}: {chk}")
            continue
        if bench == "soak":
            # errors and wrong gradients always; growth only in a full-length run (--quick's
            # runs are too short to judge, and timings/memory are never gated there)
            for name, x in r.get("scenarios", {}).items():
                if "error" in x:
                    out.append(f"ERROR soak {name}: {x['error']}")
                    continue
                err = x.get("info", {}).get("grad_max_err")
                if err is not None and not err < 1e-9:
                    out.append(f"GRADIENT MISMATCH soak {name}: max |diff| {err:.3g}")
                if not QUICK and not x["result"]["flat"]:
                    out.append(f"soak {name}: RSS grew {x['result']['growth_pct']:+.2f} % "
                               f"after warm-up (> {soak.FLAT_PCT:g} %)")
            continue
        if bench == "scaling":
            out += [f"ERROR scaling {e}" for e in r["errors"]]
            for k, d in r["grad_check"].items():
                out += [f"GRADIENT MISMATCH scaling {k}/{s}: {m}" for s, m in d.items()
                        if m != "ok"]
            continue
        if bench == "hvp":
            if r["floor_check"] != "ok":
                out.append(f"hvp floor: {r['floor_check']}")
            parts = [(f"hvp {k}", v) for k, v in r["configs"].items()]
        elif bench in ("mlp", "mlp_hips"):
            parts = [(f"{bench} {dt}", v) for dt, v in r.get("dtypes", {}).items()]
        else:
            parts = [(bench, r)]
        for name, p in parts:
            for lname, d in p.get("libs", {}).items():
                if isinstance(d, dict) and "error" in d:
                    out.append(f"ERROR {name}/{lname}: {d['error']}")
            for lname, s in p.get("grad_check", {}).items():
                if s not in ("ok", "ref"):
                    out.append(f"GRADIENT MISMATCH {name}/{lname}: {s}")
    return out


# ---------------------------------------------------------------------------------------------
# profiling (--profile WORKLOAD): cProfile of cgrad's part of one workload

def profile(name, top=30):
    import cProfile
    import pstats
    cg = load_cgrad()
    if name == "mlp":
        mlp_mod, why = load_bench_module("mlp")
        if mlp_mod is None:
            print(why)
            return
        mlp_mod.profile_cgrad("float32", QUICK, top=top)
        return
    if name == "hvp":
        cfg = (hvp.QUICK_CONFIGS if QUICK else hvp.CONFIGS)["small"]
        X, y, params, vs = hvp.make_problem(cfg["batch"], cfg["sizes"])
        run = hvp.make_autograd(cg, X, y, params, vs)
        reps = 200
    elif name in INPROC:
        spec = INPROC[name]
        run = spec["cgrad"](cg, spec["n_quick"] if QUICK else spec["n"])
        reps = 20
    else:
        choices = ", ".join(list(INPROC) + ["hvp", "mlp"])
        print(f"--profile: no profile for {name} (choose from {choices})")
        return
    run()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(reps):
        run()
    pr.disable()
    print(f"cProfile of cgrad in {name}, {reps} runs, by internal time:")
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


# ---------------------------------------------------------------------------------------------
# output files

def _la(v):
    return "?" if not v else ", ".join(f"{x:.2f}" for x in v)


def render_markdown(info, summary, texts, plots, argv, total_s, skipped):
    la0 = _la(info.get("loadavg_start"))
    la1 = _la(info.get("loadavg_end"))
    lines = ["# cgrad benchmark results", "",
             f"`python bench/run.py {' '.join(argv)}`".replace(" `", "`") + f", {info['date']}, "
             f"{total_s / 60:.1f} minutes.", "",
             "| machine | |", "|---|---|",
             f"| CPU | {info.get('cpu', '?')}, {info['cpus']} logical cores, "
             f"{info.get('mem_gb', '?')} GB |",
             f"| load average (1, 5, 15 min) | start {la0}, end {la1} |",
             f"| platform | {info['platform']} |",
             f"| Python | {info['python']} ({info['implementation']}) |",
             f"| versions | cgrad {info['cgrad']} (git {info.get('git', '?')}), numpy "
             f"{info['numpy']}, scipy {info.get('scipy')}, torch {info['torch'] or 'absent'}, "
             f"HIPS autograd {info['hips_autograd'] or 'absent'} |",
             "| threads | OPENBLAS/OMP/MKL = 1, torch.set_num_threads(1) |", "",
             "## Summary", "",
             "Medians over interleaved repetitions; `clock`: process CPU time (cpu) or wall "
             "time; ratios are cgrad's median over the other system's, measured in this run "
             "(below 1: cgrad is faster); `vs target`: measured / target (above 1: over the "
             "target); "
             "`gradients`: every system's gradients against the floor's, checked before "
             "timing.", "", render_summary(summary, md=True), ""]
    w = worst_row(summary)
    if w:
        lines += [f"Worst against its target: **{w['label']}**: {w['vs_target']:.2f} x the "
                  f"target ({w['target']}).", ""]
    for s in skipped:
        lines.append(f"- skipped: {s}")
    if skipped:
        lines.append("")
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots]
        lines.append("")
    lines += ["## Details", ""]
    for title, txt in texts:
        lines += [f"### {title}", "", "```text", txt.rstrip(), "```", ""]
    return "\n".join(lines)


README_START = "<!-- results:start (written by python bench/run.py --readme) -->"
README_END = "<!-- results:end -->"


def update_readme(info, summary, plots, outdir):
    """Replace the block between the markers in bench/README.md."""
    path = os.path.join(HERE, "README.md")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return False
    if README_START not in text or README_END not in text:
        return False
    rel = os.path.relpath(outdir, HERE)
    block = [README_START, "",
             f"Measured {info['date']} on {info.get('cpu', '?')} ({info['cpus']} logical cores, "
             f"{info.get('mem_gb', '?')} GB), {info['platform']}; Python {info['python']}, "
             f"numpy {info['numpy']}, scipy {info.get('scipy')}, torch {info['torch']}, HIPS "
             f"autograd {info['hips_autograd']}, cgrad git {info.get('git', '?')}. Load "
             f"average (1, 5, 15 min) at start {_la(info.get('loadavg_start'))}, at end "
             f"{_la(info.get('loadavg_end'))}.",
             "", render_summary(summary, md=True), ""]
    block += [f"![{os.path.basename(p)}]({rel}/{os.path.basename(p)})" for p in plots]
    block += ["", f"Full output: [{rel}/latest.md]({rel}/latest.md).", "", README_END]
    a, rest = text.split(README_START, 1)
    _, b = rest.split(README_END, 1)
    with open(path, "w") as f:
        f.write(a + "\n".join(block) + b)
    return True


# ---------------------------------------------------------------------------------------------
# main

ALL = ["elementwise", "chain", "bigchain", "fanin", "mlp", "sparse", "gat", "hvp", "models",
       "scaling", "soak"]
SOAK_SCALE = 0.1      # bench/run.py's soak: 10x shorter than python bench/soak.py,
SOAK_SAMPLES = 100    # with half its samples (each a full gc.collect())


def main(argv=None):
    global QUICK
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a smoke test, not a measurement: tiny sizes, one repetition, no "
                        "warm-up, no gates (CI runs it)")
    p.add_argument("--out", metavar="DIR",
                   help="write latest.md/.json and plots there (default for a full run: "
                        "bench/results; --quick writes nothing unless given)")
    p.add_argument("--no-write", action="store_true", help="write no files")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--readme", action="store_true",
                   help="also refresh the results block of bench/README.md")
    p.add_argument("--json", metavar="PATH", help="also write the results JSON here")
    p.add_argument("--repeats", type=int, default=9, help="repetitions of workloads 1, 2, 4")
    p.add_argument("--bigchain-repeats", type=int, default=3,
                   help="fresh subprocesses per system for the 1,000,000-node chain")
    p.add_argument("--bigchain-budget", type=float, default=60.0, metavar="SECONDS",
                   help="wall-time budget per system for the bigchain subprocesses; a system "
                        "stops repeating (keeping >= 1 run) when its next run would exceed it")
    p.add_argument("--scaling-budget", type=float, default=120.0, metavar="SECONDS",
                   help="scaling: skip a size whose one run is predicted to take longer")
    p.add_argument("--chain-kind", choices=("myfn", "mul"), default="myfn",
                   help="bigchain node: the MyFunction custom Function, or y = y * 1.0001")
    p.add_argument("--gc-off", action="store_true",
                   help="disable the garbage collector inside the timed region")
    p.add_argument("--no-heap-settle", action="store_true",
                   help="do not settle the heap before each timed run (Note [Heap settling] in "
                        "bench/common.py)")
    p.add_argument("--no-torch", action="store_true", help="skip torch even if importable")
    p.add_argument("--no-hips", action="store_true", help="skip HIPS autograd")
    p.add_argument("--only", nargs="+", choices=ALL + ["shared_loop", "shared_roots"],
                   help="run only these workloads")
    p.add_argument("--profile", metavar="WORKLOAD",
                   help="after the run, cProfile cgrad in this workload (1, 2, 4, 8 or mlp)")
    p.add_argument("--from-json", metavar="PATH",
                   help="measure nothing: redo the report (tables, latest.md, plots, --readme) "
                        "from a saved latest.json")
    p.add_argument("--_child-bigchain", dest="child", help=argparse.SUPPRESS)
    p.add_argument("--_n", dest="child_n", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    common.HEAP_SETTLE = not a.no_heap_settle

    if a.child:
        child_bigchain(a.child, a.child_n, a.chain_kind, a.gc_off)
        return 0

    if a.from_json:
        with open(a.from_json) as f:
            data = json.load(f)
        QUICK = data.get("quick", False)
        outdir = None if a.no_write else (a.out or os.path.dirname(os.path.abspath(a.from_json)))
        report(data, outdir, plots=not a.no_plots, readme=a.readme, json_path=a.json)
        return 0

    QUICK = a.quick
    repeats = 1 if a.quick else a.repeats
    big_repeats = 1 if a.quick else a.bigchain_repeats
    warmup = 0 if a.quick else 1
    selected = set(a.only or ALL)
    if "fanin" in selected:
        selected |= {"shared_loop", "shared_roots"}

    torch_mod = None if a.no_torch else load_torch()
    hips_mod = None if a.no_hips else load_hips()
    libs = {}
    try:
        libs["cgrad"] = load_cgrad()
    except Exception as e:
        print(f"cgrad is not importable: {err_text(e)}", file=sys.stderr)
        traceback.print_exc()
        return 2
    libs["numpy"] = np
    if torch_mod is not None:
        libs["torch"] = torch_mod
    if hips_mod is not None:
        libs["hips"] = hips_mod
    sysnames = list(libs)
    skipped = []
    if torch_mod is None:
        skipped.append("torch: " + ("--no-torch" if a.no_torch else "not importable"))
    if hips_mod is None:
        skipped.append("HIPS autograd: " + ("--no-hips" if a.no_hips else
                                            "not importable (pip install autograd)"))

    info = machine_info(torch_mod, hips_mod)
    print("cgrad benchmarks" + (" --quick: a smoke test, not a measurement (tiny sizes, 1 "
                                "repetition, no warm-up); its numbers say nothing about "
                                "speed" if a.quick else ""))
    print(f"python {info['python']} ({info['implementation']}), numpy {info['numpy']}, "
          f"scipy {info['scipy']}, torch {info['torch'] or 'absent/skipped'}, HIPS autograd "
          f"{info['hips_autograd'] or 'absent/skipped'}, cgrad {info['cgrad']} "
          f"(git {info.get('git', '?')})")
    print(f"{info['platform']}; cpu: {info.get('cpu', '?')} x{info['cpus']}, "
          f"{info.get('mem_gb', '?')} GB; loadavg at start: {_la(info['loadavg_start'])}")
    print("threads: OPENBLAS/OMP/MKL=1" + (f", torch.get_num_threads()={info['torch_threads']}"
                                            if torch_mod is not None else "") + "; float32 "
          "unless stated")
    print(f"timing: {repeats} repetition(s) + {warmup} warm-up, interleaved across systems; "
          f"gc.collect(){'' if a.no_heap_settle else ' + heap settling'} before each; "
          f"gc {'DISABLED' if a.gc_off else 'enabled'} while timing; "
          "graph teardown not timed; values: median (min)\n", flush=True)

    log = sys.stderr
    t_start = perf_counter()
    started_big = started_scaling = started_soak = None
    sub_systems = ["cgrad", "numpy"] + [s for s in ("torch", "hips") if s in libs]
    if a.quick:
        # --quick is a smoke test, not a measurement: the subprocess workloads run in the
        # background while the in-process ones run, to keep the run short.
        if "bigchain" in selected:
            started_big = {ln: spawn_bigchain(ln, bigchain_n(), a.chain_kind, a.gc_off)
                           for ln in sub_systems}
        if "scaling" in selected:
            started_scaling = scaling.start(True, sub_systems)
        if "soak" in selected:
            started_soak = soak.start(quick=True, use_torch=torch_mod is not None)

    results = {}

    def timed(name, fn):
        t_b = perf_counter()
        try:
            results[name] = fn()
        except Exception as e:
            traceback.print_exc()
            results[name] = {"error": err_text(e), "libs": {}}
        if isinstance(results[name], dict):
            results[name]["wall_s"] = perf_counter() - t_b
        print(f"  [{name}: {perf_counter() - t_b:.1f} s]", file=log, flush=True)

    for name in ("elementwise", "chain", "shared_loop", "shared_roots"):
        if name in selected:
            timed(name, lambda name=name: time_inproc(name, libs, repeats, warmup, a.gc_off))
    if "hvp" in selected:
        timed("hvp", lambda: hvp.run(quick=a.quick, libs=libs, log=log))
    if "bigchain" in selected:
        timed("bigchain", lambda: time_bigchain(
            sub_systems, big_repeats, a.chain_kind, timeout=120 if a.quick else 900,
            budget=a.bigchain_budget, started=started_big, gc_off=a.gc_off))
    if "scaling" in selected:
        if started_scaling:
            timed("scaling", lambda: scaling.finish(started_scaling))
        else:
            timed("scaling", lambda: scaling.run(systems=sub_systems, budget=a.scaling_budget,
                                                 log=log))
    if "soak" in selected:
        if started_soak:
            timed("soak", lambda: soak.finish(started_soak, log=log))
        else:
            timed("soak", lambda: soak.run(scale=SOAK_SCALE, samples=SOAK_SAMPLES,
                                           use_torch=torch_mod is not None, log=log))
    if "sparse" in selected:
        timed("sparse", lambda: run_module_workload("sparse", a.quick, log,
                                                    use_torch=torch_mod is not None))
    if "gat" in selected:
        # --quick: cgrad only (pyGAT's epoch takes ~1 s; the smoke test stays short)
        timed("gat", lambda: run_module_workload("gat", a.quick, log,
                                                 use_torch=torch_mod is not None
                                                 and not a.quick))
    if "models" in selected:
        # --quick: cgrad alone, tiny sizes (a smoke test that needs no torch)
        timed("models", lambda: run_module_workload("models", a.quick, log,
                                                    use_torch=torch_mod is not None
                                                    and not a.quick))
    mlp_mod = None
    if "mlp" in selected:
        # last: bench/mlp.py sets glibc's mmap/trim thresholds for the rest of the process
        mlp_mod, why = load_bench_module("mlp")
        if mlp_mod is None:
            results["mlp"] = {"skipped": why}
        else:
            timed("mlp", lambda: mlp_mod.run(quick=a.quick, repeats=1 if a.quick else None,
                                             use_torch=torch_mod is not None, log=log))
            if hips_mod is not None:
                import mlp_hips
                timed("mlp_hips", lambda: mlp_hips.run(
                    mlp_mod, {"cgrad": mlp_mod.load_cgrad(), "numpy": np}, hips_mod,
                    quick=a.quick, log=log))
    total = perf_counter() - t_start
    info["loadavg_end"] = loadavg()

    data = {"machine": info, "argv": argv, "quick": a.quick, "repeats": repeats,
            "bigchain_repeats": big_repeats, "bigchain_budget": a.bigchain_budget,
            "chain_kind": a.chain_kind, "gc_enabled_while_timing": not a.gc_off,
            "heap_settled": not a.no_heap_settle,
            "total_s": total, "systems": sysnames, "skipped": skipped, "results": results}
    outdir = a.out or (None if a.quick else RESULTS_DIR)
    if a.no_write:
        outdir = None
    bad = report(data, outdir, plots=not a.no_plots, readme=a.readme, json_path=a.json)
    if a.profile:
        profile(a.profile)
    # Timing targets are reported, never gated; errors and wrong gradients are failures.
    return 1 if bad else 0


def detail_texts(data):
    """[(title, text)] of every workload's detailed table; adds skip notes to data."""
    results = data["results"]
    skipped = data["skipped"]
    texts = []
    micro = render_micro(results, data.get("systems", ["cgrad", "numpy", "torch", "hips"]))
    if micro:
        texts.append(("Workloads 1-4", micro + "\n" + notes_micro(results, data)))
    if "mlp" in results and "dtypes" in results["mlp"]:
        mlp_mod, why = load_bench_module("mlp")
        texts.append(("5 MLP training step (bench/mlp.py)",
                      mlp_mod.render(results["mlp"]) if mlp_mod else why))
    if "mlp_hips" in results and "dtypes" in results["mlp_hips"]:
        import mlp_hips
        texts.append(("5 MLP training step, HIPS autograd (bench/mlp_hips.py)",
                      mlp_hips.render(results["mlp_hips"])))
    for name, title in (("sparse", "6 spmm and SDDMM (bench/sparse.py)"),
                        ("gat", "7 GAT epoch (bench/gat.py)"),
                        ("models", "9 Training steps of real models (bench/models.py)")):
        r = results.get(name)
        if r is None:
            continue
        if "skipped" in r:
            note = f"workload {title}: {r['skipped']}"
            if note not in skipped:
                skipped.append(note)
        elif "error" in r:
            texts.append((title, f"ERROR: {r['error']}"))
        else:
            texts.append((title, r.get("text") or json.dumps(r["rows"], indent=1)[:4000]))
    if "mlp" in results and "skipped" in results["mlp"]:
        note = f"workload 5 MLP: {results['mlp']['skipped']}"
        if note not in skipped:
            skipped.append(note)
    if "hvp" in results and "configs" in results["hvp"]:
        texts.append(("8 Hessian-vector product (bench/hvp.py)", hvp.render(results["hvp"])))
    if "scaling" in results and "results" in results["scaling"]:
        texts.append(("S Scaling (bench/scaling.py)", scaling.render(results["scaling"])))
    if "soak" in results and "scenarios" in results["soak"]:
        texts.append(("M Memory soak (bench/soak.py)", soak.render(results["soak"])))
    return texts


def report(data, outdir, plots=True, readme=False, json_path=None):
    """Print the tables and the summary; write latest.md/.json and the plots to outdir.
    Returns the list of problems (errors, gradient mismatches)."""
    results, info = data["results"], data["machine"]
    texts = detail_texts(data)
    summary = data["summary"] = build_summary(results)
    bad = data["problems"] = problems(results)
    for title, txt in texts:
        print(f"== {title}\n{txt}\n")
    for s in data["skipped"]:
        print(f"skipped: {s}")
    print("== Summary (Markdown; clock cpu = process CPU time medians)"
          + ("; --quick: a smoke test, not a measurement" if data.get("quick") else ""))
    print(render_summary(summary, md=True))
    w = worst_row(summary)
    if w and not data.get("quick"):     # --quick measures nothing
        print(f"\nworst against its target: {w['label']}: {w['vs_target']:.2f} x target "
              f"({w['target']})")
    for msg in bad:
        print(msg)
    print(f"total benchmark time: {data['total_s']:.1f} s; loadavg at start "
          f"{_la(info['loadavg_start'])}, at end {_la(info['loadavg_end'])}")
    if outdir:
        os.makedirs(outdir, exist_ok=True)
        files = []
        if plots:
            import plot
            try:
                files = plot.plot_all(data, outdir)
            except Exception as e:
                traceback.print_exc()
                print(f"plots failed: {err_text(e)}")
            if not files:
                print("no plots (matplotlib missing or nothing to plot)")
        with open(os.path.join(outdir, "latest.json"), "w") as f:
            json.dump(data, f, indent=1, default=str)
        with open(os.path.join(outdir, "latest.md"), "w") as f:
            f.write(render_markdown(info, summary, texts, files, data["argv"], data["total_s"],
                                    data["skipped"]))
        print(f"wrote {outdir}/latest.md, latest.json"
              + "".join(f", {os.path.basename(p)}" for p in files))
        if readme:
            print("README updated" if update_readme(info, summary, files, outdir) else
                  "README: no results markers in bench/README.md")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(data, f, indent=1, default=str)
        print(f"wrote {json_path}")
    return bad


def notes_micro(results, data):
    out = []
    if "bigchain" in results and "libs" in results["bigchain"]:
        runs = ", ".join(f"{k} {v.get('runs', 0)}"
                         for k, v in results["bigchain"]["libs"].items())
        if not data["quick"]:
            runs += (f" (max {data['bigchain_repeats']}, budget "
                     f"{data.get('bigchain_budget', 0):g} s each)")
        node = ("MyFunction.apply (saves its input)"
                if data.get("chain_kind", "myfn") == "myfn" else "y = y * 1.0001")
        out.append(f"bench 3 node: {node}; bytes/node = RSS growth while building / nodes; "
                   f"each figure from a fresh subprocess; runs per system: {runs}")
    for key in ("shared_loop", "shared_roots"):
        if key in results and "n" in results[key]:
            n4 = results[key]["n"]
            out.append(
                f"bench 4a: outs = [x*1.5 for _ in range({n4})]; s = outs[0]; for o in "
                f"outs[1:]: s = s + o; s.sum().backward()  ({n4} Mul + {n4 - 1} Add nodes)"
                if key == "shared_loop" else
                f"bench 4b: outs = [x*1.5 for _ in range({n4})]; autograd.backward(outs, "
                f"[ones(64)]*{n4}) ({n4} roots, only the uses; HIPS: builtins.list + vjp)")
    out.append("'vs torch' = the absolute target rescaled by torch measured here "
               "(target/torch_ref as a max cgrad/torch ratio).")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
