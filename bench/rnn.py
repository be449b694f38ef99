"""LSTM forward+backward: cgrad against torch on one thread.

2-layer LSTM, input 64, hidden 128, sequence 32, batch 16, float32; the median of several
runs of forward + backward of sum(output). Run: ``OPENBLAS_NUM_THREADS=1 python bench/rnn.py``.
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


def _median(fn, reps):
    fn()                                       # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(reps=7):
    x = np.random.default_rng(0).standard_normal((T, B, I)).astype(np.float32)
    cm = nn.LSTM(I, H, num_layers=L)
    cx = cgrad.tensor(x, requires_grad=True)

    def run_cgrad():
        out, _ = cm(cx)
        out.sum().backward()

    t_cgrad = _median(run_cgrad, reps)
    print(f"cgrad LSTM fwd+bwd (T={T}, B={B}, I={I}, H={H}, layers={L}): "
          f"{t_cgrad * 1e3:.2f} ms")
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    tm = torch.nn.LSTM(I, H, num_layers=L)
    cm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    tx = torch.tensor(x, requires_grad=True)

    def run_torch():
        out, _ = tm(tx)
        out.sum().backward()

    t_torch = _median(run_torch, reps)
    print(f"torch LSTM fwd+bwd: {t_torch * 1e3:.2f} ms; cgrad / torch = "
          f"{t_cgrad / t_torch:.2f}")


if __name__ == "__main__":
    main()
