"""LSTM forward+backward: cgrad against torch on one thread.

2-layer LSTM, input 64, hidden 128, sequence 32, batch 16, float32; the median of several
runs of forward + backward of sum(output), cgrad and torch interleaved (the machine is shared,
so interleaving keeps the ratio fair). Run: ``OPENBLAS_NUM_THREADS=1 python bench/rnn.py``.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402
import cgrad.nn as nn  # noqa: E402

T, B, I, H, L = 32, 16, 64, 128, 2


def main(reps=15):
    x = np.random.default_rng(0).standard_normal((T, B, I)).astype(np.float32)
    cm = nn.LSTM(I, H, num_layers=L)
    cx = cgrad.tensor(x, requires_grad=True)

    def run_cgrad():
        out, _ = cm(cx)
        out.sum().backward()

    runs = {"cgrad": run_cgrad}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        tm = torch.nn.LSTM(I, H, num_layers=L)
        cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
        tx = torch.tensor(x, requires_grad=True)

        def run_torch():
            out, _ = tm(tx)
            out.sum().backward()

        runs["torch"] = run_torch
    times = {k: [] for k in runs}
    for fn in runs.values():                   # warm-up
        fn()
    for _ in range(reps):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"cgrad LSTM fwd+bwd (T={T}, B={B}, I={I}, H={H}, layers={L}): "
          f"{med['cgrad'] * 1e3:.2f} ms (median of {reps})")
    if "torch" in med:
        print(f"torch LSTM fwd+bwd: {med['torch'] * 1e3:.2f} ms; cgrad / torch = "
              f"{med['cgrad'] / med['torch']:.2f}")


if __name__ == "__main__":
    main()
