"""Embedding backward (the weight gradient's scatter-add) at the models' sizes: cgrad against
torch on one thread, and against the kernel it replaced (2-D np.add.at into zeros).

Cases: makemore MLP (vocab 28, indices (32, 16), dim 64), nanoGPT-tiny's wte (65 x 64 at
(16, 32)) and wpe (32 x 64 at arange(32)), and a larger table (1000 x 128 at (64, 128)).
Timed: forward + backward of ``(embedding(idx, w) * g).sum()`` for cgrad and torch, and the
scatter-add alone (old: np.add.at, new: cgrad.ops.indexing.accumulate_along), interleaved,
medians of 15 rounds. Run: ``python bench/embedding.py``.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402
import cgrad.nn.functional as F  # noqa: E402
from cgrad.ops.indexing import accumulate_along  # noqa: E402

CASES = [("makemore-mlp", 28, (32, 16), 64), ("nanogpt-wte", 65, (16, 32), 64),
         ("nanogpt-wpe", 32, (32,), 64), ("large", 1000, (64, 128), 128)]


def _time(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def main(rounds=15, inner=20, dtypes=(np.float32, np.float64)):
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"{'case':14} {'dtype':8} {'old add.at':>11} {'new':>8} {'old/new':>8} "
          f"{'cgrad f+b':>10} {'torch f+b':>10} {'cgrad/torch':>11}   (us, medians)")
    for name, V, shape, D in CASES:
        for dt in dtypes:
            idx = np.arange(shape[0]) if name.endswith("wpe") else rng.integers(0, V, shape)
            w = rng.standard_normal((V, D)).astype(dt)
            g = rng.standard_normal(idx.shape + (D,)).astype(dt)
            flat, G2 = idx.reshape(-1), g.reshape(-1, D)

            def old():
                out = np.zeros((V, D), dt)
                np.add.at(out, flat, G2)
                return out

            def new():
                return accumulate_along(np.zeros((V, D), dt), 0, flat, G2)

            assert np.array_equal(old(), new())
            cw, ci, cg = cgrad.tensor(w, requires_grad=True), cgrad.tensor(idx), cgrad.tensor(g)

            def run_cgrad():
                cw.grad = None
                (F.embedding(ci, cw) * cg).sum().backward()

            fns = {"old": old, "new": new, "cgrad": run_cgrad}
            if torch is not None:
                tw = torch.tensor(w, requires_grad=True)
                ti, tg = torch.tensor(idx), torch.tensor(g)

                def run_torch():
                    tw.grad = None
                    (torch.nn.functional.embedding(ti, tw) * tg).sum().backward()

                fns["torch"] = run_torch
                run_cgrad()
                run_torch()
                assert np.array_equal(cw.grad.numpy(), tw.grad.numpy())
            times = {k: [] for k in fns}
            for r in range(rounds + 1):
                order = list(fns)
                order = order[r % len(order):] + order[:r % len(order)]
                for k in order:
                    t = _time(fns[k], inner)
                    if r:
                        times[k].append(t)
            med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            tt = med.get("torch", float("nan"))
            print(f"{name:14} {dt.__name__:8} {med['old']:11.1f} {med['new']:8.1f} "
                  f"{med['old'] / med['new']:8.2f} {med['cgrad']:10.1f} {tt:10.1f} "
                  f"{med['cgrad'] / tt:11.2f}")


if __name__ == "__main__":
    main()
