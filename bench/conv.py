"""Convolution and pooling time: nn.Conv2d forward + backward, nn.MaxPool2d forward +
backward and nn.ConvTranspose2d (stride 2, the upsampling of a decoder) forward + backward,
cgrad against torch on one thread (float32, the same weights and inputs).

    python bench/conv.py [--batch 32] [--cin 16] [--cout 32] [--size 28] [--reps 11]

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


def _cases(m, x, w, b):
    """(name, callable) pairs for library m: each runs forward + backward once."""
    conv = m.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], padding=1)
    conv.weight.data = m.tensor(w)
    conv.bias.data = m.tensor(b)
    pool = m.nn.MaxPool2d(2)
    # the adjoint shape: cout -> cin channels, doubling the size (weight (cin, cout, 4, 4))
    convt = m.nn.ConvTranspose2d(w.shape[1], w.shape[0], 4, stride=2, padding=1)
    convt.weight.data = m.tensor(np.ascontiguousarray(
        np.tile(w, (1, 1, 2, 2))[:, :, :4, :4].transpose(1, 0, 2, 3)))
    convt.bias.data = m.tensor(b)

    def conv_step():
        xt = m.tensor(x, requires_grad=True)
        conv.zero_grad()
        conv(xt).sum().backward()
        return xt.grad

    def pool_step():
        xt = m.tensor(x, requires_grad=True)
        pool(xt).sum().backward()
        return xt.grad

    def both_step():
        xt = m.tensor(x, requires_grad=True)
        conv.zero_grad()
        pool(m.nn.functional.relu(conv(xt))).sum().backward()
        return xt.grad
    def convt_step():
        xt = m.tensor(x, requires_grad=True)
        convt.zero_grad()
        convt(xt).sum().backward()
        return xt.grad
    return [("Conv2d 3x3 fwd+bwd", conv_step), ("MaxPool2d 2 fwd+bwd", pool_step),
            ("Conv2d+ReLU+MaxPool2d fwd+bwd", both_step),
            ("ConvTranspose2d 4x4/2 fwd+bwd", convt_step)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cin", type=int, default=16)
    ap.add_argument("--cout", type=int, default=32)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--reps", type=int, default=11)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch, a.cin, a.size, a.size)).astype(np.float32)
    w = (rng.standard_normal((a.cout, a.cin, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(a.cout).astype(np.float32)
    libs = {"cgrad": _cases(cgrad, x, w, b)}
    if torch is not None:
        libs["torch"] = _cases(torch, x, w, b)
    print(f"batch {a.batch}, {a.cin} -> {a.cout} channels, {a.size}x{a.size}, float32, "
          f"one thread; median of {a.reps}")
    for i, (name, _) in enumerate(libs["cgrad"]):
        grads = {lib: np.asarray(cases[i][1]().detach().numpy()) for lib, cases in libs.items()}
        if "torch" in grads:
            np.testing.assert_allclose(grads["cgrad"], grads["torch"], rtol=1e-4, atol=1e-4)
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
