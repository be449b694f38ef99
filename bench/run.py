#!/usr/bin/env python
"""cgrad benchmarks against PyTorch and raw NumPy: the issue-2 performance targets.

    python bench/run.py                # full run (~2-4 minutes), prints a table
    python bench/run.py --quick        # tiny sizes, one repetition: CI smoke test, no gates
    python bench/run.py --json out.json
    python bench/run.py --no-torch     # skip the torch column even if torch is importable

What is measured (every library runs the *same* code; cgrad and torch share one
implementation that only differs in the module object, NumPy gets the hand-written
equivalent arithmetic):

1. ``chain``:  the classic custom Function (forward ``save_for_backward(input); return
   input * 2``, backward ``grad_output * 2``) applied 2000 times to a (1,) leaf that requires
   grad, then ``y.sum().backward()``.  Reported per node.  (The values overflow to inf after
   ~128 doublings in float32, exactly as in torch; NumPy's overflow warning is silenced.)
2. ``elementwise``: 2000 ops on a (8,) leaf alternating ``y = y * 1.0001`` and
   ``y = y + 0.5``, then ``y.sum().backward()``.  Reported per op.
3. ``bigchain``: a 1,000,000-node MyFunction chain (``--chain-kind mul`` for ``y = y * 1.0001``)
   built and backpropagated in a fresh subprocess per library and repetition; time per node
   and RSS growth (``/proc/self/statm``) per node while building.
4. ``shared``: one (64,) leaf used by 10,000 ops ``x * 1.5``; the engine must sum 10,000
   gradients into the leaf's one buffer.  Two ways of closing the graph are measured:
   (a) ``s = outs[0]; for o in outs[1:]: s = s + o; s.sum().backward()`` (plain user code;
   it adds 9,999 Add nodes, whose backward is a pass-through), and (b)
   ``autograd.backward(outs, [ones]*10000)`` (10,000 roots, no Add nodes: only the uses).
5. ``mlp`` (issue 3, bench/mlp.py): one training step of a 784-1024-1024-10 tanh MLP,
   batch 512, cross-entropy (class indices, mean), plain SGD; cgrad vs a hand-written NumPy
   forward+backward (the floor) vs torch, float32 and float64, ms per step (wall and CPU
   time), peak memory, gradients checked against NumPy first.  Its own table follows the
   main one; ``--quick`` runs a 784-256-256-10 network with batch 128.  It runs last and sets
   glibc's mmap/trim thresholds for the rest of the process (see bench/mlp.py, --malloc).

Method: time.perf_counter; one untimed warm-up run per library; then ``--repeats``
repetitions (default 7) interleaved across libraries (cgrad, torch, numpy, cgrad, ...) so
machine drift hits all columns alike; ``gc.collect()`` before every repetition; the garbage
collector stays *enabled* during timing (the default, what users see; ``--gc-off`` disables
it inside the timed region instead).  Dropping the graph after a repetition is not timed
(bigchain reports it separately as "free").  Medians are reported with the min in
parentheses; ratios are median/median from this same run.  float32 (the default dtype of
both cgrad and torch) everywhere.  OPENBLAS/OMP/MKL threads = 1 and torch.set_num_threads(1).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402

perf_counter = time.perf_counter
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---------------------------------------------------------------------------------------------
# library loading

def load_torch():
    try:
        import torch
    except Exception:  # ImportError, or a broken install
        return None
    torch.set_num_threads(1)
    return torch


def load_cgrad():
    try:
        import cgrad
    except ImportError:
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        import cgrad
    return cgrad


def load(name):
    if name == "cgrad":
        return load_cgrad()
    if name == "torch":
        t = load_torch()
        if t is None:
            raise ImportError("torch is not importable")
        return t
    if name == "numpy":
        return np
    raise ValueError(name)


def to_numpy(t):
    """A leaf's .grad as an ndarray (cgrad or torch)."""
    if t is None:
        return None
    if isinstance(t, np.ndarray):
        return t
    return np.array(t.detach().numpy(), copy=True)


def make_my_function(lib):
    """The classic custom Function, defined against `lib.autograd.Function`."""
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
    return MyFunction


# ---------------------------------------------------------------------------------------------
# benchmark bodies.  Each factory returns run() -> (phases: dict[str, seconds], keepalive, grad)
# keepalive is dropped after the clock stops, so graph teardown is not timed.

def chain_autograd(lib, n):
    MyFunction = make_my_function(lib)
    apply = MyFunction.apply

    def run():
        x = lib.ones(1, requires_grad=True)
        t0 = perf_counter()
        y = x
        for _ in range(n):
            y = apply(y)
        t1 = perf_counter()
        y.sum().backward()
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (x, y), x.grad
    return run


def chain_numpy(_np, n):
    def run():
        x = np.ones(1, dtype=np.float32)
        t0 = perf_counter()
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
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (saved, y), g
    return run


def elementwise_autograd(lib, n):
    half = n // 2

    def run():
        x = lib.ones(8, requires_grad=True)
        t0 = perf_counter()
        y = x
        for _ in range(half):
            y = y * 1.0001
            y = y + 0.5
        t1 = perf_counter()
        y.sum().backward()
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (x, y), x.grad
    return run


def elementwise_numpy(_np, n):
    half = n // 2

    def run():
        x = np.ones(8, dtype=np.float32)
        t0 = perf_counter()
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
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (y,), g
    return run


def shared_loop_autograd(lib, n):
    def run():
        x = lib.ones(64, requires_grad=True)
        t0 = perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        s = outs[0]
        for o in outs[1:]:
            s = s + o
        t1 = perf_counter()
        s.sum().backward()
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (x, outs, s), x.grad
    return run


def shared_loop_numpy(_np, n):
    def run():
        x = np.ones(64, dtype=np.float32)
        t0 = perf_counter()
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
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (outs, s), gx
    return run


def shared_roots_autograd(lib, n):
    def run():
        x = lib.ones(64, requires_grad=True)
        g = lib.ones(64)
        grads = [g] * n
        t0 = perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        t1 = perf_counter()
        lib.autograd.backward(outs, grads)
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (x, outs), x.grad
    return run


def shared_roots_numpy(_np, n):
    def run():
        x = np.ones(64, dtype=np.float32)
        g = np.ones(64, dtype=np.float32)
        t0 = perf_counter()
        outs = [x * 1.5 for _ in range(n)]
        t1 = perf_counter()
        gx = np.zeros_like(x)
        for _ in range(n):
            gx += g * 1.5
        t2 = perf_counter()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "total": t2 - t0}, (outs,), gx
    return run


INPROC = {
    # name: (autograd factory, numpy factory, full n, quick n, unit)
    "chain": (chain_autograd, chain_numpy, 2000, 50, "node"),
    "elementwise": (elementwise_autograd, elementwise_numpy, 2000, 50, "op"),
    "shared_loop": (shared_loop_autograd, shared_loop_numpy, 10000, 100, "use"),
    "shared_roots": (shared_roots_autograd, shared_roots_numpy, 10000, 100, "use"),
}


def time_inproc(name, libs, repeats, warmup, gc_off):
    """Interleaved repetitions of benchmark `name` for every library in `libs`."""
    fac_ag, fac_np, n_full, n_quick, unit = INPROC[name]
    n = n_quick if QUICK else n_full
    runners, errors = {}, {}
    for lname, mod in libs.items():
        try:
            runners[lname] = (fac_np if lname == "numpy" else fac_ag)(mod, n)
        except Exception as e:
            errors[lname] = _err(e)
    samples = {k: [] for k in runners}
    grads = {}

    def one(lname):
        gc.collect()
        if gc_off:
            gc.disable()
        try:
            phases, keep, grad = runners[lname]()
        finally:
            if gc_off:
                gc.enable()
        grads[lname] = to_numpy(grad)
        del keep
        return phases

    with np.errstate(over="ignore"):
        for _ in range(warmup):
            for lname in list(runners):
                try:
                    one(lname)
                except Exception as e:
                    errors[lname] = _err(e)
                    del runners[lname], samples[lname]
        for _ in range(repeats):
            for lname in list(runners):
                try:
                    samples[lname].append(one(lname))
                except Exception as e:
                    errors[lname] = _err(e)
                    del runners[lname], samples[lname]

    out = {"n": n, "unit": unit, "libs": {}}
    for lname, ss in samples.items():
        out["libs"][lname] = summarize(ss, n)
    for lname, e in errors.items():
        out["libs"][lname] = {"error": e}
    out["grad_check"] = check_grads(grads)
    return out


def summarize(samples, n):
    """Per-unit microseconds: median and min of every phase."""
    res = {}
    for phase in samples[0]:
        us = [s[phase] / n * 1e6 for s in samples]
        res[phase] = {"median": statistics.median(us), "min": min(us), "samples": us}
    return res


def check_grads(grads):
    """Do all libraries agree on the leaf's gradient? (a correctness guard for the timings)"""
    ref_name = "numpy" if "numpy" in grads else next(iter(grads), None)
    if ref_name is None:
        return {}
    ref = grads[ref_name]
    res = {}
    for lname, g in grads.items():
        if lname == ref_name:
            continue
        if g is None:
            res[lname] = "no grad (x.grad is None)"
        elif g.shape != ref.shape:
            res[lname] = f"shape {g.shape} != {ref_name} {ref.shape}"
        elif not np.allclose(g, ref, rtol=1e-3, atol=0, equal_nan=True):
            res[lname] = f"values differ from {ref_name}: {g.ravel()[:3]} vs {ref.ravel()[:3]}"
        else:
            res[lname] = "ok"
    return res


def _err(e):
    return f"{type(e).__name__}: {e}".splitlines()[0][:200]


# ---------------------------------------------------------------------------------------------
# benchmark 3: the 1,000,000-node chain, one fresh subprocess per library and repetition

def rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best we have (KiB on Linux, bytes on macOS)
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r if sys.platform == "darwin" else r * 1024


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
            return (saved, y)

        def backward(state):
            saved, y = state
            y.sum()
            g = np.ones_like(y)
            if kind == "myfn":
                for i in range(len(saved) - 1, -1, -1):
                    inp = saved[i]  # noqa: F841
                    g = g * 2
            else:
                for _ in range(n):
                    g = g * 1.0001
            return g
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

    st = build(1000)  # warm-up: first-call costs, lazily built code paths
    backward(st)
    del st
    gc.collect()
    rss0 = rss_bytes()
    if gc_off:
        gc.disable()
    t0 = perf_counter()
    st = build(n)
    t1 = perf_counter()
    rss1 = rss_bytes()
    g = backward(st)
    t2 = perf_counter()
    rss2 = rss_bytes()
    del st
    t3 = perf_counter()
    gc.enable()
    gc.collect()
    rss3 = rss_bytes()
    ok = g is not None
    print(json.dumps({
        "lib": lname, "n": n, "kind": kind,
        "build_s": t1 - t0, "backward_s": t2 - t1, "free_s": t3 - t2,
        "rss_before": rss0, "rss_built": rss1, "rss_after_backward": rss2, "rss_freed": rss3,
        "grad_ok": bool(ok),
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
        return None, f"bad child output ({_err(e)}): {out[-200:]!r}"


def time_bigchain(libnames, repeats, kind, timeout, budget, started=None, gc_off=False):
    """Sequential fresh subprocesses, interleaved across libraries.  A library stops early
    (at least one sample) when its next run would exceed `budget` seconds in total.
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
            "total": [(s["build_s"] + s["backward_s"]) / n * 1e6 for s in ss],
            "fwd": [s["build_s"] / n * 1e6 for s in ss],
            "bwd": [s["backward_s"] / n * 1e6 for s in ss],
            "free": [s["free_s"] / n * 1e6 for s in ss],
            "bytes": [(s["rss_built"] - s["rss_before"]) / n for s in ss],
            "bytes_left": [(s["rss_freed"] - s["rss_before"]) / n for s in ss],
        }
        out["libs"][lname] = {k: {"median": statistics.median(v), "min": min(v), "samples": v}
                              for k, v in ph.items()}
        out["libs"][lname]["runs"] = len(ss)
        out["libs"][lname]["raw"] = ss
    for lname, e in errors.items():
        out["libs"].setdefault(lname, {})["error"] = e
    return out


# ---------------------------------------------------------------------------------------------
# report

# (bench, phase, metric label, target kind, target value, torch ref, numpy ref)
#   target kinds: "abs" = cgrad <= value (us); "speedup" = torch/cgrad >= value;
#                 "bytes" = cgrad bytes/node <= torch's; None = information only
ROWS = [
    ("chain", "total", "us/node apply+bwd", "abs", 2.0, 12.4, 1.3),
    ("chain", "fwd", "  us/node apply", None, None, None, None),
    ("chain", "bwd", "  us/node bwd", None, None, None, None),
    ("elementwise", "total", "us/op fwd+bwd", "abs", 1.8, 4.6, 0.9),
    ("elementwise", "fwd", "  us/op fwd", None, None, 2.0, None),
    ("elementwise", "bwd", "  us/op bwd", None, None, 2.5, None),
    ("bigchain", "total", "us/node build+bwd", "speedup", 3.0, 9.0, None),
    ("bigchain", "bytes", "bytes/node RSS build", "bytes", None, None, None),
    ("bigchain", "fwd", "  us/node build", None, None, None, None),
    ("bigchain", "bwd", "  us/node bwd", None, None, None, None),
    ("bigchain", "free", "  us/node free (del y)", None, None, None, None),
    ("bigchain", "bytes_left", "  bytes/node left after free", None, None, None, None),
    ("shared_loop", "total", "us/use fwd+bwd", "abs", 2.5, 8.8, None),
    ("shared_loop", "fwd", "  us/use fwd", None, None, None, None),
    ("shared_loop", "bwd", "  us/use bwd", None, None, None, None),
    ("shared_roots", "total", "us/use fwd+bwd", "abs", 2.5, 8.8, None),
    ("shared_roots", "fwd", "  us/use fwd", None, None, None, None),
    ("shared_roots", "bwd", "  us/use bwd", None, None, None, None),
]

TITLES = {
    "chain": "1 MyFunction chain, (1,) x{n}",
    "elementwise": "2 y*1.0001 / y+0.5, (8,) x{n}",
    "bigchain": "3 {kind} chain, (1,) x{n}, subprocess",
    "shared_loop": "4a (64,) leaf x{n} uses, s=s+o",
    "shared_roots": "4b (64,) leaf x{n} uses, backward(outs)",
    "mlp": "5 MLP training step (bench/mlp.py)",
}


def load_mlp_bench():
    """bench/mlp.py as a module (this directory need not be on sys.path)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("cgrad_bench_mlp", os.path.join(HERE, "mlp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fmt_val(d, phase):
    if d is None or "error" in d and phase not in d:
        return "ERROR" if d else "-"
    if phase not in d:
        return "-"
    m, lo = d[phase]["median"], d[phase]["min"]
    if phase.startswith("bytes"):
        return f"{m:7.0f} ({lo:.0f})"
    return f"{m:7.3f} ({lo:.3f})"


def med(d, phase):
    if d is None or phase not in d:
        return None
    return d[phase]["median"]


def verdict(kind, value, ref_torch, c, t):
    """Returns (target text, meets text)."""
    if kind is None or c is None:
        return "", ""
    if kind == "abs":
        txt = f"<= {value:g} us"
        abs_ok = c <= value
        s = "yes" if abs_ok else "NO"
        if t is not None and ref_torch:
            # the same target expressed against torch measured on this machine
            rel = value / ref_torch
            s += f" | vs torch {'yes' if c / t <= rel else 'NO'} (<= {rel:.2f}x)"
        return txt, s
    if kind == "speedup":
        txt = f">= {value:g}x faster than torch"
        if t is None:
            return txt, "n/a (no torch)"
        sp = t / c
        return txt, f"{'yes' if sp >= value else 'NO'} ({sp:.2f}x)"
    if kind == "bytes":
        txt = "<= torch bytes/node"
        if t is None:
            return txt, "n/a (no torch)"
        return txt, "yes" if c <= t else "NO"
    return "", ""


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def render(results, have_torch):
    cols = ["benchmark", "metric", "cgrad med (min)"]
    if have_torch:
        cols += ["torch med (min)"]
    cols += ["numpy med (min)"]
    if have_torch:
        cols += ["cgrad/torch"]
    cols += ["cgrad/numpy", "target", "issue-2 ref", "meets target"]
    rows = []
    last_bench = None
    for bench, phase, label, tkind, tval, rtorch, rnumpy in ROWS:
        r = results.get(bench)
        if r is None:
            continue
        libs = r["libs"]
        c, t, npy = libs.get("cgrad"), libs.get("torch"), libs.get("numpy")
        title = ""
        if bench != last_bench:
            title = TITLES[bench].format(n=r["n"], kind=r.get("kind", ""))
            last_bench = bench
        row = [title, label, fmt_val(c, phase)]
        if have_torch:
            row.append(fmt_val(t, phase))
        row.append(fmt_val(npy, phase))
        if have_torch:
            row.append(ratio(med(c, phase), med(t, phase)))
        row.append(ratio(med(c, phase), med(npy, phase)))
        tgt, meets = verdict(tkind, tval, rtorch, med(c, phase), med(t, phase))
        if QUICK and meets:
            meets = "(quick: not gated) " + meets
        refs = []
        if rtorch is not None:
            refs.append(f"torch ~{rtorch:g}")
        if rnumpy is not None:
            refs.append(f"numpy ~{rnumpy:g}")
        if bench == "bigchain" and phase == "total":
            refs = ["torch ~8-10"]
        row += [tgt, ", ".join(refs), meets]
        rows.append(row)
    widths = [max(len(cols[i]), *(len(r[i]) for r in rows)) for i in range(len(cols))]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths))
    out = [line.rstrip(), "-" * len(line.rstrip())]
    for r in rows:
        out.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def notes(results):
    out = []
    for bench, r in results.items():
        for lname, d in r["libs"].items():
            if "error" in d:
                out.append(f"ERROR {bench}/{lname}: {d['error']}")
        for lname, s in r.get("grad_check", {}).items():
            if s != "ok":
                out.append(f"GRADIENT MISMATCH {bench}/{lname}: {s}")
    return out


def machine_info(have_torch, torch_mod):
    info = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "torch": torch_mod.__version__ if have_torch else None,
        "cpus": os.cpu_count(),
        "threads": {v: os.environ.get(v) for v in
                    ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
    }
    try:
        import cgrad
        info["cgrad"] = getattr(cgrad, "__version__", "?")
    except Exception as e:  # reported as an error row anyway
        info["cgrad"] = f"unimportable ({_err(e)})"
    if have_torch:
        info["torch_threads"] = torch_mod.get_num_threads()
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    info["cpu"] = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu"] = platform.processor()
    try:
        info["loadavg_start"] = os.getloadavg()
    except OSError:
        pass
    return info


QUICK = False


def main(argv=None):
    global QUICK
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, one repetition, no warm-up (CI smoke test; no gates)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--repeats", type=int, default=7, help="repetitions per in-process benchmark")
    p.add_argument("--bigchain-repeats", type=int, default=3,
                   help="fresh subprocesses per library for the 1,000,000-node chain")
    p.add_argument("--bigchain-budget", type=float, default=40.0, metavar="SECONDS",
                   help="wall-time budget per library for the bigchain subprocesses; a library "
                        "stops repeating (keeping >= 1 run) when its next run would exceed it")
    p.add_argument("--chain-kind", choices=("myfn", "mul"), default="myfn",
                   help="bigchain node: the MyFunction custom Function, or y = y * 1.0001")
    p.add_argument("--gc-off", action="store_true",
                   help="disable the garbage collector inside the timed region")
    p.add_argument("--no-torch", action="store_true", help="skip torch even if importable")
    p.add_argument("--only", nargs="+", choices=list(TITLES), help="run only these benchmarks")
    p.add_argument("--_child-bigchain", dest="child", help=argparse.SUPPRESS)
    p.add_argument("--_n", dest="child_n", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.child:
        child_bigchain(a.child, a.child_n, a.chain_kind, a.gc_off)
        return 0

    QUICK = a.quick
    repeats = 1 if a.quick else a.repeats
    big_repeats = 1 if a.quick else a.bigchain_repeats
    warmup = 0 if a.quick else 1

    selected = a.only or list(TITLES)
    started = None
    if a.quick and "bigchain" in selected:
        # --quick is a smoke test, not a measurement: overlap the subprocesses (torch's import
        # alone takes seconds) with everything else to keep the run short.
        import importlib.util
        names = ["cgrad"] + ([] if a.no_torch or importlib.util.find_spec("torch") is None
                             else ["torch"]) + ["numpy"]
        started = {ln: spawn_bigchain(ln, bigchain_n(), a.chain_kind, a.gc_off) for ln in names}

    torch_mod = None if a.no_torch else load_torch()
    have_torch = torch_mod is not None
    libs = {}
    try:
        libs["cgrad"] = load_cgrad()
    except Exception as e:
        print(f"cgrad is not importable: {_err(e)}", file=sys.stderr)
        traceback.print_exc()
        return 2
    if have_torch:
        libs["torch"] = torch_mod
    libs["numpy"] = np

    info = machine_info(have_torch, torch_mod)
    print("cgrad benchmarks"
          + (" (--quick: tiny sizes, 1 repetition, no gates)" if a.quick else ""))
    print(f"python {info['python']} ({info['implementation']}), numpy {info['numpy']}, "
          f"torch {info['torch'] or 'not installed/skipped'}, cgrad {info['cgrad']}")
    print(f"{info['platform']}; cpu: {info.get('cpu', '?')} x{info['cpus']}; "
          f"loadavg at start: {', '.join(f'{x:.2f}' for x in info.get('loadavg_start', ()))}")
    print("threads: OPENBLAS/OMP/MKL=1" + (f", torch.get_num_threads()={info['torch_threads']}"
                                            if have_torch else "") + "; float32")
    print(f"timing: perf_counter, {repeats} repetition(s) + {warmup} warm-up, interleaved across "
          f"libraries; gc.collect() before each; gc {'DISABLED' if a.gc_off else 'enabled'} "
          "while timing; graph teardown not timed; values: median (min)")
    print()

    t_start = perf_counter()
    results = {}
    for bench in TITLES:
        if bench not in selected:
            continue
        t_b = perf_counter()
        if bench == "bigchain":
            results[bench] = time_bigchain(list(libs), big_repeats, a.chain_kind,
                                           timeout=60 if a.quick else 600,
                                           budget=a.bigchain_budget, started=started,
                                           gc_off=a.gc_off)
        elif bench == "mlp":
            mlp_mod = load_mlp_bench()
            results[bench] = mlp_mod.run(quick=a.quick, repeats=1 if a.quick else None,
                                         use_torch=have_torch, log=sys.stderr)
        else:
            results[bench] = time_inproc(bench, libs, repeats, warmup, a.gc_off)
        results[bench]["wall_s"] = perf_counter() - t_b
        print(f"  [{bench}: {results[bench]['wall_s']:.1f} s]", file=sys.stderr, flush=True)

    if any(b != "mlp" for b in results):
        print(render(results, have_torch))
        print()
    if "mlp" in results:
        print(mlp_mod.render(results["mlp"]))
        print()
    if "bigchain" in results:
        runs = ", ".join(f"{k} {v.get('runs', 0)}" for k, v in results["bigchain"]["libs"].items())
        if not a.quick:
            runs += f" (max {big_repeats}, budget {a.bigchain_budget:g} s each)"
        node = ("MyFunction.apply (saves its input)" if a.chain_kind == "myfn"
                else "y = y * 1.0001")
        print(f"bench 3 node: {node}; bytes/node = RSS growth while building / nodes; each "
              f"figure from a fresh subprocess; runs per library: {runs}")
    if "shared_loop" in results or "shared_roots" in results:
        n4 = results.get("shared_loop", results.get("shared_roots", {"n": 10000}))["n"]
        print(f"bench 4a: outs = [x*1.5 for _ in range({n4})]; s = outs[0]; for o in outs[1:]: "
              f"s = s + o; s.sum().backward()  ({n4} Mul + {n4 - 1} Add nodes; per use)")
        print(f"bench 4b: outs = [x*1.5 for _ in range({n4})]; autograd.backward(outs, "
              f"[ones(64)]*{n4})  ({n4} roots, only the uses; per use)")
    print("'vs torch' = the issue's absolute target rescaled by torch measured here "
          "(target/torch_ref as a max cgrad/torch ratio).")
    problems = notes(results)
    for msg in problems:
        print(msg)
    total = perf_counter() - t_start
    try:
        info["loadavg_end"] = os.getloadavg()
        la = ", ".join(f"{x:.2f}" for x in info["loadavg_end"])
    except OSError:
        la = "?"
    print(f"total benchmark time: {total:.1f} s; loadavg at end: {la}")

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "quick": a.quick, "repeats": repeats,
                       "bigchain_repeats": big_repeats, "gc_enabled_while_timing": not a.gc_off,
                       "total_s": total, "results": results}, f, indent=1)
        print(f"wrote {a.json}")
    # Timing targets are reported, never gated; errors and wrong gradients are failures.
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
