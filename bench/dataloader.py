"""DataLoader overhead: one epoch over a TensorDataset of 10,000 x 32 float32 rows (and, as a
second case, the rows with int64 labels), batch_size 64, in the main process
(num_workers=0), sequential and shuffled, cgrad against torch (one thread).

The epoch is the whole cost of loading: per batch, 64 ``dataset[i]`` calls (a tuple of row
views), then ``default_collate`` (a stack per tensor), plus the sampler's order. Prints the
median epoch time of each system over interleaved repeats, per batch, and the ratio
cgrad / torch.

    python bench/dataloader.py [--repeats N]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import load_cgrad, load_torch, perf_counter, settle  # noqa: E402

ROWS, COLS, BATCH = 10_000, 32, 64


def epoch_runner(lib, labels, shuffle):
    data = lib.utils.data
    g = lib.Generator().manual_seed(0)
    x = lib.randn(ROWS, COLS, generator=g)
    tensors = (x, lib.arange(ROWS)) if labels else (x,)
    loader = data.DataLoader(data.TensorDataset(*tensors), batch_size=BATCH, shuffle=shuffle)

    def run():
        t0 = perf_counter()
        n = 0
        for batch in loader:
            n += batch[0].shape[0]
        assert n == ROWS
        return perf_counter() - t0
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    systems = {"cgrad": load_cgrad(), "torch": load_torch()}
    systems = {k: v for k, v in systems.items() if v is not None}
    if "torch" in systems:
        import torch.utils.data  # noqa: F401
    batches = -(-ROWS // BATCH)
    print(f"DataLoader epoch: TensorDataset {ROWS} x {COLS} float32, batch_size {BATCH} "
          f"({batches} batches), num_workers=0; median of {args.repeats} interleaved runs")
    print(f"{'case':<28}{'cgrad ms':>10}{'torch ms':>10}{'cgrad us/batch':>16}"
          f"{'torch us/batch':>16}{'ratio':>8}")
    for labels in (False, True):
        for shuffle in (False, True):
            runners = {k: epoch_runner(m, labels, shuffle) for k, m in systems.items()}
            times = {k: [] for k in runners}
            for r in range(args.repeats + 1):              # the first round warms up
                order = list(runners)[r % len(runners):] + list(runners)[:r % len(runners)]
                for k in order:
                    settle()
                    t = runners[k]()
                    if r:
                        times[k].append(t)
            med = {k: statistics.median(v) for k, v in times.items()}
            name = ("x, y" if labels else "x") + (", shuffled" if shuffle else ", sequential")
            row = f"{name:<28}"
            row += "".join(f"{med.get(k, float('nan')) * 1e3:>10.2f}" for k in ("cgrad", "torch"))
            row += "".join(f"{med.get(k, float('nan')) / batches * 1e6:>16.1f}"
                           for k in ("cgrad", "torch"))
            ratio = med["cgrad"] / med["torch"] if "torch" in med else float("nan")
            print(row + f"{ratio:>8.2f}")


if __name__ == "__main__":
    main()
