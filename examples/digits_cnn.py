"""Train a small CNN (Conv2d, BatchNorm2d, MaxPool2d, Dropout, Linear) on scikit-learn's 8x8
handwritten digits, with DataLoader batches and Adam.

    pip install ".[examples]" && python examples/digits_cnn.py
    python examples/digits_cnn.py --backend torch      # the same code on torch, to compare

The model code is torch.nn code: `--backend` only chooses which module `T` is. With the
defaults both reach 99.2 % test accuracy after 15 epochs (about 2 s); the script prints the
time per epoch.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time

import numpy as np


def build_model(T):
    nn = T.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * 2 * 2, 10),
    )


def load_digits(seed):
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        sys.exit("examples/digits_cnn.py needs scikit-learn for its dataset: "
                 "pip install \".[examples]\"  (or: pip install scikit-learn)")
    d = sk_load()
    x = (d.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = perm[:n_test], perm[n_test:]
    mean, std = x[train].mean(), x[train].std()
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def accuracy(T, model, x, y):
    model.eval()
    with T.no_grad():
        pred = model(T.from_numpy(x)).argmax(dim=1).numpy()
    model.train()
    return float((pred == y).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["cgrad", "torch"], default="cgrad")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    T = importlib.import_module(args.backend)
    if args.backend == "torch":
        T.set_num_threads(1)
    from_data = importlib.import_module(f"{args.backend}.utils.data")
    T.manual_seed(args.seed)
    xtr, ytr, xte, yte = load_digits(args.seed)
    model = build_model(T)
    opt = T.optim.Adam(model.parameters(), lr=args.lr)
    loader = from_data.DataLoader(
        from_data.TensorDataset(T.from_numpy(xtr), T.from_numpy(ytr)),
        batch_size=args.batch_size, shuffle=True)
    print(model)
    print(f"{args.backend}: train {len(xtr)}, test {len(xte)} images; {args.epochs} epochs")
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        te = time.perf_counter()
        total = 0.0
        for xb, yb in loader:
            loss = T.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
        dt = time.perf_counter() - te
        print(f"epoch {epoch:3d}  loss {total / len(xtr):.4f}  test acc "
              f"{accuracy(T, model, xte, yte):.4f}  {dt * 1000:.0f} ms")
    acc = accuracy(T, model, xte, yte)
    print(f"test accuracy {acc:.4f} ({time.perf_counter() - t0:.1f} s)")
    return acc


if __name__ == "__main__":
    main()
