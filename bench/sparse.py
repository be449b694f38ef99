#!/usr/bin/env python
"""Sparse benchmarks: SpMM forward+backward and SDDMM alone.

    python bench/sparse.py              # full sizes, prints two tables
    python bench/sparse.py --quick      # small sizes, 2 repetitions (smoke test)
    python bench/sparse.py --json out.json --repeats 9 --no-torch

1. ``spmm``: ``out = A @ B`` and its backward for ``dL/dout = G`` (a fixed random array), A an
   N x N sparse matrix with nnz random entries given as (indices, values), B (N, F); the
   gradients of the values and of B. N = 20,000, nnz = 200,000, F = 64, float32 and float64.
   Systems:

   * ``cgrad``: ``cgrad.spmm(indices, values, (N, N), B)`` then ``out.backward(G)``; the
     indices tensor is the same every step, so its CSR structure is cached (as in a
     training loop);
   * ``scipy floor``: the hand-written equivalent with the structure built once outside the
     timing: forward ``csr_array((values[perm], col, indptr)) @ B``, backward ``A.T @ G``
     and ``einsum('ij,ij->i', G[row], B[col])`` (what one writes by hand);
   * ``torch sparse.mm``: ``torch.sparse.mm(torch.sparse_coo_tensor(i, v, (N, N)), B)`` and
     backward (torch 2.13 builds a dense N x N gradient for COO);
   * ``torch pyGAT``: pyGAT's SpecialSpmmFunction on torch (``grad_output.matmul(b.t())``:
     a dense N x N matrix).

   The gradients of every system are checked against the floor's before timing.
2. ``sddmm``: ``out[k] = dot(G[row[k]], B[col[k]])`` alone, N = 100,000, nnz = 1,000,000,
   F = 64, float32: the compiled kernel (csrc/cg_sparse.c; 1 and 2 threads), the chunked
   NumPy fallback, and the one-line einsum over ``G[row]`` and ``B[col]``.

Method: OPENBLAS/OMP/MKL threads = 1 (set before NumPy is imported; torch.set_num_threads(1));
one untimed warm-up per system, then ``--repeats`` repetitions interleaved across systems;
medians (min); ratios of medians. Peak memory of one step: ``trace`` = tracemalloc peak above
the start (NumPy buffers, so exact for numpy/scipy/cgrad; n/a for torch), ``rss`` = VmHWM
growth over the RSS at the start of the step (after resetting VmHWM through
/proc/self/clear_refs; Linux; all systems alike, includes allocator caching).
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:     # imported by path (tests)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import settle  # noqa: E402

warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FULL = {"spmm": (20_000, 200_000, 64), "sddmm": (100_000, 1_000_000, 64), "repeats": 7}
QUICK = {"spmm": (2_000, 20_000, 16), "sddmm": (10_000, 100_000, 16), "repeats": 2}


def load_cgrad():
    try:
        import cgrad
    except ImportError:
        sys.path.insert(0, ROOT)
        import cgrad
    return cgrad


def load_torch():
    try:
        import torch
    except Exception:
        return None
    torch.set_num_threads(1)
    return torch


# ---------------------------------------------------------------------------------------------
# memory

def _status(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure_peak(step, trace=True):
    """(tracemalloc peak, rss peak) in bytes of one call of step()."""
    gc.collect()
    rss0 = _status("VmRSS")
    have_rss = rss0 is not None and _reset_hwm()
    if trace:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    try:
        step()
        tpeak = tracemalloc.get_traced_memory()[1] - base if trace else None
    finally:
        if trace:
            tracemalloc.stop()
    rpeak = (_status("VmHWM") - rss0) if have_rss else None
    return tpeak, rpeak


# ---------------------------------------------------------------------------------------------
# spmm systems: each make_*() returns step() -> (grad_values, grad_b) as ndarrays

def _problem(N, nnz, F, dtype, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.vstack([rng.integers(0, N, nnz), rng.integers(0, N, nnz)]).astype(np.int64)
    vals = rng.standard_normal(nnz).astype(dtype)
    B = rng.standard_normal((N, F)).astype(dtype)
    G = rng.standard_normal((N, F)).astype(dtype)
    return idx, vals, B, G


def make_floor(N, idx, vals, B, G):
    row, col = idx
    perm = np.argsort(row * N + col, kind="stable")
    indptr = np.zeros(N + 1, dtype=np.int32)
    np.cumsum(np.bincount(row, minlength=N), out=indptr[1:])
    ind = col[perm].astype(np.int32)

    def step():
        A = sp.csr_array((vals[perm], ind, indptr), shape=(N, N))
        out = A @ B                                    # forward
        gb = A.T @ G                                   # backward: dense operand
        gv = np.einsum("ij,ij->i", G[row], B[col])     # backward: values (SDDMM)
        del out
        return gv, gb
    return step


def make_cgrad(cgrad, N, idx, vals, B, G):
    it = cgrad.tensor(idx)
    Gt = cgrad.tensor(G)

    def step():
        v = cgrad.tensor(vals, requires_grad=True)
        b = cgrad.tensor(B, requires_grad=True)
        out = cgrad.spmm(it, v, (N, N), b)
        out.backward(Gt)
        return v.grad.numpy(), b.grad.numpy()
    return step


def make_torch_mm(torch, N, idx, vals, B, G):
    ti, tG = torch.tensor(idx), torch.tensor(G)

    def step():
        v = torch.tensor(vals, requires_grad=True)
        b = torch.tensor(B, requires_grad=True)
        a = torch.sparse_coo_tensor(ti, v, (N, N))
        torch.sparse.mm(a, b).backward(tG)
        return v.grad.numpy(), b.grad.numpy()
    return step


def make_torch_pygat(torch, N, idx, vals, B, G):
    # pyGAT's layers.py, verbatim, as examples/pygat_torch.py carries it
    from gat import load_torch_gat
    SpecialSpmmFunction = load_torch_gat(set_threads=False).SpecialSpmmFunction

    ti, tG = torch.tensor(idx), torch.tensor(G)

    def step():
        v = torch.tensor(vals, requires_grad=True)
        b = torch.tensor(B, requires_grad=True)
        SpecialSpmmFunction.apply(ti, v, torch.Size([N, N]), b).backward(tG)
        return v.grad.numpy(), b.grad.numpy()
    return step


def _close(got, ref, dtype):
    tol = 2e-3 if dtype == np.float32 else 1e-9
    for g, r in zip(got, ref):
        scale = max(1.0, float(np.abs(r).max()))
        if g.shape != r.shape or not np.allclose(g, r, rtol=tol, atol=tol * scale):
            return "MISMATCH"
    return "ok"


def _time(steps, repeats, warmup=1):
    """Interleaved timing: name -> list of seconds."""
    out = {k: [] for k in steps}
    for k, f in steps.items():
        for _ in range(warmup):
            f()
    for r in range(repeats):
        names = list(steps)
        names = names[r % len(names):] + names[:r % len(names)]
        for k in names:
            settle()
            t0 = time.perf_counter()
            steps[k]()
            out[k].append(time.perf_counter() - t0)
    return out


def _stats(ts):
    return {"median": statistics.median(ts) * 1e3, "min": min(ts) * 1e3, "n": len(ts)}


def bench_spmm(cgrad, torch, N, nnz, F, dtype, repeats, log=None):
    idx, vals, B, G = _problem(N, nnz, F, dtype)
    steps = {"scipy floor": make_floor(N, idx, vals, B, G),
             "cgrad": make_cgrad(cgrad, N, idx, vals, B, G)}
    if torch is not None:
        steps["torch sparse.mm"] = make_torch_mm(torch, N, idx, vals, B, G)
        steps["torch pyGAT"] = make_torch_pygat(torch, N, idx, vals, B, G)
    ref = steps["scipy floor"]()
    rows = []
    checks = {}
    for k, f in list(steps.items()):
        try:
            checks[k] = "ref" if k == "scipy floor" else _close(f(), ref, dtype)
        except Exception as e:       # e.g. out of memory in torch's dense gradient
            checks[k] = f"error: {type(e).__name__}: {e}"[:120]
            del steps[k]
    if log:
        print(f"  [spmm {np.dtype(dtype).name}: checked {checks}]", file=log, flush=True)
    times = _time(steps, repeats)
    for k in steps:
        tpeak, rpeak = measure_peak(steps[k], trace=not k.startswith("torch"))
        rows.append({"bench": "spmm", "dtype": np.dtype(dtype).name, "system": k,
                     "N": N, "nnz": nnz, "F": F, **_stats(times[k]),
                     "trace_peak_mb": None if tpeak is None else tpeak / 2 ** 20,
                     "rss_peak_mb": None if rpeak is None else rpeak / 2 ** 20,
                     "check": checks[k]})
    for k in checks:
        if k not in steps:
            rows.append({"bench": "spmm", "dtype": np.dtype(dtype).name, "system": k, "N": N,
                         "nnz": nnz, "F": F, "check": checks[k]})
    _ratios(rows, "scipy floor", "cgrad")
    return rows


def bench_sddmm(cgrad, N, nnz, F, repeats, full_einsum=True, log=None):
    from cgrad.sparse import _kernels
    rng = np.random.default_rng(1)
    row = rng.integers(0, N, nnz)
    col = rng.integers(0, N, nnz)
    G = rng.standard_normal((N, F)).astype(np.float32)
    B = rng.standard_normal((N, F)).astype(np.float32)
    steps = {"numpy chunked": lambda: _kernels.sddmm_numpy(row, col, G, B)}
    if _kernels.extension_available():
        from cgrad import _sparse
        steps["C 1 thread"] = lambda: _sparse.sddmm(row, col, G, B, None, 1)
        steps["C 2 threads"] = lambda: _sparse.sddmm(row, col, G, B, None, 2)
    if full_einsum:
        steps["numpy einsum G[row]"] = lambda: np.einsum("ij,ij->i", G[row], B[col])
    ref = steps["numpy chunked"]()
    checks = {k: ("ref" if k == "numpy chunked" else
                  ("ok" if np.allclose(f(), ref, rtol=1e-4, atol=1e-3) else "MISMATCH"))
              for k, f in steps.items()}
    times = _time(steps, repeats)
    rows = []
    for k in steps:
        tpeak, rpeak = measure_peak(steps[k])
        rows.append({"bench": "sddmm", "dtype": "float32", "system": k, "N": N, "nnz": nnz,
                     "F": F, **_stats(times[k]),
                     "trace_peak_mb": tpeak / 2 ** 20, "rss_peak_mb":
                     None if rpeak is None else rpeak / 2 ** 20, "check": checks[k]})
    _ratios(rows, "numpy chunked", "C 1 thread")
    if log:
        print("  [sddmm done]", file=log, flush=True)
    return rows


def _ratios(rows, floor, ours):
    by = {(r["dtype"], r["system"]): r for r in rows if "median" in r}
    for r in rows:
        f = by.get((r["dtype"], floor))
        o = by.get((r["dtype"], ours))
        if "median" in r and f:
            r["vs_" + floor.replace(" ", "_")] = r["median"] / f["median"]
        if "median" in r and o:
            r["vs_" + ours.replace(" ", "_")] = r["median"] / o["median"]


def run(quick=False, repeats=None, use_torch=True, dtypes=("float32", "float64"), log=None):
    """Both benchmarks -> list of row dicts (bench, dtype, system, median/min ms, peaks MB,
    check, ratios). See render()."""
    cfg = QUICK if quick else FULL
    repeats = repeats or cfg["repeats"]
    cgrad = load_cgrad()
    torch = load_torch() if use_torch else None
    rows = []
    N, nnz, F = cfg["spmm"]
    for dt in dtypes:
        rows += bench_spmm(cgrad, torch, N, nnz, F, np.dtype(dt).type, repeats, log=log)
    N, nnz, F = cfg["sddmm"]
    rows += bench_sddmm(cgrad, N, nnz, F, repeats, log=log)
    return rows


def render(rows):
    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    out = []
    for bench, title in (("spmm", "SpMM forward+backward (values and dense operand)"),
                         ("sddmm", "SDDMM alone (gradient of the values)")):
        rs = [r for r in rows if r["bench"] == bench]
        if not rs:
            continue
        r0 = rs[0]
        out.append(f"{title}: N={r0['N']:,}, nnz={r0['nnz']:,}, F={r0['F']}; ms median (min)")
        ratio_keys = sorted({k for r in rs for k in r if k.startswith("vs_")})
        head = ["dtype", "system", "ms", *[k.replace("_", " ") for k in ratio_keys],
                "trace MB", "rss MB", "check"]
        table = []
        for r in rs:
            ms = f"{r['median']:.1f} ({r['min']:.1f})" if "median" in r else "-"
            table.append([r["dtype"], r["system"], ms,
                          *[f(r.get(k), "{:.2f}x") for k in ratio_keys],
                          f(r.get("trace_peak_mb")), f(r.get("rss_peak_mb")), r["check"]])
        w = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
        out.append("  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip())
        out.append("-" * len(out[-1]))
        out += ["  ".join(v.ljust(x) for v, x in zip(t, w)).rstrip() for t in table]
        out.append("")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--json")
    a = p.parse_args(argv)
    rows = run(quick=a.quick, repeats=a.repeats, use_torch=not a.no_torch,
               dtypes=tuple(a.dtypes.split(",")), log=sys.stderr)
    print(render(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
