"""Workload 5's HIPS autograd column: the MLP training step of bench/mlp.py in HIPS autograd.

bench/mlp.py measures cgrad, the NumPy floor and torch (and peak memory). This module adds
HIPS autograd on the same problem (``mlp.make_problem``: same data, same initial parameters)
and times it interleaved with cgrad's and the floor's steps from bench/mlp.py, so the
cgrad/HIPS ratio comes from one interleaved loop. The HIPS step: ``vjp, loss =
make_vjp(loss_fn)(params)`` (the traced forward), ``grads = vjp(1)`` (backward), then the
plain SGD update ``p -= lr * g`` in place on the parameter arrays (HIPS is functional: the
parameters are plain ndarrays). Cross-entropy as ``logits - logsumexp(logits)`` picked at the
labels, mean over the batch. Gradients are checked against the floor's before timing.
"""

import numpy as np

from common import check_all, cpu_time, err_text, interleaved, perf_counter, settle, stats


def make_hips_step(ag, X, y, params, lr):
    anp = ag.np
    ps = [p.copy() for p in params]
    L = len(ps) // 2
    rows = np.arange(X.shape[0])

    def loss_fn(ps):
        h = X
        for i in range(L):
            h = anp.dot(h, ps[2 * i].T) + ps[2 * i + 1]
            if i < L - 1:
                h = anp.tanh(h)
        logp = h - ag.logsumexp(h, axis=1, keepdims=True)
        return -anp.mean(logp[rows, y])

    make_vjp = ag.make_vjp(loss_fn)

    def step():
        c0, t0 = cpu_time(), perf_counter()
        vjp, loss = make_vjp(ps)
        t1 = perf_counter()
        gs = vjp(np.ones_like(loss))
        t2 = perf_counter()
        for p, g in zip(ps, gs):
            g *= lr
            p -= g
        del gs
        t3, c3 = perf_counter(), cpu_time()
        return {"fwd": t1 - t0, "bwd": t2 - t1, "update": t3 - t2, "total": t3 - t0,
                "cpu": c3 - c0}, loss

    def grads():
        vjp, loss = make_vjp(ps)
        return float(loss), [np.array(g, copy=True) for g in vjp(np.ones_like(loss))]

    return step, grads


def run(mlp, libs, hips, quick=False, dtypes=("float32", "float64"), repeats=None, log=None):
    """mlp: the bench/mlp.py module; libs: {'cgrad': module, 'numpy': np} (the systems timed
    with HIPS). -> {dtype: {'libs': {name: {phase: stats in ms}}, 'grad_check': ...}}"""
    cfg = mlp.QUICK if quick else mlp.FULL
    repeats = repeats or (1 if quick else cfg["repeats"])
    out = {"config": {"batch": cfg["batch"], "sizes": list(cfg["sizes"]), "repeats": repeats,
                      "hips": hips.version}, "dtypes": {}}
    for dt in dtypes:
        X, y, params = mlp.make_problem(dt, cfg["batch"], cfg["sizes"])
        steps, grads, errors = {}, {}, {}
        makers = {name: (lambda m=mod, n=name: mlp.make_step(n, m, X, y, params))
                  for name, mod in libs.items()}
        makers["hips"] = lambda: make_hips_step(hips, X, y, params, mlp.LR)
        for name, mk in makers.items():
            try:
                step, g = mk()
                grads[name] = g()
                steps[name] = step
            except Exception as e:
                errors[name] = err_text(e)
        gcheck = {}
        if "numpy" in grads:
            ref = grads["numpy"]
            rtol = 1e-3 if dt == "float32" else 1e-9
            gcheck = check_all({k: v[1] for k, v in grads.items()}, "numpy", rtol)
            for k, (loss, _) in grads.items():
                if not np.isclose(loss, ref[0], rtol=rtol):
                    gcheck[k] = f"loss {loss} != numpy {ref[0]}"
        samples, errs = interleaved(steps, repeats, warmup=0 if quick else 1, before=settle)
        errors.update(errs)
        r = {"libs": {n: {p: stats(v, 1e3) for p, v in ss.items()} for n, ss in samples.items()},
             "grad_check": gcheck}
        for n, e in errors.items():
            r["libs"][n] = {"error": e}
        out["dtypes"][dt] = r
        if log:
            print(f"  [mlp hips {dt} done]", file=log, flush=True)
    return out


def render(res):
    c = res["config"]
    lines = [f"MLP training step in HIPS autograd {c['hips']} (batch {c['batch']}, "
             f"{'-'.join(map(str, c['sizes']))}), interleaved with cgrad and the NumPy floor; "
             f"{c['repeats']} steps each; ms median (min)"]
    head = ["dtype", "system", "wall ms", "cpu ms", "fwd", "bwd", "update", "cgrad/hips cpu",
            "hips/numpy cpu", "grads"]
    rows = []
    for dt, r in res["dtypes"].items():
        libs = r["libs"]
        for name in ("cgrad", "numpy", "hips"):
            d = libs.get(name)
            if d is None:
                continue
            if "error" in d:
                rows.append([dt, name, "ERROR " + d["error"]] + [""] * 7)
                continue
            h, n = libs.get("hips", {}), libs.get("numpy", {})

            def q(a, b):
                return (f"{a['cpu']['median'] / b['cpu']['median']:.3f}x"
                        if "cpu" in a and "cpu" in b else "-")
            rows.append([dt, name, f"{d['total']['median']:.2f} ({d['total']['min']:.2f})",
                         f"{d['cpu']['median']:.2f}", f"{d['fwd']['median']:.2f}",
                         f"{d['bwd']['median']:.2f}", f"{d['update']['median']:.2f}",
                         q(d, h) if name == "cgrad" else "",
                         q(d, n) if name == "hips" else "",
                         "ref" if name == "numpy" else r["grad_check"].get(name, "-")])
    w = [max(len(hh), *(len(x[i]) for x in rows)) for i, hh in enumerate(head)]
    lines.append("  ".join(hh.ljust(x) for hh, x in zip(head, w)).rstrip())
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join(v.ljust(x) for v, x in zip(row, w)).rstrip() for row in rows]
    return "\n".join(lines)
