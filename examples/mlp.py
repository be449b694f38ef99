"""Train a 2-layer MLP with Adam on scikit-learn's handwritten digits (8x8 images, 10 classes).

    pip install ".[examples]" && python examples/mlp.py

The code is what you would write with torch.nn and torch.optim, with `torch` replaced by
`cgrad`. The digits ship with scikit-learn (no download). Expect about 97 % test accuracy
after 30 epochs, in a couple of seconds.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import cgrad
import cgrad.nn as nn
import cgrad.nn.functional as F


class MLP(nn.Module):
    def __init__(self, n_in, n_hidden, n_out, p_drop=0.1):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_out)
        self.drop = nn.Dropout(p_drop)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def load_digits(seed):
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        sys.exit("examples/mlp.py needs scikit-learn for its dataset: "
                 "pip install \".[examples]\"  (or: pip install scikit-learn)")
    d = sk_load()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = perm[:n_test], perm[n_test:]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-3
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def accuracy(model, x, y):
    model.eval()
    with cgrad.no_grad():
        pred = model(cgrad.from_numpy(x)).argmax(dim=1).numpy()
    model.train()
    return float((pred == y).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    cgrad.manual_seed(args.seed)
    xtr, ytr, xte, yte = load_digits(args.seed)
    model = MLP(xtr.shape[1], args.hidden, 10)
    opt = cgrad.optim.Adam(model.parameters(), lr=args.lr)
    print(model)
    print(f"train {len(xtr)}, test {len(xte)} images; {args.epochs} epochs")
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        perm = rng.permutation(len(xtr))
        total = 0.0
        for s in range(0, len(xtr), args.batch_size):
            idx = perm[s:s + args.batch_size]
            xb, yb = cgrad.from_numpy(xtr[idx]), cgrad.from_numpy(ytr[idx])
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        print(f"epoch {epoch:3d}  loss {total / len(xtr):.4f}  "
              f"train acc {accuracy(model, xtr, ytr):.4f}  test acc "
              f"{accuracy(model, xte, yte):.4f}")
    acc = accuracy(model, xte, yte)
    print(f"test accuracy {acc:.4f} ({time.perf_counter() - t0:.1f} s)")
    return acc


if __name__ == "__main__":
    main()
