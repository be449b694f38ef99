"""Train the MLP of examples/mlp.py data-parallel over MPI processes with
DistributedDataParallel (cgrad.nn.parallel) and DistributedSampler.

    apt-get install openmpi-bin libopenmpi-dev && pip install ".[distributed,examples]"
    mpirun -n 4 python examples/ddp_train.py                     # 4 processes, this machine
    mpirun -n 8 --hostfile hosts python examples/ddp_train.py    # across the machines listed

Every rank holds the whole model, draws its own shard of each epoch's shuffled training set
(DistributedSampler), and backward averages the gradients over the ranks (overlapped
bucketed all-reduce), so the ranks stay in step: the effective batch is ``--batch-size`` x
the number of ranks. Each rank prints its throughput; rank 0 prints the final loss and
the test accuracy. Without scikit-learn (the digits) it trains on a synthetic set.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

import cgrad
import cgrad.distributed as dist
import cgrad.nn.functional as F
from cgrad.nn.parallel import DistributedDataParallel as DDP
from cgrad.utils.data import DataLoader, TensorDataset
from cgrad.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp import MLP, accuracy, load_digits  # noqa: E402


def synthetic(seed, n=1500, d=64, k=10):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 2
    y = rng.integers(0, k, n)
    x = (centres[y] + rng.standard_normal((n, d))).astype(np.float32)
    cut = n // 5
    return x[cut:], y[cut:], x[:cut], y[:cut]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if importlib.util.find_spec("sklearn") is not None:
        xtr, ytr, xte, yte = load_digits(args.seed)
    else:
        if rank == 0:
            print("scikit-learn not installed: training on a synthetic set")
        xtr, ytr, xte, yte = synthetic(args.seed)

    cgrad.manual_seed(args.seed + rank)      # DDP broadcasts rank 0's weights anyway
    model = DDP(MLP(xtr.shape[1], args.hidden, 10))
    opt = cgrad.optim.Adam(model.parameters(), lr=args.lr)
    data = TensorDataset(cgrad.from_numpy(xtr), cgrad.from_numpy(ytr))
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    seen, t0 = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
            count += len(yb)
            seen += len(yb)
    elapsed = time.perf_counter() - t0
    # the epoch's mean loss over every rank's samples
    stats = cgrad.tensor([total, float(count)], dtype=cgrad.float64)
    dist.all_reduce(stats)
    rates = [None] * world
    dist.all_gather_object(rates, seen / elapsed)
    print(f"rank {rank}/{world}: {seen} samples in {elapsed:.2f} s, "
          f"{seen / elapsed:,.0f} samples/s", flush=True)
    dist.barrier()
    if rank == 0:
        acc = accuracy(model.module, xte, yte)
        print(f"{world} ranks, {sum(rates):,.0f} samples/s in all; final loss "
              f"{stats[0].item() / stats[1].item():.4f}, test accuracy {acc:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
