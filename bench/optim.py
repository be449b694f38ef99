"""Optimizer step time: cgrad's Adam / AdamW (and SGD with momentum) against torch's default
on one thread, in the same process, interleaved.

Parameter lists: nanoGPT-tiny's (28 tensors of 64 to 64 x 256 elements: wte 65 x 64, wpe
32 x 64, two blocks of LayerNorms, c_attn 64 x 192, c_proj 64 x 64, c_fc 64 x 256,
c_proj 256 x 64 with biases, ln_f) and a 784-1024-1024-10 MLP's (6 tensors, 1.86M
elements), float32 and float64, fixed gradients. cgrad runs its default path (flat state for
small tensors, blocked updates for large ones) and ``foreach=False`` (tensor by tensor:
Note [Flat state] in cgrad/optim/adam.py); torch runs its default (on the CPU the
single-tensor path) and ``foreach=True``. Median (and minimum) of the per-step time over
rounds, every system's steps of one round back to back, the order rotating.
Run: ``python bench/optim.py [--rounds N]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402
import cgrad.optim  # noqa: E402

_BLOCK = [(64,), (64,), (64, 192), (192,), (64, 64), (64,), (64,), (64,), (64, 256), (256,),
          (256, 64), (64,)]
GPT = [(65, 64), (32, 64)] + _BLOCK * 2 + [(64,), (64,)]
MLP = [(1024, 784), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)]
OPTS = [("Adam", dict(lr=1e-3)), ("AdamW", dict(lr=1e-3, weight_decay=0.1)),
        ("SGD", dict(lr=1e-3, momentum=0.9))]


def _params(mod, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for s in shapes:
        p = mod.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
        p.grad = mod.tensor(rng.standard_normal(s).astype(dtype))
        ps.append(p)
    return ps


def main(rounds=15):
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    print(f"{'params':6} {'dtype':8} {'optimizer':9} {'cgrad':>9} {'cgrad 1x1':>10} "
          f"{'torch':>9} {'torch fe':>9} {'cgrad/torch':>11} {'1x1/torch':>10}"
          "   (us per step, medians; min in brackets for cgrad, torch)")
    for pname, shapes in (("gpt", GPT), ("mlp", MLP)):
        inner = 20 if pname == "gpt" else 2
        for dt in (np.float32, np.float64):
            for oname, kw in OPTS:
                systems = {
                    "cgrad": getattr(cgrad.optim, oname)(_params(cgrad, shapes, dt), **kw),
                    "cgrad 1x1": getattr(cgrad.optim, oname)(_params(cgrad, shapes, dt),
                                                             foreach=False, **kw)}
                if torch is not None:
                    systems["torch"] = getattr(torch.optim, oname)(_params(torch, shapes, dt),
                                                                   **kw)
                    systems["torch fe"] = getattr(torch.optim, oname)(
                        _params(torch, shapes, dt), foreach=True, **kw)
                times = {k: [] for k in systems}
                names = list(systems)
                for r in range(rounds + 1):
                    k0 = r % len(names)
                    for k in names[k0:] + names[:k0]:
                        opt = systems[k]
                        t0 = time.perf_counter()
                        for _ in range(inner):
                            opt.step()
                        if r:
                            times[k].append((time.perf_counter() - t0) / inner * 1e6)
                med = {k: statistics.median(v) for k, v in times.items()}
                mn = {k: min(v) for k, v in times.items()}
                tt = med.get("torch", float("nan"))
                print(f"{pname:6} {dt.__name__:8} {oname:9} "
                      f"{med['cgrad']:9.0f} {med['cgrad 1x1']:10.0f} "
                      f"{tt:9.0f} {med.get('torch fe', float('nan')):9.0f} "
                      f"{med['cgrad'] / tt:11.2f} {med['cgrad 1x1'] / tt:10.2f}"
                      f"   [{mn['cgrad']:.0f}, {mn.get('torch', float('nan')):.0f}]")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    main(ap.parse_args().rounds)
