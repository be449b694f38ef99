"""Workload 8, double backward: the Hessian-vector product of an MLP loss.

A tanh MLP (``sizes`` = in, hidden..., classes), cross-entropy with class indices (mean), and
a fixed random direction ``v`` (one array per parameter). ``H v`` with respect to all
parameters, computed by every system the way its users would:

* ``cgrad`` and ``torch`` (the same source, only the module differs): forward with
  ``F.linear`` / ``tanh`` / ``F.cross_entropy``; ``gs = autograd.grad(loss, params,
  create_graph=True)``; ``hv = autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)),
  params)``. Phases: fwd, grad (first backward, recording its graph), hvp (the dot and the
  second backward).
* ``hips`` (HIPS autograd): ``hvp_fn, g = make_hvp(loss)(params); hv = hvp_fn(vs)``
  (reverse-over-reverse, as its docs advise; params and vs are tuples). Phases: grad (the
  traced forward and first backward), hvp.
* ``numpy`` (the floor): Pearlmutter's R-operator written by hand: the forward pass with its
  directional derivative R{.} alongside, then the backward pass with R{.} of every gradient.
  About 2x the work of a gradient, no graph, no recording. The floor is itself checked
  against central differences of its gradient in float64 before anything runs.

Gradients (the Hessian-vector products) of every system are checked against the floor before
timing. float32 (the default dtype). ``python bench/hvp.py [--quick]`` runs it alone.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (check_all, cpu_time, err_text, interleaved, load_cgrad,  # noqa: E402
                    load_hips, load_torch, perf_counter, stats, to_numpy)

CONFIGS = {
    "small": {"batch": 32, "sizes": (16, 32, 32, 4), "repeats": 21},
    "medium": {"batch": 256, "sizes": (256, 512, 512, 10), "repeats": 11},
}
QUICK_CONFIGS = {
    "small": {"batch": 16, "sizes": (8, 16, 16, 4), "repeats": 1},
    "medium": {"batch": 64, "sizes": (64, 128, 128, 10), "repeats": 1},
}


def make_problem(batch, sizes, dtype=np.float32, seed=0):
    """X, y, params [W1, b1, W2, b2, ...] (torch.nn.Linear's init), vs (a direction)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    params, vs = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(dtype))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(dtype))
        vs.append(rng.standard_normal((fan_out, fan_in)).astype(dtype))
        vs.append(rng.standard_normal((fan_out,)).astype(dtype))
    return X, y, params, vs


# ---------------------------------------------------------------------------------------------
# the floor: forward, R-forward, backward, R-backward by hand

def numpy_grad_hvp(X, y, params, vs):
    """(loss, gradient list, Hessian-vector product list)."""
    L = len(params) // 2
    B = X.shape[0]
    acts, racts = [X], [None]            # a_l and R{a_l} (R{X} = 0)
    a, ra = X, None
    for i in range(L):
        W, b, V, c = params[2 * i], params[2 * i + 1], vs[2 * i], vs[2 * i + 1]
        z = a @ W.T
        z += b
        rz = a @ V.T
        rz += c
        if ra is not None:
            rz += ra @ W.T
        if i < L - 1:
            a = np.tanh(z, out=z)
            ra = rz
            ra *= 1 - a * a
            acts.append(a)
            racts.append(ra)
    # softmax cross-entropy (mean): g = (p - onehot) / B, R{g} = p * (Rz - <p, Rz>) / B
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    p = z
    rows = np.arange(B)
    loss = -np.log(p[rows, y]).mean()
    rg = p * (rz - (p * rz).sum(axis=1, keepdims=True))
    rg /= B
    g = p
    g[rows, y] -= 1
    g /= B
    grads, hv = [None] * (2 * L), [None] * (2 * L)
    for i in range(L - 1, -1, -1):
        W, V = params[2 * i], vs[2 * i]
        a, ra = acts[i], racts[i]
        grads[2 * i] = g.T @ a
        grads[2 * i + 1] = g.sum(axis=0)
        hw = rg.T @ a
        if ra is not None:
            hw += g.T @ ra
        hv[2 * i] = hw
        hv[2 * i + 1] = rg.sum(axis=0)
        if i:
            ga = g @ W
            rga = rg @ W
            rga += g @ V
            d = 1 - a * a
            rg = rga * d
            rg -= 2 * ga * a * ra
            g = ga * d
    return loss, grads, hv


def verify_floor():
    """The analytic HVP against central differences of the analytic gradient (float64)."""
    X, y, params, vs = make_problem(6, (5, 7, 6, 3), np.float64, seed=3)
    _, _, hv = numpy_grad_hvp(X, y, params, vs)
    eps = 1e-6
    gp = numpy_grad_hvp(X, y, [p + eps * v for p, v in zip(params, vs)], vs)[1]
    gm = numpy_grad_hvp(X, y, [p - eps * v for p, v in zip(params, vs)], vs)[1]
    fd = [(a - b) / (2 * eps) for a, b in zip(gp, gm)]
    for h, f in zip(hv, fd):
        if not np.allclose(h, f, rtol=1e-5, atol=1e-7):
            return f"floor HVP != finite differences (max diff {np.abs(h - f).max():.3g})"
    return "ok"


def make_numpy(X, y, params, vs):
    def run():
        c0, t0 = cpu_time(), perf_counter()
        _, _, hv = numpy_grad_hvp(X, y, params, vs)
        t1, c1 = perf_counter(), cpu_time()
        return {"total": t1 - t0, "cpu": c1 - c0}, None, hv
    return run


def make_autograd(lib, X, y, params, vs):
    F = lib.nn.functional
    Xt, yt = lib.from_numpy(X), lib.from_numpy(y)
    ps = [lib.from_numpy(p.copy()).requires_grad_() for p in params]
    vt = [lib.from_numpy(v) for v in vs]
    L = len(ps) // 2
    grad = lib.autograd.grad
    tanh = lib.tanh

    def run():
        c0, t0 = cpu_time(), perf_counter()
        h = Xt
        for i in range(L):
            h = F.linear(h, ps[2 * i], ps[2 * i + 1])
            if i < L - 1:
                h = tanh(h)
        loss = F.cross_entropy(h, yt)
        t1 = perf_counter()
        gs = grad(loss, ps, create_graph=True)
        t2 = perf_counter()
        dot = (gs[0] * vt[0]).sum()
        for g, v in zip(gs[1:], vt[1:]):
            dot = dot + (g * v).sum()
        hv = grad(dot, ps)
        t3, c3 = perf_counter(), cpu_time()
        return ({"fwd": t1 - t0, "grad": t2 - t1, "hvp": t3 - t2, "total": t3 - t0,
                 "cpu": c3 - c0},
                (loss, gs, dot), hv)
    return run


def make_hips(ag, X, y, params, vs):
    anp = ag.np
    L = len(params) // 2
    rows = np.arange(X.shape[0])

    def loss(ps):
        h = X
        for i in range(L):
            h = anp.dot(h, ps[2 * i].T) + ps[2 * i + 1]
            if i < L - 1:
                h = anp.tanh(h)
        logp = h - ag.logsumexp(h, axis=1, keepdims=True)
        return -anp.mean(logp[rows, y])

    ps, vt = tuple(params), tuple(vs)
    make_hvp = ag.make_hvp(loss)

    def run():
        c0, t0 = cpu_time(), perf_counter()
        hvp_fn, _ = make_hvp(ps)
        t1 = perf_counter()
        hv = hvp_fn(vt)
        t2, c2 = perf_counter(), cpu_time()
        return ({"grad": t1 - t0, "hvp": t2 - t1, "total": t2 - t0, "cpu": c2 - c0},
                (hvp_fn,), list(hv))
    return run


def bench_config(name, cfg, libs, repeats, warmup=1):
    X, y, params, vs = make_problem(cfg["batch"], cfg["sizes"])
    runners, errors, hvs = {}, {}, {}
    for lname, mod in libs.items():
        try:
            if lname == "numpy":
                r = make_numpy(X, y, params, vs)
            elif lname == "hips":
                r = make_hips(mod, X, y, params, vs)
            else:
                r = make_autograd(mod, X, y, params, vs)
            hvs[lname] = to_numpy(r()[2])           # checked before any timing
            runners[lname] = (lambda r=r: r()[:2])
        except Exception as e:
            errors[lname] = err_text(e)
    check = check_all(hvs, "numpy", rtol=2e-3)
    samples, errs = interleaved(runners, repeats, warmup)
    errors.update(errs)
    out = {"config": name, "batch": cfg["batch"], "sizes": list(cfg["sizes"]), "n": 1,
           "unit": "HVP", "libs": {}, "grad_check": check}
    for lname, ss in samples.items():
        out["libs"][lname] = {p: stats(v, 1e3) for p, v in ss.items()}   # ms
    for lname, e in errors.items():
        out["libs"][lname] = {"error": e}
    return out


def run(quick=False, libs=None, repeats=None, log=None):
    """{'floor_check': ..., 'configs': {name: result}}; times in ms per HVP."""
    if libs is None:
        libs = {"cgrad": load_cgrad(), "numpy": np}
        for name, loader in (("torch", load_torch), ("hips", load_hips)):
            mod = loader()
            if mod is not None:
                libs[name] = mod
    cfgs = QUICK_CONFIGS if quick else CONFIGS
    res = {"floor_check": verify_floor(), "configs": {}}
    for name, cfg in cfgs.items():
        res["configs"][name] = bench_config(name, cfg, libs, repeats or cfg["repeats"],
                                            warmup=0 if quick else 1)
        if log:
            print(f"  [hvp {name} done]", file=log, flush=True)
    return res


def render(res):
    lines = [f"Hessian-vector product of a tanh MLP cross-entropy loss, float32; ms per HVP: "
             f"median (min) wall, medians otherwise; floor checked against finite differences: "
             f"{res['floor_check']}"]
    head = ["config", "system", "wall ms", "cpu ms", "fwd", "grad", "hvp", "/numpy cpu",
            "/torch cpu", "/hips cpu", "H v check"]
    rows = []
    for name, r in res["configs"].items():
        libs = r["libs"]
        desc = f"{name}: batch {r['batch']}, {'-'.join(map(str, r['sizes']))}"
        for lname in ("cgrad", "numpy", "torch", "hips"):
            d = libs.get(lname)
            if d is None:
                continue
            if "error" in d:
                rows.append([desc, lname, "ERROR: " + d["error"]] + [""] * 8)
                desc = ""
                continue

            def f(p, d=d):
                return f"{d[p]['median']:.3f}" if p in d else "-"

            def q(other, d=d):
                o = libs.get(other)
                if o is None or "cpu" not in o or other == lname:
                    return "-"
                return f"{d['cpu']['median'] / o['cpu']['median']:.2f}x"
            tot = f"{d['total']['median']:.3f} ({d['total']['min']:.3f})"
            rows.append([desc, lname, tot, f("cpu"), f("fwd"), f("grad"), f("hvp"), q("numpy"),
                         q("torch"), q("hips"),
                         "ref" if lname == "numpy" else r["grad_check"].get(lname, "-")])
            desc = ""
    w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(x) for h, x in zip(head, w)).rstrip())
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join(v.ljust(x) for v, x in zip(row, w)).rstrip() for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run(quick="--quick" in sys.argv, log=sys.stderr)))
