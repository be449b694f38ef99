#!/usr/bin/env python
"""Memory soak: the resident memory (RSS) of long training runs stays flat.

    python bench/soak.py                    # every scenario, full length (10-20 minutes)
    python bench/soak.py --quick            # each scenario 100x shorter: smoke test, < 1 min
    python bench/soak.py --only a c         # a subset (c = c1 and c2)
    python bench/soak.py --plot soak.png --json soak.json
    python bench/soak.py --from-json soak.json --plot soak.png    # redraw, measure nothing

cgrad frees a graph, its nodes and their saved tensors when the program drops the last
reference to them (reference counting, or the cycle collector for graphs that a ctx closes
into a cycle). A leak of even one small object per step shows up as a straight rising line
over 10^5-10^6 steps. Scenarios (each in a FRESH subprocess, so its RSS is its own):

* ``a``: 100,000 training steps of examples/mlp.py's model (Linear-ReLU-Dropout-Linear,
  64-128-10, Adam lr 1e-3, cross-entropy, batch 64) on scikit-learn's digits (random data
  of the same shape when scikit-learn is missing), the test accuracy evaluated once per
  epoch as the example does;
* ``b``: 10,000 epochs of examples/gat.py's ``Trainer`` on Cora (its model and training
  step, no early stopping: a training step with dropout and a validation forward);
* ``c1``: 1,000,000 cycles of build + backward + drop of a small graph of custom Functions
  whose ctx closes reference cycles: ``ctx.me = ctx``, ``ctx.d = {"ctx": ctx}``, a closure
  holding ctx, a saved output that the ctx also holds as an attribute (output -> node ->
  output), a Function with plain saved inputs (an untracked node, Note [Untracked graphs]),
  a tensor hook every 4th cycle, node pre/post hooks every 8th, ``retain_grad`` every 8th,
  saved-tensor pack/unpack hooks every 32nd, and every 16th cycle a
  ``backward(create_graph=True)`` whose ``x.grad`` holds a graph back to x (the cycle torch
  warns about). Both freeing paths run: reference counting and the cycle collector;
* ``c2``: 1,000,000 cycles of the same shape of graph made of built-in ops only
  (``((x * w + 0.5).tanh() * x.exp()).sum().backward()``), freed by reference counting;
* ``d``: torch (when importable) running c2's code, the same harness, for comparison.

Every ``every`` steps (200 samples a run; 50 with --quick) the child runs ``gc.collect()``
and records the RSS (/proc/self/statm; ``resource`` peak RSS elsewhere) before and after the
collection, ``sys.getallocatedblocks()`` (Python objects and small buffers: exact, no page
granularity), the number of objects the collector tracks and cgrad's untracked-node registry
size. The criterion is on the RSS after the collection: garbage the collector has not reached
yet is not a leak, but with CPython's generational thresholds a program that makes cycles can
hold that garbage for 10^5+ steps before a full collection; the RSS before the collection
(what the program runs with, at most ``every`` steps of garbage) is plotted too, and
``--no-collect`` samples without collecting at all (purely what a user's loop sees).

Reported per scenario: RSS at the end of warm-up and at the end, the growth in % and in bytes
per step, the least-squares slope over the second half of the run (bytes/step), the change in
Python blocks and tracked objects, steps per second (the time of the steps alone, sampling
excluded; wall and process CPU time) and the criterion: RSS flat within 2 % between the end
of warm-up and the end.
Warm-up is the first 10 % of the steps: allocator pools and arenas, cgrad's scalar cache
(Note [Scalar cache]) and einsum plan cache, Adam's state, NumPy's small-buffer cache and
the GAT example's cached index tensors all reach their size well within it.

Threads: OPENBLAS/OMP/MKL = 1 (set before NumPy is imported), torch.set_num_threads(1).
bench/run.py runs this as its ``soak`` workload 10x shorter than here (``--only soak``).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from common import (cpu_time, load_cgrad, load_torch, loadavg, machine_info,  # noqa: E402
                    perf_counter, rss_bytes)

# name: group, label, full steps, unit. Warm-up: WARMUP_FRACTION of the steps.
SCENARIOS = {
    "a": ("a", "MLP training, examples/mlp.py (digits)", 100_000, "step"),
    "b": ("b", "GAT training, examples/gat.py (Cora)", 10_000, "epoch"),
    "c1": ("c", "custom Functions, ctx cycles + hooks", 1_000_000, "cycle"),
    "c2": ("c", "built-in ops only", 1_000_000, "cycle"),
    "d": ("d", "torch: c2's built-in ops (comparison)", 1_000_000, "cycle"),
}
GROUPS = {"a": ["a"], "b": ["b"], "c": ["c1", "c2"], "d": ["d"]}
WARMUP_FRACTION = 0.1
SAMPLES, QUICK_SAMPLES = 200, 50
QUICK_DIVISOR = 100
FLAT_PCT = 2.0


def plan(name, scale=1.0, samples=SAMPLES):
    """(steps, warm-up steps, sample every) for a scenario run at `scale` of its length;
    warm-up and total are whole multiples of `every`."""
    steps = max(1, int(round(SCENARIOS[name][2] * scale)))
    every = max(1, steps // samples)
    steps = max(every * 10, steps // every * every)
    warm = max(every, int(round(steps * WARMUP_FRACTION / every)) * every)
    return steps, warm, every


# ---------------------------------------------------------------------------------------------
# the workloads (run in the child). make_*() -> (step(i), info() -> dict of sanity figures)

def _load_example(name, filename):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_mlp(seed=0, hidden=128, batch=64, lr=1e-3):
    """examples/mlp.py's model and training step (its MLP class and data loading)."""
    cgrad = load_cgrad()
    F = cgrad.nn.functional
    ex = _load_example("cgrad_example_mlp", "mlp.py")
    if importlib.util.find_spec("sklearn") is not None:
        xtr, ytr, xte, yte = ex.load_digits(seed)
        data = "scikit-learn digits"
    else:   # the same shapes: 1438 train / 359 test images of 64 features, 10 classes
        rng = np.random.default_rng(seed)
        xtr = rng.standard_normal((1438, 64)).astype(np.float32)
        xte = rng.standard_normal((359, 64)).astype(np.float32)
        ytr, yte = rng.integers(0, 10, 1438), rng.integers(0, 10, 359)
        data = "random data of the digits' shape (scikit-learn missing)"
    cgrad.manual_seed(seed)
    model = ex.MLP(xtr.shape[1], hidden, 10)
    opt = cgrad.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    per_epoch = -(-len(xtr) // batch)
    st = {"perm": None, "loss": None, "acc": None}

    def step(i):
        k = i % per_epoch
        if k == 0:
            if i:      # end of an epoch: evaluate, as examples/mlp.py does
                st["acc"] = ex.accuracy(model, xte, yte)
            st["perm"] = rng.permutation(len(xtr))
        idx = st["perm"][k * batch:(k + 1) * batch]
        xb, yb = cgrad.from_numpy(xtr[idx]), cgrad.from_numpy(ytr[idx])
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        st["loss"] = loss.item()

    def info():
        return {"data": data, "last_loss": st["loss"], "test_acc": ex.accuracy(model, xte, yte)}
    return step, info


def make_gat(dataset="cora", seed=72):
    """examples/gat.py's Trainer: one epoch per step (training step + validation forward)."""
    load_cgrad()
    gat = _load_example("cgrad_example_gat", "gat.py")
    tr = gat.Trainer(gat.parse_args(["--dataset", dataset, "--seed", str(seed)]))
    st = {}

    def step(i):
        st["last"] = tr.epoch()

    def info():
        tl, ta, vl, va = st["last"]
        return {"data": dataset, "train_loss": tl, "train_acc": ta, "val_loss": vl,
                "val_acc": va}
    return step, info


def make_ops(lib, n=4):
    """c2 / d: ((x * w + 0.5).tanh() * x.exp()).sum().backward() on a fresh leaf x and a
    persistent leaf w (its .grad reset each cycle); float64, 7 graph nodes."""
    base = np.linspace(-1.0, 1.0, n)
    w = lib.tensor(np.linspace(0.1, 0.4, n), requires_grad=True)
    st = {}

    def step(i):
        x = lib.tensor(base, requires_grad=True)
        y = ((x * w + 0.5).tanh() * x.exp()).sum()
        y.backward()
        w.grad = None
        st["gx"] = x.grad

    def expected():
        wn = np.linspace(0.1, 0.4, n)
        t = np.tanh(base * wn + 0.5)
        return (1 - t * t) * wn * np.exp(base) + t * np.exp(base)

    def info():
        g = st["gx"].detach().numpy()
        return {"grad_max_err": float(np.abs(g - expected()).max())}
    return step, info


_FNS = None


def _functions(cgrad):
    """The custom Functions of c1, made once per process and held by this module (as a
    user's module holds its Functions)."""
    global _FNS
    if _FNS is not None:
        return _FNS
    Function = cgrad.autograd.Function

    class CycleMul(Function):
        """x * w with a ctx that references itself three ways."""
        @staticmethod
        def forward(ctx, x, w):
            ctx.me = ctx
            ctx.d = {"ctx": ctx, "n": 1}
            ctx.f = lambda: ctx
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            assert ctx.f() is ctx and ctx.d["ctx"] is ctx
            return g * w, g * x

    class ExpOut(Function):
        """exp(x), saving its output and holding it as a ctx attribute too."""
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

    class Twice(Function):
        """The classic Function: saves its input, nothing else (an untracked node)."""
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2

    for c in (CycleMul, ExpOut, Twice):
        c.__qualname__ = c.__name__
        globals()[c.__name__] = c
    _FNS = CycleMul, ExpOut, Twice
    return _FNS


def make_cycles(n=4):
    """c1: a graph of custom Functions whose ctx closes reference cycles, with hooks."""
    cgrad = load_cgrad()
    CycleMul, ExpOut, Twice = _functions(cgrad)
    saved_hooks = cgrad.autograd.graph.saved_tensors_hooks
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    base = np.linspace(-1.0, 1.0, n)
    wn = np.linspace(0.1, 0.4, n)
    w = cgrad.tensor(wn, requires_grad=True)
    st = {}
    box = []

    def pack(t):
        box.append(t)           # the pack result references a list the closure holds too
        return (t, box)

    def unpack(p):
        box.clear()
        return p[0]

    def step(i):
        x = cgrad.tensor(base, requires_grad=True)
        if i % 32 == 0:
            with saved_hooks(pack, unpack):
                a = CycleMul.apply(x, w)
        else:
            a = CycleMul.apply(x, w)
        b = ExpOut.apply(a)
        if i % 4 == 0:
            b.register_hook(lambda g: g * 1.0)
        if i % 8 == 0:
            a.grad_fn.register_hook(lambda gi, go: None)
            b.grad_fn.register_prehook(lambda go: None)
            a.retain_grad()
        c = (Twice.apply(b) * a).sum()
        if i % 16 == 0:
            c.backward(create_graph=True)     # x.grad holds a graph back to x: a cycle
        else:
            c.backward()
        w.grad = None
        st["gx"] = x.grad

    def info():
        a = base * wn
        ex = (2 * np.exp(a) * a + 2 * np.exp(a)) * wn   # d/dx sum(2 e^a * a), a = x * w
        g = st["gx"].detach().numpy()
        return {"grad_max_err": float(np.abs(g - ex).max())}
    return step, info


def make_workload(name):
    if name == "a":
        return make_mlp()
    if name == "b":
        return make_gat()
    if name == "c1":
        return make_cycles()
    if name == "c2":
        return make_ops(load_cgrad())
    if name == "d":
        torch = load_torch()
        if torch is None:
            raise ImportError("torch is not importable")
        torch.set_default_dtype(torch.float64)
        return make_ops(torch)
    raise ValueError(f"unknown scenario {name!r}")


# ---------------------------------------------------------------------------------------------
# the child: one scenario in a fresh process, one JSON line on stdout

def _untracked():
    if "cgrad" not in sys.modules:      # scenario d: do not import cgrad into torch's process
        return None, None
    try:
        from cgrad import _C
        return _C._untracked_count(), _C._untracked_count(True)
    except Exception:
        return None, None


FIELDS = ("step", "t", "cpu", "rss_run", "rss", "blocks", "objects", "registry",
          "registry_capacity")
_STATM = None
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss():
    """RSS from a /proc/self/statm descriptor kept open (common.rss_bytes opens a file object
    each time, which left about one Python block behind per call in the `blocks` count)."""
    global _STATM
    if _STATM is None:
        try:
            _STATM = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            _STATM = -1
    if _STATM < 0:
        return rss_bytes()
    return int(os.pread(_STATM, 128, 0).split()[1]) * _PAGE


def _sample(row, step, t, cpu, collect):
    """Fill row (a preallocated float64 array: recording a sample allocates no Python object
    that outlives it, so `blocks` counts only the workload's)."""
    row[3] = _rss()
    if collect:
        gc.collect()
    reg, cap = _untracked()
    row[0], row[1], row[2], row[4] = step, t, cpu, _rss()
    row[5] = sys.getallocatedblocks()
    row[6] = len(gc.get_objects())
    row[7] = -1 if reg is None else reg
    row[8] = -1 if cap is None else cap


def child(name, steps, warm, every, collect=True):
    t_setup = perf_counter()
    step, info = make_workload(name)
    step(0)       # first call: lazily built code paths (counted as step 0 of the warm-up)
    setup_s = perf_counter() - t_setup
    buf = np.zeros((steps // every + 2, len(FIELDS)))
    gc.collect()
    _sample(buf[0], 1, 0.0, 0.0, collect)
    i, k, t_steps, c_steps = 1, 1, 0.0, 0.0
    while i < steps:
        stop = min(steps, (i // every + 1) * every)
        c0, t0 = cpu_time(), perf_counter()
        while i < stop:
            step(i)
            i += 1
        t_steps += perf_counter() - t0
        c_steps += cpu_time() - c0
        _sample(buf[k], i, t_steps, c_steps, collect)
        k += 1
    samples = [{f: (float(v) if f in ("t", "cpu") else int(v)) for f, v in zip(FIELDS, r)}
               for r in buf[:k]]
    versions = {"numpy": np.__version__}
    for mod in ("cgrad", "torch"):
        if mod in sys.modules:
            versions[mod] = getattr(sys.modules[mod], "__version__", "?")
    print(json.dumps({"name": name, "steps": steps, "warmup": warm, "every": every,
                      "collect": collect, "setup_s": setup_s, "samples": samples,
                      "info": info(), "versions": versions}), flush=True)


# ---------------------------------------------------------------------------------------------
# the parent

def spawn(name, steps, warm, every, collect=True):
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, "--_steps", str(steps),
           "--_warmup", str(warm), "--_every", str(every)] + ([] if collect else
                                                              ["--no-collect"])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_proc(proc, timeout):
    """-> (child record, None) or (None, error text)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, f"timeout after {timeout:g} s"
    if proc.returncode != 0:
        tail = (err.strip().splitlines() or ["?"])[-1]
        return None, f"exit {proc.returncode}: {tail[:300]}"
    try:
        return json.loads(out.strip().splitlines()[-1]), None
    except Exception as e:
        return None, f"bad child output ({type(e).__name__}: {e}): {out[-200:]!r}"


def analyse(rec):
    """Figures of one child record (see the module docstring)."""
    s = rec["samples"]
    warm = rec["warmup"]
    w = next(x for x in s if x["step"] >= warm)
    e = s[-1]
    n = e["step"] - w["step"]
    half = [x for x in s if x["step"] >= e["step"] / 2]
    slope = None
    if len(half) >= 3:
        slope = float(np.polyfit([x["step"] for x in half], [x["rss"] for x in half], 1)[0])
    t_run, c_run = e["t"] - w["t"], e["cpu"] - w["cpu"]
    growth = 100.0 * (e["rss"] - w["rss"]) / w["rss"]
    return {
        "steps": e["step"], "warmup": w["step"], "rss_start": s[0]["rss"],
        "rss_warm": w["rss"], "rss_end": e["rss"], "rss_max": max(x["rss"] for x in s),
        "rss_run_max": max(x["rss_run"] for x in s[s.index(w):]),
        "growth_pct": growth, "bytes_per_step": (e["rss"] - w["rss"]) / n if n else 0.0,
        "slope_2nd_half": slope,
        "blocks_delta": e["blocks"] - w["blocks"], "objects_delta": e["objects"] - w["objects"],
        "registry_max": max(x["registry_capacity"] for x in s),   # -1: cgrad not loaded
        "seconds": e["t"], "cpu_seconds": e["cpu"],
        "steps_per_s": (n / t_run) if t_run > 0 else None,
        "steps_per_cpu_s": (n / c_run) if c_run > 0 else None,
        "flat": abs(growth) <= FLAT_PCT,
    }


def available(name):
    if name == "d":
        try:
            return importlib.util.find_spec("torch") is not None
        except (ImportError, ValueError):
            return False
    return True


def start(names=None, quick=False, scale=None, use_torch=True, collect=True, timeout=None,
          parallel=None, samples=None):
    """Start the scenarios -> a handle for finish(). With `parallel` (default: with quick
    only; RSS is per process, but timings then disturb each other) every child starts now,
    else finish() runs them one after the other. scale: fraction of the full length (default
    1, or 1/100 with quick). samples: per scenario (default 200, quick 50; each costs a full
    collection)."""
    names = list(names or SCENARIOS)
    if scale is None:
        scale = 1.0 / QUICK_DIVISOR if quick else 1.0
    samples = samples or (QUICK_SAMPLES if quick else SAMPLES)
    parallel = quick if parallel is None else parallel
    h = {"res": {"scale": scale, "collect": collect, "scenarios": {}, "skipped": []},
         "timeout": timeout or (300 if quick else 4 * 3600), "collect": collect,
         "todo": [], "plans": {}, "procs": {}}
    for name in names:
        if name == "d" and not use_torch:
            h["res"]["skipped"].append("d: --no-torch")
        elif not available(name):
            h["res"]["skipped"].append(f"{name}: torch is not importable")
        else:
            h["todo"].append(name)
            h["plans"][name] = plan(name, scale, samples)
            if parallel:
                h["procs"][name] = spawn(name, *h["plans"][name], collect)
    return h


def finish(h, log=None):
    """Wait for (or run) the scenarios of start() -> the result dict {"scale", "collect",
    "scenarios": {name: {...}}, "skipped": [...]} (render() prints it)."""
    out = h["res"]
    for name in h["todo"]:
        steps, warm, every = h["plans"][name]
        proc = h["procs"].get(name) or spawn(name, steps, warm, every, h["collect"])
        rec, err = finish_proc(proc, h["timeout"])
        r = {"group": SCENARIOS[name][0], "label": SCENARIOS[name][1],
             "unit": SCENARIOS[name][3], "planned": [steps, warm, every]}
        if err:
            r["error"] = err
        else:
            r.update(rec)
            r["result"] = analyse(rec)
        out["scenarios"][name] = r
        if log:
            x = r.get("result")
            msg = (f"RSS {x['rss_warm'] / 2**20:.1f} -> {x['rss_end'] / 2**20:.1f} MB "
                   f"({x['growth_pct']:+.2f} %), {x['seconds']:.0f} s" if x else f"ERROR {err}")
            print(f"  [soak {name}: {steps:,} {SCENARIOS[name][3]}s: {msg}]", file=log,
                  flush=True)
    return out


def run(names=None, quick=False, scale=None, use_torch=True, collect=True, timeout=None,
        parallel=None, samples=None, log=None):
    """start() then finish(): run the scenarios -> result dict (see finish)."""
    return finish(start(names, quick, scale, use_torch, collect, timeout, parallel, samples),
                  log)


def _mb(b):
    return f"{b / 2 ** 20:.1f}"


def render(res):
    """The table of a run() result (plain text, aligned)."""
    head = ["scenario", "steps", "warm-up", "s", "steps/s", "steps/cpu-s", "RSS warm-up MB",
            "RSS end MB", "growth", "bytes/step", "slope 2nd half B/step", "py blocks +-",
            "gc objects +-", f"flat (<= {FLAT_PCT:g} %)"]
    rows, notes = [], []
    for name, r in res["scenarios"].items():
        label = f"{name} {r['label']}"
        if "error" in r:
            rows.append([label] + ["-"] * (len(head) - 2) + [f"ERROR: {r['error']}"])
            continue
        x = r["result"]
        rows.append([label, f"{x['steps']:,}", f"{x['warmup']:,}", f"{x['seconds']:.0f}",
                     f"{x['steps_per_s']:,.0f}" if x["steps_per_s"] else "-",
                     f"{x['steps_per_cpu_s']:,.0f}" if x["steps_per_cpu_s"] else "-",
                     _mb(x["rss_warm"]), _mb(x["rss_end"]), f"{x['growth_pct']:+.2f} %",
                     f"{x['bytes_per_step']:+.2f}",
                     "-" if x["slope_2nd_half"] is None else f"{x['slope_2nd_half']:+.3f}",
                     f"{x['blocks_delta']:+,}", f"{x['objects_delta']:+,}",
                     "yes" if x["flat"] else "NO"])
        info = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in r.get("info", {}).items())
        notes.append(f"{name}: {info}; RSS at start {_mb(x['rss_start'])} MB, max "
                     f"{_mb(x['rss_max'])} MB after collection, {_mb(x['rss_run_max'])} MB "
                     "max before (after warm-up); "
                     + (f"untracked registry capacity max {x['registry_max']}; "
                        if x["registry_max"] >= 0 else "")
                     + f"setup {r['setup_s']:.1f} s")
    w = [max(len(h), *(len(t[i]) for t in rows)) if rows else len(h)
         for i, h in enumerate(head)]
    how = ("gc.collect() before each sample; RSS after it" if res.get("collect", True)
           else "no gc.collect() (--no-collect): RSS as the loop runs")
    out = [f"Memory soak (bench/soak.py), {res['scale']:g} x full length; {how}; growth = "
           f"(end - warm-up) / warm-up; slope: least squares over the second half"]
    out.append("  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip())
    out.append("-" * len(out[-1]))
    out += ["  ".join(v.ljust(x) for v, x in zip(t, w)).rstrip() for t in rows]
    out += notes
    out += [f"skipped: {s}" for s in res.get("skipped", [])]
    return "\n".join(out)


def render_markdown(res):
    """The main table as Markdown (for bench/README.md)."""
    lines = ["| scenario | steps | warm-up | seconds | steps/s | steps/cpu-s | RSS warm-up (MB) "
             "| RSS end (MB) | growth | bytes/step | slope, 2nd half (B/step) | Python blocks "
             "| flat |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in res["scenarios"].items():
        if "error" in r:
            lines.append(f"| {name} {r['label']} | ERROR: {r['error']} |")
            continue
        x = r["result"]
        lines.append(
            f"| {name} {r['label']} | {x['steps']:,} | {x['warmup']:,} | {x['seconds']:.0f} | "
            f"{x['steps_per_s']:,.0f} | {x['steps_per_cpu_s']:,.0f} | {_mb(x['rss_warm'])} | "
            f"{_mb(x['rss_end'])} | "
            f"{x['growth_pct']:+.2f} % | {x['bytes_per_step']:+.2f} | "
            + ("-" if x["slope_2nd_half"] is None else f"{x['slope_2nd_half']:+.3f}")
            + f" | {x['blocks_delta']:+,} | {'yes' if x['flat'] else 'NO'} |")
    return "\n".join(lines)


def failures(res):
    """Scenarios that erred or grew."""
    out = []
    for name, r in res["scenarios"].items():
        if "error" in r:
            out.append(f"ERROR soak {name}: {r['error']}")
        elif not r["result"]["flat"]:
            out.append(f"soak {name}: RSS grew {r['result']['growth_pct']:+.2f} % after "
                       f"warm-up (> {FLAT_PCT:g} %)")
    return out


def expand(only):
    names = []
    for k in only:
        for n in GROUPS.get(k, [k]):
            if n not in names:
                names.append(n)
    return names


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"each scenario {QUICK_DIVISOR}x shorter, all at once (smoke test)")
    p.add_argument("--only", nargs="+", choices=list(GROUPS) + list(SCENARIOS),
                   help="scenarios to run (c = c1 and c2)")
    p.add_argument("--scale", type=float, help="fraction of the full length (overrides "
                   "--quick's 1/100)")
    p.add_argument("--no-torch", action="store_true", help="skip scenario d")
    p.add_argument("--no-collect", action="store_true",
                   help="sample without gc.collect() (RSS as the user's loop sees it)")
    p.add_argument("--timeout", type=float, help="seconds per scenario (default 4 h, quick "
                   "300 s)")
    p.add_argument("--plot", metavar="PNG", help="write RSS against step (matplotlib)")
    p.add_argument("--json", metavar="PATH", help="write every sample and the results")
    p.add_argument("--markdown", action="store_true", help="also print the Markdown table")
    p.add_argument("--from-json", metavar="PATH", help="measure nothing: report (and --plot) "
                   "a saved --json file")
    p.add_argument("--_child", help=argparse.SUPPRESS)
    p.add_argument("--_steps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_warmup", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_every", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        child(a._child, a._steps, a._warmup, a._every, collect=not a.no_collect)
        return 0

    if a.from_json:
        with open(a.from_json) as f:
            data = json.load(f)
        res = data["results"]
    else:
        load_cgrad()
        info = machine_info()
        print(f"cgrad memory soak{' (--quick)' if a.quick else ''}: python {info['python']}, "
              f"numpy {info['numpy']}, scipy {info['scipy']}, cgrad {info['cgrad']} "
              f"(git {info.get('git', '?')})")
        print(f"{info['platform']}; cpu: {info.get('cpu', '?')} x{info['cpus']}, "
              f"{info.get('mem_gb', '?')} GB; loadavg at start: {info['loadavg_start']}; "
              f"{info['date']}", flush=True)
        t0 = perf_counter()
        res = run(expand(a.only) if a.only else None, quick=a.quick, scale=a.scale,
                  use_torch=not a.no_torch, collect=not a.no_collect, timeout=a.timeout,
                  log=sys.stderr)
        info["loadavg_end"] = loadavg()
        tv = res["scenarios"].get("d", {}).get("versions", {}).get("torch")
        info["torch"] = tv
        data = {"machine": info, "argv": sys.argv[1:] if argv is None else argv,
                "total_s": perf_counter() - t0, "results": res}
    print(render(res))
    if a.markdown:
        print()
        print(render_markdown(res))
    bad = failures(res)
    for m in bad:
        print(m)
    if "total_s" in data:
        print(f"total soak time: {data['total_s']:.0f} s; loadavg at end "
              f"{data['machine'].get('loadavg_end')}")
    if a.json and not a.from_json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        import plot
        try:
            ok = plot.plot_soak(res, a.plot, data.get("machine"))
        except ImportError:
            ok = False
        print(f"wrote {a.plot}" if ok else "no plot: matplotlib is not installed "
              "(pip install matplotlib)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
