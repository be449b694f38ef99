#!/usr/bin/env python
"""One MLP training step: cgrad vs a hand-written NumPy floor vs torch (CPU).

    python bench/mlp.py                 # float32 and float64, full size, prints a table
    python bench/mlp.py --quick         # small network, few repetitions (smoke test)
    python bench/mlp.py --json out.json --repeats 21 --dtypes float32
    python bench/mlp.py --profile       # + cProfile of cgrad's step (top functions)

The workload: batch 512, a 784-1024-1024-10 MLP with tanh activations, cross-entropy
with class indices and mean reduction; forward, backward and a plain SGD update
(``p -= lr * grad``, then ``grad = None``). Three systems run it:

* ``cgrad``: ``F.linear`` / ``tanh`` / ``F.cross_entropy``, ``loss.backward()``, then the
  update under ``no_grad`` with ``p.add_(p.grad, alpha=-lr)``: the *same* source as torch's
  column (only the module object differs).
* ``numpy``: the floor, a hand-written forward and backward of the same network: BLAS matmuls
  (``x @ W.T`` without copies), every elementwise step in place on arrays the step owns
  (bias add, tanh, tanh' = 1 - h**2 computed over h once it is dead, softmax - onehot over
  the logits), bias gradients as one column sum, and the update ``g *= lr; p -= g`` in place.
* ``torch`` (when importable): the same code as cgrad; ``torch.set_num_threads(1)``.

Method: OPENBLAS/OMP/MKL threads = 1 (set before NumPy is imported); every system gets the
same initial parameters (torch.nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from one NumPy
generator) and data; the gradients of cgrad and torch are checked against NumPy's on the
first step before anything is timed; then one untimed warm-up step per system and
``--repeats`` timed steps interleaved across systems (the order rotates every round), with
``gc.collect()`` before each and the collector enabled while timing. Wall time
(perf_counter) and process CPU time (process_time) are both recorded: every system computes
on one thread, so CPU time is the robust figure on a shared, loaded machine.

Allocator (``--malloc``): by default (``steady``) the benchmark sets glibc's M_MMAP_THRESHOLD
and M_TRIM_THRESHOLD to 1 GiB (mallopt) for the whole process, so freed arrays are recycled
and no system pays page faults for memory that glibc returned to the OS a moment earlier.
With glibc's dynamic defaults (``--malloc default``) a step takes 0 to ~5000 minor faults
(0-20 MB of fresh pages, several ms) depending only on the *order* of its allocations and
frees, which moves any of the three columns by +-10% (measured: the NumPy floor itself goes
from 3300 faults to 0 when its tanh is computed out of place instead of in place). Reported: median
(min) ms per step and per phase (fwd / bwd / update), ratios of medians cgrad/numpy and
cgrad/torch, and peak memory of one step:

* ``tracemalloc``: the peak of traced allocations during one step above what was allocated
  before it (NumPy reports its array buffers to tracemalloc, so this covers numpy and cgrad
  exactly; torch's allocator is invisible to tracemalloc: n/a);
* ``rss``: VmHWM - VmRSS around the first step in a fresh subprocess per system and dtype
  (peak resident memory reset through /proc/self/clear_refs; Linux only; includes allocator
  caching, so it is coarser, but it measures all three systems alike). Off in --quick.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:     # imported by path (tests)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import settle  # noqa: E402

perf_counter = time.perf_counter
cpu_time = time.process_time


def _phases(t0, t1, t2, t3, c0, c3):
    return {"fwd": t1 - t0, "bwd": t2 - t1, "update": t3 - t2, "total": t3 - t0,
            "cpu": c3 - c0}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FULL = dict(batch=512, sizes=(784, 1024, 1024, 10), repeats=15)
QUICK = dict(batch=128, sizes=(784, 256, 256, 10), repeats=3)
LR = 0.01
TARGET_VS_NUMPY = 1.03          # the target: cgrad within 3% of the NumPy floor
SYSTEMS = ("cgrad", "numpy", "torch")


# ---------------------------------------------------------------------------------------------
# libraries

def load_torch():
    try:
        import torch
    except Exception:  # ImportError or a broken install
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
    import cgrad.nn.functional  # noqa: F401
    return cgrad


# ---------------------------------------------------------------------------------------------
# problem

def make_problem(dtype, batch, sizes, seed=0):
    """(X, y, params): params = [W1, b1, W2, b2, W3, b3] as torch.nn.Linear initialises them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(dtype))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(dtype))
    return X, y, params


# ---------------------------------------------------------------------------------------------
# the step, for cgrad and torch (the same source)

def make_autograd_step(lib, X, y, params, lr=LR):
    """-> (step(), params): step() runs one training step and returns
    ({"fwd", "bwd", "update", "total"}: seconds, loss tensor)."""
    F = lib.nn.functional
    xt = lib.tensor(X)
    yt = lib.tensor(y)
    ps = [lib.tensor(p.copy(), requires_grad=True) for p in params]
    W1, b1, W2, b2, W3, b3 = ps

    def forward():
        h = lib.tanh(F.linear(xt, W1, b1))
        h = lib.tanh(F.linear(h, W2, b2))
        return F.cross_entropy(F.linear(h, W3, b3), yt)

    def step():
        c0, t0 = cpu_time(), perf_counter()
        loss = forward()
        t1 = perf_counter()
        loss.backward()
        t2 = perf_counter()
        with lib.no_grad():
            for p in ps:
                p.add_(p.grad, alpha=-lr)
                p.grad = None
        t3, c3 = perf_counter(), cpu_time()
        return _phases(t0, t1, t2, t3, c0, c3), loss

    def grads():
        """One forward + backward without the update: the gradients as ndarrays."""
        loss = forward()
        loss.backward()
        out = [np.array(p.grad.numpy(), copy=True) for p in ps]
        for p in ps:
            p.grad = None
        return float(loss.item()), out

    return step, grads


# ---------------------------------------------------------------------------------------------
# the NumPy floor

def make_numpy_step(X, y, params, lr=LR):
    ps = [p.copy() for p in params]
    W1, b1, W2, b2, W3, b3 = ps
    N = X.shape[0]
    rows = np.arange(N)

    def fwd_bwd():
        # forward: x @ W.T is a BLAS gemm on the transposed view (no copy); the bias add and
        # tanh run in place on the fresh product
        h1 = X @ W1.T
        h1 += b1
        np.tanh(h1, out=h1)
        h2 = h1 @ W2.T
        h2 += b2
        np.tanh(h2, out=h2)
        z = h2 @ W3.T
        z += b3
        # cross-entropy, mean over the batch: log-softmax computed in place on the logits
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        se = e.sum(axis=1, keepdims=True)
        loss = (np.log(se).sum() - z[rows, y].sum()) / N
        t1 = perf_counter()
        # backward: dz = (softmax - onehot) / N in place on e
        e *= (1.0 / N) / se
        e[rows, y] -= 1.0 / N
        gW3 = e.T @ h2
        gb3 = e.sum(axis=0)
        dh = e @ W3
        np.multiply(h2, h2, out=h2)         # tanh' = 1 - h**2, in place on the dead h2
        np.subtract(1.0, h2, out=h2)
        dh *= h2
        gW2 = dh.T @ h1
        gb2 = dh.sum(axis=0)
        dh1 = dh @ W2
        np.multiply(h1, h1, out=h1)
        np.subtract(1.0, h1, out=h1)
        dh1 *= h1
        gW1 = dh1.T @ X
        gb1 = dh1.sum(axis=0)
        return loss, t1, [gW1, gb1, gW2, gb2, gW3, gb3]

    def step():
        c0, t0 = cpu_time(), perf_counter()
        loss, t1, gs = fwd_bwd()
        t2 = perf_counter()
        for p, g in zip(ps, gs):
            g *= lr
            p -= g
        del gs                        # as grad = None: the gradients are freed in the step
        t3, c3 = perf_counter(), cpu_time()
        return _phases(t0, t1, t2, t3, c0, c3), loss

    def grads():
        loss, _, gs = fwd_bwd()
        return float(loss), gs

    return step, grads


def make_step(name, mod, X, y, params):
    if name == "numpy":
        return make_numpy_step(X, y, params)
    return make_autograd_step(mod, X, y, params)


# ---------------------------------------------------------------------------------------------
# measurements

def check_grads(grads, dtype):
    """Every system's loss and gradients against NumPy's (before any timing)."""
    ref_loss, ref = grads["numpy"]
    rtol = 1e-3 if dtype == "float32" else 1e-9
    out = {}
    for name, (loss, gs) in grads.items():
        if name == "numpy":
            continue
        msg = "ok"
        if not np.isclose(loss, ref_loss, rtol=rtol):
            msg = f"loss {loss} != numpy {ref_loss}"
        for i, (a, b) in enumerate(zip(gs, ref)):
            if a.shape != b.shape or a.dtype != b.dtype:
                msg = f"grad {i}: {a.shape} {a.dtype} != numpy {b.shape} {b.dtype}"
                break
            scale = np.abs(b).max()
            err = np.abs(a - b).max()
            if not err <= rtol * scale:
                msg = f"grad {i}: max |diff| {err:.3g} > {rtol:g} * max|g| {scale:.3g}"
                break
        out[name] = msg
    return out


def tracemalloc_peak(step):
    """Peak bytes traced during one step above the traced size before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        keep = step()
        peak = tracemalloc.get_traced_memory()[1]
        del keep
    finally:
        tracemalloc.stop()
    return peak - base


def _status_kb(field):
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(field + ":"):
                return int(ln.split()[1]) * 1024
    raise OSError(field)


def child_rss(name, dtype, batch, sizes, malloc):
    """In a fresh subprocess: peak RSS growth over the first step (printed as JSON)."""
    set_malloc(malloc)
    mod = {"cgrad": load_cgrad, "torch": load_torch, "numpy": lambda: np}[name]()
    X, y, params = make_problem(dtype, batch, sizes)
    step, _ = make_step(name, mod, X, y, params)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                  # reset VmHWM to the current RSS
    rss0 = _status_kb("VmRSS")
    keep = step()
    hwm = _status_kb("VmHWM")
    del keep
    print(json.dumps({"rss_peak": hwm - rss0}))


def rss_peak(name, dtype, batch, sizes, malloc, timeout=300):
    cmd = [sys.executable, os.path.abspath(__file__), "--_child-rss", name, "--dtypes", dtype,
           "--_batch", str(batch), "--_sizes", ",".join(map(str, sizes)),
           "--malloc", "steady" if malloc == "steady" else "default"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            return None, (r.stderr.strip().splitlines() or ["?"])[-1][:200]
        return json.loads(r.stdout.strip().splitlines()[-1])["rss_peak"], None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"[:200]


def set_malloc(mode):
    """mode 'steady': glibc keeps freed memory for reuse (M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD = 1 GiB), so a step's large arrays come from recycled memory in every
    system, without page faults whose number depends on the order of allocations rather than
    on the work done; 'default': glibc's own dynamic thresholds. Returns the mode in effect."""
    if mode != "steady":
        return "default"
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        m_trim, m_mmap = -1, -3
        ok = libc.mallopt(m_mmap, 1 << 30) == 1 and libc.mallopt(m_trim, 1 << 30) == 1
    except (OSError, AttributeError):
        ok = False
    return "steady" if ok else "default (mallopt unavailable)"


def _stats(xs):
    ms = [x * 1e3 for x in xs]
    return {"median": statistics.median(ms), "min": min(ms), "samples": ms}


def bench_dtype(dtype, cfg, libs, repeats, warmup=1, rss=True, malloc="default", log=None):
    """Timing, gradient check and memory of one dtype for every system in libs."""
    X, y, params = make_problem(dtype, cfg["batch"], cfg["sizes"])
    steps, grads, errors = {}, {}, {}
    for name, mod in libs.items():
        try:
            step, g = make_step(name, mod, X, y, params)
            grads[name] = g()
            steps[name] = step
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    grad_check = check_grads(grads, dtype) if "numpy" in grads else {}
    samples = {n: {"fwd": [], "bwd": [], "update": [], "total": [], "cpu": []} for n in steps}
    order = list(steps)
    for r in range(warmup + repeats):
        for i in range(len(order)):
            name = order[(i + r) % len(order)]     # rotate who goes first each round
            if name not in steps:
                continue
            settle()
            try:
                ph, keep = steps[name]()
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                del steps[name], samples[name]
                continue
            del keep
            if r >= warmup:
                for k, v in ph.items():
                    samples[name][k].append(v)
    out = {"libs": {}, "grad_check": grad_check}
    for name, ss in samples.items():
        d = {k: _stats(v) for k, v in ss.items()}
        d["tracemalloc_peak"] = (None if name == "torch"
                                 else tracemalloc_peak(steps[name]))
        out["libs"][name] = d
    if rss:
        for name in steps:
            val, err = rss_peak(name, dtype, cfg["batch"], cfg["sizes"], malloc)
            out["libs"][name]["rss_peak"] = val
            if err:
                out["libs"][name]["rss_error"] = err
    for name, e in errors.items():
        out["libs"].setdefault(name, {})["error"] = e
    if log:
        print(f"  [mlp {dtype} done]", file=log, flush=True)
    return out


def run(quick=False, repeats=None, dtypes=("float32", "float64"), use_torch=True, rss=None,
        malloc="steady", log=None):
    """The whole benchmark -> results dict (see render)."""
    cfg = QUICK if quick else FULL
    malloc = set_malloc(malloc)
    repeats = repeats or cfg["repeats"]
    rss = (not quick) if rss is None else rss
    if rss and not os.path.exists("/proc/self/clear_refs"):
        rss = False
    libs = {"cgrad": load_cgrad(), "numpy": np}
    torch = load_torch() if use_torch else None
    if torch is not None:
        libs["torch"] = torch
    res = {"config": {"batch": cfg["batch"], "sizes": list(cfg["sizes"]), "lr": LR,
                      "repeats": repeats, "quick": quick, "malloc": malloc,
                      "torch": torch.__version__ if torch is not None else None,
                      "numpy": np.__version__},
           "dtypes": {}}
    for dt in dtypes:
        res["dtypes"][dt] = bench_dtype(dt, cfg, libs, repeats, warmup=1,
                                        rss=rss, malloc=malloc, log=log)
    # flat views for bench/run.py's error and gradient-mismatch notes
    res["libs"] = {f"{n}/{dt}": {"error": d["error"]}
                   for dt, r in res["dtypes"].items() for n, d in r["libs"].items()
                   if "error" in d}
    res["grad_check"] = {f"{n}/{dt}": s for dt, r in res["dtypes"].items()
                         for n, s in r["grad_check"].items()}
    return res


# ---------------------------------------------------------------------------------------------
# report

def _ms(d, k):
    if d is None or k not in d:
        return "ERROR" if d and "error" in d else "-"
    return f"{d[k]['median']:8.2f} ({d[k]['min']:.2f})"


def _mb(v):
    return "n/a" if v is None else f"{v / 2 ** 20:.1f}"


def _ratio(a, b, k="total"):
    if not a or not b or k not in a or k not in b:
        return "-"
    return f"{a[k]['median'] / b[k]['median']:.3f}x"


def render(res):
    c = res["config"]
    lines = [f"MLP training step: batch {c['batch']}, {'-'.join(map(str, c['sizes']))}, tanh, "
             f"cross_entropy (mean), SGD lr={c['lr']}; {c['repeats']} interleaved steps per "
             f"system; malloc: {c.get('malloc', 'default')}; ms per step: median (min)"]
    head = ["dtype", "system", "wall ms", "cpu ms", "fwd ms", "bwd ms", "update ms",
            "/numpy wall", "/numpy cpu", "/torch wall", "/torch cpu", "peak MB trace",
            "peak MB rss", "grads"]
    rows = []
    for dt, r in res["dtypes"].items():
        libs = r["libs"]
        for name in SYSTEMS:
            d = libs.get(name)
            if d is None:
                continue
            npy, th = libs.get("numpy"), libs.get("torch")
            rows.append([dt, name, _ms(d, "total"), _ms(d, "cpu"), _ms(d, "fwd"), _ms(d, "bwd"),
                         _ms(d, "update"),
                         _ratio(d, npy) if name != "numpy" else "1",
                         _ratio(d, npy, "cpu") if name != "numpy" else "1",
                         _ratio(d, th) if name != "torch" else "1",
                         _ratio(d, th, "cpu") if name != "torch" else "1",
                         _mb(d.get("tracemalloc_peak")),
                         _mb(d.get("rss_peak")) if "rss_peak" in d else "-",
                         "ref" if name == "numpy" else r["grad_check"].get(name, "-")])
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
         for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip())
    lines.append("-" * len(lines[-1]))
    for r in rows:
        lines.append("  ".join(v.ljust(x) for v, x in zip(r, w)).rstrip())
    for dt, r in res["dtypes"].items():
        cg, npy = r["libs"].get("cgrad"), r["libs"].get("numpy")
        if cg and npy and "total" in cg and "total" in npy:
            qw = cg["total"]["median"] / npy["total"]["median"]
            qc = cg["cpu"]["median"] / npy["cpu"]["median"]
            qm = cg["cpu"]["min"] / npy["cpu"]["min"]
            verdict = "yes" if qc <= TARGET_VS_NUMPY else "NO"
            if c["quick"]:
                verdict = "(quick: not gated) " + verdict
            lines.append(f"{dt}: cgrad/numpy = {qc:.3f} cpu median, {qm:.3f} cpu min, {qw:.3f} "
                         f"wall median (target <= {TARGET_VS_NUMPY:.2f} on cpu medians): "
                         f"{verdict}")
        for name, d in r["libs"].items():
            if "error" in d:
                lines.append(f"ERROR {dt}/{name}: {d['error']}")
            if "rss_error" in d:
                lines.append(f"rss {dt}/{name}: {d['rss_error']}")
    lines.append("cpu: process CPU time (time.process_time), robust to other processes on the "
                 "machine (all work runs on one thread); wall: perf_counter.")
    lines.append("peak MB trace: NumPy-allocated bytes of one step above what existed before it "
                 "(tracemalloc; torch's allocator is not traced: n/a); peak MB rss: VmHWM - "
                 "VmRSS over the first step in a fresh process.")
    return "\n".join(lines)


def profile_cgrad(dtype="float32", quick=False, steps=5, top=25, malloc="steady"):
    """cProfile of cgrad's step (after a warm-up), sorted by internal time."""
    import cProfile
    import pstats
    set_malloc(malloc)
    cfg = QUICK if quick else FULL
    X, y, params = make_problem(dtype, cfg["batch"], cfg["sizes"])
    step, _ = make_autograd_step(load_cgrad(), X, y, params)
    step()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        step()
    pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(top)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small network, 3 repetitions")
    p.add_argument("--repeats", type=int, help="timed steps per system (default 15)")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-rss", action="store_true", help="skip the subprocess RSS peaks")
    p.add_argument("--malloc", choices=("steady", "default"), default="steady",
                   help="'steady' (default): glibc recycles freed memory (no per-step page "
                        "faults); 'default': glibc's dynamic mmap/trim thresholds")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--profile", action="store_true", help="cProfile cgrad's step too")
    p.add_argument("--_child-rss", dest="child", help=argparse.SUPPRESS)
    p.add_argument("--_batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_sizes", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child_rss(a.child, a.dtypes, a._batch, tuple(int(s) for s in a._sizes.split(",")),
                  a.malloc)
        return 0
    dtypes = tuple(a.dtypes.split(","))
    res = run(quick=a.quick, repeats=a.repeats, dtypes=dtypes, use_torch=not a.no_torch,
              rss=False if a.no_rss else None, malloc=a.malloc, log=sys.stderr)
    print(render(res))
    if a.profile:
        profile_cgrad(dtypes[0], a.quick, malloc=a.malloc)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {a.json}")
    bad = [k for k, v in res["grad_check"].items() if v != "ok"] + list(res["libs"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
