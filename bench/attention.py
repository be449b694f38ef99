"""Attention time: nn.MultiheadAttention forward + backward (self-attention, with and
without returning the weights) and nn.TransformerEncoderLayer forward + backward, cgrad
against torch on one thread (float32, torch's weights copied into cgrad's modules).

    python bench/attention.py [--batch 16] [--seq 32] [--embed 64] [--heads 4] [--reps 11]

Prints the median of each (interleaved repetitions, after a warm-up) and the ratio
cgrad / torch.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:             # cgrad's side alone
    torch = None


def _modules(m, a):
    mha = m.nn.MultiheadAttention(a.embed, a.heads, batch_first=True)
    enc = m.nn.TransformerEncoderLayer(a.embed, a.heads, dim_feedforward=4 * a.embed,
                                       dropout=0.0, batch_first=True)
    return mha, enc


def _cases(m, x, mha, enc):
    """(name, callable) pairs for library m: each runs forward + backward once."""
    def mha_step(need_weights):
        def step():
            xt = m.tensor(x, requires_grad=True)
            mha.zero_grad()
            mha(xt, xt, xt, need_weights=need_weights)[0].sum().backward()
            return xt.grad
        return step

    def enc_step():
        xt = m.tensor(x, requires_grad=True)
        enc.zero_grad()
        enc(xt).sum().backward()
        return xt.grad
    return [("MultiheadAttention fwd+bwd", mha_step(True)),
            ("MHA need_weights=False fwd+bwd", mha_step(False)),
            ("TransformerEncoderLayer fwd+bwd", enc_step)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--reps", type=int, default=11)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, a.seq, a.embed)).astype(np.float32)
    cm = _modules(cgrad, a)
    libs = {}
    if torch is not None:
        torch.manual_seed(0)
        tm = _modules(torch, a)
        for c, t in zip(cm, tm):
            c.load_state_dict({k: cgrad.tensor(v.detach().numpy())
                               for k, v in t.state_dict().items()})
        libs["torch"] = _cases(torch, x, *tm)
    libs = {"cgrad": _cases(cgrad, x, *cm), **libs}
    print(f"batch {a.batch}, seq {a.seq}, embed {a.embed}, {a.heads} heads, float32, "
          f"one thread; median of {a.reps}")
    for i, (name, _) in enumerate(libs["cgrad"]):
        grads = {lib: np.asarray(cases[i][1]().detach().numpy()) for lib, cases in libs.items()}
        if "torch" in grads:
            np.testing.assert_allclose(grads["cgrad"], grads["torch"], rtol=1e-3, atol=1e-4)
        times = {lib: [] for lib in libs}
        for _ in range(a.reps):
            for lib, cases in libs.items():       # interleaved
                t0 = time.perf_counter()
                cases[i][1]()
                times[lib].append(time.perf_counter() - t0)
        med = {lib: statistics.median(t) * 1e3 for lib, t in times.items()}
        line = f"{name:32s} cgrad {med['cgrad']:8.2f} ms"
        if "torch" in med:
            line += f"   torch {med['torch']:8.2f} ms   ratio {med['cgrad'] / med['torch']:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
