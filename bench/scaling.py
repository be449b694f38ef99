"""Scaling: time and memory per node of graphs of 1e3 .. 3e6 nodes (flat = linear total cost).

Two graph shapes, float32 values of shape (8,), built and backpropagated by every system:

* ``chain``: ``y = y * 1.0001; y = y + 0.5`` alternately, n ops in a row, then
  ``y.sum().backward()`` (workload 1's pattern, any depth);
* ``dag``: a random DAG of n/2 vertices, each ``v[i] = (v[i-1] + v[b_i]) * 0.5`` (two ops:
  n nodes) with b_i drawn uniformly from 0..i-1 (seeded, the same for every system): a spine
  through all vertices plus one random earlier operand each, so nodes have random fan-out
  (vertex k feeds about ln(n/k) later ones) and the engine sums gradients at random places
  of the graph. The user keeps the list ``v`` (that is how such a graph is written), so it
  counts in the memory of every system alike. Then ``v[-1].sum().backward()``.

Per size and system a fresh subprocess builds the graph once to measure memory (RSS growth
while building / nodes, /proc/self/statm) and times build + backward (median of several runs
for the small sizes: 9, 5, 3, 1, 1 runs for 1e3, 1e4, 1e5, 1e6, 3e6). Gradients of the leaf are
checked against the NumPy floor on a 200-node graph first. HIPS autograd and torch run when
importable. A size is skipped for a system when its previous size predicts one run would take
longer than ``budget`` seconds (or more memory than half the machine's available memory): the
report says so. ``--quick``: sizes 1e3 and 1e4 in one subprocess per system and shape, all
started at once (a smoke test; the RSS of the second size is then approximate).

The cycle collector's part is reported per cell: its share of the wall time (gc callbacks)
and the objects it examined per node in one more, untimed, run. CPython's collector examines
every tracked object again each time the objects that survived since the last full
collection reach 25% of the long-lived ones, so for tracked graph objects this count per
node is bounded (total work linear in the graph) but grows until the graph outnumbers the
interpreter's own objects. cgrad keeps the objects of these graphs out of the collector (Note
[Untracked graphs] in cgrad/_C_untracked.pxi), so its count should stay near 0: the table
checks that.

``python bench/scaling.py [--quick] [--sizes 1000,10000]`` runs it alone.
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

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import available, close, cpu_time, load, perf_counter, rss_bytes  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000, 3_000_000)
QUICK_SIZES = (1_000, 10_000)
KINDS = ("chain", "dag")
REPS = {1_000: 9, 10_000: 5, 100_000: 3}
CHECK_N = 200
MEM_NODES = 100_000       # small sizes: this many nodes in copies of the graph for RSS


# ---------------------------------------------------------------------------------------------
# graph builders; build(n) -> state, backward(state) -> gradient of the leaf (ndarray-able)

def dag_parents(m, seed=0):
    """b_i for vertices 1..m: uniform in 0..i-1."""
    rng = np.random.default_rng(seed)
    return (rng.random(m) * np.arange(1, m + 1)).astype(np.int64).tolist()


def make_graph(system, mod, kind):
    if system in ("cgrad", "torch"):
        lib = mod

        def backward(st):
            x, y = st[0], st[1]
            y.sum().backward()
            return x.grad

        if kind == "chain":
            def build(n):
                x = lib.ones(8, requires_grad=True)
                y = x
                for _ in range(n // 2):
                    y = y * 1.0001
                    y = y + 0.5
                return x, y
        else:
            def build(n):
                bs = dag_parents(n // 2)
                x = lib.ones(8, requires_grad=True)
                v = [x]
                app = v.append
                y = x
                for b in bs:
                    y = (y + v[b]) * 0.5
                    app(y)
                return x, y, v
        return build, backward

    if system == "hips":
        anp = mod.np

        def backward(st):
            vjp, ans = st
            return vjp(np.ones_like(ans))

        if kind == "chain":
            def build(n):
                def f(x):
                    y = x
                    for _ in range(n // 2):
                        y = y * 1.0001
                        y = y + 0.5
                    return anp.sum(y)
                return mod.make_vjp(f)(np.ones(8, dtype=np.float32))
        else:
            def build(n):
                bs = dag_parents(n // 2)

                def f(x):
                    v = [x]
                    app = v.append
                    y = x
                    for b in bs:
                        y = (y + v[b]) * 0.5
                        app(y)
                    return anp.sum(y)
                return mod.make_vjp(f)(np.ones(8, dtype=np.float32))
        return build, backward

    # the NumPy floor: the same arithmetic forward, the hand-written backward
    if kind == "chain":
        def build(n):
            x = np.ones(8, dtype=np.float32)
            y = x
            for _ in range(n // 2):
                y = y * 1.0001
                y = y + 0.5
            return n, y

        def backward(st):
            n, y = st
            y.sum()
            g = np.ones_like(y)
            for _ in range(n // 2):
                g = g * 1.0001           # the add passes g through
            return g
    else:
        def build(n):
            bs = dag_parents(n // 2)
            x = np.ones(8, dtype=np.float32)
            v = [x]
            app = v.append
            y = x
            for b in bs:
                y = (y + v[b]) * 0.5
                app(y)
            return bs, v

        def backward(st):
            bs, v = st
            m = len(bs)
            v[m].sum()
            grads = [None] * (m + 1)
            grads[m] = np.ones_like(v[m])
            for i in range(m, 0, -1):
                g = grads[i] * 0.5
                grads[i] = None
                j = i - 1
                h = grads[j]
                grads[j] = g if h is None else h + g
                j = bs[i - 1]
                h = grads[j]
                grads[j] = g if h is None else h + g
            return grads[0]
    return build, backward


def _as_array(g):
    if hasattr(g, "detach"):
        return np.array(g.detach().numpy(), copy=True)
    return np.array(g, copy=True)


class _GCClock:
    """Wall time spent in CPython's cycle collector while installed (a gc callback)."""

    def __init__(self):
        self.total = 0.0
        self._t0 = None

    def __call__(self, phase, info):
        if phase == "start":
            self._t0 = perf_counter()
        elif self._t0 is not None:
            self.total += perf_counter() - self._t0
            self._t0 = None


def gc_examined(run):
    """Objects the cycle collector examines while run() executes: at each collection, the
    sizes of the generations it collects (counted with gc.get_objects, so not timed)."""
    seen = [0]

    def cb(phase, info):
        if phase == "start":
            seen[0] += sum(len(gc.get_objects(g)) for g in range(info["generation"] + 1))

    gc.collect()
    gc.callbacks.append(cb)
    try:
        run()
    finally:
        gc.callbacks.remove(cb)
    return seen[0]


def child(system, kind, sizes, reps_override=None, mem_nodes=MEM_NODES):
    """In a fresh process: one JSON line per size."""
    mod = load(system)
    build, backward = make_graph(system, mod, kind)
    st = build(CHECK_N)
    check = _as_array(backward(st)).tolist()
    del st
    print(json.dumps({"check_grad": check}), flush=True)
    st = build(1000)                        # warm-up: first-call costs, lazy code paths
    backward(st)
    del st
    for n in sizes:
        rec = {"n": n}
        copies = max(1, mem_nodes // n)
        if copies > 1:
            # memory of small graphs: `copies` graphs alive at once (RSS has page and arena
            # granularity; one 1,000-node graph would mostly land in memory freed earlier)
            gc.collect()
            rss0 = rss_bytes()
            sts = [build(n) for _ in range(copies)]
            rss1 = rss_bytes()
            del sts
            gc.collect()
            rec.update(bytes_per_node=(rss1 - rss0) / (n * copies),
                       bytes_left_per_node=(rss_bytes() - rss0) / (n * copies))
        rec["copies_for_memory"] = copies
        reps = reps_override or REPS.get(n, 1)
        tb, tw, tf, tc, tg = [], [], [], [], []
        for r in range(reps):
            gc.collect()
            gclock = _GCClock()
            gc.callbacks.append(gclock)
            first = r == 0 and copies == 1
            if first:
                rss0 = rss_bytes()
            c0 = cpu_time()
            t0 = perf_counter()
            st = build(n)
            t1 = perf_counter()
            if first:
                rss1 = rss_bytes()
            g = backward(st)
            t2 = perf_counter()
            c2 = cpu_time()
            gc.callbacks.remove(gclock)
            tg.append(gclock.total)
            del st, g
            t3 = perf_counter()
            if first:
                gc.collect()
                rec.update(bytes_per_node=(rss1 - rss0) / n,
                           bytes_left_per_node=(rss_bytes() - rss0) / n)
            tb.append(t1 - t0)
            tw.append(t2 - t1)
            tf.append(t3 - t2)
            tc.append(c2 - c0)
        tot = [a + b for a, b in zip(tb, tw)]
        med = statistics.median
        rec.update({
            "runs": reps,
            "us_per_node": med(tot) / n * 1e6,
            "us_per_node_min": min(tot) / n * 1e6,
            "cpu_us_per_node": med(tc) / n * 1e6,
            "build_us_per_node": med(tb) / n * 1e6,
            "backward_us_per_node": med(tw) / n * 1e6,
            "free_us_per_node": med(tf) / n * 1e6,
            "seconds_one_run": med(tot),
            "gc_us_per_node": med(tg) / n * 1e6,
            "gc_share": med(g / t for g, t in zip(tg, tot)),
            "gc_examined_per_node": gc_examined(lambda: backward(build(n))) / n,
        })
        print(json.dumps(rec), flush=True)


# ---------------------------------------------------------------------------------------------
# parent

def _spawn(system, kind, sizes, reps=None, mem_nodes=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", system, kind,
           ",".join(map(str, sizes))] + (["--_reps", str(reps)] if reps else []) + (
               ["--_mem", str(mem_nodes)] if mem_nodes else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(proc, timeout):
    """-> (check gradient, [size records], error or None)"""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err = f"timeout after {timeout} s"
    recs = []
    check = None
    for ln in out.splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        if "check_grad" in d:
            check = d["check_grad"]
        else:
            recs.append(d)
    if proc.returncode != 0:
        tail = err if err.startswith("timeout") else (err.strip().splitlines() or ["?"])[-1]
        return check, recs, f"exit {proc.returncode}: {tail[:200]}"
    return check, recs, None


def _mem_available():
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemAvailable:"):
                    return int(ln.split()[1]) * 1024
    except OSError:
        pass
    return None


def systems_available(use_torch=True, use_hips=True):
    out = ["cgrad", "numpy"]
    if use_torch and available("torch"):
        out.append("torch")
    if use_hips and available("hips"):
        out.append("hips")
    return out


def start(quick=False, systems=None):
    """Quick mode: every (system, shape) child started at once; returns a handle for finish()."""
    systems = systems or systems_available()
    return {"quick": True, "sizes": list(QUICK_SIZES), "systems": systems,
            "procs": {(s, k): _spawn(s, k, QUICK_SIZES, reps=1, mem_nodes=10_000)
                      for k in KINDS for s in systems}}


def finish(handle, timeout=120):
    res = _empty(handle["sizes"], handle["systems"], quick=True)
    for (s, k), proc in handle["procs"].items():
        check, recs, err = _collect(proc, timeout)
        _store(res, s, k, check, recs, err)
    _checks(res)
    return res


def _empty(sizes, systems, quick=False, budget=None):
    return {"sizes": list(sizes), "systems": list(systems), "kinds": list(KINDS), "quick": quick,
            "budget_s": budget, "results": {k: {s: {} for s in systems} for k in KINDS},
            "skipped": [], "errors": [], "check_grads": {k: {} for k in KINDS},
            "grad_check": {k: {} for k in KINDS}}


def _store(res, s, k, check, recs, err):
    if check is not None:
        res["check_grads"][k][s] = check
    for d in recs:
        res["results"][k][s][str(d["n"])] = d
    if err:
        res["errors"].append(f"{k}/{s}: {err}")


def _checks(res):
    for k in KINDS:
        grads = res["check_grads"][k]
        ref = grads.get("numpy")
        for s, g in grads.items():
            if s != "numpy" and ref is not None:
                res["grad_check"][k][s] = close(np.array(g), np.array(ref), 1e-4)


def run(quick=False, systems=None, sizes=None, budget=120.0, timeout=900, log=None):
    """Full scaling run: fresh subprocess per (size, shape, system), sizes ascending."""
    if quick:
        return finish(start(True, systems))
    systems = systems or systems_available()
    sizes = sizes or SIZES
    res = _empty(sizes, systems, budget=budget)
    stopped = {}
    for n in sizes:
        for k in KINDS:
            for s in systems:
                if (s, k) in stopped:
                    continue
                prev = [d for d in res["results"][k][s].values() if d["n"] < n]
                if prev:
                    p = max(prev, key=lambda d: d["n"])
                    est = p["us_per_node"] * 1e-6 * n * (1.15 if n >= 100_000 else 1.0)
                    est_one = est
                    est *= REPS.get(n, 1)
                    mem = p["bytes_per_node"] * n
                    avail = _mem_available()
                    why = None
                    if est_one > budget:
                        why = (f"one run predicted {est_one:.0f} s from {p['n']:,} nodes "
                               f"> budget {budget:g} s")
                    elif avail and mem > avail / 2:
                        why = (f"predicted {mem / 2 ** 30:.1f} GiB > half the available "
                               f"memory")
                    if why:
                        res["skipped"].append({"kind": k, "system": s, "n": n, "why": why})
                        stopped[(s, k)] = why
                        if log:
                            print(f"  [scaling {k} {s} {n:,}: skipped: {why}]", file=log,
                                  flush=True)
                        continue
                t0 = perf_counter()
                check, recs, err = _collect(_spawn(s, k, [n]), timeout)
                if n != sizes[0]:
                    check = None           # the check is the same in every child: keep one
                _store(res, s, k, check, recs, err)
                if err:
                    stopped[(s, k)] = err
                if log:
                    print(f"  [scaling {k} {s} {n:,}: {perf_counter() - t0:.1f} s"
                          f"{' ' + err if err else ''}]", file=log, flush=True)
    _checks(res)
    return res


def _grid(res, cell, extra=None):
    """Lines of a text table: one row per (shape, system), cell(record) per size, then the
    columns of extra(records done) -> {header: text}."""
    sizes = res["sizes"]
    rows, extra_head = [], []
    for k in res["kinds"]:
        for s in res["systems"]:
            d = res["results"][k].get(s, {})
            cells = ["-" if str(n) not in d else cell(d[str(n)]) for n in sizes]
            more = extra([d[str(n)] for n in sizes if str(n) in d]) if extra else {}
            extra_head = extra_head or list(more)
            rows.append([k if s == res["systems"][0] else "", s] + cells + list(more.values()))
    head = ["shape", "system"] + [f"{n:,} nodes" for n in sizes] + extra_head
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip()]
    out.append("-" * len(out[-1]))
    return out + ["  ".join(v.ljust(x) for v, x in zip(r, w)).rstrip() for r in rows]


def _ends(done):
    if len(done) < 2:
        return {"largest/smallest": "-", "largest/previous": "-"}
    first, prev, last = done[0], done[-2], done[-1]
    return {"largest/smallest": f"{last['us_per_node'] / first['us_per_node']:.2f}x time, "
                                f"{last['bytes_per_node'] / max(first['bytes_per_node'], 1):.2f}x "
                                "bytes",
            "largest/previous": f"{last['us_per_node'] / prev['us_per_node']:.2f}x time"}


def render(res):
    out = ["Scaling: median us per node, build + backward, wall (cpu), and bytes per node (RSS "
           "growth while building; small graphs: several copies alive); "
           + ("quick: one process per shape and system, approximate RSS" if res["quick"]
              else "one fresh process per cell")]
    out += _grid(res, lambda r: f"{r['us_per_node']:.2f} ({r['cpu_us_per_node']:.2f}) us, "
                                f"{r['bytes_per_node']:.0f} B", _ends)
    out.append("")
    out.append("Cycle collector (CPython's gc) during build + backward: share of the wall time, "
               "and objects it examined per node (at each collection, the sizes of the "
               "generations collected; bounded per node = linear total work)")
    out += _grid(res, lambda r: "-" if "gc_share" not in r else
                 f"{100 * r['gc_share']:.0f}%, {r['gc_examined_per_node']:.1f}")
    for sk in res["skipped"]:
        out.append(f"skipped {sk['kind']}/{sk['system']} at {sk['n']:,} nodes: {sk['why']}")
    for e in res["errors"]:
        out.append(f"ERROR scaling {e}")
    for k, d in res["grad_check"].items():
        bad = {s: m for s, m in d.items() if m != "ok"}
        out.append(f"gradients ({k}, {CHECK_N} nodes) vs NumPy floor: "
                   + (", ".join(f"{s} {m}" for s, m in bad.items()) if bad else
                      "ok for " + ", ".join(d) if d else "not checked"))
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--budget", type=float, default=120.0)
    p.add_argument("--sizes")
    p.add_argument("--systems")
    p.add_argument("--json")
    p.add_argument("--_child", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--_reps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_mem", type=int, default=MEM_NODES, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        s, k, ns = a._child
        child(s, k, [int(x) for x in ns.split(",")], a._reps, a._mem)
        return 0
    res = run(quick=a.quick, budget=a.budget, log=sys.stderr,
              systems=a.systems.split(",") if a.systems else None,
              sizes=tuple(int(x) for x in a.sizes.split(",")) if a.sizes else None)
    print(render(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
