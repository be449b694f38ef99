"""Transformer building blocks, forward + backward, cgrad against torch on one thread:
GELU (erf and tanh), softmax, log_softmax, cross_entropy, layer_norm,
scaled_dot_product_attention (causal), nanoGPT's manual attention and Linear on (B, T, C),
float32, at the shapes of nanoGPT-tiny (B=16, T=32, C=64, 2 heads, vocab 65) and the makemore
transformer (B=32, T=16, C=64, 4 heads, vocab 27).

    python bench/blocks.py [--reps 21] [--only NAME]

Each case runs cgrad and torch alternately (interleaved, after a warm-up); prints the median
time of each in microseconds and the ratio cgrad / torch.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402
import cgrad.nn.functional  # noqa: E402,F401

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:             # cgrad's side alone
    torch = None

CONFIGS = {"nanogpt": dict(B=16, T=32, C=64, H=2, V=65),
           "makemore": dict(B=32, T=16, C=64, H=4, V=27)}


def _leaf(m, a):
    return m.tensor(a, requires_grad=True)


def _cases(m, cfg, rng_seed=0):
    """(name, callable) pairs for library m; each callable runs forward + backward once."""
    F = m.nn.functional
    B, T, C, H, V = cfg["B"], cfg["T"], cfg["C"], cfg["H"], cfg["V"]
    rng = np.random.default_rng(rng_seed)
    f32 = np.float32
    x = _leaf(m, rng.standard_normal((B, T, C)).astype(f32))
    h4 = _leaf(m, rng.standard_normal((B, T, 4 * C)).astype(f32))
    logits = _leaf(m, rng.standard_normal((B * T, V)).astype(f32))
    att = _leaf(m, rng.standard_normal((B, H, T, T)).astype(f32))
    tgt = m.tensor(rng.integers(0, V, B * T))
    w = _leaf(m, np.ones(C, f32))
    b = _leaf(m, np.zeros(C, f32))
    W = _leaf(m, (rng.standard_normal((4 * C, C)) / 8).astype(f32))
    Wb = _leaf(m, np.zeros(4 * C, f32))
    hd = C // H
    q, k, v = (_leaf(m, rng.standard_normal((B, H, T, hd)).astype(f32)) for _ in range(3))
    tril = m.tensor(np.tril(np.ones((T, T), f32)))

    def manual():
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        a = a.masked_fill(tril[:T, :T] == 0, float("-inf"))
        a = F.softmax(a, dim=-1)
        (a @ v).sum().backward()

    return [
        ("gelu", lambda: F.gelu(h4).sum().backward()),
        ("gelu_tanh", lambda: F.gelu(h4, approximate="tanh").sum().backward()),
        ("softmax", lambda: (F.softmax(att, dim=-1) * att).sum().backward()),
        ("log_softmax", lambda: (F.log_softmax(logits, dim=-1) * logits).sum().backward()),
        ("cross_entropy", lambda: F.cross_entropy(logits, tgt).backward()),
        ("cross_entropy_ls", lambda: F.cross_entropy(logits, tgt, label_smoothing=0.1)
         .backward()),
        ("layer_norm", lambda: (F.layer_norm(x, (C,), w, b) * x).sum().backward()),
        ("linear3d", lambda: F.linear(x, W, Wb).sum().backward()),
        ("sdpa_causal", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
         .sum().backward()),
        ("manual_attn", manual),
    ]


def _time(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--only", default=None, help="run only cases whose name contains this")
    a = p.parse_args(argv)
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else '-'}, "
          f"one thread, float32, median of {a.reps} interleaved runs (us)")
    print(f"{'config':9s} {'case':17s} {'cgrad':>9s} {'torch':>9s} {'ratio':>6s}")
    for cname, cfg in CONFIGS.items():
        cg = _cases(cgrad, cfg)
        th = _cases(torch, cfg) if torch else [(n, None) for n, _ in cg]
        for (name, fc), (_, ft) in zip(cg, th):
            if a.only and a.only not in name:
                continue
            for _ in range(3):
                fc()
                if ft:
                    ft()
            tc, tt = [], []
            for _ in range(a.reps):
                tc.append(_time(fc))
                if ft:
                    tt.append(_time(ft))
            mc = statistics.median(tc) * 1e6
            mt = statistics.median(tt) * 1e6 if tt else float("nan")
            print(f"{cname:9s} {name:17s} {mc:9.1f} {mt:9.1f} {mc / mt:6.2f}", flush=True)


if __name__ == "__main__":
    main()
