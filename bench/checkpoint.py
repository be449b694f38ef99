"""Checkpoint save/load time: a ~100 MB float32 state dict written and read by cgrad.save /
cgrad.load and by torch.save / torch.load(weights_only=True), in torch's zip format, to a file
in a temporary folder (the page cache, not the disk, is what is measured).

    python bench/checkpoint.py [--mb 100] [--reps 7]

Prints the median of each (interleaved repetitions), and the ratio cgrad / torch. Also
times cgrad.load(mmap=True) and the cross loads (torch.load of cgrad's file, cgrad.load of
torch's), which read the same bytes.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cgrad  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:             # cgrad's side alone
    torch = None


def state_dict(mb):
    """A state dict like a small transformer's: big matrices, vectors, an int64 counter."""
    rng = np.random.default_rng(0)
    sd, total, i = {}, 0, 0
    while total < mb * 2 ** 20:
        w = rng.standard_normal((1024, 1024), dtype=np.float32)
        sd[f"layer{i}.weight"] = w
        sd[f"layer{i}.bias"] = rng.standard_normal(1024, dtype=np.float32)
        sd[f"layer{i}.norm.num_batches_tracked"] = np.array(i, dtype=np.int64)
        total += w.nbytes + 4096 + 8
        i += 1
    return sd


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    arrays = state_dict(args.mb)
    csd = {k: cgrad.tensor(v) for k, v in arrays.items()}
    tsd = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()} if torch else None
    size = sum(v.nbytes for v in arrays.values()) / 2 ** 20
    with tempfile.TemporaryDirectory() as d:
        cpath, tpath = os.path.join(d, "c.pt"), os.path.join(d, "t.pt")
        cases = {"cgrad.save": lambda: cgrad.save(csd, cpath),
                 "cgrad.load": lambda: cgrad.load(cpath),
                 "cgrad.load(mmap=True)": lambda: cgrad.load(cpath, mmap=True)}
        if torch:
            cases.update({
                "torch.save": lambda: torch.save(tsd, tpath),
                "torch.load": lambda: torch.load(tpath, weights_only=True),
                "torch.load(mmap=True)": lambda: torch.load(tpath, weights_only=True,
                                                            mmap=True),
                "cgrad.load of torch's file": lambda: cgrad.load(tpath),
                "torch.load of cgrad's file": lambda: torch.load(cpath, weights_only=True)})
        for fn in cases.values():             # warm-up: files exist, pages cached
            fn()
        times = {k: [] for k in cases}
        for _ in range(args.reps):
            for k, fn in cases.items():
                times[k].append(timed(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"state dict: {len(arrays)} tensors, {size:.1f} MB float32; file "
              f"{os.path.getsize(cpath) / 2 ** 20:.1f} MB; median of {args.reps}")
        for k, v in med.items():
            print(f"  {k:30s} {v * 1e3:8.1f} ms  {size / v:8.0f} MB/s")
        if torch:
            for op in ("save", "load", "load(mmap=True)"):
                print(f"  ratio cgrad/torch {op:17s} {med['cgrad.' + op] / med['torch.' + op]:.2f}")


if __name__ == "__main__":
    main()
