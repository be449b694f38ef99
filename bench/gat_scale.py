#!/usr/bin/env python
"""GAT training steps on large synthetic graphs: cgrad vs torch-geometric and a jit JAX GAT.

    python bench/gat_scale.py                      # 100k/1M, 300k/3M, 1M/10M
    python bench/gat_scale.py --quick              # tiny graphs, seconds (smoke test)
    python bench/gat_scale.py --sizes 100000:1000000 --steps 5 --repeats 2 --json out.json

Graphs: N nodes, E random directed edges (seeded, numpy default_rng(0)) plus a self loop per
node, duplicates merged; 128 dense float32 features per node (standard normal), 16 classes,
a label per node. Model: the GAT of examples/gat.py (8 heads x 8 hidden units, ELU, one
output head, dropout 0.6 on the inputs of both layers and on the attention coefficients,
LeakyReLU 0.2, log_softmax), its GATLayer code reused; only the first layer's input is a
dense ``dropout(x) @ W`` here (the features are dense). A training step is forward with
dropout, nll loss over all nodes, backward and Adam (lr 0.005, weight decay 5e-4).

Systems (each cell runs in a fresh subprocess, so its peak RSS is its own):

* ``cgrad``: examples/gat.py's GATLayer, one sparse thread (CGRAD_SPARSE_THREADS=1);
* ``cgrad-2t``: the same with CGRAD_SPARSE_THREADS=2 (the sparse kernels' second thread;
  BLAS still one thread), results bitwise equal to ``cgrad``;
* ``pyg``: torch_geometric's GATConv (the same architecture; its standard GAT), one thread;
  skipped with a note when torch_geometric is not importable;
* ``jax``: a GAT written with jax.ops.segment_sum/segment_max, the whole training step
  (forward, grad, Adam) under jax.jit, one thread; skipped when jax is not importable.

The first step is timed separately: cgrad builds and caches the sparse structure of the
graph there (the CSR of its (N, N) pattern, shared by all heads), JAX compiles. Then ``--steps``
steps are timed; per cell the median (and min). ``--repeats`` runs the whole grid again in
reversed system order (interleaving, against machine drift); the table shows the median over
repeats. Peak memory: ru_maxrss of the cell's process (its import baseline shown apart).
At 1M/10M PyG and JAX are skipped unless ``--all-big`` (each needed more than 12 GB when
last tried on a 23 GB machine). Threads: OPENBLAS/OMP/MKL=1, torch.set_num_threads(1), XLA one
thread.
"""
import os
import sys

if __name__ == "__main__":          # the script and its cells; not when imported (tests)
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")

FULL_SIZES = ((100_000, 1_000_000), (300_000, 3_000_000), (1_000_000, 10_000_000))
QUICK_SIZES = ((2_000, 20_000), (5_000, 50_000))
SYSTEMS = ("cgrad", "cgrad-2t", "pyg", "jax")
BIG_NODES = 1_000_000
FEATURES, CLASSES, HEADS, HIDDEN, DROPOUT, ALPHA = 128, 16, 8, 8, 0.6, 0.2
LR, WD = 0.005, 5e-4


def rss_mb():
    """Peak resident set size of this process so far, in MB (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_data(n, e, seed=0):
    """(edge_index (2, e) int64, features (n, 128) float32, labels (n,) int64), seeded."""
    import numpy as np
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e), dtype=np.int64)
    x = rng.standard_normal((n, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, size=n, dtype=np.int64)
    return ei, x, y


def _load_example():
    spec = importlib.util.spec_from_file_location("gat_example", os.path.join(EXAMPLES, "gat.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------
# systems: each returns (graph_seconds, step) where step() runs one training step -> loss

def setup_cgrad(ei, x, y, n):
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import cgrad
    import cgrad.nn.functional as F
    G = _load_example()
    cgrad.manual_seed(0)
    t0 = time.perf_counter()
    graph = G.Graph(ei, n)
    t_graph = time.perf_counter() - t0
    hidden = G.GATLayer(FEATURES, HIDDEN, HEADS, DROPOUT, ALPHA, concat=True)
    out = G.GATLayer(HIDDEN * HEADS, CLASSES, 1, DROPOUT, ALPHA, concat=False)
    params = list(hidden.parameters()) + list(out.parameters())
    opt = cgrad.optim.Adam(params, lr=LR, weight_decay=WD)
    X, Y = cgrad.from_numpy(x), cgrad.from_numpy(y)

    def step():
        opt.zero_grad()
        h = F.dropout(X, DROPOUT, True) @ hidden.W
        h = F.elu(hidden(h, graph))
        h = F.dropout(h, DROPOUT, True)
        h = F.elu(out(h @ out.W, graph))
        loss = F.nll_loss(F.log_softmax(h, dim=1), Y)
        loss.backward()
        opt.step()
        return loss.item()
    return t_graph, step


def setup_pyg(ei, x, y, n):
    import torch
    torch.set_num_threads(1)
    import torch.nn.functional as F
    from torch_geometric.nn import GATConv
    torch.manual_seed(0)
    t0 = time.perf_counter()
    edge_index = torch.from_numpy(ei)       # GATConv adds self loops, merges nothing
    t_graph = time.perf_counter() - t0
    conv1 = GATConv(FEATURES, HIDDEN, heads=HEADS, dropout=DROPOUT, negative_slope=ALPHA)
    conv2 = GATConv(HIDDEN * HEADS, CLASSES, heads=1, concat=False, dropout=DROPOUT,
                    negative_slope=ALPHA)
    params = list(conv1.parameters()) + list(conv2.parameters())
    opt = torch.optim.Adam(params, lr=LR, weight_decay=WD)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        h = F.dropout(X, DROPOUT, True)
        h = F.elu(conv1(h, edge_index))
        h = F.dropout(h, DROPOUT, True)
        h = F.elu(conv2(h, edge_index))
        loss = F.nll_loss(F.log_softmax(h, dim=1), Y)
        loss.backward()
        opt.step()
        return loss.item()
    return t_graph, step


def setup_jax(ei, x, y, n):
    import jax
    import jax.numpy as jnp
    import numpy as np
    t0 = time.perf_counter()
    loops = np.arange(n, dtype=np.int64)
    lin = np.concatenate([ei[0], loops]) * n + np.concatenate([ei[1], loops])
    lin = np.unique(lin)
    row = jnp.asarray((lin // n).astype(np.int32))
    col = jnp.asarray((lin % n).astype(np.int32))
    t_graph = time.perf_counter() - t0

    key = jax.random.PRNGKey(0)
    k1, k2, k3, k4, k5, k6, key = jax.random.split(key, 7)

    def glorot(k, shape):
        return jax.random.normal(k, shape, jnp.float32) * (2.0 / sum(shape)) ** 0.5
    params = {"W1": glorot(k1, (FEATURES, HEADS * HIDDEN)), "as1": glorot(k2, (HEADS, HIDDEN)),
              "ad1": glorot(k3, (HEADS, HIDDEN)), "W2": glorot(k4, (HEADS * HIDDEN, CLASSES)),
              "as2": glorot(k5, (1, CLASSES)), "ad2": glorot(k6, (1, CLASSES))}

    def dropout(k, v):
        keep = jax.random.bernoulli(k, 1.0 - DROPOUT, v.shape)
        return jnp.where(keep, v / (1.0 - DROPOUT), 0.0)

    def layer(k, h, a_s, a_d, heads, fo):
        h = h.reshape(n, heads, fo)
        s = (h * a_s).sum(-1)
        t = (h * a_d).sum(-1)
        e = jax.nn.leaky_relu(s[row] + t[col], ALPHA)                 # (E, H)
        m = jax.lax.stop_gradient(jax.ops.segment_max(e, row, n, indices_are_sorted=True))
        p = jnp.exp(e - m[row])
        den = jax.ops.segment_sum(p, row, n, indices_are_sorted=True)
        p = dropout(k, p)
        out = jax.ops.segment_sum(p[:, :, None] * h[col], row, n, indices_are_sorted=True)
        return out / den[:, :, None]

    X, Y = jnp.asarray(x), jnp.asarray(y)

    def loss_fn(params, k):
        ka, kb, kc, kd = jax.random.split(k, 4)
        h = dropout(ka, X) @ params["W1"]
        h = jax.nn.elu(layer(kb, h, params["as1"], params["ad1"], HEADS, HIDDEN)
                       .reshape(n, HEADS * HIDDEN))
        h = dropout(kc, h) @ params["W2"]
        h = jax.nn.elu(layer(kd, h, params["as2"], params["ad2"], 1, CLASSES).reshape(n, -1))
        logp = jax.nn.log_softmax(h, axis=1)
        return -jnp.take_along_axis(logp, Y[:, None], 1).mean()

    @jax.jit
    def train_step(params, m, v, t, k):
        loss, g = jax.value_and_grad(loss_fn)(params, k)
        b1, b2, eps = 0.9, 0.999, 1e-8
        g = jax.tree_util.tree_map(lambda gi, p: gi + WD * p, g, params)
        m = jax.tree_util.tree_map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
        v = jax.tree_util.tree_map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)
        params = jax.tree_util.tree_map(
            lambda p, mi, vi: p - LR * (mi / (1 - b1 ** t)) / (jnp.sqrt(vi / (1 - b2 ** t)) + eps),
            params, m, v)
        return params, m, v, loss

    state = {"params": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "v": jax.tree_util.tree_map(jnp.zeros_like, params), "t": 0, "key": key}

    def step():
        state["t"] += 1
        state["key"], k = jax.random.split(state["key"])
        state["params"], state["m"], state["v"], loss = train_step(
            state["params"], state["m"], state["v"], float(state["t"]), k)
        return float(loss)
    return t_graph, step


def available(system):
    """(ok, note): whether a system can run here. Looked up, not imported: the cells' peak
    RSS starts from this process's (Linux keeps ru_maxrss across fork and exec)."""
    mod = {"pyg": "torch_geometric", "jax": "jax"}.get(system)
    if mod is not None and importlib.util.find_spec(mod) is None:
        return False, f"{mod} not importable"
    return True, ""


def run_cell(system, n, e, steps):
    """In this process: build the data and model, time the first step and `steps` more."""
    base = rss_mb()
    ei, x, y = make_data(n, e)
    setup = {"cgrad": setup_cgrad, "cgrad-2t": setup_cgrad, "pyg": setup_pyg,
             "jax": setup_jax}[system]
    base_data = rss_mb()
    t_graph, step = setup(ei, x, y, n)
    gc.collect()
    t0 = time.perf_counter()
    loss0 = step()
    first = time.perf_counter() - t0
    times = []
    loss = loss0
    for _ in range(steps):
        gc.collect()
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    return {"system": system, "nodes": n, "edges": e, "graph_s": t_graph, "first_s": first,
            "step_s": statistics.median(times) if times else float("nan"),
            "step_min_s": min(times) if times else float("nan"), "steps": len(times),
            "rss_import_mb": base, "rss_data_mb": base_data, "rss_peak_mb": rss_mb(),
            "loss_first": loss0, "loss_last": loss}


def spawn_cell(system, n, e, steps, timeout):
    env = dict(os.environ)
    env["CGRAD_SPARSE_THREADS"] = "2" if system == "cgrad-2t" else "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--cell", system, str(n), str(e),
           "--steps", str(steps)]
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"system": system, "nodes": n, "edges": e, "error": f"timeout {timeout} s"}
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"system": system, "nodes": n, "edges": e,
            "error": f"exit {res.returncode}: {tail[0][:200]}"}


def fmt_table(results, sizes, systems):
    lines = ["| graph (nodes / edges) | system | first step s | step s (median) | min | "
             "peak RSS MB (import) | step / cgrad |", "|---|---|---|---|---|---|---|"]
    for n, e in sizes:
        cells = {s: results.get((s, n, e), []) for s in systems}
        ref = [c["step_s"] for c in cells.get("cgrad", []) if "step_s" in c]
        ref = statistics.median(ref) if ref else None
        for s in systems:
            runs = cells[s]
            if not runs:
                continue
            ok = [c for c in runs if "step_s" in c]
            if not ok:
                lines.append(f"| {n:,} / {e:,} | {s} | {runs[0].get('error', 'skipped')} "
                             f"| | | | |")
                continue
            med = statistics.median(c["step_s"] for c in ok)
            first = statistics.median(c["first_s"] for c in ok)
            mn = min(c["step_min_s"] for c in ok)
            peak = max(c["rss_peak_mb"] for c in ok)
            imp = ok[0]["rss_import_mb"]
            ratio = f"{med / ref:.2f}" if ref else "-"
            lines.append(f"| {n:,} / {e:,} | {s} | {first:.2f} | {med:.3f} | {mn:.3f} | "
                         f"{peak:,.0f} ({imp:,.0f}) | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny graphs, 2 steps")
    ap.add_argument("--sizes", default=None, help="N:E[,N:E...]")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--steps", type=int, default=None, help="timed steps after the first")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--all-big", action="store_true", help="run PyG/JAX at >= 1M nodes too")
    ap.add_argument("--timeout", type=float, default=1800.0, help="per cell, seconds")
    ap.add_argument("--json", default=None, help="write the raw results here")
    ap.add_argument("--cell", nargs=3, metavar=("SYSTEM", "N", "E"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cell:
        system, n, e = args.cell[0], int(args.cell[1]), int(args.cell[2])
        print(json.dumps(run_cell(system, n, e, args.steps if args.steps is not None else 3)))
        return 0
    if args.sizes:
        sizes = tuple(tuple(int(v) for v in s.split(":")) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    steps = args.steps if args.steps is not None else (2 if args.quick else 3)
    if args.quick:
        print("--quick: a smoke test, not a measurement (tiny graphs)")
    systems = [s for s in args.systems.split(",") if s]
    notes = []
    runnable = []
    for s in systems:
        ok, note = available(s)
        if ok:
            runnable.append(s)
        else:
            notes.append(f"{s}: skipped, {note}")
    results = {}
    for rep in range(args.repeats):
        order = runnable if rep % 2 == 0 else runnable[::-1]
        for n, e in sizes:
            for s in order:
                if s in ("pyg", "jax") and n >= BIG_NODES and not args.all_big:
                    results.setdefault((s, n, e), []).append(
                        {"error": "skipped at >= 1M nodes (use --all-big)"})
                    continue
                r = spawn_cell(s, n, e, steps, args.timeout)
                results.setdefault((s, n, e), []).append(r)
                msg = r.get("error") or (f"first {r['first_s']:.2f} s, step {r['step_s']:.3f} s, "
                                         f"peak {r['rss_peak_mb']:,.0f} MB, loss "
                                         f"{r['loss_first']:.3f} -> {r['loss_last']:.3f}")
                print(f"[{rep}] {n}/{e} {s}: {msg}", flush=True)
    print()
    print(fmt_table(results, sizes, systems))
    for note in notes:
        print("note:", note)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"key": list(k), "runs": v} for k, v in results.items()], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
